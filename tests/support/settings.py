"""Spark settings for the length of a block, as a test needs them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` on ``spark`` while the block runs, unset after it.

    Example::

        with session_settings(spark, {"parquet.block.size": "1024"}):
            rows.write.format("delta").save(path)
    """
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            spark.conf.unset(key)
