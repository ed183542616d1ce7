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
from collections.abc import Mapping

from pyspark.sql import DataFrame

from spark_mlt.column.sqltext import identifier, string
from spark_mlt.errors import ConcurrentWriteError
from spark_mlt.storage.backends.plan import (
    DeltaWriteResult,
    WritePlan,
    check_schema,
    refuse_existing_table,
    skipped_write,
    spark_arrow_schema,
)
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
from spark_mlt.storage.table import WRITE_ID, read_snapshot


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
