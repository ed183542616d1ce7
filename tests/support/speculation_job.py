"""A tokenize-into-Delta job whose slow task gets a speculative copy, run by test_speculation.py.

Usage: ``python tests/support/speculation_job.py MASTER OUTPUT MARKERS EVENT_LOG_DIR ROWS SLEEP``.

The driver runs here (client mode) against the standalone ``MASTER``; the executors run this
interpreter too. Ids ``0 .. ROWS-1`` in 4 partitions pass through an identity Arrow UDF that
leaves a marker file ``<partition>-<attempt>`` in ``MARKERS`` for every task attempt, and
whose first attempt of partition 0 sleeps ``SLEEP`` seconds. With speculation on and the
two executors on different hosts, Spark launches a second attempt of partition 0 on the
other host; that copy finishes first and the stalled one is killed. The ids are then
tokenized with ``mlt_encode`` and appended to the Delta table ``OUTPUT`` with
``write_delta`` (delta-rs backend). Spark's event log (uncompressed JSON lines) goes to
``EVENT_LOG_DIR``, so the test can read which task attempts ran where and how they ended.

Prints one JSON line: the write's result, its duration and the executors' hosts.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import arrow_udf

from spark_mlt import MLTCodec
from spark_mlt.column import mlt_encode
from spark_mlt.storage import write_delta

CODEC_P, CODEC_N, CODEC_SEED = 13, 6, 42
PARTITIONS = 4

# Speculate as soon as half the tasks are done and a task runs 1.5x their median (at least
# 2 s). The efficiency check (Spark 3.4+) is off: it judges tasks by records read per second,
# which a stalled Python UDF over spark.range does not report.
SPECULATION_CONF = {
    "spark.speculation": "true",
    "spark.speculation.interval": "200ms",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "2s",
    "spark.speculation.efficiency.enabled": "false",
    "spark.locality.wait": "0s",
}


def _stalling_identity(markers: str, sleep: float):  # type: ignore[no-untyped-def]
    """An identity Arrow UDF: a marker per task attempt; the first attempt of partition 0 stalls."""

    @arrow_udf("long")  # type: ignore[misc]
    def stalling_identity(ids: pa.Array) -> pa.Array:
        context = TaskContext.get()
        if context is not None:
            open(os.path.join(markers, f"{context.partitionId()}-{context.attemptNumber()}"), "a").close()
            if context.partitionId() == 0 and context.attemptNumber() == 0:
                time.sleep(sleep)
        return ids

    return stalling_identity


def main(argv: list[str]) -> int:
    master, output, markers, event_log = argv[0], argv[1], argv[2], argv[3]
    rows, sleep = int(argv[4]), float(argv[5])
    os.makedirs(markers, exist_ok=True)
    # PySpark takes the executors' Python from this variable (spark.pyspark.python only reaches
    # a driver that spark-submit launches).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    fast_jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    conf = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": fast_jvm,
        "spark.executor.extraJavaOptions": fast_jvm,
        "spark.executor.cores": "1",
        "spark.executor.memory": "768m",
        "spark.cores.max": "2",  # one executor on each worker, i.e. on each host
        # Start no job before both executors have registered.
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": "file://" + os.path.abspath(event_log),
        "spark.eventLog.compress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.log.level": "WARN",
        **SPECULATION_CONF,
    }
    builder = SparkSession.builder.master(master).appName("spark-mlt speculation")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        tracker = spark.sparkContext._jsc.sc().statusTracker()  # type: ignore[union-attr]
        hosts = sorted(info.host() for info in tracker.getExecutorInfos())  # the driver's included
        codec = MLTCodec.from_seed(CODEC_P, CODEC_N, CODEC_SEED)
        ids = spark.range(0, rows, numPartitions=PARTITIONS).withColumnRenamed("id", "userId")
        ids = ids.select(_stalling_identity(markers, sleep)("userId").alias("userId"))
        df = ids.withColumn("userId_mlt", mlt_encode("userId", codec))
        started = time.monotonic()
        result = write_delta(df, output, {"userId": codec}, mode="append")
        seconds = time.monotonic() - started
        report = {
            "app_id": spark.sparkContext.applicationId,
            "version": result.version,
            "rows": result.rows,
            "files": result.files,
            "write_seconds": round(seconds, 3),
            "hosts": hosts,
        }
        print(json.dumps(report), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
