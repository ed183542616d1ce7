"""The paper's models in Keras 3 (JAX backend, CPU): the shared head, the representations of
Table 1, MLT tokens as categories, and compositional MLT embeddings.

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

Compositional MLT embeddings
([`mlt_compositional_model`][spark_mlt.paper.models.mlt_compositional_model]) give every id its own
vector from its n tokens and ``O(n p r^2)`` weights instead of one row per id. Token position j
splits the ids into p classes (the ids whose j-th token is t); since the tokens are a bijection of
the id, the n partitions are *complementary* (Shi et al., KDD 2020, "Compositional Embeddings Using
Complementary Partitions"; the quotient-remainder trick is the two-partition case): only one id lies
in all of its n classes, so a combination of one small table per position that can tell the n rows
apart is a per-id vector. Three combinations:

* ``qr`` (default): the plain element-wise product ``v = A_1[t_1] * ... * A_n[t_n]`` of one
  r-wide row per position, the quotient-remainder trick's operation over n partitions instead
  of two: ``n p r`` parameters. Its rows start uniform in ``+-b_n``, ``b_n`` chosen so that a
  product of n of them is as small as the QR trick's product of two Keras Embedding rows
  ([`QR_INIT`][spark_mlt.paper.models.QR_INIT]): with Keras' own ``+-0.05`` a product of 5 rows starts near 1e-8 and
  learns slowly (67.5% validation accuracy after 20 epochs at p = 13, rank 64, against 70.3%).
* ``path``: a row vector from the first token's table, multiplied by one ``r x r``
  matrix per further token, ``v = a[t_1] (I + B_2[t_2]) ... (I + B_n[t_n])``: the path-based
  composition, linear (a tensor train over the token positions, as TT-Rec factors embedding
  tables). Its parameters: ``p r + (n - 1) p r^2``.
* ``product``: the element-wise product ``v = (1 + A_1[t_1]) * ... * (1 + A_n[t_n])`` of one
  r-wide row per position (the compositional embeddings' multiplicative operation): ``n p r``.

The id's code, what the head reads, is the whole r-wide vector (code width 0, as the QR trick feeds
its product to the head) or a learned projection of it to a few numbers.
[`COMPOSITION_DEFAULTS`][spark_mlt.paper.models.COMPOSITION_DEFAULTS] gives each combination's rank
and code width. Chosen on ml-latest-small's validation splits (carved from the training split; split
seeds 42 to 44; the job's default codec, p = 13, n = 3 and 5): ``qr`` at rank 128, code width 0
(13,312 parameters) reached 70.55% validation accuracy and ROC AUC 0.7800, 0.66 points and 0.006
below the supervised embeddings (71.21%, 0.7856); the path at rank 12 with a 2-number code, the
earlier default (11,596 parameters), 70.12% and 0.7725. The path and the product take a 2-number
code: with the whole vector the path lost 1.4 points (69.1% against 70.5%, seed 42), and a 2-number
code made ``qr`` unstable (65.1% on one seed of three at p = 31). The path's and the product's
tables are stored divided by [`TABLE_STEP`][spark_mlt.paper.models.TABLE_STEP] and multiplied back,
so Adam (at its default rate, as every method) moves them ``TABLE_STEP`` times further per step: a
row is shared by every id that holds its token, and at the default step the path needed 18 epochs to
reach the validation loss it had after 4 with a step of 10.
"""

from __future__ import annotations

import importlib.util
import math
import os
from typing import Any, Literal, get_args

from spark_mlt.errors import MissingExtraError

__all__ = [
    "COMBINATIONS",
    "COMPOSITION_DEFAULTS",
    "Combination",
    "autoencoder",
    "composition_settings",
    "embedding_model",
    "encoder_of",
    "encoder_parameters",
    "head_parameters",
    "keras_module",
    "mlt_categories_model",
    "mlt_compositional_model",
    "numeric_model",
    "qr_model",
    "sparse_model",
]

HEAD_UNITS = (64, 32)
EMBEDDING_WIDTH = 32  # the paper's supervised embeddings, per id column
AE_TOKEN_WIDTH = 16  # the paper's autoencoder: Embedding(p, 16) per token
AE_BOTTLENECK = 16
CATEGORY_WIDTH = 8  # MLT tokens as categories: a learned 8-wide vector per (position, token)
#: How compositional MLT embeddings combine the rows of an id's tokens (see the module docstring).
Combination = Literal["qr", "path", "product"]
COMBINATIONS: tuple[Combination, ...] = get_args(Combination)
#: Per combination, the default rank (width of the tables' vectors; the path's r x r matrices)
#: and code width (numbers per id the head reads; 0: the whole vector), chosen on validation.
COMPOSITION_DEFAULTS = {"qr": (128, 0), "path": (12, 2), "product": (12, 2)}
TABLE_STEP = 10.0  # path and product store their tables divided by this: Adam moves them this much faster
#: qr's rows start so that a product of n of them is as small as one of two rows uniform in
#: +-QR_INIT (Keras' Embedding initialiser, the QR trick's tables).
QR_INIT = 0.05


def keras_module() -> Any:
    """Keras 3, on the JAX backend unless ``KERAS_BACKEND`` names another; or, when the
    ``paper`` extra (Keras, JAX, scikit-learn) is not installed, an error that says what to
    install. Callers use it first, to fail before any work."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        import keras
    except ImportError as exc:
        raise MissingExtraError(
            f"the paper's models need Keras 3 and JAX: pip install 'spark-mlt[paper]' ({exc})"
        ) from None
    if importlib.util.find_spec("sklearn") is None:  # imported where used: hashing.py, methods.scores
        raise MissingExtraError("the paper's hashing and metrics need scikit-learn: pip install 'spark-mlt[paper]'")
    return keras


def _head(keras: Any, features: Any, first: Any = None) -> Any:
    """Dense(64, relu) -> Dense(32, relu) -> Dense(1, sigmoid) on ``features``; ``first``, if
    given, is the first layer's output already."""
    x = first if first is not None else keras.layers.Dense(HEAD_UNITS[0], activation="relu", name="head_1")(features)
    x = keras.layers.Dense(HEAD_UNITS[1], activation="relu", name="head_2")(x)
    return keras.layers.Dense(1, activation="sigmoid", name="head_out")(x)


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


def _compiled(keras: Any, inputs: Any, output: Any, name: str) -> Any:
    model = keras.Model(inputs, output, name=name)
    model.compile(optimizer=keras.optimizers.Adam(), loss="binary_crossentropy", metrics=["accuracy"])
    return model


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
    return _compiled(keras, [indices, values], _head(keras, None, first), "sparse")


def numeric_model(dims: int) -> Any:
    """The head over ``dims`` standardised numbers (the paper's MLT: tokens as floats)."""
    keras = keras_module()
    features = keras.Input((dims,), dtype="float32", name="features")
    return _compiled(keras, features, _head(keras, features), "numeric")


def embedding_model(users: int, movies: int) -> Any:
    """Supervised id embeddings: Embedding(users + 1, 32) and Embedding(movies + 1, 32) (the
    extra row for ids unseen in training), concatenated, trained with the head."""
    keras = keras_module()
    user = keras.Input((1,), dtype="int32", name="user")
    movie = keras.Input((1,), dtype="int32", name="movie")
    u = keras.layers.Flatten()(keras.layers.Embedding(users + 1, EMBEDDING_WIDTH, name="user_embedding")(user))
    m = keras.layers.Flatten()(keras.layers.Embedding(movies + 1, EMBEDDING_WIDTH, name="movie_embedding")(movie))
    features = keras.layers.Concatenate()([u, m])
    return _compiled(keras, [user, movie], _head(keras, features), "embeddings")


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
    return _compiled(keras, inputs, _head(keras, keras.layers.Concatenate()(vectors)), "qr_embeddings")


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
    return _compiled(keras, tokens, _head(keras, keras.layers.Concatenate()(parts)), name)


def _composition(keras: Any, codec: tuple[int, int], rank: int, combination: Combination, name: str) -> Any:
    """The layer that maps an id's n tokens (``codec`` is ``(p, n)``; int32, batch x n, in [0, p)) to its
    ``rank``-wide compositional vector (module docstring). Weights are drawn from Keras' seeded
    generator, so ``keras.utils.set_random_seed`` fixes them."""
    ops = keras.ops
    p, n = codec

    class TokenComposition(keras.layers.Layer):  # type: ignore[misc]
        def build(self, input_shape: Any) -> None:
            def normal(std: float) -> Any:
                return keras.initializers.RandomNormal(0.0, std / TABLE_STEP)

            if combination == "qr":  # rows near 0 and Adam's own step, as the QR trick's Embedding tables
                # uniform in +-b has sd b / sqrt(3): n factors of sd s_n as small as 2 of sd s_2 = QR_INIT / sqrt(3)
                bound = 3**0.5 * (QR_INIT / 3**0.5) ** (2 / n)
                uniform = keras.initializers.RandomUniform(-bound, bound)
                self.rows = self.add_weight(shape=(n * p, rank), initializer=uniform, name="rows")
                return
            if combination == "product":
                self.rows = self.add_weight(shape=(n * p, rank), initializer=normal(1.0), name="rows")
                return
            self.first = self.add_weight(shape=(p, rank), initializer=normal(1.0), name="first")
            if n > 1:  # I + B: a path starts as the first token's row and each matrix bends it a little
                self.matrices = self.add_weight(
                    shape=((n - 1) * p, rank, rank), initializer=normal(0.3 / rank**0.5), name="matrices"
                )

        def call(self, tokens: Any) -> Any:
            tokens = ops.cast(tokens, "int32")
            if combination in ("product", "qr"):
                rows = ops.take(self.rows, tokens + ops.arange(n, dtype="int32") * p, axis=0)
                return ops.prod(rows if combination == "qr" else 1.0 + TABLE_STEP * rows, axis=1)
            vector = TABLE_STEP * ops.take(self.first, tokens[:, 0], axis=0)
            identity = ops.eye(rank)
            for j in range(1, n):
                matrix = identity + TABLE_STEP * ops.take(self.matrices, tokens[:, j] + (j - 1) * p, axis=0)
                vector = ops.einsum("br,brs->bs", vector, matrix)
            return vector

    return TokenComposition(name=name)


def composition_settings(combination: Combination, rank: int | None, code_width: int | None) -> tuple[int, int]:
    """``(rank, code_width)``, each the given one or, where ``None``, the combination's default
    ([`COMPOSITION_DEFAULTS`][spark_mlt.paper.models.COMPOSITION_DEFAULTS])."""
    default_rank, default_width = COMPOSITION_DEFAULTS[combination]
    return (default_rank if rank is None else rank, default_width if code_width is None else code_width)


def mlt_compositional_model(
    codecs: tuple[tuple[int, int], ...],
    *,
    combination: Combination = "qr",
    rank: int | None = None,
    code_width: int | None = None,
) -> Any:
    """Compositional MLT embeddings: for each id column (``codecs`` gives its ``(p, n)``; the input
    holds the columns' tokens side by side), the ``combination`` of one small table per token
    position (module docstring), projected to a ``code_width``-wide code (0: the whole ``rank``-wide
    vector is the code, as the QR trick feeds its product to the head; ``None``: the combination's
    [`COMPOSITION_DEFAULTS`][spark_mlt.paper.models.COMPOSITION_DEFAULTS], as for ``rank``); the
    codes, concatenated, feed the shared head. An id's code is a function of its tokens only, and
    two ids get equal codes only on a null set of weights: the code is a polynomial in the weights,
    and two ids with different tokens read different rows (hashed ids share a row whatever the
    weights). [`spark_mlt.paper.methods.distinct_codes`][spark_mlt.paper.methods.distinct_codes]
    counts them after training.

    Example::

        model = mlt_compositional_model(((13, 3), (13, 5)), combination="path", rank=12, code_width=2)
    """
    keras = keras_module()
    rank, code_width = composition_settings(combination, rank, code_width)
    tokens = keras.Input((sum(n for _, n in codecs),), dtype="int32", name="tokens")
    codes, start = [], 0
    for column, (p, n) in zip(("user", "movie"), codecs, strict=True):
        part = keras.layers.Lambda(lambda t, a=start, b=start + n: t[:, a:b], name=f"{column}_tokens")(tokens)
        vector = _composition(keras, (p, n), rank, combination, f"{column}_composition")(part)
        if code_width:
            codes.append(keras.layers.Dense(code_width, name=f"{column}_code")(vector))
        else:
            codes.append(keras.layers.Identity(name=f"{column}_code")(vector))
        start += n
    return _compiled(keras, tokens, _head(keras, keras.layers.Concatenate()(codes)), "mlt_compositional")


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
