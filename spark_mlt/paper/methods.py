"""The representations of the paper's Table 1 (and MLT tokens as categories), trained and
scored the same way: the shared head, Adam, binary cross-entropy, threshold 0.5.

Each method turns the train and test ratings into the model's inputs, builds its model and
says how the paper counts its parameters; :func:`run_method` trains and scores it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from spark_mlt.paper import models
from spark_mlt.paper.data import Ratings
from spark_mlt.paper.hashing import hashed_features

__all__ = ["DEFAULT_EPOCHS", "METHODS", "PAPER_FIGURES", "MethodResult", "run_method"]

HASH_WIDTH = 512

#: Epochs and batch size per method, as the paper's code trains them (the autoencoder: its own
#: 10 epochs, then the head's 10). MLT as categories (and token pairs) is ours: trained like
#: the embeddings.
DEFAULT_EPOCHS = {
    "one_hot": 3,
    "hashing": 3,
    "mlt": 10,
    "mlt_autoencoder": 10,
    "embeddings": 3,
    "mlt_categories": 3,
    "mlt_pairs": 3,
}
BATCH_SIZE = {"mlt": 2048}  # every other method: 1024

#: The paper's Table 1 and 2: dimensions, parameters, s/epoch, µs/sample, accuracy (MovieLens 20M).
PAPER_FIGURES: dict[str, dict[str, float | int | None]] = {
    "one_hot": {
        "dims": 164_320,
        "params": 0,
        "seconds_per_epoch": 5029.90,
        "us_per_sample": 427.03,
        "accuracy": 0.7418,
    },
    "hashing": {"dims": 512, "params": 0, "seconds_per_epoch": 144.27, "us_per_sample": 86.74, "accuracy": 0.5787},
    "mlt": {"dims": 14, "params": 0, "seconds_per_epoch": 65.04, "us_per_sample": 19.93, "accuracy": 0.6331},
    "mlt_autoencoder": {
        "dims": 16,
        "params": 79_758,
        "seconds_per_epoch": 2.13,
        "us_per_sample": 14.35,
        "accuracy": 0.6253,
    },
    "embeddings": {
        "dims": 32,
        "params": 5_287_648,
        "seconds_per_epoch": 410.55,
        "us_per_sample": 22.56,
        "accuracy": 0.7440,
    },
    # not in the paper
    "mlt_categories": dict.fromkeys(("dims", "params", "seconds_per_epoch", "us_per_sample", "accuracy")),
    "mlt_pairs": dict.fromkeys(("dims", "params", "seconds_per_epoch", "us_per_sample", "accuracy")),
}


@dataclass
class MethodResult:
    """One row of the report."""

    key: str
    name: str
    dims: int
    reversible: bool
    encoder_params: int
    head_params: int
    epochs: int
    seconds_per_epoch: float
    us_per_sample: float
    accuracy: float
    roc_auc: float
    log_loss: float
    exact_recovery: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Prepared:
    """A method's model and inputs, and what the report says of it."""

    model: Any
    train: Any
    test: Any
    dims: int
    encoder_params: int
    reversible: bool


def _index(train_ids: npt.NDArray[np.int64], ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """1-based positions of ``ids`` among the distinct training ids; 0 for ids unseen in training."""
    known = np.unique(train_ids)
    at = np.clip(np.searchsorted(known, ids), 0, len(known) - 1)
    return np.where(known[at] == ids, at + 1, 0)


def _one_hot(train: Ratings, test: Ratings) -> Prepared:
    users, movies = len(np.unique(train.users)), len(np.unique(train.movies))

    def inputs(r: Ratings) -> list[npt.NDArray[Any]]:
        u, m = _index(train.users, r.users), _index(train.movies, r.movies)
        indices = np.stack([np.maximum(u - 1, 0), users + np.maximum(m - 1, 0)], axis=1).astype(np.int32)
        return [indices, np.stack([u > 0, m > 0], axis=1).astype(np.float32)]  # unseen ids: no feature

    return Prepared(models.sparse_model(users + movies), inputs(train), inputs(test), users + movies, 0, False)


def _hashing(train: Ratings, test: Ratings) -> Prepared:
    def inputs(r: Ratings) -> list[npt.NDArray[Any]]:
        (ui, us), (mi, ms) = (
            hashed_features("user_", r.users, HASH_WIDTH),
            hashed_features("movie_", r.movies, HASH_WIDTH),
        )
        return [np.stack([ui, mi], axis=1), np.stack([us, ms], axis=1)]

    return Prepared(models.sparse_model(HASH_WIDTH), inputs(train), inputs(test), HASH_WIDTH, 0, False)


def _mlt(train: Ratings, test: Ratings) -> Prepared:
    mean = train.tokens.mean(axis=0)
    sd = train.tokens.std(axis=0)
    sd[sd == 0] = 1.0

    def inputs(r: Ratings) -> npt.NDArray[np.float32]:
        return np.asarray((r.tokens - mean) / sd, dtype=np.float32)

    dims = train.tokens.shape[1]
    return Prepared(models.numeric_model(dims), inputs(train), inputs(test), dims, 0, True)


def _embeddings(train: Ratings, test: Ratings) -> Prepared:
    users, movies = len(np.unique(train.users)), len(np.unique(train.movies))
    model = models.embedding_model(users, movies)
    params = (users + 1 + movies + 1) * models.EMBEDDING_WIDTH

    def inputs(r: Ratings) -> list[npt.NDArray[np.int32]]:
        return [
            _index(train.users, r.users).astype(np.int32)[:, None],
            _index(train.movies, r.movies).astype(np.int32)[:, None],
        ]

    return Prepared(model, inputs(train), inputs(test), 2 * models.EMBEDDING_WIDTH, params, False)


def _categories(train: Ratings, test: Ratings, *, pairs: bool = False) -> Prepared:
    p = max(codec.p for codec in train.codecs)
    model = models.mlt_categories_model(p, tuple(codec.n for codec in train.codecs), pairs=pairs)
    params = sum(layer.count_params() for layer in model.layers if layer.name.endswith("_embedding"))
    dims = sum(int(layer.output.shape[-1]) for layer in model.layers if layer.name.endswith("_embedding"))
    return Prepared(model, train.tokens.astype(np.int32), test.tokens.astype(np.int32), dims, params, True)


def _pairs(train: Ratings, test: Ratings) -> Prepared:
    return _categories(train, test, pairs=True)


METHODS: dict[str, tuple[str, Callable[[Ratings, Ratings], Prepared]]] = {
    "one_hot": ("One-hot", _one_hot),
    "hashing": ("Hashing (512)", _hashing),
    "mlt": ("MLT (tokens as numbers)", _mlt),
    "mlt_autoencoder": ("MLT + Autoencoder", _mlt),  # see run_autoencoder
    "embeddings": ("Supervised embeddings", _embeddings),
    "mlt_categories": ("MLT tokens as categories", _categories),
    "mlt_pairs": ("MLT tokens and token pairs as categories", _pairs),
}


def scores(labels: npt.NDArray[np.uint8], probabilities: npt.NDArray[np.float64]) -> tuple[float, float, float]:
    """Accuracy at 0.5, ROC AUC (scikit-learn's; NaN unless both classes occur) and log loss
    (scikit-learn's, on probabilities clipped to [1e-7, 1 - 1e-7] as Keras clips them).

    Example::

        >>> [round(x, 4) for x in scores(np.array([0, 1, 1], dtype=np.uint8), np.array([0.2, 0.4, 0.9]))]
        [0.6667, 1.0, 0.4149]
    """
    from sklearn.metrics import log_loss, roc_auc_score

    accuracy = float(np.mean((probabilities >= 0.5) == (labels == 1)))
    # one class only: older scikit-learn raises, newer warns and returns NaN; NaN without either
    auc = float(roc_auc_score(labels, probabilities)) if len(np.unique(labels)) == 2 else float("nan")
    loss = float(log_loss(labels, np.clip(probabilities, 1e-7, 1 - 1e-7), labels=[0, 1]))
    return accuracy, auc, loss


def _fit_and_score(
    model: Any, data: tuple[Any, Any, Ratings, Ratings], epochs: int, batch_size: int
) -> tuple[float, float, tuple[float, float, float]]:
    """Seconds per epoch, µs per predicted sample, and the test scores."""
    x_train, x_test, train, test = data
    started = time.perf_counter()
    model.fit(x_train, train.labels.astype(np.float32), epochs=epochs, batch_size=batch_size, shuffle=True, verbose=0)
    per_epoch = (time.perf_counter() - started) / max(epochs, 1)
    started = time.perf_counter()
    probabilities = np.asarray(model.predict(x_test, batch_size=8192, verbose=0), dtype=np.float64).ravel()
    per_sample = (time.perf_counter() - started) / max(len(test), 1) * 1e6
    return per_epoch, per_sample, scores(test.labels, probabilities)


def run_method(key: str, train: Ratings, test: Ratings, epochs: Mapping[str, int]) -> MethodResult:
    """Train and score one method (``key`` in :data:`METHODS`)."""
    if key == "mlt_autoencoder":
        return run_autoencoder(train, test, epochs.get(key, DEFAULT_EPOCHS[key]))
    name, prepare = METHODS[key]
    prepared = prepare(train, test)
    count = epochs.get(key, DEFAULT_EPOCHS[key])
    per_epoch, per_sample, (accuracy, auc, loss) = _fit_and_score(
        prepared.model, (prepared.train, prepared.test, train, test), count, BATCH_SIZE.get(key, 1024)
    )
    return MethodResult(
        key,
        name,
        prepared.dims,
        prepared.reversible,
        prepared.encoder_params,
        models.head_parameters(prepared.model),
        count,
        per_epoch,
        per_sample,
        accuracy,
        auc,
        loss,
    )


def exact_recovery(reconstruction: npt.NDArray[np.float64], test: Ratings) -> tuple[float, float, float]:
    """The share of test rows whose user and movie ids both come back exactly from the
    autoencoder's reconstruction (rounded to tokens, clipped to [0, p), MLT-decoded), and the
    share of user ids and of movie ids alone."""
    n = test.codecs[0].n
    recovered = []
    for part, (codec, ids) in enumerate(zip(test.codecs, (test.users, test.movies), strict=True)):
        block = reconstruction[:, :n] if part == 0 else reconstruction[:, n:]
        tokens = np.clip(np.rint(block), 0, codec.p - 1).astype(np.int32)
        decoded, valid = codec.decode_masked(tokens)
        recovered.append(valid & (decoded == ids))
    both = recovered[0] & recovered[1]
    return float(both.mean()), float(recovered[0].mean()), float(recovered[1].mean())


def run_autoencoder(train: Ratings, test: Ratings, epochs: int) -> MethodResult:
    """The paper's MLT+Autoencoder: the autoencoder learns to reconstruct the tokens
    (``epochs`` epochs, batch 1024, 10% validation), its frozen 16-wide codes feed the head
    (``epochs`` epochs, batch 1024); ids are recovered through decoder + rounding + MLT decode."""
    p = max(codec.p for codec in train.codecs)
    positions = train.tokens.shape[1]
    autoencoder = models.autoencoder(p, positions)
    x_train, x_test = train.tokens.astype(np.int32), test.tokens.astype(np.int32)
    started = time.perf_counter()
    autoencoder.fit(
        x_train, x_train.astype(np.float32), epochs=epochs, batch_size=1024, validation_split=0.1, verbose=0
    )
    pretrain = (time.perf_counter() - started) / max(epochs, 1)
    encoder = models.encoder_of(autoencoder)
    codes_train = encoder.predict(x_train, batch_size=8192, verbose=0)
    started = time.perf_counter()
    codes_test = encoder.predict(x_test, batch_size=8192, verbose=0)
    encode_us = (time.perf_counter() - started) / max(len(test), 1) * 1e6
    head = models.numeric_model(models.AE_BOTTLENECK)
    per_epoch, per_sample, (accuracy, auc, loss) = _fit_and_score(
        head, (codes_train, codes_test, train, test), epochs, 1024
    )
    reconstruction = np.asarray(autoencoder.predict(x_test, batch_size=8192, verbose=0), dtype=np.float64)
    both, users, movies = exact_recovery(reconstruction, test)
    return MethodResult(
        "mlt_autoencoder",
        METHODS["mlt_autoencoder"][0],
        models.AE_BOTTLENECK,
        both == 1.0,  # reversible only where every test id came back
        autoencoder.count_params(),
        models.head_parameters(head),
        epochs,
        per_epoch,
        encode_us + per_sample,
        accuracy,
        auc,
        loss,
        exact_recovery=both,
        extra={"autoencoder_seconds_per_epoch": pretrain, "user_recovery": users, "movie_recovery": movies},
    )
