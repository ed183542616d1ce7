"""A table's change data feed, read from its log without Delta's jars (the protocol's "Add CDC
File" and its "Reader Requirements for AddCDCFile"), as delta-spark's ``readChangeFeed`` returns
it: every row a range of commits inserted, deleted or updated.

* A version with ``cdc`` actions: its changes are those files' rows, each with its own
  ``_change_type`` (``insert``, ``delete``, ``update_preimage``, ``update_postimage``).
* A version without: the rows of its ``add`` actions (``dataChange`` true) are inserted and the
  rows of its ``remove`` actions deleted, except a file both removed and added in one version
  (a ``DELETE`` with deletion vectors): the rows its new vector deletes that its old one kept
  are deleted, and the rows the old one deleted that the new one keeps are inserted again
  (``RESTORE``). A file's own vector always applies: its deleted rows are no change. The vector
  in force before a version is the one its ``remove`` action names, so each version's changes
  are read from its own actions, and only the vectors of the files that change are decoded.

The reads become one [`scan`][spark_mlt.delta.read.scan.scan] per kind of file (data files, change
files), with each read's version and change type as constant columns.

[`check_feed`][spark_mlt.delta.read.changes.check_feed] refuses a range the feed cannot cover before
any row is read, naming the version and the way forward (a full refresh): a log entry or a file
already cleaned up, the change data feed off at a version of the range, a schema change (a column
added, renamed or dropped under column mapping, a new partitioning).

[`appended_files`][spark_mlt.delta.read.changes.appended_files] is the stream's narrower reading of a
range: the files its commits appended, refusing any commit that changes existing rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_mlt.delta.actions import AddCDCFile, AddFile, Metadata, RemoveFile
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.features import check_readable
from spark_mlt.delta.fs import Location
from spark_mlt.delta.log import Commit, DeltaLog, LogListing
from spark_mlt.delta.read.deletion_vectors import DeletionVector, deleted_runs, read_deleted_rows
from spark_mlt.delta.read.scan import FileRead, scan
from spark_mlt.delta.schema import TableLayout
from spark_mlt.delta.snapshot import Snapshot, read_snapshot
from spark_mlt.errors import ChangeFeedError, MissingTableError, SourceError

__all__ = [
    "CHANGE_TYPE",
    "CHANGE_TYPES",
    "COMMIT_VERSION",
    "FULL_REFRESH",
    "FeedRange",
    "appended_files",
    "check_feed",
    "feed_rows",
    "read_feed",
]

#: The column that says what a change row is, and the version that made it (Delta's names).
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
#: Delta's change types: rows a version added, and rows it took away.
CHANGE_TYPES = ("insert", "update_postimage", "delete", "update_preimage")

#: How to rebuild a mirror whose source's feed cannot cover a range (the message's way forward).
FULL_REFRESH = "rebuild the mirror from the source as it is now with a full refresh (spark-mlt sync --full-refresh)"

_EXTRAS = (StructField(COMMIT_VERSION, LongType(), False), StructField("__spark_mlt_change", StringType(), True))


@dataclass
class FeedRange:
    """The commits ``after + 1 .. until`` of a table, read from its log and checked
    ([`check_feed`][spark_mlt.delta.read.changes.check_feed]): what the jar-free reader reads.

    Attributes:
        location: the table's location.
        after: the version a reader holds.
        until: the last version read.
        layout: the table's columns (the same at every version of the range).
        changed_versions: the versions that change rows.
        data: the data files' reads (their rows as inserts or deletes).
        cdc: the change data files' reads.
    """

    location: Location
    after: int
    until: int
    layout: TableLayout
    changed_versions: list[int] = field(default_factory=list)
    data: list[FileRead] = field(default_factory=list)
    cdc: list[FileRead] = field(default_factory=list)


def check_feed(location: Location, after: int, until: int, *, spark_version: str | None = None) -> FeedRange:
    """Check that the change data feed of the table at ``location`` covers the commits
    ``after + 1 .. until`` (a reader that holds version ``after`` and reads up to ``until``), and
    return the range as read from the log.

    Raises:
        ChangeFeedError: naming the first version that cannot be covered and why: its log entry
            (or ``after``'s) is gone, the feed was off at it (off at ``after`` and not turned on
            by then, as delta-spark's reader decides, or turned off), the schema or partitioning
            changed, or a file its changes need was vacuumed.
        TableFeatureError: the table uses a feature the jar-free reader cannot read exactly.

    Example::

        check_feed(locate("/data/customers"), after=41, until=45)
    """
    log = DeltaLog(location)
    listing = log.listing()
    start = _start(location, listing, after)
    if spark_version is not None:
        check_readable(start, spark_version=spark_version)
    schema, partitions = start.metadata.schema(), start.metadata.partition_columns
    on = start.config.change_data_feed  # the feed's state in force, version by version (as delta-spark reads it)
    feed = FeedRange(location, after, until, start.layout)
    for commit in _commits(log, listing, after, until, start):
        turned_off = False
        for action in commit.actions:
            if not isinstance(action, Metadata):
                continue
            enabled = TableConfig.of(action.configuration).change_data_feed
            turned_off, on = on and not enabled, enabled
            if action.schema() != schema or action.partition_columns != partitions:
                raise ChangeFeedError(
                    f"input {location.uri}: version {commit.version} changed the table's schema or partitioning (a "
                    f"column added, renamed or dropped), which a mirror cannot follow change by change; {FULL_REFRESH} "
                    "(into a new output path when its columns changed: a full refresh keeps the mirror's schema)",
                    version=commit.version,
                )
        if turned_off:
            raise ChangeFeedError(
                f"input {location.uri}: version {commit.version} turned the change data feed off, so later changes "
                f"are not recorded; turn it on again and {FULL_REFRESH}",
                version=commit.version,
            )
        if not on:
            raise ChangeFeedError(
                f"input {location.uri}: the change data feed was off at version {commit.version} (off at version "
                f"{after}, which the mirror holds, and not turned on before it), so its changes were not recorded "
                "(turn it on with ALTER TABLE ... SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true') for the "
                f"changes to come); {FULL_REFRESH}",
                version=commit.version,
            )
        _add_version(feed, commit)
    for read in [*feed.data, *feed.cdc]:
        if not _exists(location, read.path):
            raise ChangeFeedError(
                f"input {location.uri}: a file of version {read.extras[0]} ({read.path}) is gone (vacuumed), so its "
                f"changes cannot be read; {FULL_REFRESH}",
                version=int(str(read.extras[0])),
            )
    return feed


def _start(location: Location, listing: LogListing, after: int) -> Snapshot:
    """The table at ``after``, the version a reader holds; a ``ChangeFeedError`` when the log
    no longer reaches back to it (cleaned up after a later checkpoint)."""
    try:
        return read_snapshot(location, after, listing=listing)
    except MissingTableError:
        if listing.latest is None:
            raise
        raise ChangeFeedError(
            f"input {location.uri}: the log no longer reaches back to version {after}, which the mirror holds "
            f"(its entry is older than the table's log retention, delta.logRetentionDuration), so the changes of "
            f"version {after + 1} on cannot be read; {FULL_REFRESH}",
            version=after + 1,
        ) from None


def _commits(log: DeltaLog, listing: LogListing, after: int, until: int, start: Snapshot) -> Iterable[Commit]:
    """The commits ``after + 1 .. until``; a ``ChangeFeedError`` for the first that is gone."""
    for version in range(after + 1, until + 1):
        if version not in listing.commits:
            raise ChangeFeedError(
                f"input {log.location.uri}: the log entry of version {version} is gone (older than the table's log "
                f"retention, delta.logRetentionDuration), so its changes cannot be read; {FULL_REFRESH}",
                version=version,
            )
    files = [listing.commits[version] for version in range(after + 1, until + 1)]
    for commit in log.commits(files, in_commit_from=start.config.in_commit_timestamps_from):
        if commit is not None:
            yield commit


def _exists(location: Location, path: str) -> bool:
    """Whether a file of the table is still there (an absolute path, which a shallow clone's
    log holds, is left to the read: it fails rather than skip the file)."""
    return "://" in path or path.startswith("/") or location.exists(path)


def _add_version(feed: FeedRange, commit: Commit) -> None:
    """The file reads of one version's changes (see the module's notes)."""
    version = commit.version
    cdc = [a for a in commit.actions if isinstance(a, AddCDCFile)]
    if cdc:
        feed.cdc += [FileRead(a.path, a.partition_values, extras=(version, None)) for a in cdc]
        feed.changed_versions.append(version)
        return
    adds = {a.path: a for a in commit.actions if isinstance(a, AddFile) and a.data_change}
    removes = {a.path: a for a in commit.actions if isinstance(a, RemoveFile) and a.data_change}
    if not adds and not removes:
        return
    feed.changed_versions.append(version)
    location = feed.location
    for path, add in adds.items():
        remove = removes.get(path)
        if remove is None:
            read = _except_deleted(
                location, path, add.partition_values, add.deletion_vector, version=version, change="insert"
            )
            feed.data.append(read)
            continue
        if add.deletion_vector is None and remove.deletion_vector is None:
            continue  # the same file removed and added again with no vector: its rows are unchanged
        before = _deleted(location, remove.deletion_vector)
        now = _deleted(location, add.deletion_vector)
        for change, rows in (("delete", np.setdiff1d(now, before)), ("insert", np.setdiff1d(before, now))):
            if rows.size:
                starts, lengths = deleted_runs(rows)
                runs = (tuple(int(s) for s in starts), tuple(int(n) for n in lengths))
                feed.data.append(FileRead(path, add.partition_values, "only", runs, (version, change)))
    for path, remove in removes.items():
        if path not in adds:
            values = remove.partition_values or {}
            feed.data.append(
                _except_deleted(location, path, values, remove.deletion_vector, version=version, change="delete")
            )


def _deleted(location: Location, vector: DeletionVector | None) -> npt.NDArray[np.uint64]:
    return np.zeros(0, dtype=np.uint64) if vector is None else read_deleted_rows(vector, location)


def _except_deleted(
    location: Location,
    path: str,
    values: Mapping[str, str | None],
    vector: DeletionVector | None,
    *,
    version: int,
    change: str,
) -> FileRead:
    """A file's rows as one change, less the rows its own deletion vector deletes."""
    rows = _deleted(location, vector)
    if not rows.size:
        return FileRead(path, values, extras=(version, change))
    starts, lengths = deleted_runs(rows)
    runs = (tuple(int(s) for s in starts), tuple(int(n) for n in lengths))
    return FileRead(path, values, "except", runs, (version, change))


#: The most files whose Parquet footers `feed_rows` reads (a ranged read of each one's end).
FEED_FOOTERS = 16


def feed_rows(feed: FeedRange) -> int | None:
    """How many rows [`read_feed`][spark_mlt.delta.read.changes.read_feed] returns for ``feed``, counted
    on the driver: each file's rows (its footer's) less those its read leaves out, or the rows a
    deletion vector's change names; None where more than `FEED_FOOTERS` footers would be read or
    a file is in another store (a Spark job counts them then).

    Example::

        feed_rows(check_feed(location, after=41, until=45))  # 12
    """
    location = feed.location
    counted = 0
    footers: list[tuple[FileRead, str]] = []
    for read in (*feed.data, *feed.cdc):
        if read.keep == "only":
            counted += sum(read.runs[1])
            continue
        path = location.data_path(read.path)
        if path is None:
            return None
        footers.append((read, path))
    if len(footers) > FEED_FOOTERS:
        return None

    def rows(path: str) -> int:
        with location.filesystem.open_input_file(path) as source:
            return int(pq.read_metadata(source).num_rows)

    with ThreadPoolExecutor(max_workers=8) as pool:
        totals = list(pool.map(rows, [path for _, path in footers]))
    for (read, _), total in zip(footers, totals, strict=True):
        counted += total - (sum(read.runs[1]) if read.keep == "except" else 0)
    return counted


def read_feed(spark: SparkSession, feed: FeedRange) -> DataFrame:
    """The changes of a checked range (see the module's notes): the table's columns,
    ``_change_type`` and ``_commit_version``.

    Example::

        changes = read_feed(spark, check_feed(location, after=41, until=45))
    """
    layout = feed.layout
    frames = []
    if feed.data:
        rows = scan(spark, feed.location, layout, feed.data, extras=_EXTRAS)
        frames.append(rows.withColumnRenamed("__spark_mlt_change", CHANGE_TYPE))
    if feed.cdc:
        stored = (StructField(CHANGE_TYPE, StringType()),)
        rows = scan(spark, feed.location, layout, feed.cdc, extras=_EXTRAS, stored=stored)
        frames.append(rows.drop("__spark_mlt_change"))
    if not frames:
        schema = StructType(
            [*layout.logical.fields, StructField(CHANGE_TYPE, StringType()), StructField(COMMIT_VERSION, LongType())]
        )
        return spark.createDataFrame([], schema)
    columns = [*layout.logical.names, CHANGE_TYPE, COMMIT_VERSION]
    out = frames[0].select(*columns)
    for frame in frames[1:]:
        out = out.unionByName(frame.select(*columns))
    return out


def appended_files(location: Location, after: int, until: int) -> tuple[Snapshot, list[AddFile]]:
    """The table at ``until`` and its files that the commits ``after + 1 .. until`` appended: a
    stream's next batch. Like Delta's streaming source, it takes appends only: a commit in that
    range that changes or removes rows (an update, a delete, an overwrite; compaction, which
    changes no data, is passed over) is refused.

    Raises:
        SourceError: a commit in the range changes existing rows, or its log entry is gone
            (older than the log's retention).

    Example::

        snapshot, added = appended_files(locate("/data/orders"), after=41, until=45)
    """
    log = DeltaLog(location)
    listing = log.listing()
    added: set[str] = set()
    for version in range(after + 1, until + 1):
        if version not in listing.commits:
            raise SourceError(
                f"input {location.uri}: the log entry of version {version} is gone (older than the table's log "
                "retention); the stream cannot continue from its checkpoint: start it again with a new one",
                parameter="input",
            )
    files = [listing.commits[version] for version in range(after + 1, until + 1)]
    for commit in log.commits(files):
        if commit is None:  # pragma: no cover - every file was listed
            continue
        for action in commit.actions:
            if isinstance(action, RemoveFile) and action.data_change:
                raise SourceError(
                    f"input {location.uri}: version {commit.version} changes or removes existing rows "
                    f"({commit.operation or 'a change'}); a stream takes appends only",
                    parameter="input",
                )
            if isinstance(action, AddFile) and action.data_change:
                added.add(action.path)
    snapshot = read_snapshot(location, until, listing=listing)
    return snapshot, [add for path, add in snapshot.files.items() if path in added]
