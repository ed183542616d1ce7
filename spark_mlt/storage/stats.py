"""Delta's per-file statistics of a data file, read from its Parquet footer.

Every Delta reader skips whole files by the ``minValues`` / ``maxValues`` an ``add`` action
records, so a wrong bound loses rows from filtered queries on every engine, silently, while a
missing one only costs a scan. The jar-free writer therefore writes what delta-spark writes for
the same file (the protocol's "Per-file Statistics", and delta-spark's ``StatisticsCollection``)
or leaves a statistic out:

* Keys mirror the table's schema: struct fields are nested JSON objects, every name is the
  column's physical name under column mapping, partition columns are left out. Arrays and maps
  are not descended into.
* Which columns: the table's ``delta.dataSkippingStatsColumns`` (case-insensitive names, a struct
  naming all its fields) or else its first ``delta.dataSkippingNumIndexedCols`` (default 32, -1
  for all) leaf columns, an array or map counting as one, as delta-spark counts them.
* ``nullCount`` for every such column but arrays and maps (a Parquet footer counts the nulls of
  their elements, not of the column). ``minValues`` / ``maxValues`` for the types delta-spark
  collects them for: integers, floats, decimals, dates, timestamps (with and without time zone)
  and strings; never for booleans or binary.
* How each bound is written: strings cut to ``delta.dataSkippingStringPrefixLength`` (default
  32) with delta-spark's tie-breaker for a cut maximum, so it stays an upper bound in UTF-8
  order; timestamps at millisecond precision (``2024-01-02T03:04:05.678Z``; without time zone no
  ``Z``), the minimum truncated down and the maximum only when it is a whole millisecond (the
  protocol truncates it down too, which readers other than delta-spark take at its word);
  dates as ``2024-01-02``; decimals as exact JSON numbers; floats without NaN or infinities (a
  NaN maximum, which Parquet footers report when the column has one, leaves the maximum out).
* ``tightBounds: true`` where the table supports deletion vectors, as delta-spark writes it
  (the files written here have none).
* Left out, because the footer cannot tell them exactly: bounds of timestamps stored as INT96
  (Spark's default: Parquet keeps no order for them), of dates and timestamps written in
  Spark's legacy (Julian) calendar, of strings that are not valid UTF-8 or carry a collation,
  and any statistic a row group lacks.

Example::

    spec = stats_spec(layout)
    add.stats = file_stats(pq.read_metadata(path), spec)
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import (
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spark_mlt.storage.schema import TableLayout

__all__ = [
    "NUM_INDEXED_COLS",
    "STATS_COLUMNS",
    "STRING_PREFIX_LENGTH",
    "StatsColumn",
    "StatsSpec",
    "file_stats",
    "stats_spec",
    "truncate_max_string",
    "truncate_min_string",
]

NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
STRING_PREFIX_LENGTH = "delta.dataSkippingStringPrefixLength"
_DEFAULT_INDEXED = 32
_DEFAULT_PREFIX = 32
#: Field metadata of Spark 4's collated strings: their order is not Parquet's byte order.
_COLLATIONS = "__COLLATIONS"
#: A Parquet footer key Spark writes when dates and timestamps were rebased to the legacy calendar.
_LEGACY_CALENDAR = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")

_INTEGERS = (ByteType, ShortType, IntegerType, LongType)
_FLOATS = (FloatType, DoubleType)


@dataclass(frozen=True)
class StatsColumn:
    """One leaf column whose statistics a file records.

    Attributes:
        path: the physical names from the top-level column down to the leaf.
        kind: the leaf's Spark type.
        bounds: whether Delta records its minimum and maximum (else only its null count; an
            array or a map gets none from a footer, which counts the nulls of its elements).
    """

    path: tuple[str, ...]
    kind: DataType
    bounds: bool


@dataclass(frozen=True)
class StatsSpec:
    """What the files of one table version record: its columns, the string prefix and whether
    bounds are flagged tight."""

    columns: tuple[StatsColumn, ...]
    string_prefix: int = _DEFAULT_PREFIX
    tight_bounds: bool = False


def stats_spec(
    layout: TableLayout, properties: Mapping[str, str] | None = None, *, tight_bounds: bool = False
) -> StatsSpec:
    """The statistics the files of a table with this layout record (see the module's notes).

    Args:
        layout: the table's columns (logical and physical) and partition columns.
        properties: the table's properties (``delta.dataSkipping*``).
        tight_bounds: the table supports deletion vectors (``tightBounds`` is written).
    """
    props = {k.lower(): v for k, v in (properties or {}).items()}
    partitions = {name.lower() for name in layout.partition_columns}
    pairs = [
        (logical, physical)
        for logical, physical in zip(layout.logical.fields, layout.physical.fields, strict=True)
        if logical.name.lower() not in partitions
    ]
    prefix = _int_property(props.get(STRING_PREFIX_LENGTH.lower()), _DEFAULT_PREFIX, minimum=0)
    named = props.get(STATS_COLUMNS.lower())
    if named is not None:
        paths = parse_column_list(named)
        chosen = [] if paths is None else _named_leaves(pairs, [tuple(p.lower() for p in path) for path in paths])
    else:
        count = _int_property(props.get(NUM_INDEXED_COLS.lower()), _DEFAULT_INDEXED, minimum=-1)
        chosen = _first_leaves(pairs, count) if count is not None else []
    columns = tuple(
        StatsColumn(path, logical.dataType, _has_bounds(logical, collated)) for path, logical, collated in chosen
    )
    return StatsSpec(columns, prefix if prefix is not None else _DEFAULT_PREFIX, tight_bounds)


def _int_property(value: str | None, default: int, *, minimum: int) -> int | None:
    """A table property's integer, its default when unset, None when it is no such integer."""
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        return None
    return number if number >= minimum else None


_Leaf = tuple[tuple[str, ...], StructField, bool]  # physical path, logical field, under a collation


def _leaves(logical: StructField, physical: StructField, path: tuple[str, ...], collated: bool) -> Iterator[_Leaf]:
    """The leaves of one column, depth first: a struct's fields, else the column itself."""
    here = (*path, physical.name)
    collated = collated or _COLLATIONS in (logical.metadata or {})
    if isinstance(logical.dataType, StructType) and isinstance(physical.dataType, StructType):
        for child, physical_child in zip(logical.dataType.fields, physical.dataType.fields, strict=True):
            yield from _leaves(child, physical_child, here, collated)
    else:
        yield here, logical, collated


def _first_leaves(pairs: Sequence[tuple[StructField, StructField]], count: int) -> list[_Leaf]:
    """The first ``count`` leaf columns (all for -1), an array or a map counting as one."""
    leaves = [leaf for logical, physical in pairs for leaf in _leaves(logical, physical, (), False)]
    return leaves if count < 0 else leaves[:count]


def _named_leaves(pairs: Sequence[tuple[StructField, StructField]], wanted: list[tuple[str, ...]]) -> list[_Leaf]:
    """The leaves ``delta.dataSkippingStatsColumns`` names (lower-cased paths; a struct names all
    its leaves; unknown names are ignored), in the schema's order."""

    def walk(
        logical: StructField, physical: StructField, path: tuple[str, ...], paths: list[tuple[str, ...]]
    ) -> Iterator[_Leaf]:
        rests = [p[1:] for p in paths if p and p[0] == logical.name.lower()]
        if not rests:
            return
        if any(not rest for rest in rests):  # named itself: all of it
            yield from _leaves(logical, physical, path, False)
        elif isinstance(logical.dataType, StructType) and isinstance(physical.dataType, StructType):
            here = (*path, physical.name)
            for child, physical_child in zip(logical.dataType.fields, physical.dataType.fields, strict=True):
                yield from walk(child, physical_child, here, rests)

    return [leaf for logical, physical in pairs for leaf in walk(logical, physical, (), wanted)]


_IDENTIFIER = re.compile(r"\s*(?:`((?:[^`]|``)*)`|([A-Za-z0-9_]+))\s*")


def parse_column_list(text: str) -> list[list[str]] | None:
    """The column paths of a comma-separated list of multipart identifiers (``a, s.b, `x.y`.z``),
    as Delta reads ``delta.dataSkippingStatsColumns``; None when it is not such a list."""
    columns: list[list[str]] = []
    position, parts = 0, []
    while True:
        found = _IDENTIFIER.match(text, position)
        if found is None:
            return None
        parts.append(found.group(1).replace("``", "`") if found.group(1) is not None else found.group(2))
        position = found.end()
        if position == len(text):
            columns.append(parts)
            return columns
        if text[position] == ".":
            position += 1
        elif text[position] == ",":
            columns.append(parts)
            position, parts = position + 1, []
        else:
            return None


def _has_bounds(field: StructField, collated: bool) -> bool:
    kind = field.dataType
    if isinstance(kind, StringType):
        return not collated and getattr(kind, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(kind, (*_INTEGERS, *_FLOATS, DecimalType, DateType, TimestampType, TimestampNTZType))


# --- one file ----------------------------------------------------------------------------------


def file_stats(metadata: pq.FileMetaData, spec: StatsSpec) -> str:
    """The ``stats`` JSON of an ``add`` action for the Parquet file whose footer is ``metadata``."""
    leaves = _leaf_indexes(metadata.schema.to_arrow_schema())
    legacy_calendar = any(key in (metadata.metadata or {}) for key in _LEGACY_CALENDAR)
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for column in spec.columns:
        index = leaves.get(column.path)
        if index is None:  # an array or a map, or not in the file: nothing is known of it
            continue
        chunks = [metadata.row_group(group).column(index) for group in range(metadata.num_row_groups)]
        null_count = _null_count(chunks)
        if null_count is not None:
            _put(nulls, column.path, null_count)
        if column.bounds and not (legacy_calendar and _calendar_type(column.kind)):
            low, high = _bounds(chunks, [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)])
            if low is not None:
                value = _lower(column.kind, low, spec.string_prefix)
                if value is not None:
                    _put(minimum, column.path, value)
            if high is not None:
                value = _upper(column.kind, high, spec.string_prefix)
                if value is not None:
                    _put(maximum, column.path, value)
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    if minimum:
        stats["minValues"] = minimum
    if maximum:
        stats["maxValues"] = maximum
    if nulls:
        stats["nullCount"] = nulls
    if spec.tight_bounds:
        stats["tightBounds"] = True
    return _to_json(stats)


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


def _bounds(chunks: Sequence[pq.ColumnChunkMetaData], rows: Sequence[int]) -> tuple[Any, Any]:
    """The smallest minimum and the largest maximum of the row groups (raw Parquet values), each
    None when unknown: a row group with values but no bounds makes both unknown.

    NaN sorts above every number in Spark (and in delta-spark's statistics): a footer whose
    maximum is NaN leaves the maximum unknown, and one whose minimum is NaN is not trusted."""
    low = high = None
    high_known = True
    for chunk, count in zip(chunks, rows, strict=True):
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            return None, None
        if not stats.has_min_max:
            if stats.null_count == count:  # all null: no bound to give
                continue
            return None, None
        a, b = stats.min_raw, stats.max_raw
        if _is_nan(a):
            return None, None
        if _is_nan(b):
            high_known = False
        else:
            high = b if high is None else max(high, b)
        low = a if low is None else min(low, a)
    return low, high if high_known else None


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _calendar_type(kind: DataType) -> bool:
    return isinstance(kind, DateType | TimestampType | TimestampNTZType)


def _lower(kind: DataType, raw: Any, prefix: int) -> Any:
    if isinstance(kind, StringType):
        text = _text(raw)
        return None if text is None else truncate_min_string(text, prefix)
    return _value(kind, raw, upper=False)


def _upper(kind: DataType, raw: Any, prefix: int) -> Any:
    if isinstance(kind, StringType):
        text = _text(raw)
        return None if text is None else truncate_max_string(text, prefix)
    return _value(kind, raw, upper=True)


def _text(raw: Any) -> str | None:
    try:
        return bytes(raw).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        return None


_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1)


def _value(kind: DataType, raw: Any, *, upper: bool) -> Any:
    """A bound of a non-string column as its JSON value, or None where it cannot be exact."""
    if isinstance(kind, _INTEGERS):
        return int(raw) if isinstance(raw, int) else None
    if isinstance(kind, _FLOATS):
        return float(raw) if isinstance(raw, float) and math.isfinite(raw) else None
    if isinstance(kind, DecimalType):
        return _decimal(raw, kind.scale)
    if isinstance(kind, DateType):
        return _date(raw)
    return None if not isinstance(raw, int) else _timestamp(raw, upper=upper, zone=isinstance(kind, TimestampType))


def _date(days: Any) -> str | None:
    if not isinstance(days, int):
        return None
    try:
        return (_EPOCH_DAY + dt.timedelta(days=days)).isoformat()
    except OverflowError:
        return None


def _decimal(raw: Any, scale: int) -> Decimal | None:
    """A decimal bound from its Parquet value: the unscaled integer (INT32, INT64) or its
    big-endian two's complement bytes (FIXED_LEN_BYTE_ARRAY, BYTE_ARRAY)."""
    if isinstance(raw, int):
        unscaled = raw
    elif isinstance(raw, bytes | bytearray) and raw:
        unscaled = int.from_bytes(raw, "big", signed=True)
    else:
        return None
    return Decimal(f"{unscaled}e-{scale}")  # exact: scaleb would round to the context's 28 digits


def _timestamp(micros: int, *, upper: bool, zone: bool) -> str | None:
    """A timestamp bound (microseconds: Spark writes TIMESTAMP(MICROS)) at millisecond
    precision: a minimum truncated down, a maximum only when nothing was cut off."""
    millis, rest = divmod(micros, 1000)
    if upper and rest:
        return None
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


def _to_json(value: Any) -> str:
    """JSON with decimals as exact numbers (``json`` would need floats for them) and text as
    UTF-8, as delta-spark writes it: delta-rs reads a character beyond U+FFFF written as a
    ``\\ud8xx\\udcxx`` escape pair as another character (measured with deltalake 1.6.6: it then
    skips files that hold the value)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_to_json(key)}:{_to_json(item)}" for key, item in value.items()) + "}"
    if isinstance(value, Decimal):
        return format(value, "f")
    return json.dumps(value, ensure_ascii=False)
