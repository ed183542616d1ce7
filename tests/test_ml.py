"""Spark ML stages: fitting, transforming, persistence and a full Pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.feature import VectorAssembler
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark_mlt import MLTCodec, MLTTypeError
from spark_mlt.ml import MLTDecoder, MLTEncoder, MLTEncoderModel
from tests.support.spark_lines import QUERY_ERRORS

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)


@pytest.fixture(scope="module")
def ratings(spark: SparkSession) -> DataFrame:
    rng = np.random.default_rng(0)
    users = rng.integers(1, 500, size=400)
    movies = rng.integers(1, 2000, size=400)
    label = ((users % 3) == 0).astype(float)
    rows = [(int(u), int(m), float(y)) for u, m, y in zip(users, movies, label, strict=True)]
    return spark.createDataFrame(rows, "userId int, movieId int, label double").cache()


def test_fit_sizes_each_codec_from_the_largest_id(ratings: DataFrame) -> None:
    model = MLTEncoder(inputCols=["userId", "movieId"], p=7).fit(ratings)
    largest_user = ratings.agg(F.max("userId")).first()[0]
    largest_movie = ratings.agg(F.max("movieId")).first()[0]
    users, movies = model.getCodecs()
    assert users.p == movies.p == 7
    assert users.n == MLTCodec.for_cardinality(largest_user, p=7).n == 4  # 7^3 = 343 <= 499 < 2401
    assert movies.n == MLTCodec.for_cardinality(largest_movie, p=7).n


def test_transform_adds_dense_vectors_of_scaled_tokens(ratings: DataFrame) -> None:
    model = MLTEncoder(inputCol="userId", outputCol="user_vec", p=13, n=3).fit(ratings)
    row = model.transform(ratings).select("userId", "user_vec").first()
    expected = MLTCodec.from_seed(13, 3).encode([row.userId])[0] / 12
    np.testing.assert_allclose(row.user_vec.toArray(), expected)


def test_handle_invalid_skip_keep_and_error(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1,), (-3,), (None,)], "id int")
    codecs = [MLTCodec.from_seed(13, 2).to_json()]
    common = {"codecs": codecs, "inputCols": ["id"], "outputCols": ["t"], "outputFormat": "array"}
    kept = MLTEncoderModel(handleInvalid="keep", **common).transform(df).collect()
    assert [(r.id, r.t is None) for r in kept] == [(1, False), (-3, True), (None, True)]
    skipped = MLTEncoderModel(handleInvalid="skip", **common).transform(df).collect()
    assert [r.id for r in skipped] == [1, None]
    with pytest.raises(QUERY_ERRORS, match=r"id -3 is outside"):
        MLTEncoderModel(handleInvalid="error", **common).transform(df).collect()
    with pytest.raises(MLTTypeError, match=r"handleInvalid must be 'error', 'skip' or 'keep', got 'drop'"):
        MLTEncoderModel(handleInvalid="drop", **common).transform(df)


def test_model_and_decoder_persist_with_codecs_as_json(ratings: DataFrame, tmp_path: Path) -> None:
    model = MLTEncoder(inputCols=["userId", "movieId"], outputCols=["u", "m"], p=7, outputFormat="array").fit(ratings)
    model.write().overwrite().save(str(tmp_path / "model"))
    metadata = next((tmp_path / "model" / "metadata").glob("part-*")).read_text()
    assert '"spark-mlt/codec"' in metadata or "spark-mlt/codec" in metadata
    loaded = MLTEncoderModel.load(str(tmp_path / "model"))
    assert loaded.getCodecs() == model.getCodecs()
    assertDataFrameEqual(loaded.transform(ratings), model.transform(ratings))

    decoder = MLTDecoder.from_codecs(loaded.getCodecs(), inputCols=["u", "m"], outputCols=["u_id", "m_id"])
    decoder.write().overwrite().save(str(tmp_path / "decoder"))
    decoded = MLTDecoder.load(str(tmp_path / "decoder")).transform(loaded.transform(ratings))
    assert decoded.where("u_id <> userId OR m_id <> movieId").count() == 0


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


def test_columns_must_be_configured() -> None:
    with pytest.raises(MLTTypeError, match=r"inputCol or inputCols must be set"):
        MLTEncoderModel(codecs=[])._columns()
    with pytest.raises(MLTTypeError, match=r"inputCols has 2 columns but outputCols has 1"):
        MLTEncoder(inputCols=["a", "b"], outputCols=["x"])._columns()
