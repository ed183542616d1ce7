"""The native engine's expressions: encode, decode and unpack, with their checks and messages.

Each builder is generic over an :class:`~spark_mlt.column.targets.ExpressionTarget`, so the
column functions (a ``Column``) and the SQL functions (SQL text) get the same arithmetic. The
arithmetic itself is lane-packed (:mod:`spark_mlt.column.lanes`), from lookup tables where
they are small (:mod:`spark_mlt.codec.tables`); the token layouts come from
:mod:`spark_mlt.column.layouts`.

Traps handled here:

* ANSI mode (Spark 4's default) raises on bigint overflow, and with ANSI off overflow wraps
  silently. Every intermediate stays below 2**63: digits come from ``x div p**k % p``
  (no power of p above 2**63 - 1 is ever formed: such a digit is 0 for any valid id), and
  products are summed only in groups whose sum cannot exceed 2**63 - 1.
* Decoding to an id: when p**n <= 2**63 the weighted digit sum is below 2**63. Otherwise the
  digits whose weight is 2**63 or more must be 0, and the rest is split into two bigints,
  ``hi * p**m + lo``, compared with 2**63 - 1 part by part before they are combined (no
  decimal arithmetic: Spark evaluates decimals per row through BigDecimal).
* Input types: an analysis-time gate (never evaluated: the optimizer folds ``false AND``
  away) makes Spark reject anything but integral and decimal inputs with its own
  DATATYPE_MISMATCH error naming the column and its type. Decimal values must be whole
  numbers that fit a bigint; other values are invalid rows.

Plan size. Spark expressions are trees: a value read k times is k copies of its subtree. So
tokens are computed from the raw bigint id, which every token may read (a column reference
and a cast); the validity CASE reads the input a few times and only picks the result,
``try_element_at(array(result), CASE ... THEN 1 END)``; each token (or digit) reads one
lane-packed word, bound to a lambda variable where many read it (see ``lanes``); and an input
longer than a column reference (say, another spark-mlt function) is bound the same way by
:mod:`spark_mlt.column.inputs`, so composed functions plan as the sum of their parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from spark_mlt.codec import MAX_ID, MLTCodec
from spark_mlt.codec.tables import decode_tables, encode_tables
from spark_mlt.column.lanes import Words, from_words, lookup_words, mat_words, weighted
from spark_mlt.column.layouts import shape_tokens, token_names, unpack_tokens
from spark_mlt.column.targets import ExpressionTarget

__all__ = ["checked_id", "decode_expr", "encode_expr", "input_gate", "unpack_expr"]

E = TypeVar("E")


def input_gate(t: ExpressionTarget[E], value: E) -> E:
    """A predicate that is always false but fails analysis unless value is integral or decimal."""
    contains = t.call("array_contains", [t.call("array", [t.cast(t.lit(0), "BIGINT")]), value])
    interval = t.is_null(t.cast(value, "INTERVAL DAY"))
    return t.and_([t.lit(False), contains, interval])


def _on_invalid(t: ExpressionTarget[E], handle_invalid: str, subject: tuple[str, E], problem: str, things: str) -> E:
    """Null, or (``handle_invalid="error"``) an error whose message is ``subject[0]``, the
    offending value ``subject[1]`` as text, ``problem`` and how to get nulls instead."""
    if handle_invalid == "null":
        return t.lit(None)
    prefix, value = subject
    advice = f"; use handle_invalid='null' to turn such {things} into nulls"
    return t.call("raise_error", [t.call("concat", [t.lit(prefix), t.cast(value, "STRING"), t.lit(problem + advice)])])


def _checked(t: ExpressionTarget[E], source: E, valid: E, value: E, on_invalid: E) -> E:
    """``value`` where ``valid``; null where ``source`` is null; else ``on_invalid`` (null or an
    error). ``value`` is computed outside the CASE, which only picks the array index, so
    subexpression elimination still sees it."""
    pick = t.case([(t.is_null(source), t.lit(None)), (t.call("coalesce", [valid, t.lit(False)]), t.lit(1))], on_invalid)
    return t.call("try_element_at", [t.call("array", [value]), pick])


# --- ids to tokens --------------------------------------------------------------------------


def _id_checks(
    t: ExpressionTarget[E], value: E, codec: MLTCodec, *, handle_invalid: str, sql_name: str
) -> tuple[E, list[tuple[E, E]]]:
    """``TRY_CAST(value AS BIGINT)`` and the CASE branches that turn a null, invalid or
    mistyped ``value`` into null or an error; a row that passes them has a valid id."""
    p, n = codec.p, codec.n
    x = t.try_cast(value, "BIGINT")
    invalid = t.or_(
        [
            t.is_null(x),  # a decimal beyond the bigint range
            t.cmp(x, "<", t.lit(0)),
            t.cmp(x, ">", t.lit(codec.max_id)),
            t.cmp(value, "<>", x),  # a decimal with a fraction
        ]
    )
    on_invalid = _on_invalid(
        t,
        handle_invalid,
        (f"spark-mlt: {sql_name}: id ", value),
        f" is outside the codec's domain [0, {codec.max_id + 1}) (p={p}, n={n}); ids must be whole numbers",
        "ids",
    )
    return x, [(input_gate(t, value), t.lit(None)), (t.is_null(value), t.lit(None)), (invalid, on_invalid)]


def checked_id(t: ExpressionTarget[E], value: E, codec: MLTCodec, *, handle_invalid: str, sql_name: str) -> E:
    """``value`` as a bigint id the codec accepts, or null (a null id, or an invalid one with
    ``handle_invalid="null"``); any other value fails the query naming it."""
    x, checks = _id_checks(t, value, codec, handle_invalid=handle_invalid, sql_name=sql_name)
    return t.case(checks, x)


def _encode_words(t: ExpressionTarget[E], x: E, codec: MLTCodec) -> Words[E]:
    """The n tokens (bigint) of the bigint id ``x``, as a few words and a function that reads
    the tokens from them: exact when x is a valid id; null, or some value in (-p, p),
    otherwise (the caller discards those rows). No intermediate leaves the bigint range for
    any bigint x, and ``x`` is the only input read."""
    p = codec.p
    spec = encode_tables(codec)
    if spec is not None:
        indexes = [
            t.cast(t.mod(x if divisor == 1 else t.div(x, t.lit(divisor)), t.lit(size)), "INT")
            for divisor, size in spec.reads
        ]
        return lookup_words(t, indexes, spec, p)
    digits: list[tuple[int, E]] = []
    for i in range(codec.n):
        weight = p ** (codec.n - 1 - i)
        if weight > MAX_ID:
            continue  # this digit is 0 for every id below 2**63
        digits.append((i, t.mod(x if weight == 1 else t.div(x, t.lit(weight)), t.lit(p))))
    matrix = codec.M.tolist()
    return mat_words(t, [(d, matrix[i]) for i, d in digits], p, p - 1)


def encode_expr(
    t: ExpressionTarget[E], value: E, codec: MLTCodec, *, layout: str, handle_invalid: str, sql_name: str
) -> E:
    """Tokens of ``value`` (any integral or decimal expression) in ``layout`` (see
    :func:`~spark_mlt.column.layouts.shape_tokens`).

    Shape of the expression: the tokens are computed from ``TRY_CAST(value AS BIGINT)``
    outside any conditional (Spark's subexpression elimination does not look inside CASE
    branches), whatever the id; a scalar CASE then picks the result, null, or the error:
    ``try_element_at(array(result), CASE ... THEN 1 END)``. See the module docs for the size.
    """
    x, checks = _id_checks(t, value, codec, handle_invalid=handle_invalid, sql_name=sql_name)
    pick = t.case(checks, t.lit(1))
    result = from_words(t, _encode_words(t, x, codec), codec.n, lambda sums: shape_tokens(t, sums, codec, layout))
    return t.call("try_element_at", [t.call("array", [result]), pick])


# --- tokens to ids --------------------------------------------------------------------------


def unpack_expr(
    t: ExpressionTarget[E], packed: E, codec: MLTCodec, *, layout: str, handle_invalid: str, sql_name: str
) -> E:
    """The tokens (array<int> or struct t0..t{n-1}) of a packed bigint; null in, null out."""
    tokens, fits = unpack_tokens(t, packed, codec)
    valid = t.and_(fits + [t.cmp(token, "<", t.lit(codec.p)) for token in tokens])
    result = shape_tokens(t, tokens, codec, layout)
    on_invalid = _on_invalid(
        t,
        handle_invalid,
        (f"spark-mlt: {sql_name}: packed tokens ", packed),
        f" are not {codec.n} tokens of {codec.packed_bits} bits each in [0, {codec.p}) (p={codec.p}, n={codec.n})",
        "rows",
    )
    return _checked(t, packed, valid, result, on_invalid)


def _token_items(t: ExpressionTarget[E], tokens: E, codec: MLTCodec, layout: str) -> tuple[list[E], list[E]]:
    """The n tokens of ``tokens`` (as bigint) and the checks of its shape."""
    if layout == "packed":
        items, shape_ok = unpack_tokens(t, tokens, codec)
    elif layout == "struct":
        items, shape_ok = [t.field(tokens, name) for name in token_names(codec.n)], []
    else:
        # get(): 0-based, null outside the array in every ANSI mode, and twice as fast as
        # try_element_at when reading cached or Parquet arrays.
        items = [t.call("get", [tokens, t.lit(j)]) for j in range(codec.n)]
        shape_ok = [t.cmp(t.call("size", [tokens]), "=", t.lit(codec.n))]
    return [t.cast(item, "BIGINT") for item in items], shape_ok


def _digit_words(t: ExpressionTarget[E], tokens: E, items: list[E], codec: MLTCodec, layout: str) -> Words[E]:
    """The words holding the digits ``items @ M_inv mod p``: from lookup tables read straight
    off the packed bits (one read per chunk of tokens), else by multiply-accumulate."""
    p, n = codec.p, codec.n
    spec = decode_tables(codec) if layout == "packed" else None
    if spec is not None:
        whole = t.cast(tokens, "BIGINT")
        indexes = [
            t.cast(t.bit_and(t.call("shiftrightunsigned", [whole, t.lit(at)]) if at else whole, t.lit(mask)), "INT")
            for at, mask in spec.reads
        ]
        return lookup_words(t, indexes, spec, p)
    inverse = codec.M_inv.tolist()
    low = 2 ** max(1, (p - 1).bit_length()) - 1
    # The arithmetic runs on the tokens' low bits (t & low, equal to t when valid), so
    # invalid tokens (any bigint) cannot overflow it; the validity check rejects them.
    masked = [t.bit_and(item, t.lit(low)) for item in items]
    return mat_words(t, [(masked[j], inverse[j]) for j in range(n)], p, low)


def _id_of_digits(t: ExpressionTarget[E], digits: Sequence[E], codec: MLTCodec) -> E:
    """The bigint id of n base-p digits (each in [0, p)), or null when it is 2**63 or more.

    When p**n > 2**63 the id is split as ``hi * p**m + lo`` with ``p**m <= 2**62``, so both
    parts are small bigints, and ``hi * p**m + lo <= MAX_ID`` is decided without forming
    the sum: ``hi < q or (hi = q and lo <= r)`` for ``q, r = divmod(MAX_ID, p**m)`` (lo <
    p**m). Digits whose weight exceeds MAX_ID must be 0. All bigint, no decimals."""
    p, n = codec.p, codec.n
    weights = [p ** (n - 1 - i) for i in range(n)]
    if codec.capacity <= 2**63:
        return weighted(t, list(zip(digits, weights, strict=True)))
    split = p ** max(m for m in range(n) if p**m <= 2**62)
    high = [d for d, w in zip(digits, weights, strict=True) if w > MAX_ID]
    hi = weighted(t, [(d, w // split) for d, w in zip(digits, weights, strict=True) if split <= w <= MAX_ID])
    lo = weighted(t, [(d, w) for d, w in zip(digits, weights, strict=True) if w < split])
    q, r = divmod(MAX_ID, split)
    below = t.or_([t.cmp(hi, "<", t.lit(q)), t.and_([t.cmp(hi, "=", t.lit(q)), t.cmp(lo, "<=", t.lit(r))])])
    fits = t.and_([t.cmp(d, "=", t.lit(0)) for d in high] + [below])
    return t.case([(fits, t.add(t.mul(hi, t.lit(split)), lo))], t.lit(None))


def decode_expr(
    t: ExpressionTarget[E], tokens: E, codec: MLTCodec, *, layout: str, handle_invalid: str, sql_name: str
) -> E:
    """The bigint id of ``tokens`` (array<int-like>, struct t0..t{n-1}, or packed bigint).

    As in :func:`encode_expr`, the arithmetic sits outside any CASE branch; a CASE only
    picks null, the value, or the error.
    """
    p, n = codec.p, codec.n
    items, shape_ok = _token_items(t, tokens, codec, layout)
    # null when a token is null: treated as invalid by _checked
    valid = t.and_(shape_ok + [t.and_([t.cmp(item, ">=", t.lit(0)), t.cmp(item, "<", t.lit(p))]) for item in items])
    value = from_words(
        t, _digit_words(t, tokens, items, codec, layout), n, lambda digits: _id_of_digits(t, digits, codec)
    )
    if codec.capacity > 2**63:  # a code of an id beyond the bigint range decodes to null
        valid = t.and_([valid, t.call("isnotnull", [value])])
    packed = layout == "packed"
    width = f"of {max(1, (p - 1).bit_length())} bits each " if packed else ""
    on_invalid = _on_invalid(
        t,
        handle_invalid,
        (f"spark-mlt: {sql_name}: {'packed tokens' if packed else 'token vector'} ", tokens),
        f" is not a valid MLT code: expected {n} tokens in [0, {p}) {width}that decode to an id below 2^63"
        f" (p={p}, n={n})",
        "rows",
    )
    return _checked(t, tokens, valid, value, on_invalid)
