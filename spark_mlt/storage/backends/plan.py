"""What a write will do, decided before any backend runs, and what it did.

[`write_delta`][spark_mlt.storage.writer.write_delta] checks its arguments and the table once, then
hands one frozen [`WritePlan`][spark_mlt.storage.backends.plan.WritePlan] to a backend (``backends.delta_rs`` or
``backends.delta_spark``); both return a [`DeltaWriteResult`][spark_mlt.storage.backends.plan.DeltaWriteResult]. The
checks of a write's settings live here, once: the jobs' options call the same ones, so a bad value
gives the same error wherever it is given.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from spark_mlt.codec import MLTCodec
from spark_mlt.delta.fs import Location
from spark_mlt.errors import TableExistsError, TableSchemaError
from spark_mlt.options import check_choice
from spark_mlt.storage.properties import AppTransaction
from spark_mlt.storage.table import TableSnapshot

__all__ = [
    "WRITE_MODES",
    "DeltaWriteResult",
    "ReplacedFile",
    "Vacuumed",
    "WriteMode",
    "WritePlan",
    "check_mode",
    "check_schema",
    "refuse_existing_table",
    "skipped_write",
    "spark_arrow_schema",
]

WriteMode = Literal["error", "append", "overwrite"]
WRITE_MODES: tuple[WriteMode, ...] = get_args(WriteMode)


def check_mode(mode: object) -> WriteMode:
    """``mode`` if it is a write mode (`WRITE_MODES`).

    Raises:
        OptionError: any other value, naming ``mode``.
    """
    return check_choice("mode", mode, WRITE_MODES)


def refuse_existing_table(location: str) -> TableExistsError:
    """The error of a ``mode="error"`` write that finds a table at ``location``."""
    return TableExistsError(
        f"mode='error' and a Delta table already exists at {location}; pass mode='append' or mode='overwrite'",
        parameter="mode",
    )


@dataclass(frozen=True)
class DeltaWriteResult:
    """What a write did: the table's new version, rows and files written, and timings."""

    path: str
    version: int
    rows: int
    files: int
    backend: str
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: bool = False
    """True when the write's run id (or transaction) was already committed: nothing was written."""


@dataclass(frozen=True)
class WritePlan:
    """One write, checked: where, how, and the table as it was when the write was planned.

    Attributes:
        location: the table's location.
        mode: the write mode.
        partition_by: partition columns for a new table (an existing table keeps its own).
        codecs: the codecs the caller passed (checked again if another writer creates the
            table while this write runs).
        properties: the table properties of a new table (codecs, format version, extras).
        commit_info: the commit's metadata.
        transaction: the write's application transaction (its idempotency key), or None.
        parquet_options: options for Spark's Parquet writer.
        snapshot: the table when the write was planned; None when there was no table.
        replaces: files of ``snapshot`` the commit removes (their rows rewritten, or gone):
            the commit is refused if another writer removed one of them meanwhile.
        resize: an overwrite that replaces the table's codecs and schema with the plan's
            (every row re-tokenized); older versions keep theirs.
    """

    location: Location
    mode: WriteMode
    partition_by: tuple[str, ...]
    codecs: Mapping[str, MLTCodec]
    properties: Mapping[str, str]
    commit_info: Mapping[str, Any]
    transaction: AppTransaction | None
    parquet_options: Mapping[str, str]
    snapshot: TableSnapshot | None
    replaces: tuple[ReplacedFile, ...] = ()
    resize: bool = False


@dataclass(frozen=True)
class ReplacedFile:
    """A data file a write removes, as the table's log lists it (path relative to the table,
    decoded; its size and partition values as the log holds them)."""

    path: str
    size: int
    partition_values: Mapping[str, str | None]


@dataclass(frozen=True)
class Vacuumed:
    """What a vacuum deleted (or, in a dry run, would delete): paths relative to the table, and
    the retention it kept removed files for, in milliseconds."""

    files: list[str]
    retention_ms: int


def skipped_write(path: str, version: int, transaction: AppTransaction | None) -> DeltaWriteResult:
    """The result of a write whose ``transaction`` the table already holds: nothing written."""
    logging.getLogger("spark_mlt").warning(
        "%s is already committed to %s: nothing written (idempotent re-run)", transaction, path
    )
    return DeltaWriteResult(path, version, 0, 0, "none", {}, skipped=True)


def spark_arrow_schema(df: DataFrame) -> pa.Schema:
    """The DataFrame's schema in Arrow, timestamps as UTC instants (Delta's ``timestamp``)."""
    # PySpark 3.5 has no ``timezone`` argument and always maps timestamps to UTC.
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(df.schema, timezone="UTC")
    return to_arrow_schema(df.schema)


def check_schema(snapshot: TableSnapshot, arrow_schema: pa.Schema) -> list[str]:
    """Refuses a DataFrame whose schema differs from the table's; returns its partition columns.

    Nullability is not compared, at any depth: a nullable DataFrame column or field goes into a
    NOT NULL one of the table, whose rule then checks each row (as delta-spark does)."""
    held, given = ([(f.name, nullable_type(f.type)) for f in schema] for schema in (snapshot.schema, arrow_schema))
    if held != given:
        raise TableSchemaError(
            f"df: the DataFrame's schema does not match the table at {snapshot.path}:\n"
            f"  table:     {snapshot.schema.to_string(show_schema_metadata=False)}\n"
            f"  DataFrame: {arrow_schema.to_string(show_schema_metadata=False)}",
            parameter="df",
        )
    return list(snapshot.partition_columns)


def nullable_type(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every field, element and map value nullable: types compared as Delta
    compares them (a column's nullability aside).

    Example::

        >>> nullable_type(pa.list_(pa.field("item", pa.int64(), nullable=False))) == pa.list_(pa.int64())
        True
    """
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, nullable_type(f.type)) for f in kind])
    if pa.types.is_large_list(kind):
        return pa.large_list(nullable_type(kind.value_type))
    if pa.types.is_list(kind):
        return pa.list_(nullable_type(kind.value_type))
    if pa.types.is_map(kind):
        return pa.map_(nullable_type(kind.key_type), nullable_type(kind.item_type))
    return kind
