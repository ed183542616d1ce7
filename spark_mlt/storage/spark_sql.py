"""Spark SQL helpers that the delta-spark backend and the jar-free one's Spark side share: a
path's SQL target, a table created with its properties before any data, a session's settings
set for one write and restored after, Delta's idempotent-write settings, and how to tell a
commit that lost to another writer's.

Example::

    with session_conf(spark, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
        df.write.parquet("out/staging")
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_mlt._classic import clone_session
from spark_mlt.column.sqltext import identifier, string
from spark_mlt.delta.fs import Location
from spark_mlt.storage.properties import AppTransaction
from spark_mlt.storage.table import CREATE_MARKER, TableSnapshot

#: Spark's setting of how timestamps are stored, and what the jar-free writer stores them as
#: when the session does not set it (Spark's default, INT96, keeps no bounds in a footer).
TIMESTAMP_TYPE = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


def path_target(location: Location) -> str:
    """The SQL name of the Delta table at ``location``: ``delta.`<absolute path or URI>```
    in Spark's form (Delta reads a relative path there as a table name; ``s3://`` is
    ``s3a://`` to Spark)."""
    return "delta." + identifier(location.spark_path())


def create_table(
    spark: SparkSession,
    target: str,
    schema: StructType,
    partition_by: Sequence[str],
    properties: Mapping[str, str],
) -> None:
    """``CREATE TABLE IF NOT EXISTS <target>`` with ``schema`` (columns nullable, as Spark's
    writers make them), partitioning and properties, and no data."""
    columns = ", ".join(f"{identifier(f.name)} {f.dataType.simpleString()}" for f in schema.fields)
    sql = f"CREATE TABLE IF NOT EXISTS {target} ({columns}) USING delta"
    if partition_by:
        sql += f" PARTITIONED BY ({', '.join(identifier(c) for c in partition_by)})"
    if properties:
        pairs = ", ".join(f"{string(k)} = {string(v)}" for k, v in sorted(properties.items()))
        sql += f" TBLPROPERTIES ({pairs})"
    marker = {"spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict([CREATE_MARKER]))}
    with statement_session(spark, marker) as own:
        own.sql(sql)


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str | None]) -> Iterator[None]:
    """Sets ``conf`` on the session for the block (a None value unsets its key) and restores the
    previous values after."""
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in conf}
    try:
        for key, value in conf.items():
            _set(spark, key, value)
        yield
    finally:
        for key, old in previous.items():
            _set(spark, key, old)


@contextmanager
def statement_session(
    spark: SparkSession, conf: Mapping[str, str | None], views: Mapping[str, DataFrame] | None = None
) -> Iterator[SparkSession]:
    """A session for one SQL statement: ``spark``'s clone (its settings and temporary views),
    with ``conf`` set (a None value unsets its key) and each of ``views`` a temporary view.

    Delta reads some write settings only from the session (``txnAppId``/``txnVersion`` of its
    idempotent DML, ``commitInfo.userMetadata``): set on the user's session, a write another
    thread of that session runs meanwhile would take them, and be skipped as the transaction
    already committed, or carry spark-mlt's write id. The clone keeps them to the statement.
    Spark Connect cannot clone a session from here: there ``spark`` itself is set for the block
    and restored after (docs/storage.md, Guarantees). The views are dropped after.

    Example::

        with statement_session(spark, {"spark.databricks.delta.write.txnAppId": "app"}, {"v": df}) as own:
            own.sql("MERGE INTO delta.`/t` t USING v s ON t.k = s.k WHEN MATCHED THEN DELETE").collect()
    """
    views = dict(views or {})
    for name, frame in views.items():
        frame.createOrReplaceTempView(name)
    try:
        clone = clone_session(spark)
        if clone is None:
            with session_conf(spark, conf):
                yield spark
        else:
            for key, value in conf.items():
                _set(clone, key, value)
            yield clone
    finally:
        for name in views:
            spark.catalog.dropTempView(name)


def transaction_conf(txn: AppTransaction | None, snapshot: TableSnapshot | None) -> dict[str, str]:
    """Delta's idempotent-write settings (``txnAppId``, ``txnVersion``) that record ``txn`` in
    the commit, for the table as ``snapshot`` holds it: none without a transaction, and none
    for a write that is not ``skippable`` whose table records its version or a later one
    already (Delta skips a write whose version the table records, and this one must land: a
    full refresh of a mirror that holds its source version; the table keeps the version it
    records, which the write was planned from).

    Example::

        conf = transaction_conf(AppTransaction("spark-mlt-sync:...", 12, after=12, skippable=False), snapshot)  # {}
    """
    if txn is None:
        return {}
    held = None if snapshot is None else snapshot.transaction_version(txn.app_id)
    if not txn.skippable and held is not None and held >= txn.version:
        return {}
    return {
        "spark.databricks.delta.write.txnAppId": txn.app_id,
        "spark.databricks.delta.write.txnVersion": str(txn.version),
    }


def _set(spark: SparkSession, key: str, value: str | None) -> None:
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)


#: How often a write that lost to another writer's commit is run again, each time after
#: reloading the table and checking it anew (Delta has retried the commit itself where
#: that was safe; what it raises needs the write's Spark job to run again).
WRITE_ATTEMPTS = 4

#: Delta's optimistic-concurrency errors: their error classes (Delta's exceptions are
#: SparkThrowables) and their Java classes.
_CONFLICT_CONDITIONS = frozenset(
    {
        "DELTA_CONCURRENT_APPEND",
        "DELTA_CONCURRENT_DELETE_READ",
        "DELTA_CONCURRENT_DELETE_DELETE",
        "DELTA_CONCURRENT_TRANSACTION",
        "DELTA_CONCURRENT_WRITE",
        "DELTA_METADATA_CHANGED",
        "DELTA_PROTOCOL_CHANGED",
    }
)
_CONFLICT_CLASSES = frozenset(
    {
        "ConcurrentAppendException",
        "ConcurrentDeleteReadException",
        "ConcurrentDeleteDeleteException",
        "ConcurrentTransactionException",
        "ConcurrentWriteException",
        "MetadataChangedException",
        "ProtocolChangedException",
    }
)


def lost_race(error: BaseException) -> bool:
    """Whether ``error`` is Delta refusing a commit because another writer's commit won, told
    by the exception's class, never by its message: the Java class of a Py4J error (Spark
    Classic raises Delta's exceptions so), else PySpark's error class (``getCondition`` on
    PySpark 4, ``getErrorClass`` before, over Spark Connect too), else, where PySpark 3.5 wraps
    an exception it does not know without either, the Java class that heads its description
    (``Throwable.toString``)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        return str(java.getClass().getSimpleName()) in _CONFLICT_CLASSES
    if not isinstance(error, PySparkException):
        return False
    ask = getattr(error, "getCondition", None) or error.getErrorClass
    condition = ask()
    if condition:
        return condition.split(".", 1)[0] in _CONFLICT_CONDITIONS
    head = str(error).lstrip().split("\n", 1)[0].split(":", 1)[0]
    return head.rsplit(".", 1)[-1] in _CONFLICT_CLASSES
