"""A Delta table's change data feed, read into Spark: every row a range of commits inserted,
deleted or updated, as Delta's ``readChangeFeed`` returns them.

With Delta's jars this is delta-spark's own reader. Without them the log is read here, as the
protocol's "Reader Requirements for AddCDCFile" say (and as delta-spark's reader does):

* a version with ``cdc`` actions: its changes are those files' rows, each with its own
  ``_change_type`` (``insert``, ``delete``, ``update_preimage``, ``update_postimage``);
* a version without: the rows of its ``add`` actions (``dataChange`` true) are inserted and the
  rows of its ``remove`` actions deleted, except a file both removed and added in one version
  (a ``DELETE`` with deletion vectors): the rows its new vector deletes that its old one kept
  are deleted, and the rows the old one deleted that the new one keeps are inserted again
  (``RESTORE``). A file's own vector always applies: its deleted rows are no change.

Files are read in one Parquet scan per kind (data files, change files) with each row's file
and index in it (``_metadata``), joined to a small table of the range's file reads; no row
passes through the driver, and only the deletion vectors of the files that change are read.

[`check_feed`][spark_mlt.storage.changes.check_feed] refuses a range the feed cannot cover, for
both readers and before any row is read, naming the version and the way forward (a full
refresh): a log entry or a file already cleaned up, the change data feed off at a version of
the range, a schema change (a column added, renamed or dropped under column mapping, a new
partitioning).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote

import numpy as np
from deltalake import DeltaTable, Schema
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from spark_mlt.errors import ChangeFeedError, MissingTableError
from spark_mlt.storage._local import local_frame
from spark_mlt.storage.catalog import Backend, resolve_location, use_delta_spark
from spark_mlt.storage.deletions import _runs, keep_masks
from spark_mlt.storage.features import check_readable
from spark_mlt.storage.fs import Location, locate
from spark_mlt.storage.reader import _file_key, _spark_file, exact_files
from spark_mlt.storage.schema import TableLayout, logical_columns, table_layout
from spark_mlt.storage.table import open_table

__all__ = [
    "CHANGE_TYPE",
    "CHANGE_TYPES",
    "COMMIT_VERSION",
    "ChangeFeedError",
    "FeedRange",
    "check_feed",
    "read_changes",
]

#: The column that says what a change row is, and the version that made it (Delta's names).
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
#: Delta's change types: rows a version added, and rows it took away.
CHANGE_TYPES = ("insert", "update_postimage", "delete", "update_preimage")

#: How to rebuild a mirror whose source's feed cannot cover a range (the message's way forward).
FULL_REFRESH = "rebuild the mirror from the source as it is now with a full refresh (spark-mlt sync --full-refresh)"

_FILE = "__spark_mlt_file"
_READ = "__spark_mlt_read"
_ROW = "__spark_mlt_row"
_KEEP = "__spark_mlt_keep"
_SHIFT = 1 << 40


@dataclass(frozen=True)
class _Read:
    """One file's rows as one version's change: all of them, all but some, or only some
    (runs of row indexes), typed ``change`` (None: the change file's own column)."""

    path: str
    version: int
    change: str | None
    partition: Mapping[str, str | None]
    keep: Literal["all", "except", "only"] = "all"
    runs: tuple[list[int], list[int]] = ([], [])


@dataclass
class FeedRange:
    """The commits ``after + 1 .. until`` of a table, read from its log and checked
    ([`check_feed`][spark_mlt.storage.changes.check_feed]): what the jar-free reader reads."""

    location: Location
    after: int
    until: int
    layout: TableLayout
    changed_versions: list[int] = field(default_factory=list)
    data: list[_Read] = field(default_factory=list)
    cdc: list[_Read] = field(default_factory=list)


def _entry(location: Location, version: int) -> list[dict[str, Any]]:
    name = f"_delta_log/{version:020d}.json"
    if not location.exists(name):
        raise ChangeFeedError(
            f"input {location.uri}: the log entry of version {version} is gone (older than the table's log "
            f"retention, delta.logRetentionDuration), so its changes cannot be read; {FULL_REFRESH}",
            version=version,
        )
    with location.filesystem.open_input_stream(location.path(name)) as stream:
        return [json.loads(line) for line in stream.read().decode().splitlines() if line.strip()]


def _cdf_on(configuration: Mapping[str, Any]) -> bool:
    return str(configuration.get("delta.enableChangeDataFeed", "false")).lower() == "true"


def check_feed(
    path: str | os.PathLike[str],
    after: int,
    until: int,
    *,
    storage_options: Mapping[str, str] | None = None,
    spark_version: str | None = None,
) -> FeedRange:
    """Check that the change data feed of the Delta table at ``path`` covers the commits
    ``after + 1 .. until`` (a reader that holds version ``after`` and reads up to ``until``), and
    return the range as read from the log.

    Raises:
        ChangeFeedError: naming the first version that cannot be covered and why: its log entry
            (or ``after``'s) is gone, the feed was off at it (off at ``after`` and not turned on
            by then, as delta-spark's reader decides, or turned off), the schema or partitioning
            changed, or a file its changes need was vacuumed.
        TableFeatureError: the table uses a feature the jar-free reader cannot read exactly.

    Example::

        check_feed("/data/customers", after=41, until=45)
    """
    location = locate(resolve_location(path), storage_options)
    start = _open_at(location, after, storage_options)
    if spark_version is not None:
        check_readable(start, location.uri, spark_version=spark_version)
    layout = table_layout(start)
    metadata = start.metadata()
    schema, partitions = start.schema(), list(metadata.partition_columns)
    on = _cdf_on(metadata.configuration)  # the feed's state in force, version by version (as delta-spark reads it)
    feed = FeedRange(location, after, until, layout)
    physical = {p: logical for logical, p in layout.physical_names.items()}
    for version in range(after + 1, until + 1):
        actions = _entry(location, version)
        turned_off = False
        for action in actions:
            meta = action.get("metaData")
            if meta is None:
                continue
            turned_off = on and not _cdf_on(meta.get("configuration") or {})
            on = _cdf_on(meta.get("configuration") or {})
            if (
                Schema.from_json(meta["schemaString"]) != schema
                or list(meta.get("partitionColumns") or []) != partitions
            ):
                raise ChangeFeedError(
                    f"input {location.uri}: version {version} changed the table's schema or partitioning (a column "
                    f"added, renamed or dropped), which a mirror cannot follow change by change; {FULL_REFRESH} "
                    "(into a new output path when its columns changed: a full refresh keeps the mirror's schema)",
                    version=version,
                )
        if turned_off:
            raise ChangeFeedError(
                f"input {location.uri}: version {version} turned the change data feed off, so later changes "
                f"are not recorded; turn it on again and {FULL_REFRESH}",
                version=version,
            )
        if not on:
            raise ChangeFeedError(
                f"input {location.uri}: the change data feed was off at version {version} (off at version {after}, "
                f"which the mirror holds, and not turned on before it), so its changes were not recorded (turn it on "
                f"with ALTER TABLE ... SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true') for the changes to "
                f"come); {FULL_REFRESH}",
                version=version,
            )
        _add_version(feed, version, actions, physical, storage_options)
    for read in [*feed.data, *feed.cdc]:
        if not _exists(location, read.path):
            raise ChangeFeedError(
                f"input {location.uri}: a file of version {read.version} ({read.path}) is gone (vacuumed), so its "
                f"changes cannot be read; {FULL_REFRESH}",
                version=read.version,
            )
    return feed


def _open_at(location: Location, version: int, storage_options: Mapping[str, str] | None) -> DeltaTable:
    """The table at ``version``, the one a reader holds; a ``ChangeFeedError`` when the log no
    longer reaches back to it (cleaned up after a later checkpoint)."""
    try:
        return open_table(location.uri, version=version, storage_options=storage_options)
    except MissingTableError:
        open_table(location.uri, storage_options=storage_options)  # no table at all: that error
        raise ChangeFeedError(
            f"input {location.uri}: the log no longer reaches back to version {version}, which the mirror holds "
            f"(its entry is older than the table's log retention, delta.logRetentionDuration), so the changes of "
            f"version {version + 1} on cannot be read; {FULL_REFRESH}",
            version=version + 1,
        ) from None


def _exists(location: Location, path: str) -> bool:
    """Whether a file of the table is still there (an absolute path, which a shallow clone's
    log holds, is left to the read: it fails rather than skip the file)."""
    return "://" in path or path.startswith("/") or location.exists(path)


def _add_version(
    feed: FeedRange,
    version: int,
    actions: list[dict[str, Any]],
    physical: Mapping[str, str],
    storage_options: Mapping[str, str] | None,
) -> None:
    """The file reads of one version's changes (see the module's notes)."""

    def partition(action: Mapping[str, Any]) -> dict[str, str | None]:
        return {physical.get(k, k): v for k, v in (action.get("partitionValues") or {}).items()}

    cdc = [a["cdc"] for a in actions if "cdc" in a]
    if cdc:
        feed.cdc += [_Read(unquote(a["path"]), version, None, partition(a)) for a in cdc]
        feed.changed_versions.append(version)
        return
    adds = {unquote(a["add"]["path"]): a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)}
    removes = {
        unquote(a["remove"]["path"]): a["remove"]
        for a in actions
        if "remove" in a and a["remove"].get("dataChange", True)
    }
    if not adds and not removes:
        return
    feed.changed_versions.append(version)
    masks: dict[int, dict[str, np.ndarray]] = {}

    def mask(at: int, path: str) -> np.ndarray:
        if at not in masks:
            table = open_table(feed.location.uri, version=at, storage_options=storage_options)
            masks[at] = keep_masks(table, feed.location.uri)
        return masks[at].get(path, np.ones(0, dtype=bool))

    for path, add in adds.items():
        remove = removes.get(path)
        if remove is None:
            feed.data.append(_with_vector(_Read(path, version, "insert", partition(add)), add, mask, version))
            continue
        if add.get("deletionVector") is None and remove.get("deletionVector") is None:
            # the same file removed and added again with no vector: its rows are unchanged
            continue
        before, now = mask(version - 1, path), mask(version, path)
        size = max(before.size, now.size)
        before = np.concatenate((before, np.ones(size - before.size, dtype=bool)))
        now = np.concatenate((now, np.ones(size - now.size, dtype=bool)))
        for change, rows in (("delete", before & ~now), ("insert", ~before & now)):
            starts, lengths = _runs(~rows)  # runs of the rows that changed
            if starts.size:
                read = _Read(path, version, change, partition(add), "only", (starts.tolist(), lengths.tolist()))
                feed.data.append(read)
    for path, remove in removes.items():
        if path not in adds:
            feed.data.append(_with_vector(_Read(path, version, "delete", partition(remove)), remove, mask, version - 1))


def _with_vector(read: _Read, action: Mapping[str, Any], mask: Any, at: int) -> _Read:
    """``read`` less the rows the action's own deletion vector deletes (the vector in force at
    version ``at``)."""
    if action.get("deletionVector") is None:
        return read
    starts, lengths = _runs(mask(at, read.path))
    if not starts.size:
        return read
    return _Read(read.path, read.version, read.change, read.partition, "except", (starts.tolist(), lengths.tolist()))


def read_changes(
    spark: SparkSession,
    path: str | os.PathLike[str],
    after: int,
    until: int,
    *,
    storage_options: Mapping[str, str] | None = None,
    backend: Backend = "auto",
    feed: FeedRange | None = None,
) -> DataFrame:
    """The change data feed of the commits ``after + 1 .. until`` of the Delta table at ``path``:
    its columns, ``_change_type`` and ``_commit_version`` (see the module's notes), after
    [`check_feed`][spark_mlt.storage.changes.check_feed] (``feed``: its result, when the caller
    checked already).

    Example::

        changes = read_changes(spark, "/data/customers", after=41, until=45)
    """
    if feed is None:
        feed = check_feed(path, after, until, storage_options=storage_options, spark_version=spark.version)
    location = feed.location
    if use_delta_spark(spark, backend) and until > after:  # Delta refuses an empty range
        rows = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", after + 1)
            .option("endingVersion", until)
            .load(location.spark_path())
        )
        return rows.drop("_commit_timestamp")
    layout = feed.layout
    parts = [
        _scan(spark, location, layout, feed.data, cdc=False),
        _scan(spark, location, layout, feed.cdc, cdc=True),
    ]
    frames = [frame for frame in parts if frame is not None]
    if not frames:
        schema = StructType(
            [*layout.logical.fields, StructField(CHANGE_TYPE, StringType()), StructField(COMMIT_VERSION, LongType())]
        )
        return spark.createDataFrame([], schema)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _scan(
    spark: SparkSession, location: Location, layout: TableLayout, reads: Sequence[_Read], *, cdc: bool
) -> DataFrame | None:
    """The rows of ``reads`` (all of one kind: data files or change files), typed and kept as
    each read says, with the table's logical columns, ``_change_type`` and ``_commit_version``."""
    if not reads:
        return None
    partitions = list(layout.partition_columns)
    stored = StructType([p for f, p in zip(layout.logical, layout.physical, strict=True) if f.name not in partitions])
    if cdc:
        stored = stored.add(StructField(CHANGE_TYPE, StringType()))
    paths = sorted({_spark_file(location, read.path) for read in reads})
    scan = exact_files(spark, stored, paths).select(
        "*", F.col("_metadata.file_path").alias(_FILE), F.col("_metadata.row_index").alias(_ROW)
    )
    schema = StructType(
        [
            StructField(_FILE, StringType(), False),
            StructField(_READ, IntegerType(), False),
            StructField(COMMIT_VERSION, LongType(), False),
            StructField("__spark_mlt_change", StringType(), True),
            StructField(_KEEP, StringType(), False),
            *(StructField(f"__spark_mlt_p{i}", StringType(), True) for i in range(len(partitions))),
        ]
    )
    table = [
        (
            _file_key(_spark_file(location, read.path)),
            index,
            read.version,
            read.change,
            read.keep,
            *(read.partition.get(name) for name in partitions),
        )
        for index, read in enumerate(reads)
    ]
    files = local_frame(spark, table, schema)
    rows = scan.join(F.broadcast(files), _FILE)
    filtered = [index for index, read in enumerate(reads) if read.keep != "all"]
    if filtered:
        runs = [(index, *reads[index].runs) for index in filtered]
        runs_schema = StructType(
            [
                StructField("r", IntegerType(), False),
                StructField("s", ArrayType(LongType(), False), False),
                StructField("l", ArrayType(LongType(), False), False),
            ]
        )
        marked = local_frame(spark, runs, runs_schema).select("r", F.inline(F.arrays_zip("s", "l")))
        first = F.col("r").cast("long") * F.lit(_SHIFT) + F.col("s")
        listed = marked.select(F.explode(F.sequence(first, first + F.col("l") - F.lit(1))).alias("__spark_mlt_at"))
        listed = listed.withColumn("__spark_mlt_listed", F.lit(True))
        at = F.col(_READ).cast("long") * F.lit(_SHIFT) + F.col(_ROW)
        rows = rows.withColumn("__spark_mlt_at", at).join(listed, "__spark_mlt_at", "left")
        is_listed = F.coalesce(F.col("__spark_mlt_listed"), F.lit(False))
        keep = F.when(F.col(_KEEP) == "except", ~is_listed).when(F.col(_KEEP) == "only", is_listed).otherwise(True)
        rows = rows.where(keep)
    change = F.col("__spark_mlt_change")
    if cdc:
        change = F.col(CHANGE_TYPE)
    values = {
        name: F.col(f"__spark_mlt_p{i}").cast(layout.logical[name].dataType).alias(name)
        for i, name in enumerate(partitions)
    }
    data = dict(zip(layout.data_columns, logical_columns(layout, layout.data_columns), strict=True))
    columns = [values[name] if name in values else data[name] for name in layout.logical.names]
    return rows.select(*columns, change.alias(CHANGE_TYPE), F.col(COMMIT_VERSION))
