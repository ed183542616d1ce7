"""A sync run whose driver can be killed (SIGKILL) at a chosen point, in its own process (and
JVM), for test_sync_recovery.py.

Usage: ``python tests/support/sync_jobs.py SOURCE OUTPUT [KILL_AT]``. It syncs the Delta table
SOURCE (change data feed on; key ``k``, an int column ``customer_id``, a string column
``email``) into the mirror OUTPUT once (``available-now``; p = 13, n = 3; ``email`` through its
vocabulary; invalid ids to the quarantine), printing the report as one JSON line. KILL_AT, if
given, kills the process the first time the run gets there:

* ``vocabulary``: a window's vocabulary appends are committed, nothing else of it is;
* ``counts``: a window's change of the value counts is committed, nothing after it is (a
  later run finishes that window first);
* ``erasure``: a window's vocabulary erasure is committed (``erase_keys`` erased a key), its
  quarantine's and mirror's commits are not;
* ``quarantine``: a window's quarantine commit is made, the mirror's is not;
* ``before-commit``: the mirror's Parquet files are written, its Delta commit is not made.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import deltalake

from spark_mlt.batch import local_session
from spark_mlt.batch import sync as sync_module
from spark_mlt.batch.options import SyncOptions

#: the sync every run makes
SYNC = SyncOptions(p=13, n=3, handle_invalid="quarantine", key=("k",))
COLUMNS = ["customer_id", "email"]
#: how a quarantine commit's info names it (sync.py's ``q_info``)
_QUARANTINE_OF = "spark_mlt.quarantine_of"


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _local(uri: str) -> str:
    return os.path.realpath(uri.removeprefix("file://"))


def _arm(kill_at: str, output: str) -> None:
    names = vars(sync_module)  # the names sync.py calls its steps by: replacing one here replaces its calls
    if kill_at == "vocabulary":
        key_ids = names["key_ids"]

        def key_ids_then_die(*args: Any, **kwargs: Any) -> Any:
            key_ids(*args, **kwargs)
            _die()

        names["key_ids"] = key_ids_then_die
    elif kill_at == "counts":
        change_counts = names["change_counts"]

        def count_then_die(*args: Any, **kwargs: Any) -> Any:
            result = change_counts(*args, **kwargs)
            if not result.write.skipped:
                _die()
            return result

        names["change_counts"] = count_then_die
    elif kill_at == "erasure":
        erase_keys = names["erase_keys"]

        def erase_then_die(*args: Any, **kwargs: Any) -> int:
            erased: int = erase_keys(*args, **kwargs)
            if erased:  # a commit was made (none when no key was there)
                _die()
            return erased

        names["erase_keys"] = erase_then_die
    elif kill_at == "quarantine":
        replace_keys, write_delta = names["replace_keys"], names["write_delta"]

        def replace_then_die(*args: Any, **kwargs: Any) -> Any:
            result = replace_keys(*args, **kwargs)
            if _QUARANTINE_OF in kwargs.get("commit_info", {}):
                _die()
            return result

        def write_then_die(*args: Any, **kwargs: Any) -> Any:
            result = write_delta(*args, **kwargs)
            options = kwargs.get("options")
            if options is not None and _QUARANTINE_OF in options.commit_info:
                _die()
            return result

        names["replace_keys"] = replace_then_die
        names["write_delta"] = write_then_die
    elif kill_at == "before-commit":
        commit = deltalake.DeltaTable.create_write_transaction

        def die_at_the_mirror_commit(self: deltalake.DeltaTable, *args: Any, **kwargs: Any) -> Any:
            if _local(self.table_uri) == _local(output):
                _die()
            return commit(self, *args, **kwargs)

        deltalake.DeltaTable.create_write_transaction = die_at_the_mirror_commit  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown kill point {kill_at!r}")


def main(source: str, output: str, kill_at: str | None = None) -> None:
    if kill_at:
        _arm(kill_at, output)
    spark = local_session("spark-mlt-sync-fault", extra_conf={"spark.ui.enabled": "false"})
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
