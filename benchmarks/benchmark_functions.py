"""Benchmark: mlt_encode / mlt_decode in Spark against Spark's own hashing and a no-op UDF.

On local[2], ids from ``spark.range`` are cached, then each expression is written to the
``noop`` sink and timed (best of ``--repeats``). Prints rows/s and ratios against
``xxhash64`` (Spark's native hashing, the hashing-trick peer) and an identity pandas UDF
(the cost floor of any Python UDF).

Targets: udf engine >= 0.8x the identity UDF (array output); native engine >= 0.4x
xxhash64; decode within 1.5x of encode's time for each engine.

Decoding reads token arrays, and Spark's in-memory cache serves array columns row by row
(about 15M rows/s for 6 ints here, before any decoding), while it serves the encoder's bigint
ids as vectorised columns. So decode is also timed the way tables are used: ids and tokens
stored in Parquet, encode reading the ids and decode reading the tokens from the same files;
the decode-vs-encode check uses those Parquet-source figures.

Each line also prints the seconds Spark takes to analyse, optimise and plan a fresh copy of
the query and the number of expression nodes in its optimized plan, and the compositions
``mlt_decode(mlt_encode(id))`` are timed for every layout: in one expression the decoder binds
the encoder's output through a lambda (see the README's "Composing them").

Run: ``make bench-functions`` (``BENCH_LINE=3.5.0`` for an older PySpark line) or
``python -m benchmarks.benchmark_functions --rows 20000000`` from the repository root.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import pandas as pd
import pyspark
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from spark_mlt import MLTCodec
from spark_mlt.batch import local_session
from spark_mlt.column import mlt_decode, mlt_encode
from tests.support.plans import plan_figures


def _time(df: DataFrame, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        best = min(best, time.perf_counter() - start)
    return best


@F.pandas_udf(LongType())  # type: ignore[call-overload]
def identity_udf(ids: pd.Series) -> pd.Series:
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--p", type=int, default=13)
    parser.add_argument("--n", type=int, default=6)
    args = parser.parse_args(argv)

    spark = local_session("spark-mlt-bench", extra_conf={"spark.ui.showConsoleProgress": "false"})
    codec = MLTCodec.from_seed(args.p, args.n)
    ids = spark.range(args.rows).select((F.col("id") % (codec.max_id + 1)).alias("id")).cache()
    ids.count()

    results: dict[str, float] = {}

    def run(label: str, df: DataFrame) -> None:
        planning, nodes = plan_figures(df)
        seconds = _time(df, args.repeats)
        results[label] = args.rows / seconds
        print(
            f"{label:<40} {args.rows / seconds / 1e6:>8.2f} M rows/s  ({seconds:6.2f} s)"
            f"  plan {planning:5.2f} s, {nodes:>6} nodes",
            flush=True,
        )

    print(
        f"{args.rows:,} ids, local[2], PySpark {pyspark.__version__}, p={codec.p}, n={codec.n}, "
        f"best of {args.repeats}; plan = seconds to plan a fresh copy, nodes = optimized-plan expressions"
    )
    run("xxhash64 (native hashing)", ids.select(F.xxhash64("id")))
    run("identity pandas UDF", ids.select(identity_udf("id")))
    for engine in ("native", "udf"):
        for output in ("array", "packed", "struct", "vector"):
            run(f"mlt_encode {engine} {output}", ids.select(mlt_encode("id", codec, layout=output, engine=engine)))
    for engine in ("native", "udf"):
        for layout in ("array", "packed", "struct"):
            tokens = mlt_encode("id", codec, layout=layout, engine=engine)
            composed = mlt_decode(tokens, codec, layout=layout, engine=engine)
            run(f"decode(encode) {engine} {layout}", ids.select(composed))
    # Cached only now: Spark's cache manager would serve an identical encode plan from it.
    tokens = ids.select(mlt_encode("id", codec, engine="native").alias("t")).cache()
    tokens.count()
    for engine in ("native", "udf"):
        run(f"mlt_decode {engine} (cached arrays)", tokens.select(mlt_decode("t", codec, engine=engine)))
    run("read 6 array items (cached)", tokens.select(*[F.get("t", j) for j in range(codec.n)]))
    tokens.unpersist()

    folder = tempfile.mkdtemp(prefix="mlt-bench-")
    try:
        ids.select(
            "id", mlt_encode("id", codec).alias("t"), mlt_encode("id", codec, layout="packed").alias("k")
        ).write.parquet(f"{folder}/stored")
        stored = spark.read.parquet(f"{folder}/stored")
        for engine in ("native", "udf"):
            run(f"mlt_encode {engine} (Parquet ids)", stored.select(mlt_encode("id", codec, engine=engine)))
            run(f"mlt_decode {engine} (Parquet tokens)", stored.select(mlt_decode("t", codec, engine=engine)))
            run(
                f"mlt_decode {engine} (Parquet packed)",
                stored.select(mlt_decode("k", codec, layout="packed", engine=engine)),
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    xx, floor = results["xxhash64 (native hashing)"], results["identity pandas UDF"]
    checks = [
        ("udf array >= 0.8x identity UDF", results["mlt_encode udf array"] / floor, 0.8),
        ("native array >= 0.4x xxhash64", results["mlt_encode native array"] / xx, 0.4),
        # decode time / encode time <= 1.5  <=>  decode rate / encode rate >= 1/1.5
        *[
            (
                f"{engine} decode within 1.5x encode (Parquet)",
                results[f"mlt_decode {engine} (Parquet tokens)"] / results[f"mlt_encode {engine} (Parquet ids)"],
                1 / 1.5,
            )
            for engine in ("native", "udf")
        ],
    ]
    print()
    for label, ratio, target in checks:
        print(f"{label:<44} ratio {ratio:5.2f} (target {target:.2f}) {'ok' if ratio >= target else 'MISSED'}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
