"""The representations of the paper's Table 1, ours (MLT tokens as categories, compositional
MLT embeddings) and the quotient-remainder trick, trained and scored the same way: the shared
head, Adam, binary cross-entropy, threshold 0.5.

Each method turns the train and test ratings into the model's inputs, builds its model and says how
the paper counts its parameters; [`run_method`][spark_mlt.paper.methods.run_method] trains and
scores it, for a fixed number of epochs or for the number that gave the lowest log loss on a
validation split carved from the training split (then retrained on the whole training split, and
tested once).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from spark_mlt.models import EMBEDDING_WIDTH, composition_settings, mlt_compositional_model
from spark_mlt.paper import models
from spark_mlt.paper.data import Ratings, split
from spark_mlt.paper.hashing import hashed_features
from spark_mlt.paper.options import DEFAULT_EPOCHS, PaperOptions

log = logging.getLogger("spark_mlt.paper")

__all__ = ["DEFAULT_EPOCHS", "METHODS", "PAPER_FIGURES", "MethodResult", "run_method", "scores"]

HASH_WIDTH = 512

BATCH_SIZE = {"mlt": 2048}  # every other method: 1024
#: Choosing epochs on validation stops this many epochs after the best one.
PATIENCE = 3

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
    **{
        key: dict.fromkeys(("dims", "params", "seconds_per_epoch", "us_per_sample", "accuracy"))
        for key in ("mlt_categories", "mlt_pairs", "mlt_compositional", "qr_embeddings")
    },
}


@dataclass
class MethodResult:
    """One row of the report. ``validation``, when epochs were chosen on a validation split:
    the chosen count, its validation scores and every epoch's (``curve``)."""

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
    validation: dict[str, Any] | None = None


@dataclass(frozen=True)
class Prepared:
    """A method's model and inputs, and what the report says of it: ``name`` if the method's
    setting belongs in it, ``encode_us`` per sample spent before the model (the autoencoder's
    encoder), ``check`` what to measure on the trained model (``extra`` of the result)."""

    model: Any
    train: Any
    test: Any
    dims: int
    encoder_params: int
    reversible: bool
    name: str | None = None
    encode_us: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    exact_recovery: float | None = None
    check: Callable[[Any], dict[str, Any]] | None = None


def _index(train_ids: npt.NDArray[np.int64], ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """1-based positions of ``ids`` among the distinct training ids; 0 for ids unseen in training."""
    known = np.unique(train_ids)
    at = np.clip(np.searchsorted(known, ids), 0, len(known) - 1)
    return np.where(known[at] == ids, at + 1, 0)


def _one_hot(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    users, movies = len(np.unique(train.users)), len(np.unique(train.movies))

    def inputs(r: Ratings) -> list[npt.NDArray[Any]]:
        u, m = _index(train.users, r.users), _index(train.movies, r.movies)
        indices = np.stack([np.maximum(u - 1, 0), users + np.maximum(m - 1, 0)], axis=1).astype(np.int32)
        return [indices, np.stack([u > 0, m > 0], axis=1).astype(np.float32)]  # unseen ids: no feature

    return Prepared(models.sparse_model(users + movies), inputs(train), inputs(test), users + movies, 0, False)


def _hashing(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    def inputs(r: Ratings) -> list[npt.NDArray[Any]]:
        (ui, us), (mi, ms) = (
            hashed_features("user_", r.users, HASH_WIDTH),
            hashed_features("movie_", r.movies, HASH_WIDTH),
        )
        return [np.stack([ui, mi], axis=1), np.stack([us, ms], axis=1)]

    return Prepared(models.sparse_model(HASH_WIDTH), inputs(train), inputs(test), HASH_WIDTH, 0, False)


def _mlt(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    mean = train.tokens.mean(axis=0)
    sd = train.tokens.std(axis=0)
    sd[sd == 0] = 1.0

    def inputs(r: Ratings) -> npt.NDArray[np.float32]:
        return np.asarray((r.tokens - mean) / sd, dtype=np.float32)

    dims = train.tokens.shape[1]
    return Prepared(models.numeric_model(dims), inputs(train), inputs(test), dims, 0, True)


def _id_inputs(train: Ratings) -> Callable[[Ratings], list[npt.NDArray[np.int32]]]:
    """The 1-based indexes of a split's users and movies among the training ids (0: unseen)."""

    def inputs(r: Ratings) -> list[npt.NDArray[np.int32]]:
        return [
            _index(train.users, r.users).astype(np.int32)[:, None],
            _index(train.movies, r.movies).astype(np.int32)[:, None],
        ]

    return inputs


def _embeddings(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    users, movies = len(np.unique(train.users)), len(np.unique(train.movies))
    model = models.embedding_model(users, movies)
    inputs = _id_inputs(train)
    return Prepared(model, inputs(train), inputs(test), 2 * EMBEDDING_WIDTH, models.encoder_parameters(model), False)


def _qr(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    rows = (len(np.unique(train.users)) + 1, len(np.unique(train.movies)) + 1)  # + the unseen id's row
    model = models.qr_model(rows)
    inputs = _id_inputs(train)
    return Prepared(model, inputs(train), inputs(test), 2 * EMBEDDING_WIDTH, models.encoder_parameters(model), False)


def _categories(train: Ratings, test: Ratings, options: PaperOptions, *, pairs: bool = False) -> Prepared:
    p = max(codec.p for codec in train.codecs)
    model = models.mlt_categories_model(p, tuple(codec.n for codec in train.codecs), pairs=pairs)
    dims = sum(int(layer.output.shape[-1]) for layer in model.layers if layer.name.endswith("_embedding"))
    tokens = train.tokens.astype(np.int32), test.tokens.astype(np.int32)
    return Prepared(model, *tokens, dims, models.encoder_parameters(model), True)


def _pairs(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    return _categories(train, test, options, pairs=True)


def _compositional(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    codecs = tuple((codec.p, codec.n) for codec in train.codecs)
    combination = options.mlt_combination
    # the default rank follows the release: within budget of the embeddings the training ids would need
    id_counts = (len(np.unique(train.users)), len(np.unique(train.movies)))
    rank, width = composition_settings(
        combination, options.mlt_rank, options.mlt_code_width, codecs=codecs, id_counts=id_counts
    )
    model = mlt_compositional_model(codecs, combination=combination, rank=rank, code_width=width)
    code = f"code {width}" if width else "whole vector"

    def check(trained: Any) -> dict[str, Any]:
        return {"distinct_codes": distinct_codes(trained, train, test)}

    return Prepared(
        model,
        train.tokens.astype(np.int32),
        test.tokens.astype(np.int32),
        len(codecs) * (width or rank),
        models.encoder_parameters(model),
        True,
        name=f"{METHODS['mlt_compositional'][0]} ({combination}, rank {rank}, {code})",
        check=check,
    )


def distinct_codes(model: Any, *parts: Ratings) -> dict[str, list[int]]:
    """Per id column, [distinct codes, distinct ids] over the ids of ``parts``: a compositional
    model gives every id its own code when the two are equal."""
    keras = models.keras_module()
    tokens = np.concatenate([part.tokens for part in parts]).astype(np.int32)
    counts, start = {}, 0
    for column, codec in zip(("user", "movie"), parts[0].codecs, strict=True):
        ids = np.unique(tokens[:, start : start + codec.n], axis=0)
        batch = np.zeros((len(ids), tokens.shape[1]), dtype=np.int32)
        batch[:, start : start + codec.n] = ids  # a column's code reads only its own tokens
        coder = keras.Model(model.inputs, model.get_layer(f"{column}_code").output)
        codes = np.asarray(coder.predict(batch, batch_size=8192, verbose=0))
        counts[column] = [len(np.unique(codes, axis=0)), len(ids)]
        start += codec.n
    return counts


def _autoencoder(train: Ratings, test: Ratings, options: PaperOptions) -> Prepared:
    """The paper's MLT+Autoencoder: the autoencoder learns to reconstruct the tokens (its own
    epochs, batch 1024, 10% validation); its frozen 16-wide codes are the head's input; ids are
    recovered through decoder + rounding + MLT decode."""
    epochs = options.epochs.get("mlt_autoencoder", DEFAULT_EPOCHS["mlt_autoencoder"])
    p = max(codec.p for codec in train.codecs)
    autoencoder = models.autoencoder(p, train.tokens.shape[1])
    x_train, x_test = train.tokens.astype(np.int32), test.tokens.astype(np.int32)
    started = time.perf_counter()
    log.info("mlt_autoencoder: pretraining the autoencoder, %d epoch(s)", epochs)
    autoencoder.fit(
        x_train,
        x_train.astype(np.float32),
        epochs=epochs,
        batch_size=1024,
        validation_split=0.1,
        **progress("mlt_autoencoder (autoencoder)"),
    )
    pretrain = (time.perf_counter() - started) / epochs
    encoder = models.encoder_of(autoencoder)
    codes_train = encoder.predict(x_train, batch_size=8192, verbose=0)
    started = time.perf_counter()
    codes_test = encoder.predict(x_test, batch_size=8192, verbose=0)
    encode_us = (time.perf_counter() - started) / max(len(test), 1) * 1e6
    reconstruction = np.asarray(autoencoder.predict(x_test, batch_size=8192, verbose=0), dtype=np.float64)
    both, users, movies = exact_recovery(reconstruction, test)
    return Prepared(
        models.numeric_model(models.AE_BOTTLENECK),
        codes_train,
        codes_test,
        models.AE_BOTTLENECK,
        autoencoder.count_params(),
        both == 1.0,  # reversible only where every test id came back
        encode_us=encode_us,
        exact_recovery=both,
        extra={
            "autoencoder_epochs": epochs,
            "autoencoder_seconds_per_epoch": pretrain,
            "user_recovery": users,
            "movie_recovery": movies,
        },
    )


#: Each method's name in the report and how it prepares its features (one per ``Method``).
METHODS: dict[str, tuple[str, Callable[[Ratings, Ratings, PaperOptions], Prepared]]] = {
    "one_hot": ("One-hot", _one_hot),
    "hashing": ("Hashing (512)", _hashing),
    "mlt": ("MLT (tokens as numbers)", _mlt),
    "mlt_autoencoder": ("MLT + Autoencoder", _autoencoder),
    "embeddings": ("Supervised embeddings", _embeddings),
    "mlt_categories": ("MLT tokens as categories", _categories),
    "mlt_pairs": ("MLT tokens and token pairs as categories", _pairs),
    "mlt_compositional": ("MLT compositional embeddings", _compositional),
    "qr_embeddings": ("QR trick (ids, not tokens)", _qr),
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


def progress(label: str) -> dict[str, Any]:
    """``fit`` arguments that report each epoch: Keras' progress bar on a terminal, else one
    ``spark_mlt.paper`` log line per epoch (loss and accuracy); nothing when that logger is quiet."""
    if not log.isEnabledFor(logging.INFO):
        return {"verbose": 0}
    if sys.stdout.isatty():
        return {"verbose": 1}

    def report(epoch: int, logs: dict[str, float] | None) -> None:
        scores = ", ".join(f"{name} {value:.4f}" for name, value in (logs or {}).items())
        log.info("%s: epoch %d done: %s", label, epoch + 1, scores)

    callback = models.keras_module().callbacks.LambdaCallback(on_epoch_end=report)
    return {"verbose": 0, "callbacks": [callback]}


def _fit(prepared: Prepared, labels: npt.NDArray[np.uint8], epochs: int, batch_size: int, label: str) -> float:
    """Train ``epochs`` more epochs, reporting each
    ([`progress`][spark_mlt.paper.methods.progress]); seconds per epoch."""
    started = time.perf_counter()
    prepared.model.fit(
        prepared.train, labels.astype(np.float32), epochs=epochs, batch_size=batch_size, shuffle=True, **progress(label)
    )
    return (time.perf_counter() - started) / epochs


def _predict(prepared: Prepared) -> tuple[npt.NDArray[np.float64], float]:
    """The test inputs' probabilities and the µs per sample it took (with the encoder's)."""
    started = time.perf_counter()
    probabilities = np.asarray(prepared.model.predict(prepared.test, batch_size=8192, verbose=0), dtype=np.float64)
    per_sample = (time.perf_counter() - started) / max(len(probabilities), 1) * 1e6
    return probabilities.ravel(), prepared.encode_us + per_sample


def choose_epochs(key: str, train: Ratings, options: PaperOptions) -> dict[str, Any]:
    """The epoch count of method ``key`` with the lowest log loss on a validation split (a
    ``validation_fraction`` of ``train``, drawn with ``seed + 1``), trained on the rest for up to
    ``max_epochs``, stopping [`PATIENCE`][spark_mlt.paper.methods.PATIENCE] epochs after the best; with that epoch's
    validation scores and every epoch's (``curve``: epoch, accuracy, ROC AUC, log loss)."""
    fit, held = split(train, test_fraction=options.validation_fraction, seed=options.seed + 1)
    models.keras_module().utils.set_random_seed(options.seed)
    prepared = METHODS[key][1](fit, held, options)
    curve: list[tuple[int, float, float, float]] = []
    best = 0
    for epoch in range(1, options.max_epochs + 1):
        _fit(prepared, fit.labels, 1, BATCH_SIZE.get(key, 1024), f"{key} (choosing epochs, {epoch})")
        curve.append((epoch, *scores(held.labels, _predict(prepared)[0])))
        log.info("%s: validation epoch %d: log loss %.4f", key, epoch, curve[-1][3])
        if curve[-1][3] < curve[best][3]:
            best = epoch - 1
        elif epoch - 1 - best >= PATIENCE:
            break
    _, accuracy, auc, loss = curve[best]
    return {
        "epochs": best + 1,
        "rows": len(held),
        "accuracy": accuracy,
        "roc_auc": auc,
        "log_loss": loss,
        "curve": [list(point) for point in curve],
    }


def run_method(key: str, train: Ratings, test: Ratings, options: PaperOptions) -> MethodResult:
    """Train and score one method (``key`` in [`METHODS`][spark_mlt.paper.methods.METHODS]) as
    ``options`` say: its fixed epochs, or the count
    [`choose_epochs`][spark_mlt.paper.methods.choose_epochs] picks; the weights start from
    ``options.seed``."""
    validation = choose_epochs(key, train, options) if options.epoch_selection == "validation" else None
    epochs = validation["epochs"] if validation else options.epochs.get(key, DEFAULT_EPOCHS[key])
    models.keras_module().utils.set_random_seed(options.seed)
    name, prepare = METHODS[key]
    prepared = prepare(train, test, options)
    log.info("%s: training %d epoch(s) on %d rows", key, epochs, len(train))
    per_epoch = _fit(prepared, train.labels, epochs, BATCH_SIZE.get(key, 1024), key)
    probabilities, per_sample = _predict(prepared)
    accuracy, auc, loss = scores(test.labels, probabilities)
    extra = {**prepared.extra, **(prepared.check(prepared.model) if prepared.check else {})}
    return MethodResult(
        key,
        prepared.name or name,
        prepared.dims,
        prepared.reversible,
        prepared.encoder_params,
        models.head_parameters(prepared.model),
        epochs,
        per_epoch,
        per_sample,
        accuracy,
        auc,
        loss,
        exact_recovery=prepared.exact_recovery,
        extra=extra,
        validation=validation,
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
