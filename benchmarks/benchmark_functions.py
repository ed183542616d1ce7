"""Benchmark: mlt_encode / mlt_decode in Spark, a matrix of codec families, layouts, query shapes and engines.

Each codec family is measured on ``local[2]`` with ids from ``spark.range`` (spread over the
codec's whole domain), each query written to the ``noop`` sink (best of ``--repeats``), in
every layout the codec has and five query shapes, with every engine the session has (jvm
where spark-mlt's jar is built, ``make jvm``; native; udf):

* ``encode``: ``mlt_encode`` of cached ids;
* ``decode cached`` / ``decode Parquet``: ``mlt_decode`` of the tokens the native engine
  wrote, cached or stored in Parquet;
* ``chain``: ``withColumn("t", mlt_encode(...)).withColumn("back", mlt_decode("t", ...))``;
* ``one expression``: ``mlt_decode(mlt_encode(id))`` in one expression.

Every figure is printed beside its reference, measured in the same run at the start of the
family's block (the machine is shared: ratios within a block are what compare): ``xxhash64``
of the same input (the ids for encode and the compositions; the token column, cached or in
Parquet, for decode), an identity UDF (Arrow on PySpark >= 4.1, pandas before: the floor of
the udf engine), and for array, struct and vector output the write of n constant tokens in
that layout (the floor of any function that outputs them). Each line also shows the engine
``auto`` picks there.

Targets, checked in the summary: jvm >= 0.9x ``xxhash64`` for encode and decode, and its
one-expression round trip within 1.1x of its chain's time; native >= 0.5x ``xxhash64`` (an
output of n values may be bounded by writing them: then within 1.5x of the constants' time),
its one-expression round trip within 1.5x of the chain's time; ``auto`` picks the fastest
engine (a tie within 10% counts as either).

The latency section runs each composition twice, each time in a fresh process, timed from
building its Columns to the collected rows of a 3-row query: after the session's first query
(a 3-row ``xxhash64``), and in a warm session, after a round trip of another codec on each
engine (its Python workers are up and the JVM has compiled Spark's analyser and code
generator, but nothing of the case itself).

Run: ``make bench-functions`` (``BENCH_LINE=3.5.0`` for an older PySpark line) or
``python -m benchmarks.benchmark_functions --rows 2000000`` from the repository root;
``--families 13,6 --shapes encode --layouts packed`` runs part of the matrix, ``--quick``
a small one (200,000 rows, one run each, array and packed): at that size a query's fixed
cost (a few tenths of a second) weighs on every figure, so ratios understate the gaps.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyspark
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.functions import array_to_vector
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt import MLTCodec
from spark_mlt.batch import local_session
from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MAX_ID
from spark_mlt.column import mlt_decode, mlt_encode, register_mlt_functions
from spark_mlt.column import sqltext as sql
from spark_mlt.column.engine import POLICY, Situation
from spark_mlt.column.layouts import LAYOUT, LAYOUTS, VECTOR, Layout
from spark_mlt.ml import MLTDecoder, MLTEncoder

#: one codec per family: small p with large n, the default p, p around 1,000, two whose
#: capacity exceeds 2^63 (they cover every bigint), and p = 2 with n = 40
FAMILIES = [(3, 39), (13, 6), (1009, 5), (251, 8), (65521, 4), (2, 40)]
SHAPES = ("encode", "decode cached", "decode Parquet", "chain", "one expression")
ENGINES: list[str] = ["native", "udf"]  # main() adds "jvm" where the session has the jar
TIE = 1.1  # engines within 10% of each other: either is the faster one


def _rows_per_second(df: DataFrame, rows: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        best = min(best, time.perf_counter() - start)
    return rows / best


def _identity_udf() -> Callable[[Column], Column]:
    """The cheapest vectorised UDF of the kind the udf engine runs (Arrow or pandas)."""
    if Capabilities.active().arrow_udfs:
        return F.arrow_udf(lambda ids: ids, "bigint")  # type: ignore[attr-defined,no-any-return]
    return F.pandas_udf(lambda ids: ids, "bigint")  # type: ignore[call-overload,no-any-return]


def _constants(codec: MLTCodec, layout: Layout) -> Column:
    """n constant tokens in ``layout``: the floor of writing that output."""
    shape = LAYOUT[layout]
    value = F.expr(shape.write([sql.lit(j % codec.p) for j in range(codec.n)], codec))
    return array_to_vector(value) if shape is VECTOR else value


def layouts_of(codec: MLTCodec, wanted: set[str]) -> list[Layout]:
    return [layout for layout in LAYOUTS if layout in wanted and (layout != "packed" or codec.packed_bits is not None)]


def auto_pick(codec: MLTCodec, layout: Layout, shape: str) -> str:
    """The engine ``engine="auto"`` runs for the shape (in the one-expression round trip the
    decode's input is composed, the encode's is not)."""
    # the decoder of a vector column binds its values; in one expression the encoder's output
    bound = shape == "one expression" or layout == "vector"
    situation = Situation("decode", codec, LAYOUT[layout], Capabilities.active(), bound=bound)
    return POLICY.choose(situation).engine


@dataclass
class Cell:
    family: tuple[int, int]
    layout: str
    shape: str
    engine: str
    rate: float
    reference: float  # xxhash64 of the same input, rows/s
    floor: float | None  # n constants in the output layout, rows/s (encode only)

    @property
    def ratio(self) -> float:
        return self.rate / self.reference


def _ids(spark: SparkSession, codec: MLTCodec, rows: int) -> DataFrame:
    """``rows`` ids spread over the codec's domain (a hash of 0..rows-1), cached."""
    hashed = F.xxhash64("id")
    spread = hashed.bitwiseAND(F.lit(MAX_ID)) if codec.max_id == MAX_ID else F.pmod(hashed, F.lit(codec.max_id + 1))
    ids = spark.range(rows).select(spread.alias("id")).cache()
    ids.count()
    return ids


def run_family(
    spark: SparkSession, p: int, n: int, *, rows: int, repeats: int, shapes: set[str], wanted: set[str]
) -> list[Cell]:
    codec = MLTCodec.from_seed(p, n)
    layouts = layouts_of(codec, wanted)
    ids = _ids(spark, codec, rows)
    cells: list[Cell] = []

    def rate(df: DataFrame) -> float:
        return _rows_per_second(df, rows, repeats)

    xx_ids = rate(ids.select(F.xxhash64("id")))
    identity = rate(ids.select(_identity_udf()(F.col("id"))))
    floors = {layout: rate(ids.select(_constants(codec, layout))) for layout in layouts if layout != "packed"}
    print(
        f"\n== p={p}, n={n}: {rows:,} rows; xxhash64 {xx_ids / 1e6:.2f}M rows/s, identity UDF "
        f"{identity / 1e6:.2f}M (udf floor: {identity / xx_ids:.2f}x xxhash64); constants "
        + ", ".join(f"{layout} {value / 1e6:.2f}M" for layout, value in floors.items()),
        flush=True,
    )

    def measure(layout: Layout, shape: str, engine: str, df: DataFrame, reference: float) -> None:
        value = rate(df)
        floor = floors.get(layout) if shape == "encode" else None
        cell = Cell((p, n), layout, shape, engine, value, reference, floor)
        cells.append(cell)
        picked = auto_pick(codec, layout, shape)
        print(
            f"  {layout:<7} {shape:<15} {engine:<6} {value / 1e6:7.2f}M rows/s  {cell.ratio:5.2f}x xxhash64"
            + (f"  {value / floor:5.2f}x constants" if floor else "")
            + f"  (auto: {picked})",
            flush=True,
        )

    def enc(column: str | Column, layout: Layout, engine: str) -> Column:
        return mlt_encode(column, codec, layout=layout, engine=engine)  # type: ignore[arg-type]

    def dec(column: str | Column, layout: Layout, engine: str) -> Column:
        return mlt_decode(column, codec, layout=layout, engine=engine)  # type: ignore[arg-type]

    for layout in layouts:
        for engine in ENGINES:
            if "encode" in shapes:
                measure(layout, "encode", engine, ids.select(enc("id", layout, engine)), xx_ids)
            if "chain" in shapes:
                chain = ids.withColumn("t", enc("id", layout, engine)).withColumn("back", dec("t", layout, engine))
                measure(layout, "chain", engine, chain.select("back"), xx_ids)
            if "one expression" in shapes:
                measure(
                    layout, "one expression", engine, ids.select(dec(enc("id", layout, engine), layout, engine)), xx_ids
                )

    stored = ids.select(*[enc("id", layout, "native").alias(layout) for layout in layouts])
    if "decode cached" in shapes:
        cached = stored.cache()
        cached.count()
        for layout in layouts:
            reference = rate(cached.select(F.xxhash64(layout)))
            for engine in ENGINES:
                measure(layout, "decode cached", engine, cached.select(dec(layout, layout, engine)), reference)
        cached.unpersist()
    if "decode Parquet" in shapes:
        folder = tempfile.mkdtemp(prefix="mlt-bench-")
        try:
            stored.write.parquet(f"{folder}/tokens")
            parquet = spark.read.parquet(f"{folder}/tokens")
            for layout in layouts:
                reference = rate(parquet.select(F.xxhash64(layout)))
                for engine in ENGINES:
                    measure(layout, "decode Parquet", engine, parquet.select(dec(layout, layout, engine)), reference)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    ids.unpersist()
    return cells


# --- latency: a 3-row composition in a fresh process ----------------------------------------

LATENCY_CASES = {  # case: (label, shape, codec)
    "one": ("decode(encode(id)), p=2 n=40", "one", (2, 40)),
    "chain": ("withColumn chain, p=2 n=40", "chain", (2, 40)),
    "three": ("encode(decode(encode(id))), p=2 n=40", "three", (2, 40)),
    "sql": ("SQL decode(encode(id)), p=2 n=40", "sql", (2, 40)),
    "one-65521": ("decode(encode(id)), p=65521 n=4", "one", (65521, 4)),
    "one-3": ("decode(encode(id)), p=3 n=39", "one", (3, 39)),
    "chain-3": ("withColumn chain, p=3 n=39", "chain", (3, 39)),
    "pipeline": ("MLTEncoder -> MLTDecoder loaded from disk, two p=13 n=9 columns", "pipeline", (13, 9)),
}
WARM_UP_CODEC = (7, 7)  # no case uses it: nothing the warm-up compiles is reused by a case


def latency_case(case: str, *, warm: bool) -> dict[str, float]:
    """Run one latency case in this process and time it, from building its Columns to the
    collected rows. Before it: the session's first query (a 3-row ``xxhash64``) and, when
    ``warm``, a round trip of another codec on each engine (a session that has run spark-mlt
    before: its Python workers are up and the JVM has run Spark's analyser and code generator
    over spark-mlt's expressions, but not over this case's)."""
    spark = local_session("spark-mlt-latency", extra_conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    three = spark.createDataFrame([(0,), (1,), (None,)], "id bigint")
    three.select(F.xxhash64("id")).collect()  # the session's first query
    if warm:
        other = MLTCodec.from_seed(*WARM_UP_CODEC)
        for engine in [*ENGINES, *(["jvm"] if Capabilities.of(spark).jvm_engine else [])]:
            three.select(mlt_decode(mlt_encode("id", other, engine=engine), other, engine=engine)).collect()
    folder = tempfile.mkdtemp(prefix="mlt-latency-")
    try:
        build = _latency_setup(spark, case, three, folder)
        start = time.perf_counter()
        query = build()
        built = time.perf_counter() - start
        query.collect()
        total = time.perf_counter() - start
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"build_s": built, "total_s": total}


def _latency_setup(spark: SparkSession, case: str, three: DataFrame, folder: str) -> Callable[[], DataFrame]:
    """What the case needs before its query (for the pipeline: fit, save and load it), and
    the function that builds the query."""
    _, shape, family = LATENCY_CASES[case]
    if shape == "pipeline":
        ratings = spark.createDataFrame([(1, 10), (2, 2000), (3, None)], "userId bigint, movieId bigint")
        encoder = MLTEncoder(inputCols=["userId", "movieId"], outputCols=["u", "m"], p=family[0], n=family[1])
        model = Pipeline(stages=[encoder]).fit(ratings)
        decoder = MLTDecoder.from_codecs(model.stages[0].getCodecs(), inputCols=["u", "m"], outputCols=["ub", "mb"])
        PipelineModel(stages=[*model.stages, decoder]).write().overwrite().save(f"{folder}/pipeline")
        loaded = PipelineModel.load(f"{folder}/pipeline")
        return lambda: loaded.transform(ratings)
    codec = MLTCodec.from_seed(*family)
    if shape == "sql":
        register_mlt_functions(spark, codec, "latency")
        three.createOrReplaceTempView("latency_ids")
        return lambda: spark.sql("SELECT mlt_decode_latency(mlt_encode_latency(id)) AS back FROM latency_ids")
    if shape == "chain":
        return lambda: three.withColumn("t", mlt_encode("id", codec)).withColumn("back", mlt_decode("t", codec))
    if shape == "three":
        return lambda: three.select(mlt_encode(mlt_decode(mlt_encode("id", codec), codec), codec))
    return lambda: three.select(mlt_decode(mlt_encode("id", codec), codec))


def _run_latency_case(case: str, warm: bool) -> dict[str, float] | str:
    command = [sys.executable, "-m", "benchmarks.benchmark_functions", "--latency-case", case]
    done = subprocess.run([*command, "--warm"] if warm else command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return done.stderr[-2000:]
    result: dict[str, float] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def run_latency() -> None:
    print(
        "\n== latency: a 3-row query, timed from building its Columns to the rows (targets: < 1 s first, < 0.3 s"
        "\n   warm), each in a"
        "\n   fresh process: 'first' after the session's first query (a 3-row xxhash64), 'warm' after a"
        f"\n   round trip of another codec {WARM_UP_CODEC} on each engine (the pipeline is loaded beforehand)"
    )
    for case, (label, _, _) in LATENCY_CASES.items():
        figures = []
        for warm in (False, True):
            result = _run_latency_case(case, warm)
            if isinstance(result, str):
                print(f"  {label}: FAILED\n{result}")
                break
            mark = "ok" if result["total_s"] < (0.3 if warm else 1.0) else "MISSED"
            when = "warm" if warm else "first"
            figures.append(f"{when} {result['total_s']:5.2f} s (Columns {result['build_s']:.2f}) {mark}")
        else:
            print(f"  {label:<62} " + "   ".join(figures))


# --- summary --------------------------------------------------------------------------------


def summarise(cells: list[Cell]) -> None:
    print("\n== summary: each engine as x xxhash64 of the same input; the fastest; auto's pick; targets")
    by_key = {(c.family, c.layout, c.shape, c.engine): c for c in cells}
    groups = dict.fromkeys((c.family, c.layout, c.shape) for c in cells)
    missed: list[str] = []
    for family, layout, shape in groups:
        measured = {e: by_key[(family, layout, shape, e)] for e in ENGINES if (family, layout, shape, e) in by_key}
        line = f"  p={family[0]:<5} n={family[1]:<2} {layout:<7} {shape:<15}" + "".join(
            f" {engine} {cell.ratio:5.2f}x" for engine, cell in measured.items()
        )
        best = max(measured.values(), key=lambda c: c.rate)
        tie = [e for e, c in measured.items() if c.rate * TIE >= best.rate]
        picked = auto_pick(MLTCodec.from_seed(*family), layout, shape)  # type: ignore[arg-type]
        line += f"  fastest: {'/'.join(tie):<11} auto: {picked:<6}"
        if len(measured) > 1 and picked not in tie:
            missed.append(f"auto picks {picked} for p={family} {layout} {shape}, {best.engine} is faster")
        for engine, cell in measured.items():
            floor = {"jvm": 0.9, "native": 0.5}.get(engine)
            bounded = engine == "native" and cell.floor is not None and cell.rate * 1.5 >= cell.floor
            if floor and shape in ("encode", "decode cached", "decode Parquet") and cell.ratio < floor and not bounded:
                missed.append(f"{engine} {shape} p={family} {layout}: {cell.ratio:.2f}x xxhash64 (target {floor}x)")
                line += f" {engine}:MISSED"
            chain = by_key.get((family, layout, "chain", engine))
            if shape == "one expression" and chain is not None and floor:
                limit = 1.1 if engine == "jvm" else 1.5
                line += f"  {engine} vs chain {cell.rate / chain.rate:4.2f}x"
                if cell.rate * limit < chain.rate:
                    missed.append(
                        f"{engine} one expression p={family} {layout}: {chain.rate / cell.rate:.2f}x the chain's time"
                    )
        print(line)
    print(f"\ntargets missed: {len(missed)}")
    for item in missed:
        print(f"  - {item}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true", help="200,000 rows, one run each, array and packed layouts (a quick look)"
    )
    parser.add_argument("--layouts", nargs="*", choices=LAYOUTS, default=list(LAYOUTS))
    parser.add_argument("--families", nargs="*", help="p,n pairs (default: every family)")
    parser.add_argument("--shapes", nargs="*", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--no-latency", action="store_true", help="skip the latency section")
    parser.add_argument("--latency-case", help=argparse.SUPPRESS)  # internal: one latency case, as JSON
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)  # internal: with --latency-case
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats, args.layouts = 200_000, 1, ["array", "packed"]
    if args.latency_case:
        print("RESULT " + json.dumps(latency_case(args.latency_case, warm=args.warm)), flush=True)
        return 0

    families = [tuple(int(v) for v in f.split(",")) for f in args.families] if args.families else FAMILIES
    spark = local_session("spark-mlt-bench", extra_conf={"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    if Capabilities.of(spark).jvm_engine:
        ENGINES.insert(0, "jvm")
    print(
        f"PySpark {pyspark.__version__}, local[2], noop sink, best of {args.repeats}; "
        "the machine is shared: compare ratios within a block"
    )
    started = time.perf_counter()
    for _ in range(3):  # warm the JVM up: the first family's references would pay for it
        spark.range(args.rows).select(F.xxhash64("id")).write.format("noop").mode("overwrite").save()
    cells: list[Cell] = []
    for p, n in families:
        cells += run_family(
            spark, p, n, rows=args.rows, repeats=args.repeats, shapes=set(args.shapes), wanted=set(args.layouts)
        )
    spark.stop()
    summarise(cells)
    if not args.no_latency:
        run_latency()
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
