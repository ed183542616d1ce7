"""Which files of a table no version needs: its orphans, what a vacuum deletes, and what of its
deleted rows is still in storage, read from the log's replay (`spark_mlt.delta.snapshot`).

A table's files are the files under its folder outside hidden folders and files (a name that
starts with ``_`` or ``.``: the log, ``_change_data``, Spark's ``_SUCCESS`` and ``.crc``
markers; but a partition column's folder, ``_p=0`` of a column ``_p``, as delta-spark's vacuum
takes it), deletion vector files left out: the jar-free path never lists or deletes one (a vector
file that no version needs any more stays until Delta's own ``VACUUM`` removes it).

* [`orphan_files`][spark_mlt.delta.vacuum.orphan_files]: the files no version the log holds
  references (its commits' and checkpoints' ``add``, ``remove`` and ``cdc`` actions): left by
  writes that died between writing their files and committing them, or files of versions whose
  log entries are gone.
* [`vacuum_files`][spark_mlt.delta.vacuum.vacuum_files]: what a vacuum with a retention period
  deletes: files the latest version does not hold, that no tombstone newer than the retention
  names (time travel to those versions keeps working) and that were written before it (a write
  in progress has files no version references yet).
* [`removed_files`][spark_mlt.delta.vacuum.removed_files]: the files the newest commits removed
  that are still in storage, with when each was removed.

Example::

    snapshot = read_snapshot(locate("/data/ratings_mlt"))
    vacuum_files(snapshot, retention_ms=7 * 24 * 3_600_000, now_ms=int(time.time() * 1000))
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from spark_mlt.delta.actions import AddCDCFile, AddFile, RemoveFile
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.fs import Location
from spark_mlt.delta.log import DeltaLog
from spark_mlt.delta.snapshot import Snapshot, read_snapshot
from spark_mlt.errors import MissingTableError, TableOptionError

__all__ = ["check_short_retention", "orphan_files", "removed_files", "retention_ms", "table_files", "vacuum_files"]

_DELETION_VECTOR = re.compile(r"deletion_vector_[0-9a-fA-F-]+\.bin")


def _hidden(relative: str, partition_folders: tuple[str, ...]) -> bool:
    """Whether a path is hidden: a part of it starts with ``_`` or ``.``, and is no folder of a
    partition column (``_p=0`` of a column ``_p``: delta-spark's ``isHiddenDirectory``)."""
    *folders, name = relative.split("/")
    return name.startswith(("_", ".")) or any(
        folder.startswith(("_", ".")) and not folder.startswith(partition_folders) for folder in folders
    )


def table_files(location: Location, partition_columns: Iterable[str] = ()) -> dict[str, int]:
    """The table's files (see the module's notes) by path relative to the table, each with its
    modification time in milliseconds since the epoch; ``partition_columns``: the physical names
    of the table's partition columns, whose folders are data whatever their names start with."""
    folders = tuple(f"{column}=" for column in partition_columns)
    found = {}
    for info in location.files():
        relative = location.relative(info.path)
        name = relative.rsplit("/", 1)[-1]
        if _hidden(relative, folders) or _DELETION_VECTOR.fullmatch(name):
            continue
        found[relative] = 0 if info.mtime_ns is None else int(info.mtime_ns // 1_000_000)
    return found


def _referenced(location: Location) -> set[str]:
    """The paths every version the log holds references: the actions of its commits and of its
    checkpoints (which hold the state of versions whose commits are gone).

    Raises:
        MissingTableError: there is no table at ``location``.
    """
    log = DeltaLog(location)
    listing = log.listing()
    if listing.latest is None:
        raise MissingTableError(f"no Delta table at {location.uri}", parameter="path")
    paths: set[str] = set()

    def note(actions: Iterable[object]) -> None:
        for action in actions:
            if isinstance(action, AddFile | RemoveFile | AddCDCFile):
                paths.add(action.path)

    for checkpoints in listing.checkpoints.values():
        for checkpoint in checkpoints:
            note(log.checkpoint_actions(checkpoint))
    for file in listing.commits.values():
        note(log.commit_actions(file))
    return paths


def orphan_files(location: Location) -> list[str]:
    """The table's files that no version of its log references, sorted (relative to the table).

    Example::

        orphan_files(locate("/data/ratings_mlt"))  # ['mlt-20261122T031200-1a2b3c4d5e6f/part-00000-....parquet']
    """
    referenced = _referenced(location)
    partitions = _partition_names(read_snapshot(location))
    return sorted(path for path in table_files(location, partitions) if path not in referenced)


def _partition_names(snapshot: Snapshot) -> list[str]:
    """The physical names of ``snapshot``'s partition columns (their folders' names)."""
    layout = snapshot.layout
    return [layout.physical_names.get(column, column) for column in layout.partition_columns]


def vacuum_files(snapshot: Snapshot, *, retention_ms: int, now_ms: int) -> list[str]:
    """The files a vacuum of ``snapshot`` (the latest version) with a retention of
    ``retention_ms`` deletes at ``now_ms`` (see the module's notes), sorted.

    Example::

        vacuum_files(snapshot, retention_ms=0, now_ms=int(time.time() * 1000))
    """
    cutoff = now_ms - retention_ms
    held = set(snapshot.files)
    recent = {
        remove.path
        for remove in snapshot.tombstones.values()
        if remove.deletion_timestamp is None or remove.deletion_timestamp > cutoff
    }
    return sorted(
        path
        for path, modified in table_files(snapshot.location, _partition_names(snapshot)).items()
        if path not in held and path not in recent and modified <= cutoff
    )


def removed_files(snapshot: Snapshot, *, history: int) -> dict[str, int]:
    """The files the last ``history`` commits up to ``snapshot`` removed that the version no
    longer holds and storage still has, each with when it was removed (its ``remove`` action's
    ``deletionTimestamp``, else its commit's timestamp)."""
    removed: dict[str, int] = {}
    for commit in snapshot.commits(history):
        for action in commit.actions:
            if isinstance(action, RemoveFile):
                removed.setdefault(action.path, action.deletion_timestamp or commit.timestamp)
    held = set(snapshot.files)
    location = snapshot.location
    return {
        path: at
        for path, at in sorted(removed.items())
        if path not in held and "://" not in path and not path.startswith("/") and location.exists(path)
    }


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


def retention_ms(retention_hours: float | None, config: TableConfig) -> int:
    """``retention_hours`` in milliseconds, or the table's deleted-file retention when None."""
    if retention_hours is None:
        return config.deleted_file_retention_ms
    return round(retention_hours * 3_600_000)
