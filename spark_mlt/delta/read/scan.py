"""Reading a table's files into Spark without Delta's jars: the one scan of the jar-free path,
which [`read_delta`][spark_mlt.storage.reader.read_delta] and the change feed
(`spark_mlt.delta.read.changes`) both use.

A scan is a list of [`FileRead`][spark_mlt.delta.read.scan.FileRead]s: a data file, its partition
values as the log serialises them, which of its rows to keep (all, all but the rows its deletion
vector deletes, or only some) and constant values of extra columns (a change's version and
type). It becomes one Spark query whose plan has the same shape for one file or a million:

* one Parquet scan of all the files, with the schema the files store (physical names under
  column mapping, `spark_mlt.delta.schema`), renamed to the table's logical columns after;
* a small table of the reads (one row per read: its file as Spark names it, its number, its
  partition values and extra values) broadcast-joined on ``_metadata.file_path``; a row whose
  file the scan does not list fails the query rather than lose its partition values;
* partition values typed in Spark from the log's strings
  ([`partition_value`][spark_mlt.delta.partitions.partition_value]: as delta-spark types them);
* rows left out (or kept) by their position: the read's number times 2^40 plus the row's index
  in its file (``_metadata.row_index``, the index Delta's own reader uses), joined with the
  positions the reads list (broadcast up to a million).

No row of the table passes through the driver; only the reads and the positions do. Deletion
vectors are decoded here (`spark_mlt.delta.read.deletion_vectors`), only those of the files read.

Paths: a read's path is decoded (the log holds it percent-encoded); Spark gives each row's file
as a URI (``_metadata.file_path``: Hadoop's ``Path.toUri``), so the table of reads holds that
URI, quoted in Python as ``java.net.URI`` quotes a path, and the join compares the column as
Spark reads it (decoding it per row in SQL made a partitioned read 4x slower). A quoting this
gets wrong fails the read, it never drops a row.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from spark_mlt.delta.actions import AddFile
from spark_mlt.delta.features import check_readable
from spark_mlt.delta.frames import local_frame
from spark_mlt.delta.fs import Location
from spark_mlt.delta.partitions import partition_value
from spark_mlt.delta.read.deletion_vectors import deleted_runs, read_deleted_rows
from spark_mlt.delta.schema import TableLayout, logical_columns
from spark_mlt.delta.snapshot import Snapshot
from spark_mlt.errors import TableError, TableFeatureError

__all__ = [
    "BROADCAST_POSITIONS",
    "FileRead",
    "exact_files",
    "file_reads",
    "scan",
    "scan_snapshot",
    "spark_file",
]

#: Listed row positions up to this many are broadcast to the join (no shuffle of the table).
BROADCAST_POSITIONS = 1_000_000
#: The most runs of listed row positions a scan puts into its query plan.
MAX_RUNS = 5_000_000
#: A row's position: its read's number times this, plus its index in its file.
_READ_SHIFT = 1 << 40
#: The most reads a scan numbers (2^23 reads of up to 2^40 rows fit in a bigint).
_MAX_READS = 1 << 23

_FILE = "__spark_mlt_file"
_READ = "__spark_mlt_read"
_ROW = "__spark_mlt_row"
_AT = "__spark_mlt_at"
_KEEP = "__spark_mlt_keep"
_LISTED = "__spark_mlt_listed"

Runs = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class FileRead:
    """One data file read by a scan.

    Attributes:
        path: the file's path, decoded (relative to the table, or absolute).
        partition_values: its partition values as the log serialises them, by physical name.
        keep: ``"all"`` its rows, all ``"except"`` those of ``runs``, or ``"only"`` those.
        runs: runs of row indexes (first indexes, lengths).
        extras: the values of the scan's extra columns for this file's rows.
    """

    path: str
    partition_values: Mapping[str, str | None]
    keep: Literal["all", "except", "only"] = "all"
    runs: Runs = field(default=((), ()))
    extras: tuple[object, ...] = ()


def file_reads(location: Location, files: Iterable[AddFile], *, extras: tuple[object, ...] = ()) -> list[FileRead]:
    """The reads of logical files: each one's rows but those its deletion vector deletes
    (the vectors decoded in parallel).

    Raises:
        TableError: a deletion vector is corrupt or missing.
        TableFeatureError: a vector is stored where the jar-free path cannot read it.
    """
    chosen = list(files)

    def read(add: AddFile) -> FileRead:
        if add.deletion_vector is None or add.deletion_vector.cardinality == 0:
            return FileRead(add.path, add.partition_values, extras=extras)
        starts, lengths = deleted_runs(read_deleted_rows(add.deletion_vector, location))
        runs = (tuple(int(s) for s in starts), tuple(int(n) for n in lengths))
        return FileRead(add.path, add.partition_values, "except", runs, extras)

    vectors = sum(1 for add in chosen if add.deletion_vector is not None)
    if vectors <= 1:
        return [read(add) for add in chosen]
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(read, chosen))


def scan(
    spark: SparkSession,
    location: Location,
    layout: TableLayout,
    reads: Sequence[FileRead],
    *,
    extras: Sequence[StructField] = (),
    stored: Sequence[StructField] = (),
) -> DataFrame:
    """The rows of ``reads`` with the table's logical columns, then ``stored`` columns the files
    hold beyond the table's (a change data file's ``_change_type``), then the ``extras``
    (constant per read). See the module's notes.

    Raises:
        TableError: the table has a column named ``_metadata`` (it hides Spark's file metadata).
        TableFeatureError: more reads or listed rows than the plan can hold.

    Example::

        snapshot = read_snapshot(location)
        rows = scan(spark, location, snapshot.layout, file_reads(location, snapshot.files.values()))
    """
    partitions = list(layout.partition_columns)
    files_schema = StructType(
        [p for f, p in zip(layout.logical, layout.physical, strict=True) if f.name not in partitions]
    )
    for column in stored:
        files_schema = files_schema.add(column)
    if not reads:
        empty = StructType([*layout.logical.fields, *stored, *extras])
        return spark.createDataFrame([], empty)
    if "_metadata" in files_schema.names:
        raise TableError(
            f"the Delta table at {location.uri} has a column named _metadata, which hides Spark's file metadata "
            "that the jar-free reader needs; use a session with Delta's jars"
        )
    if len(reads) >= _MAX_READS:
        raise TableFeatureError(
            f"a jar-free read of the Delta table at {location.uri} numbers {len(reads):,} files, more than it can; "
            "use a session with Delta's jars",
            feature="deletionVectors",
        )
    paths = sorted({spark_file(location, read.path) for read in reads})
    rows = exact_files(spark, files_schema, paths)
    filtered = [i for i, read in enumerate(reads) if read.keep != "all"]
    simple = not partitions and not extras and not filtered and len(paths) == len(reads)
    data = dict(zip(layout.data_columns, logical_columns(layout, layout.data_columns), strict=True))
    if simple:
        return rows.select(*(data[name] for name in layout.data_columns), *(F.col(c.name) for c in stored))
    located = [F.col("_metadata.file_path").alias(_FILE)]
    if filtered:
        located.append(F.col("_metadata.row_index").alias(_ROW))
    rows = rows.select("*", *located)
    table = _reads_frame(spark, location, layout, reads, extras)
    rows = rows.join(F.broadcast(table), _FILE, "left")
    unknown = F.concat(F.lit(f"the Delta table at {location.uri} does not list the file "), F.col(_FILE))
    rows = rows.where(F.when(F.col(_READ).isNull(), F.raise_error(unknown)).otherwise(F.lit(True)))
    if filtered:
        rows = _listed_rows(spark, location, rows, reads, filtered)
    values = {
        name: partition_value(F.col(_partition_alias(i)), layout.logical[name].dataType).alias(name)
        for i, name in enumerate(partitions)
    }
    columns = [values[name] if name in values else data[name] for name in layout.logical.names]
    return rows.select(*columns, *(F.col(c.name) for c in stored), *(F.col(c.name) for c in extras))


def _partition_alias(index: int) -> str:
    return f"__spark_mlt_partition_{index}"


def _reads_frame(
    spark: SparkSession,
    location: Location,
    layout: TableLayout,
    reads: Sequence[FileRead],
    extras: Sequence[StructField],
) -> DataFrame:
    """One row per read: its file's URI as Spark names it, its number, how it keeps rows, its
    partition values (strings, by the partition columns' order) and its extra values."""
    physical = layout.physical_names
    partitions = [physical.get(name, name) for name in layout.partition_columns]
    schema = StructType(
        [
            StructField(_FILE, StringType(), False),
            StructField(_READ, IntegerType(), False),
            StructField(_KEEP, StringType(), False),
            *(StructField(_partition_alias(i), StringType(), True) for i in range(len(partitions))),
            *extras,
        ]
    )
    rows = [
        (
            file_key(spark_file(location, read.path)),
            index,
            read.keep,
            *(read.partition_values.get(name) for name in partitions),
            *read.extras,
        )
        for index, read in enumerate(reads)
    ]
    return local_frame(spark, rows, schema)


def _listed_rows(
    spark: SparkSession, location: Location, rows: DataFrame, reads: Sequence[FileRead], filtered: Sequence[int]
) -> DataFrame:
    """``rows`` kept as their reads say: an ``except`` read's rows but the listed ones, an
    ``only`` read's listed ones, every row of the other reads."""
    runs = [(index, list(reads[index].runs[0]), list(reads[index].runs[1])) for index in filtered]
    count = sum(len(starts) for _, starts, _ in runs)
    listed = sum(sum(lengths) for _, _, lengths in runs)
    if count > MAX_RUNS:
        raise TableFeatureError(
            f"a jar-free read of the Delta table at {location.uri} lists more than {MAX_RUNS:,} runs of rows to "
            "leave out or keep (its deletion vectors), more than it puts into a query plan; purge them "
            "(REORG TABLE ... APPLY (PURGE)) or use a session with Delta's jars",
            feature="deletionVectors",
        )
    schema = StructType(
        [
            StructField("r", IntegerType(), False),
            StructField("s", ArrayType(LongType(), False), False),
            StructField("l", ArrayType(LongType(), False), False),
        ]
    )
    marked = local_frame(spark, runs, schema).select("r", F.inline(F.arrays_zip("s", "l")))
    first = F.col("r").cast("long") * F.lit(_READ_SHIFT) + F.col("s")
    positions = marked.select(F.explode(F.sequence(first, first + F.col("l") - F.lit(1))).alias(_AT))
    positions = positions.withColumn(_LISTED, F.lit(True))
    if listed <= BROADCAST_POSITIONS:
        positions = F.broadcast(positions)
    at = F.col(_READ).cast("long") * F.lit(_READ_SHIFT) + F.col(_ROW)
    joined = rows.withColumn(_AT, at).join(positions, _AT, "left")
    is_listed = F.coalesce(F.col(_LISTED), F.lit(False))
    keep = F.when(F.col(_KEEP) == "except", ~is_listed).when(F.col(_KEEP) == "only", is_listed).otherwise(True)
    return joined.where(keep)


def exact_files(spark: SparkSession, schema: StructType, files: list[str]) -> DataFrame:
    """The Parquet files ``files``, each read as named: Spark reads a path with ``*``, ``?``,
    ``[`` or ``{`` as a glob pattern (which could match other files, or none), unless its
    ``__globPaths__`` option is off (Spark's file stream source turns it off the same way)."""
    return spark.read.schema(schema).option("__globPaths__", "false").parquet(*files)


def spark_file(location: Location, path: str) -> str:
    """What Spark is given for a file of the table (``path`` decoded): add actions hold paths
    relative to the table, or absolute URIs (shallow clones, tables written by other engines)."""
    return path if "://" in path or path.startswith("/") else location.spark_path(path)


def file_key(spark_path: str) -> str:
    """The URI Spark gives a file it was handed as ``spark_path``: Hadoop's ``Path.toUri``,
    ``file:/abs/path`` for a local file, the URI otherwise, its path quoted as
    ``java.net.URI`` quotes a path (``_quote_path``)."""
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


def scan_snapshot(spark: SparkSession, snapshot: Snapshot, *, files: Iterable[AddFile] | None = None) -> DataFrame:
    """The rows of a table version (of ``files`` of it only, when given), exactly as Delta
    returns them: the protocol gate first (`spark_mlt.delta.features`), then one scan.

    Raises:
        TableFeatureError: the jar-free path cannot read this version exactly (the message says
            which feature and the way forward).

    Example::

        rows = scan_snapshot(spark, read_snapshot(locate("/data/ratings_mlt")))
    """
    check_readable(snapshot, spark_version=spark.version)
    chosen = snapshot.files.values() if files is None else files
    return scan(spark, snapshot.location, snapshot.layout, file_reads(snapshot.location, chosen))
