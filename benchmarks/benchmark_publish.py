"""Benchmark: a decode through a published catalog function against the native engine's
decode of the same column (and the JVM engine's, where the session has spark-mlt's jar).

A table of ``--rows`` ids is tokenized by ``tokenize_table`` (jar-free, packed tokens) with each
codec of ``--codecs`` (``p:n``; a p below 64 decodes through a lookup table, larger ones through
arithmetic), its functions published with ``publish_table`` into the session's catalog, and the
token column read from Parquet and decoded by each, summed so that every row is decoded. Best of
``--rounds`` rounds, the readers interleaved; printed as seconds, rows/s, and the function's time
over the native engine's (the target: at most 1.2).

Run: ``make bench-publish`` or ``python -m benchmarks.benchmark_publish --rows 20000000``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch import PublishOptions, TokenizeOptions, local_session, publish_table, tokenize_table
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_decode
from spark_mlt.storage import read_delta, read_snapshot


def _time(frame: DataFrame) -> float:
    start = time.perf_counter()
    frame.collect()
    return time.perf_counter() - start


def run_codec(spark: SparkSession, root: str, rows: int, *, p: int, n: int, rounds: int) -> None:
    source = f"{root}/ids_{p}_{n}.parquet"
    spark.range(rows).select(F.col("id").alias("customer_id")).write.parquet(source)
    table = f"{root}/orders_{p}_{n}_mlt"
    tokenize_table(spark, source, table, ["customer_id"], TokenizeOptions(p=p, n=n, drop_ids=True))
    schema = "bench"
    publish_table(spark, table, PublishOptions(schema=schema, view=False, prefix=f"t{p}_{n}"))
    codec = read_snapshot(table).codecs["customer_id"]
    tokens = read_delta(spark, table).select("customer_id_mlt")
    function = f"{schema}.t{p}_{n}_decode_customer_id"
    readers: dict[str, Callable[[], Column]] = {
        "catalog function": lambda: F.expr(f"{function}(customer_id_mlt)"),
        "native engine": lambda: mlt_decode("customer_id_mlt", codec, layout="packed", engine="native"),
    }
    if Capabilities.of(spark).jvm_engine:
        readers["jvm engine"] = lambda: mlt_decode("customer_id_mlt", codec, layout="packed", engine="jvm")
    best = dict.fromkeys(readers, float("inf"))
    for _ in range(rounds):
        for name, make in readers.items():
            best[name] = min(best[name], _time(tokens.agg(F.sum(make()).alias("s"))))
    native = best["native engine"]
    print(f"p={p} n={n}, {rows:,} rows")
    for name, seconds in best.items():
        print(f"  {name:17s} {seconds:6.2f} s  {rows / seconds / 1e6:6.1f} M rows/s  {seconds / native:4.2f}x native")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--codecs", nargs="+", default=["31:6", "1009:3", "65521:2"], help="p:n of each codec")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    spark = local_session(
        "bench-publish", extra_conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    )
    spark.sql("CREATE SCHEMA IF NOT EXISTS bench")
    root = tempfile.mkdtemp(prefix="bench-publish-")
    try:
        for codec in args.codecs:
            p, n = (int(part) for part in codec.split(":"))
            run_codec(spark, root, args.rows, p=p, n=n, rounds=args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
