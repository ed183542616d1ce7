"""Writing tokenized Delta tables: [`write_delta`][spark_mlt.storage.writer.write_delta], its
options, and the backend choice.

Two backends write the same layout (see `spark_mlt.storage.properties`); ``write_delta`` checks
everything it can before any Spark job runs (mode, run id, the table's existence, stored codecs, an
already committed run), then hands a frozen write plan to one of them. The table is opened once per
write: a job that has read it already
([`snapshot_for_write`][spark_mlt.storage.writer.snapshot_for_write]) passes its snapshot down.

* ``"delta-spark"`` when the session has Delta on its classpath (Databricks, EMR, a machine
  that can reach Maven): ``df.write.format("delta")``, properties through the DeltaTable
  builder ([`spark_mlt.storage.backends.delta_spark`][spark_mlt.storage.backends.delta_spark]).
* ``"delta-rs"`` otherwise, the embedded default that needs no jars: Spark writes Parquet in
  parallel, delta-rs commits exactly the files of Spark's job commit, atomically
  ([`spark_mlt.storage.backends.delta_rs`][spark_mlt.storage.backends.delta_rs]). An existing table's protocol is
  checked first ([`check_jar_free_write`][spark_mlt.storage.backends.delta_rs.check_jar_free_write]: a feature
  this path cannot keep is refused before any data moves), and its rules (constraints, NOT NULL,
  generated columns) are checked in Spark and its column mapping kept (`spark_mlt.delta.schema`).

Appending or overwriting reuses the stored codecs: a different codec for a column the table
already has is refused (tokens of two codecs in one column could not be decoded).

A table is created in its own commit (version 0: schema and codec properties, no rows) before
its first rows: delta-rs takes properties other than ``delta.*`` only when it creates a table
without data (``create_table_with_add_actions`` refuses them). A first write that dies between
the two leaves that empty version 0; its re-run with ``mode="error"`` takes it over instead of
refusing an existing table ([`created_empty`][spark_mlt.storage.table.TableSnapshot.created_empty]).

Idempotent runs: ``write_delta(..., run_id="2026-11-22")`` records the run id as a Delta
application transaction in the data commit (``spark-mlt:<run id>``, version 1), and a write whose
run id the table already holds commits nothing (``result.skipped``), so a re-run of the same job
does not duplicate rows. A writer that writes in numbered steps (a streaming query's batches)
passes an [`AppTransaction`][spark_mlt.storage.properties.AppTransaction] instead: its write is
skipped when the table records that version of its ``app_id`` or a later one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_mlt.codec import MLTCodec
from spark_mlt.column.layouts import layout_of
from spark_mlt.column.sqltext import identifier
from spark_mlt.delta.fs import Location, locate
from spark_mlt.errors import MissingTableError, MLTError, MLTTypeError
from spark_mlt.options import check_choice
from spark_mlt.storage.backends import BACKENDS, Backend, DeltaBackend, resolve_backend
from spark_mlt.storage.backends.plan import (
    DeltaWriteResult,
    WriteMode,
    WritePlan,
    check_mode,
    refuse_existing_table,
    skipped_write,
)
from spark_mlt.storage.catalog import is_table_name, resolve_location, table_location
from spark_mlt.storage.properties import (
    CODEC_PROPERTY_PREFIX,
    AppTransaction,
    check_run_id,
    codec_properties,
    merge_codecs,
    run_transaction,
)
from spark_mlt.storage.table import TableSnapshot, read_snapshot

__all__ = [
    "DATA_PAGE_VERSIONS",
    "DataPageVersion",
    "DeltaWriteResult",
    "WriteMode",
    "WriteOptions",
    "check_data_page_version",
    "snapshot_for_write",
    "token_write_options",
    "write_delta",
    "write_plan",
]


@dataclass(frozen=True)
class WriteOptions:
    """How [`write_delta`][spark_mlt.storage.writer.write_delta] writes, beyond the rows, the codecs and the mode.

    Attributes:
        commit_info: extra JSON-able entries for the commit's metadata.
        properties: more table properties for a new table (e.g. the vocabulary paths, see
            [`vocabulary_properties`][spark_mlt.storage.properties.vocabulary_properties]).
        partition_by: partition columns of a new table (an existing table keeps its own).
        parquet_options: options for Spark's Parquet writer (see
            [`token_write_options`][spark_mlt.storage.writer.token_write_options]).
        backend: ``"auto"`` (delta-spark when the session has the jars, else delta-rs), one of
            them by name, or a resolved [`DeltaBackend`][spark_mlt.storage.backends.DeltaBackend].
        cluster_by: columns whose ranges the files hold: the rows are range-partitioned and
            sorted by them before the write (a mirror's key), so that each file's statistics
            span a narrow range.
        max_file_rows: the most rows a file holds (Spark's ``maxRecordsPerFile``; None: no limit).
        resize: with ``mode="overwrite"`` on an existing table, replace its codecs and schema
            with the write's (every row re-tokenized with new codecs); its other properties and
            partitioning stay, and its older versions keep their codecs (time travel).
    """

    commit_info: Mapping[str, Any] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    partition_by: Sequence[str] = ()
    parquet_options: Mapping[str, str] = field(default_factory=dict)
    backend: Backend | DeltaBackend = "auto"
    cluster_by: Sequence[str] = ()
    max_file_rows: int | None = None
    resize: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.backend, str):
            check_choice("backend", self.backend, BACKENDS)
        names = (self.partition_by,) if isinstance(self.partition_by, str) else tuple(self.partition_by)
        if not all(isinstance(name, str) and name for name in names):
            raise MLTTypeError(
                f"partition_by must be column names; got {self.partition_by!r}", parameter="partition_by"
            )
        object.__setattr__(self, "partition_by", names)
        clustered = (self.cluster_by,) if isinstance(self.cluster_by, str) else tuple(self.cluster_by)
        if not all(isinstance(name, str) and name for name in clustered):
            raise MLTTypeError(f"cluster_by must be column names; got {self.cluster_by!r}", parameter="cluster_by")
        object.__setattr__(self, "cluster_by", clustered)
        rows = self.max_file_rows
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
            raise MLTError(
                f"max_file_rows must be a positive whole number or None; got {rows!r}", parameter="max_file_rows"
            )


def snapshot_for_write(
    path: str | os.PathLike[str],
    mode: WriteMode,
    *,
    storage_options: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    backend: Backend | DeltaBackend = "auto",
) -> TableSnapshot | None:
    """The table at ``path`` as a write with ``mode`` finds it: its snapshot, or None when there is
    no table yet. A job reads it once, before any Spark work, and hands it to
    [`write_delta`][spark_mlt.storage.writer.write_delta] (``snapshot=``), which then does not open
    the table again. ``storage_options`` configure the table's store (see
    [`write_delta`][spark_mlt.storage.writer.write_delta]). When the write will be jar-free
    (``backend``, ``"auto"``: ``spark`` or the active session has no Delta jars), the table's
    protocol is checked here too, so a job refuses the table before it writes anything anywhere.

    Raises:
        OptionError: ``mode`` is no write mode.
        TableExistsError: ``mode="error"`` and a table exists at ``path`` (other than the
            empty version 0 a failed spark-mlt write left, which the write takes over).
        TableFeatureError: the write would be jar-free and the table uses a feature that path
            cannot keep (see `spark_mlt.delta.features`), or ``mode="overwrite"`` and
            the table is append-only.

    Example::

        snapshot = snapshot_for_write("/data/ratings_mlt", "append", spark=spark)
        write_delta(tokens, "/data/ratings_mlt", codecs, mode="append", snapshot=snapshot)
    """
    snapshot = _snapshot(path, mode, storage_options)
    if snapshot is not None:
        resolve_backend(spark or SparkSession.getActiveSession(), backend).check_writable(snapshot, mode)
    return snapshot


def _snapshot(
    path: str | os.PathLike[str], mode: WriteMode, storage_options: Mapping[str, str] | None
) -> TableSnapshot | None:
    check_mode(mode)
    try:
        snapshot = read_snapshot(path, storage_options=storage_options)
    except MissingTableError:
        return None
    if mode == "error" and not snapshot.created_empty:
        raise refuse_existing_table(os.fspath(path))
    return snapshot


def write_delta(
    df: DataFrame,
    path: str | os.PathLike[str],
    codecs: Mapping[str, MLTCodec] | None = None,
    *,
    mode: WriteMode = "error",
    run_id: str | AppTransaction | None = None,
    options: WriteOptions | None = None,
    snapshot: TableSnapshot | Literal["read"] | None = "read",
    storage_options: Mapping[str, str] | None = None,
) -> DeltaWriteResult:
    """Write ``df`` as a Delta table with ``codecs`` stored in its properties.

    Args:
        df: the rows to write (tokens already added, e.g. with ``mlt_encode``).
        path: a plain path, a URI (``file://``, ``s3://``, ``abfss://``, ``gs://``) or a catalog
            table's name (``db.table``), created through Spark SQL when it does not exist.
        codecs: codec per id column, stored as ``mlt.codec.<column>``.
        mode: ``"error"`` (the table must not exist), ``"append"`` or ``"overwrite"``.
        run_id: the write's idempotency key: a run id (e.g. the scheduler's run date), committed
            as the Delta application transaction ``spark-mlt:<run id>``, or a stepwise writer's
            [`AppTransaction`][spark_mlt.storage.properties.AppTransaction]; a write the table
            already holds commits nothing (``result.skipped``).
        options: commit metadata, table properties, partitioning of a new table, Parquet
            options, backend ([`WriteOptions`][spark_mlt.storage.writer.WriteOptions]).
        snapshot: the table as [`snapshot_for_write`][spark_mlt.storage.writer.snapshot_for_write]
            read it (None: no table); by default (``"read"``) the write reads it itself.
        storage_options: the store's settings with delta-rs' keys (see
            [`StorageOptions`][spark_mlt.delta.fs.StorageOptions]) for delta-rs and the driver's
            file work; Spark's own are the session's. Never written to the table or its log.

    Raises:
        TableExistsError: mode is ``"error"`` and a table exists at ``path``.
        CodecMismatchError: the table stores a different codec for one of the columns.
        TableSchemaError: the DataFrame's schema does not match the existing table's.
        TableError: ``path`` is a table name and the session has no Delta catalog.
        ConcurrentWriteError: other writers' commits kept winning, or one changed the table's
            codecs or schema meanwhile: nothing was committed.
        StorageError: the table's store refused a request (the message holds no secret).

    Example::

        tokens = ratings.withColumn("userId_mlt", mlt_encode("userId", codec))
        write_delta(tokens, "/data/ratings_mlt", {"userId": codec}, mode="append")
    """
    opts = options or WriteOptions()
    check_mode(mode)
    if not isinstance(run_id, AppTransaction):
        check_run_id(run_id)
    txn = run_transaction(run_id) if isinstance(run_id, str) else run_id
    backend = resolve_backend(df.sparkSession, opts.backend)
    call = _WriteCall(df, mode, dict(codecs or {}), opts, storage_options)
    location, snapshot = _open_table(call, backend, path, snapshot)
    resize = opts.resize and snapshot is not None
    if resize and mode != "overwrite":
        raise MLTError("resize: a re-size rewrites every row: it needs mode='overwrite'", parameter="resize")
    fresh = resize or snapshot is None
    stored = call.codecs if fresh or snapshot is None else merge_codecs(location.uri, snapshot.codecs, call.codecs)
    if txn is not None and snapshot is not None and snapshot.holds(txn):
        return skipped_write(location.uri, snapshot.version, txn)
    if txn is not None and snapshot is not None:
        txn.check_base(snapshot.transaction_version(txn.app_id), location.uri)
    if snapshot is not None:
        backend.check_writable(snapshot, mode)
    plan = _write_plan(call, location, snapshot, stored, run_id=run_id, txn=txn)
    if resize and snapshot is not None:
        kept = {k: v for k, v in snapshot.properties.items() if not k.startswith(CODEC_PROPERTY_PREFIX)}
        plan = dataclasses.replace(
            plan,
            resize=True,
            partition_by=tuple(snapshot.partition_columns),
            properties={**kept, **plan.properties},
        )
    if call.options.cluster_by:
        ranges = [identifier(name) for name in call.options.cluster_by]
        df = df.repartitionByRange(*ranges).sortWithinPartitions(*ranges)
    return backend.write(df, plan)


def write_plan(
    rows: DataFrame,
    snapshot: TableSnapshot,
    codecs: Mapping[str, MLTCodec],
    *,
    mode: WriteMode,
    run_id: AppTransaction | None,
    options: WriteOptions,
) -> WritePlan:
    """The plan of a write of ``rows`` to the table version ``snapshot``, as
    [`write_delta`][spark_mlt.storage.writer.write_delta] makes it (``codecs`` merged with the
    table's, the commit's metadata), for a backend's own commit of them: a key replacement
    ([`replace_keys`][spark_mlt.storage.replace.replace_keys]).

    Raises:
        CodecMismatchError: the table stores a different codec for one of the columns.

    Example::

        plan = write_plan(rows, snapshot, {}, mode="append", run_id=None, options=WriteOptions())
    """
    location = locate(snapshot.path, snapshot.storage_options)
    call = _WriteCall(rows, mode, dict(codecs), options, snapshot.storage_options)
    stored = merge_codecs(location.uri, snapshot.codecs, call.codecs)
    return _write_plan(call, location, snapshot, stored, run_id=run_id, txn=run_id)


@dataclass(frozen=True)
class _WriteCall:
    """The checked arguments of one [`write_delta`][spark_mlt.storage.writer.write_delta] call that
    opening the table and planning the write read (``codecs``: the ones the call gives)."""

    df: DataFrame
    mode: WriteMode
    codecs: dict[str, MLTCodec]
    options: WriteOptions
    storage_options: Mapping[str, str] | None


def _open_table(
    call: _WriteCall,
    backend: DeltaBackend,
    path: str | os.PathLike[str],
    snapshot: TableSnapshot | Literal["read"] | None,
) -> tuple[Location, TableSnapshot | None]:
    """Where the table is and its snapshot (None: no table yet), read unless the caller passed it."""
    if is_table_name(path):
        named = _named_table(call, backend, str(path), snapshot)
        return locate(named.path, call.storage_options), named
    location = locate(path, call.storage_options)
    if snapshot == "read":
        return location, _snapshot(location.uri, call.mode, call.storage_options)
    if snapshot is not None and call.mode == "error" and not snapshot.created_empty:
        raise refuse_existing_table(location.uri)
    return location, snapshot


def _write_plan(
    call: _WriteCall,
    location: Location,
    snapshot: TableSnapshot | None,
    stored: Mapping[str, MLTCodec],
    *,
    run_id: str | AppTransaction | None,
    txn: AppTransaction | None,
) -> WritePlan:
    """The frozen plan a backend writes: ``stored`` are the codecs of the table after the write."""
    info = {"spark_mlt.mode": call.mode, **call.options.commit_info}
    if isinstance(run_id, str):
        info["spark_mlt.run_id"] = run_id
    elif txn is not None:
        info["spark_mlt.transaction"] = str(txn)
    return WritePlan(
        location=location,
        mode=call.mode,
        partition_by=tuple(call.options.partition_by),
        codecs=call.codecs,
        properties={**call.options.properties, **codec_properties(stored)},
        commit_info=info,
        transaction=txn,
        parquet_options={
            **call.options.parquet_options,
            **({"maxRecordsPerFile": str(call.options.max_file_rows)} if call.options.max_file_rows else {}),
        },
        snapshot=snapshot,
    )


def _named_table(
    call: _WriteCall, backend: DeltaBackend, name: str, snapshot: TableSnapshot | Literal["read"] | None
) -> TableSnapshot:
    """The snapshot of the catalog table ``name``, created first by ``backend`` (version 0:
    schema and properties, no data) when the catalog has no such table (Spark SQL: delta-spark)."""
    spark = call.df.sparkSession
    if snapshot == "read":
        location = table_location(spark, name)
        snapshot = None if location is None else read_snapshot(location, storage_options=call.storage_options)
    if snapshot is not None:
        if call.mode == "error" and not snapshot.created_empty:
            raise refuse_existing_table(name)
        return snapshot
    properties = {**call.options.properties, **codec_properties(call.codecs)}
    backend.create_table(spark, name, call.df.schema, tuple(call.options.partition_by), properties)
    created = read_snapshot(resolve_location(name, spark=spark), storage_options=call.storage_options)
    merge_codecs(name, created.codecs, call.codecs)  # another writer may have created it first
    return created


#: Parquet's data page versions (see [`token_write_options`][spark_mlt.storage.writer.token_write_options]).
DataPageVersion = Literal[1, 2]
DATA_PAGE_VERSIONS: tuple[DataPageVersion, ...] = get_args(DataPageVersion)


def check_data_page_version(version: object) -> DataPageVersion:
    """``version`` if it is a Parquet data page version (1 or 2).

    Raises:
        MLTError: any other value, naming ``data_page_version``.
    """
    if type(version) is int:  # not a bool (True == 1)
        for choice in DATA_PAGE_VERSIONS:
            if version == choice:
                return choice
    raise MLTError(f"data_page_version must be 1 or 2; got {version!r}", parameter="data_page_version")


def token_write_options(
    df: DataFrame, token_columns: Iterable[str], *, data_page_version: DataPageVersion = 2
) -> dict[str, str]:
    """Parquet writer options that make token columns cheap to write and small to store.

    Tokens are small, uniformly spread integers: Parquet's dictionary encoding buys little for
    them and is the writer's main cost, so it is turned off for the token columns' leaves.
    With ``data_page_version=2`` (the default) the files get Parquet's v2 data pages, whose
    integer encoding (``DELTA_BINARY_PACKED``) stores each token column in about the bits its
    values need instead of 8 bytes a value (``make bench-delta`` measures both effects;
    docs/performance.md quotes a run). Spark 3.3+ and delta-rs / pyarrow read v2 pages (tested
    here); pass ``data_page_version=1`` for readers that do not.

    Example::

        options = WriteOptions(parquet_options=token_write_options(tokens, ["userId_mlt"]))
        write_delta(tokens, path, codecs, options=options)
    """
    options = {"parquet.writer.version": "v2"} if check_data_page_version(data_page_version) == 2 else {}
    for name in token_columns:
        kind = df.schema[name].dataType
        layout = layout_of(kind)
        if layout == "array":
            leaves = [f"{name}.list.element"]
        elif layout == "struct" and isinstance(kind, StructType):
            leaves = [f"{name}.{child.name}" for child in kind.fields]
        else:
            leaves = [name]
        options.update({f"parquet.enable.dictionary#{leaf}": "false" for leaf in leaves})
    return options
