"""Reading a file's statistics back as bounds of its values, by delta-spark's reading rules.

Whoever prunes files by their statistics in spark-mlt (the sync's search for the files that
hold a key, `spark_mlt.storage.replace`) reads them here, for files any writer wrote. A bound
read here is one a file's values cannot pass, or None (unknown: the file is kept):

* the column's bounds count only when the file records its ``nullCount`` and ``numRecords``
  (delta-spark uses no ``minValues``/``maxValues`` without them); a file whose ``nullCount``
  equals its ``numRecords`` holds no value of the column at all;
* a timestamp maximum is a millisecond more than written: writers truncate it down to the
  millisecond (delta-spark's reader adds the millisecond back the same way);
* a string maximum is taken as written: a maximum cut to the table's prefix ends in a
  tie-breaker (U+007F or U+10FFFF, Delta 3.3 and later) that keeps it above the values, except
  older Delta's U+FFFD, which is no bound in UTF-8 order for characters above U+FFFF: a maximum
  ending in U+FFFD is read as unknown. A string minimum is a prefix of the minimum, a bound as is;
* ``"NaN"`` and infinities are no bounds (Spark sorts NaN above every number); decimals are read
  exactly; a timestamp written with an offset other than ``Z`` is widened by a minute (Delta 3.2
  and 3.3 wrote time zone offsets cut to whole minutes).

Example::

    stats = parse_stats(add.stats)
    bounds = column_bounds(stats, ("customer_id",), LongType())
    bounds.low, bounds.high
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, InvalidOperation
from typing import Any

from pyspark.sql.types import (
    DataType,
    DateType,
    DecimalType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from spark_mlt.delta.stats.columns import FLOATS, INTEGERS

__all__ = ["Bounds", "FileStats", "column_bounds", "parse_stats"]

_UTC = dt.timezone.utc
_MILLISECOND = dt.timedelta(milliseconds=1)
_MINUTE = dt.timedelta(minutes=1)
_OLD_TIE_BREAKER = "\ufffd"
_OFFSET = re.compile(r"([+-]\d{2}:?\d{2}(?::?\d{2})?|Z)$")


@dataclass(frozen=True)
class FileStats:
    """A file's ``stats`` document, parsed (decimals exact, ``"NaN"`` kept as text)."""

    num_records: int | None
    min_values: Mapping[str, Any]
    max_values: Mapping[str, Any]
    null_count: Mapping[str, Any]


@dataclass(frozen=True)
class Bounds:
    """What a file's statistics say of one column's values.

    Attributes:
        low: a value no value of the column in the file is below, or None (unknown).
        high: a value no value of the column in the file is above, or None (unknown).
        empty: the file holds no (non-null) value of the column at all.
    """

    low: Any = None
    high: Any = None
    empty: bool = False


def parse_stats(text: str | None) -> FileStats | None:
    """A ``stats`` document (an ``add`` action's JSON), or None when there is none or it is no
    JSON object.

    Example::

        parse_stats('{"numRecords":2,"minValues":{"a":1},"maxValues":{"a":5},"nullCount":{"a":0}}')
    """
    if text is None:
        return None
    try:
        document = json.loads(text, parse_float=Decimal, parse_int=int)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    records = document.get("numRecords")
    return FileStats(
        num_records=records if isinstance(records, int) else None,
        min_values=_mapping(document.get("minValues")),
        max_values=_mapping(document.get("maxValues")),
        null_count=_mapping(document.get("nullCount")),
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _get(tree: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = tree
    for name in path:
        if not isinstance(node, Mapping) or name not in node:
            return None
        node = node[name]
    return None if isinstance(node, Mapping) else node


def column_bounds(stats: FileStats | None, path: tuple[str, ...], kind: DataType) -> Bounds:
    """The bounds of the column at ``path`` (physical names) of Delta type ``kind`` in a file,
    read by the rules in the module's notes, as the Python values Spark compares the column with
    (``int``, ``float``, ``Decimal``, ``date``, ``datetime`` (UTC-aware for a timestamp, naive
    without time zone) or ``str``).

    Example::

        column_bounds(parse_stats(add.stats), ("id",), LongType())  # Bounds(low=1, high=99)
    """
    if stats is None or stats.num_records is None:
        return Bounds()
    nulls = _get(stats.null_count, path)
    if not isinstance(nulls, int):
        return Bounds()
    if nulls >= stats.num_records:
        return Bounds(empty=True)
    low = _value(kind, _get(stats.min_values, path), upper=False)
    high = _value(kind, _get(stats.max_values, path), upper=True)
    return Bounds(low, high)


def _value(kind: DataType, raw: Any, *, upper: bool) -> Any:
    """One bound as a value of ``kind`` by the module's rules, None when it is no bound."""
    if raw is None:
        return None
    read = next((read for types, read in _READERS if isinstance(kind, types)), None)
    if read is None:
        return None
    try:
        return read(kind, raw, upper)
    except (ValueError, TypeError, InvalidOperation, OverflowError):
        return None


def _integer(kind: DataType, raw: Any, upper: bool) -> int | None:
    return int(raw) if isinstance(raw, int | Decimal) and int(raw) == raw else None


def _float(kind: DataType, raw: Any, upper: bool) -> float | None:
    number = float(raw)  # "NaN" and "Infinity" too: no bounds
    return number if math.isfinite(number) else None


def _date(kind: DataType, raw: Any, upper: bool) -> dt.date:
    return dt.date.fromisoformat(str(raw)[:10])


def _string(kind: DataType, raw: Any, upper: bool) -> str | None:
    text = str(raw)
    return None if upper and text.endswith(_OLD_TIE_BREAKER) else text


_EXACT = Context(prec=200)


def _decimal(kind: DecimalType, raw: Any, upper: bool) -> Decimal | None:
    """A decimal bound at the column's scale, rounded outward (a writer may keep more digits),
    None when it does not fit the column's precision."""
    step = Decimal(1).scaleb(-kind.scale)
    value = Decimal(str(raw)).quantize(step, rounding=ROUND_CEILING if upper else ROUND_FLOOR, context=_EXACT)
    digits = len(value.as_tuple().digits)
    return value if digits <= kind.precision else None


def _timestamp(kind: DataType, raw: Any, upper: bool) -> dt.datetime | None:
    """A timestamp bound: its maximum a millisecond later (see the module's notes)."""
    text, zone = str(raw), isinstance(kind, TimestampType)
    offset = _OFFSET.search(text)
    widen = _MILLISECOND if upper else dt.timedelta(0)
    if offset is not None and offset[1] not in ("Z", "+00:00", "+0000", "-00:00"):
        widen += _MINUTE  # an offset maybe cut to whole minutes
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if zone:
        moment = moment.astimezone(_UTC) if moment.tzinfo is not None else moment.replace(tzinfo=_UTC)
    else:
        moment = moment.replace(tzinfo=None)
    return moment + widen if upper else moment - widen


_Reader = Callable[[Any, Any, bool], Any]
_READERS: tuple[tuple[type | tuple[type, ...], _Reader], ...] = (
    (INTEGERS, _integer),
    (FLOATS, _float),
    (DecimalType, _decimal),
    (DateType, _date),
    ((TimestampType, TimestampNTZType), _timestamp),
    (StringType, _string),
)
