"""Reading a tokenized Delta table's state: one ``DeltaTable`` handle, one snapshot.

[`read_snapshot`][spark_mlt.storage.table.read_snapshot] is the single reader of a table's
properties and codecs: every other function here, and the writer, goes through it. A snapshot keeps
the ``DeltaTable`` handle it was read with, so a write opens the table once for its checks (exists?
codecs? run already committed? schema?) and commits through the same handle.

A stored codec whose JSON is corrupt or whose fingerprint does not match is refused on read
([`CodecFormatError`][spark_mlt.errors.CodecFormatError]), never silently used.

A commit's metadata has one reader, `Commit`, as the Delta
protocol defines it: the ``commitInfo`` action inside the commit file
``_delta_log/<version>.json``, so a snapshot's history is the commits up to its version, each with
its own version number (delta-rs' ``history()`` lists the newest commits in storage, numbered down
from the handle's version, which is wrong for a snapshot of an older version). A commit's
timestamp is its ``inCommitTimestamp`` where the table has in-commit timestamps (from their
enablement version on), else the commit file's modification time, as Delta's own history says.
spark-mlt's ``spark_mlt.*`` entries are the commitInfo's own where delta-rs committed, and inside
its ``userMetadata`` (JSON) where delta-spark did; the commitInfo's own fields win over anything
decoded from ``userMetadata``, so a user's metadata cannot hide the protocol's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from pyspark.sql import SparkSession

from spark_mlt.codec import MLTCodec
from spark_mlt.errors import MissingTableError, StorageError, TableFeatureError
from spark_mlt.storage.catalog import is_table_name, resolve_location, table_location
from spark_mlt.storage.deletions import deleted_row_count
from spark_mlt.storage.features import FEATURES
from spark_mlt.storage.fs import Location, StorageOptions, locate, redact, storage_options_of
from spark_mlt.storage.properties import AppTransaction, codecs_from_properties, run_transaction

__all__ = [
    "Commit",
    "TableSnapshot",
    "open_table",
    "read_codecs",
    "read_properties",
    "read_snapshot",
    "snapshot_of",
    "table_exists",
]


@dataclass(frozen=True)
class TableSnapshot:
    """One version of a tokenized Delta table, read through one ``DeltaTable`` handle.

    Attributes:
        path: the table's location.
        version: the version read.
        properties: the table properties (metadata configuration).
        codecs: the codecs stored in the properties, by id column (validated).
        schema: the table's Arrow schema.
        partition_columns: the table's partition columns.
        records: the rows in this version's files (the sum of their ``numRecords``
            statistics; files without statistics count 0), deleted rows included.
        files: the version's data files.
        table: the delta-rs handle the snapshot was read with.
        storage_options: the store's settings the handle was opened with (secrets hidden in
            the repr).
    """

    path: str
    version: int
    properties: dict[str, str]
    codecs: dict[str, MLTCodec]
    schema: pa.Schema
    partition_columns: list[str]
    records: int
    files: int
    table: DeltaTable = field(repr=False, compare=False)
    storage_options: StorageOptions = field(default_factory=StorageOptions, compare=False)

    @cached_property
    def rows(self) -> int:
        """The rows of this version: ``records`` less the rows its deletion vectors delete
        (read from the vectors, once, when first asked)."""
        if "deletionVectors" not in (self.table.protocol().reader_features or ()):
            return self.records
        return self.records - deleted_row_count(self.table, self.path)

    @property
    def created_empty(self) -> bool:
        """Whether this is the empty version 0 that a spark-mlt write created before its data
        commit (which never landed: the write failed in between). A write with ``mode="error"``
        takes such a table over instead of refusing it as existing."""
        if self.version != 0 or self.files:
            return False
        return bool(self.commits(1)[0].metadata.get(CREATE_MARKER[0]) == CREATE_MARKER[1])

    def commits(self, limit: int | None = None) -> list[Commit]:
        """The commits up to this version, newest first (the last ``limit`` of them), as far as
        the log still holds them (see `Commit`)."""
        oldest = 0 if limit is None else max(0, self.version - limit + 1)
        location = locate(self.path, self.storage_options)
        in_commit = _in_commit_timestamps_from(self.properties)
        with ThreadPoolExecutor(max_workers=8) as pool:
            found = pool.map(lambda v: Commit.read(location, v, in_commit), range(self.version, oldest - 1, -1))
            commits = []
            for commit in found:
                if commit is None:  # older commits were cleaned up from the log
                    break
                commits.append(commit)
        return commits

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The commits up to this version, newest first (the last ``limit`` of them): each one's
        ``commitInfo`` with its ``version``, its ``timestamp`` (milliseconds since the epoch, see
        `Commit`) and spark-mlt's ``spark_mlt.*`` commit
        metadata, whichever backend committed it.

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

    def holds(self, transaction: AppTransaction) -> bool:
        """Whether this version holds ``transaction`` (that version of its writer, or a later one)."""
        return transaction.recorded_in(self.table.transaction_version(transaction.app_id))

    def has_run(self, run_id: str) -> bool:
        """Whether this version holds a commit of ``run_id`` (see ``write_delta``'s ``run_id``)."""
        return self.holds(run_transaction(run_id))


#: The commit metadata entry of the commit that creates a table (version 0, no data).
CREATE_MARKER = ("spark_mlt.operation", "create")
#: The commit metadata key of a write's own id (a commit's mark, whichever backend committed it).
WRITE_ID = "spark_mlt.write_id"


@dataclass(frozen=True)
class Commit:
    """One commit of a Delta table, as its commit file records it.

    Attributes:
        version: the commit's version.
        timestamp: when it was committed, in milliseconds since the epoch: its
            ``inCommitTimestamp`` where the table has in-commit timestamps, else the commit
            file's modification time (the Delta protocol's commit timestamp either way).
        info: its ``commitInfo`` action, as written (empty if it has none).
    """

    version: int
    timestamp: int
    info: Mapping[str, Any]

    @property
    def operation(self) -> str | None:
        """What the commit did (``WRITE``, ``CREATE TABLE``, ...), as its writer named it."""
        operation = self.info.get("operation")
        return None if operation is None else str(operation)

    @property
    def user_metadata(self) -> dict[str, Any]:
        """The commit's ``userMetadata`` when it is a JSON object (delta-spark writes spark-mlt's
        metadata there), else nothing."""
        user = self.info.get("userMetadata")
        if isinstance(user, str) and user.startswith("{"):
            with contextlib.suppress(ValueError):
                loaded = json.loads(user)
                return dict(loaded) if isinstance(loaded, dict) else {}
        return {}

    @property
    def metadata(self) -> dict[str, Any]:
        """spark-mlt's ``spark_mlt.*`` metadata of the commit, whichever backend committed it."""
        return {key: value for key, value in self.entries().items() if key.startswith("spark_mlt.")}

    def entries(self) -> dict[str, Any]:
        """The commit as one JSON-ready dict: its ``userMetadata`` object, then its ``commitInfo``
        (which wins), then its ``version`` and ``timestamp`` (which win over both)."""
        return {**self.user_metadata, **self.info, "version": self.version, "timestamp": self.timestamp}

    @classmethod
    def read(cls, location: Location, version: int, in_commit_from: int | None) -> Commit | None:
        """The commit ``version`` of the table at ``location``, or None when the log no longer
        holds it; ``in_commit_from`` is the first version with in-commit timestamps (None: the
        table has none)."""
        path = location.path(f"_delta_log/{version:020d}.json")
        try:
            modified = location.filesystem.get_file_info(path)
            with location.filesystem.open_input_stream(path) as stream:
                text = stream.read().decode()
        except FileNotFoundError:
            return None
        if modified.mtime is None:  # pragma: no cover - every store spark-mlt reads gives one
            raise StorageError(f"no modification time for {path}")
        info: dict[str, Any] = next(
            (
                action["commitInfo"]
                for action in map(json.loads, filter(None, text.splitlines()))
                if "commitInfo" in action
            ),
            {},
        )
        timestamp = int(modified.mtime.timestamp() * 1000)
        if in_commit_from is not None and version >= in_commit_from and "inCommitTimestamp" in info:
            timestamp = int(info["inCommitTimestamp"])
        return cls(version, timestamp, dict(info))


def _in_commit_timestamps_from(properties: Mapping[str, str]) -> int | None:
    """The first version with in-commit timestamps (``delta.enableInCommitTimestamps``), or None."""
    if properties.get("delta.enableInCommitTimestamps", "false").lower() != "true":
        return None
    return int(properties.get("delta.inCommitTimestampEnablementVersion", "0"))


def open_table(
    path: str | os.PathLike[str], *, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> DeltaTable:
    """A delta-rs handle on the table at ``path`` (a plain path, a URI, or a catalog table's
    name: its location from the active session's catalog, see `catalog`).

    Raises:
        MissingTableError: there is no Delta table at ``path``.
        TableError: ``path`` is a table name and no session with Delta's catalog is active.
        StorageError: the store refused the request (the message holds no secret).
        TableFeatureError: delta-rs refuses to open the table: its commits are owned by a
            catalog (the log in storage alone may be stale).
    """
    location = resolve_location(path)
    options = storage_options_of(storage_options)
    try:
        return DeltaTable(location, version=version, storage_options=dict(options) or None)
    except DeltaTableNotFoundError:
        raise MissingTableError(f"no Delta table at {location}", parameter="path") from None
    except (OSError, DeltaError) as error:
        reason = redact(str(error), options)
        refused = _refused_feature(reason)
        if refused is not None:
            known = FEATURES.get(refused)
            why = f"which delta-rs cannot open ({known.how if known else 'a feature spark-mlt does not know'})"
            forward = (
                known.forward if known else "use a session with Delta's jars (spark-mlt then goes through delta-spark)"
            )
            raise TableFeatureError(
                f"the Delta table at {location} uses the reader feature {refused!r}, {why}; {forward}",
                feature=refused,
            ) from None
        raise StorageError(f"cannot open the Delta table at {location}: {reason}") from None


def _refused_feature(reason: str) -> str | None:
    """The feature for which delta-rs (its kernel) refused to open a table, or None. Its
    errors carry no class of their own for this, so the two messages it gives are matched:
    an unknown reader feature, and a catalog-managed table."""
    if "catalog-managed" in reason:
        return "catalogManaged"
    match = re.search(r"Feature '([^']+)' is not supported", reason)
    return match[1] if match else None


def snapshot_of(table: DeltaTable, location: str, storage_options: Mapping[str, str] | None = None) -> TableSnapshot:
    """The snapshot of an open handle's current version (its metadata is already loaded)."""
    metadata = table.metadata()
    properties = _properties_of(table)
    records = pa.table(table.get_add_actions(flatten=True)).column("num_records")
    return TableSnapshot(
        path=location,
        version=table.version(),
        properties=properties,
        codecs=codecs_from_properties(properties, location=location),
        schema=pa.schema(table.schema().to_arrow()),
        partition_columns=list(metadata.partition_columns),
        records=int(pc.sum(records).as_py() or 0),
        files=len(records),
        table=table,
        storage_options=storage_options_of(storage_options),
    )


def _properties_of(table: DeltaTable) -> dict[str, str]:
    return {key: value for key, value in table.metadata().configuration.items() if value is not None}


def read_snapshot(
    path: str | os.PathLike[str], *, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> TableSnapshot:
    """A table's version, properties, codecs, schema, partitioning and rows, read once.

    ``path`` is a plain path, a URI or a catalog table's name (resolved through the active
    session's catalog); the snapshot's ``path`` is the table's location. ``storage_options``
    configure its store (see [`StorageOptions`][spark_mlt.storage.fs.StorageOptions]); the snapshot
    keeps them for the writes and reads that use it.

    Raises:
        MissingTableError: there is no Delta table at ``path``.
        CodecFormatError: a stored codec is corrupt or tampered with.
        StorageError: the store refused the request.

    Example::

        snapshot = read_snapshot("/data/ratings_mlt")
        snapshot.codecs["userId"], snapshot.version
    """
    location = resolve_location(path)  # a snapshot holds the location, also of a named table
    table = open_table(location, version=version, storage_options=storage_options)
    return snapshot_of(table, location, storage_options)


def read_properties(
    path: str | os.PathLike[str], *, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A Delta table's properties (its metadata configuration), codecs unchecked: this is how
    to look at a table whose stored codec [`read_snapshot`][spark_mlt.storage.table.read_snapshot] refuses.

    Raises:
        MissingTableError: there is no Delta table at ``path``.
    """
    return _properties_of(open_table(path, version=version, storage_options=storage_options))


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
    """Whether a Delta table exists at ``path`` (a plain path, a URI, or a catalog table's name)."""
    if is_table_name(path):
        return table_location(SparkSession.getActiveSession(), str(path)) is not None
    options = storage_options_of(storage_options)
    try:
        return bool(DeltaTable.is_deltatable(os.fspath(path), storage_options=dict(options) or None))
    except (OSError, DeltaError) as error:
        raise StorageError(f"cannot reach {os.fspath(path)}: {redact(str(error), options)}") from None
