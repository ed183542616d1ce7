"""A table's properties, typed once with Delta's defaults (the protocol's "Table Properties").

Every reader of a table property goes through [`TableConfig`][spark_mlt.delta.config.TableConfig]
(``snapshot.config``): column mapping, which columns get statistics and how long their strings
are, deletion vectors, the change data feed, append-only, in-commit timestamps and the retention
periods. The defaults are delta-spark's (``DeltaConfigs``), and ``delta.*`` keys are matched
without regard to case (delta-spark normalises the keys it writes; other writers may not).

A value delta-spark would refuse (``delta.dataSkippingNumIndexedCols = many``) is not guessed at:
where a wrong guess could cost rows it reads as the safe choice (no column statistics), and
where it cannot (a retention period) as the default.

Example::

    config = TableConfig.of({"delta.dataSkippingStringPrefixLength": "16"})
    config.string_prefix  # 16
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["ColumnMapping", "TableConfig", "parse_column_list", "parse_interval"]

ColumnMapping = Literal["none", "name", "id"]

#: Delta's defaults (delta-spark's DeltaConfigs).
DEFAULT_INDEXED_COLUMNS = 32
DEFAULT_STRING_PREFIX = 32
DEFAULT_LOG_RETENTION_MS = 30 * 24 * 3_600_000
DEFAULT_DELETED_FILE_RETENTION_MS = 7 * 24 * 3_600_000

_UNITS_MS = {
    "week": 7 * 24 * 3_600_000,
    "day": 24 * 3_600_000,
    "hour": 3_600_000,
    "minute": 60_000,
    "second": 1000,
    "millisecond": 1,
}
_INTERVAL_PART = re.compile(r"\s*(-?\d+)\s*(week|day|hour|minute|second|millisecond|microsecond)s?\s*")


def parse_interval(text: str) -> int | None:
    """The milliseconds of a Delta calendar interval (``interval 7 days``, ``1 week``,
    ``2 days 12 hours``), or None when it is none (months and years are not allowed).

    Example::

        parse_interval("interval 1 week")  # 604800000
    """
    rest = text.strip().lower()
    rest = rest[len("interval") :] if rest.startswith("interval") else rest
    if not rest.strip():
        return None
    total, position = 0.0, 0
    while position < len(rest):
        found = _INTERVAL_PART.match(rest, position)
        if found is None:
            return None
        number, unit = int(found[1]), found[2]
        total += number / 1000 if unit == "microsecond" else number * _UNITS_MS[unit]
        position = found.end()
    return int(total)


_IDENTIFIER = re.compile(r"\s*(?:`((?:[^`]|``)*)`|([A-Za-z0-9_]+))\s*")


def parse_column_list(text: str) -> list[list[str]] | None:
    """The column paths of a comma-separated list of multipart identifiers (``a, s.b, `x.y`.z``),
    as Delta reads ``delta.dataSkippingStatsColumns``; None when it is not such a list.

    Example::

        parse_column_list("a, s.b")  # [["a"], ["s", "b"]]
    """
    columns: list[list[str]] = []
    position, parts = 0, []
    while True:
        found = _IDENTIFIER.match(text, position)
        if found is None:
            return None
        parts.append(found.group(1).replace("``", "`") if found.group(1) is not None else found.group(2))
        position = found.end()
        if position == len(text):
            columns.append(parts)
            return columns
        if text[position] == ".":
            position += 1
        elif text[position] == ",":
            columns.append(parts)
            position, parts = position + 1, []
        else:
            return None


def _flag(properties: Mapping[str, str], *keys: str) -> bool:
    """A boolean property (the first of ``keys`` set), false by default and for anything but
    ``true`` (delta-spark's ``toBoolean``)."""
    for key in keys:
        if key in properties:
            return properties[key].strip().lower() == "true"
    return False


def _integer(properties: Mapping[str, str], key: str, default: int, *, minimum: int) -> int | None:
    """An integer property, its default when unset, None when it is no such integer."""
    value = properties.get(key)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        return None
    return number if number >= minimum else None


@dataclass(frozen=True)
class TableConfig:
    """A table's properties as Delta reads them (see the module's notes).

    Attributes:
        properties: every property, as the table holds it.
        column_mapping: ``delta.columnMapping.mode`` (``none``, ``name`` or ``id``).
        stats_columns: ``delta.dataSkippingStatsColumns`` as column paths (case as written),
            None when unset, ``()`` when it is no list of columns.
        indexed_columns: ``delta.dataSkippingNumIndexedCols`` (default 32, -1: all), None when
            it is no such number (then no column gets statistics).
        string_prefix: ``delta.dataSkippingStringPrefixLength`` (default 32): how many
            characters of a string its statistics keep.
        deletion_vectors: ``delta.enableDeletionVectors``: writers may write deletion vectors.
        change_data_feed: ``delta.enableChangeDataFeed`` (or its legacy key).
        append_only: ``delta.appendOnly``.
        in_commit_timestamps_from: the first version whose commits carry an in-commit timestamp
            (``delta.enableInCommitTimestamps``, ``delta.inCommitTimestampEnablementVersion``),
            None when the table has none.
        log_retention_ms: ``delta.logRetentionDuration`` (default 30 days).
        deleted_file_retention_ms: ``delta.deletedFileRetentionDuration`` (default 1 week).
    """

    properties: Mapping[str, str]
    column_mapping: ColumnMapping = "none"
    stats_columns: tuple[tuple[str, ...], ...] | None = None
    indexed_columns: int | None = DEFAULT_INDEXED_COLUMNS
    string_prefix: int = DEFAULT_STRING_PREFIX
    deletion_vectors: bool = False
    change_data_feed: bool = False
    append_only: bool = False
    in_commit_timestamps_from: int | None = None
    log_retention_ms: int = DEFAULT_LOG_RETENTION_MS
    deleted_file_retention_ms: int = DEFAULT_DELETED_FILE_RETENTION_MS

    @classmethod
    def of(cls, properties: Mapping[str, str | None]) -> TableConfig:
        """The configuration of a table with these properties (null values left out)."""
        given = {key: value for key, value in properties.items() if value is not None}
        lowered = {key.lower() if key.lower().startswith("delta.") else key: value for key, value in given.items()}
        mode = lowered.get("delta.columnmapping.mode", "none").strip().lower()
        named = lowered.get("delta.dataskippingstatscolumns")
        paths = None if named is None else parse_column_list(named)
        prefix = _integer(lowered, "delta.dataskippingstringprefixlength", DEFAULT_STRING_PREFIX, minimum=0)
        in_commit = None
        if _flag(lowered, "delta.enableincommittimestamps"):
            in_commit = _integer(lowered, "delta.incommittimestampenablementversion", 0, minimum=0) or 0
        return cls(
            properties=given,
            column_mapping="name" if mode == "name" else "id" if mode == "id" else "none",
            stats_columns=None if named is None else tuple(tuple(p) for p in paths or ()),
            indexed_columns=_integer(lowered, "delta.dataskippingnumindexedcols", DEFAULT_INDEXED_COLUMNS, minimum=-1),
            string_prefix=DEFAULT_STRING_PREFIX if prefix is None else prefix,
            deletion_vectors=_flag(lowered, "delta.enabledeletionvectors"),
            change_data_feed=_flag(lowered, "delta.enablechangedatafeed", "delta.enablechangedatacapture"),
            append_only=_flag(lowered, "delta.appendonly"),
            in_commit_timestamps_from=in_commit,
            log_retention_ms=_retention(lowered, "delta.logretentionduration", DEFAULT_LOG_RETENTION_MS),
            deleted_file_retention_ms=_retention(
                lowered, "delta.deletedfileretentionduration", DEFAULT_DELETED_FILE_RETENTION_MS
            ),
        )


def _retention(properties: Mapping[str, str], key: str, default: int) -> int:
    value = properties.get(key)
    parsed = None if value is None else parse_interval(value)
    return default if parsed is None else parsed
