"""The actions of a Delta log, typed (the protocol's "Actions").

Each line of a commit file, and each row of a checkpoint, is one action: a JSON object with one
key naming its kind. [`parse_action`][spark_mlt.delta.actions.parse_action] turns it into one of
the frozen dataclasses here; an action of a kind this package does not know is ignored, as the
protocol's "Protocol Evolution" asks of readers (a kind that matters is announced by a table
feature, which the protocol gate refuses first: `spark_mlt.delta.features`).

Paths: the log holds file paths as URIs (percent-encoded, RFC 2396). ``path`` here is the
decoded path (relative to the table, or absolute for files outside it, as a shallow clone
writes), the form every reader and the filesystem use; a logical file's key is its decoded path
and its deletion vector's unique id, as the protocol's "Action Reconciliation" defines it.

Example::

    action = parse_action({"add": {"path": "a%20b.parquet", "partitionValues": {}, ...}})
    action.path  # "a b.parquet"
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from spark_mlt.delta.read.deletion_vectors import DeletionVector
from spark_mlt.errors import TableError

__all__ = [
    "Action",
    "AddCDCFile",
    "AddFile",
    "CheckpointMetadata",
    "CommitInfo",
    "DomainMetadata",
    "FileKey",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "Sidecar",
    "Txn",
    "parse_action",
]

#: A logical file's key: its decoded path and its deletion vector's unique id (None: no vector).
FileKey = tuple[str, str | None]


def _strings(mapping: Any) -> dict[str, str | None]:
    """A JSON object (or a checkpoint's map, as a list of pairs) of strings, nulls kept."""
    if not mapping:
        return {}
    items = mapping.items() if isinstance(mapping, (dict, Mapping)) else mapping
    return {str(key): None if value is None else str(value) for key, value in items}


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _vector(value: Any) -> DeletionVector | None:
    return None if value is None else DeletionVector.from_json(value)


@dataclass(frozen=True, slots=True)
class Protocol:
    """The ``protocol`` action: the versions (and features) a reader and a writer must support.

    Attributes:
        min_reader_version: ``minReaderVersion``.
        min_writer_version: ``minWriterVersion``.
        reader_features: ``readerFeatures`` (reader version 3), else None.
        writer_features: ``writerFeatures`` (writer version 7), else None.
    """

    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Protocol:
        readers, writers = value.get("readerFeatures"), value.get("writerFeatures")
        return cls(
            int(value["minReaderVersion"]),
            int(value["minWriterVersion"]),
            None if readers is None else frozenset(str(name) for name in readers),
            None if writers is None else frozenset(str(name) for name in writers),
        )


#: The fields of a ``metaData`` action that the protocol requires and a reader cannot do without.
_REQUIRED_METADATA = (("id", "id"), ("schemaString", "schema_string"))


@dataclass(frozen=True, slots=True)
class Metadata:
    """The ``metaData`` action: the table's id, schema, partitioning and properties.

    The protocol requires ``id``, ``format``, ``schemaString``, ``partitionColumns`` and
    ``configuration`` of every ``metaData`` action, but only the one in force at a version
    matters: a later one replaces it whole. So an action is parsed whatever it lacks, and the
    replay refuses a version whose action in force lacks ``id`` or ``schemaString``
    (`spark_mlt.delta.snapshot`); a superseded one may (Delta Live Tables' first version has no
    ``schemaString``; delta-spark and delta-rs read such tables). Where delta-spark is lenient,
    so is this: no ``partitionColumns`` is none, no ``configuration`` is no property, ``format``
    is not read.

    Attributes:
        id: the table's unique id (``""`` when the action has none: see ``missing``).
        schema_string: the schema as Delta's JSON document (see `spark_mlt.delta.schema`;
            ``""`` when the action has none).
        partition_columns: the partition columns' (logical) names.
        configuration: the table properties (a property whose value is null is left out).
        name: the table's name, if any.
        description: the table's description, if any.
        created_time: when the table was created (milliseconds since the epoch), if known.
        missing: the required fields (``id``, ``schemaString``) the action lacks.
    """

    id: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    name: str | None = None
    description: str | None = None
    created_time: int | None = None
    missing: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Metadata:
        configuration = {key: text for key, text in _strings(value.get("configuration")).items() if text is not None}
        given = {field: value.get(key) for key, field in _REQUIRED_METADATA}
        return cls(
            id="" if given["id"] is None else str(given["id"]),
            schema_string="" if given["schema_string"] is None else str(given["schema_string"]),
            partition_columns=tuple(str(name) for name in value.get("partitionColumns") or ()),
            configuration=configuration,
            name=value.get("name"),
            description=value.get("description"),
            created_time=_optional_int(value.get("createdTime")),
            missing=tuple(key for key, field in _REQUIRED_METADATA if given[field] is None),
        )

    def schema(self) -> dict[str, Any]:
        """The schema document (parsed ``schemaString``).

        Raises:
            TableError: the action has no ``schemaString``.
        """
        if "schemaString" in self.missing:
            raise TableError("a metaData action of the Delta table has no schemaString; it is no valid Delta table")
        return dict(json.loads(self.schema_string))


@dataclass(frozen=True, slots=True)
class AddFile:
    """The ``add`` action: a logical file of the table (a data file, less its deletion vector's rows).

    Attributes:
        path: the data file's path, decoded (relative to the table, or absolute).
        partition_values: the file's partition values as the log serialises them (strings, None
            for null), keyed by the partition columns' physical names.
        size: the file's size in bytes.
        modification_time: when the file was written (milliseconds since the epoch).
        data_change: False when the action only rearranges existing rows.
        stats: the file's statistics (JSON), if recorded.
        tags: the file's tags, if any.
        deletion_vector: the rows of the file that are deleted, if any.
        base_row_id: row tracking's first row id, if assigned.
        default_row_commit_version: row tracking's commit version, if assigned.
    """

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    modification_time: int
    data_change: bool
    stats: str | None = None
    tags: Mapping[str, str | None] | None = None
    deletion_vector: DeletionVector | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    @property
    def key(self) -> FileKey:
        """The logical file's key: its path and its deletion vector's unique id."""
        return self.path, None if self.deletion_vector is None else self.deletion_vector.unique_id

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> AddFile:
        return cls(
            path=unquote(str(value["path"])),
            partition_values=_strings(value.get("partitionValues")),
            size=int(value["size"]),
            modification_time=int(value.get("modificationTime") or 0),
            data_change=bool(value.get("dataChange", True)),
            stats=value.get("stats"),
            tags=None if value.get("tags") is None else _strings(value["tags"]),
            deletion_vector=_vector(value.get("deletionVector")),
            base_row_id=_optional_int(value.get("baseRowId")),
            default_row_commit_version=_optional_int(value.get("defaultRowCommitVersion")),
        )


@dataclass(frozen=True, slots=True)
class RemoveFile:
    """The ``remove`` action: a logical file taken out of the table (a tombstone until vacuum).

    Attributes:
        path: the data file's path, decoded.
        deletion_timestamp: when it was removed (milliseconds since the epoch), if recorded.
        data_change: False when its rows are in files the same commit adds.
        partition_values: the file's partition values, if recorded.
        size: the file's size, if recorded.
        stats: the file's statistics, if recorded (commit files only).
        deletion_vector: the deletion vector of the logical file removed, if any.
    """

    path: str
    deletion_timestamp: int | None
    data_change: bool
    partition_values: Mapping[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    deletion_vector: DeletionVector | None = None

    @property
    def key(self) -> FileKey:
        """The logical file's key: its path and its deletion vector's unique id."""
        return self.path, None if self.deletion_vector is None else self.deletion_vector.unique_id

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RemoveFile:
        partitions = value.get("partitionValues")
        return cls(
            path=unquote(str(value["path"])),
            deletion_timestamp=_optional_int(value.get("deletionTimestamp")),
            data_change=bool(value.get("dataChange", True)),
            partition_values=None if partitions is None else _strings(partitions),
            size=_optional_int(value.get("size")),
            stats=value.get("stats"),
            deletion_vector=_vector(value.get("deletionVector")),
        )


@dataclass(frozen=True, slots=True)
class AddCDCFile:
    """The ``cdc`` action: a change data file of the commit (rows with ``_change_type``).

    Attributes:
        path: the change data file's path, decoded.
        partition_values: its partition values, as for an ``add``.
        size: its size in bytes.
    """

    path: str
    partition_values: Mapping[str, str | None]
    size: int

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> AddCDCFile:
        return cls(unquote(str(value["path"])), _strings(value.get("partitionValues")), int(value.get("size") or 0))


@dataclass(frozen=True, slots=True)
class Txn:
    """The ``txn`` action: how far an application's writes have come (its idempotency key).

    Attributes:
        app_id: the application's id.
        version: its version (the latest wins).
        last_updated: when it was written (milliseconds since the epoch), if recorded.
    """

    app_id: str
    version: int
    last_updated: int | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Txn:
        return cls(str(value["appId"]), int(value["version"]), _optional_int(value.get("lastUpdated")))


@dataclass(frozen=True, slots=True)
class DomainMetadata:
    """The ``domainMetadata`` action: a named configuration (a tombstone when ``removed``)."""

    domain: str
    configuration: str
    removed: bool = False

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> DomainMetadata:
        return cls(str(value["domain"]), str(value.get("configuration") or ""), bool(value.get("removed", False)))


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """The ``commitInfo`` action: the commit's provenance, as its writer wrote it (free-form)."""

    values: Mapping[str, Any]

    @property
    def in_commit_timestamp(self) -> int | None:
        """The commit's ``inCommitTimestamp`` (milliseconds since the epoch), if written."""
        value = self.values.get("inCommitTimestamp")
        return None if value is None else int(value)

    @property
    def operation(self) -> str | None:
        """What the commit did (``WRITE``, ``DELETE``, ...), as its writer named it."""
        value = self.values.get("operation")
        return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Sidecar:
    """The ``sidecar`` action of a v2 checkpoint: a file of its ``add`` and ``remove`` actions."""

    path: str
    size_in_bytes: int

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Sidecar:
        return cls(unquote(str(value["path"])), int(value.get("sizeInBytes") or 0))


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    """The ``checkpointMetadata`` action of a v2 checkpoint: the version it holds."""

    version: int

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> CheckpointMetadata:
        return cls(int(value["version"]))


Action = (
    Protocol
    | Metadata
    | AddFile
    | RemoveFile
    | AddCDCFile
    | Txn
    | DomainMetadata
    | CommitInfo
    | Sidecar
    | CheckpointMetadata
)

_KINDS: dict[str, Any] = {
    "protocol": Protocol.from_json,
    "metaData": Metadata.from_json,
    "add": AddFile.from_json,
    "remove": RemoveFile.from_json,
    "cdc": AddCDCFile.from_json,
    "txn": Txn.from_json,
    "domainMetadata": DomainMetadata.from_json,
    "commitInfo": lambda value: CommitInfo(dict(value)),
    "sidecar": Sidecar.from_json,
    "checkpointMetadata": CheckpointMetadata.from_json,
}


def parse_action(document: Mapping[str, Any]) -> Action | None:
    """The action of one log line (a JSON object with one key naming its kind), or None for a
    kind this package does not read (ignored, as the protocol asks).

    Raises:
        KeyError, TypeError, ValueError: a required field is missing or of the wrong type (the
            caller names the file; see `spark_mlt.delta.log`).

    Example::

        parse_action({"txn": {"appId": "spark-mlt:2026-11-26", "version": 1}})  # Txn(...)
    """
    for kind, value in document.items():
        parse = _KINDS.get(kind)
        if parse is not None and value is not None:
            return parse(value)  # type: ignore[no-any-return]
    return None
