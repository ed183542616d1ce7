"""A streaming tokenize run whose driver can be killed (SIGKILL) at a chosen point, in its
own process (and JVM), for test_stream.py.

Usage: ``python tests/support/stream_jobs.py LANDING OUTPUT CHECKPOINT [KILL_AT]``. It
tokenizes the Parquet files in LANDING (columns ``rid``, ``customer_id``, ``sku``) into
OUTPUT with an ``available-now`` stream (one file per batch; p = 13, n = 3; invalid ids to
the quarantine), printing the report as one JSON line. KILL_AT, if given, kills the process
the first time the run gets there:

* ``vocabulary``: a batch's vocabulary update is committed, its data is not;
* ``before-commit``: the batch's Parquet files are written, its Delta commit is not made;
* ``after-commit``: the batch's Delta commit is made, Spark's checkpoint does not record it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import deltalake

from spark_mlt.batch import StreamOptions, TokenizeOptions, local_session
from spark_mlt.batch.write import pipeline as pipeline_module
from spark_mlt.batch.write import stream as stream_module


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(kill_at: str, output: str) -> None:
    if kill_at == "vocabulary":
        key_ids = pipeline_module.key_ids

        def key_ids_then_die(*args: Any, **kwargs: Any) -> Any:
            key_ids(*args, **kwargs)
            _die()

        pipeline_module.key_ids = key_ids_then_die  # type: ignore[assignment]
    elif kill_at == "before-commit":
        commit = deltalake.DeltaTable.create_write_transaction

        def die_at_the_data_commit(self: deltalake.DeltaTable, *args: Any, **kwargs: Any) -> Any:
            if os.path.realpath(self.table_uri.removeprefix("file://")) == os.path.realpath(output):
                _die()
            return commit(self, *args, **kwargs)

        deltalake.DeltaTable.create_write_transaction = die_at_the_data_commit  # type: ignore[method-assign]
    elif kill_at == "after-commit":
        frame = stream_module.tokenize_frame

        def frame_then_die(*args: Any, **kwargs: Any) -> Any:
            frame(*args, **kwargs)
            _die()

        stream_module.tokenize_frame = frame_then_die  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown kill point {kill_at!r}")


def main(landing: str, output: str, checkpoint: str, kill_at: str | None = None) -> None:
    if kill_at:
        _arm(kill_at, output)
    spark = local_session("spark-mlt-stream-fault", extra_conf={"spark.ui.enabled": "false"})
    options = TokenizeOptions(p=13, n=3, handle_invalid="quarantine")
    stream = StreamOptions(
        checkpoint=checkpoint, max_files_per_trigger=1, schema="rid bigint, customer_id bigint, sku string"
    )
    report = stream_module.tokenize_stream(spark, landing, output, ["customer_id", "sku"], options, stream=stream)
    print(json.dumps({"rows_out": report.rows_out, "rows_rejected": report.rows_rejected}))


if __name__ == "__main__":
    main(*sys.argv[1:])
