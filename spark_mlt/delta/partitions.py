"""Partition values as the log serialises them (the protocol's "Partition Value Serialization").

A file's partition values are strings in its ``add`` action, keyed by the partition columns'
physical names; an empty string (and a null) is a null value.

* Read: [`partition_value`][spark_mlt.delta.partitions.partition_value] types one in Spark as
  delta-spark types it, a cast, in the session's time zone for a timestamp without one (the
  scan and the sync's file search both use it: a value is typed once, one way).
* Written: Spark names a timestamp partition's folder in the writing session's time zone, which
  a reader elsewhere cannot know; [`utc_timestamp`][spark_mlt.delta.partitions.utc_timestamp]
  turns it into the protocol's recommended form, UTC in ISO 8601 (``2024-05-06T07:08:09.123456Z``),
  as delta-spark writes it (``spark.databricks.delta.write.utcTimestampPartitionValues``).

Example::

    rows.select(partition_value(F.col("p"), DateType()))
    utc_timestamp("2024-05-06 09:08:09.5", "Europe/Berlin")  # "2024-05-06T07:08:09.500000Z"
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo

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


_LOCAL = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_OFFSET = re.compile(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?")


def _zone(name: str) -> dt.tzinfo | None:
    """A Spark session time zone (a region, ``UTC``, or an offset such as ``+02:00``), None when
    it is none Python knows."""
    if name.upper() in ("UTC", "GMT", "Z", "UT"):
        return dt.timezone.utc
    offset = _OFFSET.fullmatch(name)
    if offset is not None:
        minutes = int(offset[2]) * 60 + int(offset[3] or 0)
        return dt.timezone(dt.timedelta(minutes=-minutes if offset[1] == "-" else minutes))
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def utc_timestamp(local: str, zone: str) -> str:
    """A timestamp partition value as Spark names its folder (``yyyy-MM-dd HH:mm:ss[.f]`` in the
    session time zone ``zone``) in the protocol's UTC form; the value itself when it is not in
    that form or the zone is unknown (then readers take it in their own time zone, as the
    protocol allows).

    Example::

        utc_timestamp("2024-01-01 00:00:00", "America/New_York")  # "2024-01-01T05:00:00.000000Z"
    """
    found, tz = _LOCAL.fullmatch(local.strip()), _zone(zone)
    if found is None or tz is None:
        return local
    fraction = (found[7] or "").ljust(6, "0")[:6]
    try:
        year, month, day, hour, minute, second = (int(found[i]) for i in range(1, 7))
        moment = dt.datetime(year, month, day, hour, minute, second, int(fraction), tzinfo=tz)
        text = moment.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")
    except (ValueError, OverflowError):
        return local
    return f"{text}Z"
