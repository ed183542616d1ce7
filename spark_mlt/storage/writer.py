"""Writing tokenised Delta tables: :func:`write_delta`, its options, and the backend choice.

Two backends write the same layout (see :mod:`spark_mlt.storage.properties`); ``write_delta``
checks everything it can before any Spark job runs (mode, run id, the table's existence,
stored codecs, an already committed run), then hands a frozen write plan to one of them:

* ``"delta-spark"`` when the session has Delta on its classpath (Databricks, EMR, a machine
  that can reach Maven): ``df.write.format("delta")``, properties through the DeltaTable
  builder (:mod:`spark_mlt.storage._delta_spark`).
* ``"delta-rs"`` otherwise, the embedded default that needs no jars: Spark writes Parquet in
  parallel, delta-rs commits exactly the files of Spark's job commit, atomically
  (:mod:`spark_mlt.storage._delta_rs`).

Appending or overwriting reuses the stored codecs: a different codec for a column the table
already has is refused (tokens of two codecs in one column could not be decoded).

Idempotent runs: ``write_delta(..., run_id="2026-11-22")`` records the run id as a Delta
application transaction in the data commit, and a write whose run id the table already holds
commits nothing (``result.skipped``), so a re-run of the same job does not duplicate rows.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, StructType

from spark_mlt.codec import MLTCodec
from spark_mlt.errors import MissingTableError, MLTError, MLTTypeError, TableExistsError
from spark_mlt.storage import _delta_rs, _delta_spark
from spark_mlt.storage._plan import WRITE_MODES, DeltaWriteResult, WriteMode, WritePlan, skipped_write
from spark_mlt.storage.fs import locate
from spark_mlt.storage.properties import codec_properties, merge_codecs, run_app_id
from spark_mlt.storage.table import TableSnapshot, read_snapshot

__all__ = [
    "DeltaWriteResult",
    "WriteMode",
    "WriteOptions",
    "check_data_page_version",
    "has_delta_jars",
    "token_write_options",
    "write_delta",
]

Backend = Literal["auto", "delta-rs", "delta-spark"]
_BACKENDS: tuple[Backend, ...] = ("auto", "delta-rs", "delta-spark")


@dataclass(frozen=True)
class WriteOptions:
    """How :func:`write_delta` writes, beyond the rows, the codecs and the mode.

    Attributes:
        commit_info: extra JSON-able entries for the commit's metadata.
        properties: more table properties for a new table (e.g. the vocabulary paths, see
            :func:`~spark_mlt.storage.properties.vocabulary_properties`).
        parquet_options: options for Spark's Parquet writer (see :func:`token_write_options`).
        backend: ``"auto"`` (delta-spark when the session has the jars, else delta-rs).
    """

    commit_info: Mapping[str, Any] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    parquet_options: Mapping[str, str] = field(default_factory=dict)
    backend: Backend = "auto"


_WRITE_OPTION_RENAMES = {
    "commit_info": "commit_info",
    "properties": "properties",
    "write_options": "parquet_options",
    "backend": "backend",
}


def _legacy_write_options(options: WriteOptions | None, legacy: Mapping[str, Any]) -> WriteOptions:
    """``options`` with the keywords write_delta took in 0.1 folded in (deprecated)."""
    unknown = sorted(set(legacy) - set(_WRITE_OPTION_RENAMES))
    if unknown:
        raise TypeError(f"write_delta() got unexpected keyword argument(s) {unknown}")
    if not legacy:
        return options or WriteOptions()
    warnings.warn(
        f"write_delta({', '.join(f'{k}=' for k in legacy)}...) is deprecated; pass options=WriteOptions(...)",
        DeprecationWarning,
        stacklevel=3,
    )
    return replace(
        options or WriteOptions(), **{_WRITE_OPTION_RENAMES[k]: v for k, v in legacy.items() if v is not None}
    )


def has_delta_jars(spark: SparkSession) -> bool:
    """Whether this session can write Delta itself (delta-spark's classes are loadable).

    On Spark Classic the JVM is asked for ``io.delta.tables.DeltaTable`` (a session that names
    Delta's extension in its conf without the jars on its classpath does not count); over
    Spark Connect, where the server decides, the session's catalog setting is the hint.
    """
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        catalog = spark.conf.get("spark.sql.catalog.spark_catalog", "") or ""
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
        return "DeltaCatalog" in catalog or "DeltaSparkSessionExtension" in extensions
    try:
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
    except Exception:  # noqa: BLE001 - py4j raises a generic error when the class is missing
        return False
    return True


def write_delta(
    df: DataFrame,
    path: str | os.PathLike[str],
    codecs: Mapping[str, MLTCodec] | None = None,
    *,
    mode: WriteMode = "error",
    partition_by: Iterable[str] = (),
    run_id: str | None = None,
    options: WriteOptions | None = None,
    **deprecated: Any,
) -> DeltaWriteResult:
    """Write ``df`` as a Delta table with ``codecs`` stored in its properties.

    Args:
        df: the rows to write (tokens already added, e.g. with ``mlt_encode``).
        path: the table's location: a plain path or a URI (``file://``, ``s3://``,
            ``abfss://``, ``gs://``; see :mod:`spark_mlt.storage.fs`).
        codecs: codec per id column, stored as ``mlt.codec.<column>``.
        mode: ``"error"`` (the table must not exist), ``"append"`` or ``"overwrite"``.
        partition_by: partition columns (a new table only; an existing table keeps its own).
        run_id: an idempotency key: if the table already holds a commit with this run id,
            nothing is written and the result has ``skipped=True``; otherwise the run id is
            committed with the data (as a Delta application transaction).
        options: commit metadata, table properties, Parquet options, backend
            (:class:`WriteOptions`).
        deprecated: ``commit_info``, ``properties``, ``write_options`` and ``backend``, as
            0.1 took them (deprecated: use ``options``).

    Raises:
        TableExistsError: mode is ``"error"`` and a table exists at ``path``.
        CodecMismatchError: the table stores a different codec for one of the columns.
        TableSchemaError: the DataFrame's schema does not match the existing table's.

    Example::

        tokens = ratings.withColumn("userId_mlt", mlt_encode("userId", codec))
        write_delta(tokens, "/data/ratings_mlt", {"userId": codec}, mode="append")
    """
    opts = _legacy_write_options(options, deprecated)
    _check_arguments(mode, run_id, opts)
    location = locate(path)
    snapshot = _existing_table(location.uri)
    if snapshot is not None and mode == "error":
        raise TableExistsError(f"a Delta table already exists at {location.uri} (use mode='append' or 'overwrite')")
    wanted = dict(codecs or {})
    stored = merge_codecs(location.uri, snapshot.codecs, wanted) if snapshot is not None else wanted
    if run_id is not None and snapshot is not None and snapshot.has_run(run_id):
        return skipped_write(location.uri, snapshot.version, run_id)
    info = {"spark_mlt.mode": mode, **opts.commit_info}
    if run_id is not None:
        info["spark_mlt.run_id"] = run_id
    plan = WritePlan(
        location=location,
        mode=mode,
        partition_by=tuple(partition_by),
        codecs=wanted,
        properties={**opts.properties, **codec_properties(stored)},
        commit_info=info,
        run_id=run_id,
        parquet_options=dict(opts.parquet_options),
        snapshot=snapshot,
    )
    backend = opts.backend if opts.backend != "auto" else _default_backend(df.sparkSession)
    if backend == "delta-spark":
        return _delta_spark.write(df, plan)
    return _delta_rs.write(df, plan)


def _check_arguments(mode: str, run_id: str | None, options: WriteOptions) -> None:
    """Refuses unusable arguments before any work."""
    if mode not in WRITE_MODES:
        raise MLTError(f"mode must be 'error', 'append' or 'overwrite', got {mode!r}", parameter="mode")
    if options.backend not in _BACKENDS:
        raise MLTTypeError(f"options.backend must be one of {_BACKENDS}, got {options.backend!r}", parameter="options")
    if run_id is not None:
        run_app_id(run_id)


def _existing_table(location: str) -> TableSnapshot | None:
    """The table's current snapshot, or None when there is no table yet."""
    try:
        return read_snapshot(location)
    except MissingTableError:
        return None


def _default_backend(spark: SparkSession) -> Backend:
    return "delta-spark" if has_delta_jars(spark) else "delta-rs"


def check_data_page_version(version: object) -> Literal[1, 2]:
    """``version`` if it is a Parquet data page version (1 or 2); else a clear error."""
    if type(version) is int and version in (1, 2):
        return 1 if version == 1 else 2
    raise MLTError(
        f"data_page_version: the Parquet data page version must be 1 or 2, got {version!r}",
        parameter="data_page_version",
    )


def token_write_options(
    df: DataFrame, token_columns: Iterable[str], *, data_page_version: Literal[1, 2] = 2
) -> dict[str, str]:
    """Parquet writer options that make token columns cheap to write and small to store.

    Tokens are small, uniformly spread integers: Parquet's dictionary encoding buys little for
    them and is the writer's main cost, so it is turned off for the token columns' leaves.
    With ``data_page_version=2`` (the default) the files get Parquet's v2 data pages, whose
    integer encoding (``DELTA_BINARY_PACKED``) stores each token column in about the bits its
    values need instead of 8 bytes a value (``make bench-delta`` measures both effects; the
    README quotes a run). Spark 3.3+ and delta-rs / pyarrow read v2 pages (tested here); pass
    ``data_page_version=1`` for readers that do not.

    Example::

        options = WriteOptions(parquet_options=token_write_options(tokens, ["userId_mlt"]))
        write_delta(tokens, path, codecs, options=options)
    """
    options = {"parquet.writer.version": "v2"} if check_data_page_version(data_page_version) == 2 else {}
    for name in token_columns:
        kind = df.schema[name].dataType
        if isinstance(kind, ArrayType):
            leaves = [f"{name}.list.element"]
        elif isinstance(kind, StructType):
            leaves = [f"{name}.{child.name}" for child in kind.fields]
        else:
            leaves = [name]
        options.update({f"parquet.enable.dictionary#{leaf}": "false" for leaf in leaves})
    return options
