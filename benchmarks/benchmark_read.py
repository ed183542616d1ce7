"""Benchmark: reading Delta tables into Spark, jar-free (delta-rs lists, Spark reads) against
delta-spark, on the table shapes the jar-free reader treats differently.

Three tables of ``--rows`` rows (id, a bucket, a string) are written by delta-spark on local
disk: ``plain`` (one folder of files: the reader's fast path, one scan), ``partitioned`` (by
``--partitions`` values: partition values come from a broadcast join on each row's file) and
``deleted`` (deletion vectors after a ``DELETE`` of every 10th row, scattered through every
file: an anti-join on the file and the row's index). Each read is timed as Spark's full work
on it: a sum over every column and a count, best of ``--rounds`` rounds, interleaved; printed
as seconds, rows/s and the ratio to delta-spark on the same table. It also prints the plan's
operator count for the partitioned table at 1 and at ``--partitions`` partitions (it must not
grow).

Run: ``make bench-read`` (PySpark 4.2.1's compatibility venv, with Delta's jars) or
``python -m benchmarks.benchmark_read --rows 5000000`` in a venv with the jars.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch import local_session
from spark_mlt.jars import delta_session_conf
from spark_mlt.storage import read_delta
from tests.support.plans import plan_operators


def _work(df: DataFrame) -> None:
    """Spark reads every column of every row (no column pruning, no count-only shortcut)."""
    df.agg(F.count(F.lit(1)), F.sum("id"), F.sum("bucket"), F.sum(F.length("name"))).collect()


def _build(spark: SparkSession, root: str, rows: int, partitions: int) -> dict[str, str]:
    source = spark.range(rows).select(
        "id", (F.col("id") % partitions).cast("int").alias("bucket"), F.concat(F.lit("n"), F.col("id")).alias("name")
    )
    paths = {name: f"{root}/{name}" for name in ("plain", "partitioned", "deleted")}
    source.write.format("delta").save(paths["plain"])
    source.write.format("delta").partitionBy("bucket").save(paths["partitioned"])
    source.write.format("delta").save(paths["deleted"])
    spark.sql(f"ALTER TABLE delta.`{paths['deleted']}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM delta.`{paths['deleted']}` WHERE id % 10 = 0")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = local_session(
        "bench-read",
        extra_conf={**delta_session_conf(), "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"},
    )
    root = tempfile.mkdtemp(prefix="bench-read-")
    try:
        started = time.perf_counter()
        paths = _build(spark, root, args.rows, args.partitions)
        print(f"tables written in {time.perf_counter() - started:.1f} s ({args.rows:,} rows each)")
        best: dict[tuple[str, str], float] = {}
        for _ in range(args.rounds):
            for name, path in paths.items():
                for backend in ("delta-spark", "delta-rs"):
                    df = read_delta(spark, path, backend=backend)  # type: ignore[arg-type]
                    start = time.perf_counter()
                    _work(df)
                    seconds = time.perf_counter() - start
                    best[(name, backend)] = min(seconds, best.get((name, backend), seconds))
        print(f"{'table':<12} {'delta-spark s':>14} {'jar-free s':>11} {'jar-free rows/s':>16} {'ratio':>6}")
        for name in paths:
            spark_s, free_s = best[(name, "delta-spark")], best[(name, "delta-rs")]
            print(f"{name:<12} {spark_s:>14.2f} {free_s:>11.2f} {args.rows / free_s:>16,.0f} {spark_s / free_s:>6.2f}")
        one = f"{root}/one"
        spark.range(1000).select("id", F.lit(0).alias("bucket"), F.lit("x").alias("name")).write.format(
            "delta"
        ).partitionBy("bucket").save(one)
        sizes = [plan_operators(read_delta(spark, p, backend="delta-rs")) for p in (one, paths["partitioned"])]
        print(f"plan operators, jar-free, 1 partition / {args.partitions} partitions: {sizes[0]} / {sizes[1]}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
