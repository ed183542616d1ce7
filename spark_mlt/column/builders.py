"""The native engine's expressions: encode, decode and unpack, with their checks and messages.

Each builder returns SQL text (`spark_mlt.column.sqltext`) over the SQL text of its
input, so the column functions and the SQL functions get the same arithmetic. The arithmetic
itself is lane-packed ([`spark_mlt.column.lanes`][spark_mlt.column.lanes]), from lookup tables where they are
small ([`spark_mlt.codec.tables`][spark_mlt.codec.tables]); each layout's reading and writing comes from its
object in [`spark_mlt.column.layouts`][spark_mlt.column.layouts].

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
END)`` (packed output adds the result to a CASE that is 0 or null instead); each token (or digit) copies
the lane-packed word it reads (see ``lanes``); and an input longer than a column reference
(say, another spark-mlt function) is bound once to a lambda variable by
`spark_mlt.column.inputs`, so composed functions plan as the sum of their parts.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_mlt.codec import MAX_ID, MLTCodec
from spark_mlt.codec.tables import XorTables, decode_tables, encode_tables, xor_decode_tables, xor_encode_tables
from spark_mlt.column import sqltext as sql
from spark_mlt.column.lanes import lane_outputs, lookup_words, mat_words, weighted
from spark_mlt.column.layouts import PACKED, VECTOR, TokenLayout
from spark_mlt.options import RowHandling

__all__ = [
    "checked_id",
    "decode_expr",
    "encode_expr",
    "encode_parts",
    "encode_tokens",
    "input_gate",
    "unpack_expr",
]


def input_gate(value: str) -> str:
    """A predicate that is always false but fails analysis unless value is integral or decimal."""
    # a decimal(1,0) element: every integral and decimal type has a common type with it (with a
    # bigint one, Spark 3.5 finds none for decimal(38,37)), a string, boolean or date none
    contains = sql.call("array_contains", [sql.call("array", [sql.cast(sql.lit(0), "DECIMAL(1,0)")]), value])
    interval = sql.is_null(sql.cast(value, "INTERVAL DAY"))
    return sql.and_([sql.lit(False), contains, interval])


def _on_invalid(handle_invalid: RowHandling, subject: tuple[str, str], problem: str, things: str) -> str:
    """Null, or (``handle_invalid="error"``) an error whose message is ``subject[0]``, the
    offending value ``subject[1]`` as text, ``problem`` and how to get nulls instead."""
    if handle_invalid == "null":
        return sql.lit(None)
    prefix, value = subject
    advice = f"; use handle_invalid='null' to turn such {things} into nulls"
    return sql.call(
        "raise_error", [sql.call("concat", [sql.lit(prefix), sql.cast(value, "STRING"), sql.lit(problem + advice)])]
    )


def _checked(source: str, valid: str, value: str, on_invalid: str) -> str:
    """``value`` where ``valid``; null where ``source`` is null; else ``on_invalid`` (null or an
    error). ``value`` is computed outside the CASE, which only picks the array index, so
    subexpression elimination still sees it."""
    pick = sql.case(
        [(sql.is_null(source), sql.lit(None)), (sql.call("coalesce", [valid, sql.lit(False)]), sql.lit(1))], on_invalid
    )
    return sql.call("try_element_at", [sql.call("array", [value]), pick])


# --- ids to tokens --------------------------------------------------------------------------


#: a whole number with a zero fraction, as a decimal's text shows it ("7.00"); group 1 is the number
_ZERO_FRACTION = "^([+-]?[0-9]+)[.]0*$"
#: zero as a decimal of a large scale shows it with ANSI off ("0E-37", Java's BigDecimal.toString;
#: every other whole decimal's text is plain); group 1 is the 0
_ZERO_EXPONENT = "^[+-]?(0)([.]0*)?E[+-]?[0-9]+$"


def _id_checks(
    value: str, codec: MLTCodec, *, handle_invalid: RowHandling, sql_name: str, text: bool = False
) -> tuple[str, list[tuple[str, str]]]:
    """``TRY_CAST(value AS BIGINT)`` and the CASE branches that turn a null, invalid or
    mistyped ``value`` into null or an error; a row that passes them has a valid id.

    With ``text``, ``value`` is a SQL function's STRING parameter: Spark casts every argument
    to a string exactly (to a bigint or decimal parameter it would round or truncate a
    fraction, or give null where the value does not fit), so the id is read from the text: an
    integer, or one with a zero fraction (a decimal's text); anything else (a fraction, NaN,
    a double's exponent, beyond the bigint range, no number) is invalid."""
    p, n = codec.p, codec.n
    x = sql.try_cast(value, "BIGINT")
    if text:
        wholes = [
            sql.call("regexp_extract", [value, sql.lit(pattern), sql.lit(1)])
            for pattern in (_ZERO_FRACTION, _ZERO_EXPONENT)
        ]
        x = sql.call("coalesce", [x, *(sql.try_cast(whole, "BIGINT") for whole in wholes)])  # '' if no match: null
    invalid = sql.or_(
        [
            sql.is_null(x),  # a decimal beyond the bigint range, or text that is no whole number
            sql.cmp(x, "<", sql.lit(0)),
            sql.cmp(x, ">", sql.lit(codec.max_id)),
            # a decimal with a fraction: ceil and floor keep the decimal's scale exactly, where
            # comparing it with x would narrow both to 18 digits of fraction (decimal(38,18))
            *([] if text else [sql.cmp(sql.call("ceil", [value]), "<>", sql.call("floor", [value]))]),
        ]
    )
    on_invalid = _on_invalid(
        handle_invalid,
        (f"spark-mlt: {sql_name}: id ", value),
        f" is outside the codec's domain [0, {codec.max_id + 1}) (p={p}, n={n}); ids must be whole numbers",
        "ids",
    )
    gate = [] if text else [(input_gate(value), sql.lit(None))]
    return x, [*gate, (sql.is_null(value), sql.lit(None)), (invalid, on_invalid)]


def checked_id(value: str, codec: MLTCodec, *, handle_invalid: RowHandling, sql_name: str, text: bool = False) -> str:
    """``value`` as a bigint id the codec accepts, or null (a null id, or an invalid one with
    ``handle_invalid="null"``); any other value fails the query naming it. With ``text``,
    ``value`` is a SQL function's STRING parameter (see `_id_checks`)."""
    x, checks = _id_checks(value, codec, handle_invalid=handle_invalid, sql_name=sql_name, text=text)
    return sql.case(checks, x)


def encode_tokens(x: str, codec: MLTCodec) -> list[str]:
    """The n tokens (each in [0, p)) of ``x``, a bigint expression that is never null and always a
    valid id (see [`encode_expr`][spark_mlt.column.builders.encode_expr]), so no intermediate leaves
    the bigint range and no table index leaves its table."""
    p, n = codec.p, codec.n
    if p == 2:
        # Over GF(2) token j is the parity of the id's bits in column j of M: one AND and a
        # population count (bit i of the id is digit n - 1 - i; digits above bit 62 are 0).
        matrix = codec.M.tolist()
        columns = [sum(matrix[n - 1 - bit][j] << bit for bit in range(min(n, 63))) for j in range(n)]
        return [
            sql.bit_and(sql.call("bit_count", [sql.bit_and(x, sql.lit(column))]), sql.lit(1)) if column else sql.lit(0)
            for column in columns
        ]
    spec = encode_tables(codec)
    if spec is not None:
        indexes = [
            sql.cast(sql.mod(x if divisor == 1 else sql.div(x, sql.lit(divisor)), sql.lit(size)), "INT")
            for divisor, size in spec.reads
        ]
        return lane_outputs(lookup_words(indexes, spec), p)
    digits: list[tuple[int, str]] = []
    for i in range(n):
        weight = p ** (n - 1 - i)
        if weight > MAX_ID:
            continue  # this digit is 0 for every id below 2**63
        digits.append((i, sql.mod(x if weight == 1 else sql.div(x, sql.lit(weight)), sql.lit(p))))
    matrix = codec.M.tolist()
    return lane_outputs(mat_words([(d, matrix[i]) for i, d in digits], p, p - 1), p)


def packed_parity(x: str, spec: XorTables) -> str:
    """p = 2: the packed tokens of ``x`` (never null, a valid id), one table per ten bits."""
    result: str | None = None
    for (first, count), table in zip(spec.spans, spec.tables, strict=True):
        shifted = x if first == 0 else sql.call("shiftright", [x, sql.lit(first)])
        entry = sql.call(
            "get", [sql.long_array(table), sql.cast(sql.bit_and(shifted, sql.lit((1 << count) - 1)), "INT")]
        )
        result = entry if result is None else sql.bit_xor(result, entry)
    return result if result is not None else sql.lit(0)


def encode_expr(
    value: str, codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, sql_name: str, text: bool = False
) -> str:
    """Tokens of ``value`` (any integral or decimal expression, or with ``text`` a string,
    see `_id_checks`) in ``layout`` (a vector: its values, see
    [`encode_parts`][spark_mlt.column.builders.encode_parts]).

    Shape of the expression: the tokens are computed from ``TRY_CAST(value AS BIGINT)``
    outside any conditional (Spark's subexpression elimination does not look inside CASE
    branches), whatever the id; a scalar CASE then picks the result, null, or the error:
    ``try_element_at(array(result), CASE ... THEN 1 END)``. See the module docs for the size.
    """
    result, checks = encode_parts(
        value, codec, layout=layout, handle_invalid=handle_invalid, sql_name=sql_name, text=text
    )
    if layout is PACKED:  # a bigint: 0 where valid, null (or the error) otherwise, plus the result; no array
        # ``result`` is null for some invalid ids (a table read at a negative index, a decimal
        # beyond the bigint range), and Spark never evaluates the CASE beside a null: `+` skips
        # its right operand where the left is null, and the optimizer folds `+` of a null
        # literal (a constant id's result) to null. So the CASE comes first and the result is
        # never null (coalesce reads it outside any branch: subexpressions are still shared).
        return sql.add(sql.case(checks, sql.lit(0)), sql.call("coalesce", [result, sql.lit(0)]))
    return sql.call("try_element_at", [sql.call("array", [result]), sql.case(checks, sql.lit(1))])


def encode_parts(
    value: str, codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, sql_name: str, text: bool = False
) -> tuple[str, list[tuple[str, str]]]:
    """The tokens of ``value`` in ``layout``, computed for every row whatever its id, and
    the CASE branches that turn a null or invalid id into null (a null id, or
    ``handle_invalid="null"``) or the error. The vector layout's tokens are its values (an
    array<double>, never null), which the engines wrap in a vector: SQL has no vector type."""
    x, checks = _id_checks(value, codec, handle_invalid=handle_invalid, sql_name=sql_name, text=text)
    parity = xor_encode_tables(codec) if layout is PACKED else None
    tokens = packed_parity(x, parity) if parity is not None else layout.write(encode_tokens(x, codec), codec)
    return tokens, checks


# --- tokens to ids --------------------------------------------------------------------------


def unpack_expr(
    packed: str, codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, sql_name: str
) -> str:
    """The tokens (array<int> or struct t0..t{n-1}) of a packed bigint; null in, null out."""
    tokens, fits = PACKED.unpack(packed, codec)
    valid = sql.and_(fits + [sql.cmp(token, "<", sql.lit(codec.p)) for token in tokens])
    result = layout.write(tokens, codec)
    on_invalid = _on_invalid(
        handle_invalid,
        (f"spark-mlt: {sql_name}: packed tokens ", packed),
        f" are not {codec.n} tokens of {codec.packed_bits} bits each in [0, {codec.p}) (p={codec.p}, n={codec.n})",
        "rows",
    )
    return _checked(packed, valid, result, on_invalid)


def _chunk_indexes(
    tokens: str, items: list[str], spans: Sequence[tuple[int, int]], *, bits: int, layout: TokenLayout
) -> list[str]:
    """The index of each chunk of tokens: its tokens' low ``bits`` bits side by side, token
    ``first + i`` in bits ``[i*bits, (i+1)*bits)``: read off the packed value, or put together
    from the tokens (a token too large for its bits is invalid, and masking it keeps the
    index within the table)."""
    low = (1 << bits) - 1
    indexes = []
    for first, count in spans:
        if layout is PACKED:
            whole = sql.cast(tokens, "BIGINT")
            shifted = sql.call("shiftrightunsigned", [whole, sql.lit(bits * first)]) if first else whole
            index = sql.bit_and(shifted, sql.lit((1 << (bits * count)) - 1))
        else:
            parts = [sql.bit_and(items[first + i], sql.lit(low)) for i in range(count)]
            placed = [
                part if i == 0 else sql.call("shiftleft", [part, sql.lit(bits * i)]) for i, part in enumerate(parts)
            ]
            index = placed[0]
            for part in placed[1:]:
                index = sql.bit_or(index, part)
        indexes.append(sql.cast(index, "INT"))
    return indexes


def decoded_sql(tokens: str, items: list[str], codec: MLTCodec, layout: TokenLayout) -> tuple[str, list[str]]:
    """The id of the tokens, null where a token is null or where the id is 2**63 or more, and
    further checks of its validity (exact only for tokens in [0, p))."""
    p, n = codec.p, codec.n
    parity = xor_decode_tables(codec)
    if parity is not None:  # p = 2: the id is the XOR of one entry per ten tokens
        indexes = _chunk_indexes(tokens, items, parity.spans, bits=1, layout=layout)
        entries = [
            sql.call("get", [sql.long_array(table), index]) for index, table in zip(indexes, parity.tables, strict=True)
        ]
        id_bits = entries[0]
        for entry in entries[1:]:
            id_bits = sql.bit_xor(id_bits, entry)
        return id_bits, [sql.cmp(id_bits, ">=", sql.lit(0))]  # bit 63 set: an id of 2**63 or more
    spec = decode_tables(codec)
    if spec is not None:
        words = lookup_words(_chunk_indexes(tokens, items, spec.spans, bits=codec.token_bits, layout=layout), spec)
    else:
        low = 2**codec.token_bits - 1
        # The arithmetic runs on the tokens' low bits (t & low, equal to t when valid), so
        # invalid tokens (any bigint) cannot overflow it; the validity check rejects them.
        inverse = codec.M_inv.tolist()
        masked = [sql.bit_and(item, sql.lit(low)) for item in items]
        words = mat_words([(masked[j], inverse[j]) for j in range(n)], p, low)
    return _id_of_digits(lane_outputs(words, p), codec)


def _id_of_digits(digits: Sequence[str], codec: MLTCodec) -> tuple[str, list[str]]:
    """The bigint id of n base-p digits (each in [0, p)), null when it is 2**63 or more, and
    the checks that the digits whose weight is 2**63 or more are 0.

    When p**n > 2**63 the id is split as ``hi * p**m + lo`` with ``p**m <= 2**62``, so both
    parts are bigints far from overflow, and combined by ``try_multiply`` and ``try_add``:
    exact below 2**63, null from it (under either ANSI mode). No decimals: Spark evaluates
    those per row through BigDecimal."""
    p, n = codec.p, codec.n
    weights = [p ** (n - 1 - i) for i in range(n)]
    if codec.capacity <= 2**63:
        return weighted(list(zip(digits, weights, strict=True))), []
    split = p ** max(m for m in range(n) if p**m <= 2**62)
    high = [sql.cmp(d, "=", sql.lit(0)) for d, w in zip(digits, weights, strict=True) if w > MAX_ID]
    hi = weighted([(d, w // split) for d, w in zip(digits, weights, strict=True) if split <= w <= MAX_ID])
    lo = weighted([(d, w) for d, w in zip(digits, weights, strict=True) if w < split])
    return sql.call("try_add", [sql.call("try_multiply", [hi, sql.lit(split)]), lo]), high


def decode_expr(
    tokens: str, codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, sql_name: str
) -> str:
    """The bigint id of ``tokens`` (array<int-like>, struct t0..t{n-1}, vector, or packed
    bigint).

    ``coalesce(value + ok, fallback)``: ``value`` is null where a token is null or the id is
    2**63 or more, ``ok`` (0, else null) checks the tokens' shape and range, and ``fallback``
    (null for null tokens, else null or the error) runs only where the sum is null. Spark
    evaluates ``value`` for every row, outside any CASE, so its subexpressions are shared,
    and it is read once: nothing copies the arithmetic.
    """
    p, n = codec.p, codec.n
    items, checks = layout.read(tokens, codec)
    value, value_checks = decoded_sql(tokens, items, codec, layout)
    shown = sql.call("array", items) if layout is VECTOR else tokens  # a vector is named by its tokens
    packed = layout is PACKED
    width = f"of {codec.token_bits} bits each " if packed else ""
    on_invalid = _on_invalid(
        handle_invalid,
        (f"spark-mlt: {sql_name}: {'packed tokens' if packed else 'token vector'} ", shown),
        f" is not a valid MLT code: expected {n} tokens in [0, {p}) {width}that decode to an id below 2^63"
        f" (p={p}, n={n})",
        "rows",
    )
    return _or_else(value, [*checks, *value_checks], tokens, on_invalid)


def _or_else(value: str, checks: list[str], source: str, on_invalid: str) -> str:
    """A bigint ``value`` where it is not null and every check holds; else null where
    ``source`` is null, and ``on_invalid`` (null or the error) otherwise."""
    ok = sql.case([(sql.and_(checks), sql.lit(0))], sql.lit(None)) if checks else sql.lit(0)
    fallback = sql.case([(sql.is_null(source), sql.lit(None))], on_invalid)
    return sql.call("coalesce", [value if not checks else sql.add(value, ok), fallback])
