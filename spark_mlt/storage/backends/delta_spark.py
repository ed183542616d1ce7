"""The delta-spark backend: for sessions with Delta's jars (Databricks, EMR, ``--packages``).

Everything goes through Spark SQL and the DataFrame writer, not the ``delta`` Python package:
it then works over Spark Connect too, and no pip package with its own pyspark pin is needed.

* A new table is created first, with its properties and no data:
  ``CREATE TABLE IF NOT EXISTS delta.`<path>` (<columns>) USING delta PARTITIONED BY (...)
  TBLPROPERTIES (...)`` (or ``<db.table>`` for a catalog table), so its codecs are in
  version 0, before any tokens; the same two commits as the delta-rs backend.
* Data: ``df.write.format("delta").mode("append" | "overwrite").save(<location>)``.
* A run id becomes Delta's idempotent-write options (``txnAppId`` = ``spark-mlt:<run id>``,
  ``txnVersion`` = 1, as the delta-rs backend records it): Delta itself skips a write whose
  application transaction the table already holds. Each commit carries spark-mlt's metadata
  as ``userMetadata`` (JSON) with a write id: the write's commit is the one among the commits
  after the version it was planned on that carries it (all of them are read); a write Delta
  skipped has none, and the table then holds its transaction.
* Parquet options (v2 data pages, no dictionary for token columns): Delta 3.2 and 4.4 do not
  hand the DataFrame writer's options to Parquet, so they are set on the session's conf for
  the write (Spark copies SQL conf into the Hadoop conf each write job reads) and restored
  after. Measured: with writer options the files kept v1 pages; with the conf they get
  ``DELTA_BINARY_PACKED`` pages and no dictionary.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_mlt.column.sqltext import identifier, string
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.fs import Location
from spark_mlt.delta.read.changes import FeedRange, read_feed
from spark_mlt.delta.vacuum import check_short_retention, retention_ms
from spark_mlt.errors import ConcurrentWriteError, MLTError
from spark_mlt.storage.backends.base import BackendName, KeyedRows
from spark_mlt.storage.backends.plan import (
    DeltaWriteResult,
    Vacuumed,
    WriteMode,
    WritePlan,
    check_schema,
    refuse_existing_table,
    skipped_write,
    spark_arrow_schema,
)
from spark_mlt.storage.catalog import local_uri
from spark_mlt.storage.keys import key_bounds, key_ranges
from spark_mlt.storage.properties import merge_codecs
from spark_mlt.storage.spark_sql import (
    WRITE_ATTEMPTS,
    create_table,
    lost_race,
    path_target,
    session_conf,
    statement_session,
    transaction_conf,
)
from spark_mlt.storage.table import WRITE_ID, TableSnapshot, read_snapshot

__all__ = ["DELTA_SPARK", "DeltaSpark", "write"]


def write(df: DataFrame, plan: WritePlan) -> DeltaWriteResult:
    """Writes ``df`` as the plan says, with delta-spark.

    Concurrency: Delta commits a blind append after whatever won meanwhile by itself. An
    overwrite that finds new files (``ConcurrentAppendException``), or a write whose run id
    another writer committed meanwhile (``ConcurrentTransactionException``: Delta's check of
    ``txnAppId``), is refused by Delta with nothing committed; the write then reloads the
    table, checks the run id, codecs and schema again, and runs again (an overwrite then
    replaces what won, as if the two had run one after the other), at most ``WRITE_ATTEMPTS``
    times. On S3 Delta's default log store is safe for one driver only (see docs/object-stores.md).
    """
    spark = df.sparkSession
    location = plan.location
    started = time.perf_counter()
    if plan.replaces:
        raise MLTError("replaces: files are replaced by the jar-free backend", parameter="replaces")
    if plan.resize and plan.snapshot is not None:
        return _replace(df, plan, plan.snapshot.version, started)
    arrow_schema = spark_arrow_schema(df)
    snapshot = plan.snapshot
    if snapshot is None:
        create_table(spark, path_target(location), df.schema, plan.partition_by, plan.properties)
        snapshot = read_snapshot(location.uri, storage_options=location.storage_options)
        if snapshot.version > 0 and plan.mode == "error":  # another writer created it meanwhile
            raise refuse_existing_table(location.uri)
        merge_codecs(location.uri, snapshot.codecs, plan.codecs)
    check_schema(snapshot, arrow_schema)
    write_id = uuid.uuid4().hex
    metadata = {**plan.commit_info, WRITE_ID: write_id}
    txn = plan.transaction
    for attempt in range(WRITE_ATTEMPTS):
        if attempt:
            snapshot = read_snapshot(location.uri, storage_options=location.storage_options)
            if txn is not None and snapshot.holds(txn):
                return skipped_write(location.uri, snapshot.version, txn)
            if txn is not None:
                txn.check_base(snapshot.transaction_version(txn.app_id), location.uri)
            merge_codecs(location.uri, snapshot.codecs, plan.codecs)
            check_schema(snapshot, arrow_schema)
        writer = df.write.format("delta").mode("overwrite" if plan.mode == "overwrite" else "append")
        # Delta's idempotent writes (skipped when the table has this txn): the writer's options
        # are the settings' last parts, txnAppId and txnVersion
        for key, value in transaction_conf(txn, snapshot).items():
            writer = writer.option(key.rsplit(".", 1)[-1], value)
        writer = writer.option("userMetadata", json.dumps(metadata, sort_keys=True))
        try:
            with session_conf(spark, _write_conf(plan.parquet_options)):
                writer.save(location.spark_path())
        except Exception as error:
            if not lost_race(error):
                raise
            continue
        return write_result(plan, write_id, snapshot.version, time.perf_counter() - started, df)
    raise ConcurrentWriteError(
        f"{WRITE_ATTEMPTS} writes to {location.uri} in a row lost to other writers' commits; "
        "nothing of this write was committed (its files are orphans for vacuum): run it again"
    )


def _write_conf(options: Mapping[str, str]) -> dict[str, str]:
    """A write's options as the session settings its Spark job reads: Parquet's by their own
    names (Spark hands SQL settings to the Hadoop configuration), the rows per file as
    ``spark.sql.files.maxRecordsPerFile`` (a ``maxRecordsPerFile`` key would reach nothing)."""
    return {("spark.sql.files.maxRecordsPerFile" if k == "maxRecordsPerFile" else k): v for k, v in options.items()}


#: Table properties a ``REPLACE TABLE`` must not set by hand (the protocol's).
_PROTOCOL_KEYS = ("delta.minreaderversion", "delta.minwriterversion", "delta.feature.")


def _replace(df: DataFrame, plan: WritePlan, planned: int, started: float) -> DeltaWriteResult:
    """A re-size of the table at version ``planned``: ``REPLACE TABLE ... AS SELECT``, one commit
    that replaces the table's rows, schema and codec properties (its other properties and
    partitioning kept, its history too)."""
    spark = df.sparkSession
    write_id = uuid.uuid4().hex
    view = f"spark_mlt_resize_{write_id[:12]}"
    sql = f"REPLACE TABLE {path_target(plan.location)} USING delta"
    if plan.partition_by:
        sql += f" PARTITIONED BY ({', '.join(identifier(c) for c in plan.partition_by)})"
    kept = {k: v for k, v in plan.properties.items() if not k.lower().startswith(_PROTOCOL_KEYS)}
    if kept:
        sql += f" TBLPROPERTIES ({', '.join(f'{string(k)} = {string(v)}' for k, v in sorted(kept.items()))})"
    conf: dict[str, str | None] = {
        "spark.databricks.delta.commitInfo.userMetadata": json.dumps({**plan.commit_info, WRITE_ID: write_id}),
        **_write_conf(plan.parquet_options),
    }
    conf.update(transaction_conf(plan.transaction, plan.snapshot))
    with statement_session(spark, conf, {view: df}) as own:
        own.sql(f"{sql} AS SELECT * FROM {view}").collect()
    return write_result(plan, write_id, planned, time.perf_counter() - started, df)


def write_result(plan: WritePlan, write_id: str, planned: int, seconds: float, df: DataFrame) -> DeltaWriteResult:
    """What the write committed: the commit after version ``planned`` (the one the write was
    checked against) that carries its write id, however many other writers committed since; or,
    when there is none, a write Delta skipped because the table holds its transaction, or an
    append of no rows (``df`` empty), which Delta does not record as a commit
    (``spark.databricks.delta.skipRecordingEmptyCommits``, on by default): nothing written.

    Raises:
        ConcurrentWriteError: neither: delta-spark returned without a commit of this write and
            without its transaction in the table (nothing is reported as written or skipped that
            was not).
    """
    location = plan.location
    snapshot = read_snapshot(location.uri, storage_options=location.storage_options)
    commit = snapshot.commit_of(write_id, after=planned)
    if commit is not None:
        metrics = commit.get("operationMetrics") or {}
        rows, files = int(metrics.get("numOutputRows", "0")), int(metrics.get("numFiles", "0"))
        return DeltaWriteResult(location.uri, int(commit["version"]), rows, files, "delta-spark", {"total": seconds})
    if plan.transaction is not None and snapshot.holds(plan.transaction):
        return skipped_write(location.uri, snapshot.version, plan.transaction)
    if plan.transaction is not None:  # Delta skipped it: another writer moved the table meanwhile
        plan.transaction.check_base(snapshot.transaction_version(plan.transaction.app_id), location.uri)
    if plan.transaction is None and plan.mode != "overwrite" and df.isEmpty():
        return DeltaWriteResult(location.uri, snapshot.version, 0, 0, "delta-spark", {"total": seconds})
    raise ConcurrentWriteError(
        f"delta-spark returned from the write to {location.uri}, but no commit after version {planned} "
        f"carries its write id {write_id} and the table does not hold {plan.transaction}: look at the "
        "table's history (DESCRIBE HISTORY) before running it again"
    )


_PRESENT = "__spark_mlt_present"


def _merge(rows: DataFrame, keyed: KeyedRows, plan: WritePlan) -> DeltaWriteResult:
    """``MERGE INTO`` the table with the keys and their new rows, as the plan's transaction."""
    snapshot, location, transaction = keyed.snapshot, plan.location, plan.transaction
    columns = list(keyed.rows.columns)
    source = keyed.keys.join(
        rows.select(*columns).withColumn(_PRESENT, F.lit(True)), list(keyed.key), "left"
    ).withColumn(_PRESENT, F.coalesce(F.col(_PRESENT), F.lit(False)))
    view = f"spark_mlt_merge_{uuid.uuid4().hex[:12]}"
    write_id = uuid.uuid4().hex
    conf = {
        **_write_conf(plan.parquet_options),
        "spark.databricks.delta.commitInfo.userMetadata": json.dumps(
            {**plan.commit_info, WRITE_ID: write_id}, sort_keys=True
        ),
    }
    now = snapshot
    if transaction is not None:  # the table as the merge is about to read it (Delta checks its txn from there)
        now = read_snapshot(location.uri, storage_options=snapshot.storage_options)
        if now.holds(transaction):
            return skipped_write(location.uri, now.version, transaction)
        transaction.check_base(now.transaction_version(transaction.app_id), location.uri)
    conf.update(transaction_conf(transaction, now))  # Delta's idempotent DML
    _run_merge(
        rows.sparkSession,
        conf,
        {view: source},
        _merge_sql(keyed, location, view, columns),
        lost=f"another writer committed to {location.uri} while the merge ran; nothing of it was committed: "
        "run it again",
    )
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


def _run_merge(
    spark: SparkSession, conf: Mapping[str, str], views: Mapping[str, DataFrame], sql: str, *, lost: str
) -> None:
    """Run the ``MERGE`` ``sql`` in a session of its own with ``conf`` and ``views`` (Delta's
    session-wide write settings stay with this one statement).

    Raises:
        ConcurrentWriteError: saying ``lost``, when Delta refused the commit to another writer's.
    """
    try:
        with statement_session(spark, conf, views) as own:
            own.sql(sql).collect()
    except Exception as error:
        if lost_race(error):
            raise ConcurrentWriteError(lost) from error
        raise


def _merge_sql(keyed: KeyedRows, location: Location, view: str, columns: Sequence[str]) -> str:
    """The ``MERGE INTO`` of `_merge`: a key without a new row deleted, one with a row updated
    or inserted, the table read within the keys' ranges (`key_ranges`)."""
    on = " AND ".join([f"t.{identifier(k)} = s.{identifier(k)}" for k in keyed.key] + key_ranges(keyed))
    sets = ", ".join(f"t.{identifier(c)} = s.{identifier(c)}" for c in columns)
    names = ", ".join(identifier(c) for c in columns)
    values = ", ".join(f"s.{identifier(c)}" for c in columns)
    return (
        f"MERGE INTO {path_target(location)} t USING {view} s ON {on} "
        f"WHEN MATCHED AND NOT s.{_PRESENT} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s.{_PRESENT} THEN INSERT ({names}) VALUES ({values})"
    )


def _blank_merge(keyed: KeyedRows, plan: WritePlan) -> None:
    """``MERGE INTO`` the table: each matched key set to null (Delta's UPDATE takes no
    subquery), as the plan's transaction (Delta's idempotent DML: refused by Delta when another
    change of the table lands meanwhile; checked against the table just before, too).

    Raises:
        ConcurrentWriteError: another run changed the table since it was read.
    """
    snapshot, location, transaction = keyed.snapshot, plan.location, plan.transaction
    column = identifier(keyed.key[0])
    view = f"spark_mlt_erase_{uuid.uuid4().hex[:12]}"
    now = read_snapshot(location.uri, storage_options=snapshot.storage_options)
    if transaction is not None:
        transaction.check_base(now.transaction_version(transaction.app_id), location.uri)
    conf = {
        "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(plan.commit_info), sort_keys=True),
        **transaction_conf(transaction, now),
    }
    _run_merge(
        keyed.keys.sparkSession,
        conf,
        {view: keyed.keys},
        f"MERGE INTO {path_target(location)} t USING {view} s ON t.{column} = s.{column} "
        f"WHEN MATCHED THEN UPDATE SET t.{column} = NULL",
        lost=f"another run changed the table at {location.uri} while its erasure ran; nothing was erased: run it again",
    )
    after = read_snapshot(location.uri, storage_options=snapshot.storage_options)
    if transaction is not None and after.transaction_version(transaction.app_id) != transaction.version:
        transaction.check_base(after.transaction_version(transaction.app_id), location.uri)  # Delta skipped it


def _delta_config(spark: SparkSession, location: Location) -> TableConfig:
    """The table's configuration (its deleted-file retention among it), as Delta's ``VACUUM`` reads it."""
    shown = spark.sql(f"SHOW TBLPROPERTIES {path_target(location)}").collect()
    return TableConfig.of({str(row[0]): str(row[1]) for row in shown})


def _delta_vacuum(
    spark: SparkSession, location: Location, *, retention_hours: float | None, dry_run: bool
) -> list[str]:
    """Delta's ``VACUUM``: its dry run lists the files (as URIs), the real one deletes them.
    Without ``retention_hours``, ``VACUUM`` without ``RETAIN`` uses the table's own. Delta's
    safety check is off for the command: ``vacuum`` has applied its own (Delta's would refuse
    a dry run with a short retention too, which lists here)."""
    target = path_target(location)
    retain = "" if retention_hours is None else f" RETAIN {f'{retention_hours:f}'.rstrip('0').rstrip('.')} HOURS"
    with session_conf(spark, {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}):
        listed = spark.sql(f"VACUUM {target}{retain} DRY RUN").collect()
        if not dry_run:
            spark.sql(f"VACUUM {target}{retain}").collect()
    return [_relative_to(location, str(row[0])) for row in listed]


def _relative_to(location: Location, uri: str) -> str:
    """The path relative to the table of a file URI Delta lists (``file:/t/x``,
    ``s3a://bucket/t/x``)."""
    path = local_uri(uri)
    if "://" in path:
        path = path.split("://", 1)[1]
    return location.relative(path)


class DeltaSpark:
    """The [`DeltaBackend`][spark_mlt.storage.backends.base.DeltaBackend] of a session with Delta's
    jars: everything through Spark SQL and the DataFrame reader and writer (so over Spark Connect
    too); a key replacement is one ``MERGE INTO`` read within the keys' ranges."""

    name: BackendName = "delta-spark"

    def check_writable(self, snapshot: TableSnapshot, mode: WriteMode) -> None:
        """Nothing to refuse here: Delta checks its own protocol when it commits."""

    def create_table(
        self,
        spark: SparkSession,
        name: str,
        schema: StructType,
        partition_by: Sequence[str],
        properties: Mapping[str, str],
    ) -> None:
        create_table(spark, name, schema, tuple(partition_by), properties)

    def write(self, df: DataFrame, plan: WritePlan) -> DeltaWriteResult:
        return write(df, plan)

    def read(self, spark: SparkSession, snapshot: TableSnapshot, *, files: Sequence[str] | None = None) -> DataFrame:
        # the version, not single files: Delta's data skipping keeps a filtered read to its files
        location = snapshot.delta.location
        return spark.read.format("delta").option("versionAsOf", snapshot.version).load(location.spark_path())

    def read_version(self, spark: SparkSession, location: Location, version: int | None) -> DataFrame:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(location.spark_path())

    def read_changes(self, spark: SparkSession, feed: FeedRange) -> DataFrame:
        if feed.until <= feed.after:  # Delta refuses an empty range
            return read_feed(spark, feed)
        rows = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", feed.after + 1)
            .option("endingVersion", feed.until)
            .load(feed.location.spark_path())
        )
        return rows.drop("_commit_timestamp")

    def feed_rows(self, feed: FeedRange) -> int | None:
        return None  # Delta's reader decides which files it reads

    def key_rows(
        self,
        spark: SparkSession,
        snapshot: TableSnapshot,
        keys: DataFrame,
        key: tuple[str, ...],
        *,
        values: Any,
        few: bool,
    ) -> KeyedRows:
        keys = keys.distinct()
        rows = self.read(spark, snapshot)
        ranges = key_bounds(keys, key, dict(rows.dtypes), values)
        if ranges:
            rows = rows.where(" AND ".join(f"{identifier(c)} BETWEEN {low} AND {high}" for c, low, high in ranges))
        return KeyedRows(snapshot, key, keys, rows, None, self, ranges, few)

    def replace_keys(
        self, rows: DataFrame, keyed: KeyedRows, plan: WritePlan, *, max_file_rows: int | None, row_count: int | None
    ) -> DeltaWriteResult:
        return _merge(rows, keyed, plan)

    def blank_keys(self, keyed: KeyedRows, plan: WritePlan) -> None:
        _blank_merge(keyed, plan)

    def purge(self, spark: SparkSession | None, location: Location) -> None:
        if spark is None:
            raise MLTError("purge: delta-spark's REORG TABLE needs a session with Delta's jars", parameter="spark")
        spark.sql(f"REORG TABLE {path_target(location)} APPLY (PURGE)").collect()

    def vacuum(
        self,
        spark: SparkSession | None,
        location: Location,
        *,
        retention_hours: float | None,
        dry_run: bool,
        allow_short_retention: bool,
    ) -> Vacuumed:
        if spark is None:
            raise MLTError("vacuum: delta-spark's VACUUM needs a session with Delta's jars", parameter="spark")
        config = _delta_config(spark, location)
        kept_ms = retention_ms(retention_hours, config)
        if not dry_run:
            check_short_retention(location.uri, kept_ms, config.deleted_file_retention_ms, allow=allow_short_retention)
        return Vacuumed(_delta_vacuum(spark, location, retention_hours=retention_hours, dry_run=dry_run), kept_ms)


#: The backend of sessions with Delta's jars.
DELTA_SPARK = DeltaSpark()
