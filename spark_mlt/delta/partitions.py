"""Partition values as the log serialises them (the protocol's "Partition Value Serialization").

A file's partition values are strings in its ``add`` action, keyed by the partition columns'
physical names; an empty string (and a null) is a null value.

* Read: [`partition_value`][spark_mlt.delta.partitions.partition_value] types one in Spark as
  delta-spark types it, a cast, in the session's time zone for a timestamp without one (the
  scan and the sync's file search both use it: a value is typed once, one way).
* Written: a timestamp partition value goes into the log in the protocol's recommended form, UTC
  in ISO 8601 (``2024-05-06T07:08:09.123456Z``), as delta-spark writes it
  (``spark.databricks.delta.write.utcTimestampPartitionValues``):
  [`utc_timestamp`][spark_mlt.delta.partitions.utc_timestamp] writes it from the instant's UTC
  wall clock. Not from a time in the writing session's time zone: a reader elsewhere cannot
  know that zone, and in the hour a fall-back to standard time repeats, one local time stands
  for two instants.

Example::

    rows.select(partition_value(F.col("p"), DateType()))
    utc_timestamp("2024-05-06 07:08:09.5")  # "2024-05-06T07:08:09.500000Z"
"""

from __future__ import annotations

import datetime as dt
import re

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

__all__ = ["partition_value", "utc_timestamp"]


def partition_value(text: Column, kind: DataType) -> Column:
    """A partition value typed from the log's string (``""`` is null, the protocol says), as
    delta-spark types it: a cast, in the session's time zone for a timestamp without one.

    Example::

        partition_value(F.col("p"), DateType())
    """
    return F.when(text == F.lit(""), F.lit(None)).otherwise(text).cast(kind)


_WALL_CLOCK = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")


def utc_timestamp(wall_clock: str) -> str:
    """The log's form of a timestamp partition value given as its UTC wall clock, as Spark names
    a TIMESTAMP_NTZ folder (``yyyy-MM-dd HH:mm:ss[.ffffff]``): UTC in ISO 8601, the protocol's
    recommended form.

    Raises:
        ValueError: ``wall_clock`` is no such time.

    Example::

        utc_timestamp("2024-11-03 06:30:00.25")  # "2024-11-03T06:30:00.250000Z"
    """
    found = _WALL_CLOCK.fullmatch(wall_clock)
    if found is None:
        raise ValueError(f"{wall_clock!r} is no timestamp of the form yyyy-MM-dd HH:mm:ss[.ffffff]")
    year, month, day, hour, minute, second = (int(found[i]) for i in range(1, 7))
    moment = dt.datetime(year, month, day, hour, minute, second, int((found[7] or "").ljust(6, "0")))
    return f"{moment.isoformat(timespec='microseconds')}Z"
