"""Reading a Delta table (or one of its versions) into Spark, in parallel.

With Delta's jars this is ``spark.read.format("delta")``. Without them, delta-rs lists the
version's files and partition values and Spark reads the Parquet files: correct, and time
travel matches delta-rs. Partition columns are not stored in the files, so each partition's
files are read on their own and the values added as literals (Spark's ``basePath`` option
cannot be used: the files sit in the writes' staging subfolders, not one Hive layout).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from spark_mlt.storage.catalog import has_delta_jars, resolve_location
from spark_mlt.storage.fs import Location, locate
from spark_mlt.storage.table import TableSnapshot, open_table

__all__ = ["read_delta", "read_snapshot_rows"]


def read_delta(
    spark: SparkSession,
    path: str | os.PathLike[str],
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """A Delta table (or one of its versions) as a Spark DataFrame, read in parallel.

    Args:
        spark: the session to read with.
        path: the table's location: a plain path, a URI or a catalog table's name.
        version: the version to read (time travel); the latest when None.
        storage_options: the store's settings for delta-rs, which lists the version's files
            without Delta's jars (Spark reads them with its own ``s3a`` settings).

    Raises:
        MissingTableError: there is no Delta table at ``path`` (without Delta's jars), or no
            table of that name in the catalog.
        TableError: ``path`` is a table name and the session has no Delta catalog.

    Example::

        ratings = read_delta(spark, "/data/ratings_mlt", version=3)
    """
    location = locate(resolve_location(path, spark=spark), storage_options)
    if has_delta_jars(spark):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(location.spark_path())
    # Not read_snapshot: reading rows does not need the codecs, so a table whose stored codec
    # is corrupt can still be read (and repaired).
    return _read_files(spark, location, open_table(location.uri, version=version, storage_options=storage_options))


def read_snapshot_rows(spark: SparkSession, snapshot: TableSnapshot) -> DataFrame:
    """The rows of the version a :class:`~spark_mlt.storage.table.TableSnapshot` read, through
    its own handle: a job that has the snapshot (its codecs, layouts, properties) reads the
    same version without opening the table again.

    Example::

        snapshot = read_snapshot("/data/ratings_mlt")
        ratings = read_snapshot_rows(spark, snapshot)
    """
    location = locate(snapshot.path, snapshot.storage_options)
    if has_delta_jars(spark):
        return spark.read.format("delta").option("versionAsOf", snapshot.version).load(location.spark_path())
    return _read_files(spark, location, snapshot.table)


def _read_files(spark: SparkSession, location: Location, table: DeltaTable) -> DataFrame:
    schema: StructType = from_arrow_schema(pa.schema(table.schema().to_arrow()))
    partition_columns = list(table.metadata().partition_columns)
    data_schema = StructType([f for f in schema.fields if f.name not in partition_columns])
    actions = pa.table(table.get_add_actions(flatten=True))
    files = [_spark_file(location, p) for p in actions.column("path").to_pylist()]
    if not files:
        return spark.createDataFrame([], schema)
    if not partition_columns:
        return spark.read.schema(data_schema).parquet(*files).select(*schema.names)
    groups: dict[tuple[Any, ...], list[str]] = {}
    values = [actions.column(f"partition.{c}").to_pylist() for c in partition_columns]
    for row, file in enumerate(files):
        groups.setdefault(tuple(column[row] for column in values), []).append(file)
    frames = []
    for key, group in groups.items():
        frame = spark.read.schema(data_schema).parquet(*group)
        for column, value in zip(partition_columns, key, strict=True):
            frame = frame.withColumn(column, F.lit(value).cast(schema[column].dataType))
        frames.append(frame.select(*schema.names))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _spark_file(location: Location, path: str) -> str:
    """What Spark is given for a file of the table: add actions hold paths relative to the
    table, or absolute URIs (shallow clones, tables written by other engines)."""
    return path if "://" in path or path.startswith("/") else location.spark_path(path)
