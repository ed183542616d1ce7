"""One version of a Delta table, rebuilt from its log (the protocol's "Action Reconciliation").

[`read_snapshot`][spark_mlt.delta.snapshot.read_snapshot] is the one log replay of the jar-free
path: it starts from the newest checkpoint at or before the version and applies the commits after
it, as the protocol reconciles actions:

* the latest ``protocol`` and ``metaData`` win, and only they are judged: a ``metaData`` action
  a later one replaced may lack fields the protocol requires (see
  [`Metadata`][spark_mlt.delta.actions.Metadata]), the one in force may not;
* a logical file is its path and its deletion vector's unique id: the newest ``add`` of a path is
  the table's file (an ``add`` with another vector replaces it), a ``remove`` takes out the file
  of its key and stays as a tombstone (for vacuum) until an ``add`` of that key comes back;
* the latest ``txn`` of an application wins; a ``domainMetadata`` with ``removed`` deletes its
  domain.

A snapshot holds the typed actions themselves (`spark_mlt.delta.actions`); its configuration
(`spark_mlt.delta.config`), column layout (`spark_mlt.delta.schema`) and resolved table features
(`spark_mlt.delta.features`) are derived from them once, when first asked. Snapshots are cached
per table version (a few per process): a version read again is not replayed again, and a newer
version of a table whose older version is cached replays only the commits in between.

Example::

    snapshot = read_snapshot(locate("/data/ratings_mlt"))
    snapshot.version, len(snapshot.files), snapshot.config.column_mapping
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from spark_mlt.delta.actions import (
    Action,
    AddFile,
    DomainMetadata,
    FileKey,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.fs import Location
from spark_mlt.delta.log import Commit, DeltaLog, LogListing, LogSegment, _Cache
from spark_mlt.errors import TableError

if TYPE_CHECKING:
    import pyarrow as pa

    from spark_mlt.delta.features import TableProtocol
    from spark_mlt.delta.schema import TableLayout

__all__ = ["Snapshot", "read_snapshot"]


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One version of a table (see the module's notes).

    Attributes:
        location: where the table is.
        version: the version.
        protocol: its ``protocol`` action.
        metadata: its ``metaData`` action.
        files: its logical files (``add`` actions) by path.
        tombstones: the files taken out and not yet vacuumed (``remove`` actions) by key.
        transactions: the applications' transactions (``txn`` actions) by application id.
        domains: its metadata domains by name.
        segment: the log files it was rebuilt from.
        timestamp: when its version was committed (milliseconds since the epoch; see
            `spark_mlt.delta.log`).
    """

    location: Location
    version: int
    protocol: Protocol
    metadata: Metadata
    files: Mapping[str, AddFile]
    tombstones: Mapping[FileKey, RemoveFile] = field(repr=False)
    transactions: Mapping[str, Txn] = field(repr=False)
    domains: Mapping[str, DomainMetadata] = field(repr=False)
    segment: LogSegment = field(repr=False)
    timestamp: int = 0

    @cached_property
    def config(self) -> TableConfig:
        """The table's properties, typed with Delta's defaults."""
        return TableConfig.of(self.metadata.configuration)

    @cached_property
    def layout(self) -> TableLayout:
        """The table's columns (logical and physical) and the rules a write keeps."""
        from spark_mlt.delta.schema import layout_of  # noqa: PLC0415 - pyspark types, asked for lazily

        return layout_of(self.metadata.schema(), self.metadata.configuration, self.metadata.partition_columns)

    @cached_property
    def features(self) -> TableProtocol:
        """The table features this version uses (listed, or implied by an older protocol)."""
        from spark_mlt.delta.features import protocol_of  # noqa: PLC0415 - features imports pyspark

        return protocol_of(self.protocol, self.metadata)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The table's schema in Arrow (timestamps as UTC instants, as Delta's ``timestamp``)."""
        import pyarrow as pa  # noqa: PLC0415
        from deltalake import Schema  # noqa: PLC0415 - a schema conversion, no log access

        return pa.schema(Schema.from_json(self.metadata.schema_string).to_arrow())

    @property
    def log(self) -> DeltaLog:
        """The table's log."""
        return DeltaLog(self.location)

    def transaction_version(self, app_id: str) -> int | None:
        """The latest version the application ``app_id`` committed, None when it never did."""
        txn = self.transactions.get(app_id)
        return None if txn is None else txn.version

    @cached_property
    def records(self) -> int:
        """The rows in this version's files (their ``numRecords``; a file without counts 0),
        deleted rows included."""
        return sum(num_records(add) or 0 for add in self.files.values())

    @property
    def deleted_rows(self) -> int:
        """The rows this version's deletion vectors delete (their cardinalities)."""
        return sum(add.deletion_vector.cardinality for add in self.files.values() if add.deletion_vector is not None)

    @property
    def rows(self) -> int:
        """The rows of this version: ``records`` less ``deleted_rows``."""
        return self.records - self.deleted_rows

    def commits(self, limit: int | None = None) -> list[Commit]:
        """The commits up to this version, newest first (the last ``limit`` of them), as far as
        the log still holds them."""
        oldest = 0 if limit is None else max(0, self.version - limit + 1)
        log = self.log
        listed = log.listing().commits  # one listing, not a request per commit
        files = [listed.get(version) for version in range(self.version, oldest - 1, -1)]
        found = []
        for commit in log.commits(files, in_commit_from=self.config.in_commit_timestamps_from):
            if commit is None:  # older commits were cleaned up from the log
                break
            found.append(commit)
        return found


_NUM_RECORDS = re.compile(r'\{"numRecords":(\d+)[,}]')


def num_records(add: AddFile) -> int | None:
    """The rows in a file (its ``numRecords`` statistic), None when not recorded."""
    if add.stats is None:
        return None
    found = _NUM_RECORDS.match(add.stats)  # the usual layout: numRecords first
    if found is not None:
        return int(found[1])
    try:
        value = json.loads(add.stats).get("numRecords")
    except (ValueError, AttributeError):
        return None
    return None if value is None else int(value)


class _Replay:
    """The reconciled state of a table while its actions are applied in commit order."""

    def __init__(self, base: Snapshot | None = None) -> None:
        self.protocol = None if base is None else base.protocol
        self.metadata = None if base is None else base.metadata
        self.files: dict[str, AddFile] = {} if base is None else dict(base.files)
        self.tombstones: dict[FileKey, RemoveFile] = {} if base is None else dict(base.tombstones)
        self.transactions: dict[str, Txn] = {} if base is None else dict(base.transactions)
        self.domains: dict[str, DomainMetadata] = {} if base is None else dict(base.domains)

    def apply(self, actions: Iterable[Action]) -> None:
        for action in actions:
            if isinstance(action, AddFile):
                self.files[action.path] = action
                self.tombstones.pop(action.key, None)
            elif isinstance(action, RemoveFile):
                present = self.files.get(action.path)
                if present is not None and present.key == action.key:
                    del self.files[action.path]
                self.tombstones[action.key] = action
            elif isinstance(action, Txn):
                self.transactions[action.app_id] = action
            elif isinstance(action, DomainMetadata):
                if action.removed:
                    self.domains.pop(action.domain, None)
                else:
                    self.domains[action.domain] = action
            elif isinstance(action, Protocol):
                self.protocol = action
            elif isinstance(action, Metadata):
                self.metadata = action

    def snapshot(self, location: Location, segment: LogSegment, timestamp: int) -> Snapshot:
        """The version the actions applied end in, judged as a whole: a ``protocol`` and a
        ``metaData`` action in force, the latter with its required fields (see
        [`Metadata`][spark_mlt.delta.actions.Metadata]: an earlier one it replaced may lack them)."""
        if self.protocol is None or self.metadata is None:
            missing = "protocol" if self.protocol is None else "metaData"
            raise TableError(
                f"the log of the Delta table at {location.uri} has no {missing} action up to version "
                f"{segment.version}; it is no valid Delta table"
            )
        if self.metadata.missing:
            raise TableError(
                f"the metaData action in force at version {segment.version} of the Delta table at {location.uri} "
                f"has no {' and no '.join(self.metadata.missing)}, which the protocol requires; it is no valid "
                "Delta table at that version"
            )
        return Snapshot(
            location=location,
            version=segment.version,
            protocol=self.protocol,
            metadata=self.metadata,
            files=self.files,
            tombstones=self.tombstones,
            transactions=self.transactions,
            domains=self.domains,
            segment=segment,
            timestamp=timestamp,
        )


#: Snapshots by table and version (see the module's notes).
_SNAPSHOTS = _Cache(16)


def read_snapshot(location: Location, version: int | None = None, *, listing: LogListing | None = None) -> Snapshot:
    """The snapshot of ``version`` (None: the latest) of the table at ``location``.

    Args:
        location: the table's location.
        version: the version to read; None for the latest.
        listing: the log's listing when the caller has one (else the log is listed).

    Raises:
        MissingTableError: there is no table, or the log no longer holds ``version``.
        TableError: the log is malformed (a file holds no JSON, a required field is missing).
        StorageError: the store refused a request.

    Example::

        read_snapshot(locate("/data/ratings_mlt"), 3).files
    """
    log = DeltaLog(location)
    listing = listing if listing is not None else log.listing()
    segment = listing.segment(version)
    key = (log.cache_key, segment.identity)
    cached: Snapshot | None = _SNAPSHOTS.get(key)
    if cached is not None:
        return cached if cached.location is location else dataclasses.replace(cached, location=location)
    base = _cached_base(log, listing, segment)
    replay = _Replay(base)
    if base is None:
        if segment.checkpoint is not None:
            replay.apply(log.checkpoint_actions(segment.checkpoint))
        commits = segment.commits
    else:
        commits = tuple(f for f in segment.commits if int(f.name[:20]) > base.version)
    for file in commits:
        replay.apply(log.commit_actions(file))
    timestamp = _timestamp(log, segment, replay)
    snapshot = replay.snapshot(location, segment, timestamp)
    _SNAPSHOTS.put(key, snapshot)
    return snapshot


def _cached_base(log: DeltaLog, listing: LogListing, segment: LogSegment) -> Snapshot | None:
    """The newest cached snapshot of the same table older than ``segment``'s version from which
    the listing's commits reach it (cheaper than the segment's checkpoint), or None."""
    best: Snapshot | None = None
    prefix = log.cache_key
    for (key, identity), snapshot in _SNAPSHOTS.items():
        if key != prefix or not isinstance(snapshot, Snapshot):
            continue
        version = identity[0]
        last = listing.commits.get(version)
        if version >= segment.version or last is None or snapshot.segment.last is None:
            continue
        if last.identity != snapshot.segment.last.identity:
            continue  # another table's history at this place
        if segment.checkpoint is not None and version < segment.checkpoint.version:
            continue
        reaches = all(v in listing.commits for v in range(version + 1, segment.version + 1))
        if reaches and (best is None or version > best.version):
            best = snapshot
    return best


def _timestamp(log: DeltaLog, segment: LogSegment, replay: _Replay) -> int:
    """The commit timestamp of the segment's version (its commit file's, or in-commit)."""
    if segment.last is None:  # only the checkpoint is left of that version
        return 0 if segment.checkpoint is None else segment.checkpoint.files[0].modified
    config = TableConfig.of({} if replay.metadata is None else replay.metadata.configuration)
    if config.in_commit_timestamps_from is None:
        return segment.last.modified
    commit = next(log.commits([segment.last], in_commit_from=config.in_commit_timestamps_from))
    return segment.last.modified if commit is None else commit.timestamp
