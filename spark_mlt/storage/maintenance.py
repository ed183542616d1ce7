"""Cleaning up after writes: files no version references, and the folders they leave.

A write that dies between Spark's job commit and its Delta commit (a killed driver) leaves an
uncommitted staging folder; a write in progress has one too, until it commits, and the two cannot be
told apart from the files alone. So [`orphan_files`][spark_mlt.storage.maintenance.orphan_files]
only lists, and [`vacuum`][spark_mlt.storage.maintenance.vacuum] deletes only files older than a
retention period (the table's ``delta.deletedFileRetentionDuration`` by default: 7 days unless the
table sets it, as with Delta's own ``VACUUM``), which also keeps time travel to recent versions
working. Which files those are is read from the table's log by the Delta core
(`spark_mlt.delta.vacuum`), and the empty staging folders left behind are removed through the
table's pyarrow filesystem, so both work on any location (see `spark_mlt.delta.fs`).

Deletion vectors: without Delta's jars neither function ever lists or deletes a deletion vector
file (``deletion_vector_*.bin``); vector files no version needs any more stay until Delta's own
``VACUUM`` removes them. A table whose features a vacuum cannot keep is refused first
([`check_writable`][spark_mlt.delta.features.check_writable]).

A retention shorter than the table's own is refused before anything is deleted, as Delta's
``VACUUM`` refuses it (``spark.databricks.delta.retentionDurationCheck.enabled``) and delta-rs
(``enforce_retention_duration``): the files it would delete include ones that time travel to the
table's recent versions and readers running now still need. The caller turns the check off on
purpose (``allow_short_retention=True``); a dry run lists what such a vacuum would delete, and
[`retention_shortfall`][spark_mlt.storage.maintenance.retention_shortfall] says that it is short.

Given a session with Delta's jars (``spark=``), [`vacuum`][spark_mlt.storage.maintenance.vacuum]
runs Delta's own ``VACUUM`` instead (it also deletes files the log never mentioned, outside hidden
folders), with its own check turned off for that one command once this one has passed (its dry
run refuses a short retention too). Paths are returned relative to the table either way.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.features import check_writable
from spark_mlt.delta.fs import Location, locate
from spark_mlt.delta.snapshot import read_snapshot as read_delta_snapshot
from spark_mlt.delta.vacuum import orphan_files as log_orphans
from spark_mlt.delta.vacuum import removed_files, vacuum_files
from spark_mlt.errors import MLTError, TableOptionError
from spark_mlt.storage.backends.delta_rs import STAGING_PREFIX
from spark_mlt.storage.catalog import local_uri, resolve_location, use_delta_spark
from spark_mlt.storage.spark_sql import path_target, session_conf
from spark_mlt.storage.table import read_snapshot

__all__ = ["check_short_retention", "orphan_files", "pending_erasures", "retention_shortfall", "vacuum"]

#: How many of a table's newest commits ``pending_erasures`` reads for the files they removed.
ERASURE_HISTORY = 10_000


def orphan_files(path: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Data files under the table that no version of its log references.

    They are left by writes that died between writing their files and committing them (a
    write in progress has such files too, until it commits). Paths are relative to the table.

    Raises:
        MissingTableError: there is no Delta table at ``path``.

    Example::

        orphan_files("/data/ratings_mlt")   # ['mlt-20261122T031200-1a2b3c4d5e6f/part-00000-....parquet']
    """
    return log_orphans(locate(resolve_location(path), storage_options))


def vacuum(
    path: str | os.PathLike[str],
    *,
    retention_hours: float | None = None,
    dry_run: bool = True,
    allow_short_retention: bool = False,
    spark: SparkSession | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> list[str]:
    """Files to delete (or, with ``dry_run=False``, deleted) older than ``retention_hours``:
    orphans of failed writes and files no version within the retention period needs.

    The default retention, the table's ``delta.deletedFileRetentionDuration`` (7 days unless
    the table sets it, as with Delta's ``VACUUM``), keeps time travel to recent versions and
    never touches the files of a write still in progress. A shorter one deletes files that time
    travel and running readers still need: it is refused unless ``allow_short_retention``
    (a dry run lists its files all the same). Empty staging folders left behind are removed
    too. With ``spark`` (a session with Delta's jars) Delta's ``VACUUM`` does the work;
    ``path`` may then be a catalog table's name.

    Raises:
        MissingTableError: there is no Delta table at ``path``.
        TableOptionError: ``dry_run=False`` with a ``retention_hours`` shorter than the table's
            and no ``allow_short_retention``; nothing is deleted.
        TableFeatureError: without Delta's jars, the table uses a feature that hides file
            references from the log in storage (its catalog owns its commits), or one
            spark-mlt does not know.

    Example::

        vacuum("/data/ratings_mlt", retention_hours=200, dry_run=False)
    """
    _check_retention(retention_hours)
    location = locate(resolve_location(path, spark=spark), storage_options)
    if spark is not None and use_delta_spark(spark):
        table_ms = _delta_retention_ms(spark, location)
        retention_ms = table_ms if retention_hours is None else round(retention_hours * 3_600_000)
        if not dry_run:
            check_short_retention(location.uri, retention_ms, table_ms, allow=allow_short_retention)
        files = _delta_vacuum(spark, location, retention_hours=retention_hours, dry_run=dry_run)
    else:
        snapshot = read_delta_snapshot(location)
        check_writable(snapshot, operation="vacuum")
        retention_ms = _retention_ms(retention_hours, snapshot.config)
        if not dry_run:
            check_short_retention(
                location.uri, retention_ms, snapshot.config.deleted_file_retention_ms, allow=allow_short_retention
            )
        files = vacuum_files(snapshot, retention_ms=retention_ms, now_ms=int(time.time() * 1000))
        if not dry_run:
            for name in files:
                location.remove_file(location.path(name))
    if not dry_run:
        _remove_empty_staging(location, cutoff=time.time() - retention_ms / 1000)
    return sorted(files)


def check_short_retention(table: str, retention_ms: int, table_retention_ms: int, *, allow: bool) -> None:
    """Refuses a vacuum of ``table`` that keeps removed files ``retention_ms`` when the table
    keeps them ``table_retention_ms`` (its ``delta.deletedFileRetentionDuration``), unless
    ``allow`` (the caller's ``allow_short_retention``): Delta's ``VACUUM`` safety check.

    Raises:
        TableOptionError: naming ``retention_hours``, the table, its retention and the way out.
    """
    if allow or retention_ms >= table_retention_ms:
        return
    hours, kept = retention_ms / 3_600_000, table_retention_ms / 3_600_000
    raise TableOptionError(
        f"retention_hours={hours:g}: the table {table} keeps removed files {kept:g} hours (its "
        "delta.deletedFileRetentionDuration, 7 days unless set), and a vacuum with a shorter retention deletes "
        "files that time travel to its recent versions and readers running now still need; nothing was deleted. "
        f"Keep at least {kept:g} hours, or, when no reader or writer uses the table, turn the check off with "
        "allow_short_retention=True (as Delta's spark.databricks.delta.retentionDurationCheck.enabled=false)",
        parameter="retention_hours",
    )


def retention_shortfall(
    path: str | os.PathLike[str], retention_hours: float | None, *, storage_options: Mapping[str, str] | None = None
) -> float | None:
    """The table's own retention in hours when ``retention_hours`` is shorter than it (a vacuum
    that deletes needs ``allow_short_retention`` then), else None. Reads the table's log, no Spark.

    Example::

        retention_shortfall("/data/ratings_mlt", 0)  # 168.0: the table keeps removed files 7 days
    """
    if retention_hours is None:
        return None
    _check_retention(retention_hours)
    config = read_delta_snapshot(locate(resolve_location(path), storage_options)).config
    kept = config.deleted_file_retention_ms
    return kept / 3_600_000 if round(retention_hours * 3_600_000) < kept else None


def _check_retention(retention_hours: float | None) -> None:
    if retention_hours is not None and not retention_hours >= 0:
        raise MLTError(
            f"retention_hours must be a number of hours >= 0 (or None: the table's "
            f"delta.deletedFileRetentionDuration), got {retention_hours!r}",
            parameter="retention_hours",
        )


def _retention_ms(retention_hours: float | None, config: TableConfig) -> int:
    """``retention_hours`` in milliseconds, or the table's deleted-file retention when None."""
    if retention_hours is None:
        return config.deleted_file_retention_ms
    return round(retention_hours * 3_600_000)


def _delta_retention_ms(spark: SparkSession, location: Location) -> int:
    """The table's deleted-file retention in milliseconds, as Delta's ``VACUUM`` reads it."""
    shown = spark.sql(f"SHOW TBLPROPERTIES {path_target(location)}").collect()
    return TableConfig.of({str(row[0]): str(row[1]) for row in shown}).deleted_file_retention_ms


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


def _remove_empty_staging(location: Location, *, cutoff: float) -> None:
    """Removes staging folders older than ``cutoff`` that hold no Parquet file any more (only
    Spark's markers, if anything). Object stores give folders no time: their files' is used."""
    for folder in location.folders():
        name = location.relative(folder.path)
        if not name.startswith(STAGING_PREFIX):
            continue
        files = location.files(name)
        if any(info.path.endswith(".parquet") for info in files):
            continue
        times = [info.mtime_ns for info in (folder, *files) if info.mtime_ns is not None]
        if not times or max(times) / 1e9 <= cutoff:
            location.remove_folder(name)


def pending_erasures(
    path: str | os.PathLike[str],
    *,
    retention_hours: float | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """What of a table's deleted rows is still in its storage, and when it can go: the files
    its commits removed (an update's, a delete's, a sync's rewritten files) that are still
    there, each with the time a vacuum with ``retention_hours`` (by default the table's
    ``delta.deletedFileRetentionDuration``) may delete it, and the rows its
    deletion vectors hide (their bytes stay in the data files until a purge,
    ``REORG TABLE ... APPLY (PURGE)``, rewrites them). Reads the table's last
    ``ERASURE_HISTORY`` (10,000) commits; no Spark.

    Example::

        pending_erasures("/data/customers_mlt")["removed_files"]  # [{"path": ..., "deletable_after": ...}]
    """
    _check_retention(retention_hours)
    location = locate(resolve_location(path), storage_options)
    snapshot = read_snapshot(location.uri, storage_options=storage_options)
    still = removed_files(snapshot.delta, history=ERASURE_HISTORY).items()
    retention_ms = _retention_ms(retention_hours, snapshot.delta.config)
    files = [
        {
            "path": name,
            "removed_at": _iso(at),
            "deletable_after": _iso(at + retention_ms),
        }
        for name, at in still
    ]
    hidden = snapshot.records - snapshot.rows
    return {
        "removed_files": files,
        "removed_bytes": sum(location.filesystem.get_file_info(location.path(f["path"])).size or 0 for f in files),
        "rows_in_deletion_vectors": hidden,
        "retention_hours": retention_ms / 3_600_000,
    }


def _iso(milliseconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(milliseconds / 1000))
