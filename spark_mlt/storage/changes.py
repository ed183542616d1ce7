"""A table's change data feed, read into Spark: every row a range of commits inserted, deleted or
updated, as Delta's ``readChangeFeed`` returns them.

With Delta's jars this is delta-spark's own reader. Without them the Delta core reads the feed
from the log (`spark_mlt.delta.read.changes`, which says how). Either way
[`check_feed`][spark_mlt.storage.changes.check_feed] refuses first, before any row is read, a
range the feed cannot cover, naming the version and the way forward (a full refresh).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from spark_mlt.delta.fs import locate
from spark_mlt.delta.read.changes import (
    CHANGE_TYPE,
    CHANGE_TYPES,
    COMMIT_VERSION,
    FULL_REFRESH,
    FeedRange,
    feed_rows,
)
from spark_mlt.delta.read.changes import check_feed as check_log_feed
from spark_mlt.errors import ChangeFeedError
from spark_mlt.storage.backends import Backend, DeltaBackend, resolve_backend
from spark_mlt.storage.catalog import resolve_location

__all__ = [
    "CHANGE_TYPE",
    "CHANGE_TYPES",
    "COMMIT_VERSION",
    "FULL_REFRESH",
    "ChangeFeedError",
    "FeedRange",
    "check_feed",
    "feed_rows",
    "read_changes",
]


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
    return the range as read from the log (the Delta core's
    [`check_feed`][spark_mlt.delta.read.changes.check_feed] says how).

    Raises:
        ChangeFeedError: naming the first version that cannot be covered and why.
        TableFeatureError: the table uses a feature the jar-free reader cannot read exactly
            (checked when ``spark_version`` is given).

    Example::

        check_feed("/data/customers", after=41, until=45)
    """
    location = locate(resolve_location(path), storage_options)
    return check_log_feed(location, after, until, spark_version=spark_version)


def read_changes(
    spark: SparkSession,
    path: str | os.PathLike[str],
    after: int,
    until: int,
    *,
    storage_options: Mapping[str, str] | None = None,
    backend: Backend | DeltaBackend = "auto",
    feed: FeedRange | None = None,
) -> DataFrame:
    """The change data feed of the commits ``after + 1 .. until`` of the Delta table at ``path``:
    its columns, ``_change_type`` and ``_commit_version``, after
    [`check_feed`][spark_mlt.storage.changes.check_feed] (``feed``: its result, when the caller
    checked already).

    Example::

        changes = read_changes(spark, "/data/customers", after=41, until=45)
    """
    if feed is None:
        feed = check_feed(path, after, until, storage_options=storage_options, spark_version=spark.version)
    return resolve_backend(spark, backend).read_changes(spark, feed)
