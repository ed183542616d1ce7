"""The paper's models in Keras 3 (JAX backend, CPU): the representations of Table 1, MLT tokens
as categories and the quotient-remainder trick, each under the shared head.

Every representation maps a batch of compact integer inputs (ids, hashed indices, tokens) to a
vector the shared head reads; nothing as wide as the one-hot vector is ever materialised. One-hot
and hashing are sparse vectors with two non-zeros (a user's and a movie's), so their product with
the head's first Dense layer is the sum of two rows of its weight matrix:
[`sparse_model`][spark_mlt.paper.models.sparse_model] computes exactly that (``sum_k value_k *
W[index_k] + b``), the same function and the same parameter count as ``Dense(64)`` on the
164,320-wide vector.

Parameters are counted as the paper counts them: a representation's own weights (the embeddings; the
whole autoencoder, BatchNorm statistics included), apart from the head's. Keras is imported on first
use ([`keras_module`][spark_mlt.paper.models.keras_module]): it is the optional ``paper`` extra.

Compositional MLT embeddings, ours, are the public model of
[`spark_mlt.models`][spark_mlt.models] (which this module's models share the head with); the
paper's job builds them with the training split's id counts, so their default rank keeps within
5% of the supervised embeddings' parameters on any release.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

from spark_mlt.errors import MissingExtraError
from spark_mlt.models import EMBEDDING_WIDTH, HEAD_UNITS, compiled, head, load_keras

__all__ = [
    "autoencoder",
    "embedding_model",
    "encoder_of",
    "encoder_parameters",
    "head_parameters",
    "keras_module",
    "mlt_categories_model",
    "numeric_model",
    "qr_model",
    "sparse_model",
]

AE_TOKEN_WIDTH = 16  # the paper's autoencoder: Embedding(p, 16) per token
AE_BOTTLENECK = 16
CATEGORY_WIDTH = 8  # MLT tokens as categories: a learned 8-wide vector per (position, token)


def keras_module() -> Any:
    """Keras 3, on the JAX backend unless ``KERAS_BACKEND`` names another; or, when the
    ``paper`` extra (Keras, JAX, scikit-learn) is not installed, an error that says what to
    install. Callers use it first, to fail before any work."""
    keras = load_keras()
    if importlib.util.find_spec("sklearn") is None:  # imported where used: hashing.py, methods.scores
        raise MissingExtraError("the paper's hashing and metrics need scikit-learn: pip install 'spark-mlt[paper]'")
    return keras


def _sparse_dense(keras: Any, width: int) -> Any:
    """A Dense(64, relu) layer over a ``width``-wide sparse vector given as (index, value)
    pairs: ``relu(sum_k value_k * W[index_k] + b)``, W of shape (width, 64)."""

    class SparseDense(keras.layers.Layer):  # type: ignore[misc]
        def build(self, input_shape: Any) -> None:
            self.kernel = self.add_weight(shape=(width, HEAD_UNITS[0]), initializer="glorot_uniform", name="kernel")
            self.bias = self.add_weight(shape=(HEAD_UNITS[0],), initializer="zeros", name="bias")

        def call(self, indices: Any, values: Any) -> Any:
            rows = keras.ops.take(self.kernel, indices, axis=0)
            return keras.ops.relu(keras.ops.sum(rows * keras.ops.expand_dims(values, -1), axis=1) + self.bias)

    return SparseDense(name="head_1")


def head_parameters(model: Any) -> int:
    """The weights of the shared head (its three Dense layers, or the sparse first layer)."""
    return sum(layer.count_params() for layer in model.layers if layer.name.startswith("head_"))


def encoder_parameters(model: Any) -> int:
    """The representation's own trained weights: every weight of ``model`` outside the head."""
    return int(model.count_params()) - head_parameters(model)


def sparse_model(width: int, nonzeros: int = 2) -> Any:
    """The head over a ``width``-wide sparse vector given as ``nonzeros`` (index, value) pairs
    per row: one-hot (values 1, or 0 for an unknown id) and the hashing trick (values +-1).

    Inputs: ``indices`` (int32, rows x nonzeros) and ``values`` (float32, rows x nonzeros).
    """
    keras = keras_module()
    indices = keras.Input((nonzeros,), dtype="int32", name="indices")
    values = keras.Input((nonzeros,), dtype="float32", name="values")
    first = _sparse_dense(keras, width)(indices, values)
    return compiled(keras, [indices, values], head(keras, None, first), "sparse")


def numeric_model(dims: int) -> Any:
    """The head over ``dims`` standardised numbers (the paper's MLT: tokens as floats)."""
    keras = keras_module()
    features = keras.Input((dims,), dtype="float32", name="features")
    return compiled(keras, features, head(keras, features), "numeric")


def embedding_model(users: int, movies: int) -> Any:
    """Supervised id embeddings: Embedding(users + 1, 32) and Embedding(movies + 1, 32) (the
    extra row for ids unseen in training), concatenated, trained with the head."""
    keras = keras_module()
    user = keras.Input((1,), dtype="int32", name="user")
    movie = keras.Input((1,), dtype="int32", name="movie")
    u = keras.layers.Flatten()(keras.layers.Embedding(users + 1, EMBEDDING_WIDTH, name="user_embedding")(user))
    m = keras.layers.Flatten()(keras.layers.Embedding(movies + 1, EMBEDDING_WIDTH, name="movie_embedding")(movie))
    features = keras.layers.Concatenate()([u, m])
    return compiled(keras, [user, movie], head(keras, features), "embeddings")


def qr_model(rows: tuple[int, ...]) -> Any:
    """The quotient-remainder trick (Shi et al., KDD 2020) on each id column's dense index
    (``rows[c]`` indexes, 0 for ids unseen in training): index i is split into ``i // m`` and
    ``i % m`` with ``m = ceil(sqrt(rows))``, each part gets a 32-wide row and the column's
    vector is their element-wise product: ``(ceil(rows / m) + m) * 32`` parameters a column.
    Collision-free like MLT, but on a dense re-indexing of the ids (a vocabulary as large as
    the ids), not on tokens stored with the data."""
    keras = keras_module()
    inputs, vectors = [], []
    for column, count in zip(("user", "movie"), rows, strict=True):
        index = keras.Input((1,), dtype="int32", name=column)
        m = math.isqrt(count - 1) + 1  # ceil(sqrt(count)): m * m >= count
        parts = []
        for part, (size, split) in enumerate([(-(-count // m), lambda i, m=m: i // m), (m, lambda i, m=m: i % m)]):
            value = keras.layers.Lambda(split, name=f"{column}_qr_{part}")(index)
            table = keras.layers.Embedding(size, EMBEDDING_WIDTH, name=f"{column}_qr_{part}_embedding")
            parts.append(keras.layers.Flatten()(table(value)))
        inputs.append(index)
        vectors.append(keras.layers.Multiply(name=f"{column}_qr")(parts))
    return compiled(keras, inputs, head(keras, keras.layers.Concatenate()(vectors)), "qr_embeddings")


def _category(keras: Any, tokens: Any, name: str, index: Any, entries: int) -> Any:
    """An 8-wide learned embedding of one categorical value computed from the tokens."""
    value = keras.layers.Lambda(index, name=f"{name}_value")(tokens)
    return keras.layers.Flatten()(keras.layers.Embedding(entries, CATEGORY_WIDTH, name=f"{name}_embedding")(value))


def mlt_categories_model(p: int, blocks: tuple[int, ...], *, pairs: bool = False) -> Any:
    """MLT tokens as categories: each token position gets its own small embedding
    (Embedding(p, 8): ``8 p`` parameters per position), concatenated into the head's input.
    With ``pairs``, each two neighbouring tokens of one id (``blocks`` gives the ids' token
    counts) also get an embedding of their combination (Embedding(p^2, 8)), so the head sees
    which token values occur together, not only each alone.
    """
    keras = keras_module()
    positions = sum(blocks)
    tokens = keras.Input((positions,), dtype="int32", name="tokens")
    parts = [_category(keras, tokens, f"token_{j}", lambda t, j=j: t[:, j : j + 1], p) for j in range(positions)]
    if pairs:
        starts = [sum(blocks[:b]) for b in range(len(blocks))]
        for j in (j for start, n in zip(starts, blocks, strict=True) for j in range(start, start + n - 1)):
            index = lambda t, j=j: t[:, j : j + 1] * p + t[:, j + 1 : j + 2]  # noqa: E731 - one line per pair
            parts.append(_category(keras, tokens, f"pair_{j}", index, p * p))
    name = "mlt_pairs" if pairs else "mlt_categories"
    return compiled(keras, tokens, head(keras, keras.layers.Concatenate()(parts)), name)


def _residual(keras: Any, x: Any, units: int, dropout: float, name: str) -> Any:
    """Dense(units, relu, L2 1e-4) -> BatchNorm -> Dropout, plus a shortcut (a linear
    projection where the width changes), added, then relu."""
    y = keras.layers.Dense(
        units, activation="relu", kernel_regularizer=keras.regularizers.L2(1e-4), name=f"{name}_dense"
    )(x)
    y = keras.layers.BatchNormalization(name=f"{name}_norm")(y)
    y = keras.layers.Dropout(dropout, name=f"{name}_dropout")(y)
    shortcut = x if x.shape[-1] == units else keras.layers.Dense(units, name=f"{name}_projection")(x)
    return keras.layers.Activation("relu", name=f"{name}_out")(keras.layers.Add(name=f"{name}_add")([y, shortcut]))


def autoencoder(p: int, positions: int) -> Any:
    """The paper's MLT autoencoder over ``positions`` tokens in [0, p): Embedding(p, 16) per
    token, residual blocks 128 and 32, a linear 16-wide bottleneck (layer ``bottleneck``),
    the mirrored decoder and a linear reconstruction of the token values; MSE, Adam.
    ``count_params()`` is ``16 p + 8450 n + 19,856`` for ``positions = 2 n``.
    """
    keras = keras_module()
    tokens = keras.Input((positions,), dtype="int32", name="tokens")
    x = keras.layers.Flatten()(keras.layers.Embedding(p, AE_TOKEN_WIDTH, name="token_embedding")(tokens))
    x = _residual(keras, x, 128, 0.3, "encoder_1")
    x = _residual(keras, x, 32, 0.2, "encoder_2")
    code = keras.layers.Dense(AE_BOTTLENECK, name="bottleneck")(x)
    y = _residual(keras, code, 32, 0.2, "decoder_1")
    y = _residual(keras, y, 128, 0.3, "decoder_2")
    reconstruction = keras.layers.Dense(positions, name="reconstruction")(y)
    model = keras.Model(tokens, reconstruction, name="mlt_autoencoder")
    model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    return model


def encoder_of(model: Any) -> Any:
    """The autoencoder's encoder: tokens in, the 16-wide bottleneck out (weights shared)."""
    keras = keras_module()
    return keras.Model(model.inputs, model.get_layer("bottleneck").output, name="mlt_encoder")
