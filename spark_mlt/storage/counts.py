"""Value counts: how many rows of a table hold each value of a string key column, so that a
change decides which values no row holds any more from the values it touched alone, without
reading the rows of the others (a mirror's: how many rows of its source hold each value).

A count table is a Delta table ``(key string, rows bigint)``, one row per value that at least
one row holds, in key ranges (files sorted by key, at most ``max_file_rows`` rows each), so that
a change's values fall into few of its files
([`change_counts`][spark_mlt.storage.counts.change_counts] rewrites those alone, by
[`replace_keys`][spark_mlt.storage.replace.replace_keys]).

Counts add up, so each change is applied exactly once, and only to the counts it was computed
against: it records its writer's next version with ``exact`` set
([`AppTransaction`][spark_mlt.storage.properties.AppTransaction]); a table that records another
version of the writer took another change instead, and the change is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.column.sqltext import identifier
from spark_mlt.errors import MLTError
from spark_mlt.storage._plan import DeltaWriteResult, skipped_write
from spark_mlt.storage.catalog import Backend, is_table_name
from spark_mlt.storage.properties import AppTransaction
from spark_mlt.storage.replace import key_rows, replace_keys
from spark_mlt.storage.table import TableSnapshot
from spark_mlt.storage.writer import WriteOptions, write_delta

__all__ = ["change_counts", "count_changes", "counts_path", "value_counts", "write_counts"]


def counts_path(output: str, column: str) -> str:
    """Where the value counts of ``output``'s string key column ``column`` live: the folder
    ``<output>_counts/<column>``, or for a catalog table the table ``<output>_counts_<column>``.

    Example::

        >>> counts_path("/lake/customers_mlt/", "email")
        '/lake/customers_mlt_counts/email'
    """
    if is_table_name(output):
        return f"{output}_counts_{column}"
    return f"{output.rstrip('/')}_counts/{column}"


def value_counts(rows: DataFrame, column: str) -> DataFrame:
    """``key, rows``: how many of ``rows`` hold each value of ``column`` (nulls left out).

    Example::

        value_counts(customers, "email")  # ("a@example.com", 2), ("b@example.com", 1)
    """
    values = rows.select(F.col(identifier(column)).cast("string").alias("key")).where("key IS NOT NULL")
    return values.groupBy("key").agg(F.count(F.lit(1)).alias("rows"))


def count_changes(feed: DataFrame, column: str) -> DataFrame:
    """``key, change``: per value of ``column``, how many more rows hold it after the versions of
    ``feed`` (change data feed rows, with ``_change_type``) than before them: its inserted and
    post-update rows less its deleted and pre-update rows. A row that one version of the feed
    writes and a later one replaces is counted in once and out once, so only the rows before
    the first version and after the last one count. Values whose count stays are left out.

    Example::

        count_changes(read_changes(spark, "/lake/customers", 8, 12), "email")  # ("a@x", -1), ("b@x", 2)
    """
    kind = F.col("_change_type")
    sign = F.when(kind.isin("insert", "update_postimage"), F.lit(1)).when(
        kind.isin("delete", "update_preimage"), F.lit(-1)
    )
    values = feed.select(F.col(identifier(column)).cast("string").alias("key"), sign.alias("change"))
    summed = values.where("key IS NOT NULL").groupBy("key").agg(F.sum("change").cast("bigint").alias("change"))
    return summed.where("change != 0")


def write_counts(
    counts: DataFrame,
    path: str,
    *,
    transaction: AppTransaction,
    commit_info: Mapping[str, Any],
    max_file_rows: int | None,
    storage_options: Mapping[str, str] | None = None,
    backend: Backend = "auto",
) -> DeltaWriteResult:
    """Overwrite the count table at ``path`` (created if need be) with ``counts`` (``key,
    rows``: [`value_counts`][spark_mlt.storage.counts.value_counts]), in key ranges, as
    ``transaction``."""
    options = WriteOptions(
        commit_info=dict(commit_info), cluster_by=("key",), max_file_rows=max_file_rows, backend=backend
    )
    return write_delta(
        counts, path, {}, mode="overwrite", run_id=transaction, options=options, storage_options=storage_options
    )


def change_counts(
    spark: SparkSession,
    snapshot: TableSnapshot,
    changes: DataFrame,
    *,
    transaction: AppTransaction,
    commit_info: Mapping[str, Any],
    max_file_rows: int | None,
    backend: Backend,
    values: Any = None,
    key_count: int | None = None,
) -> DeltaWriteResult:
    """Add ``changes`` (``key, change``: [`count_changes`][spark_mlt.storage.counts.count_changes])
    to the count table ``snapshot`` in one commit as ``transaction`` (``exact``; skipped when the
    table holds it): the files that hold the changed values rewritten (or merged), a value whose
    count falls to 0 deleted. ``values``: the changed values, or more, where the caller holds
    them (their files are then found on the driver); ``key_count``: at most how many values
    change, where known.

    Raises:
        MLTError: a count would fall below 0: the table does not count the rows the change
            replaces (naming the value; a full refresh rebuilds it). Nothing is committed.
        ConcurrentWriteError: the table records another version of the writer than the one
            the change was computed against; nothing is committed.
    """
    if snapshot.holds(transaction):  # applied already: not again
        return skipped_write(snapshot.path, snapshot.version, transaction)
    transaction.check_base(snapshot.transaction_version(transaction.app_id), snapshot.path)
    keyed = key_rows(
        spark, snapshot, changes.select("key"), ["key"], backend=backend, values=values, key_count=key_count
    )
    summed = (
        keyed.held.join(changes, "key", "full_outer")
        .select("key", (F.coalesce(F.col("rows"), F.lit(0)) + F.coalesce(F.col("change"), F.lit(0))).alias("rows"))
        .cache()
    )
    try:
        below = summed.where("rows < 0").limit(1).collect()
        if below:
            raise MLTError(
                f"the value counts at {snapshot.path} hold fewer rows of {below[0]['key']!r} than a change replaces "
                f"({below[0]['rows']} after it): the counts do not match the table they count; a full refresh "
                "rebuilds them. Nothing was committed",
                parameter="output",
            )
        return replace_keys(
            summed.where("rows > 0"),
            keyed,
            {},
            transaction=transaction,
            commit_info=commit_info,
            max_file_rows=max_file_rows,
        )
    finally:
        summed.unpersist()
