"""Replacing the rows of some keys of a Delta table in one commit: a mirror's updates and
deletes.

[`key_rows`][spark_mlt.storage.replace.key_rows] finds the rows a table holds for a set of keys
(a DataFrame of key values), and [`replace_keys`][spark_mlt.storage.replace.replace_keys]
commits the table with those rows replaced by new ones (a key without a new row is deleted),
idempotent by an application transaction:

* ``delta-spark`` (Delta's jars): one ``MERGE INTO`` keyed on the key columns (delete, update,
  insert), with Delta's idempotent DML settings (``spark.databricks.delta.write.txnAppId`` and
  ``txnVersion``) for the transaction, set on a clone of the session for that statement alone
  (`statement_session`), never on the user's.
* ``delta-rs`` (jar-free): only the files that can hold one of the keys are rewritten. The
  candidates are found from the files' statistics (each key column's bounds, read by
  delta-spark's rules in `spark_mlt.delta.stats.bounds`, or its partition value, typed as the
  scan types it), searched for the keys; their rows less those of the keys, with the new rows,
  are written by Spark, and one commit removes the candidates and adds the new files. A full
  candidate is rewritten in the task that reads it (its key range less the keys; no shuffle),
  and the new rows join the small candidates' rows in one sorted file (or in range-partitioned
  key ranges when they are many; see `_rewrite`). A candidate with a deletion vector is
  refused (delta-rs cannot name the vector in its remove action): purge it first (``REORG
  TABLE ... APPLY (PURGE)``). No row passes through the driver; only the candidates' names do.

Changes cluster by key in most tables (new and recent rows change most), so the statistics
keep the rewrite to few files; keys spread over every file rewrite every file, which is then
as costly as writing the table again (docs/sync.md).
"""

from __future__ import annotations

import json
import uuid
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

from spark_mlt.codec import MLTCodec
from spark_mlt.column.sqltext import identifier, string
from spark_mlt.delta.actions import AddFile
from spark_mlt.delta.frames import local_frame
from spark_mlt.delta.fs import locate
from spark_mlt.delta.partitions import partition_value
from spark_mlt.delta.read.scan import scan_snapshot
from spark_mlt.delta.schema import TableLayout
from spark_mlt.delta.stats import column_bounds, parse_stats
from spark_mlt.errors import ConcurrentWriteError, TableFeatureError
from spark_mlt.storage import spark_sql
from spark_mlt.storage.backends.plan import DeltaWriteResult, ReplacedFile, skipped_write
from spark_mlt.storage.catalog import Backend
from spark_mlt.storage.properties import AppTransaction
from spark_mlt.storage.reader import read_snapshot_rows
from spark_mlt.storage.table import WRITE_ID, TableSnapshot, read_snapshot
from spark_mlt.storage.writer import WriteOptions, write_delta

__all__ = ["KeyedRows", "key_rows", "replace_keys"]


@dataclass(frozen=True)
class KeyedRows:
    """The rows of a table version that can hold a set of keys.

    Attributes:
        snapshot: the version read.
        key: the key columns.
        keys: the keys (a DataFrame of the key columns, distinct).
        rows: the rows read: the candidate files' (jar-free) or, with delta-spark, the table's
            within ``ranges`` (Delta skips the files outside them).
        candidates: the files the jar-free rewrite replaces (empty with delta-spark).
        backend: the backend that reads and commits.
        ranges: each integer or string key column's range over the keys, ``(column, lowest,
            highest)`` as SQL literals (delta-spark: read and merged within them).
        few: whether the keys are few enough to be broadcast to the rows' tasks (at most
            `BROADCAST_KEYS`), which then join them where they read them (no shuffle).
    """

    snapshot: TableSnapshot
    key: tuple[str, ...]
    keys: DataFrame
    rows: DataFrame
    candidates: tuple[ReplacedFile, ...]
    backend: Backend
    ranges: tuple[tuple[str, str, str], ...] = ()
    few: bool = False

    @property
    def candidate_rows(self) -> int | None:
        """The rows of the jar-free rewrite's files (their statistics' ``numRecords``, deleted
        rows included); None with delta-spark or where a file has no statistics."""
        if self.backend == "delta-spark":
            return None
        counts = _row_counts(self)
        return None if None in counts else sum(n or 0 for n in counts)

    @property
    def held(self) -> DataFrame:
        """The rows the version holds for the keys."""
        return self.rows.join(self._joined_keys, list(self.key), "left_semi")

    def held_keys(self, values: Sequence[Any] | None) -> pd.DataFrame | None:
        """The keys (a single key column's ``values``, no nulls) that the jar-free rewrite's
        files hold, a row for each row that holds one, read on the driver from the files' key
        column (a key check needs no Spark job for them); None where it takes Spark: with
        delta-spark, a key of several columns or a partition column, unknown ``values``, or files
        of more than `DRIVER_HELD_ROWS` rows (their statistics) or in another store.

        Example::

            held = keyed.held_keys([3, 5, 8])  # a frame of the key column: 3 and 8, say
        """
        if self.backend != "delta-spark" and values is not None and len(self.key) == 1:
            rows = self.candidate_rows
            layout = self.snapshot.delta.layout
            if rows is not None and rows <= DRIVER_HELD_ROWS and self.key[0] not in layout.partition_columns:
                return _held_keys(self, values)
        return None

    def without_keys(self, rows: DataFrame) -> DataFrame:
        """``rows`` (of the table) less those of the keys: with few keys (``few``), anti-joined
        with them broadcast, so that each task's rows stay in it."""
        return rows.join(self._joined_keys, list(self.key), "left_anti")

    @property
    def _joined_keys(self) -> DataFrame:
        return F.broadcast(self.keys) if self.few else self.keys


def key_rows(
    spark: SparkSession,
    snapshot: TableSnapshot,
    keys: DataFrame,
    key: Sequence[str],
    *,
    backend: Backend,
    values: Any = None,
    key_count: int | None = None,
) -> KeyedRows:
    """The rows of ``snapshot`` that can hold one of ``keys`` (see the module's notes);
    ``values``: the keys' values (a single key column, no nulls) where the caller holds them,
    so that their files are found on the driver, without a Spark job; ``key_count``: at most
    how many keys there are, where the caller knows (up to `BROADCAST_KEYS`, or with
    ``values`` of as many, they are broadcast to the rows' tasks: `KeyedRows.few`).

    Raises:
        TableFeatureError: jar-free, and a candidate file has a deletion vector.

    Example::

        keyed = key_rows(spark, read_snapshot("/data/mirror"), changed_keys, ["customer_id"], backend="delta-rs")
    """
    names = tuple(key)
    given = keys.select(*(identifier(k) for k in names))
    keys = given.distinct()
    few = (values is not None and len(values) <= BROADCAST_KEYS) or (
        key_count is not None and key_count <= BROADCAST_KEYS
    )
    if backend == "delta-spark":
        rows = read_snapshot_rows(spark, snapshot, backend=backend)
        ranges = _key_bounds(keys, names, dict(rows.dtypes), values)
        if ranges:
            rows = rows.where(" AND ".join(f"{identifier(c)} BETWEEN {low} AND {high}" for c, low, high in ranges))
        return KeyedRows(snapshot, names, keys, rows, (), backend, ranges, few)
    candidates = _candidates(spark, snapshot, given, names, values)  # (a search needs no distinct keys)
    return KeyedRows(snapshot, names, keys, _scan(spark, snapshot, candidates), candidates, backend, few=few)


#: The most rows of candidate files whose key column `KeyedRows.held_keys` reads on the driver (an
#: integer column of 8 MB a million rows, read with its file's other columns left unread).
DRIVER_HELD_ROWS = 10_000_000


def _held_keys(keyed: KeyedRows, values: Sequence[Any]) -> pd.DataFrame | None:
    """`KeyedRows.held_keys` of a single key column: each candidate's key column read with
    pyarrow, its values among ``values`` kept (None: a file in another store)."""
    name = keyed.key[0]
    location = keyed.snapshot.delta.location
    column = keyed.snapshot.delta.layout.physical_names.get(name, name)
    found: list[pd.Series] = []
    wanted: dict[pa.DataType, pa.Array] = {}
    for candidate in keyed.candidates:
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


def _scan(spark: SparkSession, snapshot: TableSnapshot, files: Sequence[ReplacedFile]) -> DataFrame:
    """The rows of ``files`` of ``snapshot``."""
    if not files:
        return read_snapshot_rows(spark, snapshot, backend="delta-rs").limit(0)
    return scan_snapshot(spark, snapshot.delta, files=[snapshot.delta.files[c.path] for c in files])


def _candidates(
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


def replace_keys(
    rows: DataFrame,
    keyed: KeyedRows,
    codecs: Mapping[str, MLTCodec],
    *,
    transaction: AppTransaction | None,
    commit_info: Mapping[str, Any],
    parquet_options: Mapping[str, str] | None = None,
    max_file_rows: int | None = None,
    row_count: int | None = None,
) -> DeltaWriteResult:
    """Commit ``keyed.snapshot``'s table with the rows of ``keyed.keys`` replaced by ``rows``
    (the table's columns; at most one row per key; a key without one is deleted), in one
    commit that records ``transaction`` (skipped when the table holds it already; None: no
    transaction, for a rewrite that is idempotent by itself). The rewritten files hold key
    ranges of at most ``max_file_rows`` rows (None: no limit); ``row_count``: how many rows
    ``rows`` holds, where the caller knows (see `_rewrite`).

    Raises:
        ConcurrentWriteError: another writer removed a rewritten file meanwhile (jar-free) or
            kept winning (delta-spark); nothing was committed.

    Example::

        replace_keys(new_rows, keyed, codecs, transaction=AppTransaction("spark-mlt-sync:...", 45),
                     commit_info={"spark_mlt.job": "sync"})
    """
    snapshot = keyed.snapshot
    if transaction is not None and snapshot.holds(transaction):
        return skipped_write(snapshot.path, snapshot.version, transaction)
    if transaction is not None:
        transaction.check_base(snapshot.transaction_version(transaction.app_id), snapshot.path)
    if keyed.backend == "delta-spark":
        files = {"spark.sql.files.maxRecordsPerFile": str(max_file_rows)} if max_file_rows else {}
        return _merge(rows, keyed, transaction, commit_info, {**(parquet_options or {}), **files})
    options = WriteOptions(
        commit_info=dict(commit_info),
        parquet_options=dict(parquet_options or {}),
        backend="delta-rs",
        max_file_rows=max_file_rows,
        replaces=tuple(keyed.candidates),
    )
    return write_delta(
        _rewrite(rows.select(*keyed.rows.columns), keyed, max_file_rows, row_count),
        snapshot.path,
        codecs,
        mode="append",
        run_id=transaction,
        options=options,
        snapshot=snapshot,
        storage_options=snapshot.storage_options,
    )


def _rewrite(rows: DataFrame, keyed: KeyedRows, max_file_rows: int | None, row_count: int | None) -> DataFrame:
    """The rows of the jar-free rewrite's files: the candidates' less the keys', and ``rows``.

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
    for candidate, count in zip(keyed.candidates, _row_counts(keyed), strict=True):
        if max_file_rows and count is not None and 2 * count >= max_file_rows:
            whole.append(candidate)
            continue
        merged.append(candidate)
        total = None if total is None or count is None else total + count
    rest = rows
    if merged:
        rest = keyed.without_keys(_scan(spark, keyed.snapshot, merged)).unionByName(rows)
    if max_file_rows and total is not None and total <= max_file_rows:
        rest = rest.coalesce(1).sortWithinPartitions(*key)
    else:
        rest = rest.repartitionByRange(*key).sortWithinPartitions(*key)
    if not whole:
        return rest
    return keyed.without_keys(_scan(spark, keyed.snapshot, whole)).unionByName(rest)


def _row_counts(keyed: KeyedRows) -> list[int | None]:
    """Each candidate's rows (its statistics' ``numRecords``; None: unknown)."""
    files = keyed.snapshot.delta.files
    counts: list[int | None] = []
    for candidate in keyed.candidates:
        stats = parse_stats(files[candidate.path].stats)
        counts.append(None if stats is None or stats.num_records is None else int(stats.num_records))
    return counts


_PRESENT = "__spark_mlt_present"


def _key_bounds(
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


def _merge(
    rows: DataFrame,
    keyed: KeyedRows,
    transaction: AppTransaction | None,
    commit_info: Mapping[str, Any],
    parquet_options: Mapping[str, str],
) -> DeltaWriteResult:
    """``MERGE INTO`` the table with the keys and their new rows, as the transaction."""
    spark = rows.sparkSession
    snapshot = keyed.snapshot
    location = locate(snapshot.path, snapshot.storage_options)
    columns = list(keyed.rows.columns)
    source = keyed.keys.join(
        rows.select(*columns).withColumn(_PRESENT, F.lit(True)), list(keyed.key), "left"
    ).withColumn(_PRESENT, F.coalesce(F.col(_PRESENT), F.lit(False)))
    view = f"spark_mlt_merge_{uuid.uuid4().hex[:12]}"
    on = " AND ".join([f"t.{identifier(k)} = s.{identifier(k)}" for k in keyed.key] + key_ranges(keyed))
    sets = ", ".join(f"t.{identifier(c)} = s.{identifier(c)}" for c in columns)
    names = ", ".join(identifier(c) for c in columns)
    values = ", ".join(f"s.{identifier(c)}" for c in columns)
    sql = (
        f"MERGE INTO {spark_sql.path_target(location)} t USING {view} s ON {on} "
        f"WHEN MATCHED AND NOT s.{_PRESENT} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s.{_PRESENT} THEN INSERT ({names}) VALUES ({values})"
    )
    write_id = uuid.uuid4().hex
    metadata = {**commit_info, WRITE_ID: write_id}
    conf = {**parquet_options}
    if transaction is not None:
        metadata["spark_mlt.transaction"] = str(transaction)
    conf["spark.databricks.delta.commitInfo.userMetadata"] = json.dumps(metadata, sort_keys=True)
    try:
        now = snapshot
        if transaction is not None:  # the table as the merge is about to read it (Delta checks its txn from there)
            now = read_snapshot(location.uri, storage_options=snapshot.storage_options)
            if now.holds(transaction):
                return skipped_write(location.uri, now.version, transaction)
            transaction.check_base(now.transaction_version(transaction.app_id), location.uri)
        conf.update(spark_sql.transaction_conf(transaction, now))  # Delta's idempotent DML
        with spark_sql.statement_session(spark, conf, {view: source}) as own:
            own.sql(sql).collect()
    except Exception as error:
        if spark_sql.lost_race(error):
            raise ConcurrentWriteError(
                f"another writer committed to {location.uri} while the merge ran; nothing of it was committed: "
                "run it again"
            ) from error
        raise
    after = read_snapshot(location.uri, storage_options=snapshot.storage_options)
    commit = after.commit_of(write_id, after=snapshot.version)
    if commit is None:
        if transaction is not None and after.holds(transaction):
            return skipped_write(location.uri, after.version, transaction)
        if transaction is not None:  # Delta skipped it: another writer moved the table meanwhile
            transaction.check_base(after.transaction_version(transaction.app_id), location.uri)
        raise ConcurrentWriteError(
            f"delta-spark returned from the merge into {location.uri}, but no commit after version "
            f"{snapshot.version} carries its write id {write_id}: look at the table's history before running it again"
        )
    metrics = commit.get("operationMetrics") or {}
    changed = sum(int(metrics.get(name, "0")) for name in ("numTargetRowsInserted", "numTargetRowsUpdated"))
    files = int(metrics.get("numTargetFilesAdded", "0"))
    return DeltaWriteResult(location.uri, int(commit["version"]), changed, files, "delta-spark")
