"""Reading a Delta table (or one of its versions) into Spark, in parallel.

With Delta's jars this is ``spark.read.format("delta")``. Without them (the jar-free path),
delta-rs reads the log and Spark reads the version's Parquet files, after the protocol gate
([`check_readable`][spark_mlt.storage.features.check_readable]) has made sure that this returns exactly
the rows Delta returns:

* one Parquet scan of all the version's files, with the schema the files store
  (`spark_mlt.storage.schema`: physical names under column mapping, renamed back after);
* partition values (not in the files) and deletion vectors need to know each row's file: a
  small table of the version's files (one row per file: its path, a number, its partition
  values as delta-rs parsed them) is broadcast-joined on ``_metadata.file_path``, and the
  deleted rows (`spark_mlt.storage.deletions`) are left out with an anti-join on the
  file's number and the row's index in its file (``_metadata.row_index``). A row whose file
  the table does not list fails the query rather than lose its partition values.

The plan has the same shape for one file or a million, one partition or many; no row of the
table passes through the driver.

Paths: the log (and delta-rs' listing) holds them percent-encoded; they are decoded for
Spark, which gives each row's file as a URI (``_metadata.file_path``: Hadoop's ``Path.toUri``).
The table of files holds that URI, quoted in Python as ``java.net.URI`` quotes a path, so that
the join compares the column as Spark reads it (decoding it per row in SQL made a partitioned
read 4x slower). A quoting this gets wrong fails the read, it never drops a row.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from spark_mlt.column.sqltext import identifier
from spark_mlt.errors import SourceError, TableError, TableFeatureError
from spark_mlt.storage._local import local_frame
from spark_mlt.storage.catalog import BACKENDS, Backend, resolve_location, use_delta_spark
from spark_mlt.storage.deletions import deleted_runs
from spark_mlt.storage.features import check_readable
from spark_mlt.storage.fs import Location, locate
from spark_mlt.storage.schema import logical_columns, table_layout
from spark_mlt.storage.table import TableSnapshot, open_table

__all__ = ["BACKENDS", "Backend", "read_appended", "read_delta", "read_snapshot_rows"]

#: Deleted rows up to this many are broadcast to the anti-join (no shuffle of the table).
BROADCAST_DELETED_ROWS = 1_000_000

_FILE = "__spark_mlt_file"
_FILE_ID = "__spark_mlt_file_id"
_ROW = "__spark_mlt_row"


def read_delta(
    spark: SparkSession,
    path: str | os.PathLike[str],
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    backend: Backend = "auto",
) -> DataFrame:
    """A Delta table (or one of its versions) as a Spark DataFrame, read in parallel.

    Args:
        spark: the session to read with.
        path: the table's location: a plain path, a URI or a catalog table's name.
        version: the version to read (time travel); the latest when None.
        storage_options: the store's settings for delta-rs, which lists the version's files
            without Delta's jars (Spark reads them with its own ``s3a`` settings).
        backend: ``"auto"`` (delta-spark when the session has Delta's jars, else the jar-free
            path), ``"delta-rs"`` or ``"delta-spark"``.

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
    if use_delta_spark(spark, backend):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(location.spark_path())
    # Not read_snapshot: reading rows does not need the codecs, so a table whose stored codec
    # is corrupt can still be read (and repaired).
    return _read_files(spark, location, open_table(location.uri, version=version, storage_options=storage_options))


def read_snapshot_rows(spark: SparkSession, snapshot: TableSnapshot, *, backend: Backend = "auto") -> DataFrame:
    """The rows of the version a [`TableSnapshot`][spark_mlt.storage.table.TableSnapshot] read, through
    its own handle: a job that has the snapshot (its codecs, layouts, properties) reads the
    same version without opening the table again. ``backend`` as in [`read_delta`][spark_mlt.storage.reader.read_delta].

    Example::

        snapshot = read_snapshot("/data/ratings_mlt")
        ratings = read_snapshot_rows(spark, snapshot)
    """
    location = locate(snapshot.path, snapshot.storage_options)
    if use_delta_spark(spark, backend):
        return spark.read.format("delta").option("versionAsOf", snapshot.version).load(location.spark_path())
    return _read_files(spark, location, snapshot.table)


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
    added: set[str] = set()
    for version in range(after + 1, until + 1):
        entry = f"_delta_log/{version:020d}.json"
        if not location.exists(entry):
            raise SourceError(
                f"input {location.uri}: the log entry of version {version} is gone (older than the table's log "
                "retention); the stream cannot continue from its checkpoint: start it again with a new one",
                parameter="input",
            )
        with location.filesystem.open_input_stream(location.path(entry)) as stream:
            actions = [json.loads(line) for line in stream.read().decode().splitlines() if line.strip()]
        for action in actions:
            if "remove" in action and action["remove"].get("dataChange", True):
                raise SourceError(
                    f"input {location.uri}: version {version} changes or removes existing rows "
                    f"({_operation(actions)}); a stream takes appends only",
                    parameter="input",
                )
            if "add" in action and action["add"].get("dataChange", True):
                added.add(unquote(action["add"]["path"]))
    table = open_table(location.uri, version=until, storage_options=storage_options)
    return _read_files(spark, location, table, only=added)


def _operation(actions: list[dict[str, object]]) -> str:
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    return str(info.get("operation", "a change")) if isinstance(info, dict) else "a change"


def _read_files(
    spark: SparkSession, location: Location, table: DeltaTable, *, only: set[str] | None = None
) -> DataFrame:
    protocol = check_readable(table, location.uri, spark_version=spark.version)
    layout = table_layout(table)
    actions = pa.table(table.get_add_actions(flatten=False))
    if only is not None:  # these files of the version only (a stream's appended ones)
        keep = [unquote(str(p)) in only for p in actions.column("path").to_pylist()]
        actions = actions.filter(pa.array(keep, pa.bool_()))
    paths = [unquote(str(p)) for p in actions.column("path").to_pylist()]
    if not paths:
        return spark.createDataFrame([], layout.logical)
    partitions = list(layout.partition_columns)
    stored = StructType([p for f, p in zip(layout.logical, layout.physical, strict=True) if f.name not in partitions])
    if "_metadata" in stored.names:
        raise TableError(
            f"the Delta table at {location.uri} has a column named _metadata, which hides Spark's file metadata "
            "that the jar-free reader needs; use a session with Delta's jars"
        )
    scan = exact_files(spark, stored, [_spark_file(location, p) for p in paths])
    deletions = "deletionVectors" in protocol.reader
    if not partitions and not deletions:
        return scan.select(*logical_columns(layout, layout.data_columns))
    located = [F.col("_metadata.file_path").alias(_FILE)]
    if deletions:
        located.append(F.col("_metadata.row_index").alias(_ROW))
    scan = scan.select("*", *located)
    files = _files_frame(spark, location, actions, paths, partitions=partitions, logical=layout.logical)
    rows = scan.join(F.broadcast(files), _FILE, "left")
    unknown = F.concat(F.lit(f"the Delta table at {location.uri} does not list the file "), F.col(_FILE))
    rows = rows.where(F.when(F.col(_FILE_ID).isNull(), F.raise_error(unknown)).otherwise(F.lit(True)))
    if deletions:
        rows = _without_deleted(spark, rows, table, {p: i for i, p in enumerate(paths)}, location)
    parts = {name: F.col(identifier(_partition_alias(i))).alias(name) for i, name in enumerate(partitions)}
    data = dict(zip(layout.data_columns, logical_columns(layout, layout.data_columns), strict=True))
    return rows.select(*(parts[name] if name in parts else data[name] for name in layout.logical.names))


def exact_files(spark: SparkSession, schema: StructType, files: list[str]) -> DataFrame:
    """The Parquet files ``files``, each read as named: Spark reads a path with ``*``, ``?``,
    ``[`` or ``{`` as a glob pattern (which could match other files, or none), unless its
    ``__globPaths__`` option is off (Spark's file stream source turns it off the same way)."""
    return spark.read.schema(schema).option("__globPaths__", "false").parquet(*files)


def _partition_alias(index: int) -> str:
    return f"__spark_mlt_partition_{index}"


def _files_frame(
    spark: SparkSession,
    location: Location,
    actions: pa.Table,
    paths: list[str],
    *,
    partitions: list[str],
    logical: StructType,
) -> DataFrame:
    """One row per file of the version (``actions``: delta-rs' add actions, ``paths``: their
    decoded paths): its URI as Spark names it, its number, and its partition values (typed, as
    delta-rs parsed them from the log)."""
    values: list[list[object]] = [[] for _ in paths]
    if partitions:
        column = actions.column("partition").to_pylist()
        values = [[(row or {}).get(name) for name in partitions] for row in column]
    schema = StructType(
        [
            StructField(_FILE, StringType(), False),
            StructField(_FILE_ID, IntegerType(), False),
            *(StructField(_partition_alias(i), logical[name].dataType, True) for i, name in enumerate(partitions)),
        ]
    )
    rows = [(_file_key(_spark_file(location, p)), i, *values[i]) for i, p in enumerate(paths)]
    return local_frame(spark, rows, schema)


def _without_deleted(
    spark: SparkSession, rows: DataFrame, table: DeltaTable, file_ids: dict[str, int], location: Location
) -> DataFrame:
    """``rows`` without those the version's deletion vectors delete: an anti-join on one bigint
    per row, its file's number times 2^40 plus its index in the file (Spark's hash join on one
    long key is about twice as fast as on the pair; 2^23 files of up to 2^40 rows fit)."""
    deleted = deleted_runs(table, file_ids, location.uri)
    if not deleted.files:
        return rows
    if len(file_ids) >= 1 << 23:
        raise TableFeatureError(
            f"the Delta table at {location.uri} has {len(file_ids):,} files, more than the jar-free reader "
            "numbers; use a session with Delta's jars",
            feature="deletionVectors",
        )
    schema = StructType(
        [
            StructField("f", LongType(), False),
            StructField("s", ArrayType(LongType(), False), False),
            StructField("l", ArrayType(LongType(), False), False),
        ]
    )
    runs = local_frame(spark, deleted.files, schema).select("f", F.inline(F.arrays_zip("s", "l")))
    first = F.col("f") * F.lit(_FILE_SHIFT) + F.col("s")
    gone = runs.select(F.explode(F.sequence(first, first + F.col("l") - F.lit(1))).alias(_ROW))
    if deleted.rows <= BROADCAST_DELETED_ROWS:
        gone = F.broadcast(gone)
    keyed = rows.withColumn(_ROW, F.col(_FILE_ID).cast("long") * F.lit(_FILE_SHIFT) + F.col(_ROW))
    return keyed.join(gone, _ROW, "left_anti")


#: A row's key in the anti-join: its file's number times this, plus its index in the file.
_FILE_SHIFT = 1 << 40


def _spark_file(location: Location, path: str) -> str:
    """What Spark is given for a file of the table (``path`` decoded): add actions hold paths
    relative to the table, or absolute URIs (shallow clones, tables written by other engines)."""
    return path if "://" in path or path.startswith("/") else location.spark_path(path)


def _file_key(spark_path: str) -> str:
    """The URI Spark gives a file it was handed as ``spark_path``: Hadoop's ``Path.toUri``,
    ``file:/abs/path`` for a local file, the URI otherwise, its path quoted as
    ``java.net.URI`` quotes a path ([`_quote_path`][spark_mlt.storage.reader._quote_path])."""
    if spark_path.startswith("/"):
        return "file:" + _quote_path(posixpath.normpath(spark_path))
    scheme, rest = spark_path.split(":", 1)
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        prefix = f"{scheme}:" if scheme == "file" and not authority else f"{scheme}://{authority}"
        return prefix + _quote_path("/" + path)
    return f"{scheme}:{_quote_path(rest)}"


#: The ASCII characters ``java.net.URI`` leaves unquoted in a path: letters, digits, its
#: unreserved marks, its punctuation, ``/`` and ``@``. Other ASCII characters become ``%XX``;
#: non-ASCII characters stay as they are unless they are controls or spaces.
_PATH_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'(),;:$&+=/@")


def _quote_path(path: str) -> str:
    out = []
    for char in path:
        if char in _PATH_SAFE or (ord(char) > 127 and char.isprintable() and not char.isspace()):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)
