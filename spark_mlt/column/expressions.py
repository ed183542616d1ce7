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

Plan size. Spark expressions are trees: a value read k times is k copies of its subtree,
and the optimizer (CollapseProject, when it inlines a projection) and every rule after it
work on those copies. So no expression here reads a large subexpression more than once:

* tokens are computed from the raw bigint id, which every token may read (a column reference
  and a cast); the validity CASE reads the input a few times and only picks the result,
  ``try_element_at(array(result), CASE ... THEN 1 END)``;
* each token (or digit) reads one lane-packed word, which holds one table lookup per chunk of
  digits (:class:`Tables`) or one product per digit (:func:`_mat_words`). Where more than
  ``BIND_WORDS_ABOVE`` outputs would copy one word, the words are bound once to a lambda
  variable, ``transform(array(array(words)), w -> f(w[0], ...))[0]`` (:meth:`Backend.bind`),
  so an expression's size is linear in n. Spark 4.3 generates code for lambda functions;
  before it they run interpreted, so there up to ``COPY_UP_TO`` outputs copy their words
  instead (a constant factor on the size);
* an input longer than a column reference (say, another spark-mlt function) is bound the same
  way by :mod:`spark_mlt.column.functions`, so composed functions plan as the sum of their parts.

SQL functions cannot contain lambdas, so there :meth:`SqlBackend.bind` copies (the SQL
function's parameters are already evaluated once by Spark).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from pyspark import SparkContext
from pyspark.sql import functions as F
from pyspark.sql.utils import is_remote

from spark_mlt.codec import MAX_ID, MLTCodec
from spark_mlt.column.forms import token_names
from spark_mlt.column.versions import PYSPARK_LINE

try:
    from pyspark.sql.classic.column import Column as ClassicColumn
except ImportError:  # PySpark < 4.0
    from pyspark.sql.column import Column as ClassicColumn  # type: ignore[assignment,unused-ignore]

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
    def bind(self, values: Sequence[E], body: Callable[[list[E]], E]) -> E: ...

    @property
    def copies_cheaply(self) -> bool:
        """Whether copying a word into up to ``COPY_UP_TO`` outputs beats binding it."""
        ...


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

    copies_cheaply = True

    def bind(self, values: Sequence[str], body: Callable[[list[str]], str]) -> str:
        """Spark refuses lambdas in a SQL function's body, so the values are copied where
        read: the function's plan grows as n**2 / 4 for very long codecs (SQL only)."""
        return body(list(values))


class ColumnBackend:
    """Builds PySpark Columns (works on Spark Classic and Spark Connect)."""

    F = F

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
        """``TRY_CAST``; PySpark < 4.0 has no ``Column.try_cast``, so there only bigint is
        supported, as a cast of the value when it lies within the bigint range, else null."""
        if hasattr(type(a), "try_cast"):  # not hasattr(a): Column.__getattr__ reads struct fields
            return a.try_cast(sql_type)
        if sql_type != "BIGINT":
            raise NotImplementedError(sql_type)  # pragma: no cover - internal misuse
        low, high = self.lit(-(2**63)), self.lit(2**63 - 1)
        return self.F.when((a >= low) & (a <= high), a).cast("bigint")

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

    @property
    def copies_cheaply(self) -> bool:
        """Before Spark 4.3 lambda functions run interpreted, so there a few copies of a word
        cost less than binding it (``make bench-functions BENCH_LINE=3.5.0`` shows the gap)."""
        return PYSPARK_LINE < (4, 3)

    def bind(self, values: Sequence[Any], body: Callable[[list[Any]], Any]) -> Any:
        return self.F.transform(
            self.F.array(self.F.array(*values)), lambda bound: body([bound.getItem(i) for i in range(len(values))])
        ).getItem(0)

    def long_array(self, values: Sequence[int]) -> Any:
        """One array<bigint> literal. On Spark Classic ``F.lit`` of an array crosses Py4J
        once per element (a round trip each, thousands per table encoder), so the values go
        over as one byte[] and become a long[] in the JVM; Spark Connect builds the literal
        locally."""
        array = np.asarray(values, dtype="<i8")
        if is_remote():
            return self.F.lit(array)
        context = SparkContext._active_spark_context
        if context is None or context._gateway is None or context._jvm is None:  # let pyspark say why
            return self.F.lit(array)
        gateway, jvm = context._gateway, context._jvm
        longs = gateway.new_array(gateway.jvm.long, len(array))
        buffer = jvm.java.nio.ByteBuffer.wrap(bytearray(array.tobytes()))
        buffer.order(jvm.java.nio.ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(longs)
        return ClassicColumn(jvm.org.apache.spark.sql.functions.lit(longs))


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


Words = tuple[list[E], Callable[[Sequence[E]], list[E]]]  # lane-packed words, and their reader


def _lane_groups(outputs: int, lane: int) -> list[tuple[int, ...]]:
    """Outputs packed side by side, ``62 // lane`` per bigint word (at least one)."""
    per_word = max(1, 62 // lane)
    return [tuple(range(start, min(outputs, start + per_word))) for start in range(0, outputs, per_word)]


def _lane_reader(b: Backend[E], groups: Sequence[Sequence[int]], lane: int, p: int) -> Callable[[Sequence[E]], list[E]]:
    """Reads every output from its word's lane: a shift, a mask (not for the top lane) and
    ``% p``."""
    mask = (1 << lane) - 1

    def read(words: Sequence[E]) -> list[E]:
        outputs: list[E] = []
        for word, group in zip(words, groups, strict=True):
            for j in group:
                shift = lane * (j - group[0])
                value = word if shift == 0 else b.call("shiftright", [word, b.lit(shift)])
                if j != group[-1]:
                    value = b.bit_and(value, b.lit(mask))
                outputs.append(b.mod(value, b.lit(p)))
        return outputs

    return read


def _from_words(b: Backend[E], words: Words[E], outputs: int, finish: Callable[[list[E]], E]) -> E:
    """``finish`` of the outputs the words hold. Where many outputs read each word, the words
    are bound once to a lambda variable (see the module docs) instead of copied per output."""
    values, read = words
    if len(values) * BIND_WORDS_ABOVE < outputs and not (outputs <= COPY_UP_TO and b.copies_cheaply):
        return b.bind(values, lambda bound: finish(read(bound)))
    return finish(read(values))


def _mat_words(b: Backend[E], rows: Sequence[tuple[E, Sequence[int]]], p: int, vmax: int) -> Words[E]:
    """``(sum_i v_i * W_i[j]) mod p`` for every column j, given rows ``(v_i, W_i)`` with
    ``|v_i| <= vmax`` (bigint expressions) and weights in [0, p), as words and their reader.

    SWAR: the n column sums are computed side by side in "lanes" of one bigint. Lane j of
    ``K_i`` holds ``W_i[j]``, so ``sum_i v_i * K_i`` holds every column's sum in its lane with
    no carry between lanes (each lane's sum is at most ``len(rows) * vmax * (p - 1)``, below
    ``2**lane``), and stays below 2**62. That is one multiply-add per row instead of n (the
    ANSI-checked multiply and add are the expensive operations here), then a shift, a mask and
    a mod per column. When fewer than two lanes fit in 62 bits (large p), each column has a
    word of its own, reduced mod p already.
    """
    n = len(rows[0][1])
    lane = max(1, len(rows) * vmax * (p - 1)).bit_length()
    if 62 // lane < 2:
        return [_sum_mod(b, [(v, w[j]) for v, w in rows], p) for j in range(n)], list
    groups = _lane_groups(n, lane)
    words = []
    for columns in groups:
        terms = [(v, sum((w[j] % p) << (lane * (j - columns[0])) for j in columns)) for v, w in rows]
        words.append(_weighted(b, [(v, k) for v, k in terms if k]))
    return words, _lane_reader(b, groups, lane, p)


TABLE_ENTRIES = 1024  # largest lookup table (entries) of the table encoder and decoder
BIND_WORDS_ABOVE = 4  # outputs per word above which an expression binds its words to a lambda
COPY_UP_TO = 8  # outputs that copy their words where lambdas are slow (Backend.copies_cheaply)


@dataclass(frozen=True)
class Tables:
    """Lookup tables that multiply chunks of base-p digits by a matrix mod p, lane-packed.

    The digits are split into chunks (most significant first); chunk c's value ``v_c`` is
    read from the input by :attr:`reads` (a divisor and a modulus for an id, a shift and a
    mask for packed tokens). ``tables[g][c][v]`` holds, for output group g, chunk c's share
    ``digits(v) @ matrix[rows of c] mod p`` of each output in the group, one ``lane``-bit
    lane per output. Adding one entry per chunk sums every output of the group in its lane
    (no carries: each lane's sum is below ``chunks * p <= 2**lane``); a shift, a mask and
    a ``% p`` then read each output. Each output's expression holds one lookup per chunk,
    so its size does not grow with n.
    """

    reads: tuple[tuple[int, int], ...]
    lane: int
    groups: tuple[tuple[int, ...], ...]
    tables: tuple[tuple[tuple[int, ...], ...], ...]


def _chunk_sizes(count: int, per_chunk: int) -> list[int]:
    chunks = -(-count // per_chunk)
    return [count // chunks + (1 if i < count % chunks else 0) for i in range(chunks)]


def _lane_tables(
    shares: list[npt.NDArray[np.int64]], p: int, outputs: int
) -> tuple[int, tuple[tuple[int, ...], ...], tuple[tuple[tuple[int, ...], ...], ...]]:
    """Lane-packed tables for chunk shares ``shares[c]`` ((entries, outputs) arrays in [0, p))."""
    lane = max(1, len(shares) * (p - 1)).bit_length()
    groups = tuple(_lane_groups(outputs, lane))
    tables = []
    for group in groups:
        shifts = np.array([lane * (j - group[0]) for j in group], dtype=np.int64)
        tables.append(tuple(tuple(int(v) for v in (share[:, group] << shifts).sum(axis=1)) for share in shares))
    return lane, groups, tuple(tables)


@functools.lru_cache(maxsize=128)
def encode_tables(codec: MLTCodec) -> Tables | None:
    """The table encoder's tables for ``codec``, or None where a chunk would hold fewer than
    two digits (p**2 > TABLE_ENTRIES): there, digit-by-digit arithmetic is as small."""
    p, n = codec.p, codec.n
    if p * p > TABLE_ENTRIES:
        return None
    per_chunk = int(np.floor(np.log(TABLE_ENTRIES) / np.log(p) + 1e-9))
    while p**per_chunk > TABLE_ENTRIES:
        per_chunk -= 1
    first = next(i for i in range(n) if p ** (n - 1 - i) <= MAX_ID)  # higher digits are 0 for any bigint
    reads: list[tuple[int, int]] = []
    shares: list[npt.NDArray[np.int64]] = []
    start = first
    for size in _chunk_sizes(n - first, per_chunk):
        stop = start + size
        values = np.arange(p**size, dtype=np.int64)
        digits = np.stack([(values // p ** (size - 1 - i)) % p for i in range(size)], axis=1)
        shares.append(digits @ codec.M[start:stop] % p)
        reads.append((p ** (n - stop), p**size))
        start = stop
    lane, groups, tables = _lane_tables(shares, p, n)
    return Tables(tuple(reads), lane, groups, tables)


@functools.lru_cache(maxsize=128)
def decode_tables(codec: MLTCodec) -> Tables | None:
    """The packed-token decoder's tables: chunks of k tokens of ``bits`` bits (2**(k*bits)
    <= TABLE_ENTRIES) map to their share of the digits ``tokens @ M_inv mod p``. Entries of
    token values >= p are 0: such rows are rejected by the validity check."""
    p, n, bits = codec.p, codec.n, codec.packed_bits
    if bits is None or 2 ** (2 * bits) > TABLE_ENTRIES:
        return None
    per_chunk = max(2, int(np.log2(TABLE_ENTRIES)) // bits)
    reads: list[tuple[int, int]] = []
    shares: list[npt.NDArray[np.int64]] = []
    start = 0
    for size in _chunk_sizes(n, per_chunk):
        values = np.arange(2 ** (size * bits), dtype=np.int64)
        tokens = np.stack([(values >> (bits * i)) & ((1 << bits) - 1) for i in range(size)], axis=1)
        share = tokens @ codec.M_inv[start : start + size] % p
        share[(tokens >= p).any(axis=1)] = 0
        shares.append(share)
        reads.append((bits * start, (1 << (bits * size)) - 1))
        start += size
    lane, groups, tables = _lane_tables(shares, p, n)
    return Tables(tuple(reads), lane, groups, tables)


def _lookup_words(b: Backend[E], indexes: Sequence[E], spec: Tables, p: int) -> Words[E]:
    """The tables' words (one lookup per chunk each) and their reader, given each chunk's
    index expression."""
    words: list[E] = []
    for tables in spec.tables:
        entries = [b.call("get", [b.long_array(t), index]) for index, t in zip(indexes, tables, strict=True) if any(t)]
        word = entries[0] if entries else b.lit(0)
        for entry in entries[1:]:
            word = b.add(word, entry)
        words.append(word)
    return words, _lane_reader(b, spec.groups, spec.lane, p)


def _encode_words(b: Backend[E], x: E, codec: MLTCodec) -> Words[E]:
    """The n tokens (bigint) of the bigint id ``x``, as a few words and a function that reads
    the tokens from them: exact when x is a valid id; null, or some value in (-p, p),
    otherwise (the caller discards those rows). No intermediate leaves the bigint range for
    any bigint x, and ``x`` is the only input read."""
    p = codec.p
    spec = encode_tables(codec)
    if spec is not None:
        indexes = [
            b.cast(b.mod(x if divisor == 1 else b.div(x, b.lit(divisor)), b.lit(size)), "INT")
            for divisor, size in spec.reads
        ]
        return _lookup_words(b, indexes, spec, p)
    digits: list[tuple[int, E]] = []
    for i in range(codec.n):
        weight = p ** (codec.n - 1 - i)
        if weight > MAX_ID:
            continue  # this digit is 0 for every id below 2**63
        digits.append((i, b.mod(x if weight == 1 else b.div(x, b.lit(weight)), b.lit(p))))
    matrix = codec.M.tolist()
    return _mat_words(b, [(d, matrix[i]) for i, d in digits], p, p - 1)


def _balanced(b: Backend[E], items: Sequence[E], combine: Callable[[E, E], E]) -> E:
    """``items`` combined pairwise as a balanced tree: depth log2(n), not n."""
    while len(items) > 1:
        pairs = [combine(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        items = pairs + ([items[-1]] if len(items) % 2 else [])
    return items[0]


def input_gate(b: Backend[E], value: E) -> E:
    """A predicate that is always false but fails analysis unless value is integral or decimal."""
    contains = b.call("array_contains", [b.call("array", [b.cast(b.lit(0), "BIGINT")]), value])
    interval = b.is_null(b.cast(value, "INTERVAL DAY"))
    return b.and_([b.lit(False), contains, interval])


def _id_checks(
    b: Backend[E], value: E, codec: MLTCodec, *, handle_invalid: str, sql_name: str
) -> tuple[E, list[tuple[E, E]]]:
    """``TRY_CAST(value AS BIGINT)`` and the CASE branches that turn a null, invalid or
    mistyped ``value`` into null or an error; a row that passes them has a valid id."""
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
        (f"spark-mlt: {sql_name}: id ", value),
        f" is outside the codec's domain [0, {codec.max_id + 1}) (p={p}, n={n}); ids must be whole numbers",
        "ids",
    )
    return x, [(input_gate(b, value), b.lit(None)), (b.is_null(value), b.lit(None)), (invalid, on_invalid)]


def checked_id(b: Backend[E], value: E, codec: MLTCodec, *, handle_invalid: str, sql_name: str) -> E:
    """``value`` as a bigint id the codec accepts, or null (a null id, or an invalid one with
    ``handle_invalid="null"``); any other value fails the query naming it."""
    x, checks = _id_checks(b, value, codec, handle_invalid=handle_invalid, sql_name=sql_name)
    return b.case(checks, x)


def encode_expr(
    b: Backend[E],
    value: E,
    codec: MLTCodec,
    *,
    layout: str,
    handle_invalid: str,
    sql_name: str,
    wrap: Callable[[E], E] | None = None,
) -> E:
    """Tokens of ``value`` (any integral or decimal expression).

    ``layout``: ``"array"`` (array<int>), ``"struct"`` (t0..t{n-1}), ``"packed"`` (a bigint,
    token j in bits ``[j*b, (j+1)*b)``, see :attr:`MLTCodec.packed_bits`) or ``"scaled"``
    (array<double> of token / (p - 1), never null inside, for ML vectors); ``wrap``, if
    given, is applied to that result (for example ``array_to_vector``).

    Shape of the expression: the tokens are computed from ``TRY_CAST(value AS BIGINT)``
    outside any conditional (Spark's subexpression elimination does not look inside CASE
    branches), whatever the id; a scalar CASE then picks the result, null, or the error:
    ``try_element_at(array(result), CASE ... THEN 1 END)``. See the module docs for the size.
    """
    p, n = codec.p, codec.n
    x, checks = _id_checks(b, value, codec, handle_invalid=handle_invalid, sql_name=sql_name)
    pick = b.case(checks, b.lit(1))

    def shape(sums: Sequence[E]) -> E:
        if layout == "packed":
            bits = codec.require_packed_bits()
            shifted = [s if j == 0 else b.call("shiftleft", [s, b.lit(bits * j)]) for j, s in enumerate(sums)]
            return _balanced(b, shifted, b.bit_or)
        if layout == "scaled":
            scale = b.cast(b.lit(max(p - 1, 1)), "DOUBLE")
            scaled = [b.call("try_divide", [b.cast(t, "DOUBLE"), scale]) for t in sums]
            return b.call("array", [b.call("coalesce", [item, b.cast(b.lit(0), "DOUBLE")]) for item in scaled])
        tokens = [b.cast(t, "INT") for t in sums]
        return b.struct(token_names(n), tokens) if layout == "struct" else b.call("array", tokens)

    result = _from_words(b, _encode_words(b, x, codec), n, shape)
    if wrap is not None:
        result = wrap(result)
    return b.call("try_element_at", [b.call("array", [result]), pick])


def _on_invalid(b: Backend[E], handle_invalid: str, subject: tuple[str, E], problem: str, things: str) -> E:
    """Null, or (``handle_invalid="error"``) an error whose message is ``subject[0]``, the
    offending value ``subject[1]`` as text, ``problem`` and how to get nulls instead."""
    if handle_invalid == "null":
        return b.lit(None)
    prefix, value = subject
    advice = f"; use handle_invalid='null' to turn such {things} into nulls"
    return b.call("raise_error", [b.call("concat", [b.lit(prefix), b.cast(value, "STRING"), b.lit(problem + advice)])])


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


def unpack_expr(b: Backend[E], packed: E, codec: MLTCodec, *, layout: str, handle_invalid: str, sql_name: str) -> E:
    """The tokens (array<int> or struct t0..t{n-1}) of a packed bigint; null in, null out."""
    items, shape_ok = _packed_items(b, packed, codec)
    valid = b.and_(shape_ok + [b.cmp(item, "<", b.lit(codec.p)) for item in items])
    tokens = [b.cast(item, "INT") for item in items]
    result = b.struct(token_names(codec.n), tokens) if layout == "struct" else b.call("array", tokens)
    on_invalid = _on_invalid(
        b,
        handle_invalid,
        (f"spark-mlt: {sql_name}: packed tokens ", packed),
        f" are not {codec.n} tokens of {codec.packed_bits} bits each in [0, {codec.p}) (p={codec.p}, n={codec.n})",
        "rows",
    )
    return _checked(b, packed, valid, result, on_invalid)


def _token_items(b: Backend[E], tokens: E, codec: MLTCodec, layout: str) -> tuple[list[E], list[E]]:
    """The n tokens of ``tokens`` (as bigint) and the checks of its shape."""
    if layout == "packed":
        items, shape_ok = _packed_items(b, tokens, codec)
    elif layout == "struct":
        items, shape_ok = [b.field(tokens, name) for name in token_names(codec.n)], []
    else:
        # get(): 0-based, null outside the array in every ANSI mode, and twice as fast as
        # try_element_at when reading cached or Parquet arrays.
        items = [b.call("get", [tokens, b.lit(j)]) for j in range(codec.n)]
        shape_ok = [b.cmp(b.call("size", [tokens]), "=", b.lit(codec.n))]
    return [b.cast(item, "BIGINT") for item in items], shape_ok


def _digit_words(b: Backend[E], tokens: E, t: list[E], codec: MLTCodec, layout: str) -> Words[E]:
    """The words holding the digits ``t @ M_inv mod p``: from lookup tables read straight
    off the packed bits (one read per chunk of tokens), else by multiply-accumulate."""
    p, n = codec.p, codec.n
    spec = decode_tables(codec) if layout == "packed" else None
    if spec is not None:
        whole = b.cast(tokens, "BIGINT")
        indexes = [
            b.cast(b.bit_and(b.call("shiftrightunsigned", [whole, b.lit(at)]) if at else whole, b.lit(mask)), "INT")
            for at, mask in spec.reads
        ]
        return _lookup_words(b, indexes, spec, p)
    inverse = codec.M_inv.tolist()
    low = 2 ** max(1, (p - 1).bit_length()) - 1
    # The arithmetic runs on the tokens' low bits (t & low, equal to t when valid), so
    # invalid tokens (any int32) cannot overflow it; the validity check rejects them.
    masked = [b.bit_and(tj, b.lit(low)) for tj in t]
    return _mat_words(b, [(masked[j], inverse[j]) for j in range(n)], p, low)


def decode_expr(b: Backend[E], tokens: E, codec: MLTCodec, *, layout: str, handle_invalid: str, sql_name: str) -> E:
    """The bigint id of ``tokens`` (array<int-like>, struct t0..t{n-1}, or packed bigint).

    As in :func:`encode_expr`, the arithmetic sits outside any CASE branch; a CASE only
    picks null, the value, or the error.
    """
    p, n = codec.p, codec.n
    t, shape_ok = _token_items(b, tokens, codec, layout)
    # null when a token is null: treated as invalid by _checked
    valid = b.and_(shape_ok + [b.and_([b.cmp(tj, ">=", b.lit(0)), b.cmp(tj, "<", b.lit(p))]) for tj in t])
    value = _from_words(b, _digit_words(b, tokens, t, codec, layout), n, lambda d: _id_of_digits(b, d, codec))
    if codec.capacity > 2**63:  # a code of an id beyond the bigint range decodes to null
        valid = b.and_([valid, b.call("isnotnull", [value])])
    packed = layout == "packed"
    width = f"of {max(1, (p - 1).bit_length())} bits each " if packed else ""
    on_invalid = _on_invalid(
        b,
        handle_invalid,
        (f"spark-mlt: {sql_name}: {'packed tokens' if packed else 'token vector'} ", tokens),
        f" is not a valid MLT code: expected {n} tokens in [0, {p}) {width}that decode to an id below 2^63"
        f" (p={p}, n={n})",
        "rows",
    )
    return _checked(b, tokens, valid, value, on_invalid)


def _id_of_digits(b: Backend[E], digits: Sequence[E], codec: MLTCodec) -> E:
    """The bigint id of n base-p digits (each in [0, p)), or null when it is 2**63 or more."""
    p, n = codec.p, codec.n
    if codec.capacity <= 2**63:
        return _weighted(b, [(d, p ** (n - 1 - i)) for i, d in enumerate(digits)])
    high = [d for i, d in enumerate(digits) if p ** (n - 1 - i) > MAX_ID]
    low = [(b.cast(d, "DECIMAL(38,0)"), p ** (n - 1 - i)) for i, d in enumerate(digits) if p ** (n - 1 - i) <= MAX_ID]
    exact = _weighted(b, low, decimal=True)  # each term < 2**94: exact in decimal(38, 0)
    fits = b.and_(
        [b.cmp(d, "=", b.lit(0)) for d in high] + [b.cmp(exact, "<=", b.cast(b.lit(MAX_ID), "DECIMAL(38,0)"))]
    )
    return b.cast(b.case([(fits, exact)], b.lit(None)), "BIGINT")


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
