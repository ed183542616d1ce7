"""Small DataFrames built on the driver (a table's file list, its deletion vectors' runs): the
query plans of the jar-free reader and writer join them to the rows.

Built from Arrow where the session takes an Arrow table (PySpark 4: a ``LocalTableScan`` in the
plan, nothing for Python workers to do); from a list of tuples before that, which Spark turns
into an RDD that Python workers serialize in each job that reads it. Measured on local[2]:
about 0.05 s a job for the Arrow table against 0.3-0.5 s for the list, and a first job of ~10 s
while the session's Python workers start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, StructType, TimestampNTZType, TimestampType

__all__ = ["arrow_frames", "local_frame", "pandas_frame"]


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: StructType) -> DataFrame:
    """``rows`` (tuples in ``schema``'s field order) as a DataFrame of ``schema``.

    Example::

        files = local_frame(spark, [("part-0.parquet", 0)], StructType([...]))
    """
    if not arrow_frames(spark) or _has_timestamps(schema):
        # timestamps: a naive datetime is the session's local time to Spark, UTC to Arrow
        return spark.createDataFrame(list(rows), schema)
    arrow = to_arrow_schema(schema)
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in schema.fields]
    table = pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, arrow, strict=True)], schema=arrow)
    return spark.createDataFrame(table, schema)


def arrow_frames(spark: SparkSession) -> bool:
    """Whether ``spark`` builds a local frame from Arrow (PySpark 4: no Python worker reads it)."""
    return int(spark.version.split(".", 1)[0]) >= 4


def pandas_frame(spark: SparkSession, frame: pd.DataFrame, schema: StructType) -> DataFrame:
    """A pandas ``frame`` (columns named and ordered as ``schema``'s fields, no timestamps) as a
    DataFrame of ``schema``, column by column through Arrow: for a session that takes it (see
    `arrow_frames`; `local_frame` builds one from rows on any session).

    Example::

        keys = pandas_frame(spark, changed[["customer_id"]], StructType([...]))
    """
    table = pa.Table.from_pandas(frame, schema=to_arrow_schema(schema), preserve_index=False)
    return spark.createDataFrame(table, schema)


def _has_timestamps(kind: DataType) -> bool:
    if isinstance(kind, TimestampType | TimestampNTZType):
        return True
    return any(_has_timestamps(child) for child in _children(kind))


def _children(kind: DataType) -> list[DataType]:
    if isinstance(kind, StructType):
        return [f.dataType for f in kind.fields]
    inner = [getattr(kind, name, None) for name in ("elementType", "keyType", "valueType")]
    return [child for child in inner if isinstance(child, DataType)]
