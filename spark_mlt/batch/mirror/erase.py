"""Making a mirror's erasures physical: the deleted rows' bytes removed from storage.

A sync ([`sync_table`][spark_mlt.batch.mirror.sync.sync_table]) deletes a row from the mirror, its
quarantine and (for a string value no row holds any more) its vocabulary in Delta commits: no
current version holds it, but the files older versions read still do, until a vacuum deletes
them once they are older than the retention period (Delta's: 7 days, which keeps time travel
and running readers safe; a shorter one is refused unless turned off on purpose, as Delta's
``VACUUM`` refuses it). Rows that delta-spark deleted with deletion vectors stay in their
data files until a purge (``REORG TABLE ... APPLY (PURGE)``) rewrites them.

[`erase_physically`][spark_mlt.batch.mirror.erase.erase_physically] does both for the mirror, its
quarantine, its vocabularies and their value counts, and says what is still pending and until when (docs/sync.md:
erasure step by step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from spark_mlt.batch.mirror.tables import Mirror
from spark_mlt.delta.fs import locate
from spark_mlt.storage import read_snapshot, table_exists, vacuum
from spark_mlt.storage.backends import resolve_backend
from spark_mlt.storage.maintenance import check_short_retention, pending_erasures, retention_shortfall

__all__ = ["erase_physically", "erased_tables"]


def erased_tables(
    mirror: str, *, quarantine: str | None = None, storage_options: Mapping[str, str] | None = None
) -> list[str]:
    """The tables a mirror's erasures touch: the mirror, its quarantine (if there is one), the
    vocabularies its properties name (a relative one resolved against the mirror's location) and
    their columns' value counts (`spark_mlt.storage.counts`, where there are)."""
    snapshot = read_snapshot(mirror, storage_options=storage_options)
    held = Mirror.at(mirror, quarantine)
    side = held.quarantine
    tables = [mirror, *([side] if table_exists(side, storage_options=storage_options) else [])]
    vocabularies = held.vocabularies(snapshot)
    counts = [held.counts(column) for column in vocabularies]
    counted = [path for path in counts if table_exists(path, storage_options=storage_options)]
    return tables + list(vocabularies.values()) + counted


def erase_physically(
    mirror: str,
    *,
    quarantine: str | None = None,
    retention_hours: float | None = None,
    apply: bool = False,
    allow_short_retention: bool = False,
    spark: SparkSession | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """For the mirror, its quarantine, its vocabularies and their value counts: purge the rows deletion vectors hide
    (``REORG TABLE ... APPLY (PURGE)``, which needs ``spark`` with Delta's jars) and vacuum the
    files older than ``retention_hours`` (by default each table's ``delta.deletedFileRetentionDuration``,
    7 days unless set; ``apply=False``: only list them); returns, per table,
    what was (or would be) deleted and what is still pending, with the time each pending file
    may go (``pending_erasures``). A ``retention_hours`` shorter than a table's own deletes
    files that time travel and running readers still need: ``apply`` refuses it, before any
    table is touched, unless ``allow_short_retention``; a listing says it (``note``).

    Raises:
        TableOptionError: ``apply`` with a ``retention_hours`` shorter than a table's own and
            no ``allow_short_retention`` (naming the table and its retention); nothing is done.
        MLTError: ``apply`` and a table has rows in deletion vectors but ``spark`` has no
            Delta jars (the message names the table and the statement to run).

    Example::

        erase_physically("/lake/customers_mlt", retention_hours=168, apply=True)
    """
    tables = erased_tables(mirror, quarantine=quarantine, storage_options=storage_options)
    short = {table: retention_shortfall(table, retention_hours, storage_options=storage_options) for table in tables}
    if apply and retention_hours is not None:  # every table, before the first is touched: all or nothing
        for table, kept in short.items():
            if kept is not None:
                shorter, own = round(retention_hours * 3_600_000), round(kept * 3_600_000)
                check_short_retention(table, shorter, own, allow=allow_short_retention)
    report: dict[str, Any] = {}
    for table in tables:
        report[table] = _erase(
            table,
            retention_hours=retention_hours,
            apply=apply,
            allow_short_retention=allow_short_retention,
            spark=spark,
            storage_options=storage_options,
        )
        kept = short[table]
        if kept is not None:
            report[table]["note"] = (
                f"a retention of {retention_hours:g} hours is shorter than the table's {kept:g} "
                "(delta.deletedFileRetentionDuration): the files include ones that time travel and running "
                "readers still need, and deleting them is refused unless allowed explicitly"
                if not apply
                else f"deleted with a retention of {retention_hours:g} hours, shorter than the table's {kept:g}"
            )
    return report


def _erase(
    table: str,
    *,
    retention_hours: float | None,
    apply: bool,
    allow_short_retention: bool,
    spark: SparkSession | None,
    storage_options: Mapping[str, str] | None,
) -> dict[str, Any]:
    """One table's purge and vacuum (or their listing), and what is pending after them."""
    before = pending_erasures(table, retention_hours=retention_hours, storage_options=storage_options)
    purged = False
    if apply and before["rows_in_deletion_vectors"]:
        resolve_backend(spark).purge(spark, locate(table, storage_options))
        purged = True
    files = vacuum(
        table,
        retention_hours=retention_hours,
        dry_run=not apply,
        allow_short_retention=allow_short_retention,
        spark=spark,
        storage_options=storage_options,
    )
    after = pending_erasures(table, retention_hours=retention_hours, storage_options=storage_options)
    return {
        "deleted" if apply else "would_delete": files,
        "purged_deletion_vectors": purged,
        "pending": after["removed_files"],
        "rows_in_deletion_vectors": after["rows_in_deletion_vectors"],
    }
