"""The paper's Table 1 reproduction: model sizes as the paper counts them, the hashing trick as
scikit-learn computes it, compositional MLT embeddings (a code per id from its tokens only) and
the QR trick, the metrics, the label rule, epochs chosen on validation, and a small seeded run
of every method from a tokenized Delta table through the ``spark-mlt paper`` command."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import SparkSession

from spark_mlt import MLTCodec
from spark_mlt.batch import MovieLensOptions, generate_synthetic, tokenize_movielens
from spark_mlt.batch.cli import main
from spark_mlt.column import mlt_encode
from spark_mlt.errors import MLTError, OptionError
from spark_mlt.models import COMBINATIONS, QR_INIT, composition_settings, mlt_compositional_model
from spark_mlt.paper import METHODS, PaperOptions
from spark_mlt.paper import models as paper_models
from spark_mlt.paper.data import LABEL_RULE_PROPERTY, Ratings, load_ratings, split
from spark_mlt.paper.hashing import hashed_features
from spark_mlt.paper.methods import PATIENCE, run_method, scores
from spark_mlt.storage import read_snapshot, write_delta


def test_the_autoencoder_has_the_papers_79758_parameters_for_p47_n7() -> None:
    assert paper_models.autoencoder(47, 14).count_params() == 79_758
    for p, n in [(13, 6), (101, 3)]:
        assert paper_models.autoencoder(p, 2 * n).count_params() == 16 * p + 8450 * n + 19_856


def test_supervised_embeddings_have_the_papers_5287648_parameters_for_ml20m() -> None:
    model = paper_models.embedding_model(138_493, 26_744)
    embeddings = sum(layer.count_params() for layer in model.layers if layer.name.endswith("_embedding"))
    assert embeddings == 5_287_648
    assert paper_models.head_parameters(model) == 64 * 64 + 64 + 64 * 32 + 32 + 33


def test_the_sparse_first_layer_is_dense_on_the_one_hot_vector() -> None:
    """relu(sum_k v_k W[i_k] + b) equals relu(x @ W + b) for the sparse vector x."""
    model = paper_models.sparse_model(10)
    assert paper_models.head_parameters(model) == 10 * 64 + 64 + 64 * 32 + 32 + 33
    layer = model.get_layer("head_1")
    kernel, bias = (np.asarray(w) for w in layer.get_weights())
    indices = np.array([[1, 7], [3, 3], [0, 9]], dtype=np.int32)
    values = np.array([[1, 1], [1, -1], [0, 1]], dtype=np.float32)
    dense = np.zeros((3, 10), dtype=np.float32)
    for row in range(3):
        for index, value in zip(indices[row], values[row], strict=True):
            dense[row, index] += value
    expected = np.maximum(dense @ kernel + bias, 0)
    got = np.asarray(layer(indices, values))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("combination", COMBINATIONS)
@pytest.mark.parametrize("code_width", [2, 0])
def test_compositional_embeddings_give_every_id_its_own_code_from_its_tokens_only(
    combination: str, code_width: int
) -> None:
    """All 125 token tuples of a (p=5, n=3) column get distinct codes from freshly drawn weights
    (a code is a polynomial in the weights, equal for two ids only on a null set of them, where
    hashed ids share a row whatever the weights; trained tables are counted by the every-method
    test); a column's code does not move when the other column's tokens do; parameters per
    column as the module's formulas count them, plus each column's projection to a 2-number
    code (none when the code is the whole 4-wide vector)."""
    Model = paper_models.keras_module().Model  # noqa: N806 - the Keras class; JAX chosen first
    model = mlt_compositional_model(((5, 3), (7, 2)), combination=combination, rank=4, code_width=code_width)
    tables = [5 * 4 + 2 * 5 * 4**2, 7 * 4 + 1 * 7 * 4**2] if combination == "path" else [3 * 5 * 4, 2 * 7 * 4]
    projections = 2 * (4 * code_width + code_width)
    assert paper_models.encoder_parameters(model) == sum(tables) + projections
    assert model.get_layer("user_code").output.shape[-1] == (code_width or 4)
    users = np.array([[a, b, c] for a in range(5) for b in range(5) for c in range(5)], dtype=np.int32)
    coder = Model(model.inputs, model.get_layer("user_code").output)
    codes = [
        np.asarray(coder.predict(np.hstack([users, np.full((125, 2), movie, np.int32)]), verbose=0)) for movie in (0, 6)
    ]
    assert len(np.unique(codes[0], axis=0)) == 125
    np.testing.assert_array_equal(codes[0], codes[1])


def test_the_qr_combination_multiplies_one_row_per_token_position_drawn_for_n_factors() -> None:
    """qr's vector for tokens (a, b, c) is rows[a] * rows[p + b] * rows[2p + c], and its rows start
    uniform in +-b_n with (b_n / sqrt 3)^n = (0.05 / sqrt 3)^2: a product of n rows as small as the
    QR trick's product of two Keras Embedding rows."""
    Model = paper_models.keras_module().Model  # noqa: N806 - the Keras class; JAX chosen first
    model = mlt_compositional_model(((5, 3), (7, 2)), combination="qr", rank=4, code_width=0)
    rows = np.asarray(model.get_layer("user_composition").get_weights()[0])
    assert rows.shape == (3 * 5, 4)
    bound = 3**0.5 * (QR_INIT / 3**0.5) ** (2 / 3)
    assert 0.5 * bound < np.abs(rows).max() <= bound
    tokens = np.array([[0, 4, 2, 1, 6], [3, 3, 3, 0, 0]], dtype=np.int32)
    vectors = np.asarray(Model(model.inputs, model.get_layer("user_code").output).predict(tokens, verbose=0))
    expected = rows[tokens[:, 0]] * rows[5 + tokens[:, 1]] * rows[10 + tokens[:, 2]]
    np.testing.assert_allclose(vectors, expected, rtol=1e-5)


def test_the_qr_trick_multiplies_the_rows_of_quotient_and_remainder() -> None:
    """Index i of a column with 611 rows reads row i // 25 of one table and i % 25 of the other
    (m = ceil(sqrt(611)) = 25) and multiplies them: (25 + 25) * 32 parameters; 9,000 rows: 95 + 95."""
    Model = paper_models.keras_module().Model  # noqa: N806 - the Keras class; JAX chosen first
    model = paper_models.qr_model((611, 9000))
    assert paper_models.encoder_parameters(model) == (25 + 25) * 32 + (95 + 95) * 32
    quotient, remainder = (np.asarray(model.get_layer(f"user_qr_{part}_embedding").get_weights()[0]) for part in (0, 1))
    index = np.array([0, 24, 25, 610], dtype=np.int32)[:, None]
    vectors = np.asarray(Model(model.inputs, model.get_layer("user_qr").output).predict([index, index], verbose=0))
    np.testing.assert_allclose(vectors, quotient[index[:, 0] // 25] * remainder[index[:, 0] % 25], rtol=1e-6)


def test_a_hashed_feature_is_murmurhash3_of_the_prefixed_id() -> None:
    """Index |h| mod 512 and sign of h, h the signed MurmurHash3 of ``<prefix><id>``; ids in
    any order and repeated get their own feature."""
    from sklearn.utils import murmurhash3_32

    ids = np.array([5, 3, 5, *range(0, 3000, 7), 138_493], dtype=np.int64)
    for prefix in ("user_", "movie_"):
        index, sign = hashed_features(prefix, ids, 512)
        hashes = np.array([murmurhash3_32(f"{prefix}{i}", positive=False) for i in ids.tolist()])
        np.testing.assert_array_equal(index, np.abs(hashes) % 512)
        np.testing.assert_array_equal(sign, np.where(hashes >= 0, 1.0, -1.0))
        assert (index.dtype, sign.dtype) == (np.int32, np.float32)


def test_the_hashing_baseline_keeps_its_features() -> None:
    """Pins the features the hand-written MurmurHash3 gave before scikit-learn computed them
    (identical for every id below 300,000): a change here changes the paper's baseline."""
    index, sign = hashed_features("user_", np.array([1, 2, 3, 138_493]), 512)
    assert (index.tolist(), sign.tolist()) == ([315, 212, 121, 500], [-1.0, 1.0, 1.0, 1.0])
    index, sign = hashed_features("movie_", np.array([1, 2, 3, 131_262]), 512)
    assert (index.tolist(), sign.tolist()) == ([21, 368, 245, 235], [1.0, 1.0, -1.0, -1.0])
    index, sign = hashed_features("user_", np.array([], dtype=np.int64), 512)
    assert (index.shape, sign.shape) == ((0,), (0,))


def test_scores_are_accuracy_at_one_half_auc_and_clipped_log_loss() -> None:
    labels = np.array([1, 0, 1, 0], dtype=np.uint8)
    accuracy, auc, loss = scores(labels, np.array([0.5, 0.49, 0.9, 0.2]))
    assert (accuracy, auc) == (1.0, 1.0)  # 0.5 counts as positive; a perfect ranking
    assert loss == pytest.approx(-np.mean(np.log([0.5, 0.51, 0.9, 0.8])))
    assert scores(labels, np.array([0.1, 0.9, 0.2, 0.8]))[:2] == (0.0, 0.0)
    assert scores(labels, np.full(4, 0.3))[1] == 0.5  # ties share their rank
    _, auc, loss = scores(np.array([1, 1], dtype=np.uint8), np.array([0.0, 1.0]))
    assert np.isnan(auc)  # one class: AUC undefined, no error
    assert loss == pytest.approx(-np.log(1e-7) / 2)  # a sure miss is clipped to 1e-7, not infinite


def test_paper_options_name_the_field_at_fault() -> None:
    with pytest.raises(OptionError, match=r"methods must be one of .*got 'pca'") as caught:
        PaperOptions(methods=("pca",))
    assert caught.value.parameter == "methods"
    with pytest.raises(MLTError, match=r"epochs: mlt must train for a whole number of epochs >= 1, got 0") as caught:
        PaperOptions(epochs={"mlt": 0})
    assert caught.value.parameter == "epochs"
    with pytest.raises(MLTError, match=r"test_fraction must be in \(0, 1\)") as caught:
        PaperOptions(test_fraction=1.0)
    assert caught.value.parameter == "test_fraction"
    with pytest.raises(MLTError, match=r"validation_fraction must be in \(0, 1\), got 0") as caught:
        PaperOptions(validation_fraction=0)
    assert caught.value.parameter == "validation_fraction"
    with pytest.raises(OptionError, match=r"epoch_selection must be one of .*got 'best'") as caught:
        PaperOptions(epoch_selection="best")  # type: ignore[arg-type]
    assert caught.value.parameter == "epoch_selection"
    combinations = r"mlt_combination must be one of 'qr', 'path', 'product'; got 'sum'"
    with pytest.raises(OptionError, match=combinations) as caught:
        PaperOptions(mlt_combination="sum")  # type: ignore[arg-type]
    assert caught.value.parameter == "mlt_combination"
    for name in ("mlt_rank", "max_epochs"):
        with pytest.raises(MLTError, match=rf"{name} must be a whole number >= 1, got 0") as caught:
            PaperOptions(**{name: 0})  # type: ignore[arg-type]
        assert caught.value.parameter == name
    with pytest.raises(MLTError, match=r"mlt_code_width must be a whole number >= 0 \(0: the whole vector\), got -1"):
        PaperOptions(mlt_code_width=-1)


@pytest.fixture(scope="module")
def tokenized(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A synthetic release (planted user and movie effects) tokenized as the paper does: p=47, n=7."""
    work = tmp_path_factory.mktemp("paper")
    folder = generate_synthetic(work / "ml", ratings=6_000, users=300, movies=200)
    table = str(work / "ratings_mlt")
    tokenize_movielens(spark, str(folder), table, MovieLensOptions(p=47, n=7))
    return table


def test_the_movielens_job_records_its_label_rule(tokenized: str) -> None:
    assert read_snapshot(tokenized).properties[LABEL_RULE_PROPERTY] == "rating >= 4"
    ratings = load_ratings(tokenized, limit=1000)
    assert (len(ratings), ratings.tokens.shape, ratings.table_label_rule) == (1000, (1000, 14), "rating >= 4")


def test_appending_labels_of_another_rule_is_refused_naming_the_flag(
    tokenized: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=50, users=5, movies=5)
    argv = ["movielens", "--input", str(folder), "--output", tokenized, "--mode", "append", "--label-threshold", "3.5"]
    assert main(argv) == 1
    assert "--label-threshold: the table at" in capsys.readouterr().err


def test_a_table_that_records_no_label_rule_is_reported_as_unknown(spark: SparkSession, tmp_path: Path) -> None:
    codec = MLTCodec.from_seed(7, 7)
    df = spark.createDataFrame([(1, 2, 4.5), (3, 4, 2.0)], "userId bigint, movieId bigint, rating double")
    df = df.withColumn("userId_mlt", mlt_encode("userId", codec)).withColumn(
        "movieId_mlt", mlt_encode("movieId", codec)
    )
    write_delta(df, str(tmp_path / "old"), {"userId": codec, "movieId": codec})
    ratings = load_ratings(str(tmp_path / "old"))
    assert ratings.table_label_rule.startswith("unknown")
    assert ratings.labels.tolist() == [1, 0]
    assert ratings.tokens[0].tolist() == [*codec.encode([1])[0], *codec.encode([2])[0]]


def test_the_split_is_seeded_and_disjoint(tokenized: str) -> None:
    """Train and test together hold every row of the table once; the seed fixes the split."""
    ratings = load_ratings(tokenized)
    train, test = split(ratings, seed=42)
    again, _ = split(ratings, seed=42)
    other, _ = split(ratings, seed=7)
    assert (len(train), len(test)) == (4800, 1200)

    def rows(*parts: Ratings) -> list[tuple[int, ...]]:
        return sorted(
            (int(u), int(m), int(y), *map(int, t))
            for part in parts
            for u, m, y, t in zip(part.users, part.movies, part.labels, part.tokens, strict=True)
        )

    assert rows(train, test) == rows(ratings)
    np.testing.assert_array_equal(train.users, again.users)
    np.testing.assert_array_equal(train.movies, again.movies)
    assert rows(other) != rows(train)


def test_epochs_chosen_on_validation_have_the_lowest_validation_log_loss(tokenized: str) -> None:
    """Each epoch is scored on a validation split of the training rows (10%, drawn apart from
    the test split); training stops PATIENCE epochs after the best, and the method is then
    retrained on all training rows for the best epoch's count."""
    train, test = split(load_ratings(tokenized), seed=42)
    result = run_method("mlt", train, test, PaperOptions(epoch_selection="validation", max_epochs=6))
    validation = result.validation
    assert validation is not None
    losses = [loss for _, _, _, loss in validation["curve"]]
    best = int(np.argmin(losses))
    assert result.epochs == validation["epochs"] == best + 1
    assert validation["log_loss"] == losses[best]
    assert len(losses) == min(best + 1 + PATIENCE, 6)
    assert validation["rows"] == 480  # 10% of the 4,800 training rows
    fixed = run_method("mlt", train, test, PaperOptions(epochs={"mlt": 1}))
    assert (fixed.epochs, fixed.validation) == (1, None)


@pytest.mark.slow
def test_every_method_trains_and_is_reported(tokenized: str, tmp_path: Path) -> None:
    """The command reads tokens and codecs from the table, trains each method for one epoch
    and writes the report: every method, its sizes as the paper counts them, and scores."""
    epochs = [f"{method}=1" for method in METHODS]
    assert main(["paper", "--input", tokenized, "--output", str(tmp_path), "--epochs", *epochs]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    rows = {row["key"]: row for row in report["methods"]}
    assert list(rows) == list(METHODS)
    assert report["meta"]["label_rule"] == report["meta"]["table_label_rule"] == "rating >= 4"
    assert (report["meta"]["rows"], report["meta"]["train_rows"], report["meta"]["test_rows"]) == (6000, 4800, 1200)
    assert rows["mlt"]["dims"] == 14
    assert rows["mlt_autoencoder"]["encoder_params"] == 79_758
    assert 0 <= rows["mlt_autoencoder"]["exact_recovery"] <= 1
    assert rows["mlt_categories"]["encoder_params"] == 14 * 47 * 8
    assert rows["mlt_pairs"]["encoder_params"] == 14 * 47 * 8 + 12 * 47**2 * 8  # 6 neighbour pairs per id
    ids = load_ratings(tokenized)
    train, _ = split(ids, seed=42)
    id_counts = (len(np.unique(train.users)), len(np.unique(train.movies)))
    # the default: qr, its whole vector the code, its rank within 5% of the training ids' embeddings
    rank, _ = composition_settings("qr", None, None, codecs=((47, 7), (47, 7)), id_counts=id_counts)
    assert rows["mlt_compositional"]["encoder_params"] == 2 * 7 * 47 * rank
    assert rows["mlt_compositional"]["dims"] == 2 * rank
    assert rows["mlt_compositional"]["extra"]["distinct_codes"] == {
        "user": [len(np.unique(ids.users))] * 2,
        "movie": [len(np.unique(ids.movies))] * 2,
    }
    qr_rows = [len(np.unique(part)) + 1 for part in (train.users, train.movies)]  # + the unseen id's row
    qr_tables = [-(-count // (math.isqrt(count - 1) + 1)) + math.isqrt(count - 1) + 1 for count in qr_rows]
    assert rows["qr_embeddings"]["encoder_params"] == 32 * sum(qr_tables)
    assert rows["hashing"]["dims"] == 512
    for row in rows.values():
        assert 0 < row["accuracy"] <= 1
        assert 0 <= row["roc_auc"] <= 1  # not NaN: the test split holds both labels
        assert row["log_loss"] > 0
        assert row["seconds_per_epoch"] > 0
        assert row["us_per_sample"] > 0
    assert "| MLT tokens as categories |" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_without_the_paper_extra_the_command_says_what_to_install(tmp_path: Path) -> None:
    """Keras made unimportable in a fresh interpreter: one line naming the pip command."""
    script = (
        "import sys; sys.modules['keras'] = None; from spark_mlt.batch.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    table = tmp_path  # exists: the missing extra is what fails, before anything is read
    completed = subprocess.run(
        [sys.executable, "-c", script, "paper", "--input", str(table), "--output", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert completed.returncode == 1
    assert "pip install 'spark-mlt[paper]'" in completed.stderr.strip().splitlines()[-1]
