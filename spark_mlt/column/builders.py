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
  ``hi * p**m + lo``, combined by ``try_multiply`` and ``try_add``: null from 2**63 in
  either ANSI mode (no decimal arithmetic: Spark evaluates decimals per row through
  BigDecimal).
* Input types: an analysis-time gate (never evaluated: the optimizer folds ``false AND``
  away) makes Spark reject anything but integral and decimal inputs with its own
  DATATYPE_MISMATCH error naming the column and its type. Decimal values must be whole
  numbers that fit a bigint; other values are invalid rows.

Plan size. Spark expressions are trees: a value read k times is k copies of its subtree. So
tokens are computed from the raw bigint id, which every token may read (a column reference
and a cast); the validity CASE (both targets write it as nested ``if()`` calls) reads the
input a few times and only picks the result, ``try_element_at(array(result), CASE ... THEN 1
END)`` (packed output adds a CASE that is 0 or null instead); each token (or digit) copies
the lane-packed word it reads (see ``lanes``); and an input longer than a column reference
(say, another spark-mlt function) is bound once to a lambda variable by
:mod:`spark_mlt.column.inputs`, so composed functions plan as the sum of their parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from spark_mlt.codec import MAX_ID, MLTCodec
from spark_mlt.codec.tables import XorTables, decode_tables, encode_tables, xor_decode_tables, xor_encode_tables
from spark_mlt.column.lanes import lane_outputs, lookup_words, mat_words, weighted
from spark_mlt.column.layouts import shape_tokens, token_names, unpack_tokens, vector_scale, vector_values_of
from spark_mlt.column.targets import ExpressionTarget

__all__ = [
    "checked_id",
    "decode_expr",
    "encode_expr",
    "encode_tokens",
    "encode_vector_parts",
    "input_gate",
    "unpack_expr",
    "vector_of_parts",
]

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


def encode_tokens(t: ExpressionTarget[E], x: E, codec: MLTCodec) -> list[E]:
    """The n tokens (each in [0, p)) of ``x``, a bigint expression that is never null and
    always a valid id (see :func:`encode_expr`), so no intermediate leaves the bigint range
    and no table index leaves its table."""
    p, n = codec.p, codec.n
    if p == 2:
        # Over GF(2) token j is the parity of the id's bits in column j of M: one AND and a
        # population count (bit i of the id is digit n - 1 - i; digits above bit 62 are 0).
        matrix = codec.M.tolist()
        columns = [sum(matrix[n - 1 - bit][j] << bit for bit in range(min(n, 63))) for j in range(n)]
        return [
            t.bit_and(t.call("bit_count", [t.bit_and(x, t.lit(column))]), t.lit(1)) if column else t.lit(0)
            for column in columns
        ]
    spec = encode_tables(codec)
    if spec is not None:
        indexes = [
            t.cast(t.mod(x if divisor == 1 else t.div(x, t.lit(divisor)), t.lit(size)), "INT")
            for divisor, size in spec.reads
        ]
        return lane_outputs(t, lookup_words(t, indexes, spec), p)
    digits: list[tuple[int, E]] = []
    for i in range(n):
        weight = p ** (n - 1 - i)
        if weight > MAX_ID:
            continue  # this digit is 0 for every id below 2**63
        digits.append((i, t.mod(x if weight == 1 else t.div(x, t.lit(weight)), t.lit(p))))
    matrix = codec.M.tolist()
    return lane_outputs(t, mat_words(t, [(d, matrix[i]) for i, d in digits], p, p - 1), p)


def _packed_parity(t: ExpressionTarget[E], x: E, spec: XorTables) -> E:
    """p = 2: the packed tokens of ``x`` (never null, a valid id), one table per ten bits."""
    result: E | None = None
    for (first, count), table in zip(spec.spans, spec.tables, strict=True):
        shifted = x if first == 0 else t.call("shiftright", [x, t.lit(first)])
        entry = t.call("get", [t.long_array(table), t.cast(t.bit_and(shifted, t.lit((1 << count) - 1)), "INT")])
        result = entry if result is None else t.bit_xor(result, entry)
    return result if result is not None else t.lit(0)


def encode_expr(
    t: ExpressionTarget[E], value: E, codec: MLTCodec, *, layout: str, handle_invalid: str, sql_name: str
) -> E:
    """Tokens of ``value`` (any integral or decimal expression) in ``layout`` (see
    :func:`~spark_mlt.column.layouts.shape_tokens`; a vector: :func:`encode_vector_parts`).

    Shape of the expression: the tokens are computed from ``TRY_CAST(value AS BIGINT)``
    outside any conditional (Spark's subexpression elimination does not look inside CASE
    branches), whatever the id; a scalar CASE then picks the result, null, or the error:
    ``try_element_at(array(result), CASE ... THEN 1 END)``. See the module docs for the size.
    """
    if layout == "vector":
        doubles, pick = encode_vector_parts(t, value, codec, handle_invalid=handle_invalid, sql_name=sql_name)
        return vector_of_parts(t, doubles, pick)
    x, checks = _id_checks(t, value, codec, handle_invalid=handle_invalid, sql_name=sql_name)
    if layout == "packed":  # a bigint: plus 0 where valid, null (or the error) otherwise; no array
        parity = xor_encode_tables(codec)
        packed = (
            _packed_parity(t, x, parity)
            if parity is not None
            else shape_tokens(t, encode_tokens(t, x, codec), codec, layout)
        )
        return t.add(packed, t.case(checks, t.lit(0)))
    result = shape_tokens(t, encode_tokens(t, x, codec), codec, layout)
    return t.call("try_element_at", [t.call("array", [result]), t.case(checks, t.lit(1))])


def encode_vector_parts(
    t: ExpressionTarget[E], value: E, codec: MLTCodec, *, handle_invalid: str, sql_name: str
) -> tuple[E, E]:
    """The two parts of a vector encoder, neither of which is a vector: the values of the
    vector (an array<double>, never null) and the pick (1 where the id is valid, else null or
    the error). The vector is ``try_element_at(array(array_to_vector(values)), pick)``, so
    both parts can be SQL text, which has no vector type (see
    :class:`~spark_mlt.column.native.NativeEngine`)."""
    x, checks = _id_checks(t, value, codec, handle_invalid=handle_invalid, sql_name=sql_name)
    return vector_values_of(t, encode_tokens(t, x, codec), codec), t.case(checks, t.lit(1))


def vector_of_parts(t: ExpressionTarget[E], doubles: E, pick: E) -> E:
    """The vector of :func:`encode_vector_parts`' values, or null (or the error) per its pick."""
    return t.call("try_element_at", [t.call("array", [t.vector(doubles)]), pick])


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
    """The n tokens of ``tokens`` as bigints (null where a token is null) and the checks of
    their shape and range, each an expression that loops over the tokens or compares few of
    them, so that the checks' code does not grow with n."""
    p, n = codec.p, codec.n
    if layout == "packed":
        items, fits = unpack_tokens(t, tokens, codec)  # never null, each in [0, 2**bits)
        below = [t.cmp(_greatest(t, items), "<", t.lit(p))] if p < 2 ** codec.require_packed_bits() else []
        return items, fits + below
    if layout in ("struct", "vector"):
        size_ok: list[E] = []
        if layout == "struct":
            items = [t.cast(t.field(tokens, name), "BIGINT") for name in token_names(n)]
        else:  # token / (p - 1), scaled back and rounded; NaN and infinities become +-2**53
            values = t.vector_values(tokens)
            limit, scale = t.lit(float(2**53)), t.lit(float(vector_scale(codec)))
            rounded = [t.call("round", [t.mul(t.call("get", [values, t.lit(j)]), scale)]) for j in range(n)]
            clamped = [t.call("least", [t.call("greatest", [r, t.lit(-float(2**53))]), limit]) for r in rounded]
            items = [t.cast(c, "BIGINT") for c in clamped]
            size_ok = [t.cmp(t.call("size", [values]), "=", t.lit(n))]
        return items, [*size_ok, t.cmp(_least(t, items), ">=", t.lit(0)), t.cmp(_greatest(t, items), "<", t.lit(p))]
    # get(): 0-based, null outside the array in every ANSI mode, and twice as fast as
    # try_element_at when reading cached or Parquet arrays. array_min and array_max skip
    # null tokens: a null token makes the decoded value null, which the caller checks.
    items = [t.cast(t.call("get", [tokens, t.lit(j)]), "BIGINT") for j in range(n)]
    checks = [
        t.cmp(t.call("size", [tokens]), "=", t.lit(n)),
        t.cmp(t.call("array_min", [tokens]), ">=", t.lit(0)),
        t.cmp(t.call("array_max", [tokens]), "<", t.lit(p)),
    ]
    return items, checks


def _least(t: ExpressionTarget[E], items: list[E]) -> E:
    return items[0] if len(items) == 1 else t.call("least", items)


def _greatest(t: ExpressionTarget[E], items: list[E]) -> E:
    return items[0] if len(items) == 1 else t.call("greatest", items)


def _chunk_indexes(
    t: ExpressionTarget[E], tokens: E, items: list[E], spans: Sequence[tuple[int, int]], *, bits: int, layout: str
) -> list[E]:
    """The index of each chunk of tokens: its tokens' low ``bits`` bits side by side, token
    ``first + i`` in bits ``[i*bits, (i+1)*bits)``: read off the packed value, or put together
    from the tokens (a token too large for its bits is invalid, and masking it keeps the
    index within the table)."""
    low = (1 << bits) - 1
    indexes = []
    for first, count in spans:
        if layout == "packed":
            whole = t.cast(tokens, "BIGINT")
            shifted = t.call("shiftrightunsigned", [whole, t.lit(bits * first)]) if first else whole
            index = t.bit_and(shifted, t.lit((1 << (bits * count)) - 1))
        else:
            parts = [t.bit_and(items[first + i], t.lit(low)) for i in range(count)]
            placed = [part if i == 0 else t.call("shiftleft", [part, t.lit(bits * i)]) for i, part in enumerate(parts)]
            index = placed[0]
            for part in placed[1:]:
                index = t.bit_or(index, part)
        indexes.append(t.cast(index, "INT"))
    return indexes


def _decoded(t: ExpressionTarget[E], tokens: E, items: list[E], codec: MLTCodec, layout: str) -> tuple[E, list[E]]:
    """The id of the tokens, null where a token is null or where the id is 2**63 or more, and
    further checks of its validity (exact only for tokens in [0, p))."""
    p, n = codec.p, codec.n
    parity = xor_decode_tables(codec)
    if parity is not None:  # p = 2: the id is the XOR of one entry per ten tokens
        indexes = _chunk_indexes(t, tokens, items, parity.spans, bits=1, layout=layout)
        entries = [
            t.call("get", [t.long_array(table), index]) for index, table in zip(indexes, parity.tables, strict=True)
        ]
        id_bits = entries[0]
        for entry in entries[1:]:
            id_bits = t.bit_xor(id_bits, entry)
        return id_bits, [t.cmp(id_bits, ">=", t.lit(0))]  # bit 63 set: an id of 2**63 or more
    spec = decode_tables(codec)
    if spec is not None:
        bits = max(1, (p - 1).bit_length())
        words = lookup_words(t, _chunk_indexes(t, tokens, items, spec.spans, bits=bits, layout=layout), spec)
    else:
        low = 2 ** max(1, (p - 1).bit_length()) - 1
        # The arithmetic runs on the tokens' low bits (t & low, equal to t when valid), so
        # invalid tokens (any bigint) cannot overflow it; the validity check rejects them.
        inverse = codec.M_inv.tolist()
        masked = [t.bit_and(item, t.lit(low)) for item in items]
        words = mat_words(t, [(masked[j], inverse[j]) for j in range(n)], p, low)
    return _id_of_digits(t, lane_outputs(t, words, p), codec)


def _id_of_digits(t: ExpressionTarget[E], digits: Sequence[E], codec: MLTCodec) -> tuple[E, list[E]]:
    """The bigint id of n base-p digits (each in [0, p)), null when it is 2**63 or more, and
    the checks that the digits whose weight is 2**63 or more are 0.

    When p**n > 2**63 the id is split as ``hi * p**m + lo`` with ``p**m <= 2**62``, so both
    parts are bigints far from overflow, and combined by ``try_multiply`` and ``try_add``:
    exact below 2**63, null from it (under either ANSI mode). No decimals: Spark evaluates
    those per row through BigDecimal."""
    p, n = codec.p, codec.n
    weights = [p ** (n - 1 - i) for i in range(n)]
    if codec.capacity <= 2**63:
        return weighted(t, list(zip(digits, weights, strict=True))), []
    split = p ** max(m for m in range(n) if p**m <= 2**62)
    high = [t.cmp(d, "=", t.lit(0)) for d, w in zip(digits, weights, strict=True) if w > MAX_ID]
    hi = weighted(t, [(d, w // split) for d, w in zip(digits, weights, strict=True) if split <= w <= MAX_ID])
    lo = weighted(t, [(d, w) for d, w in zip(digits, weights, strict=True) if w < split])
    return t.call("try_add", [t.call("try_multiply", [hi, t.lit(split)]), lo]), high


def decode_expr(
    t: ExpressionTarget[E], tokens: E, codec: MLTCodec, *, layout: str, handle_invalid: str, sql_name: str
) -> E:
    """The bigint id of ``tokens`` (array<int-like>, struct t0..t{n-1}, vector, or packed
    bigint).

    ``coalesce(value + ok, fallback)``: ``value`` is null where a token is null or the id is
    2**63 or more, ``ok`` (0, else null) checks the tokens' shape and range, and ``fallback``
    (null for null tokens, else null or the error) runs only where the sum is null. Spark
    evaluates ``value`` for every row, outside any CASE, so its subexpressions are shared,
    and it is read once: nothing copies the arithmetic.
    """
    p, n = codec.p, codec.n
    items, checks = _token_items(t, tokens, codec, layout)
    value, value_checks = _decoded(t, tokens, items, codec, layout)
    shown = t.call("array", items) if layout == "vector" else tokens  # a vector is named by its tokens
    packed = layout == "packed"
    width = f"of {max(1, (p - 1).bit_length())} bits each " if packed else ""
    on_invalid = _on_invalid(
        t,
        handle_invalid,
        (f"spark-mlt: {sql_name}: {'packed tokens' if packed else 'token vector'} ", shown),
        f" is not a valid MLT code: expected {n} tokens in [0, {p}) {width}that decode to an id below 2^63"
        f" (p={p}, n={n})",
        "rows",
    )
    return _or_else(t, value, [*checks, *value_checks], tokens, on_invalid)


def _or_else(t: ExpressionTarget[E], value: E, checks: list[E], source: E, on_invalid: E) -> E:
    """A bigint ``value`` where it is not null and every check holds; else null where
    ``source`` is null, and ``on_invalid`` (null or the error) otherwise."""
    ok = t.case([(t.and_(checks), t.lit(0))], t.lit(None)) if checks else t.lit(0)
    fallback = t.case([(t.is_null(source), t.lit(None))], on_invalid)
    return t.call("coalesce", [value if not checks else t.add(value, ok), fallback])
