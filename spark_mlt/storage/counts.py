"""Value counts: how many rows of a table hold each value of a string key column, so that a
change decides which values no row holds any more from the values it touched alone, without
reading the rows of the others (a mirror's: how many rows of its source hold each value).

A count table is a Delta table ``(key string, rows bigint)``, one row per value that at least
one row holds, and one of ``rows = 0`` per value no row holds any more whose vocabulary has not
erased it yet (`spark_mlt.storage.erasure`: the erasure's work list), in key ranges (files
sorted by key, at most ``max_file_rows`` rows each), so that a change's values fall into few of
its files
([`change_counts`][spark_mlt.storage.counts.change_counts] rewrites those alone, by
[`replace_keys`][spark_mlt.storage.replace.replace_keys]).

Counts add up, so each change is applied exactly once, and only to the counts it was computed
against: it records its writer's next version with ``exact`` set
([`AppTransaction`][spark_mlt.storage.properties.AppTransaction]); a table that records another
version of the writer took another change instead, and the change is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.column.sqltext import identifier
from spark_mlt.errors import MLTError
from spark_mlt.storage.backends import Backend, DeltaBackend
from spark_mlt.storage.backends.base import KeyedRows
from spark_mlt.storage.backends.plan import DeltaWriteResult, skipped_write
from spark_mlt.storage.catalog import is_table_name
from spark_mlt.storage.properties import AppTransaction
from spark_mlt.storage.replace import key_rows, replace_keys
from spark_mlt.storage.table import TableSnapshot
from spark_mlt.storage.writer import WriteOptions, write_delta

__all__ = [
    "LOCAL_VALUES",
    "change_counts",
    "count_changes",
    "counts_path",
    "value_counts",
    "with_absent",
    "write_counts",
]


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


def with_absent(counts: DataFrame, keys: DataFrame | None) -> DataFrame:
    """``counts`` (``key, rows``) with a row of ``rows = 0`` for each of ``keys`` (a ``key``
    column: a vocabulary's keys, nulls left out) that no row holds: the values to erase.

    Example::

        with_absent(value_counts(customers, "email"), vocabulary.select("key"))
    """
    if keys is None:
        return counts
    known = keys.where("key IS NOT NULL").select("key").distinct()
    absent = known.join(counts.select("key"), "key", "left_anti").select("key", F.lit(0).cast("bigint").alias("rows"))
    return counts.unionByName(absent)


def count_changes(feed: DataFrame, column: str) -> DataFrame:
    """``key, change``: per value of ``column``, how many more rows hold it after the versions of
    ``feed`` (change data feed rows, with ``_change_type``) than before them: its inserted and
    post-update rows less its deleted and pre-update rows. A row that one version of the feed
    writes and a later one replaces is counted in once and out once, so only the rows before
    the first version and after the last one count. Values whose count stays are left out.

    Example::

        count_changes(read_changes(spark, "/lake/customers", 8, 12), "email")  # ("a@x", -1), ("b@x", 2)
    """
    return _net_changes(feed, column).where("change != 0")


def _net_changes(feed: DataFrame, column: str) -> DataFrame:
    """``key, change``: every value of ``column`` that ``feed`` carries, with its net change
    (see `count_changes`; 0 included)."""
    kind = F.col("_change_type")
    sign = F.when(kind.isin("insert", "update_postimage"), F.lit(1)).when(
        kind.isin("delete", "update_preimage"), F.lit(-1)
    )
    values = feed.select(F.col(identifier(column)).cast("string").alias("key"), sign.alias("change"))
    return values.where("key IS NOT NULL").groupBy("key").agg(F.sum("change").cast("bigint").alias("change"))


def write_counts(
    counts: DataFrame,
    path: str,
    *,
    transaction: AppTransaction,
    commit_info: Mapping[str, Any],
    max_file_rows: int | None,
    storage_options: Mapping[str, str] | None = None,
    backend: Backend | DeltaBackend = "auto",
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


#: The most change rows whose values `change_counts` gathers on the driver (with the counts of
#: those values: one job each), where it finds their count files and adds the change; a larger
#: change is added in Spark.
LOCAL_VALUES = 100_000


def change_counts(
    spark: SparkSession,
    snapshot: TableSnapshot,
    feed: DataFrame,
    column: str,
    *,
    transaction: AppTransaction,
    options: WriteOptions,
    feed_rows: int,
) -> DeltaWriteResult:
    """Add the change of ``feed`` (change data feed rows, ``feed_rows`` of them) to the counts of
    its column ``column`` (the count table ``snapshot``; see
    [`count_changes`][spark_mlt.storage.counts.count_changes]), in one commit as ``transaction``
    (``exact``; skipped when the table holds it; ``options``: its ``commit_info``,
    ``max_file_rows`` and resolved ``backend``): the files that hold a value ``feed`` carries
    rewritten (or merged), a value no row holds after it kept with a count of 0 (the values to
    erase, `spark_mlt.storage.erasure`), and the transaction alone committed when no count
    changes.

    A feed of at most `LOCAL_VALUES` rows is counted on the driver: its values' net changes and
    their counts are gathered (a job each; their count files found from the statistics there).

    Raises:
        MLTError: a count would fall below 0: the table does not count the rows the change
            replaces (naming the value; a full refresh rebuilds it). Nothing is committed.
        ConcurrentWriteError: the table records another version of the writer than the one
            the change was computed against; nothing is committed.

    Example::

        change_counts(spark, read_snapshot("/lake/c_mlt_counts/email"), feed, "email",
                      transaction=AppTransaction("spark-mlt-sync:...:counts", 12, after=8, exact=True),
                      options=WriteOptions(backend="delta-rs"), feed_rows=feed.count())
    """
    commit_info, max_file_rows, backend = options.commit_info, options.max_file_rows, options.backend
    if snapshot.holds(transaction):
        return skipped_write(snapshot.path, snapshot.version, transaction)
    transaction.check_base(snapshot.transaction_version(transaction.app_id), snapshot.path)
    if feed_rows <= LOCAL_VALUES:
        local = _count_locally(spark, snapshot, feed, column, backend=backend)
        if local.rows is not None:
            return replace_keys(
                local.rows,
                local.keyed,
                {},
                transaction=transaction,
                commit_info=commit_info,
                max_file_rows=max_file_rows,
            )
        # no count changes: the table records the transaction alone
        return write_delta(
            spark.createDataFrame([], _COUNTS),
            snapshot.path,
            {},
            mode="append",
            run_id=transaction,
            options=WriteOptions(commit_info=dict(commit_info), backend=backend),
            snapshot=snapshot,
            storage_options=snapshot.storage_options,
        )
    changes = _net_changes(feed, column)  # every value carried, 0 included: one no row holds is kept at 0
    keyed = key_rows(spark, snapshot, changes.select("key"), ["key"], backend=backend, key_count=feed_rows)
    summed = (
        keyed.held.join(changes, "key", "full_outer")
        .select("key", (F.coalesce(F.col("rows"), F.lit(0)) + F.coalesce(F.col("change"), F.lit(0))).alias("rows"))
        .cache()
    )
    try:
        below = summed.where("rows < 0").limit(1).collect()
        if below:
            raise _below(snapshot, below[0]["key"], below[0]["rows"])
        return replace_keys(
            summed, keyed, {}, transaction=transaction, commit_info=commit_info, max_file_rows=max_file_rows
        )
    finally:
        summed.unpersist()


@dataclass(frozen=True)
class _Local:
    """A small feed's change of the counts, worked out on the driver: the count files of its
    values (``keyed``) and their new counts (``rows``; None when no count changes)."""

    keyed: KeyedRows
    rows: DataFrame | None


def _count_locally(
    spark: SparkSession, snapshot: TableSnapshot, feed: DataFrame, column: str, *, backend: Backend | DeltaBackend
) -> _Local:
    """Every value a small ``feed`` carries, with its net change and its count before, gathered
    on the driver: the new counts of them all (0 for a value no row holds after the change)
    where one differs from what the table holds."""
    changes = {row["key"]: int(row["change"]) for row in _net_changes(feed, column).collect()}
    values = np.array(sorted(changes), dtype=object)
    keys = spark.createDataFrame([(v,) for v in values], _KEYS)
    keyed = key_rows(spark, snapshot, keys, ["key"], backend=backend, values=values, key_count=len(values))
    held = {row["key"]: int(row["rows"]) for row in keyed.held.collect()} if len(values) else {}
    after = {v: held.get(v, 0) + change for v, change in sorted(changes.items())}
    below = next(((v, n) for v, n in after.items() if n < 0), None)
    if below is not None:
        raise _below(snapshot, *below)
    if all(held.get(v) == n for v, n in after.items()):
        return _Local(keyed, None)
    return _Local(keyed, spark.createDataFrame(list(after.items()), _COUNTS))


_KEYS = "key string"
_COUNTS = "key string, rows bigint"


def _below(snapshot: TableSnapshot, value: object, rows: int) -> MLTError:
    return MLTError(
        f"the value counts at {snapshot.path} hold fewer rows of {value!r} than a change replaces "
        f"({rows} after it): the counts do not match the table they count; a full refresh rebuilds them. "
        "Nothing was committed",
        parameter="output",
    )
