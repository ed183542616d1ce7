"""Reading a Delta table (or one of its versions) into Spark, in parallel.

With Delta's jars this is ``spark.read.format("delta")``. Without them (the jar-free path), the
Delta core reads the log and Spark reads the version's Parquet files in one scan
([`scan_snapshot`][spark_mlt.delta.read.scan.scan_snapshot]), after the protocol gate
([`check_readable`][spark_mlt.delta.features.check_readable]) has made sure that this returns
exactly the rows Delta returns: partition values typed as delta-spark types them, the rows of
deletion vectors left out by their index in their file. No row of the table passes through the
driver.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from spark_mlt.delta.fs import locate
from spark_mlt.delta.read.changes import appended_files
from spark_mlt.delta.read.scan import scan_snapshot
from spark_mlt.storage.backends import BACKENDS, Backend, DeltaBackend, resolve_backend
from spark_mlt.storage.catalog import resolve_location
from spark_mlt.storage.table import TableSnapshot

__all__ = ["BACKENDS", "Backend", "read_appended", "read_delta", "read_snapshot_rows"]


def read_delta(
    spark: SparkSession,
    path: str | os.PathLike[str],
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    backend: Backend | DeltaBackend = "auto",
) -> DataFrame:
    """A Delta table (or one of its versions) as a Spark DataFrame, read in parallel.

    Args:
        spark: the session to read with.
        path: the table's location: a plain path, a URI or a catalog table's name.
        version: the version to read (time travel); the latest when None.
        storage_options: the store's settings for the driver, which reads the log without
            Delta's jars (Spark reads the files with its own ``s3a`` settings).
        backend: ``"auto"`` (delta-spark when the session has Delta's jars, else the jar-free
            path), ``"delta-rs"``, ``"delta-spark"`` or a resolved
            [`DeltaBackend`][spark_mlt.storage.backends.DeltaBackend].

    Raises:
        MissingTableError: there is no Delta table at ``path`` (without Delta's jars), or no
            table of that name in the catalog.
        TableFeatureError: the jar-free path cannot read this table exactly (the message says
            which feature and the way forward).
        TableError: ``path`` is a table name and the session has no Delta catalog.

    Example::

        ratings = read_delta(spark, "/data/ratings_mlt", version=3)
    """
    location = locate(resolve_location(path, spark=spark), storage_options)
    # not storage's read_snapshot: reading rows does not need the codecs, so a table whose stored
    # codec is corrupt can still be read (and repaired)
    return resolve_backend(spark, backend).read_version(spark, location, version)


def read_snapshot_rows(
    spark: SparkSession, snapshot: TableSnapshot, *, backend: Backend | DeltaBackend = "auto"
) -> DataFrame:
    """The rows of the version a [`TableSnapshot`][spark_mlt.storage.table.TableSnapshot] read: a
    job that has the snapshot (its codecs, layouts, properties) reads the same version without
    reading the log again. ``backend`` as in [`read_delta`][spark_mlt.storage.reader.read_delta].

    Example::

        snapshot = read_snapshot("/data/ratings_mlt")
        ratings = read_snapshot_rows(spark, snapshot)
    """
    return resolve_backend(spark, backend).read(spark, snapshot)


def read_appended(
    spark: SparkSession,
    path: str | os.PathLike[str],
    after: int,
    until: int,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """The rows that the commits ``after + 1`` .. ``until`` of a Delta table appended, read
    without Delta's jars (as [`read_delta`][spark_mlt.storage.reader.read_delta] reads a version):
    a stream's next batch from a table it follows. Like Delta's streaming source, it takes
    appends only: a commit in that range that changes or removes rows (an update, a delete, an
    overwrite; compaction, which changes no data, is passed over) is refused.

    Raises:
        SourceError: a commit in the range changes existing rows, or its log entry is gone
            (older than the log's retention).
        TableFeatureError: the jar-free path cannot read this table exactly.

    Example::

        new_rows = read_appended(spark, "/data/orders", after=41, until=45)
    """
    location = locate(resolve_location(path, spark=spark), storage_options)
    snapshot, added = appended_files(location, after, until)
    return scan_snapshot(spark, snapshot, files=added)
