"""Which columns a table's files record statistics for, as delta-spark picks them.

* Keys mirror the table's schema: struct fields are nested JSON objects, every name is the
  column's physical name under column mapping, partition columns are left out. Arrays and maps
  are not descended into.
* Which columns: the table's ``delta.dataSkippingStatsColumns`` (case-insensitive names, a struct
  naming all its fields) or else its first ``delta.dataSkippingNumIndexedCols`` (default 32, -1
  for all) leaf columns, an array or map counting as one, as delta-spark counts them.
* ``nullCount`` for every such column but arrays and maps (a Parquet footer counts the nulls of
  their elements, not of the column); ``minValues`` / ``maxValues`` for the types delta-spark
  collects them for: integers, floats, decimals, dates, timestamps (with and without time zone)
  and strings in binary order (not collated ones), and for booleans, as delta-rs' writer does
  (delta-spark does not): deltalake's pyarrow dataset (1.6.6) reads a column without bounds in
  a file whose other columns have them as ``column >= null``, and loses every row of the file
  to any filter on it. Never binary (Delta has no JSON form for a binary bound).

Example::

    spec = stats_spec(snapshot.layout, snapshot.config)
    [column.path for column in spec.columns]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pyspark.sql.types import (
    BooleanType,
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

from spark_mlt.delta.config import DEFAULT_STRING_PREFIX, TableConfig
from spark_mlt.delta.schema import TableLayout

__all__ = ["FLOATS", "INTEGERS", "StatsColumn", "StatsSpec", "stats_spec"]

INTEGERS = (ByteType, ShortType, IntegerType, LongType)
FLOATS = (FloatType, DoubleType)
#: Field metadata of Spark 4's collated strings: their order is not Parquet's byte order.
_COLLATIONS = "__COLLATIONS"


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
    string_prefix: int = DEFAULT_STRING_PREFIX
    tight_bounds: bool = False


def stats_spec(layout: TableLayout, config: TableConfig, *, tight_bounds: bool = False) -> StatsSpec:
    """The statistics the files of a table with this layout and configuration record (see the
    module's notes).

    Args:
        layout: the table's columns (logical and physical) and partition columns.
        config: the table's properties (``delta.dataSkipping*``).
        tight_bounds: the table supports deletion vectors (``tightBounds`` is written).
    """
    partitions = {name.lower() for name in layout.partition_columns}
    pairs = [
        (logical, physical)
        for logical, physical in zip(layout.logical.fields, layout.physical.fields, strict=True)
        if logical.name.lower() not in partitions
    ]
    if config.stats_columns is not None:
        wanted = [tuple(name.lower() for name in path) for path in config.stats_columns]
        chosen = _named_leaves(pairs, wanted)
    elif config.indexed_columns is not None:
        chosen = _first_leaves(pairs, config.indexed_columns)
    else:
        chosen = []
    columns = tuple(
        StatsColumn(path, logical.dataType, _has_bounds(logical, collated)) for path, logical, collated in chosen
    )
    return StatsSpec(columns, config.string_prefix, tight_bounds)


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


def _has_bounds(field: StructField, collated: bool) -> bool:
    kind = field.dataType
    if isinstance(kind, StringType):
        return not collated and getattr(kind, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(kind, (*INTEGERS, *FLOATS, BooleanType, DecimalType, DateType, TimestampType, TimestampNTZType))
