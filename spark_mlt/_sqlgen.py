"""The native engine: MLT as plain Spark SQL expressions (private).

The same arithmetic is emitted for two targets, a PySpark ``Column`` (for
``mlt_encode``/``mlt_decode``) and SQL text (for ``CREATE TEMPORARY FUNCTION``), through the
small :class:`Backend` interface, so the two cannot drift apart.

Traps handled here:

* ANSI mode (Spark 4's default) raises on bigint overflow, and with ANSI off overflow wraps
  silently. Every intermediate stays below 2**63: digits come from ``x div p**k % p``
  (no power of p above 2**63 - 1 is ever formed: such a digit is 0 for any valid id), and
  products ``digit * M[i, j]`` (< 2**62) are summed only in groups whose sum cannot exceed
  2**63 - 1, each reduced mod p before the groups are added.
* Decoding to an id: when p**n <= 2**63 the weighted digit sum is below 2**63. Otherwise the
  digits whose weight is 2**63 or more must be 0, and the rest is summed as decimal(38,0)
  (each term < 2**94) and compared with 2**63 before the cast to bigint.
* Input types: an analysis-time gate (never evaluated: the optimizer folds ``false AND``
  away) makes Spark reject anything but integral and decimal inputs with its own
  DATATYPE_MISMATCH error naming the column and its type. Decimal values must be whole
  numbers that fit a bigint; other values are invalid rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from spark_mlt.codec import MAX_ID, MLTCodec

E = TypeVar("E")


class Backend(Protocol[E]):
    """Operations the builders need, for one target representation E."""

    def lit(self, value: int | str | bool | None) -> E: ...
    def add(self, a: E, b: E) -> E: ...
    def mul(self, a: E, b: E) -> E: ...
    def mod(self, a: E, b: E) -> E: ...
    def div(self, a: E, b: E) -> E: ...
    def cmp(self, a: E, op: str, b: E) -> E: ...
    def and_(self, items: Sequence[E]) -> E: ...
    def or_(self, items: Sequence[E]) -> E: ...
    def is_null(self, a: E) -> E: ...
    def cast(self, a: E, sql_type: str) -> E: ...
    def try_cast(self, a: E, sql_type: str) -> E: ...
    def case(self, branches: Sequence[tuple[E, E]], otherwise: E) -> E: ...
    def call(self, name: str, args: Sequence[E]) -> E: ...
    def field(self, a: E, name: str) -> E: ...
    def struct(self, names: Sequence[str], values: Sequence[E]) -> E: ...
    def bit_and(self, a: E, b: E) -> E: ...
    def bit_or(self, a: E, b: E) -> E: ...
    def bit_xor(self, a: E, b: E) -> E: ...
    def long_array(self, values: Sequence[int]) -> E: ...


class SqlBackend:
    """Emits Spark SQL text."""

    def lit(self, value: int | str | bool | None) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return f"{value}L" if abs(value) >= 2**31 else str(value)
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def add(self, a: str, b: str) -> str:
        return f"({a} + {b})"

    def mul(self, a: str, b: str) -> str:
        return f"({a} * {b})"

    def mod(self, a: str, b: str) -> str:
        return f"({a} % {b})"

    def div(self, a: str, b: str) -> str:
        return f"({a} div {b})"

    def cmp(self, a: str, op: str, b: str) -> str:
        return f"({a} {op} {b})"

    def and_(self, items: Sequence[str]) -> str:
        return "(" + " AND ".join(items) + ")"

    def or_(self, items: Sequence[str]) -> str:
        return "(" + " OR ".join(items) + ")"

    def is_null(self, a: str) -> str:
        return f"({a} IS NULL)"

    def cast(self, a: str, sql_type: str) -> str:
        return f"CAST({a} AS {sql_type})"

    def try_cast(self, a: str, sql_type: str) -> str:
        return f"TRY_CAST({a} AS {sql_type})"

    def case(self, branches: Sequence[tuple[str, str]], otherwise: str) -> str:
        whens = " ".join(f"WHEN {cond} THEN {value}" for cond, value in branches)
        return f"CASE {whens} ELSE {otherwise} END"

    def call(self, name: str, args: Sequence[str]) -> str:
        return f"{name}({', '.join(args)})"

    def field(self, a: str, name: str) -> str:
        return f"{a}.{name}"

    def struct(self, names: Sequence[str], values: Sequence[str]) -> str:
        pairs = ", ".join(f"'{name}', {value}" for name, value in zip(names, values, strict=True))
        return f"named_struct({pairs})"

    def bit_and(self, a: str, b: str) -> str:
        return f"({a} & {b})"

    def bit_or(self, a: str, b: str) -> str:
        return f"({a} | {b})"

    def bit_xor(self, a: str, b: str) -> str:
        return f"({a} ^ {b})"

    def long_array(self, values: Sequence[int]) -> str:
        return "array(" + ", ".join(f"{value}L" for value in values) + ")"


class ColumnBackend:
    """Builds PySpark Columns (works on Spark Classic and Spark Connect)."""

    def __init__(self) -> None:
        from pyspark.sql import functions

        self.F = functions

    def lit(self, value: int | str | bool | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return self.F.lit(value).cast("bigint" if abs(value) >= 2**31 else "int")
        return self.F.lit(value)

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    def mod(self, a: Any, b: Any) -> Any:
        return a % b

    def div(self, a: Any, b: Any) -> Any:
        return self.F.call_function("div", a, b)

    def cmp(self, a: Any, op: str, b: Any) -> Any:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "<>": a != b}[op]

    def and_(self, items: Sequence[Any]) -> Any:
        result = items[0]
        for item in items[1:]:
            result = result & item
        return result

    def or_(self, items: Sequence[Any]) -> Any:
        result = items[0]
        for item in items[1:]:
            result = result | item
        return result

    def is_null(self, a: Any) -> Any:
        return a.isNull()

    def cast(self, a: Any, sql_type: str) -> Any:
        return a.cast(sql_type)

    def try_cast(self, a: Any, sql_type: str) -> Any:
        return a.try_cast(sql_type)

    def case(self, branches: Sequence[tuple[Any, Any]], otherwise: Any) -> Any:
        (cond, value), *rest = branches
        result = self.F.when(cond, value)
        for cond, value in rest:
            result = result.when(cond, value)
        return result.otherwise(otherwise)

    def call(self, name: str, args: Sequence[Any]) -> Any:
        return self.F.call_function(name, *args)

    def field(self, a: Any, name: str) -> Any:
        return a.getField(name)

    def struct(self, names: Sequence[str], values: Sequence[Any]) -> Any:
        return self.F.struct(*[value.alias(name) for name, value in zip(names, values, strict=True)])

    def bit_and(self, a: Any, b: Any) -> Any:
        return a.bitwiseAND(b)

    def bit_or(self, a: Any, b: Any) -> Any:
        return a.bitwiseOR(b)

    def bit_xor(self, a: Any, b: Any) -> Any:
        return a.bitwiseXOR(b)

    def long_array(self, values: Sequence[int]) -> Any:
        """One array<bigint> literal. On Spark Classic ``F.lit`` of an array crosses Py4J
        once per element (0.1 ms each: 0.4 s for a table encoder's two codecs), so the
        values go over as one byte[] and become a long[] in the JVM; Spark Connect builds
        the literal locally."""
        from pyspark.sql.utils import is_remote

        array = np.asarray(values, dtype="<i8")
        if is_remote():
            return self.F.lit(array)
        from pyspark import SparkContext
        from pyspark.sql.classic.column import Column

        context = SparkContext._active_spark_context
        if context is None or context._gateway is None or context._jvm is None:  # let pyspark say why
            return self.F.lit(array)
        gateway, jvm = context._gateway, context._jvm
        longs = gateway.new_array(gateway.jvm.long, len(array))
        buffer = jvm.java.nio.ByteBuffer.wrap(bytearray(array.tobytes()))
        buffer.order(jvm.java.nio.ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(longs)
        return Column(jvm.org.apache.spark.sql.functions.lit(longs))


def token_names(n: int) -> list[str]:
    """Field names of the struct output: t0 .. t{n-1}."""
    return [f"t{j}" for j in range(n)]


def _sum_mod(b: Backend[E], terms: list[tuple[E, int]], p: int) -> E:
    """(sum of term * weight) mod p, never exceeding 2**63 - 1 on the way."""
    terms = [(t, w % p) for t, w in terms if w % p]
    if not terms:
        return b.lit(0)
    per_group = max(1, MAX_ID // max(1, (p - 1) ** 2))  # products < (p-1)**2 each
    groups = []
    for start in range(0, len(terms), per_group):
        groups.append(b.mod(_weighted(b, terms[start : start + per_group]), b.lit(p)))
    result = groups[0]
    for group in groups[1:]:  # each < p: the sum of n of them is far below 2**63
        result = b.add(result, group)
    return result if len(groups) == 1 else b.mod(result, b.lit(p))


def _mat_mod(b: Backend[E], rows: Sequence[tuple[E, Sequence[int]]], p: int, vmax: int) -> list[E]:
    """``(sum_i v_i * W_i[j]) mod p`` for every column j, given rows ``(v_i, W_i)`` with
    ``0 <= v_i <= vmax`` (bigint expressions) and weights in [0, p).

    SWAR: the n column sums are computed side by side in "lanes" of one bigint. Lane j of
    ``K_i`` holds ``W_i[j]``, so ``sum_i v_i * K_i`` holds every column's sum in its lane with
    no carry between lanes (each lane's sum is at most ``len(rows) * vmax * (p - 1)``, below
    ``2**lane``), and stays below 2**62. That is one multiply-add per row instead of n (the
    ANSI-checked multiply and add are the expensive operations here), then a shift, a mask and
    a mod per column. When fewer than two lanes fit in 62 bits (large p), it falls back to a
    sum per column.
    """
    n = len(rows[0][1])
    lane = max(1, len(rows) * vmax * (p - 1)).bit_length()
    per_word = 62 // lane
    if per_word < 2:
        return [_sum_mod(b, [(v, w[j]) for v, w in rows], p) for j in range(n)]
    mask = (1 << lane) - 1
    sums: list[E] = []
    for start in range(0, n, per_word):
        columns = list(range(start, min(n, start + per_word)))
        terms = [(v, sum((w[j] % p) << (lane * (j - start)) for j in columns)) for v, w in rows]
        word = _weighted(b, [(v, k) for v, k in terms if k])
        for j in columns:
            value = word if j == start else b.call("shiftright", [word, b.lit(lane * (j - start))])
            if j != columns[-1]:  # the top lane has nothing above it
                value = b.bit_and(value, b.lit(mask))
            sums.append(b.mod(value, b.lit(p)))
    return sums


TABLE_ENTRIES = 4096  # entries per lookup table of the table encoder
MAX_TABLES = 2  # lookup tables per codec (more make the plan slow to optimise)


@functools.lru_cache(maxsize=128)
def lookup_tables(codec: MLTCodec) -> tuple[tuple[int, int, tuple[int, ...]], ...] | None:
    """The table encoder's chunks, most significant first, or None where it does not apply.

    The n digits are split into a few chunks of k digits (p**k <= TABLE_ENTRIES). Chunk c
    of id x is ``v_c = (x div divisor_c) % size_c``, and its table maps v_c to its share of
    the tokens, ``digits(v_c) @ M[rows of c] mod p``, packed b bits per token as in
    :attr:`MLTCodec.packed_bits`. The tokens are the lane-wise sum mod p of the chunks'
    entries (see :func:`_lane_add_mod`); every table but the first stores its tokens plus
    ``2**b - p``, which that sum needs. Applies when the packed tokens fit in 63 bits and
    at least two digits fit in one table (p <= 64).

    Each entry is ``(divisor, size, table)``.
    """
    p, n, bits = codec.p, codec.n, codec.packed_bits
    if bits is None or n * bits > 63 or p * p > TABLE_ENTRIES:
        return None
    per_table = 2
    while p ** (per_table + 1) <= TABLE_ENTRIES:
        per_table += 1
    count = -(-n // per_table)
    if count > MAX_TABLES:  # each lane-wise sum repeats its inputs in the plan: keep it shallow
        return None
    sizes = [n // count + (1 if i < n % count else 0) for i in range(count)]
    offset = (1 << bits) - p
    shifts = np.arange(n, dtype=np.int64) * bits
    chunks = []
    start = 0
    for index, size in enumerate(sizes):
        stop = start + size
        values = np.arange(p**size, dtype=np.int64)
        digits = np.stack([(values // p ** (size - 1 - i)) % p for i in range(size)], axis=1)
        tokens = digits @ codec.M[start:stop] % p + (offset if index else 0)
        table = (tokens << shifts).sum(axis=1)  # below 2**63: n * bits <= 63
        chunks.append((p ** (n - stop), p**size, tuple(int(v) for v in table)))
        start = stop
    return tuple(chunks)


def _table_encode(b: Backend[E], x: E, codec: MLTCodec, chunks: tuple[tuple[int, int, tuple[int, ...]], ...]) -> E:
    """The packed tokens of the bigint id ``x`` (valid or null) by table lookups; see
    :func:`lookup_tables`. One division and one remainder per chunk, then bit operations."""

    def entry(divisor: int, size: int, table: tuple[int, ...], *, top: bool) -> E:
        value = x if divisor == 1 else b.div(x, b.lit(divisor))
        if not top:  # the top chunk of a valid id is below its size already
            value = b.mod(value, b.lit(size))
        return b.call("get", [b.long_array(table), b.cast(value, "INT")])

    (divisor, size, table), *rest = chunks
    total = entry(divisor, size, table, top=True)
    for divisor, size, table in rest:
        total = _lane_add_mod(b, total, entry(divisor, size, table, top=False), codec)
    return total


def _lane_add_mod(b: Backend[E], u: E, v: E, codec: MLTCodec) -> E:
    """Lane-wise ``(u_j + t_j) mod p`` of two packed words (n lanes of ``bits`` bits), where
    ``u_j < p`` and ``v_j = t_j + 2**bits - p`` with ``t_j < p`` (so v_j fits its lane).

    ``u_j + v_j`` carries out of its lane exactly when ``u_j + t_j >= p``, and then its low
    bits are the answer; otherwise the answer is those bits minus ``2**bits - p``. The sum
    is done without carries crossing lanes: the low ``bits - 1`` bits are added (each lane's
    sum fits its lane, and its top bit is the carry into the lane's top bit), the top bits
    are added by XOR, and each lane's carry out is the majority of u's top bit, v's top bit
    and that carry in.
    """
    p, n, bits = codec.p, codec.n, codec.require_packed_bits()
    offset = (1 << bits) - p
    top = sum(1 << (j * bits + bits - 1) for j in range(n))  # each lane's top bit
    low_mask = sum(((1 << (bits - 1)) - 1) << (j * bits) for j in range(n))
    low = b.add(b.bit_and(u, b.lit(low_mask)), b.bit_and(v, b.lit(low_mask)))  # < 2**63
    differ = b.bit_xor(u, v)
    total = b.bit_xor(low, b.bit_and(differ, b.lit(top)))
    if offset == 0:  # p = 2**bits (p = 2): the low bits are the answer in every lane
        return total
    carry = b.bit_and(b.bit_or(b.bit_and(u, v), b.bit_and(differ, low)), b.lit(top))  # majority(u, v, carry in)
    no_carry = b.call("shiftright", [b.bit_xor(carry, b.lit(top)), b.lit(bits - 1)])  # 1 per such lane
    return b.add(total, b.mul(no_carry, b.lit(-offset)))


def input_gate(b: Backend[E], value: E) -> E:
    """A predicate that is always false but fails analysis unless value is integral or decimal."""
    contains = b.call("array_contains", [b.call("array", [b.cast(b.lit(0), "BIGINT")]), value])
    interval = b.is_null(b.cast(value, "INTERVAL DAY"))
    return b.and_([b.lit(False), contains, interval])


def encode_expr(
    b: Backend[E],
    value: E,
    codec: MLTCodec,
    *,
    output: str,
    handle_invalid: str,
    sql_name: str,
    wrap: Callable[[E], E] | None = None,
) -> E:
    """Tokens of ``value`` (any integral or decimal expression).

    ``output``: ``"array"`` (array<int>), ``"struct"`` (t0..t{n-1}), ``"packed"`` (a bigint,
    token j in bits ``[j*b, (j+1)*b)``, see :attr:`MLTCodec.packed_bits`) or ``"scaled"``
    (array<double> of token / (p - 1), never null inside, for ML vectors); ``wrap``, if
    given, is applied to that result (for example ``array_to_vector``).

    Shape of the expression, for speed: a cheap scalar CASE first turns the input into the
    bigint id, or null, or an error; the tokens are then computed from that id outside any
    conditional, because Spark's subexpression elimination does not look inside CASE
    branches (inside one, every token would recompute every digit). The result is made null
    for a null id by ``try_element_at(array(result), CASE WHEN id IS NULL THEN NULL ELSE 1 END)``.
    """
    p, n = codec.p, codec.n
    x = b.try_cast(value, "BIGINT")
    invalid = b.or_(
        [
            b.is_null(x),  # a decimal beyond the bigint range
            b.cmp(x, "<", b.lit(0)),
            b.cmp(x, ">", b.lit(codec.max_id)),
            b.cmp(value, "<>", x),  # a decimal with a fraction
        ]
    )
    on_invalid = _on_invalid(
        b,
        handle_invalid,
        [
            b.lit(f"spark-mlt: {sql_name}: id "),
            b.cast(value, "STRING"),
            b.lit(
                f" is outside the codec's domain [0, {codec.max_id + 1}) (p={p}, n={n}); "
                "ids must be whole numbers; use handle_invalid='null' to turn such ids into nulls"
            ),
        ],
    )
    safe = b.case([(input_gate(b, value), b.lit(None)), (b.is_null(value), b.lit(None)), (invalid, on_invalid)], x)
    tables = lookup_tables(codec)
    if tables is not None:
        packed = _table_encode(b, safe, codec, tables)
        if output == "packed":
            return packed
        sums, _ = _packed_items(b, packed, codec)  # the same shifts and masks as unpacking
    else:
        sums = _digit_sums(b, safe, codec)
        if output == "packed":  # null propagates through the arithmetic: no wrapper needed
            bits = codec.require_packed_bits()
            packed = sums[0]
            for j in range(1, n):
                packed = b.bit_or(packed, b.call("shiftleft", [sums[j], b.lit(bits * j)]))
            return packed
    if output == "scaled":
        scale = b.cast(b.lit(max(p - 1, 1)), "DOUBLE")
        scaled = [b.call("try_divide", [b.cast(t, "DOUBLE"), scale]) for t in sums]
        result = b.call("array", [b.call("coalesce", [item, b.cast(b.lit(0), "DOUBLE")]) for item in scaled])
    else:
        tokens = [b.cast(t, "INT") for t in sums]
        result = b.struct(token_names(n), tokens) if output == "struct" else b.call("array", tokens)
    if wrap is not None:
        result = wrap(result)
    pick = b.case([(b.is_null(safe), b.lit(None))], b.lit(1))
    return b.call("try_element_at", [b.call("array", [result]), pick])


def _digit_sums(b: Backend[E], x: E, codec: MLTCodec) -> list[E]:
    """The n tokens (bigint) of the bigint id ``x`` (valid or null) by arithmetic: base-p
    digits by division, then :func:`_mat_mod`. Used where the table encoder does not apply."""
    p, n = codec.p, codec.n
    digits: list[tuple[int, E]] = []
    for i in range(n):
        weight = p ** (n - 1 - i)
        if weight > MAX_ID:
            continue  # this digit is 0 for every id below 2**63
        shifted = x if weight == 1 else b.div(x, b.lit(weight))
        digits.append((i, shifted if i == 0 and p**n <= 2**63 else b.mod(shifted, b.lit(p))))
    matrix = codec.M.tolist()
    return _mat_mod(b, [(d, matrix[i]) for i, d in digits], p, p - 1)


def _on_invalid(b: Backend[E], handle_invalid: str, message: list[E]) -> E:
    if handle_invalid == "null":
        return b.lit(None)
    return b.call("raise_error", [b.call("concat", message)])


def _checked(b: Backend[E], source: E, valid: E, value: E, on_invalid: E) -> E:
    """``value`` where ``valid``; null where ``source`` is null; else ``on_invalid`` (null or an
    error). ``value`` is computed outside the CASE, which only picks the array index, so
    subexpression elimination still sees it."""
    pick = b.case([(b.is_null(source), b.lit(None)), (b.call("coalesce", [valid, b.lit(False)]), b.lit(1))], on_invalid)
    return b.call("try_element_at", [b.call("array", [value]), pick])


def _packed_items(b: Backend[E], packed: E, codec: MLTCodec) -> tuple[list[E], list[E]]:
    """The n tokens (bigint, each in [0, 2**bits)) of a packed value, and the check that no
    bit above them is set."""
    bits = codec.require_packed_bits()
    whole = b.cast(packed, "BIGINT")
    items = [
        b.bit_and(whole if j == 0 else b.call("shiftrightunsigned", [whole, b.lit(bits * j)]), b.lit(2**bits - 1))
        for j in range(codec.n)
    ]
    top = bits * codec.n
    shape_ok = [b.cmp(b.call("shiftrightunsigned", [whole, b.lit(top)]), "=", b.lit(0))] if top < 64 else []
    return items, shape_ok


def unpack_expr(b: Backend[E], packed: E, codec: MLTCodec, *, output: str, handle_invalid: str, sql_name: str) -> E:
    """The tokens (array<int> or struct t0..t{n-1}) of a packed bigint; null in, null out."""
    items, shape_ok = _packed_items(b, packed, codec)
    valid = b.and_(shape_ok + [b.cmp(item, "<", b.lit(codec.p)) for item in items])
    tokens = [b.cast(item, "INT") for item in items]
    result = b.struct(token_names(codec.n), tokens) if output == "struct" else b.call("array", tokens)
    on_invalid = _on_invalid(
        b,
        handle_invalid,
        [
            b.lit(f"spark-mlt: {sql_name}: packed tokens "),
            b.cast(packed, "STRING"),
            b.lit(
                f" are not {codec.n} tokens of {codec.packed_bits} bits each in [0, {codec.p}) "
                f"(p={codec.p}, n={codec.n}); use handle_invalid='null' to turn such rows into nulls"
            ),
        ],
    )
    return _checked(b, packed, valid, result, on_invalid)


def decode_expr(b: Backend[E], tokens: E, codec: MLTCodec, *, form: str, handle_invalid: str, sql_name: str) -> E:
    """The bigint id of ``tokens`` (array<int-like>, struct t0..t{n-1}, or packed bigint).

    As in :func:`encode_expr`, the arithmetic sits outside any CASE branch; a CASE only
    picks null, the value, or the error.
    """
    p, n = codec.p, codec.n
    bits = max(1, (p - 1).bit_length())
    shape_ok: list[E]
    if form == "packed":
        items, shape_ok = _packed_items(b, tokens, codec)
    elif form == "struct":
        items = [b.field(tokens, name) for name in token_names(n)]
        shape_ok = []
    else:
        # get(): 0-based, null outside the array in every ANSI mode, and twice as fast as
        # try_element_at when reading cached or Parquet arrays.
        items = [b.call("get", [tokens, b.lit(j)]) for j in range(n)]
        shape_ok = [b.cmp(b.call("size", [tokens]), "=", b.lit(n))]
    t = [b.cast(item, "BIGINT") for item in items]
    valid = b.and_(
        shape_ok + [b.and_([b.cmp(tj, ">=", b.lit(0)), b.cmp(tj, "<", b.lit(p))]) for tj in t]
    )  # null when a token is null: treated as invalid below
    inverse = codec.M_inv.tolist()
    # The arithmetic runs on the tokens' low bits (t & (2**bits - 1), equal to t when valid),
    # so invalid tokens (any int32) cannot overflow it; such rows are rejected by ``valid``.
    masked = [b.bit_and(tj, b.lit(2**bits - 1)) for tj in t]
    digits = _mat_mod(b, [(masked[j], inverse[j]) for j in range(n)], p, 2**bits - 1)
    if codec.capacity <= 2**63:
        value = _weighted(b, [(d, p ** (n - 1 - i)) for i, d in enumerate(digits)])
    else:
        high = [d for i, d in enumerate(digits) if p ** (n - 1 - i) > MAX_ID]
        low = [
            (b.cast(d, "DECIMAL(38,0)"), p ** (n - 1 - i)) for i, d in enumerate(digits) if p ** (n - 1 - i) <= MAX_ID
        ]
        exact = _weighted(b, low, decimal=True)
        limit = b.cast(b.lit(MAX_ID), "DECIMAL(38,0)")
        fits = b.and_([b.cmp(d, "=", b.lit(0)) for d in high] + [b.cmp(exact, "<=", limit)])
        valid = b.and_([valid, fits])
        value = b.cast(b.case([(fits, exact)], b.lit(None)), "BIGINT")
    on_invalid = _on_invalid(
        b,
        handle_invalid,
        [
            b.lit(f"spark-mlt: {sql_name}: {'packed tokens' if form == 'packed' else 'token vector'} "),
            b.cast(tokens, "STRING"),
            b.lit(
                f" is not a valid MLT code: expected {n} tokens in [0, {p}) "
                + (f"of {bits} bits each " if form == "packed" else "")
                + f"that decode to an id below 2^63 (p={p}, n={n}); "
                + "use handle_invalid='null' to turn such rows into nulls"
            ),
        ],
    )
    return _checked(b, tokens, valid, value, on_invalid)


def _weighted(b: Backend[E], terms: list[tuple[E, int]], *, decimal: bool = False) -> E:
    total: E | None = None
    for term, weight in terms:
        if weight == 1:
            product = term
        else:
            factor = b.cast(b.lit(weight), "DECIMAL(38,0)") if decimal else b.lit(weight)
            product = b.mul(term, factor)
        total = product if total is None else b.add(total, product)
    return total if total is not None else b.lit(0)
