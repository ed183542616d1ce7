"""The rows of a table version that can hold a set of keys, found from its files' statistics:
what a mirror's window, a count's update and an erasure replace.

[`KeyedRows`][spark_mlt.storage.backends.base.KeyedRows] is what a backend's ``key_rows`` returns
([`DeltaBackend`][spark_mlt.storage.backends.DeltaBackend]); here are the pieces the backends
build it from, backend-neutral:

* the candidate files (`candidate_files`): the files whose statistics admit one of the keys
  (each key column's bounds, read by delta-spark's rules in `spark_mlt.delta.stats.bounds`, or
  its partition value, typed as the scan types it), by a sorted search for a single integer or
  string key column (`search_key_files`), else a join with the files' bounds (`join_key_files`);
  a candidate with a deletion vector is refused (delta-rs cannot name the vector in its remove
  action): purge it first (``REORG TABLE ... APPLY (PURGE)``);
* the rows a rewrite of them writes (`rewrite_rows`): the candidates' less the keys', with the
  new rows, kept in key ranges;
* the key columns' ranges over the keys (`key_bounds`, `key_ranges`), within which delta-spark's
  ``MERGE`` reads the table.

Changes cluster by key in most tables (new and recent rows change most), so the statistics
keep the rewrite to few files; keys spread over every file rewrite every file, which is then
as costly as writing the table again (docs/sync.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType, StringType, StructField, StructType

from spark_mlt.column.sqltext import identifier, string
from spark_mlt.delta.actions import AddFile
from spark_mlt.delta.frames import local_frame
from spark_mlt.delta.partitions import partition_value
from spark_mlt.delta.read.scan import scan_snapshot
from spark_mlt.delta.schema import TableLayout
from spark_mlt.delta.stats import column_bounds, parse_stats
from spark_mlt.errors import TableFeatureError
from spark_mlt.storage.backends.base import KeyedRows
from spark_mlt.storage.backends.plan import ReplacedFile
from spark_mlt.storage.table import TableSnapshot

__all__ = [
    "BROADCAST_KEYS",
    "DRIVER_HELD_ROWS",
    "broadcast_keys",
    "candidate_files",
    "held_keys",
    "join_key_files",
    "key_bounds",
    "key_ranges",
    "rewrite_rows",
    "scan_files",
    "search_key_files",
]


#: The most rows of candidate files whose key column `held_keys` reads on the driver (an
#: integer column of 8 MB a million rows, read with its file's other columns left unread).
DRIVER_HELD_ROWS = 10_000_000


def held_keys(keyed: KeyedRows, values: Sequence[Any] | None) -> pd.DataFrame | None:
    """The keys (a single key column's ``values``, no nulls) that the rewrite's files hold,
    a row for each row that holds one, read on the driver from the files' key column (a key
    check needs no Spark job for them); None where it takes Spark: no candidates (the
    backend finds the files itself), a key of several columns or a partition column,
    unknown ``values``, or files of more than `DRIVER_HELD_ROWS` rows (their statistics) or
    in another store.

    Example::

        held = held_keys(keyed, [3, 5, 8])  # a frame of the key column: 3 and 8, say
    """
    if keyed.candidates is not None and values is not None and len(keyed.key) == 1:
        rows = keyed.candidate_rows
        layout = keyed.snapshot.delta.layout
        if rows is not None and rows <= DRIVER_HELD_ROWS and keyed.key[0] not in layout.partition_columns:
            return _held_keys(keyed, values)
    return None


def _held_keys(keyed: KeyedRows, values: Sequence[Any]) -> pd.DataFrame | None:
    """`held_keys` of a single key column: each candidate's key column read with
    pyarrow, its values among ``values`` kept (None: a file in another store)."""
    name = keyed.key[0]
    location = keyed.snapshot.delta.location
    column = keyed.snapshot.delta.layout.physical_names.get(name, name)
    found: list[pd.Series] = []
    wanted: dict[pa.DataType, pa.Array] = {}
    for candidate in keyed.candidates or ():
        path = location.data_path(candidate.path)
        if path is None:
            return None
        with location.filesystem.open_input_file(path) as source:
            parquet = pq.ParquetFile(source)
            if column not in parquet.schema_arrow.names:  # a file written before the column was added
                continue
            keys = parquet.read(columns=[column]).column(column)
        if keys.type not in wanted:
            wanted[keys.type] = pa.array(values, type=keys.type)
        found.append(keys.filter(pc.is_in(keys, value_set=wanted[keys.type])).to_pandas())
    return pd.DataFrame({name: pd.concat(found, ignore_index=True) if found else pd.Series([], dtype="int64")})


#: The most keys `key_rows` broadcasts (a window's changed keys: tens of bytes each, held by the
#: driver while it sends them); more are joined by a shuffle.
BROADCAST_KEYS = 1_000_000


def broadcast_keys(values: Sequence[Any] | None, key_count: int | None) -> bool:
    """Whether keys known by their ``values`` or their ``key_count`` are few enough
    (`BROADCAST_KEYS`) to be broadcast to the tasks that read the rows."""
    return (values is not None and len(values) <= BROADCAST_KEYS) or (
        key_count is not None and key_count <= BROADCAST_KEYS
    )


def scan_files(spark: SparkSession, snapshot: TableSnapshot, files: Sequence[ReplacedFile]) -> DataFrame:
    """The rows of ``files`` of ``snapshot``, read jar-free."""
    if not files:
        return scan_snapshot(spark, snapshot.delta).limit(0)
    return scan_snapshot(spark, snapshot.delta, files=[snapshot.delta.files[c.path] for c in files])


def candidate_files(
    spark: SparkSession, snapshot: TableSnapshot, keys: DataFrame, key: tuple[str, ...], values: Any = None
) -> tuple[ReplacedFile, ...]:
    """The files whose statistics (or partition values) admit one of ``keys``: a sorted search
    for a single integer or string key column, else a join of the keys with the files' bounds."""
    files = list(snapshot.delta.files.values())
    layout = snapshot.delta.layout
    table = _bounds_table(files, layout, key)
    if not table:
        return ()
    single = len(key) == 1 and key[0] not in layout.partition_columns
    if single and isinstance(layout.logical[key[0]].dataType, _SEARCHABLE):
        return _chosen(snapshot, files, search_key_files(keys, key[0], table, values))
    return _chosen(snapshot, files, join_key_files(spark, keys, key, table, layout))


def join_key_files(
    spark: SparkSession, keys: DataFrame, key: tuple[str, ...], table: Sequence[tuple[Any, ...]], layout: TableLayout
) -> list[int]:
    """The files (numbers in ``table``, `_bounds_table`'s rows) whose partition values and bounds
    admit one of ``keys``: each key joined with every file's bounds (broadcast)."""
    partitions = set(layout.partition_columns)
    fields: list[StructField] = []
    for i, name in enumerate(key):
        if name in partitions:  # the log's string, typed in Spark as the scan types it
            fields.append(StructField(f"__part_{i}", StringType()))
        else:
            kind = layout.logical[name].dataType
            fields += [StructField(f"__lo_{i}", kind), StructField(f"__hi_{i}", kind)]
    schema = StructType([StructField("__file", IntegerType(), False), *fields])
    admitted = local_frame(spark, list(table), schema)
    condition = None
    for i, name in enumerate(key):
        at = F.col(identifier(name))
        if name in partitions:
            admits = at.eqNullSafe(partition_value(F.col(f"__part_{i}"), layout.logical[name].dataType))
        else:
            floor, ceiling = F.col(f"__lo_{i}"), F.col(f"__hi_{i}")
            admits = (floor.isNull() | (at >= floor)) & (ceiling.isNull() | (at <= ceiling))
        condition = admits if condition is None else condition & admits
    return sorted(int(r[0]) for r in keys.join(F.broadcast(admitted), condition).select("__file").distinct().collect())


#: Key types whose values a sorted search compares as Spark does: integers, and strings (Python
#: compares them by code point, which is the order of their UTF-8 bytes, Spark's order).
_SEARCHABLE = (ByteType, ShortType, IntegerType, LongType, StringType)


@dataclass(frozen=True)
class _Ranges:
    """Files' key ranges, searched by the keys sorted: a file holds one of them when fewer keys
    sort below its low bound than at or below its high bound (two binary searches per file, so
    O((keys + files) log keys), overlapping ranges alike). Integer bounds and keys are compared
    as int64, strings by code point (the order of their UTF-8 bytes, Spark's)."""

    lows: np.ndarray
    highs: np.ndarray
    numbers: np.ndarray

    @classmethod
    def of(cls, ranges: Sequence[tuple[Any, Any, int]]) -> _Ranges:
        integral = all(isinstance(r[0], int) and isinstance(r[1], int) for r in ranges)
        kind = np.int64 if integral else object
        return cls(
            np.array([r[0] for r in ranges], dtype=kind),
            np.array([r[1] for r in ranges], dtype=kind),
            np.array([r[2] for r in ranges], dtype=np.int64),
        )

    def files(self, values: Any) -> set[int]:
        """The numbers of the files whose range holds one of ``values`` (no nulls)."""
        if not len(values) or not len(self.lows):
            return set()
        keys = np.sort(np.asarray(values, dtype=self.lows.dtype))
        below = np.searchsorted(keys, self.lows, side="left")
        through = np.searchsorted(keys, self.highs, side="right")
        return {int(n) for n in self.numbers[through > below]}


def search_key_files(keys: DataFrame, name: str, table: Sequence[tuple[Any, ...]], values: Any = None) -> list[int]:
    """The files whose key range holds one of ``keys`` (a single key column), by `_Ranges`, in
    the keys' tasks, or on the driver when the caller holds the keys' ``values`` (a small
    window's, without nulls); a file whose range is unknown is a candidate when there is a key."""
    unknown = sorted(int(row[0]) for row in table if row[1] is None or row[2] is None)
    ranges = _Ranges.of([(row[1], row[2], int(row[0])) for row in table if row[1] is not None and row[2] is not None])
    if values is not None:
        return sorted(ranges.files(values) | set(unknown if len(values) else ()))

    def search(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        found: set[int] = set()
        for batch in batches:
            found |= ranges.files(batch[name].dropna().unique())
        yield pd.DataFrame({"__file": sorted(found)}, dtype="int64")

    hits: set[int] = set()
    if len(ranges.lows):
        hits = {int(r[0]) for r in keys.select(identifier(name)).mapInPandas(search, "__file long").collect()}
    if unknown and not keys.limit(1).collect():
        unknown = []
    return sorted(hits | set(unknown))


def _chosen(snapshot: TableSnapshot, files: Sequence[AddFile], hits: Sequence[int]) -> tuple[ReplacedFile, ...]:
    """The files numbered ``hits``, refused when one has a deletion vector."""
    chosen = []
    for i in hits:
        add = files[i]
        if add.deletion_vector is not None:
            raise TableFeatureError(
                f"the Delta table at {snapshot.path} has a deletion vector on {add.path}, a file this write must "
                "rewrite, and the jar-free path cannot remove a file with one: purge the vectors first "
                "(REORG TABLE ... APPLY (PURGE)) or use a session with Delta's jars",
                feature="deletionVectors",
            )
        chosen.append(ReplacedFile(add.path, add.size, dict(add.partition_values)))
    return tuple(chosen)


def _bounds_table(files: Sequence[AddFile], layout: TableLayout, key: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """One row per file that can hold a key: its number, then per key column its partition
    value (the log's string) or its bounds (None: unknown). A file whose statistics say it
    holds no value of a key column is left out."""
    physical = layout.physical_names
    table = []
    for number, add in enumerate(files):
        stats = parse_stats(add.stats)
        row: list[Any] = [number]
        for name in key:
            if name in layout.partition_columns:
                row.append(add.partition_values.get(physical[name]))
                continue
            bounds = column_bounds(stats, (physical[name],), layout.logical[name].dataType)
            if bounds.empty:
                break
            row += [bounds.low, bounds.high]
        else:
            table.append(tuple(row))
    return table


def rewrite_rows(rows: DataFrame, keyed: KeyedRows, max_file_rows: int | None, row_count: int | None) -> DataFrame:
    """The rows of a rewrite's files: the candidates' less the keys', and ``rows``.

    Kept in key ranges, so that the next changes' keys again fall into few files: a candidate
    of at least half ``max_file_rows`` rows is rewritten on its own, in the tasks that read it
    (one file in one task, unsorted rows stay in order; no shuffle), and the smaller ones'
    rows join ``rows``, written sorted by key: in one task when ``row_count`` says they fit
    in one file, else range-partitioned (a sampling job and a shuffle). Without
    ``max_file_rows`` or the candidates' row counts, every row is range-partitioned."""
    spark = rows.sparkSession
    key = [identifier(k) for k in keyed.key]
    whole: list[ReplacedFile] = []
    merged: list[ReplacedFile] = []
    total = row_count  # the rows written sorted (None: unknown)
    for candidate, count in zip(keyed.candidates or (), keyed.file_rows(), strict=True):
        if max_file_rows and count is not None and 2 * count >= max_file_rows:
            whole.append(candidate)
            continue
        merged.append(candidate)
        total = None if total is None or count is None else total + count
    rest = rows
    if merged:
        rest = keyed.without_keys(scan_files(spark, keyed.snapshot, merged)).unionByName(rows)
    if max_file_rows and total is not None and total <= max_file_rows:
        rest = rest.coalesce(1).sortWithinPartitions(*key)
    else:
        rest = rest.repartitionByRange(*key).sortWithinPartitions(*key)
    if not whole:
        return rest
    return keyed.without_keys(scan_files(spark, keyed.snapshot, whole)).unionByName(rest)


def key_bounds(
    keys: DataFrame, key: tuple[str, ...], types: Mapping[str, str], values: Any
) -> tuple[tuple[str, str, str], ...]:
    """Each integer or string key column's lowest and highest value over ``keys`` (from the
    caller's ``values`` of a single key column, or one job), as SQL literals; none for a column
    without a value."""
    columns = [k for k in key if types.get(k) in _RANGED]
    if not columns:
        return ()
    if values is not None and len(key) == 1:
        found = [(min(values), max(values))] if len(values) else [(None, None)]
    else:
        row = keys.agg(
            *(F.min(identifier(c)).alias(f"lo{i}") for i, c in enumerate(columns)),
            *(F.max(identifier(c)).alias(f"hi{i}") for i, c in enumerate(columns)),
        ).first()
        found = [(row[f"lo{i}"], row[f"hi{i}"]) if row is not None else (None, None) for i in range(len(columns))]
    bounds = []
    for column, (low, high) in zip(columns, found, strict=True):
        if low is None or high is None:
            continue
        literal = string if types[column] == "string" else (lambda v: str(int(v)))
        bounds.append((column, literal(low), literal(high)))
    return tuple(bounds)


def key_ranges(keyed: KeyedRows) -> list[str]:
    """Conditions on the merge's target alone that hold for every row of the keys: each integer
    or string key column between the keys' lowest and highest value (`KeyedRows.ranges`). Delta
    skips the files whose statistics rule them out, so a window whose keys cluster reads few of
    the table's files (without them the merge reads every key of the table)."""
    return [f"t.{identifier(c)} BETWEEN {low} AND {high}" for c, low, high in keyed.ranges]


#: Key column types whose bounds a merge's condition writes as literals (Spark's ``dtypes``).
_RANGED = frozenset({"tinyint", "smallint", "int", "bigint", "string"})
