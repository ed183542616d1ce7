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

from spark_mlt.delta.fs import Location, locate
from spark_mlt.delta.snapshot import read_snapshot as read_delta_snapshot
from spark_mlt.delta.vacuum import check_short_retention, removed_files, retention_ms
from spark_mlt.delta.vacuum import orphan_files as log_orphans
from spark_mlt.errors import MLTError
from spark_mlt.storage.backends import resolve_backend
from spark_mlt.storage.backends.staging import STAGING_PREFIX
from spark_mlt.storage.catalog import resolve_location
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
    check_retention(retention_hours)
    location = locate(resolve_location(path, spark=spark), storage_options)
    vacuumed = resolve_backend(spark).vacuum(
        spark, location, retention_hours=retention_hours, dry_run=dry_run, allow_short_retention=allow_short_retention
    )
    if not dry_run:
        _remove_empty_staging(location, cutoff=time.time() - vacuumed.retention_ms / 1000)
    return sorted(vacuumed.files)


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
    check_retention(retention_hours)
    config = read_delta_snapshot(locate(resolve_location(path), storage_options)).config
    kept = config.deleted_file_retention_ms
    return kept / 3_600_000 if round(retention_hours * 3_600_000) < kept else None


def check_retention(retention_hours: float | None) -> None:
    """Refuses a retention that is no number of hours >= 0 (None: the table's own), naming
    ``retention_hours``: the one check a vacuum and the commands' options make."""
    hours = retention_hours
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, int | float) or not hours >= 0):
        raise MLTError(
            f"retention_hours must be a number of hours >= 0 (or None: the table's "
            f"delta.deletedFileRetentionDuration), got {retention_hours!r}",
            parameter="retention_hours",
        )


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
    check_retention(retention_hours)
    location = locate(resolve_location(path), storage_options)
    snapshot = read_snapshot(location.uri, storage_options=storage_options)
    still = removed_files(snapshot.delta, history=ERASURE_HISTORY).items()
    kept_ms = retention_ms(retention_hours, snapshot.delta.config)
    files = [
        {
            "path": name,
            "removed_at": _iso(at),
            "deletable_after": _iso(at + kept_ms),
        }
        for name, at in still
    ]
    hidden = snapshot.records - snapshot.rows
    return {
        "removed_files": files,
        "removed_bytes": sum(location.filesystem.get_file_info(location.path(f["path"])).size or 0 for f in files),
        "rows_in_deletion_vectors": hidden,
        "retention_hours": kept_ms / 3_600_000,
    }


def _iso(milliseconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(milliseconds / 1000))
