"""Checking Delta file statistics: what a file's rows say they must be, what another writer
recorded for the same file, and whether a reader's filtered query loses rows.

* [`expected_stats`][tests.support.stats_checks.expected_stats]: the statistics of a data file
  computed from its rows (read back with pyarrow) by the rules of `spark_mlt.delta.stats`, an
  oracle independent of the footer the writer reads.
* [`differences`][tests.support.stats_checks.differences]: our statistics of a file against the
  ones delta-spark recorded for it (its own write, or ``CONVERT TO DELTA`` of our files): each
  value we write must be delta-spark's; we may leave one out only for a documented reason.
* [`predicates`][tests.support.stats_checks.predicates]: filters on every column at the edges of
  its values, rendered for Spark SQL and for delta-rs' DataFusion SQL.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import math
import os
import random
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import QueryBuilder
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spark_mlt.column.sqltext import identifier, string
from spark_mlt.delta.stats import StatsColumn, StatsSpec, truncate_max_string, truncate_min_string
from tests.support.stats_cases import Case

STATS = ("minValues", "maxValues", "nullCount")
_INTEGERS = (ByteType, ShortType, IntegerType, LongType)
_FLOATS = (FloatType, DoubleType)
_TIMES = (TimestampType, TimestampNTZType)


def case_frame(spark: SparkSession, case: Case) -> DataFrame:
    """The case's rows as a DataFrame of ``case.files`` partitions."""
    return spark.createDataFrame(case.rows, case.schema).repartition(case.files)


def write_conf(case: Case) -> dict[str, str]:
    """Session settings for writing the case (how timestamps are stored)."""
    return {"spark.sql.parquet.outputTimestampType": case.timestamps}


def parquet_options(case: Case) -> dict[str, str]:
    """Parquet settings for writing the case: small row groups, checked every 10 rows (Parquet
    checks a row group's size every 100 rows at first), so that small files get several."""
    if case.row_group_bytes is None:
        return {}
    return {
        "parquet.block.size": str(case.row_group_bytes),
        "parquet.page.size.row.check.min": "10",
        "parquet.page.size.row.check.max": "10",
    }


# --- the log -----------------------------------------------------------------------------------


def log_adds(table: str) -> list[dict[str, Any]]:
    """The ``add`` actions of a table's JSON commits, oldest first (the tables here have no
    checkpoint), without the files a later commit removed."""
    adds: dict[str, dict[str, Any]] = {}
    for commit in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        with open(commit) as handle:
            for line in handle:
                action = json.loads(line)
                if "add" in action:
                    adds[action["add"]["path"]] = action["add"]
                elif "remove" in action:
                    adds.pop(action["remove"]["path"], None)
    return list(adds.values())


def data_file(table: str, add: dict[str, Any]) -> str:
    return os.path.join(table, unquote(add["path"]))


def parse_stats(text: str) -> dict[str, Any]:
    """A ``stats`` document with decimals kept exact and NaN / infinities as floats."""
    return dict(json.loads(text, parse_float=Decimal, parse_constant=float))


# --- the oracle: statistics from a file's rows --------------------------------------------------


def expected_stats(path: str, spec: StatsSpec) -> dict[str, Any]:
    """The statistics of the file at ``path`` by the rules of `spark_mlt.delta.stats`,
    computed from its rows (see the module's notes)."""
    footer = pq.read_metadata(path)
    rows = pq.read_table(path)
    legacy = any(key in (footer.metadata or {}) for key in (b"org.apache.spark.legacyDateTime",))
    physical = {footer.schema.column(i).path: footer.schema.column(i).physical_type for i in range(footer.num_columns)}
    stats: dict[str, Any] = {"numRecords": rows.num_rows}
    counted = _counted(footer)
    unbounded = False  # a column with values but no bounds: then no bounds in the file at all
    for column in spec.columns:
        values = _column(rows, column.path)
        if isinstance(column.kind, ArrayType | MapType):
            continue
        known = values is not None and ".".join(column.path) in counted
        if known:  # a footer without it (INT96 on Spark 3.5) leaves it unknown
            _put(stats, "nullCount", column.path, values.null_count)
        low = high = None
        if values is not None and column.bounds and not (legacy and isinstance(column.kind, _CALENDAR)):
            int96 = physical.get(".".join(column.path)) == "INT96"
            low, high = _expected_bounds(column, values.drop_null(), spec.string_prefix, int96=int96)
        if low is not None and high is not None:  # both bounds, or neither
            _put(stats, "minValues", column.path, low)
            _put(stats, "maxValues", column.path, high)
        elif not isinstance(column.kind, BinaryType) and not (known and values.null_count == len(values)):
            unbounded = True
    if unbounded:
        stats.pop("minValues", None)
        stats.pop("maxValues", None)
    if spec.tight_bounds:
        stats["tightBounds"] = True
    return stats


_CALENDAR = (DateType, TimestampType, TimestampNTZType)


def _counted(footer: pq.FileMetaData) -> set[str]:
    """The leaf columns (dotted paths) whose null count every row group's footer holds."""

    def counts(i: int, group: int) -> bool:
        stats = footer.row_group(group).column(i).statistics
        return stats is not None and stats.has_null_count

    return {
        footer.schema.column(i).path
        for i in range(footer.num_columns)
        if all(counts(i, group) for group in range(footer.num_row_groups))
    }


def _column(rows: pa.Table, path: tuple[str, ...]) -> pa.Array | None:
    if path[0] not in rows.column_names:
        return None
    array = rows.column(path[0]).combine_chunks()
    for name in path[1:]:
        kind = array.type
        index = kind.get_field_index(name)
        array = array.flatten()[index]  # the parent's nulls carried down
    return array


def _expected_bounds(column: StatsColumn, values: pa.Array, prefix: int, *, int96: bool) -> tuple[Any, Any]:
    """The bounds a file's values give by the writer's rules: strings cut, floats exact in
    IEEE 754's total order unless a NaN or an infinity is there, timestamps at whole
    milliseconds outward (the minimum down, the maximum up)."""
    kind = column.kind
    if len(values) == 0 or (int96 and isinstance(kind, _TIMES)):
        return None, None
    if isinstance(kind, StringType):
        texts = values.to_pylist()
        return truncate_min_string(min(texts), prefix), truncate_max_string(max(texts), prefix)
    if isinstance(kind, _FLOATS):
        numbers = [float(v) for v in values.to_pylist()]
        if not all(math.isfinite(v) for v in numbers):
            return None, None
        total = sorted(numbers, key=lambda v: (v, math.copysign(1.0, v)))
        return total[0], total[-1]
    if isinstance(kind, _TIMES):
        micros = pc.cast(pc.cast(values, pa.timestamp("us", tz=values.type.tz)), pa.int64()).to_pylist()
        low, high = min(micros), max(micros)
        zone = isinstance(kind, TimestampType)
        return _millis(low - low % 1000, zone), _millis(high + (-high % 1000), zone)
    plain = values.to_pylist()
    low, high = min(plain), max(plain)
    return (low.isoformat(), high.isoformat()) if isinstance(kind, DateType) else (low, high)


def _millis(micros: int, zone: bool) -> str | None:
    try:
        text = (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)).isoformat(timespec="milliseconds")
    except OverflowError:  # beyond year 9999: no bound
        return None
    return text + "Z" if zone else text


def _put(stats: dict[str, Any], stat: str, path: tuple[str, ...], value: Any) -> None:
    tree = stats.setdefault(stat, {})
    for name in path[:-1]:
        tree = tree.setdefault(name, {})
    tree[path[-1]] = value


def get(stats: dict[str, Any], stat: str, path: tuple[str, ...]) -> Any:
    """The value of one statistic of one column, or None when it is absent."""
    node: Any = stats.get(stat)
    for name in path:
        if not isinstance(node, dict) or name not in node:
            return None
        node = node[name]
    return None if isinstance(node, dict) else node


def leaf_paths(tree: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(tree, dict):
        for name, node in tree.items():
            yield from leaf_paths(node, (*path, name))
    else:
        yield path


def same_value(kind: DataType, ours: Any, theirs: Any) -> bool:
    """Whether two statistic values are equal as values of ``kind`` (numbers numerically,
    -0.0 equal to 0.0; timestamps as instants, whatever zone they were written in)."""
    if ours is None or theirs is None:
        return ours is theirs
    # a float bound is compared as the 32-bit float it stands for: delta-spark writes the shortest
    # text that reads back as that float (-575285.06), spark-mlt its exact value (-575285.0625)
    normal = next((f for types, f in _NORMAL_FORMS if isinstance(kind, types)), lambda value: value)
    a, b = normal(ours), normal(theirs)
    return bool(a == b) or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _instant(text: Any) -> dt.datetime:
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))


_NORMAL_FORMS: tuple[tuple[type | tuple[type, ...], Callable[[Any], Any]], ...] = (
    (_INTEGERS, int),
    (FloatType, lambda value: struct.unpack("<f", struct.pack("<f", float(value)))[0]),
    (DoubleType, float),
    (DecimalType, lambda value: Decimal(str(value))),
    (TimestampType, _instant),
    (TimestampNTZType, lambda value: dt.datetime.fromisoformat(str(value))),
)


# --- against another writer's statistics --------------------------------------------------------


@dataclass
class Comparison:
    """Our statistics of files against another writer's: the values both wrote and agree on,
    the ones only they wrote (counted by the reason ours are absent) and the differences."""

    agreed: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def leave_out(self, reason: str) -> None:
        self.left_out[reason] = self.left_out.get(reason, 0) + 1


def differences(
    ours: dict[str, Any],
    theirs: dict[str, Any],
    spec: StatsSpec,
    footer: pq.FileMetaData,
    into: Comparison,
    *,
    same_columns: bool = True,
) -> None:
    """Adds to ``into`` how the statistics we wrote for one file compare with the ones another
    writer (delta-spark) recorded for it; ``same_columns``: it picked its columns by the same
    table settings, so it records no column our spec leaves out."""
    if ours.get("numRecords") != theirs.get("numRecords"):
        into.problems.append(f"numRecords {ours.get('numRecords')} != {theirs.get('numRecords')}")
    if bool(ours.get("tightBounds")) != bool(theirs.get("tightBounds", False)):
        into.problems.append(f"tightBounds {ours.get('tightBounds')} != {theirs.get('tightBounds')}")
    kinds = {column.path: column for column in spec.columns}
    if same_columns:
        for path in sorted(set(leaf_paths(theirs.get("nullCount", {}))) - set(kinds)):
            into.problems.append(f"{'.'.join(path)}: delta-spark records it, our spec does not")
    raw_max = _raw_maxima(footer)
    # a file with a column it cannot bound records no bounds at all (expected_stats checks when)
    unbounded = "minValues" not in ours and "maxValues" not in ours
    for path, column in kinds.items():
        for stat in STATS:
            pair = (get(ours, stat, path), get(theirs, stat, path))
            if unbounded and stat != "nullCount" and pair[1] is not None:
                into.leave_out("a file with a column it cannot bound: no bounds of any column")
                continue
            _compare(column, stat, pair, footer, into, raw_max=raw_max.get(path), prefix=spec.string_prefix)


def _compare(
    column: StatsColumn,
    stat: str,
    pair: tuple[Any, Any],
    footer: pq.FileMetaData,
    into: Comparison,
    *,
    raw_max: Any,
    prefix: int,
) -> None:
    mine, other = pair
    where = f"{stat}.{'.'.join(column.path)}"
    if mine is not None:
        if same_value(column.kind if stat != "nullCount" else LongType(), mine, other):
            into.agreed += 1
        elif stat == "maxValues" and _rounded_up(column.kind, mine, other):
            into.leave_out("timestamp maximum rounded up to a whole millisecond (delta-spark's is cut down)")
        elif other is None and isinstance(column.kind, BooleanType):
            into.leave_out("a boolean's bounds, which delta-spark leaves out (deltalake's dataset misreads none)")
        elif stat == "maxValues" and isinstance(other, str) and other.endswith("\ufffd"):
            into.leave_out("older Delta's U+FFFD tie-breaker (another maximum)")
        else:
            into.problems.append(f"{where}: ours {mine!r}, delta-spark {other!r}")
    elif other is not None:
        reason = _why_absent(_Absent(column, stat, other, raw_max, footer, prefix))
        if reason is None:
            into.problems.append(f"{where}: ours absent, delta-spark {other!r}")
        else:
            into.leave_out(reason)


def _raw_maxima(footer: pq.FileMetaData) -> dict[tuple[str, ...], Any]:
    maxima: dict[tuple[str, ...], Any] = {}
    for i in range(footer.num_columns):
        path = tuple(footer.schema.column(i).path.split("."))
        for group in range(footer.num_row_groups):
            stats = footer.row_group(group).column(i).statistics
            if stats is not None and stats.has_min_max:
                value = stats.max_raw
                maxima[path] = value if path not in maxima else max(maxima[path], value)
    return maxima


def _rounded_up(kind: DataType, mine: Any, other: Any) -> bool:
    """Whether ``mine`` is delta-spark's timestamp maximum ``other`` (cut down to a millisecond)
    rounded up instead: a millisecond above it."""
    if not isinstance(kind, _TIMES) or other is None:
        return False
    return bool(_instant(mine) - _instant(other) == dt.timedelta(milliseconds=1))


@dataclass(frozen=True)
class _Absent:
    """What is known of a statistic delta-spark wrote and we left out."""

    column: StatsColumn
    stat: str
    other: Any
    raw_max: Any
    footer: pq.FileMetaData
    prefix: int

    @property
    def floats_not_finite(self) -> bool:
        if not isinstance(self.column.kind, _FLOATS):
            return False
        low = float(_raw_min(self.footer, self.column.path))
        return not math.isfinite(low) or (isinstance(self.raw_max, float) and not math.isfinite(self.raw_max))

    @property
    def uncuttable_string(self) -> bool:
        if not isinstance(self.column.kind, StringType) or not isinstance(self.raw_max, bytes):
            return False
        return truncate_max_string(self.raw_max.decode("utf-8", "replace"), self.prefix) is None

    @property
    def old_tie_breaker(self) -> bool:
        """Delta 3.2 truncates "\U0010ffff" * 40 to a maximum below the column's: no upper bound."""
        other, raw_max = self.other, self.raw_max
        tie_breaker = self.stat == "maxValues" and isinstance(other, str) and other.endswith("\ufffd")
        return tie_breaker and isinstance(raw_max, bytes) and raw_max > other.encode("utf-8")

    @property
    def int96(self) -> bool:
        if not isinstance(self.column.kind, _TIMES):
            return False
        return bool(self.footer.schema.column(_index(self.footer, self.column.path)).physical_type == "INT96")


_REASONS: tuple[tuple[Callable[[_Absent], bool], str], ...] = (
    (
        lambda a: isinstance(a.column.kind, ArrayType | MapType),
        "null count of an array or a map (a footer counts its elements' nulls)",
    ),
    (lambda a: a.floats_not_finite, "a float column with NaN or an infinity: both bounds left out"),
    (lambda a: a.uncuttable_string, "a string maximum that cannot be cut: both bounds left out"),
    (lambda a: a.old_tie_breaker, "older Delta's U+FFFD tie-breaker below the column's maximum (no upper bound)"),
    (lambda a: a.int96, "timestamps stored as INT96"),
)


def _why_absent(absent: _Absent) -> str | None:
    """The documented reason why we leave out a statistic delta-spark wrote, or None."""
    return next((reason for applies, reason in _REASONS if applies(absent)), None)


def _raw_min(footer: pq.FileMetaData, path: tuple[str, ...]) -> Any:
    """The smallest footer minimum of the column (0.0 when the footer has none)."""
    found: list[Any] = []
    index = _index(footer, path)
    for group in range(footer.num_row_groups):
        stats = footer.row_group(group).column(index).statistics
        if stats is not None and stats.has_min_max:
            found.append(stats.min_raw)
    floats = [v for v in found if isinstance(v, float)]
    return next((v for v in floats if not math.isfinite(v)), min(floats) if floats else 0.0)


def _index(footer: pq.FileMetaData, path: tuple[str, ...]) -> int:
    return next(i for i in range(footer.num_columns) if footer.schema.column(i).path == ".".join(path))


# --- filtered reads ------------------------------------------------------------------------------

_OPS = ("=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Predicate:
    """A filter on one leaf column (logical names, struct fields from the top)."""

    path: tuple[str, ...]
    kind: DataType
    op: str
    value: Any = None

    def spark(self) -> str:
        column = ".".join(identifier(name) for name in self.path)
        if self.value is None:
            return f"{column} {self.op}"
        return f"{column} {self.op} {self._literal(spark=True)}"

    def datafusion(self) -> str:
        column = '"' + self.path[0].replace('"', '""') + '"' + "".join(f"['{n}']" for n in self.path[1:])
        if self.value is None:
            return f"{column} {self.op}"
        return f"{column} {self.op} {self._literal(spark=False)}"

    def _literal(self, *, spark: bool) -> str:
        kind, value = self.kind, self.value
        if isinstance(kind, StringType):
            return string(value) if spark else "'" + value.replace("'", "''") + "'"
        if isinstance(kind, TimestampType):
            text = value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat() + "Z"
            return (
                f"CAST('{text}' AS TIMESTAMP)"
                if spark
                else f"arrow_cast('{text}', 'Timestamp(Microsecond, Some(\"UTC\"))')"
            )
        if isinstance(kind, TimestampNTZType):
            return f"CAST('{value.isoformat()}' AS {'TIMESTAMP_NTZ' if spark else 'TIMESTAMP'})"
        return f"CAST('{_text(value)}' AS {_sql_type(kind)})"

    def __str__(self) -> str:
        return self.spark()


_SQL_TYPES = {
    ByteType: "TINYINT",
    ShortType: "SMALLINT",
    IntegerType: "INT",
    LongType: "BIGINT",
    FloatType: "FLOAT",
    DoubleType: "DOUBLE",
    DateType: "DATE",
    BooleanType: "BOOLEAN",
}


def _sql_type(kind: DataType) -> str:
    if isinstance(kind, DecimalType):
        return f"DECIMAL({kind.precision},{kind.scale})"
    return _SQL_TYPES[type(kind)]


def _text(value: Any) -> str:
    """A literal's text for ``CAST('<text>' AS <type>)`` in Spark and DataFusion alike."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value).lower() if isinstance(value, bool) else str(value)


def leaf_values(case: Case) -> dict[tuple[str, ...], tuple[DataType, list[Any]]]:
    """Each leaf column outside arrays and maps (logical path) with its type and values (None
    where it or a struct above it is null)."""
    out: dict[tuple[str, ...], tuple[DataType, list[Any]]] = {}

    def walk(path: tuple[str, ...], kind: DataType, values: list[Any]) -> None:
        if isinstance(kind, StructType):
            for i, child in enumerate(kind.fields):
                walk((*path, child.name), child.dataType, [None if v is None else v[i] for v in values])
        elif not isinstance(kind, ArrayType | MapType | BinaryType):
            out[path] = (kind, values)

    for i, f in enumerate(case.schema.fields):
        walk((f.name,), f.dataType, [row[i] for row in case.rows])
    return out


def predicates(case: Case, rng: random.Random, *, limit: int | None = None) -> list[Predicate]:
    """Filters at the edges of each column's values: above its largest and below its smallest
    value, equal to one of them, NULL and NOT NULL; at most ``limit`` of them (drawn by ``rng``)."""
    found: list[Predicate] = []
    for path, (kind, values) in leaf_values(case).items():
        present = [v for v in values if v is not None]
        found.append(Predicate(path, kind, "IS NULL"))
        found.append(Predicate(path, kind, "IS NOT NULL"))
        ordered = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
        if not ordered:
            continue
        low, high = min(ordered), max(ordered)
        for op, value in ((">=", high), (">", high), ("<=", low), ("<", low), ("=", rng.choice(present))):
            found.append(Predicate(path, kind, op, value))
        if isinstance(kind, _FLOATS) and len(ordered) < len(present):
            found.append(Predicate(path, kind, ">=", math.nan))
    if limit is not None and len(found) > limit:
        found = rng.sample(found, limit)
    return found


def counts_datafusion(table: Any, found: Sequence[Predicate]) -> list[tuple[int, int]]:
    """For each predicate, the rows of a delta-rs table (a ``DeltaTable``) that match, counted by
    delta-rs' own query engine (DataFusion): filtered, so that it skips files by their
    statistics, and, in one query for all of them, summed over every row, which skips nothing
    (the same engine's answer without statistics)."""
    if not found:
        return []
    sums = ", ".join(f"sum(CASE WHEN {p.datafusion()} THEN 1 ELSE 0 END) AS n{i}" for i, p in enumerate(found))
    everything = pa.table(QueryBuilder().register("t", table).execute(f"SELECT {sums} FROM t").read_all())
    out = []
    for i, predicate in enumerate(found):
        query = f"SELECT count(*) AS n FROM t WHERE {predicate.datafusion()}"
        filtered = pa.table(QueryBuilder().register("t", table).execute(query).read_all()).column("n")[0].as_py()
        out.append((int(filtered), int(everything.column(f"n{i}")[0].as_py() or 0)))
    return out
