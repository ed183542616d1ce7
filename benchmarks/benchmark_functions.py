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

Every figure is a ratio to its anchor, Spark's own cheapest expression of the same output,
measured in the same run at the start of the family's block (the machine is shared: ratios
within a block are what compare):

* a bigint output (encode packed, every decode, the round trips): ``xxhash64(id)`` on the ids;
* an n-token array (encode array): ``array_repeat(hash(id), n)``, the cheapest n-element
  array Spark itself builds;
* struct and vector output: n constant tokens in that layout (the floor of writing them).

Beside each decode, what reading its input costs: ``array_max(tokens)`` and
``xxhash64(tokens)`` on the same column, as x ``xxhash64(id)``. For each family, the
marginal cost of one more jvm encode in a row (four calls on shifted ids against one),
beside one more ``xxhash64``, in ns per row and core: the arithmetic that bounds a cell.

Targets, checked in the summary: jvm >= 0.9x its anchor for encode (packed, array) and
decode (every layout and input), its one-expression round trip within 1.1x of its chain's
time; native >= 0.5x ``xxhash64`` of its input (an array output may be bounded by writing
it: then within 1.5x of its anchor's time), its round trip within 1.5x of its chain's time;
``auto`` picks the fastest engine (a tie within 10% counts as either). A missed jvm target
names its bound: reading the array (``array_max``) or the kernel's arithmetic.

The latency section runs each composition twice, each time in a fresh process, timed from
building its Columns to the collected rows of a 3-row query: after the session's first query
(a 3-row ``xxhash64``), and in a warm session, after a round trip of another codec on each
engine (its Python workers are up and the JVM has compiled Spark's analyser and code
generator, but nothing of the case itself).

Run: ``make bench-functions`` (``BENCH_LINE=3.5.0`` for an older PySpark line) or
``python -m benchmarks.benchmark_functions --rows 4000000`` from the repository root;
``--families 13,6 --shapes encode --layouts packed --engines jvm native`` runs part of the
matrix, ``--quick`` a small one (500,000 rows, one run each, array and packed): at that size
a query's fixed cost (a few tenths of a second) weighs on every figure, so ratios understate
the gaps.
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
from dataclasses import dataclass, field

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

#: one codec per family: p = 2 (n = 2, 40 and 63), p = 3 (n = 2, 39, and 40 whose capacity
#: exceeds 2^63), small primes (11, 13; the default), p near 2^8 (251, 257), 1,009, p near
#: 2^16 (n = 4 and 5 beyond 2^63), 2^31 - 1 (n = 2 and 3 beyond 2^63), and n = 63 beyond the
#: tables (p = 251)
FAMILIES = [
    (2, 2), (2, 40), (2, 63), (3, 2), (3, 39), (3, 40), (11, 7), (13, 6), (251, 8), (257, 7),
    (1009, 5), (65521, 4), (65521, 5), (2_147_483_647, 2), (2_147_483_647, 3), (251, 63),
]  # fmt: skip
SHAPES = ("encode", "decode cached", "decode Parquet", "chain", "one expression")
ENGINES: list[str] = ["native", "udf"]  # main() adds "jvm" where the session has the jar
TIE = 1.1  # engines within 10% of each other: either is the faster one
PACKED_ARRAY = ("packed", "array")  # the layouts whose anchor is Spark's own expression


def _paired(df: DataFrame, anchor: DataFrame, rows: int, repeats: int) -> tuple[float, float]:
    """Rows/s of ``df`` and of its anchor, run alternately (best of ``repeats`` each), so that
    both see the same machine: on a shared host the anchor alone drifts 2-3x within a run."""
    best, best_anchor = float("inf"), float("inf")
    for _ in range(repeats):
        for frame, which in ((anchor, "anchor"), (df, "cell")):
            start = time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            took = time.perf_counter() - start
            if which == "cell":
                best = min(best, took)
            else:
                best_anchor = min(best_anchor, took)
    return rows / best, rows / best_anchor


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
    """The engine ``engine="auto"`` runs for the shape in the active session: the encoder's
    for ``encode``, else the decoder's (in the one-expression round trip the decode's input is
    composed, the encode's is not)."""
    # the decoder of a vector column binds its values; in one expression the encoder's output
    bound = shape == "one expression" or (layout == "vector" and shape != "encode")
    operation = "encode" if shape == "encode" else "decode"
    situation = Situation(operation, codec, LAYOUT[layout], Capabilities.active(), bound=bound)
    return POLICY.choose(situation).engine


@dataclass
class Cell:
    family: tuple[int, int]
    layout: str
    shape: str
    engine: str
    rate: float
    anchor: float  # Spark's cheapest expression of the same output (see the module's docstring), rows/s
    reference: float  # xxhash64 of the same input (the ids, or the token column), rows/s
    #: decode: reading the input, array_max(tokens) (arrays) or xxhash64(tokens), rows/s
    read: float | None = None
    #: the engine ``auto`` picks for this cell's layout and shape
    picked: str = ""

    @property
    def ratio(self) -> float:
        """As x its anchor: what the jvm engine's targets are about."""
        return self.rate / self.anchor

    @property
    def input_ratio(self) -> float:
        """As x xxhash64 of the same input: what the native engine's targets are about."""
        return self.rate / self.reference


def _ids(spark: SparkSession, codec: MLTCodec, rows: int) -> DataFrame:
    """``rows`` ids spread over the codec's domain (a hash of 0..rows-1), cached."""
    hashed = F.xxhash64("id")
    spread = hashed.bitwiseAND(F.lit(MAX_ID)) if codec.max_id == MAX_ID else F.pmod(hashed, F.lit(codec.max_id + 1))
    ids = spark.range(rows).select(spread.alias("id")).cache()
    ids.count()
    return ids


Rate = Callable[[DataFrame], float]


def _marginal_ns(spark: SparkSession, ids: DataFrame, make: Callable[[Column], Column], rate: Rate) -> float:
    """ns per row and core that one more call of ``make`` adds: nine calls (on ids shifted right
    by 0..8 bits, so none is a common subexpression) against one, on local[2]."""
    one = rate(ids.select(make(F.shiftright("id", 0))))
    nine = rate(ids.select(*[make(F.shiftright("id", k)) for k in range(9)]))
    cores = spark.sparkContext.defaultParallelism
    return max(0.0, (1 / nine - 1 / one) / 8 * cores * 1e9)


@dataclass
class Block:
    """One family's measurements: its cached ids, anchors and cells."""

    codec: MLTCodec
    ids: DataFrame
    rows: int
    repeats: int
    engines: list[str]
    #: by output layout: Spark's cheapest query of that output (see the module's docstring)
    anchors: dict[str, DataFrame]
    #: xxhash64 of the ids, rows/s: measured once, the native engine's reference
    xx_ids: float
    cells: list[Cell] = field(default_factory=list)

    def rate(self, df: DataFrame) -> float:
        return _rows_per_second(df, self.rows, self.repeats)

    def enc(self, column: str | Column, layout: Layout, engine: str) -> Column:
        return mlt_encode(column, self.codec, layout=layout, engine=engine)  # type: ignore[arg-type]

    def dec(self, column: str | Column, layout: Layout, engine: str) -> Column:
        return mlt_decode(column, self.codec, layout=layout, engine=engine)  # type: ignore[arg-type]

    def measure(self, layout: Layout, shape: str, engine: str, df: DataFrame, *, reference: float,
                read: float | None = None) -> None:  # fmt: skip
        """Measures a cell beside its anchor, run alternately; ``reference`` and ``read`` (rows/s of
        xxhash64 of the input and of reading it) are scaled to the anchor's run."""
        kind = layout if shape == "encode" else "packed"
        value, anchor = _paired(df, self.anchors[kind], self.rows, self.repeats)
        family = (self.codec.p, self.codec.n)
        picked = auto_pick(self.codec, layout, shape)
        cell = Cell(family, layout, shape, engine, value, anchor, reference, read, picked)
        self.cells.append(cell)
        shown = "xxhash64(id)" if kind == "packed" else ("array_repeat" if layout == "array" else "constants")
        print(
            f"  {layout:<7} {shape:<15} {engine:<6} {value / 1e6:7.2f}M rows/s  {cell.ratio:5.2f}x {shown} "
            f"({anchor / 1e6:.1f}M)" + (f"  (input read: {read / 1e6:.1f}M)" if read else "") + f"  (auto: {picked})",
            flush=True,
        )

    def compositions(self, layouts: list[Layout], shapes: set[str]) -> None:
        ids = self.ids
        for layout in layouts:
            for engine in self.engines:
                if "encode" in shapes:
                    self.measure(
                        layout, "encode", engine, ids.select(self.enc("id", layout, engine)), reference=self.xx_ids
                    )
                if "chain" in shapes:
                    chain = ids.withColumn("t", self.enc("id", layout, engine)).withColumn(
                        "back", self.dec("t", layout, engine)
                    )
                    self.measure(layout, "chain", engine, chain.select("back"), reference=self.xx_ids)
                if "one expression" in shapes:
                    both = ids.select(self.dec(self.enc("id", layout, engine), layout, engine))
                    self.measure(layout, "one expression", engine, both, reference=self.xx_ids)

    def decodes(self, shape: str, tokens: DataFrame, layout: Layout) -> None:
        # xxhash64 of the token column, and the cheapest read of it (array_max for arrays)
        reference = self.rate(tokens.select(F.xxhash64(layout)))
        read = max(reference, self.rate(tokens.select(F.array_max(layout)))) if layout == "array" else reference
        for engine in self.engines:
            decoded = tokens.select(self.dec(layout, layout, engine))
            self.measure(layout, shape, engine, decoded, reference=reference, read=read)


def run_family(
    spark: SparkSession,
    p: int,
    n: int,
    *,
    rows: int,
    repeats: int,
    shapes: set[str],
    wanted: set[str],
    engines: list[str],
) -> list[Cell]:
    codec = MLTCodec.from_seed(p, n)
    layouts = layouts_of(codec, wanted)
    ids = _ids(spark, codec, rows)

    def rate(df: DataFrame) -> float:
        return _rows_per_second(df, rows, repeats)

    anchors = {
        "packed": ids.select(F.xxhash64("id")),
        "array": ids.select(F.array_repeat(F.hash("id"), n)),
        **{layout: ids.select(_constants(codec, layout)) for layout in layouts if layout not in PACKED_ARRAY},
    }
    xx_ids = rate(anchors["packed"])
    block = Block(codec, ids, rows, repeats, engines, anchors, xx_ids)
    udf_floor = ""
    if "udf" in engines:
        identity = rate(ids.select(_identity_udf()(F.col("id"))))
        udf_floor = f", identity UDF {identity / 1e6:.2f}M ({identity / xx_ids:.2f}x)"
    print(
        f"\n== p={p}, n={n}: {rows:,} rows; xxhash64(id) {xx_ids / 1e6:.2f}M rows/s{udf_floor}; each cell "
        "as x its anchor, run alternately with it (the anchor's rows/s in brackets)",
        flush=True,
    )
    if "jvm" in engines and "encode" in shapes:
        last = "packed" if "packed" in layouts else layouts[0]
        kernel = _marginal_ns(spark, ids, lambda c: mlt_encode(c, codec, layout=last, engine="jvm"), rate)  # type: ignore[arg-type]
        hashing = _marginal_ns(spark, ids, F.xxhash64, rate)
        print(f"  one more call per row (per core): jvm encode ({last}) {kernel:.0f} ns, xxhash64 {hashing:.0f} ns")
    block.compositions(layouts, shapes)
    for layout in layouts:  # one layout's tokens cached at a time: (251, 63) arrays take 1 GB
        stored = ids.select(block.enc("id", layout, "native").alias(layout))
        if "decode cached" in shapes:
            cached = stored.cache()
            cached.count()
            block.decodes("decode cached", cached, layout)
            cached.unpersist()
        if "decode Parquet" in shapes:
            folder = tempfile.mkdtemp(prefix="mlt-bench-")
            try:
                stored.write.parquet(f"{folder}/tokens")
                block.decodes("decode Parquet", spark.read.parquet(f"{folder}/tokens"), layout)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    ids.unpersist()
    return block.cells


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


def summarise(cells: list[Cell], engines: list[str]) -> None:
    print(
        "\n== summary: each engine as x its anchor (xxhash64(id) for bigints, array_repeat for arrays); "
        "the fastest; auto's pick; targets"
    )
    by_key = {(c.family, c.layout, c.shape, c.engine): c for c in cells}
    groups = dict.fromkeys((c.family, c.layout, c.shape) for c in cells)
    missed: list[str] = []
    for family, layout, shape in groups:
        measured = {e: by_key[(family, layout, shape, e)] for e in engines if (family, layout, shape, e) in by_key}
        line = f"  p={family[0]:<10} n={family[1]:<2} {layout:<7} {shape:<15}" + "".join(
            f" {engine} {cell.ratio:5.2f}x" for engine, cell in measured.items()
        )
        best = max(measured.values(), key=lambda c: c.rate)
        tie = [e for e, c in measured.items() if c.rate * TIE >= best.rate]
        picked = best.picked
        line += f"  fastest: {'/'.join(tie):<11} auto: {picked:<6}"
        if len(measured) > 1 and picked not in tie and picked in measured:
            missed.append(f"auto picks {picked} for p={family} {layout} {shape}, {best.engine} is faster")
        single = shape in ("encode", "decode cached", "decode Parquet")
        jvm = measured.get("jvm")
        targeted = (shape == "encode" and layout in ("array", "packed")) or shape.startswith("decode")
        if jvm is not None and targeted and jvm.ratio < 0.9:
            bound = f"; reading the input alone: {jvm.read / jvm.anchor:.2f}x" if jvm.read is not None else ""
            missed.append(f"jvm {shape} p={family} {layout}: {jvm.ratio:.2f}x its anchor (target 0.9x){bound}")
            line += " jvm:MISSED"
        native = measured.get("native")
        if native is not None and single and native.input_ratio < 0.5:
            bounded = shape == "encode" and layout != "packed" and native.rate * 1.5 >= native.anchor
            if not bounded:
                missed.append(f"native {shape} p={family} {layout}: {native.input_ratio:.2f}x xxhash64 (target 0.5x)")
                line += " native:MISSED"
        for engine, cell in measured.items():
            chain = by_key.get((family, layout, "chain", engine))
            limit = {"jvm": 1.1, "native": 1.5}.get(engine)
            if shape == "one expression" and chain is not None and limit:
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
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true", help="500,000 rows, one run each, array and packed layouts (a quick look)"
    )
    parser.add_argument("--layouts", nargs="*", choices=LAYOUTS, default=list(LAYOUTS))
    parser.add_argument("--families", nargs="*", help="p,n pairs (default: every family)")
    parser.add_argument("--shapes", nargs="*", choices=SHAPES, default=list(SHAPES))
    parser.add_argument(
        "--engines", nargs="*", choices=["jvm", "native", "udf"], help="default: every engine the session has"
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency section")
    parser.add_argument("--latency-case", help=argparse.SUPPRESS)  # internal: one latency case, as JSON
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)  # internal: with --latency-case
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats, args.layouts = 500_000, 1, ["array", "packed"]
    if args.latency_case:
        print("RESULT " + json.dumps(latency_case(args.latency_case, warm=args.warm)), flush=True)
        return 0

    families = [tuple(int(v) for v in f.split(",")) for f in args.families] if args.families else FAMILIES
    spark = local_session(
        "spark-mlt-bench", extra_conf={"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "6g"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    if Capabilities.of(spark).jvm_engine:
        ENGINES.insert(0, "jvm")
    engines = [e for e in ENGINES if args.engines is None or e in args.engines]
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
            spark,
            p,
            n,
            rows=args.rows,
            repeats=args.repeats,
            shapes=set(args.shapes),
            wanted=set(args.layouts),
            engines=engines,
        )
    spark.stop()
    summarise(cells, engines)
    if not args.no_latency:
        run_latency()
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
