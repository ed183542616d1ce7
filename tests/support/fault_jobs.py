"""Jobs with injected faults, each run in its own process (and JVM) by test_reliability.py.

Usage: ``python tests/support/fault_jobs.py SCENARIO OUTPUT START ROWS``. Every scenario tokenizes
ids ``START .. START+ROWS-1`` (4 partitions) into the Delta table OUTPUT with append mode
and prints one JSON line with the write's result.

* ``retry``: the first attempt of the task of partition 1 fails (Spark retries it: master
  ``local[2,4]`` allows 4 attempts).
* ``crash``: the driver process dies (``os._exit``) between Spark's job commit and the
  Delta commit: ``deltalake.DeltaTable.create_write_transaction``, the data commit, is
  replaced in this process by a function that prints the staging folder and exits.
* ``append``: a plain append (run twice at once to race two writers).

OUTPUT may be an S3 URI: ``SPARK_MLT_TEST_FAULT_S3_CONF`` (JSON) then holds the session's ``s3a``
settings, the line's s3a jars are added, and delta-rs and pyarrow take the store's settings
from the environment (``AWS_ENDPOINT_URL``, ...), as a job without ``storage_options`` does.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
from deltalake import DeltaTable
from pyspark import TaskContext
from pyspark.sql import functions as F
from pyspark.sql.functions import arrow_udf

from spark_mlt import MLTCodec
from spark_mlt.batch import local_session
from spark_mlt.column import mlt_encode
from spark_mlt.jars import spark_jars
from spark_mlt.storage import write_delta

CODEC_P, CODEC_N, CODEC_SEED = 13, 6, 42


def _flaky(scenario: str, markers: str):  # type: ignore[no-untyped-def]
    """An identity Arrow UDF whose first attempt of partition 1 fails on its third batch (after
    rows of the first two have reached Spark's Parquet writer), leaving a marker file
    ``<partition>-<attempt>`` per task attempt in ``markers``."""
    batches = {"seen": 0}

    @arrow_udf("long")  # type: ignore[misc]
    def flaky(ids: pa.Array) -> pa.Array:
        context = TaskContext.get()
        batches["seen"] += 1
        first = context is not None and context.attemptNumber() == 0
        if context is not None:
            open(os.path.join(markers, f"{context.partitionId()}-{context.attemptNumber()}"), "a").close()
        if scenario == "retry" and first and context.partitionId() == 1 and batches["seen"] >= 3:
            raise RuntimeError("injected failure on the first attempt")
        return ids

    return flaky


def _die_at_the_delta_commit(output: str) -> None:
    """Replaces delta-rs' data commit in this process: the driver dies with Spark's job
    committed (the add actions name the staging folder's files) and nothing in the Delta log."""

    def die(table: DeltaTable, actions: list[object], *args: object, **kwargs: object) -> None:
        staging = str(getattr(actions[0], "path", "")).split("/", 1)[0]
        print(json.dumps({"crashed": True, "staging": f"{output.rstrip('/')}/{staging}"}), flush=True)
        os._exit(3)

    DeltaTable.create_write_transaction = die  # type: ignore[method-assign,assignment]


def main(argv: list[str]) -> int:
    scenario, output, start, rows = argv[0], argv[1], int(argv[2]), int(argv[3])
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "1000",
        "spark.python.worker.reuse": "false",
    }
    if os.environ.get("SPARK_MLT_TEST_FAULT_S3_CONF"):
        conf.update({**json.loads(os.environ["SPARK_MLT_TEST_FAULT_S3_CONF"]), "spark.jars": spark_jars("s3")})
    spark = local_session(f"spark-mlt-fault-{scenario}", master="local[2,4]", extra_conf=conf)
    codec = MLTCodec.from_seed(CODEC_P, CODEC_N, CODEC_SEED)
    ids = spark.range(start, start + rows, numPartitions=4).withColumnRenamed("id", "userId")
    if scenario == "retry":
        markers = output.rstrip("/") + ".attempts"
        os.makedirs(markers, exist_ok=True)
        ids = ids.select(_flaky(scenario, markers)("userId").alias("userId"))
    if scenario == "crash":
        _die_at_the_delta_commit(output)
    df = ids.withColumn("userId_mlt", mlt_encode("userId", codec)).withColumn("batch", F.lit(start))
    result = write_delta(df, output, {"userId": codec}, mode="append")
    print(json.dumps({"version": result.version, "rows": result.rows, "files": result.files}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
