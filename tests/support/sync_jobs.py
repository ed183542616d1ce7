"""A sync run whose driver can be killed (SIGKILL) at a chosen point, in its own process (and
JVM), for test_sync_recovery.py.

Usage: ``python tests/support/sync_jobs.py SOURCE OUTPUT [KILL_AT]``. It syncs the Delta table
SOURCE (change data feed on; key ``k``, an int column ``customer_id``, a string column
``email``) into the mirror OUTPUT once (``available-now``; p = 13, n = 3; ``email`` through its
vocabulary; invalid ids to the quarantine), printing the report as one JSON line. KILL_AT, if
given, kills the process the first time the run gets there (at a step point of
`spark_mlt.steps`, or in the mirror's commit):

* ``vocabulary``: a window's vocabulary appends are committed, nothing else of it is;
* ``counts``: a window's change of the value counts is committed, nothing after it is (a
  later run finishes that window first);
* ``quarantine``: a window's quarantine commit is made, the mirror's is not;
* ``before-commit``: the mirror's Parquet files are written, its Delta commit is not made;
* ``erasure``: after the mirror's commit, the window's vocabulary erasure is committed (a key
  was erased), and the erased values' rows of count 0 are still in the value counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import Any

import deltalake

from spark_mlt.batch import local_session
from spark_mlt.batch.mirror import sync as sync_module
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.steps import watch_steps

#: the sync every run makes
SYNC = SyncOptions(p=13, n=3, handle_invalid="quarantine", key=("k",))
COLUMNS = ["customer_id", "email"]


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _local(uri: str) -> str:
    return os.path.realpath(uri.removeprefix("file://"))


#: The step points (`spark_mlt.steps`) of a window that ``KILL_AT`` names.
_POINTS = {
    "vocabulary": "vocabularies appended",
    "counts": "counts committed",
    "erasure": "vocabulary erased",
    "quarantine": "quarantine committed",
}


def _arm(kill_at: str, output: str) -> contextlib.AbstractContextManager[None]:
    """Where the run dies: at a step point of a window (once it has one of its own: a window's
    first points may be the erasure a killed run left), or just before the mirror's Delta
    commit; returns the context that watches for it."""
    if kill_at == "before-commit":
        commit = deltalake.DeltaTable.create_write_transaction

        def die_at_the_mirror_commit(self: deltalake.DeltaTable, *args: Any, **kwargs: Any) -> Any:
            if _local(self.table_uri) == _local(output):
                _die()
            return commit(self, *args, **kwargs)

        deltalake.DeltaTable.create_write_transaction = die_at_the_mirror_commit  # type: ignore[method-assign]
        return contextlib.nullcontext()
    if kill_at not in _POINTS:
        raise SystemExit(f"unknown kill point {kill_at!r}")
    point = _POINTS[kill_at]
    window: list[str] = []

    def die_there(reached: str) -> None:
        window.append(reached)
        # the window's own: after its vocabularies (its erasure comes after its mirror's commit)
        if reached == point and (point != "vocabulary erased" or "mirror committed" in window):
            _die()

    return watch_steps(die_there)


def main(source: str, output: str, kill_at: str | None = None) -> None:
    watched = _arm(kill_at, output) if kill_at else contextlib.nullcontext()
    spark = local_session("spark-mlt-sync-fault", extra_conf={"spark.ui.enabled": "false"})
    with watched:
        report = sync_module.sync_table(spark, source, output, COLUMNS, SYNC)
    print(
        json.dumps(
            {
                "rows_out": report.rows_out,
                "rows_rejected": report.rows_rejected,
                "rows_deleted": report.rows_deleted,
                "source_version": report.source_version,
                "erased": report.erased,
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
