"""Comparing DataFrames the way the storage tests need it: exactly, on Spark's side."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def assert_same_rows(actual: DataFrame, expected: DataFrame) -> None:
    """Same column names and types, and the same rows as multisets (duplicates count), compared
    by Spark (``exceptAll`` both ways) so that large tables need not reach the driver."""
    assert [(f.name, f.dataType) for f in actual.schema] == [(f.name, f.dataType) for f in expected.schema]
    difference = actual.exceptAll(expected).withColumn("side", F.lit("extra"))
    difference = difference.unionByName(expected.exceptAll(actual).withColumn("side", F.lit("missing")))
    assert difference.limit(5).collect() == []
