"""Compositional MLT embeddings: a Keras 3 model that learns a vector per id from the id's MLT
tokens, with one small table per token position instead of one row per id.

Token position j splits the ids into p classes (the ids whose j-th token is t); since the tokens
are a bijection of the id, the n partitions are *complementary* (Shi et al., KDD 2020,
"Compositional Embeddings Using Complementary Partitions"; the quotient-remainder trick is the
two-partition case): only one id lies in all of its n classes, so a combination of one small table
per position that can tell the n rows apart is a per-id vector. Three combinations:

* ``qr`` (default): the plain element-wise product ``v = A_1[t_1] * ... * A_n[t_n]`` of one
  r-wide row per position, the quotient-remainder trick's operation over n partitions instead
  of two: ``n p r`` parameters. Its rows start uniform in ``+-b_n``, ``b_n`` chosen so that a
  product of n of them is as small as the QR trick's product of two Keras Embedding rows
  ([`QR_INIT`][spark_mlt.models.QR_INIT]): with Keras' own ``+-0.05`` a product of 5 rows starts
  near 1e-8 and learns slowly (67.5% validation accuracy after 20 epochs at p = 13, rank 64,
  against 70.3%).
* ``path``: a row vector from the first token's table, multiplied by one ``r x r`` matrix per
  further token, ``v = a[t_1] (I + B_2[t_2]) ... (I + B_n[t_n])``: a tensor train over the token
  positions, as TT-Rec factors embedding tables: ``p r + (n - 1) p r^2`` parameters.
* ``product``: the element-wise product ``v = (1 + A_1[t_1]) * ... * (1 + A_n[t_n])`` (the
  compositional embeddings' multiplicative operation): ``n p r``.

The id's code, what the classifier head reads, is the whole r-wide vector (code width 0, as the
QR trick feeds its product to the head) or a learned projection of it to a few numbers.

**The default size follows the ids.** The model replaces supervised id embeddings (a 32-wide
row per id, plus one for unseen ids), so its rank is chosen against them: given the id counts,
[`compositional_rank`][spark_mlt.models.compositional_rank] is the largest rank whose tables
hold at most 5% of those embeddings' parameters
([`EMBEDDING_BUDGET`][spark_mlt.models.EMBEDDING_BUDGET]). A fixed rank does not: rank 128 is
4.3% of the embeddings' parameters on MovieLens ml-latest-small (9,632 ids) but 12% on ml-100k
(2,591). Without id counts the rank is the combination's
[`COMPOSITION_DEFAULTS`][spark_mlt.models.COMPOSITION_DEFAULTS]. docs/paper.md has the
measurements behind these choices.

Keras is imported on first use, from the optional ``paper`` extra (Keras 3 and JAX; the JAX
backend unless ``KERAS_BACKEND`` names another), so importing this module costs neither Keras nor
PySpark. The model's input is the token columns of a tokenized table, side by side, as the
MovieLens job writes them: it needs no vocabulary of the ids.

Example::

    from spark_mlt.models import compositional_rank, mlt_compositional_model

    codecs = ((13, 3), (13, 5))  # (p, n) of the user and the movie tokens
    rank = compositional_rank(codecs, id_counts=(610, 9_022))  # 148
    model = mlt_compositional_model(codecs, id_counts=(610, 9_022))  # the same rank
    model.fit(tokens, labels, epochs=16, batch_size=1024)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal, get_args

from spark_mlt.errors import MissingExtraError, MLTTypeError, OptionError
from spark_mlt.options import check_choice

__all__ = [
    "COMBINATIONS",
    "COMPOSITION_DEFAULTS",
    "EMBEDDING_BUDGET",
    "EMBEDDING_WIDTH",
    "QR_INIT",
    "TABLE_STEP",
    "Combination",
    "composition_settings",
    "compositional_parameters",
    "compositional_rank",
    "embedding_parameters",
    "mlt_compositional_model",
]

Combination = Literal["qr", "path", "product"]
"""How compositional MLT embeddings combine the rows of an id's tokens (module docstring)."""
COMBINATIONS: tuple[Combination, ...] = get_args(Combination)
"""The combinations, the default first."""
COMPOSITION_DEFAULTS: dict[Combination, tuple[int, int]] = {"qr": (128, 0), "path": (12, 2), "product": (12, 2)}
"""Per combination, the rank (width of the tables' vectors; the path's r x r matrices) used
without id counts, and the code width (numbers per id the head reads; 0: the whole vector),
chosen on ml-latest-small's validation splits."""
EMBEDDING_BUDGET = 0.05
"""The default size's budget: at most this share of the supervised embeddings' parameters."""
EMBEDDING_WIDTH = 32
"""The supervised embeddings the model replaces: a row this wide per id (and one for unseen ids)."""
TABLE_STEP = 10.0
"""path and product store their tables divided by this: Adam moves them this much faster."""
QR_INIT = 0.05
"""qr's rows start so that a product of n of them is as small as one of two rows uniform in
+-QR_INIT (Keras' Embedding initialiser, the QR trick's tables)."""
#: The classifier head shared with the paper's models: Dense(64, relu), Dense(32, relu), Dense(1, sigmoid).
HEAD_UNITS = (64, 32)


def load_keras() -> Any:
    """Keras 3, on the JAX backend unless ``KERAS_BACKEND`` names another.

    Raises:
        MissingExtraError: Keras is not installed; the message says what to install.
    """
    os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        import keras
    except ImportError as exc:
        raise MissingExtraError(
            f"spark-mlt's Keras models need Keras 3 and JAX: pip install 'spark-mlt[paper]' ({exc})"
        ) from None
    return keras


def head(keras: Any, features: Any, first: Any = None) -> Any:
    """The shared classifier head on ``features``: Dense(64, relu) -> Dense(32, relu) ->
    Dense(1, sigmoid), its layers named ``head_*``; ``first``, if given, is the first layer's
    output already."""
    x = first if first is not None else keras.layers.Dense(HEAD_UNITS[0], activation="relu", name="head_1")(features)
    x = keras.layers.Dense(HEAD_UNITS[1], activation="relu", name="head_2")(x)
    return keras.layers.Dense(1, activation="sigmoid", name="head_out")(x)


def compiled(keras: Any, inputs: Any, output: Any, name: str) -> Any:
    """A model from ``inputs`` to ``output``, compiled as every model here: Adam, binary
    cross-entropy, accuracy."""
    model = keras.Model(inputs, output, name=name)
    model.compile(optimizer=keras.optimizers.Adam(), loss="binary_crossentropy", metrics=["accuracy"])
    return model


def _whole(name: str, value: object, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum``; ``name`` starts the message, and its first word
    is the parameter (``codecs: p`` names ``codecs``)."""
    parameter = name.partition(":")[0]
    if isinstance(value, bool) or not isinstance(value, int):
        raise MLTTypeError(f"{name} must be a whole number >= {minimum}, got {value!r}", parameter=parameter)
    if value < minimum:
        raise OptionError(f"{name} must be a whole number >= {minimum}, got {value!r}", parameter=parameter)
    return value


def _checked_codecs(codecs: object) -> tuple[tuple[int, int], ...]:
    """``codecs`` as a tuple of ``(p, n)`` pairs, p >= 2 and n >= 1, else an error naming the pair."""
    if isinstance(codecs, str | bytes) or not isinstance(codecs, Sequence) or not codecs:
        raise MLTTypeError(f"codecs must be a non-empty sequence of (p, n) pairs, got {codecs!r}", parameter="codecs")
    checked = []
    for codec in codecs:
        if not isinstance(codec, Sequence) or len(codec) != 2:
            raise MLTTypeError(f"codecs: each codec must be a (p, n) pair, got {codec!r}", parameter="codecs")
        checked.append((_whole("codecs: p", codec[0], 2), _whole("codecs: n", codec[1], 1)))
    return tuple(checked)


def embedding_parameters(id_counts: Sequence[int]) -> int:
    """The parameters of supervised id embeddings for ``id_counts`` ids per column: a
    [`EMBEDDING_WIDTH`][spark_mlt.models.EMBEDDING_WIDTH]-wide row per id and one for unseen ids.

    Example::

        >>> embedding_parameters((610, 9_022))
        308288
    """
    if isinstance(id_counts, str | bytes) or not isinstance(id_counts, Sequence) or not id_counts:
        raise MLTTypeError(
            f"id_counts must be a non-empty sequence of id counts, got {id_counts!r}", parameter="id_counts"
        )
    return sum((_whole("id_counts", count, 1) + 1) * EMBEDDING_WIDTH for count in id_counts)


def compositional_parameters(
    codecs: Sequence[tuple[int, int]], rank: int, *, combination: Combination = "qr", code_width: int = 0
) -> int:
    """The trained weights of compositional MLT embeddings over ``codecs`` (one ``(p, n)`` per id
    column) at ``rank``, the head apart: the tables, and the code projections where
    ``code_width`` > 0.

    Example::

        >>> compositional_parameters(((13, 3), (13, 5)), 128)
        13312
        >>> compositional_parameters(((13, 3), (13, 5)), 12, combination="path", code_width=2)
        11596
    """
    combination = check_choice("combination", combination, COMBINATIONS)
    rank = _whole("rank", rank, 1)
    code_width = _whole("code_width", code_width, 0)
    total = 0
    for p, n in _checked_codecs(codecs):
        total += p * rank + (n - 1) * p * rank * rank if combination == "path" else n * p * rank
        total += rank * code_width + code_width if code_width else 0
    return total


def compositional_rank(
    codecs: Sequence[tuple[int, int]],
    id_counts: Sequence[int],
    *,
    combination: Combination = "qr",
    code_width: int | None = None,
    budget: float = EMBEDDING_BUDGET,
) -> int:
    """The largest rank whose compositional MLT embeddings over ``codecs`` hold at most
    ``budget`` times the parameters of supervised embeddings for ``id_counts`` ids per column
    ([`embedding_parameters`][spark_mlt.models.embedding_parameters]): the model's default size.

    Args:
        codecs: ``(p, n)`` of each id column's codec.
        id_counts: the distinct ids of each column the embeddings would hold (those of the
            training data), in the order of ``codecs``.
        combination: how the rows combine (module docstring).
        code_width: numbers per id the head reads (0: the whole vector); ``None``: the
            combination's default ([`COMPOSITION_DEFAULTS`][spark_mlt.models.COMPOSITION_DEFAULTS]).
        budget: the share of the embeddings' parameters allowed, > 0.

    Raises:
        OptionError: a value is out of range, ``id_counts`` does not give one count per codec,
            or not even rank 1 fits in the budget.
        MLTTypeError: a value is not a number, or ``codecs`` is not a sequence of pairs.

    Example::

        >>> compositional_rank(((13, 3), (13, 5)), (610, 9_022))
        148
        >>> compositional_rank(((13, 3), (13, 3)), (943, 1_648))
        53
    """
    rank, limit, smallest = _budget_rank(codecs, id_counts, combination, code_width, budget)
    if rank == 0:
        raise OptionError(
            f"budget {budget!r} allows {limit:,.0f} parameters for id_counts {tuple(id_counts)!r}, fewer than"
            f" rank 1 takes ({smallest:,})",
            parameter="budget",
        )
    return rank


def _budget_rank(
    codecs: Sequence[tuple[int, int]],
    id_counts: Sequence[int],
    combination: Combination,
    code_width: int | None,
    budget: float,
) -> tuple[int, float, int]:
    """The largest rank within ``budget`` (0 if none), the parameters allowed, and rank 1's."""
    codecs = _checked_codecs(codecs)
    allowed = embedding_parameters(id_counts)
    if len(id_counts) != len(codecs):
        raise OptionError(
            f"id_counts must give one count per codec ({len(codecs)}), got {len(id_counts)}: {id_counts!r}",
            parameter="id_counts",
        )
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not budget > 0:
        raise OptionError(
            f"budget must be a share > 0 of the embeddings' parameters, got {budget!r}", parameter="budget"
        )
    combination = check_choice("combination", combination, COMBINATIONS)
    width = COMPOSITION_DEFAULTS[combination][1] if code_width is None else _whole("code_width", code_width, 0)

    def size(rank: int) -> int:
        return compositional_parameters(codecs, rank, combination=combination, code_width=width)

    limit = budget * allowed
    if size(1) > limit:
        return 0, limit, size(1)
    low, high = 1, 2
    while size(high) <= limit:
        low, high = high, 2 * high
    while high - low > 1:  # parameters grow with the rank: the largest within the limit lies in [low, high)
        middle = (low + high) // 2
        low, high = (middle, high) if size(middle) <= limit else (low, middle)
    return low, limit, size(1)


def composition_settings(
    combination: Combination,
    rank: int | None,
    code_width: int | None,
    *,
    codecs: Sequence[tuple[int, int]] = (),
    id_counts: Sequence[int] | None = None,
) -> tuple[int, int]:
    """``(rank, code_width)``: each the given one, or where ``None`` the default. The default
    rank is [`compositional_rank`][spark_mlt.models.compositional_rank] when ``id_counts`` are
    given (with ``codecs``; 1 where not even rank 1 fits in the budget, as on a few hundred ids
    with a wide codec), else [`COMPOSITION_DEFAULTS`][spark_mlt.models.COMPOSITION_DEFAULTS]'.

    Example::

        >>> composition_settings("qr", None, None)
        (128, 0)
        >>> composition_settings("qr", None, None, codecs=((13, 3), (13, 3)), id_counts=(943, 1_648))
        (53, 0)
    """
    combination = check_choice("combination", combination, COMBINATIONS)
    default_rank, default_width = COMPOSITION_DEFAULTS[combination]
    width = default_width if code_width is None else _whole("code_width", code_width, 0)
    if rank is not None:
        return _whole("rank", rank, 1), width
    if id_counts is None:
        return default_rank, width
    return max(1, _budget_rank(codecs, id_counts, combination, width, EMBEDDING_BUDGET)[0]), width


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


def mlt_compositional_model(
    codecs: Sequence[tuple[int, int]],
    *,
    combination: Combination = "qr",
    rank: int | None = None,
    code_width: int | None = None,
    id_counts: Sequence[int] | None = None,
    columns: Sequence[str] = ("user", "movie"),
) -> Any:
    """A compiled Keras model that scores a row from its ids' MLT tokens: for each id column
    (``codecs`` gives its ``(p, n)``; the input ``tokens`` holds the columns' tokens side by side),
    the ``combination`` of one small table per token position, projected to a ``code_width``-wide
    code; the codes, concatenated, feed the classifier head (Dense 64, Dense 32, Dense 1 sigmoid;
    Adam, binary cross-entropy).

    An id's code is a function of its tokens only, and two ids get equal codes only on a null
    set of weights: the code is a polynomial in the weights, and two ids with different tokens
    read different rows (hashed ids share a row whatever the weights).

    Args:
        codecs: ``(p, n)`` of each id column's codec, in the order of the token columns.
        combination: how the rows combine: ``qr``, ``path`` or ``product`` (module docstring).
        rank: width of the tables' vectors (the path's r x r matrices); ``None``: the largest
            within 5% of the supervised embeddings' parameters for ``id_counts``
            ([`compositional_rank`][spark_mlt.models.compositional_rank]; at least 1), or
            without them the combination's
            [`COMPOSITION_DEFAULTS`][spark_mlt.models.COMPOSITION_DEFAULTS].
        code_width: numbers per id the head reads: a learned projection of the vector, or 0 for
            the whole vector; ``None``: the combination's default.
        id_counts: distinct ids per column in the training data, to size the default rank.
        columns: one name per id column; the layers are ``<name>_composition`` and ``<name>_code``.

    Returns:
        A compiled ``keras.Model`` from ``tokens`` (int32, rows x the sum of the n) to a probability.

    Raises:
        MissingExtraError: Keras is not installed (``pip install 'spark-mlt[paper]'``).
        OptionError, MLTTypeError: an argument is out of range or of the wrong type; the
            message names it.

    Example::

        model = mlt_compositional_model(((13, 3), (13, 5)), id_counts=(610, 9_022))
        model = mlt_compositional_model(((13, 3), (13, 5)), combination="path", rank=12, code_width=2)
    """
    codecs = _checked_codecs(codecs)
    if isinstance(columns, str) or len(columns) != len(codecs) or len(set(columns)) != len(columns):
        raise OptionError(
            f"columns must give a distinct name to each of the {len(codecs)} codecs, got {columns!r}",
            parameter="columns",
        )
    rank, code_width = composition_settings(combination, rank, code_width, codecs=codecs, id_counts=id_counts)
    keras = load_keras()
    tokens = keras.Input((sum(n for _, n in codecs),), dtype="int32", name="tokens")
    codes, start = [], 0
    for column, (p, n) in zip(columns, codecs, strict=True):
        part = keras.layers.Lambda(lambda t, a=start, b=start + n: t[:, a:b], name=f"{column}_tokens")(tokens)
        vector = _composition(keras, (p, n), rank, combination, f"{column}_composition")(part)
        if code_width:
            codes.append(keras.layers.Dense(code_width, name=f"{column}_code")(vector))
        else:
            codes.append(keras.layers.Identity(name=f"{column}_code")(vector))
        start += n
    features = keras.layers.Concatenate()(codes) if len(codes) > 1 else codes[0]
    return compiled(keras, tokens, head(keras, features), "mlt_compositional")
