"""Other writers' statistics read back as bounds, by delta-spark's reading rules: the sync's
search for the files that hold its keys never misses one on tables delta-spark (or Databricks)
wrote, whose timestamp maxima are cut down to the millisecond and whose string maxima may carry
older Delta's U+FFFD tie-breaker."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from spark_mlt.delta import clear_cache
from spark_mlt.delta.stats import Bounds, column_bounds, parse_stats
from spark_mlt.storage import WriteOptions, key_rows, read_snapshot, write_delta
from spark_mlt.storage.spark_sql import session_conf

UTC = dt.timezone.utc


def _bounds(kind: Any, low: Any, high: Any, *, nulls: int | None = 0, records: int | None = 3) -> Bounds:
    stats: dict[str, Any] = {"minValues": {"c": low}, "maxValues": {"c": high}}
    if records is not None:
        stats["numRecords"] = records
    if nulls is not None:
        stats["nullCount"] = {"c": nulls}
    text = json.dumps(stats).replace('"@', "").replace('@"', "")  # "@1.50@" -> 1.50: an exact number
    return column_bounds(parse_stats(text), ("c",), kind)


@pytest.mark.parametrize(
    ("kind", "low", "high", "expected"),
    [
        # delta-spark cuts a timestamp maximum down to the millisecond: a millisecond more is a bound
        (
            TimestampType(),
            "2024-01-02T03:04:05.678Z",
            "2024-01-02T03:04:05.678Z",
            (dt.datetime(2024, 1, 2, 3, 4, 5, 678000, UTC), dt.datetime(2024, 1, 2, 3, 4, 5, 679000, UTC)),
        ),
        (
            TimestampNTZType(),
            "2024-01-02T03:04:05.678",
            "2024-01-02T03:04:05.678",
            (dt.datetime(2024, 1, 2, 3, 4, 5, 678000), dt.datetime(2024, 1, 2, 3, 4, 5, 679000)),
        ),
        # Delta 3.2 and 3.3 cut offsets with seconds to whole minutes: a minute wider both ways
        (
            TimestampType(),
            "1900-01-01T00:53:28.000+00:53",
            "1900-01-01T00:53:28.000+00:53",
            (dt.datetime(1899, 12, 31, 23, 59, 28, tzinfo=UTC), dt.datetime(1900, 1, 1, 0, 1, 28, 1000, UTC)),
        ),
        (
            TimestampType(),
            "9999-12-31T23:59:59.999Z",
            "9999-12-31T23:59:59.999Z",
            (dt.datetime(9999, 12, 31, 23, 59, 59, 999000, UTC), None),
        ),
        # a string maximum cut with older Delta's U+FFFD is no bound in UTF-8 order; Delta 3.3's are
        (StringType(), "a" * 32, "a" * 32 + "\ufffd", ("a" * 32, None)),
        (StringType(), "a", "a" * 32 + "\x7f", ("a", "a" * 32 + "\x7f")),
        (StringType(), "a", "a" * 32 + "\U0010ffff", ("a", "a" * 32 + "\U0010ffff")),
        # NaN and infinities are no bounds; decimals exact, rounded outward to the column's scale
        (DoubleType(), -1.5, "NaN", (-1.5, None)),
        (DoubleType(), "-Infinity", 2.0, (None, 2.0)),
        (
            DecimalType(38, 2),
            "@-99999999999999999999999999999999999.99@",
            "@1.505@",
            (Decimal("-99999999999999999999999999999999999.99"), Decimal("1.51")),
        ),
        (DecimalType(10, 2), "@0E-18@", "@1E+20@", (Decimal("0.00"), None)),
        (LongType(), -(2**63), 2**63 - 1, (-(2**63), 2**63 - 1)),
        (DateType(), "0001-01-01", "9999-12-31", (dt.date(1, 1, 1), dt.date(9999, 12, 31))),
    ],
)
def test_bounds_read_by_delta_sparks_rules(kind: Any, low: Any, high: Any, expected: tuple[Any, Any]) -> None:
    bounds = _bounds(kind, low, high)
    assert (bounds.low, bounds.high, bounds.empty) == (*expected, False)


def test_bounds_count_only_with_the_files_null_count_and_rows() -> None:
    """delta-spark uses no minimum or maximum without the column's ``nullCount`` and the file's
    ``numRecords``; a file whose values are all null holds no value of the column."""
    assert _bounds(LongType(), 1, 5, nulls=None) == Bounds()
    assert _bounds(LongType(), 1, 5, records=None) == Bounds()
    assert _bounds(LongType(), None, None, nulls=3) == Bounds(empty=True)
    assert column_bounds(parse_stats(None), ("c",), LongType()) == Bounds()
    assert column_bounds(parse_stats("not json"), ("c",), LongType()) == Bounds()


def _rewrite_stats(path: str, column: str, maximum: Any) -> None:
    """Puts ``maximum`` into every add action's statistics of ``column``, as another writer
    would have written it."""
    log = Path(path) / "_delta_log"
    for commit in sorted(log.glob("*.json")):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            stats = json.loads(action["add"].get("stats") or "{}") if "add" in action else {}
            if "maxValues" in stats:
                stats["maxValues"][column] = maximum
                action["add"]["stats"] = json.dumps(stats)
            lines.append(json.dumps(action))
        commit.write_text("\n".join(lines) + "\n")
    clear_cache()


@pytest.mark.parametrize(
    ("schema", "key", "written_max"),
    [
        # delta-spark's maximum of 03:04:05.678901 is 03:04:05.678 (cut down)
        ("ts timestamp, v int", dt.datetime(2024, 1, 2, 3, 4, 5, 678901, UTC), "2024-01-02T03:04:05.678Z"),
        # Delta 3.2's maximum of "a" * 32 + "😀": "a" * 32 + U+FFFD, below it in UTF-8 order
        ("ts string, v int", "a" * 32 + "\U0001f600", "a" * 32 + "\ufffd"),
    ],
)
def test_the_file_search_finds_a_key_beyond_another_writers_cut_maximum(
    spark: SparkSession, tmp_path: Path, schema: str, key: Any, written_max: str
) -> None:
    """Pins the sync's file search reading delta-spark's cut maxima as exact: it missed the
    file that holds the key, and the key's old row stayed in the mirror beside its new one."""
    path = str(tmp_path / "t")
    rows = spark.createDataFrame([(key, 1)], schema).coalesce(1)
    with session_conf(spark, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
        write_delta(rows, path, {}, options=WriteOptions(backend="delta-rs"))
    _rewrite_stats(path, "ts", written_max)
    keyed = key_rows(spark, read_snapshot(path), rows.select("ts"), ["ts"], backend="delta-rs")
    assert len(keyed.candidates) == 1
    assert keyed.held.count() == 1


@pytest.mark.delta_spark
@pytest.mark.parametrize(
    ("column", "kind", "values"),
    [
        ("ts", "TIMESTAMP", ["2024-01-02 03:04:05.678901", "2024-01-02 03:04:05.678999", "1970-01-01 00:00:00.000001"]),
        ("s", "STRING", ["a" * 32 + "\U0001f600", "a" * 31 + "é" * 5, "\U0010ffff" * 40, "z" * 70]),
    ],
)
def test_the_file_search_finds_every_key_of_a_table_delta_spark_wrote(
    spark: SparkSession, tmp_path: Path, column: str, kind: str, values: list[str]
) -> None:
    """Keys at the edges delta-spark cuts its bounds at (sub-millisecond timestamp maxima,
    strings past the 32-character prefix), one file each: the jar-free file search finds the
    file of every key, on this line's Delta."""
    path = str(tmp_path / "t")
    target = f"delta.`{path}`"
    spark.sql(f"CREATE TABLE {target} ({column} {kind}, v INT) USING delta")
    for value in values:
        escaped = value.replace("'", "\\'")
        spark.sql(f"INSERT INTO {target} VALUES (CAST('{escaped}' AS {kind}), 1)")
    keys = spark.read.format("delta").load(path).select(column)
    keyed = key_rows(spark, read_snapshot(path), keys, [column], backend="delta-rs")
    assert len(keyed.candidates) == len(values)
    assert keyed.held.count() == len(values)
