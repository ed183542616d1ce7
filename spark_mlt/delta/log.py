"""The Delta log in storage: its listing, commit files and checkpoints, each read once (the
protocol's "Delta Log Entries", "Checkpoints", "Sidecar Files" and "Last Checkpoint File").

This is the one module of spark-mlt that opens ``_delta_log`` (a test keeps it so): everything
else reads a table through the typed actions it returns, most through a
[`Snapshot`][spark_mlt.delta.snapshot.Snapshot].

* One listing of ``_delta_log`` tells which versions the log holds: commit files
  (``<version>.json``) and checkpoints of every kind: classic (``<v>.checkpoint.parquet``),
  multi-part (``<v>.checkpoint.<part>.<parts>.parquet``, used only when every part is there) and
  UUID-named v2 checkpoints (``<v>.checkpoint.<uuid>.json`` or ``.parquet``), whose ``add`` and
  ``remove`` actions may sit in sidecar files (``_delta_log/_sidecars``). Log compaction files,
  version checksums and ``_last_checkpoint`` are optional to readers and not used: the listing
  finds the newest checkpoint itself.
* A [`LogSegment`][spark_mlt.delta.log.LogSegment] is what a version is rebuilt from: the newest
  complete checkpoint at or before it, then every commit after that checkpoint up to it.
* Each commit file and checkpoint is parsed once per process into typed actions
  (`spark_mlt.delta.actions`), cached by the file's name, size and modification time: a commit
  file is never rewritten (the protocol's commits are put-if-absent), and a table deleted and
  written again at the same place gives files of other times.
* A commit's timestamp is its ``inCommitTimestamp`` where the table has in-commit timestamps
  (from their enablement version on), else the commit file's modification time, as the
  protocol's "In-Commit Timestamps" section says.

Example::

    log = DeltaLog(locate("/data/ratings_mlt"))
    segment = log.segment(None)  # the latest version
    [commit.version for commit in log.commits(segment.commits)]
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from spark_mlt.delta.actions import Action, CommitInfo, Sidecar, parse_action
from spark_mlt.delta.fs import Location, redact
from spark_mlt.errors import MissingTableError, StorageError, TableError

__all__ = [
    "LOG_FOLDER",
    "Checkpoint",
    "Commit",
    "DeltaLog",
    "LogFile",
    "LogListing",
    "LogSegment",
    "clear_cache",
    "holds_log",
]

LOG_FOLDER = "_delta_log"
_SIDECARS = "_sidecars"


def holds_log(filesystem: pafs.FileSystem, folder: str) -> bool:
    """Whether ``folder`` (a path on ``filesystem``) holds a Delta log folder: it is a Delta
    table's folder, or where one was (a log is never read here: one request, no listing).

    Raises:
        OSError: the store refused the request.
    """
    info = filesystem.get_file_info(f"{folder.rstrip('/')}/{LOG_FOLDER}")
    return bool(info.type != pafs.FileType.NotFound)


_COMMIT = re.compile(r"(\d{20})\.json")
_CLASSIC = re.compile(r"(\d{20})\.checkpoint\.parquet")
_MULTIPART = re.compile(r"(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet")
_UUID_NAMED = re.compile(r"(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)")
#: The columns of a checkpoint (and a sidecar) that hold actions this package reads.
_CHECKPOINT_COLUMNS = (
    "protocol",
    "metaData",
    "add",
    "remove",
    "txn",
    "domainMetadata",
    "checkpointMetadata",
    "sidecar",
)


@dataclass(frozen=True, slots=True)
class LogFile:
    """A file of the log as the listing found it.

    Attributes:
        name: its name inside ``_delta_log`` (``_sidecars/<name>`` for a sidecar).
        size: its size in bytes.
        modified: its modification time, in milliseconds since the epoch.
    """

    name: str
    size: int
    modified: int

    @property
    def identity(self) -> tuple[str, int, int]:
        """What tells this file from another of the same name (the cache's key)."""
        return self.name, self.size, self.modified


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint of a version: a classic file, every part of a multi-part one, or a
    UUID-named v2 checkpoint (its sidecars are read from its ``sidecar`` actions)."""

    version: int
    kind: Literal["classic", "multi-part", "uuid"]
    files: tuple[LogFile, ...]


@dataclass(frozen=True, slots=True)
class LogSegment:
    """What one version is rebuilt from.

    Attributes:
        version: the version.
        checkpoint: the newest complete checkpoint at or before it, None to replay from version 0.
        commits: the commit files after the checkpoint up to ``version``, oldest first.
        last: the commit file of ``version`` itself, when the log still holds it (its timestamp).
    """

    version: int
    checkpoint: Checkpoint | None
    commits: tuple[LogFile, ...]
    last: LogFile | None

    @property
    def identity(self) -> tuple[Any, ...]:
        """What tells this segment's table state from another's of the same version."""
        checkpoint = None if self.checkpoint is None else tuple(f.identity for f in self.checkpoint.files)
        return self.version, checkpoint, None if self.last is None else self.last.identity


@dataclass(frozen=True)
class LogListing:
    """The files of a table's log at one moment: its commit files and checkpoints by version."""

    location: Location
    commits: Mapping[int, LogFile]
    checkpoints: Mapping[int, tuple[Checkpoint, ...]]

    @property
    def latest(self) -> int | None:
        """The newest version the log holds (None: no table)."""
        versions = [*self.commits, *self.checkpoints]
        return max(versions) if versions else None

    @property
    def oldest(self) -> int | None:
        """The oldest version the log can rebuild (None: no table)."""
        if self.latest is None:
            return None
        starts = [v for v in self.checkpoints if self._covered(v, self.latest)]
        if 0 in self.commits and self._covered(0, self.latest):
            starts.append(0)
        return min(starts) if starts else self.latest

    def _covered(self, start: int, end: int) -> bool:
        return all(v in self.commits for v in range(start + 1, end + 1))

    def segment(self, version: int | None = None) -> LogSegment:
        """The segment that rebuilds ``version`` (None: the latest).

        Raises:
            MissingTableError: there is no table, or the log no longer reaches back to
                ``version`` (its commits were cleaned up), or it does not reach it yet.
        """
        latest = self.latest
        where = self.location.uri
        if latest is None:
            raise MissingTableError(f"no Delta table at {where}", parameter="path")
        target = latest if version is None else version
        if target < 0 or target > latest:
            raise MissingTableError(f"the Delta table at {where} has no version {target} (its latest is {latest})")
        for start in sorted((v for v in self.checkpoints if v <= target), reverse=True):
            checkpoint = _complete(self.checkpoints[start])
            if checkpoint is not None and self._covered(start, target):
                commits = tuple(self.commits[v] for v in range(start + 1, target + 1))
                return LogSegment(target, checkpoint, commits, self.commits.get(target))
        if all(v in self.commits for v in range(target + 1)):
            commits = tuple(self.commits[v] for v in range(target + 1))
            return LogSegment(target, None, commits, self.commits[target])
        raise MissingTableError(
            f"the log of the Delta table at {where} no longer reaches back to version {target} (its commits were "
            f"cleaned up after the log retention, delta.logRetentionDuration; it holds versions {self.oldest} to "
            f"{latest})"
        )


def _complete(checkpoints: Sequence[Checkpoint]) -> Checkpoint | None:
    """A usable checkpoint of one version: a UUID-named or classic one first, then a multi-part
    one with every part (a multi-part checkpoint with parts missing is ignored)."""
    for kind in ("uuid", "classic", "multi-part"):
        for checkpoint in checkpoints:
            if checkpoint.kind == kind:
                return checkpoint
    return None


@dataclass(frozen=True)
class Commit:
    """One commit of a table, as its commit file records it.

    Attributes:
        version: the commit's version.
        timestamp: when it was committed, in milliseconds since the epoch: its
            ``inCommitTimestamp`` where the table has in-commit timestamps, else the commit
            file's modification time (the protocol's commit timestamp either way).
        actions: its actions, in the file's order.
    """

    version: int
    timestamp: int
    actions: tuple[Action, ...]

    @property
    def info(self) -> Mapping[str, Any]:
        """Its ``commitInfo`` action, as written (empty if it has none)."""
        found = next((a for a in self.actions if isinstance(a, CommitInfo)), None)
        return {} if found is None else found.values

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


class DeltaLog:
    """The log of the table at a location (see the module's notes).

    Example::

        log = DeltaLog(locate("s3://bucket/orders", storage_options))
        listing = log.listing()
    """

    def __init__(self, location: Location) -> None:
        self.location = location

    def path(self, name: str) -> str:
        """The filesystem path of ``name`` inside ``_delta_log``."""
        return self.location.path(f"{LOG_FOLDER}/{name}")

    def exists(self) -> bool:
        """Whether the log holds a commit or a checkpoint (a table is there)."""
        return self.listing().latest is not None

    def listing(self) -> LogListing:
        """The log's files now (one listing of ``_delta_log``).

        Raises:
            StorageError: the store refused the listing.
        """
        selector = pafs.FileSelector(self.location.path(LOG_FOLDER), recursive=False, allow_not_found=True)
        try:
            infos = self.location.filesystem.get_file_info(selector)
        except OSError as error:
            reason = redact(str(error), self.location.storage_options)
            raise StorageError(f"cannot reach the Delta table at {self.location.uri}: {reason}") from None
        commits: dict[int, LogFile] = {}
        classic: dict[int, list[Checkpoint]] = {}
        parts: dict[tuple[int, int], dict[int, LogFile]] = {}
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            name = info.path.rsplit("/", 1)[-1]
            file = LogFile(name, int(info.size or 0), _millis(info))
            if found := _COMMIT.fullmatch(name):
                commits[int(found[1])] = file
            elif found := _CLASSIC.fullmatch(name):
                classic.setdefault(int(found[1]), []).append(Checkpoint(int(found[1]), "classic", (file,)))
            elif found := _UUID_NAMED.fullmatch(name):
                classic.setdefault(int(found[1]), []).append(Checkpoint(int(found[1]), "uuid", (file,)))
            elif found := _MULTIPART.fullmatch(name):
                parts.setdefault((int(found[1]), int(found[3])), {})[int(found[2])] = file
        for (version, count), found_parts in parts.items():
            if sorted(found_parts) == list(range(1, count + 1)):
                files = tuple(found_parts[i] for i in range(1, count + 1))
                classic.setdefault(version, []).append(Checkpoint(version, "multi-part", files))
        return LogListing(self.location, commits, {v: tuple(c) for v, c in classic.items()})

    def segment(self, version: int | None = None) -> LogSegment:
        """The segment that rebuilds ``version`` (None: the latest), from a fresh listing.

        Raises:
            MissingTableError: no table, or no such version in the log.
        """
        return self.listing().segment(version)

    # --- commit files ---------------------------------------------------------------------

    def commit_actions(self, file: LogFile) -> tuple[Action, ...]:
        """The actions of one commit file (parsed once per process, see the module's notes)."""
        key = (self.cache_key, file.identity)
        cached: tuple[Action, ...] | None = _COMMITS.get(key)
        if cached is None:
            cached = _parse_lines(self._read(file.name), f"{self.location.uri}/{LOG_FOLDER}/{file.name}")
            _COMMITS.put(key, cached)
        return cached

    def commit_file(self, version: int) -> LogFile | None:
        """The commit file of ``version`` as the store has it now, or None when it is not there."""
        name = f"{version:020d}.json"
        info = self.location.filesystem.get_file_info(self.path(name))
        if info.type != pafs.FileType.File:
            return None
        return LogFile(name, int(info.size or 0), _millis(info))

    def commits(self, files: Iterable[LogFile | None], *, in_commit_from: int | None = None) -> Iterator[Commit | None]:
        """The commits of ``files`` (None stays None), read in parallel, in the given order;
        ``in_commit_from`` is the first version with in-commit timestamps (None: none)."""
        chosen = list(files)

        def read(file: LogFile | None) -> Commit | None:
            if file is None:
                return None
            version = int(file.name[:20])
            actions = self.commit_actions(file)
            timestamp = file.modified
            if in_commit_from is not None and version >= in_commit_from:
                info = next((a for a in actions if isinstance(a, CommitInfo)), None)
                if info is not None and info.in_commit_timestamp is not None:
                    timestamp = info.in_commit_timestamp
            return Commit(version, timestamp, actions)

        if len(chosen) <= 1:
            yield from map(read, chosen)
            return
        with ThreadPoolExecutor(max_workers=8) as pool:
            yield from pool.map(read, chosen)

    # --- checkpoints -------------------------------------------------------------------------

    def checkpoint_actions(self, checkpoint: Checkpoint) -> tuple[Action, ...]:
        """Every action of a checkpoint, its sidecars' included (parsed once per process)."""
        key = (self.cache_key, tuple(f.identity for f in checkpoint.files))
        cached: tuple[Action, ...] | None = _CHECKPOINTS.get(key)
        if cached is None:
            actions: list[Action] = []
            for file in checkpoint.files:
                if file.name.endswith(".json"):
                    actions += _parse_lines(self._read(file.name), f"{self.location.uri}/{LOG_FOLDER}/{file.name}")
                else:
                    actions += self._parquet_actions(file.name)
            sidecars = [a for a in actions if isinstance(a, Sidecar)]
            for sidecar in sidecars:
                actions += self._parquet_actions(f"{_SIDECARS}/{sidecar.path.rsplit('/', 1)[-1]}")
            cached = tuple(a for a in actions if not isinstance(a, Sidecar))
            _CHECKPOINTS.put(key, cached)
        return cached

    def _parquet_actions(self, name: str) -> list[Action]:
        """The actions of a Parquet checkpoint (or sidecar): one per row and action column."""
        where = f"{self.location.uri}/{LOG_FOLDER}/{name}"
        try:
            with self.location.filesystem.open_input_file(self.path(name)) as source:
                parquet = pq.ParquetFile(source)
                columns = [c for c in _CHECKPOINT_COLUMNS if c in parquet.schema_arrow.names]
                table = parquet.read(columns=columns)
        except FileNotFoundError:
            raise TableError(f"the Delta table's checkpoint file {where} is missing; nothing was read") from None
        actions: list[Action] = []
        for column in columns:
            for row in table.column(column).to_pylist():
                if row is None:
                    continue
                value = row
                if column == "add" and row.get("stats") is None and row.get("stats_parsed") is not None:
                    value = {**row, "stats": stats_json(row["stats_parsed"])}
                action = _parse({column: value}, where)
                if action is not None:
                    actions.append(action)
        return actions

    # --- files -------------------------------------------------------------------------------

    @property
    def cache_key(self) -> str:
        """What names this log in the process's caches: its filesystem's kind and its folder."""
        return f"{type(self.location.filesystem).__name__}:{self.location.root}"

    def _read(self, name: str) -> bytes:
        try:
            with self.location.filesystem.open_input_stream(self.path(name)) as stream:
                return bytes(stream.read())
        except FileNotFoundError:
            raise TableError(
                f"the log file {self.location.uri}/{LOG_FOLDER}/{name} is gone (cleaned up after the log retention, "
                "delta.logRetentionDuration); nothing was read"
            ) from None


def _millis(info: pafs.FileInfo) -> int:
    if info.mtime_ns is None:  # pragma: no cover - every store spark-mlt reads gives one
        raise StorageError(f"no modification time for {info.path}")
    return int(info.mtime_ns // 1_000_000)


def _parse(document: Mapping[str, Any], where: str) -> Action | None:
    try:
        return parse_action(document)
    except (KeyError, TypeError, ValueError) as error:
        kind = next(iter(document), "?")
        raise TableError(
            f"the log file {where} holds a malformed {kind!r} action ({error!r}); nothing was read"
        ) from None


def _parse_lines(data: bytes, where: str) -> tuple[Action, ...]:
    actions = []
    for line in data.decode("utf-8").splitlines():
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except ValueError:
            raise TableError(f"the log file {where} holds a line that is no JSON; nothing was read") from None
        action = _parse(document, where)
        if action is not None:
            actions.append(action)
    return tuple(actions)


def stats_json(parsed: Any) -> str:
    """A checkpoint's ``stats_parsed`` struct as the ``stats`` JSON it stands for (a table whose
    checkpoints hold statistics as structs only, ``delta.checkpoint.writeStatsAsJson = false``):
    timestamps at milliseconds (``Z`` where they are instants), decimals as exact numbers."""
    if isinstance(parsed, Mapping):
        items = (f"{json.dumps(key)}:{stats_json(value)}" for key, value in parsed.items() if value is not None)
        return "{" + ",".join(items) + "}"
    if isinstance(parsed, dt.datetime):
        text = parsed.replace(tzinfo=None).isoformat(timespec="milliseconds")
        return json.dumps(f"{text}Z" if parsed.tzinfo is not None else text)
    if isinstance(parsed, dt.date):
        return json.dumps(parsed.isoformat())
    if isinstance(parsed, Decimal):
        return format(parsed, "f")
    if isinstance(parsed, float) and not math.isfinite(parsed):
        return json.dumps("NaN" if math.isnan(parsed) else "Infinity" if parsed > 0 else "-Infinity")
    return json.dumps(parsed, ensure_ascii=False)


class _Cache:
    """A small thread-safe LRU cache (every one is cleared by `clear_cache`)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        _CACHES.append(self)

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def items(self) -> list[tuple[Any, Any]]:
        """The cached entries, oldest first (a copy)."""
        with self._lock:
            return list(self._items.items())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_CACHES: list[_Cache] = []
#: Parsed commit files and checkpoints (see the module's notes): many small commits, few large
#: checkpoints.
_COMMITS = _Cache(16_384)
_CHECKPOINTS = _Cache(8)


def clear_cache() -> None:
    """Forgets every parsed log file and snapshot (a process that rewrites a table's log by
    hand calls it)."""
    for cache in _CACHES:
        cache.clear()
