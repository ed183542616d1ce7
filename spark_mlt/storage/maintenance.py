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

Given a session with Delta's jars (``spark=``), [`vacuum`][spark_mlt.storage.maintenance.vacuum]
runs Delta's own ``VACUUM`` instead (it also deletes files the log never mentioned, outside hidden
folders); a retention under Delta's 7-day safety check is allowed for that one command, as it is
with delta-rs. Paths are returned relative to the table either way.
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
from spark_mlt.errors import MLTError
from spark_mlt.storage._delta_rs import STAGING_PREFIX
from spark_mlt.storage._delta_spark import path_target, session_conf
from spark_mlt.storage.catalog import local_uri, resolve_location, use_delta_spark
from spark_mlt.storage.table import read_snapshot

__all__ = ["orphan_files", "pending_erasures", "vacuum"]

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
    spark: SparkSession | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> list[str]:
    """Files to delete (or, with ``dry_run=False``, deleted) older than ``retention_hours``:
    orphans of failed writes and files no version within the retention period needs.

    The default retention, the table's ``delta.deletedFileRetentionDuration`` (7 days unless
    the table sets it, as with Delta's ``VACUUM``), keeps time travel to recent versions and
    never touches the files of a write still in progress. Empty staging folders left behind
    are removed too. With ``spark`` (a session with Delta's jars) Delta's ``VACUUM`` does the
    work; ``path`` may then be a catalog table's name.

    Raises:
        MissingTableError: there is no Delta table at ``path``.
        TableFeatureError: without Delta's jars, the table uses a feature that hides file
            references from the log in storage (its catalog owns its commits), or one
            spark-mlt does not know.

    Example::

        vacuum("/data/ratings_mlt", retention_hours=24, dry_run=False)
    """
    _check_retention(retention_hours)
    location = locate(resolve_location(path, spark=spark), storage_options)
    if spark is not None and use_delta_spark(spark):
        files, retention_ms = _delta_vacuum(spark, location, retention_hours=retention_hours, dry_run=dry_run)
    else:
        snapshot = read_delta_snapshot(location)
        check_writable(snapshot, operation="vacuum")
        retention_ms = _retention_ms(retention_hours, snapshot.config)
        files = vacuum_files(snapshot, retention_ms=retention_ms, now_ms=int(time.time() * 1000))
        if not dry_run:
            for name in files:
                location.remove_file(location.path(name))
    if not dry_run:
        _remove_empty_staging(location, cutoff=time.time() - retention_ms / 1000)
    return sorted(files)


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


def _delta_vacuum(
    spark: SparkSession, location: Location, *, retention_hours: float | None, dry_run: bool
) -> tuple[list[str], int]:
    """Delta's ``VACUUM``: its dry run lists the files (as URIs), the real one deletes them.
    Returns them with the retention it used, in milliseconds (without ``retention_hours``, the
    table's own, which ``VACUUM`` without ``RETAIN`` uses too)."""
    target = path_target(location)
    if retention_hours is None:  # the table's properties only then: VACUUM without RETAIN reads them itself
        shown = spark.sql(f"SHOW TBLPROPERTIES {target}").collect()
        retention_ms = TableConfig.of({str(row[0]): str(row[1]) for row in shown}).deleted_file_retention_ms
        retain = ""
    else:
        retention_ms = round(retention_hours * 3_600_000)
        retain = f" RETAIN {f'{retention_hours:f}'.rstrip('0').rstrip('.')} HOURS"
    with session_conf(spark, {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}):
        listed = spark.sql(f"VACUUM {target}{retain} DRY RUN").collect()
        if not dry_run:
            spark.sql(f"VACUUM {target}{retain}").collect()
    return [_relative_to(location, str(row[0])) for row in listed], retention_ms


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
