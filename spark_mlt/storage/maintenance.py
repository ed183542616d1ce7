"""Cleaning up after writes: files no version references, and the folders they leave.

A write that dies between Spark's job commit and its Delta commit (a killed driver) leaves an
uncommitted staging folder; a write in progress has one too, until it commits, and the two
cannot be told apart from the files alone. So :func:`orphan_files` only lists, and
:func:`vacuum` deletes only files older than a retention period (7 days by default, Delta's
own), which also keeps time travel to recent versions working. Both go through delta-rs'
vacuum (``full=True`` also finds files the log never mentioned), and the empty staging folders
left behind are removed through the table's pyarrow filesystem, so both work on any location
(see :mod:`spark_mlt.storage.fs`).
"""

from __future__ import annotations

import os
import time

from spark_mlt.errors import MLTError
from spark_mlt.storage._delta_rs import STAGING_PREFIX
from spark_mlt.storage.fs import Location, locate
from spark_mlt.storage.table import open_table

__all__ = ["orphan_files", "vacuum"]


def orphan_files(path: str | os.PathLike[str]) -> list[str]:
    """Data files under the table that no version of its log references.

    They are left by writes that died between writing their files and committing them (a
    write in progress has such files too, until it commits). Paths are relative to the table.

    Raises:
        MissingTableError: there is no Delta table at ``path``.

    Example::

        orphan_files("/data/ratings_mlt")   # ['mlt-20261122T031200-1a2b3c4d5e6f/part-00000-....parquet']
    """
    table = open_table(path)
    versions = sorted({int(entry["version"]) for entry in table.history() if "version" in entry})
    return sorted(
        table.vacuum(
            retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True, keep_versions=versions
        )
    )


def vacuum(path: str | os.PathLike[str], *, retention_hours: int = 168, dry_run: bool = True) -> list[str]:
    """Files to delete (or, with ``dry_run=False``, deleted) older than ``retention_hours``:
    orphans of failed writes and files no version within the retention period needs.

    The default retention (7 days, Delta's own) keeps time travel to recent versions and
    never touches the files of a write still in progress. Empty staging folders left behind
    are removed too.

    Raises:
        MissingTableError: there is no Delta table at ``path``.

    Example::

        vacuum("/data/ratings_mlt", retention_hours=24, dry_run=False)
    """
    if retention_hours < 0:
        raise MLTError(f"retention_hours must be >= 0, got {retention_hours}", parameter="retention_hours")
    location = locate(path)
    files = open_table(location.uri).vacuum(
        retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=False, full=True
    )
    if not dry_run:
        _remove_empty_staging(location, cutoff=time.time() - retention_hours * 3600)
    return sorted(files)


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
