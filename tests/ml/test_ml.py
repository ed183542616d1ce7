"""Spark ML stages: fitting, transforming, Params, persistence and Pipelines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.feature import VectorAssembler
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.ml.param import Params
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from pyspark.testing import assertDataFrameEqual

from spark_mlt import MLTCodec, MLTTypeError, OptionError
from spark_mlt.errors import CodecFormatError
from spark_mlt.ml import MLTDecoder, MLTEncoder, MLTEncoderModel
from tests.support.spark_lines import QUERY_ERRORS

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)

CODEC = MLTCodec.from_seed(13, 2)


@pytest.fixture(scope="module")
def ratings(spark: SparkSession) -> DataFrame:
    rng = np.random.default_rng(0)
    users = rng.integers(1, 500, size=400)
    movies = rng.integers(1, 2000, size=400)
    label = ((users % 3) == 0).astype(float)
    rows = [(int(u), int(m), float(y)) for u, m, y in zip(users, movies, label, strict=True)]
    return spark.createDataFrame(rows, "userId int, movieId int, label double").cache()


@pytest.fixture(scope="module")
def ids(spark: SparkSession) -> DataFrame:
    """A valid id, an invalid one (negative) and a null one."""
    return spark.createDataFrame([(1,), (-3,), (None,)], "id int")


def param_values(stage: Params) -> dict[str, Any]:
    """The Params of a stage by name, set or default (comparable across uids)."""
    return {param.name: value for param, value in stage.extractParamMap().items()}


# --- fitting and transforming -------------------------------------------------------------


def test_fit_sizes_each_codec_from_the_largest_id(ratings: DataFrame) -> None:
    model = MLTEncoder(inputCols=["userId", "movieId"], p=7).fit(ratings)
    largest_user = ratings.agg(F.max("userId")).first()[0]
    largest_movie = ratings.agg(F.max("movieId")).first()[0]
    users, movies = model.getCodecs()
    assert users.p == movies.p == 7
    assert users.n == MLTCodec.for_cardinality(largest_user, p=7).n == 4  # 7^3 = 343 <= 499 < 2401
    assert movies.n == MLTCodec.for_cardinality(largest_movie, p=7).n


def test_fit_with_p_and_n_draws_the_codec_from_the_seed(ratings: DataFrame) -> None:
    model = MLTEncoder(inputCol="userId", p=11, n=3, seed=7).fit(ratings)
    assert model.getCodecs() == [MLTCodec.from_seed(11, 3, 7)]


def test_transform_adds_dense_vectors_of_scaled_tokens(ratings: DataFrame) -> None:
    model = MLTEncoder(inputCol="userId", outputCol="user_vec", p=13, n=3).fit(ratings)
    row = model.transform(ratings).select("userId", "user_vec").first()
    expected = MLTCodec.from_seed(13, 3).encode([row.userId])[0] / 12
    np.testing.assert_allclose(row.user_vec.toArray(), expected)


def test_model_keeps_the_column_params_in_the_form_given(ratings: DataFrame) -> None:
    single = MLTEncoder(inputCol="userId", p=7).fit(ratings)
    assert (single.getInputCol(), single.getOutputCol()) == ("userId", "userId_mlt")
    assert not single.isSet(single.inputCols)
    several = MLTEncoder(inputCols=["userId", "movieId"], p=7, layout="array", engine="udf").fit(ratings)
    assert several.getInputCols() == ["userId", "movieId"]
    assert several.getOutputCols() == ["userId_mlt", "movieId_mlt"]
    assert (several.getLayout(), several.getEngine(), several.getHandleInvalid()) == ("array", "udf", "error")


def test_several_columns_get_default_output_names_and_their_own_codecs(ratings: DataFrame) -> None:
    model = MLTEncoder(inputCols=["userId", "movieId"], p=13, layout="struct").fit(ratings)
    out = model.transform(ratings)
    assert out.columns == [*ratings.columns, "userId_mlt", "movieId_mlt"]
    decoded = MLTDecoder(codecs=model.getCodecs(), inputCols=["userId_mlt", "movieId_mlt"]).transform(out)
    assert decoded.columns[-2:] == ["userId_mlt_id", "movieId_mlt_id"]
    assert decoded.where("NOT (userId_mlt_id <=> userId AND movieId_mlt_id <=> movieId)").count() == 0


def test_fit_takes_a_param_map(ratings: DataFrame) -> None:
    encoder = MLTEncoder(inputCol="userId", p=7)
    model = encoder.fit(ratings, {encoder.layout: "packed"})
    assert model.getLayout() == "packed"
    assert dict(model.transform(ratings).dtypes)["userId_mlt"] == "bigint"
    assert encoder.getLayout() == "vector"


# --- handleInvalid ------------------------------------------------------------------------


def test_handle_invalid_skip_null_and_error(ids: DataFrame) -> None:
    common: dict[str, Any] = {"codecs": [CODEC.to_json()], "inputCols": ["id"], "outputCols": ["t"], "layout": "array"}
    kept = MLTEncoderModel(handleInvalid="null", **common).transform(ids).collect()
    assert [(r.id, r.t is None) for r in kept] == [(1, False), (-3, True), (None, True)]
    skipped = MLTEncoderModel(handleInvalid="skip", **common).transform(ids).collect()
    assert [r.id for r in skipped] == [1, None]
    with pytest.raises(QUERY_ERRORS, match=r"id -3 is outside"):
        MLTEncoderModel(handleInvalid="error", **common).transform(ids).collect()
    with pytest.raises(OptionError, match=r"handleInvalid must be one of 'error', 'null', 'skip'; got 'drop'"):
        MLTEncoderModel(handleInvalid="drop", **common).transform(ids)


def test_encoder_passes_handle_invalid_to_its_model(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1,), (5,), (None,)], "id int")
    encoder = MLTEncoder(inputCol="id", p=2, n=2, handleInvalid="skip")  # capacity 4: 5 is invalid
    assert [r.id for r in encoder.fit(df).transform(df).collect()] == [1, None]


def test_decoder_handles_invalid_token_vectors(spark: SparkSession) -> None:
    valid = [int(t) for t in CODEC.encode([7])[0]]
    tokens = spark.createDataFrame([(valid,), ([13, 0],), (None,)], "t array<int>")
    decoder = MLTDecoder(codecs=[CODEC], inputCol="t", outputCol="id")
    nulls = decoder.copy().setHandleInvalid("null").transform(tokens).collect()
    assert [r.id for r in nulls] == [7, None, None]
    skipped = decoder.copy().setHandleInvalid("skip").transform(tokens).collect()
    assert [(r.t, r.id) for r in skipped] == [(valid, 7), (None, None)]
    with pytest.raises(QUERY_ERRORS, match=r"is not a valid MLT code"):
        decoder.transform(tokens).collect()


def test_decoder_decodes_invalid_vectors_by_name_and_drops_its_staged_values(spark: SparkSession) -> None:
    codec = MLTCodec.from_seed(13, 4)
    good = codec.encode([777])[0] / 12
    schema = StructType([StructField("v", VectorUDT()), StructField("__spark_mlt_values_0", StringType())])
    vectors = [good, [1.5, *good[1:]], [float("nan"), *good[1:]], good[:-1]]  # token 18; NaN; too short
    rows = [(Vectors.dense(v), "mine") for v in vectors] + [
        (Vectors.sparse(4, dict(enumerate(good))), "mine"),
        (None, ""),
    ]
    df = spark.createDataFrame(rows, schema)
    decoder = MLTDecoder(codecs=[codec], inputCol="v", outputCol="id", handleInvalid="null")
    decoded = decoder.transform(df)
    assert decoded.columns == ["v", "__spark_mlt_values_0", "id"]  # a user's column of the staging name is kept
    assert [(r.id, r["__spark_mlt_values_0"]) for r in decoded.collect()] == [
        (777, "mine"),
        (None, "mine"),
        (None, "mine"),
        (None, "mine"),
        (777, "mine"),
        (None, ""),
    ]
    assert [r.id for r in decoder.copy().setHandleInvalid("skip").transform(df).collect()] == [777, 777, None]
    with pytest.raises(QUERY_ERRORS, match=r"column 'v': token vector \[18, .*\] is not a valid MLT code"):
        decoder.copy().setHandleInvalid("error").transform(df.limit(2)).collect()


# --- decoder layouts ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "type_name"),
    [("vector", "vector"), ("array", "array<int>"), ("struct", "struct<t0:int,t1:int,t2:int>"), ("packed", "bigint")],
)
def test_decoder_reads_the_layout_from_the_column_type(ratings: DataFrame, layout: str, type_name: str) -> None:
    model = MLTEncoder(inputCol="userId", p=13, n=3, layout=layout).fit(ratings)
    tokens = model.transform(ratings)
    assert dict(tokens.dtypes)["userId_mlt"] == type_name
    decoder = MLTDecoder(codecs=model.getCodecs(), inputCol="userId_mlt", outputCol="back")
    assert decoder.getLayout() == "auto"
    assert tokens.count() == decoder.transform(tokens).where("back = userId").count()
    explicit = decoder.copy().setLayout(layout).transform(tokens)
    assert explicit.where("NOT (back <=> userId)").count() == 0


def test_decoder_names_the_column_its_type_and_the_fix(spark: SparkSession) -> None:
    text = spark.createDataFrame([("a",)], "t string")
    decoder = MLTDecoder(codecs=[CODEC], inputCols=["t"], outputCols=["id"])
    with pytest.raises(MLTTypeError, match=r"column 't' has type string, which is not a token column"):
        decoder.transform(text)
    tokens = text.select(F.struct(F.lit(1).alias("t0")).alias("t"))
    with pytest.raises(MLTTypeError, match=r"has type struct<t0:int>.*set layout='struct'") as caught:
        decoder.setLayout("array").transform(tokens)
    assert caught.value.parameter == "layout"


# --- Params: setters, getters, checks -----------------------------------------------------

SETTERS: list[tuple[Callable[[], Params], str, Any]] = [
    *[
        (stage, name, value)
        for stage in (MLTEncoder, MLTEncoderModel, MLTDecoder)
        for name, value in [
            ("InputCol", "a"),
            ("OutputCol", "b"),
            ("InputCols", ["a", "c"]),
            ("OutputCols", ["b", "d"]),
            ("HandleInvalid", "skip"),
            ("Engine", "udf"),
            ("Layout", "struct"),
        ]
    ],
    (MLTEncoder, "P", 11),
    (MLTEncoder, "N", 3),
    (MLTEncoder, "Seed", 7),
    (MLTEncoderModel, "Codecs", [CODEC]),
    (MLTDecoder, "Codecs", [CODEC]),
    (MLTDecoder, "Layout", "auto"),
]


@pytest.mark.parametrize(("stage", "name", "value"), SETTERS)
def test_every_param_has_a_setter_and_a_getter(stage: Callable[[], Params], name: str, value: Any) -> None:
    instance = stage()
    assert getattr(instance, f"set{name}")(value) is instance
    assert getattr(instance, f"get{name}")() == value


def test_defaults() -> None:
    encoder = MLTEncoder()
    assert (encoder.getLayout(), encoder.getHandleInvalid(), encoder.getEngine()) == ("vector", "error", "auto")
    assert (encoder.getP(), encoder.getN(), encoder.getSeed()) == (None, None, 42)
    assert MLTEncoderModel().getLayout() == "vector"
    assert MLTDecoder().getLayout() == "auto"
    with pytest.raises(OptionError, match=r"codecs must be set") as caught:
        MLTDecoder(inputCol="userId").getCodecs()
    assert caught.value.parameter == "codecs"


def test_set_params_is_keyword_only_and_returns_the_stage() -> None:
    encoder = MLTEncoder()
    assert encoder.setParams(inputCols=["a"], p=5, layout="array") is encoder
    assert (encoder.getInputCols(), encoder.getP(), encoder.getLayout()) == (["a"], 5, "array")
    model = MLTEncoderModel().setParams(codecs=[CODEC.to_json()], inputCol="a")
    assert model.getCodecs() == [CODEC]
    assert MLTDecoder().setParams(layout="packed").getLayout() == "packed"
    with pytest.raises(TypeError, match=r"forces keyword arguments"):
        encoder.setParams("a")


@pytest.mark.parametrize(
    ("make", "parameter"),
    [
        (lambda: MLTEncoder(layout="auto"), "layout"),
        (lambda: MLTEncoderModel().setLayout("dense"), "layout"),
        (lambda: MLTDecoder(layout="dense"), "layout"),
        (lambda: MLTEncoder(handleInvalid="quarantine"), "handleInvalid"),
        (lambda: MLTDecoder().setHandleInvalid("drop"), "handleInvalid"),
        (lambda: MLTEncoderModel(handleInvalid="keep"), "handleInvalid"),  # Spark's keep: an extra bucket
        (lambda: MLTEncoderModel(engine="java"), "engine"),
        (lambda: MLTDecoder().setEngine("java"), "engine"),
    ],
)
def test_unknown_option_values_fail_when_set(make: Callable[[], Params], parameter: str) -> None:
    with pytest.raises(OptionError, match=rf"^{parameter} must be one of") as caught:
        make()
    assert caught.value.parameter == parameter


def test_columns_must_be_configured() -> None:
    with pytest.raises(OptionError, match=r"inputCol or inputCols must be set") as caught:
        MLTEncoderModel(codecs=[])._columns()
    assert caught.value.parameter == "inputCol"
    with pytest.raises(OptionError, match=r"inputCols has 2 columns but outputCols has 1") as caught:
        MLTEncoder(inputCols=["a", "b"], outputCols=["x"])._columns()
    assert caught.value.parameter == "inputCols"
    with pytest.raises(OptionError, match=r"set either inputCol or inputCols, not both") as caught:
        MLTDecoder(inputCol="a", inputCols=["b"])._columns()
    assert caught.value.parameter == "inputCols"
    with pytest.raises(OptionError, match=r"outputCols goes with inputCols") as caught:
        MLTEncoder(inputCol="a", outputCols=["b"])._columns()
    assert caught.value.parameter == "outputCols"


def test_codecs_must_match_the_input_columns(ids: DataFrame) -> None:
    model = MLTEncoderModel(codecs=[CODEC, CODEC], inputCol="id")
    with pytest.raises(OptionError, match=r"codecs has 2 codecs for 1 input columns") as caught:
        model.transform(ids)
    assert caught.value.parameter == "codecs"


def test_codecs_are_set_from_objects_or_json_and_validated() -> None:
    model = MLTEncoderModel().setCodecs([CODEC, MLTCodec.from_seed(7, 4).to_json()])
    assert model.getCodecs() == [CODEC, MLTCodec.from_seed(7, 4)]
    assert model.getOrDefault(model.codecs) == [CODEC.to_json(), MLTCodec.from_seed(7, 4).to_json()]
    with pytest.raises(CodecFormatError, match=r"not valid JSON"):
        model.setCodecs(["{broken"])
    with pytest.raises(TypeError, match=r"codecs must be MLTCodec objects or their JSON documents, got int"):
        model.setCodecs([3])  # type: ignore[list-item]


# --- persistence and pipelines ------------------------------------------------------------


def test_encoder_persists_its_params(ratings: DataFrame, tmp_path: Path) -> None:
    encoder = MLTEncoder(inputCols=["userId", "movieId"], p=7, seed=3, layout="struct", handleInvalid="skip")
    encoder.save(str(tmp_path / "encoder"))
    loaded = MLTEncoder.load(str(tmp_path / "encoder"))
    assert loaded.uid == encoder.uid
    assert param_values(loaded) == param_values(encoder)
    assertDataFrameEqual(loaded.fit(ratings).transform(ratings), encoder.fit(ratings).transform(ratings))


def test_model_and_decoder_persist_with_codecs_as_json(ratings: DataFrame, tmp_path: Path) -> None:
    model = MLTEncoder(inputCols=["userId", "movieId"], outputCols=["u", "m"], p=7, layout="array").fit(ratings)
    model.write().overwrite().save(str(tmp_path / "model"))
    metadata = next((tmp_path / "model" / "metadata").glob("part-*")).read_text()
    assert "spark-mlt/codec" in metadata
    loaded = MLTEncoderModel.load(str(tmp_path / "model"))
    assert loaded.getCodecs() == model.getCodecs()
    assert param_values(loaded) == param_values(model)
    assertDataFrameEqual(loaded.transform(ratings), model.transform(ratings))

    decoder = MLTDecoder.from_codecs(loaded.getCodecs(), inputCols=["u", "m"], outputCols=["u_id", "m_id"])
    decoder.write().overwrite().save(str(tmp_path / "decoder"))
    loaded_decoder = MLTDecoder.load(str(tmp_path / "decoder"))
    assert param_values(loaded_decoder) == param_values(decoder)
    decoded = loaded_decoder.transform(loaded.transform(ratings))
    assert decoded.where("NOT (u_id <=> userId AND m_id <=> movieId)").count() == 0
    assertDataFrameEqual(decoded, decoder.transform(model.transform(ratings)))


def test_pipeline_with_vector_assembler_fits_saves_and_loads(ratings: DataFrame, tmp_path: Path) -> None:
    pipeline = Pipeline(
        stages=[
            MLTEncoder(inputCols=["userId", "movieId"], p=7),
            VectorAssembler(inputCols=["userId_mlt", "movieId_mlt"], outputCol="features"),
        ]
    )
    pipeline.write().overwrite().save(str(tmp_path / "pipeline"))
    model = Pipeline.load(str(tmp_path / "pipeline")).fit(ratings)
    model.write().overwrite().save(str(tmp_path / "model"))
    loaded = PipelineModel.load(str(tmp_path / "model"))
    assert isinstance(loaded.stages[0], MLTEncoderModel)
    assert loaded.stages[0].getCodecs() == model.stages[0].getCodecs()
    features = loaded.transform(ratings)
    assertDataFrameEqual(features, model.transform(ratings))
    assert features.first().features.size == sum(codec.n for codec in model.stages[0].getCodecs())


def test_pipeline_with_logistic_regression_fits_saves_loads_and_predicts(ratings: DataFrame, tmp_path: Path) -> None:
    pipeline = Pipeline(
        stages=[
            MLTEncoder(inputCols=["userId", "movieId"], outputCols=["user_mlt", "movie_mlt"], p=7),
            VectorAssembler(inputCols=["user_mlt", "movie_mlt"], outputCol="features"),
            LogisticRegression(maxIter=20),
        ]
    )
    model = pipeline.fit(ratings)
    model.write().overwrite().save(str(tmp_path / "pipeline"))
    loaded = PipelineModel.load(str(tmp_path / "pipeline"))
    before = model.transform(ratings).select("userId", "movieId", "prediction")
    after = loaded.transform(ratings).select("userId", "movieId", "prediction")
    assertDataFrameEqual(before, after)
    assert after.count() == ratings.count()
    assert after.where("prediction IS NULL").count() == 0
