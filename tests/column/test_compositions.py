"""The column functions composed the way notebooks and pipelines compose them.

Plans must stay small whatever the composition: the optimized plan's expression count is
held under a bound linear in n, and the worst codecs of each family run on a 1 GiB driver.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt import MLTCodec, MLTTypeError
from spark_mlt.column import mlt_decode, mlt_encode, register_mlt_functions
from spark_mlt.ml import MLTDecoder, MLTEncoder
from tests.support.marks import exhaustive_beyond
from tests.support.plans import expression_nodes

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)

CODECS = [(13, 6), (7, 7), (2, 40), (3, 30), (251, 8), (65521, 12), (2_147_483_647, 3)]


def _layouts(codec: MLTCodec) -> list[str]:
    bits = codec.packed_bits
    return ["array", "struct"] + (["packed"] if bits is not None and bits * codec.n <= 64 else [])


def _compositions(df: DataFrame, codec: MLTCodec, layout: str, engine: str) -> dict[str, DataFrame]:
    def enc(col: str | object) -> object:
        return mlt_encode(col, codec, layout=layout, engine=engine)  # type: ignore[arg-type]

    def dec(col: str | object) -> object:
        return mlt_decode(col, codec, layout=layout, engine=engine)  # type: ignore[arg-type]

    return {
        "decode(encode)": df.select("id", dec(enc("id")).alias("back")),  # type: ignore[arg-type]
        "withColumn chain": df.withColumn("t", enc("id")).withColumn("back", dec("t")),  # type: ignore[arg-type]
        "encode(decode(encode))": df.select(
            "id",
            dec(enc(dec(enc("id")))).alias("back"),  # type: ignore[arg-type]
        ),
    }


# The udf engine composes Python UDF calls, the same for every codec: two codecs prove it.
# The older lines run one small and one long codec natively and one through UDFs (tests.support.marks).
CASES = exhaustive_beyond(
    [(p, n, "native") for p, n in CODECS] + [(13, 6, "udf"), (2, 40, "udf")],
    kept={(13, 6, "native"), (2, 40, "native"), (13, 6, "udf")},
)


@pytest.mark.parametrize(("p", "n", "engine"), CASES)
def test_every_composition_round_trips_with_a_plan_linear_in_n(
    spark: SparkSession, engine: str, p: int, n: int
) -> None:
    """Each composition's optimized plan stays under a bound linear in n; the compositions of
    one and two functions run and round trip (the three-function one is their composition,
    so its plan is bounded and not run)."""
    codec = MLTCodec.from_seed(p, n)
    ids = [0, 1, codec.max_id, None, 12345 % (codec.max_id + 1)]
    df = spark.createDataFrame([(i,) for i in ids], "id bigint")
    for layout in _layouts(codec):
        for label, composed in _compositions(df, codec, layout, engine).items():
            nodes = expression_nodes(composed)
            functions = max(2, label.count("code"))  # the plan is the sum of its parts, each linear in n
            assert nodes <= functions * (200 * n + 1500), f"{layout} {label}: {nodes} expression nodes"
            if functions == 2:
                assert {(r.id, r.back) for r in composed.collect()} == {(i, i) for i in ids}, (layout, label)


def test_sql_functions_compose(spark: SparkSession) -> None:
    codec = MLTCodec.from_seed(2, 40)
    register_mlt_functions(spark, codec, "long_codec")
    spark.createDataFrame([(0,), (2**40 - 1,), (None,)], "id bigint").createOrReplaceTempView("long_ids")
    rows = spark.sql("SELECT id, mlt_decode_long_codec(mlt_encode_long_codec(id)) AS back FROM long_ids").collect()
    assert {(r.id, r.back) for r in rows} == {(0, 0), (2**40 - 1, 2**40 - 1), (None, None)}


@pytest.mark.parametrize("output", ["vector", "array", "struct", "packed"])
def test_ml_encoder_and_decoder_invert_each_other_with_default_params(
    spark: SparkSession, tmp_path: Path, output: str
) -> None:
    df = spark.createDataFrame([(1, 10), (2, 2000), (3, None)], "userId bigint, movieId bigint")
    encoder = MLTEncoder(inputCols=["userId", "movieId"], outputCols=["u", "m"], p=13, n=4)
    encoder.setLayout(output)
    model = Pipeline(stages=[encoder]).fit(df)
    codecs = model.stages[0].getCodecs()
    decoder = MLTDecoder.from_codecs(codecs, inputCols=["u", "m"], outputCols=["userBack", "movieBack"])
    pipeline = PipelineModel(stages=[*model.stages, decoder])
    pipeline.write().overwrite().save(str(tmp_path / "pipeline"))
    loaded = PipelineModel.load(str(tmp_path / "pipeline"))
    rows = loaded.transform(df).collect()
    assert [(r.userId, r.movieId) for r in rows] == [(r.userBack, r.movieBack) for r in rows]


def test_ml_decoder_names_the_column_and_type_when_it_holds_no_tokens(spark: SparkSession) -> None:
    df = spark.createDataFrame([("a",)], "t string")
    decoder = MLTDecoder.from_codecs([MLTCodec.from_seed(13, 4)], inputCols=["t"], outputCols=["id"])
    with pytest.raises(MLTTypeError, match=r"column 't' has type string, which is not a token column"):
        decoder.transform(df)
    wrong = MLTDecoder.from_codecs([MLTCodec.from_seed(13, 4)], inputCols=["t"], outputCols=["id"], layout="array")
    tokens = df.select(F.struct(F.lit(1).alias("t0")).alias("t"))
    with pytest.raises(MLTTypeError, match=r"has type struct<t0:int>.*set layout='struct'"):
        wrong.transform(tokens)


WORST_CODECS = textwrap.dedent(
    """
    import json, os, sys, time
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from spark_mlt import MLTCodec
    from spark_mlt.column import mlt_decode, mlt_encode

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "1g")
             .config("spark.ui.enabled", "false").getOrCreate())
    worst = {}
    for p, n in [(2, 63), (3, 39), (31, 12), (65521, 15), (2_147_483_647, 3)]:
        codec = MLTCodec.from_seed(p, n)
        df = spark.createDataFrame([(0,), (codec.max_id,), (None,)], "id bigint")
        bits = codec.packed_bits
        for layout in ["array"] + (["packed"] if bits and bits * n <= 64 else []):  # struct plans as array
            start = time.perf_counter()
            tokens = mlt_encode("id", codec, layout=layout)
            composed = df.select("id", mlt_decode(tokens, codec, layout=layout).alias("b"))
            composed._jdf.queryExecution().executedPlan()
            planned = time.perf_counter() - start
            assert all(r.id == r.b for r in composed.collect()), (p, n, layout)
            worst[f"{p},{n},{layout}"] = round(planned, 2)
    print("RESULT " + json.dumps(worst))
    """
)


@pytest.mark.slow
def test_the_worst_codec_of_each_family_composes_on_a_1_gib_driver() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", WORST_CODECS], capture_output=True, text=True, timeout=900, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(next(line for line in completed.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert len(result) == 7
    print(result)  # planning seconds per codec and layout, for the log (timed in benchmarks, not here)
