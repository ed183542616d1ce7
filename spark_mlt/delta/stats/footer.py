"""The statistics of a data file, read from its Parquet footer: what the jar-free writer commits.

Every Delta reader skips whole files by an ``add`` action's ``minValues`` and ``maxValues``, and
delta-spark answers ``SELECT min(x), max(x), count(*)`` from them alone; a wrong bound loses
rows silently, a missing one only costs a scan. So each bound written here is a true bound of
the file's values under the comparison of every reader spark-mlt is tested with (delta-spark,
delta-rs and the readers built on them), or the column's bounds are left out, both of them:
readers built on delta-rs read a lone bound as a fact about every value (measured with deltalake
1.6.6), and delta-spark answers nothing from a column missing one. And a missing one costs a
scan only where no other column of the file has bounds (the last point below).

How the footer is read:

* Each column's physical type, logical type and unit come from the footer itself, whatever the
  writing session's ``spark.sql.parquet.*`` settings made of it: timestamps in milliseconds,
  microseconds or nanoseconds (``outputTimestampType``), decimals as 32- or 64-bit integers or as
  two's complement bytes (``writeLegacyFormat``, precision above 18). A column whose types are
  not the ones its Delta type is written as (INT96 timestamps, unsigned integers) gets no bounds.
* A file's bounds merge its row groups' bounds after decoding them, in the order readers compare
  values in: numbers by value, floats in IEEE 754's total order (-0.0 below +0.0, as Parquet's
  writer in Spark orders them), strings by their UTF-8 bytes. A row group that has values but no
  bounds (a string longer than the writer keeps in a footer) leaves the file without bounds.
* Dates and timestamps written in Spark's legacy (Julian) calendar get no bounds: the footer
  does not say which calendar a value is in (Spark marks the file).

How each bound is written (the protocol's "Per-file Statistics", in delta-spark's forms):

* integers and decimals as exact JSON numbers, booleans as JSON booleans; floats exactly (a
  32-bit float as the double that holds it, which every reader reads back as the same float), a
  zero minimum as -0.0 and a zero maximum as +0.0 (the Parquet format's rule for its own
  statistics: delta-rs' DataFusion scan and DuckDB order -0.0 below +0.0 when they prune, but
  compare a row's -0.0 equal to 0.0); a file with a NaN or an infinity in a float column gets no
  bounds for it (Spark sorts NaN above every number, delta-rs' readers compare a ``"NaN"`` bound
  as a number, and JSON holds neither);
* dates as ``2024-01-02``; timestamps at millisecond precision, the minimum rounded down and the
  maximum rounded up to a whole millisecond (``2024-01-02T03:04:05.679Z``; without time zone, no
  ``Z``), a true bound for every reader whether or not it adds Delta's millisecond back;
* strings cut to the table's prefix (``delta.dataSkippingStringPrefixLength``) as delta-spark
  cuts them: the minimum to its first characters, the maximum with delta-spark's tie-breaker so
  that it stays above every value in UTF-8 order; a maximum that cannot be cut so (a run of
  U+10FFFF) leaves the column without bounds;
* ``nullCount`` for every column of the spec whose row groups all count their nulls (bounds are
  only written with it: delta-spark skips nothing without it, and delta-rs' pyarrow dataset then
  takes the column for one without nulls); ``tightBounds: true`` where the table supports deletion
  vectors, as delta-spark writes it (these files have none);
* a file that holds a value of a statistics column (other than binary, an array or a map) and
  cannot bound it (any of the above: NaN, INT96, a string maximum that cannot be cut, a footer
  without bounds, the legacy calendar, no null count) records no bound of any column, only
  ``numRecords`` and ``nullCount``: deltalake's pyarrow dataset (1.6.6) reads the missing bounds
  of one column among others' as ``column >= null and column <= null``, which no row passes, and
  loses the file's rows to every filter on it (measured), while it reads a file without
  ``minValues`` and ``maxValues`` as one it knows no bounds of. So a file without bounds costs a
  scan of it; a column of the table's statistics that a file does not bound among others' costs
  its rows. (Taking such a column out of the table's statistics columns first, in a commit of
  its own, would keep the other columns' bounds, but deltalake 1.6.6's
  ``alter.set_table_properties`` rewrites a protocol of table features with ``variantType``
  added, which the jar-free writer and older readers refuse.)

Example::

    add.stats = file_stats(pq.read_metadata(path), stats_spec(snapshot.layout, snapshot.config))
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    FloatType,
    MapType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from spark_mlt.delta.stats.columns import FLOATS, INTEGERS, StatsColumn, StatsSpec

__all__ = ["file_stats", "stats_json", "truncate_max_string", "truncate_min_string"]

#: Footer keys Spark writes when dates and timestamps were rebased to the legacy calendar.
_LEGACY_CALENDAR = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")
#: Nanoseconds per unit of a Parquet timestamp.
_UNIT_NANOS = {"milliseconds": 1_000_000, "microseconds": 1_000, "nanoseconds": 1}
_MILLI = 1_000_000  # nanoseconds

#: A decoded footer value, and how two of them compare.
Decode = Callable[[Any], Any]


def file_stats(metadata: pq.FileMetaData, spec: StatsSpec) -> str:
    """The ``stats`` JSON of an ``add`` action for the Parquet file whose footer is ``metadata``.

    Example::

        file_stats(pq.read_metadata("part-0.parquet"), spec)  # '{"numRecords":3,"minValues":{...},...}'
    """
    leaves = _leaf_indexes(metadata.schema.to_arrow_schema())
    legacy_calendar = any(key in (metadata.metadata or {}) for key in _LEGACY_CALENDAR)
    rows = [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    unbounded = False  # a column readers take bounds of has values but none
    for column in spec.columns:
        index = leaves.get(column.path)
        chunks = [] if index is None else [metadata.row_group(g).column(index) for g in range(metadata.num_row_groups)]
        null_count = _null_count(chunks) if chunks else None
        if null_count is not None:
            _put(nulls, column.path, null_count)
        bounds = None
        if chunks and column.bounds and not (legacy_calendar and _calendar_type(column.kind)):
            bounds = _column_bounds(column, metadata.schema.column(index), chunks, rows, spec.string_prefix)
        if bounds is not None:
            _put(minimum, column.path, bounds[0])
            _put(maximum, column.path, bounds[1])
        elif _read_as_bounded(column.kind) and null_count != metadata.num_rows:
            unbounded = True
    if unbounded:  # no bounds of any column: see the module's notes
        minimum, maximum = {}, {}
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    if minimum:
        stats["minValues"] = minimum
    if maximum:
        stats["maxValues"] = maximum
    if nulls:
        stats["nullCount"] = nulls
    if spec.tight_bounds:
        stats["tightBounds"] = True
    return stats_json(stats)


def _read_as_bounded(kind: DataType) -> bool:
    """Whether readers built on delta-rs take a statistics column of type ``kind`` without bounds
    in a file for one without values: every type but binary, arrays and maps (see the module's
    notes)."""
    return not isinstance(kind, BinaryType | ArrayType | MapType)


def _leaf_indexes(schema: pa.Schema) -> dict[tuple[str, ...], int]:
    """The Parquet column index of each leaf outside lists and maps, by its path of names.

    A Parquet file's columns are the leaves of its schema, depth first: a struct's fields in
    order, a list's element, a map's key then value."""
    indexes: dict[tuple[str, ...], int] = {}
    counter = [0]

    def walk(kind: pa.DataType, path: tuple[str, ...] | None) -> None:
        if pa.types.is_struct(kind):
            for i in range(kind.num_fields):
                child = kind.field(i)
                walk(child.type, None if path is None else (*path, child.name))
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
            walk(kind.value_type, None)
        elif pa.types.is_map(kind):
            walk(kind.key_type, None)
            walk(kind.item_type, None)
        else:
            if path is not None:
                indexes[path] = counter[0]
            counter[0] += 1

    for field in schema:
        walk(field.type, (field.name,))
    return indexes


def _null_count(chunks: Sequence[pq.ColumnChunkMetaData]) -> int | None:
    total = 0
    for chunk in chunks:
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            return None
        total += stats.null_count
    return total


def _calendar_type(kind: DataType) -> bool:
    return isinstance(kind, DateType | TimestampType | TimestampNTZType)


def _column_bounds(
    column: StatsColumn,
    schema: pq.ColumnSchema,
    chunks: Sequence[pq.ColumnChunkMetaData],
    rows: Sequence[int],
    prefix: int,
) -> tuple[Any, Any] | None:
    """The column's minimum and maximum as JSON values, or None when either cannot be a true bound."""
    decode = _decoder(column.kind, schema)
    if decode is None:
        return None
    merged = _merge(chunks, rows, decode, _order(column.kind))
    if merged is None:
        return None
    low, high = _lower(column.kind, merged[0], prefix), _upper(column.kind, merged[1], prefix)
    return None if low is None or high is None else (low, high)


# --- decoding a footer's values ----------------------------------------------------------------


def _logical(schema: pq.ColumnSchema) -> dict[str, Any]:
    """The column's Parquet logical type as its JSON description (``{"Type": "None"}`` for none)."""
    logical = schema.logical_type
    described = dict(json.loads(logical.to_json())) if logical is not None else {}
    return {"Type": "None", **described}


def _decoder(kind: DataType, schema: pq.ColumnSchema) -> Decode | None:
    """How to read the column's footer values as the values of its Delta type ``kind``: an
    integer, a float, a ``Decimal``, a number of days or nanoseconds since the epoch, or UTF-8
    bytes; None when the column is not stored as that type is (see the module's notes)."""
    physical, logical = schema.physical_type, _logical(schema)
    for types, decoder in _DECODERS:
        if isinstance(kind, types):
            return decoder(kind, physical, logical)
    return None


def _integers(kind: DataType, physical: str, logical: dict[str, Any]) -> Decode | None:
    signed = logical["Type"] == "None" or (logical["Type"] == "Int" and logical.get("isSigned") is True)
    return _integer if physical in ("INT32", "INT64") and signed else None


def _floats(kind: DataType, physical: str, logical: dict[str, Any]) -> Decode | None:
    stored = ("FLOAT",) if isinstance(kind, FloatType) else ("FLOAT", "DOUBLE")  # a widened double
    return _float if physical in stored and logical["Type"] == "None" else None


def _decimals(kind: DataType, physical: str, logical: dict[str, Any]) -> Decode | None:
    if logical["Type"] != "Decimal" or physical not in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
        return None
    scale = int(logical["scale"])
    return lambda raw: _decimal(raw, scale)


def _dates(kind: DataType, physical: str, logical: dict[str, Any]) -> Decode | None:
    return _integer if physical == "INT32" and logical["Type"] == "Date" else None


def _timestamps(kind: DataType, physical: str, logical: dict[str, Any]) -> Decode | None:
    unit = _UNIT_NANOS.get(str(logical.get("timeUnit")))
    instant = isinstance(kind, TimestampType)
    if (
        physical != "INT64"
        or logical["Type"] != "Timestamp"
        or unit is None
        or logical.get("isAdjustedToUTC") != instant
    ):
        return None  # INT96, or a timestamp of the other kind
    return lambda raw: None if _integer(raw) is None else raw * unit


def _booleans(kind: DataType, physical: str, logical: dict[str, Any]) -> Decode | None:
    return _boolean if physical == "BOOLEAN" and logical["Type"] == "None" else None


def _strings(kind: DataType, physical: str, logical: dict[str, Any]) -> Decode | None:
    return _bytes if physical == "BYTE_ARRAY" and logical["Type"] == "String" else None


_Decoders = Callable[[DataType, str, dict[str, Any]], Decode | None]
_DECODERS: tuple[tuple[type | tuple[type, ...], _Decoders], ...] = (
    (INTEGERS, _integers),
    (FLOATS, _floats),
    (DecimalType, _decimals),
    (DateType, _dates),
    ((TimestampType, TimestampNTZType), _timestamps),
    (StringType, _strings),
    (BooleanType, _booleans),
)


def _integer(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _boolean(raw: Any) -> bool | None:
    return raw if isinstance(raw, bool) else None


def _float(raw: Any) -> float | None:
    return float(raw) if isinstance(raw, float) else None


def _bytes(raw: Any) -> bytes | None:
    return bytes(raw) if isinstance(raw, bytes | bytearray) else None


def _decimal(raw: Any, scale: int) -> Decimal | None:
    """A decimal from its Parquet value: the unscaled integer (INT32, INT64) or its big-endian
    two's complement bytes (FIXED_LEN_BYTE_ARRAY, BYTE_ARRAY)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        unscaled = raw
    elif isinstance(raw, bytes | bytearray) and raw:
        unscaled = int.from_bytes(raw, "big", signed=True)
    else:
        return None
    return Decimal(f"{unscaled}e-{scale}")  # exact: scaleb would round to the context's 28 digits


def _order(kind: DataType) -> Callable[[Any], Any]:
    """The sort key readers compare the decoded values of ``kind`` by."""
    if isinstance(kind, FLOATS):
        return lambda value: (value, math.copysign(1.0, value))  # total order: -0.0 below +0.0
    return lambda value: value


def _merge(
    chunks: Sequence[pq.ColumnChunkMetaData], rows: Sequence[int], decode: Decode, key: Callable[[Any], Any]
) -> tuple[Any, Any] | None:
    """The smallest minimum and the largest maximum of the row groups, decoded; None when either
    is unknown (a row group with values but no bounds, a value that does not decode, a NaN or an
    infinity) or the column holds no value at all."""
    low = high = None
    for chunk, count in zip(chunks, rows, strict=True):
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            return None
        if not stats.has_min_max:
            if stats.null_count == count:  # only nulls: no bound to give
                continue
            return None
        a, b = decode(stats.min_raw), decode(stats.max_raw)
        if a is None or b is None or _not_finite(a) or _not_finite(b):
            return None
        low = a if low is None or key(a) < key(low) else low
        high = b if high is None or key(b) > key(high) else high
    return None if low is None else (low, high)


def _not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


# --- writing a bound ---------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1)


def _lower(kind: DataType, value: Any, prefix: int) -> Any:
    if isinstance(kind, FLOATS) and value == 0:
        return -0.0
    if isinstance(kind, StringType):
        text = _text(value)
        return None if text is None else truncate_min_string(text, prefix)
    if isinstance(kind, TimestampType | TimestampNTZType):
        return _timestamp(value // _MILLI, zone=isinstance(kind, TimestampType))
    return _plain(kind, value)


def _upper(kind: DataType, value: Any, prefix: int) -> Any:
    if isinstance(kind, FLOATS) and value == 0:
        return 0.0
    if isinstance(kind, StringType):
        text = _text(value)
        return None if text is None else truncate_max_string(text, prefix)
    if isinstance(kind, TimestampType | TimestampNTZType):
        return _timestamp(-(-value // _MILLI), zone=isinstance(kind, TimestampType))
    return _plain(kind, value)


def _plain(kind: DataType, value: Any) -> Any:
    """An integer, float, decimal or date bound as its JSON value."""
    if isinstance(kind, DateType):
        try:
            return (_EPOCH_DAY + dt.timedelta(days=value)).isoformat()
        except OverflowError:
            return None
    return value


def _text(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _timestamp(millis: int, *, zone: bool) -> str | None:
    """A timestamp bound at ``millis`` since the epoch, in delta-spark's form (years 1 to 9999)."""
    try:
        moment = _EPOCH + dt.timedelta(milliseconds=millis)
    except OverflowError:
        return None
    text = moment.isoformat(timespec="milliseconds")
    return f"{text}Z" if zone else text


def truncate_min_string(text: str, prefix: int) -> str:
    """A string minimum cut as delta-spark cuts it: its first ``prefix`` characters (code points).

    Example::

        truncate_min_string("abcdef", 3)  # "abc"
    """
    return text[: max(prefix, 0)]


#: delta-spark's tie-breakers for a cut maximum: U+007F after an ASCII character below it,
#: else the largest code point, U+10FFFF.
_ASCII_MAX = 0x7F
_UTF16_MAX = (0xDBFF, 0xDFFF)


def truncate_max_string(text: str, prefix: int) -> str | None:
    """A string maximum cut as delta-spark cuts it (``truncateMaxStringAgg``, on Java's UTF-16
    units): at most ``prefix`` units plus a tie-breaker that keeps it above every string of the
    column in UTF-8 order, longer where the cut falls on a U+10FFFF, None where that would take
    more than twice ``prefix`` units.

    Example::

        truncate_max_string("abcdef", 3)  # "abc\\x7f"
    """
    units = _utf16(text)
    if len(units) <= prefix:
        return text
    if prefix <= 0:
        return None
    length = prefix + 1 if 0xD800 <= units[prefix - 1] <= 0xDBFF and 0xDC00 <= units[prefix] <= 0xDFFF else prefix
    while length <= 2 * prefix:
        if length >= len(units):
            return text
        if length + 1 < len(units) and (units[length], units[length + 1]) == _UTF16_MAX:
            length += 2
        elif units[length] < _ASCII_MAX:
            return _from_utf16([*units[:length], _ASCII_MAX])
        else:
            return _from_utf16([*units[:length], *_UTF16_MAX])
    return None


def _utf16(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _from_utf16(units: Sequence[int]) -> str:
    return b"".join(unit.to_bytes(2, "little") for unit in units).decode("utf-16-le", "surrogatepass")


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        tree = tree.setdefault(name, {})
    tree[path[-1]] = value


def stats_json(value: Any) -> str:
    """A ``stats`` document as JSON, decimals as exact numbers (``json`` would need floats for
    them) and text as UTF-8, as delta-spark writes it: delta-rs reads a character beyond U+FFFF
    written as a ``\\ud8xx\\udcxx`` escape pair as another character (measured with deltalake
    1.6.6: it then skips files that hold the value).

    Example::

        stats_json({"numRecords": 1, "minValues": {"d": Decimal("1.50")}})  # '{"numRecords":1,"minValues":{"d":1.50}}'
    """
    if isinstance(value, dict):
        return "{" + ",".join(f"{stats_json(key)}:{stats_json(item)}" for key, item in value.items()) + "}"
    if isinstance(value, Decimal):
        return format(value, "f")
    return json.dumps(value, ensure_ascii=False)
