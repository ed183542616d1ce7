"""Replacing the rows of some keys of a Delta table in one commit: a mirror's updates and
deletes, a count's changes, an erasure.

[`key_rows`][spark_mlt.storage.replace.key_rows] finds the rows a table holds for a set of keys
(a DataFrame of key values), and [`replace_keys`][spark_mlt.storage.replace.replace_keys]
commits the table with those rows replaced by new ones (a key without a new row is deleted),
idempotent by an application transaction; [`blank_keys`][spark_mlt.storage.replace.blank_keys]
commits them with their key set to null (a vocabulary's erasure). The arguments, the table's
protocol and the transaction are checked here, once; the table work is the backend's
([`DeltaBackend`][spark_mlt.storage.backends.DeltaBackend]):

* ``delta-spark`` (Delta's jars): one ``MERGE INTO`` keyed on the key columns (delete, update,
  insert) and read within the keys' ranges, with Delta's idempotent DML settings
  (``spark.databricks.delta.write.txnAppId`` and ``txnVersion``) for the transaction, set on a
  clone of the session for that statement alone (`statement_session`), never on the user's.
* ``delta-rs`` (jar-free): only the files that can hold one of the keys are rewritten
  (`spark_mlt.storage.keys`): their rows less those of the keys, with the new rows, are written
  by Spark, and one commit removes the candidates and adds the new files. No row passes
  through the driver; only the candidates' names do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_mlt.codec import MLTCodec
from spark_mlt.column.sqltext import identifier
from spark_mlt.storage.backends import Backend, DeltaBackend, resolve_backend
from spark_mlt.storage.backends.base import KeyedRows
from spark_mlt.storage.backends.plan import DeltaWriteResult, WritePlan, skipped_write
from spark_mlt.storage.keys import broadcast_keys
from spark_mlt.storage.properties import AppTransaction
from spark_mlt.storage.table import TableSnapshot
from spark_mlt.storage.writer import WriteOptions, write_plan

__all__ = ["KeyedRows", "blank_keys", "key_rows", "replace_keys"]


def key_rows(
    spark: SparkSession,
    snapshot: TableSnapshot,
    keys: DataFrame,
    key: Sequence[str],
    *,
    backend: Backend | DeltaBackend = "auto",
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

        keyed = key_rows(spark, read_snapshot("/data/mirror"), changed_keys, ["customer_id"])
    """
    names = tuple(key)
    few = broadcast_keys(values, key_count)
    given = keys.select(*(identifier(k) for k in names))
    return resolve_backend(spark, backend).key_rows(spark, snapshot, given, names, values=values, few=few)


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
    ``rows`` holds, where the caller knows (see `spark_mlt.storage.keys.rewrite_rows`).

    Raises:
        ConcurrentWriteError: another writer removed a rewritten file meanwhile (jar-free) or
            kept winning (delta-spark); nothing was committed.

    Example::

        replace_keys(new_rows, keyed, codecs, transaction=AppTransaction("spark-mlt-sync:...", 45),
                     commit_info={"spark_mlt.job": "sync"})
    """
    options = WriteOptions(
        commit_info=dict(commit_info), parquet_options=dict(parquet_options or {}), max_file_rows=max_file_rows
    )
    plan = _replacement(rows, keyed, codecs, transaction, options)
    if isinstance(plan, DeltaWriteResult):
        return plan
    return keyed.backend.replace_keys(rows, keyed, plan, max_file_rows=max_file_rows, row_count=row_count)


def blank_keys(keyed: KeyedRows, *, transaction: AppTransaction, commit_info: Mapping[str, Any]) -> bool:
    """Commit ``keyed.snapshot``'s table with the key column (a single one) of the rows of
    ``keyed.keys`` set to null, each row kept otherwise, as ``transaction``; False when the
    table holds it already (nothing committed).

    Raises:
        ConcurrentWriteError: another run changed the table since ``keyed.snapshot``.

    Example::

        blank_keys(key_rows(spark, vocabulary, gone, ["key"]), transaction=change, commit_info={})
    """
    plan = _replacement(keyed.held, keyed, {}, transaction, WriteOptions(commit_info=dict(commit_info)))
    if isinstance(plan, DeltaWriteResult):
        return False
    keyed.backend.blank_keys(keyed, plan)
    return True


def _replacement(
    rows: DataFrame,
    keyed: KeyedRows,
    codecs: Mapping[str, MLTCodec],
    transaction: AppTransaction | None,
    options: WriteOptions,
) -> WritePlan | DeltaWriteResult:
    """The plan of a replacement of ``keyed``'s rows (an append to its version, checked: the
    transaction's base, the backend's protocol check), or the skipped write when the table
    holds ``transaction`` already."""
    snapshot = keyed.snapshot
    if transaction is not None and snapshot.holds(transaction):
        return skipped_write(snapshot.path, snapshot.version, transaction)
    if transaction is not None:
        transaction.check_base(snapshot.transaction_version(transaction.app_id), snapshot.path)
    keyed.backend.check_writable(snapshot, "append")
    return write_plan(rows, snapshot, codecs, mode="append", run_id=transaction, options=options)
