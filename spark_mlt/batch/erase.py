"""Making a mirror's erasures physical: the deleted rows' bytes removed from storage.

A sync ([`sync_table`][spark_mlt.batch.sync.sync_table]) deletes a row from the mirror, its
quarantine and (for a string value no row holds any more) its vocabulary in Delta commits: no
current version holds it, but the files older versions read still do, until a vacuum deletes
them once they are older than the retention period (Delta's: 7 days, which keeps time travel
and running readers safe). Rows that delta-spark deleted with deletion vectors stay in their
data files until a purge (``REORG TABLE ... APPLY (PURGE)``) rewrites them.

[`erase_physically`][spark_mlt.batch.erase.erase_physically] does both for the mirror, its
quarantine, its vocabularies and their value counts, and says what is still pending and until when (docs/sync.md:
erasure step by step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from spark_mlt.batch.options import quarantine_path
from spark_mlt.delta.fs import locate
from spark_mlt.errors import MLTError
from spark_mlt.storage import read_snapshot, table_exists, vacuum, vocabulary_paths
from spark_mlt.storage._delta_spark import path_target
from spark_mlt.storage.catalog import use_delta_spark
from spark_mlt.storage.counts import counts_path
from spark_mlt.storage.maintenance import pending_erasures

__all__ = ["erase_physically", "erased_tables"]


def erased_tables(
    mirror: str, *, quarantine: str | None = None, storage_options: Mapping[str, str] | None = None
) -> list[str]:
    """The tables a mirror's erasures touch: the mirror, its quarantine (if there is one), the
    vocabularies its properties name (a relative one resolved against the mirror's location) and
    their columns' value counts (`spark_mlt.storage.counts`, where there are)."""
    snapshot = read_snapshot(mirror, storage_options=storage_options)
    side = quarantine_path(mirror, quarantine)
    tables = [mirror, *([side] if table_exists(side, storage_options=storage_options) else [])]
    vocabularies = vocabulary_paths(snapshot.properties, location=snapshot.path)
    counts = [counts_path(mirror, column) for column in vocabularies]
    counted = [path for path in counts if table_exists(path, storage_options=storage_options)]
    return tables + list(vocabularies.values()) + counted


def erase_physically(
    mirror: str,
    *,
    quarantine: str | None = None,
    retention_hours: float | None = None,
    apply: bool = False,
    spark: SparkSession | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """For the mirror, its quarantine, its vocabularies and their value counts: purge the rows deletion vectors hide
    (``REORG TABLE ... APPLY (PURGE)``, which needs ``spark`` with Delta's jars) and vacuum the
    files older than ``retention_hours`` (by default each table's ``delta.deletedFileRetentionDuration``,
    7 days unless set; ``apply=False``: only list them); returns, per table,
    what was (or would be) deleted and what is still pending, with the time each pending file
    may go (``pending_erasures``).

    Raises:
        MLTError: ``apply`` and a table has rows in deletion vectors but ``spark`` has no
            Delta jars (the message names the table and the statement to run).

    Example::

        erase_physically("/lake/customers_mlt", retention_hours=168, apply=True)
    """
    report: dict[str, Any] = {}
    for table in erased_tables(mirror, quarantine=quarantine, storage_options=storage_options):
        before = pending_erasures(table, retention_hours=retention_hours, storage_options=storage_options)
        purged = False
        if apply and before["rows_in_deletion_vectors"]:
            if spark is None or not use_delta_spark(spark):
                raise MLTError(
                    f"{table} has {before['rows_in_deletion_vectors']} deleted rows in deletion vectors, whose bytes "
                    "stay in its data files until a purge rewrites them, and purging needs Delta's jars: run "
                    "REORG TABLE delta.`<path>` APPLY (PURGE) (or this command in a session with Delta's jars), then "
                    "this command again"
                )
            location = locate(table, storage_options)
            spark.sql(f"REORG TABLE {path_target(location)} APPLY (PURGE)").collect()
            purged = True
        files = vacuum(
            table,
            retention_hours=retention_hours,
            dry_run=not apply,
            spark=spark if spark is not None and use_delta_spark(spark) else None,
            storage_options=storage_options,
        )
        after = pending_erasures(table, retention_hours=retention_hours, storage_options=storage_options)
        report[table] = {
            "deleted" if apply else "would_delete": files,
            "purged_deletion_vectors": purged,
            "pending": after["removed_files"],
            "rows_in_deletion_vectors": after["rows_in_deletion_vectors"],
        }
    return report
