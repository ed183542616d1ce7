"""A tokenized Delta table's state: one version read once, with its codecs.

[`read_snapshot`][spark_mlt.storage.table.read_snapshot] is the single reader of a table's
properties and codecs: every other function here, and the writer, goes through it. A
[`TableSnapshot`][spark_mlt.storage.table.TableSnapshot] is spark-mlt's view of one version of the
jar-free Delta core's [`Snapshot`][spark_mlt.delta.snapshot.Snapshot] (``snapshot.delta``): the
codecs its properties store, its Arrow schema, its history with spark-mlt's commit metadata. A
write passes it down, so a job opens the table once for its checks (exists? codecs? run already
committed? schema?).

A stored codec whose JSON is corrupt or whose fingerprint does not match is refused on read
([`CodecFormatError`][spark_mlt.errors.CodecFormatError]), never silently used.

A commit's metadata is its ``commitInfo`` action (`spark_mlt.delta.log.Commit`): spark-mlt's
``spark_mlt.*`` entries are the commitInfo's own where delta-rs committed, and inside its
``userMetadata`` (JSON) where delta-spark did; the commitInfo's own fields win over anything
decoded from ``userMetadata``, so a user's metadata cannot hide the protocol's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from spark_mlt.codec import MLTCodec
from spark_mlt.delta.fs import StorageOptions, locate, storage_options_of
from spark_mlt.delta.log import Commit, DeltaLog
from spark_mlt.delta.snapshot import Snapshot
from spark_mlt.delta.snapshot import read_snapshot as read_delta_snapshot
from spark_mlt.storage.catalog import is_table_name, resolve_location, table_location
from spark_mlt.storage.properties import AppTransaction, codecs_from_properties, run_transaction

__all__ = [
    "CREATE_MARKER",
    "WRITE_ID",
    "TableSnapshot",
    "read_codecs",
    "read_properties",
    "read_snapshot",
    "snapshot_of",
    "table_exists",
]

#: The commit metadata entry of the commit that creates a table (version 0, no data).
CREATE_MARKER = ("spark_mlt.operation", "create")
#: The commit metadata key of a write's own id (a commit's mark, whichever backend committed it).
WRITE_ID = "spark_mlt.write_id"


@dataclass(frozen=True)
class TableSnapshot:
    """One version of a tokenized Delta table, with its codecs.

    Attributes:
        path: the table's location.
        delta: the version, as the Delta core read it (protocol, metadata, files, history).
        codecs: the codecs stored in the properties, by id column (validated).
        storage_options: the store's settings the table was read with (secrets hidden in the
            repr).
    """

    path: str
    delta: Snapshot = field(repr=False, compare=False)
    codecs: dict[str, MLTCodec]
    storage_options: StorageOptions = field(default_factory=StorageOptions, compare=False)

    @property
    def version(self) -> int:
        """The version read."""
        return self.delta.version

    @property
    def properties(self) -> dict[str, str]:
        """The table properties (metadata configuration)."""
        return dict(self.delta.metadata.configuration)

    @property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema."""
        return self.delta.arrow_schema

    @property
    def partition_columns(self) -> list[str]:
        """The table's partition columns."""
        return list(self.delta.metadata.partition_columns)

    @property
    def table_id(self) -> str:
        """The table's unique id (its ``metaData`` id)."""
        return self.delta.metadata.id

    @property
    def records(self) -> int:
        """The rows in this version's files (their ``numRecords``; files without statistics count
        0), deleted rows included."""
        return self.delta.records

    @property
    def files(self) -> int:
        """How many data files this version holds."""
        return len(self.delta.files)

    @property
    def rows(self) -> int:
        """The rows of this version: ``records`` less the rows its deletion vectors delete."""
        return self.delta.rows

    @cached_property
    def created_empty(self) -> bool:
        """Whether this is the empty version 0 that a spark-mlt write created before its data
        commit (which never landed: the write failed in between). A write with ``mode="error"``
        takes such a table over instead of refusing it as existing."""
        if self.version != 0 or self.files:
            return False
        commits = self.commits(1)
        return bool(commits and commits[0].metadata.get(CREATE_MARKER[0]) == CREATE_MARKER[1])

    def commits(self, limit: int | None = None) -> list[Commit]:
        """The commits up to this version, newest first (the last ``limit`` of them), as far as
        the log still holds them (see `spark_mlt.delta.log.Commit`)."""
        return self.delta.commits(limit)

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The commits up to this version, newest first (the last ``limit`` of them): each one's
        ``commitInfo`` with its ``version``, its ``timestamp`` (milliseconds since the epoch) and
        spark-mlt's ``spark_mlt.*`` commit metadata, whichever backend committed it.

        Example::

            [entry["version"] for entry in read_snapshot(path).history(3)]
        """
        return [commit.entries() for commit in self.commits(limit)]

    def commit_of(self, write_id: str, *, after: int) -> dict[str, Any] | None:
        """The commit (its ``commitInfo``, with ``version``) that carries spark-mlt's ``write_id``
        among this version's commits after version ``after``, or None: every one of them is
        read, however many other writers committed meanwhile.

        Example::

            read_snapshot(path).commit_of(write_id, after=planned_version)
        """
        newer = self.version - after
        if newer <= 0:
            return None
        return next((c.entries() for c in self.commits(newer) if c.metadata.get(WRITE_ID) == write_id), None)

    def transaction_version(self, app_id: str) -> int | None:
        """The latest version the writer ``app_id`` committed (its ``txn``), None when it never did."""
        return self.delta.transaction_version(app_id)

    def holds(self, transaction: AppTransaction) -> bool:
        """Whether this version holds ``transaction`` (that version of its writer, or a later one)."""
        return transaction.recorded_in(self.transaction_version(transaction.app_id))

    def has_run(self, run_id: str) -> bool:
        """Whether this version holds a commit of ``run_id`` (see ``write_delta``'s ``run_id``)."""
        return self.holds(run_transaction(run_id))


def snapshot_of(delta: Snapshot, location: str, storage_options: Mapping[str, str] | None = None) -> TableSnapshot:
    """spark-mlt's view of a version the Delta core read (its codecs checked).

    Raises:
        CodecFormatError: a stored codec is corrupt or tampered with.
    """
    return TableSnapshot(
        path=location,
        delta=delta,
        codecs=codecs_from_properties(delta.metadata.configuration, location=location),
        storage_options=storage_options_of(storage_options),
    )


def read_snapshot(
    path: str | os.PathLike[str], *, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> TableSnapshot:
    """A table's version, properties, codecs, schema, partitioning and rows, read once.

    ``path`` is a plain path, a URI or a catalog table's name (resolved through the active
    session's catalog); the snapshot's ``path`` is the table's location. ``storage_options``
    configure its store (see [`StorageOptions`][spark_mlt.delta.fs.StorageOptions]); the snapshot
    keeps them for the writes and reads that use it.

    Raises:
        MissingTableError: there is no Delta table at ``path`` (or no such version).
        CodecFormatError: a stored codec is corrupt or tampered with.
        StorageError: the store refused the request.

    Example::

        snapshot = read_snapshot("/data/ratings_mlt")
        snapshot.codecs["userId"], snapshot.version
    """
    location = resolve_location(path)  # a snapshot holds the location, also of a named table
    delta = read_delta_snapshot(locate(location, storage_options), version)
    return snapshot_of(delta, location, storage_options)


def read_properties(
    path: str | os.PathLike[str], *, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A Delta table's properties (its metadata configuration), codecs unchecked: this is how
    to look at a table whose stored codec [`read_snapshot`][spark_mlt.storage.table.read_snapshot] refuses.

    Raises:
        MissingTableError: there is no Delta table at ``path``.
    """
    location = locate(resolve_location(path), storage_options)
    return dict(read_delta_snapshot(location, version).metadata.configuration)


def read_codecs(
    path: str | os.PathLike[str], *, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> dict[str, MLTCodec]:
    """The codecs stored in a Delta table's properties, by id column.

    Raises:
        CodecFormatError: a stored codec is corrupt or tampered with (its fingerprint).
        MissingTableError: there is no Delta table at ``path`` (a FileNotFoundError).

    Example::

        codecs = read_codecs("/data/ratings_mlt")
        codecs["userId"].decode(tokens)
    """
    return read_snapshot(path, version=version, storage_options=storage_options).codecs


def table_exists(path: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether a Delta table exists at ``path`` (a plain path, a URI, or a catalog table's name).

    Raises:
        StorageError: the store refused the request.
    """
    if is_table_name(path):
        return table_location(SparkSession.getActiveSession(), str(path)) is not None
    return DeltaLog(locate(path, storage_options)).exists()
