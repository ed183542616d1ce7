"""A differential harness for Delta file statistics: every reader must count, with the
statistics the jar-free writer committed, what it counts with its statistics-based skipping off.

Three parts, each driven by one ``random.Random`` (a case is named by its seed):

* [`generate`][tests.support.differential.generate]: a table (every Spark type, structs two and
  three deep, arrays and maps, names that collide with Parquet's own leaf names, partition
  columns, column mapping, the ``delta.dataSkipping*`` properties), its rows (NaN, -0.0,
  infinities, nulls, extreme decimals, dates and timestamps from year 1 to 9999 with and without
  sub-millisecond parts, empty, control, non-ASCII, surrogate-pair and very long strings), the
  session's ``spark.sql.parquet.*`` settings and the Parquet writer's options (row groups of a
  few rows, statistics truncated or turned off), written by
  ``write_delta(..., WriteOptions(backend="delta-rs"))`` in two commits of several files.
* [`predicates`][tests.support.differential.predicates]: comparisons, ``IN``, ``BETWEEN`` and
  null tests on every leaf column outside arrays and maps, at the edges of its values and just
  beyond them, and a few ``AND`` / ``OR`` of them, rendered for each reader's dialect.
* the readers ([`READERS`][tests.support.differential.READERS]), each giving per predicate its
  count with the table's statistics and its count without its own Delta skipping:

  ====================  ==================================================  ===============================
  reader                with statistics                                     without
  ====================  ==================================================  ===============================
  delta-spark           ``count(*) ... WHERE p`` (one ``UNION ALL``)        ``count_if(p)`` of one scan,
                                                                            ``stats.skipping=false``
  pyarrow-dataset       ``to_pyarrow_dataset().count_rows(filter=)``        the same fragments, only their
                                                                            partition values as guarantees
  pyarrow-filters       ``to_pyarrow_table(filters=<DNF tuples>)``          as above
  delta-rs-file-uris    rows of the files ``file_uris(file_pruning_         rows of every file
                        predicate=<SQL>)`` keeps
  delta-rs-scan         ``DeltaTable.scan(predicate=)`` (DataFusion)        the same on the table's twin
  polars                ``scan_delta(...).filter(e)``                       the same without the add
                                                                            actions' statistics
  duckdb                ``delta_scan(...) WHERE p`` (delta-kernel-rs)       ``pushdown_filters='none'``
  ====================  ==================================================  ===============================

  Each "without" keeps the reader's own Parquet row-group pruning (Spark's, Arrow's, DataFusion's,
  Polars' and DuckDB's pruning by the footers is theirs, not the table's), or has it off on both
  sides (delta-spark): only the Delta statistics are taken away. The twin of a table is its log
  with the statistics stripped from every ``add`` (the data files by absolute URI) and one more
  partition column, ``__file``, naming each file: DataFusion counts the matching rows of each
  file there in one query.
* an oracle besides the readers ([`audit`][tests.support.differential.audit]): every bound and
  null count of every file against the file's own values (reported as the reader
  ``statistics``), and for each finding the wrong statistics of the files holding its rows.

A reader that cannot read a table or a predicate skips it with the reason, counted in the
summary; an exception on a table it claims to read is a finding, as is a count with statistics
above or below the count without. Skipped, each reproduced on a table that deltalake or any
writer makes (``KNOWN_READER_ERRORS`` lists the errors that are the readers' own):

* pyarrow dataset and tuple filters: column mapping (refused); INT96 timestamps beyond
  1677-2262 for ``to_pyarrow_table`` (read as nanoseconds); a predicate whose count without
  Delta's statistics is not Arrow's exact count (every row read, then filtered): Arrow prunes row
  groups by the footers' own statistics with its own rules (a NaN in a file whose footer bounds
  it by its other values), and ``count_rows`` counts a row group whose footer implies the filter
  without reading it; where that count is exact, the count with statistics must be it. Not
  skipped: a column that a file gives no bounds of while it is one of the table's statistics
  columns (deltalake 1.6 turns the absent bounds into ``c >= null and c <= null``: every predicate
  on the column loses rows, on delta-spark's own boolean columns too); the jar-free writer takes
  such columns out of the table's statistics columns first.
* ``file_uris(file_pruning_predicate=)``: struct fields below the first level (DataFusion
  cannot plan ``get_field`` with three arguments for file skipping).
* DuckDB's ``delta_scan``: Hadoop's LZ4 codec, and names with a dot (the kernel's predicate
  splits a column name at its dots: MissingColumnError).
* Polars: column mapping (refused).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import functools
import glob
import inspect
import json
import math
import os
import random
import struct
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spark_mlt.column.sqltext import identifier, string
from spark_mlt.storage import WriteOptions, write_delta
from spark_mlt.storage.spark_sql import session_conf
from tests.support.stats_cases import delta_rs_creates_column_mapping

_UTC = dt.timezone.utc
_INTEGERS = (ByteType, ShortType, IntegerType, LongType)
_FLOATS = (FloatType, DoubleType)
_TIMES = (TimestampType, TimestampNTZType)

# --- cases ------------------------------------------------------------------------------------

#: Column names: Parquet's own leaf and group names (``element``, ``list``, ``key``, ``value``,
#: ``key_value``, and the legacy format's ``array``, ``bag``, ``map``), and each other at every depth.
NAMES = ("value", "key", "element", "list", "array", "bag", "key_value", "map", "id", "a", "k")
#: Names a table may have only under column mapping (Delta refuses them otherwise).
MAPPED_NAMES = ("sp ace", "dot.ted", "Ümlaut", "a,b")

#: Decimals: INT32 (precision <= 9), INT64 (<= 18) and FIXED_LEN_BYTE_ARRAY Parquet columns.
DECIMALS = ((1, 0), (5, 2), (9, 0), (9, 9), (10, 0), (18, 4), (18, 18), (19, 0), (30, 2), (38, 0), (38, 10), (38, 38))

#: Session settings that change what lands in a Parquet file, and their values (drawn evenly).
#: A session setting left as the session has it (unset).
UNSET = "(unset)"
SESSION_SETTINGS: dict[str, tuple[str, ...]] = {
    # unset: the session's default, which the jar-free writer writes as TIMESTAMP_MICROS
    "spark.sql.parquet.outputTimestampType": (UNSET, "INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS"),
    "spark.sql.parquet.writeLegacyFormat": ("false", "true"),
    # LEGACY (Spark's footer then says so, and the writer leaves out every date and time bound)
    # one time in four, so that most cases still bound their dates and timestamps
    "spark.sql.parquet.datetimeRebaseModeInWrite": ("CORRECTED", "CORRECTED", "CORRECTED", "LEGACY"),
    "spark.sql.parquet.int96RebaseModeInWrite": ("CORRECTED", "CORRECTED", "CORRECTED", "LEGACY"),
    "spark.sql.parquet.compression.codec": ("snappy", "gzip", "zstd", "lz4", "lz4_raw", "uncompressed"),
    "spark.sql.parquet.fieldId.write.enabled": ("false", "true"),
}


@dataclass
class Case:
    """One generated table, its rows and how they are written.

    Attributes:
        seed: the seed ``generate`` drew it from (``SPARK_MLT_DIFF_SEED`` reruns it).
        schema: the columns.
        rows: the rows, as ``spark.createDataFrame(rows, schema)`` takes them.
        partition_by: partition columns.
        properties: Delta table properties (column mapping, ``delta.dataSkipping*``).
        session: ``spark.sql.parquet.*`` settings of the writing session.
        parquet_options: Parquet writer options (``WriteOptions(parquet_options=...)``).
        split: how many rows the first commit (creating the table) holds; the rest are appended.
        files: how many Spark partitions (files, without partition columns) each commit writes.
    """

    seed: int
    schema: StructType
    rows: list[tuple[Any, ...]]
    partition_by: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    session: dict[str, str] = field(default_factory=dict)
    parquet_options: dict[str, str] = field(default_factory=dict)
    split: int = 0
    files: tuple[int, int] = (1, 1)

    def describe(self) -> str:
        return (
            f"case seed={self.seed}: {self.schema.simpleString()} partitioned by {self.partition_by}, "
            f"properties {self.properties}, session {self.session}, parquet options {self.parquet_options}, "
            f"{len(self.rows)} rows ({self.split} created in {self.files[0]} files, "
            f"{len(self.rows) - self.split} appended in {self.files[1]})"
        )

    @property
    def column_mapping(self) -> bool:
        return self.properties.get("delta.columnMapping.mode", "none") != "none"


def spark_line(spark: SparkSession) -> tuple[int, int]:
    major, minor = spark.version.split(".")[:2]
    return int(major), int(minor)


def generate(seed: int, *, line: tuple[int, int] = (4, 3), jar_free: bool = True, max_rows: int = 160) -> Case:
    """The case of ``seed`` (see the module's notes) for a Spark ``line`` (collated strings from
    4.0); ``jar_free``: one the jar-free writer can create (deltalake creates a column-mapped
    table only without TIMESTAMP_NTZ columns, whose feature would make its protocol one of table
    features, and no table with a TIMESTAMP_NTZ inside a map)."""
    rng = random.Random(f"spark-mlt-differential-{seed}")
    mapping = rng.random() < 0.25 and (not jar_free or delta_rs_creates_column_mapping())
    primitives = _primitives(rng, line, ntz=not (mapping and jar_free))
    names = list(NAMES + MAPPED_NAMES) if mapping else list(NAMES)
    fields = []
    for name in rng.sample(names, rng.randint(2, 6)):
        kind = _type(rng, primitives, names, depth=0)
        while jar_free and "map<" in kind.simpleString() and "timestamp_ntz" in kind.simpleString():
            kind = _type(rng, primitives, names, depth=0)
        fields.append(StructField(name, kind, nullable=True))
    partition_by: list[str] = []
    pools: dict[str, list[Any]] = {}
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        name = next(n for n in ("p", "part", "q") if n not in {f.name for f in fields})
        kind = rng.choice(
            [IntegerType(), StringType(), DateType(), BooleanType(), TimestampType()]
            if not (mapping and jar_free)
            else [IntegerType(), StringType(), DateType(), BooleanType()]
        )
        fields.insert(rng.randrange(len(fields) + 1), StructField(name, kind, nullable=True))
        partition_by.append(name)
        # few distinct values, or the table is mostly tiny files
        pools[name] = [*(_partition_value(rng, kind) for _ in range(rng.randint(1, 3))), None]
    schema = StructType(fields)
    null_rate = rng.choice([0.0, 0.1, 0.3, 1.0])
    count = rng.choice([1, 2, rng.randint(3, 40), rng.randint(20, max_rows), rng.randint(20, max_rows)])
    rows = [
        tuple(
            rng.choice(pools[f.name]) if f.name in pools else _value(rng, f.dataType, null_rate) for f in schema.fields
        )
        for _ in range(count)
    ]
    properties = _properties(rng, schema, partition_by)
    if mapping:
        properties["delta.columnMapping.mode"] = "name"
    session = {key: rng.choice(values) for key, values in SESSION_SETTINGS.items()}
    split = rng.choice([count, max(1, count // 2), max(1, count // 3), max(1, count - 1)])
    return Case(
        seed=seed,
        schema=schema,
        rows=rows,
        partition_by=partition_by,
        properties=properties,
        session=session,
        parquet_options=_parquet_options(rng, schema, mapping),
        split=split,
        files=(rng.choice([1, 2, 3]), rng.choice([1, 2, 3])),
    )


def _primitives(rng: random.Random, line: tuple[int, int], *, ntz: bool) -> list[DataType]:
    kinds: list[DataType] = [
        ByteType(),
        ShortType(),
        IntegerType(),
        LongType(),
        FloatType(),
        DoubleType(),
        *(DecimalType(p, s) for p, s in rng.sample(DECIMALS, 4)),
        StringType(),
        StringType(),
        BinaryType(),
        BooleanType(),
        DateType(),
        TimestampType(),
        TimestampType(),
    ]
    if ntz:
        kinds += [TimestampNTZType(), TimestampNTZType()]
    if line >= (4, 0):
        kinds.append(StringType("UTF8_LCASE"))  # type: ignore[call-arg]
    return kinds


def _type(rng: random.Random, primitives: list[DataType], names: list[str], depth: int) -> DataType:
    roll = rng.random()
    if depth >= 3 or roll < 0.6:
        return rng.choice(primitives)
    if roll < 0.82:
        children = rng.sample(names, rng.randint(1, 3))
        return StructType([StructField(n, _type(rng, primitives, names, depth + 1), True) for n in children])
    if roll < 0.92:
        return ArrayType(_type(rng, primitives, names, depth + 1), containsNull=True)
    return MapType(StringType(), _type(rng, primitives, names, depth + 1), valueContainsNull=True)


def _properties(rng: random.Random, schema: StructType, partition_by: list[str]) -> dict[str, str]:
    properties: dict[str, str] = {}
    choice = rng.random()
    if choice < 0.2:
        properties["delta.dataSkippingNumIndexedCols"] = str(rng.choice([-1, 0, 1, 2, 3, 5]))
    elif choice < 0.35:
        paths = []
        for f in schema.fields:
            if f.name in partition_by or isinstance(f.dataType, ArrayType | MapType) or rng.random() < 0.4:
                continue
            if isinstance(f.dataType, StructType) and rng.random() < 0.5:
                paths.append(f"{identifier(f.name)}.{identifier(rng.choice(f.dataType.fields).name)}")
            else:
                paths.append(identifier(f.name.upper() if rng.random() < 0.3 else f.name))
        if paths:
            properties["delta.dataSkippingStatsColumns"] = ",".join(paths)
    if rng.random() < 0.3:
        properties["delta.dataSkippingStringPrefixLength"] = str(rng.choice([0, 1, 4, 8, 40]))
    return properties


def _parquet_options(rng: random.Random, schema: StructType, mapping: bool) -> dict[str, str]:
    """Parquet writer options: row groups of a few rows (their size is checked every 10 rows, at
    first every 100), statistics cut short or turned off (parquet-java 1.14+; older ones ignore
    the key), version 2 pages, no dictionaries."""
    options: dict[str, str] = {}
    if rng.random() < 0.6:
        options["parquet.block.size"] = str(rng.choice([256, 1024, 4096]))
        options["parquet.page.size.row.check.min"] = "10"
        options["parquet.page.size.row.check.max"] = "10"
    if rng.random() < 0.25:
        options["parquet.statistics.truncate.length"] = str(rng.choice([2, 8, 16, 40]))
    if rng.random() < 0.1:
        options["parquet.column.statistics.enabled"] = "false"
    elif rng.random() < 0.15 and not mapping:
        column = rng.choice(schema.fields)
        options[f"parquet.column.statistics.enabled#{column.name}"] = "false"
    if rng.random() < 0.15:
        options["parquet.writer.version"] = "v2"
    if rng.random() < 0.15:
        options["parquet.enable.dictionary"] = "false"
    return options


# --- values -------------------------------------------------------------------------------------

_STRINGS = (
    "",
    "a",
    "A",
    "abc",
    "ABC",
    "\x00",
    "a\x00",
    "\x7e",
    "\x7f",
    "é",
    "É",
    "中文",
    "\U0001f600",
    "\ufffd",
    "\uffff",
    "\U0010ffff",
    "z" * 40,
    "a" * 31 + "\U0001f600" + "b",
    "a" * 31 + "\U0001f600" * 3,
    "a" * 32 + "\x7e" * 3,
    "a" * 32 + "\x7f" * 3,
    "a" * 32 + "\U0010ffff" * 3 + "x",
    "a" * 30 + "\U0010ffff" * 4,
    "\U0010ffff" * 40,
    "\uffff" * 35,
    "é" * 33,
    "中" * 40,
)


def _string(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(_STRINGS)
    if roll < 0.47:
        return rng.choice("xy") * rng.choice([4097, 5000])  # beyond parquet-java's 4 KiB of footer bounds
    alphabet = "abcxyzAZ0~\x7f\x00éü中\U0001f600\U00010000\uffff\U0010ffff"
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([1, 2, 5, 31, 32, 33, 34, 40, 70])))


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _float(rng: random.Random, *, single: bool) -> float:
    top = 3.4028234663852886e38 if single else 1.7976931348623157e308
    tiny = 1.401298464324817e-45 if single else 5e-324
    specials = (math.nan, -0.0, 0.0, math.inf, -math.inf, 1.0, -1.0, tiny, -tiny, top, -top)
    roll = rng.random()
    if roll < 0.35:
        value = rng.choice(specials)
    elif roll < 0.6:
        value = float(rng.randint(-5, 5))
    else:
        value = rng.uniform(-1e6, 1e6)
    return _float32(value) if single else value


def _decimal(rng: random.Random, kind: DecimalType) -> Decimal:
    limit = 10**kind.precision - 1
    small = min(limit, 1000)
    unscaled = rng.choice([limit, -limit, 0, 1, -1, rng.randint(-limit, limit), rng.randint(-small, small)])
    return Decimal(f"{unscaled}e-{kind.scale}")  # exact (scaleb would round to 28 digits)


_DAY_FIRST, _DAY_LAST = dt.date(1, 1, 1).toordinal(), dt.date(9999, 12, 31).toordinal()
_DATES = (
    dt.date(1, 1, 1),
    dt.date(1, 1, 2),
    dt.date(1000, 2, 28),
    dt.date(1582, 10, 4),
    dt.date(1582, 10, 15),
    dt.date(1899, 12, 31),
    dt.date(1969, 12, 31),
    dt.date(1970, 1, 1),
    dt.date(2262, 4, 12),
    dt.date(9999, 12, 31),
)
_MOMENTS = (
    dt.datetime(1, 1, 1),
    dt.datetime(1, 1, 1, 0, 0, 0, 1),
    dt.datetime(1582, 10, 4, 23, 59, 59, 999999),
    dt.datetime(1582, 10, 15),
    dt.datetime(1677, 9, 21, 0, 12, 43, 145224),
    dt.datetime(1899, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999000),
    dt.datetime(1970, 1, 1),
    dt.datetime(1970, 1, 1, 0, 0, 0, 1),
    dt.datetime(2024, 2, 29, 12, 0, 0, 123456),
    dt.datetime(2262, 4, 11, 23, 47, 16, 854775),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999000),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
)


def _date(rng: random.Random) -> dt.date:
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(_DATES)
    if roll < 0.7:
        return dt.date.fromordinal(rng.randint(dt.date(1900, 1, 1).toordinal(), dt.date(2100, 1, 1).toordinal()))
    return dt.date.fromordinal(rng.randint(_DAY_FIRST, _DAY_LAST))


def _moment(rng: random.Random) -> dt.datetime:
    """A naive date and time: edges, or any microsecond from year 1 to 9999, whole
    milliseconds, whole seconds or not."""
    if rng.random() < 0.3:
        return rng.choice(_MOMENTS)
    day = _date(rng)
    micros = rng.randrange(86_400_000_000)
    unit = rng.choice([1, 1000, 1_000_000, 1, 1000])
    return dt.datetime.combine(day, dt.time()) + dt.timedelta(microseconds=micros - micros % unit)


_GENERATORS: dict[type, Callable[[random.Random], Any]] = {
    ByteType: lambda rng: rng.choice([-128, 127, 0, -1, 1, rng.randint(-128, 127)]),
    ShortType: lambda rng: rng.choice([-32768, 32767, 0, rng.randint(-32768, 32767)]),
    IntegerType: lambda rng: rng.choice(
        [-(2**31), 2**31 - 1, 0, rng.randint(-100, 100), rng.randint(-(2**31), 2**31 - 1)]
    ),
    LongType: lambda rng: rng.choice(
        [-(2**63), 2**63 - 1, 0, rng.randint(-100, 100), rng.randint(-(2**63), 2**63 - 1)]
    ),
    FloatType: lambda rng: _float(rng, single=True),
    DoubleType: lambda rng: _float(rng, single=False),
    StringType: _string,
    BinaryType: lambda rng: bytearray(rng.choice([b"", b"\x00", b"\xff" * 3, rng.randbytes(rng.randint(0, 12))])),
    BooleanType: lambda rng: rng.random() < 0.5,
    DateType: _date,
    TimestampType: lambda rng: _moment(rng).replace(tzinfo=_UTC),
    TimestampNTZType: _moment,
}

#: Partition values: a string of each kind Hive paths escape, no year-1 timestamps.
_PARTITION_STRINGS = ("a", "a b", "é", "x/y", "a=b", "%", "a:b", "\U0001f600", "0")


def _partition_value(rng: random.Random, kind: DataType) -> Any:
    if isinstance(kind, StringType):
        return rng.choice(_PARTITION_STRINGS)
    if isinstance(kind, TimestampType):
        return dt.datetime(rng.choice([1970, 2000, 2024]), 1, 2, 3, 4, 5, rng.choice([0, 6000, 123456]), tzinfo=_UTC)
    return _value(rng, kind, 0.0)


def _value(rng: random.Random, kind: DataType, null_rate: float) -> Any:
    if rng.random() < null_rate:
        return None
    if isinstance(kind, StructType):
        return tuple(_value(rng, f.dataType, min(null_rate, 0.3)) for f in kind.fields)
    if isinstance(kind, ArrayType):
        return [_value(rng, kind.elementType, 0.2) for _ in range(rng.randint(0, 3))]
    if isinstance(kind, MapType):
        return {_string(rng): _value(rng, kind.valueType, 0.2) for _ in range(rng.randint(0, 3))}
    return _decimal(rng, kind) if isinstance(kind, DecimalType) else _GENERATORS[type(kind)](rng)


# --- writing ------------------------------------------------------------------------------------


def session_settings(spark: SparkSession, settings: dict[str, str]) -> contextlib.AbstractContextManager[None]:
    """The session with ``settings`` (``UNSET``: the key unset) for the block, then as it was."""
    return session_conf(spark, {key: None if value == UNSET else value for key, value in settings.items()})


_CODEC = "spark.sql.parquet.compression.codec"


def write_case(spark: SparkSession, case: Case, path: str) -> None:
    """The case written jar-free: the first ``split`` rows create the table, the rest append."""
    options = WriteOptions(
        backend="delta-rs",
        properties=case.properties,
        partition_by=case.partition_by,
        parquet_options=case.parquet_options,
    )
    parts = [("error", case.rows[: case.split], case.files[0]), ("append", case.rows[case.split :], case.files[1])]
    session = dict(case.session)
    if spark_line(spark) < (4, 0) and session.get(_CODEC) == "lz4_raw":
        session[_CODEC] = "lz4raw"  # Spark 3.5's name of the same codec
    with session_settings(spark, session):
        for mode, rows, files in parts:
            if rows:
                df = spark.createDataFrame(rows, case.schema).repartition(files)
                write_delta(df, path, {}, mode=mode, options=options)


# --- the log and the stats-free twin -------------------------------------------------------------


@dataclass
class Log:
    """The latest protocol and metadata of a table and its live ``add`` actions (the tables here
    have JSON commits only)."""

    protocol: dict[str, Any]
    metadata: dict[str, Any]
    adds: list[dict[str, Any]]

    @classmethod
    def read(cls, table: str) -> Log:
        protocol: dict[str, Any] = {}
        metadata: dict[str, Any] = {}
        adds: dict[str, dict[str, Any]] = {}
        for commit in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
            with open(commit, encoding="utf-8") as handle:
                for line in handle:
                    action = json.loads(line)
                    if "protocol" in action:
                        protocol = action["protocol"]
                    elif "metaData" in action:
                        metadata = action["metaData"]
                    elif "add" in action:
                        adds[action["add"]["path"]] = action["add"]
                    elif "remove" in action:
                        adds.pop(action["remove"]["path"], None)
        return cls(protocol, metadata, list(adds.values()))

    @property
    def column_mapping(self) -> bool:
        return self.metadata.get("configuration", {}).get("delta.columnMapping.mode", "none") != "none"


FILE_COLUMN = "__file"


def write_twin(table: str, log: Log, twin: str) -> None:
    """The table's twin at ``twin``: the same data files (by absolute URI), schema and protocol,
    no statistics, and the file's index in ``log.adds`` as the partition column ``__file``."""
    metadata = json.loads(json.dumps(log.metadata))
    schema = json.loads(metadata["schemaString"])
    extra: dict[str, Any] = {"name": FILE_COLUMN, "type": "integer", "nullable": True, "metadata": {}}
    if log.column_mapping:
        configuration = metadata.setdefault("configuration", {})
        top = int(configuration.get("delta.columnMapping.maxColumnId", "0")) + 1
        configuration["delta.columnMapping.maxColumnId"] = str(top)
        extra["metadata"] = {"delta.columnMapping.id": top, "delta.columnMapping.physicalName": FILE_COLUMN}
    schema["fields"].append(extra)
    metadata["schemaString"] = json.dumps(schema)
    metadata["partitionColumns"] = [*metadata.get("partitionColumns", []), FILE_COLUMN]
    root = Path(table).resolve().as_uri()
    actions: list[dict[str, Any]] = [{"protocol": log.protocol}, {"metaData": metadata}]
    for index, add in enumerate(log.adds):
        copy = {k: v for k, v in add.items() if k not in ("stats", "tags")}
        copy["path"] = f"{root}/{add['path']}"
        copy["partitionValues"] = {**add.get("partitionValues", {}), FILE_COLUMN: str(index)}
        actions.append({"add": copy})
    os.makedirs(os.path.join(twin, "_delta_log"))
    with open(os.path.join(twin, "_delta_log", f"{0:020d}.json"), "w", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(action) + "\n" for action in actions))


# --- predicates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A leaf column outside arrays and maps: logical names from the top, its type."""

    path: tuple[str, ...]
    kind: DataType
    partition: bool = False

    def spark(self) -> str:
        return ".".join(identifier(name) for name in self.path)

    def datafusion(self) -> str:
        return _dquote(self.path[0]) + "".join(f"[{_squote(name)}]" for name in self.path[1:])

    def duckdb(self) -> str:
        return ".".join(_dquote(name) for name in self.path)

    def arrow(self) -> pc.Expression:
        return pc.field(*self.path)

    def polars(self) -> Any:
        import polars as pl  # noqa: PLC0415 (an optional reader)

        expr = pl.col(self.path[0])
        for name in self.path[1:]:
            expr = expr.struct.field(name)
        return expr


def _dquote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _squote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_UNARY = ("IS NULL", "IS NOT NULL")
_BINARY = ("=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Compare:
    """``column <op> values``: a comparison (one value), ``IN`` (several), ``BETWEEN`` (two) or
    a null test (none)."""

    column: Column
    op: str
    values: tuple[Any, ...] = ()

    def render(self, dialect: str) -> str:
        column = getattr(self.column, dialect)()
        if self.op in _UNARY:
            return f"{column} {self.op}"
        literals = [_literal(dialect, self.column.kind, v) for v in self.values]
        if self.op == "IN":
            return f"{column} IN ({', '.join(literals)})"
        if self.op == "BETWEEN":
            return f"{column} BETWEEN {literals[0]} AND {literals[1]}"
        return f"{column} {self.op} {literals[0]}"

    def arrow(self, schema: pa.Schema) -> pc.Expression:
        column = self.column.arrow()
        if self.op == "IS NULL":
            return column.is_null()
        if self.op == "IS NOT NULL":
            return column.is_valid()
        kind = _arrow_type(schema, self.column.path)
        scalars = [pa.scalar(_arrow_value(v), type=kind) for v in self.values]
        if self.op == "IN":
            return column.isin(pa.array([s.as_py() for s in scalars], type=kind))
        if self.op == "BETWEEN":
            return (column >= scalars[0]) & (column <= scalars[1])
        return _ARROW_OPS[self.op](column, scalars[0])

    def polars(self) -> Any:
        import polars as pl  # noqa: PLC0415 (an optional reader)

        column = self.column.polars()
        if self.op == "IS NULL":
            return column.is_null()
        if self.op == "IS NOT NULL":
            return column.is_not_null()
        kind = _polars_type(self.column.kind)
        if self.op == "IN":
            return column.is_in(pl.Series(list(self.values), dtype=kind).implode())
        lits = [pl.lit(v, dtype=kind) for v in self.values]
        if self.op == "BETWEEN":
            return column.is_between(lits[0], lits[1])
        return _ARROW_OPS[self.op](column, lits[0])

    def dnf(self) -> list[list[tuple[Any, str, Any]]] | None:
        """The comparison as pyarrow's DNF tuples, or None when they cannot say it."""
        if self.op in _UNARY or self.op == "BETWEEN":
            return None
        name: Any = self.column.path[0] if len(self.column.path) == 1 else self.column.path
        values = [_arrow_value(v) for v in self.values]
        if self.op == "IN":
            return [[(name, "in", values)]]
        return [[(name, self.op, values[0])]]

    def columns(self) -> set[tuple[str, ...]]:
        return {self.column.path}

    def __str__(self) -> str:
        return self.render("spark")


@dataclass(frozen=True)
class Junction:
    """``AND`` or ``OR`` of predicates."""

    op: str
    parts: tuple[Predicate, ...]

    def render(self, dialect: str) -> str:
        return f" {self.op} ".join(f"({part.render(dialect)})" for part in self.parts)

    def arrow(self, schema: pa.Schema) -> pc.Expression:
        exprs = [part.arrow(schema) for part in self.parts]
        return functools.reduce((lambda a, b: a & b) if self.op == "AND" else (lambda a, b: a | b), exprs)

    def polars(self) -> Any:
        exprs = [part.polars() for part in self.parts]
        return functools.reduce((lambda a, b: a & b) if self.op == "AND" else (lambda a, b: a | b), exprs)

    def dnf(self) -> list[list[tuple[Any, str, Any]]] | None:
        forms = [part.dnf() for part in self.parts]
        if any(form is None for form in forms):
            return None
        if self.op == "OR":
            return [conjunction for form in forms for conjunction in form or []]
        if all(form is not None and len(form) == 1 for form in forms):
            return [[term for form in forms for term in (form or [[]])[0]]]
        return None

    def columns(self) -> set[tuple[str, ...]]:
        return set().union(*(part.columns() for part in self.parts))

    def __str__(self) -> str:
        return self.render("spark")


Predicate = Compare | Junction

_ARROW_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _nan_literal(predicate: Predicate) -> bool:
    """Whether the predicate compares a column with NaN."""
    if isinstance(predicate, Junction):
        return any(_nan_literal(part) for part in predicate.parts)
    return any(isinstance(v, float) and math.isnan(v) for v in predicate.values)


def _arrow_type(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType:
    kind = schema.field(path[0]).type
    for name in path[1:]:
        kind = kind.field(name).type
    return kind


def _arrow_value(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytearray) else value


_SQL_TYPES = {
    ByteType: "TINYINT",
    ShortType: "SMALLINT",
    IntegerType: "INT",
    LongType: "BIGINT",
    FloatType: "FLOAT",
    DoubleType: "DOUBLE",
}


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _timestamp_text(value: dt.datetime) -> str:
    naive = value.astimezone(_UTC).replace(tzinfo=None) if value.tzinfo is not None else value
    return naive.isoformat(sep=" ", timespec="microseconds")


def _literal(dialect: str, kind: DataType, value: Any) -> str:
    """``value`` as a literal of ``kind`` in Spark SQL (``spark``), DataFusion SQL
    (``datafusion``) or DuckDB SQL (``duckdb``)."""
    for types, render in _LITERALS:
        if isinstance(kind, types):
            return render(dialect, kind, value)
    raise TypeError(f"no literal of {kind.simpleString()}")


def _string_literal(dialect: str, kind: DataType, value: str) -> str:
    if dialect == "spark":
        return string(value)
    if dialect == "duckdb":  # DuckDB's SQL text cannot hold U+0000: chr(0), folded before pushdown
        return " || chr(0) || ".join(_squote(part) for part in value.split("\x00"))
    return _squote(value)


def _date_literal(dialect: str, kind: DataType, value: dt.date) -> str:
    return f"CAST('{value.isoformat()}' AS DATE)" if dialect == "datafusion" else f"DATE '{value.isoformat()}'"


def _timestamp_literal(dialect: str, kind: DataType, value: dt.datetime) -> str:
    text = _timestamp_text(value)
    zoned = isinstance(kind, TimestampType)
    if dialect == "spark":
        return f"TIMESTAMP '{text}Z'" if zoned else f"TIMESTAMP_NTZ '{text}'"
    if dialect == "duckdb":
        return f"TIMESTAMPTZ '{text}+00'" if zoned else f"TIMESTAMP '{text}'"
    iso = text.replace(" ", "T")
    if zoned:
        return f"arrow_cast('{iso}Z', 'Timestamp(Microsecond, Some(\"UTC\"))')"
    return f"arrow_cast('{iso}', 'Timestamp(Microsecond, None)')"


_LITERALS: tuple[tuple[type | tuple[type, ...], Callable[[str, Any, Any], str]], ...] = (
    (BooleanType, lambda dialect, kind, value: "TRUE" if value else "FALSE"),
    (StringType, _string_literal),
    (_INTEGERS, lambda dialect, kind, value: f"CAST({value} AS {_SQL_TYPES[type(kind)]})"),
    (_FLOATS, lambda dialect, kind, value: f"CAST('{_float_text(value)}' AS {_SQL_TYPES[type(kind)]})"),
    (
        DecimalType,
        lambda dialect, kind, value: f"CAST('{format(value, 'f')}' AS DECIMAL({kind.precision},{kind.scale}))",
    ),
    (DateType, _date_literal),
    (_TIMES, _timestamp_literal),
)


def _polars_type(kind: DataType) -> Any:
    import polars as pl  # noqa: PLC0415 (an optional reader)

    simple: dict[type, Any] = {
        ByteType: pl.Int8,
        ShortType: pl.Int16,
        IntegerType: pl.Int32,
        LongType: pl.Int64,
        FloatType: pl.Float32,
        DoubleType: pl.Float64,
        StringType: pl.String,
        BooleanType: pl.Boolean,
        DateType: pl.Date,
        TimestampType: pl.Datetime("us", "UTC"),
        TimestampNTZType: pl.Datetime("us"),
    }
    if isinstance(kind, DecimalType):
        return pl.Decimal(kind.precision, kind.scale)
    return simple[type(kind)]


def leaves(case: Case) -> list[tuple[Column, list[Any]]]:
    """Each leaf column outside arrays and maps with its values, None where it or a struct above
    it is null."""
    found: list[tuple[Column, list[Any]]] = []

    def walk(path: tuple[str, ...], kind: DataType, values: list[Any], partition: bool) -> None:
        if isinstance(kind, StructType):
            for i, child in enumerate(kind.fields):
                walk((*path, child.name), child.dataType, [None if v is None else v[i] for v in values], False)
        elif not isinstance(kind, ArrayType | MapType):
            found.append((Column(path, kind, partition), values))

    for i, f in enumerate(case.schema.fields):
        walk((f.name,), f.dataType, [row[i] for row in case.rows], f.name in case.partition_by)
    return found


def predicates(case: Case, rng: random.Random, *, limit: int = 48, combinations: int = 4) -> list[Predicate]:
    """Predicates at the edges of each leaf column's values (see the module's notes): at most
    ``limit`` single ones drawn by ``rng`` (null tests a quarter of them), and ``combinations``
    ``AND`` / ``OR`` of two or three of them."""
    columns = leaves(case)
    singles: list[Predicate] = []
    nulls: list[Predicate] = []
    for column, values in columns:
        edges = _edges(column, values, rng, _prefix(case))
        nulls += [p for p in edges if isinstance(p, Compare) and p.op in _UNARY]
        singles += [p for p in edges if not (isinstance(p, Compare) and p.op in _UNARY)]
    rng.shuffle(singles)
    rng.shuffle(nulls)
    chosen = nulls[: max(4, limit // 4)]
    chosen += singles[: max(0, limit - len(chosen))]
    pool = singles + nulls
    for _ in range(combinations if len(pool) >= 2 else 0):
        parts = tuple(rng.sample(pool, rng.choice([2, 2, 3]) if len(pool) >= 3 else 2))
        chosen.append(Junction(rng.choice(["AND", "OR"]), parts))
    return chosen


def _prefix(case: Case) -> int:
    try:
        return int(case.properties.get("delta.dataSkippingStringPrefixLength", "32"))
    except ValueError:
        return 32


def _edges(column: Column, values: list[Any], rng: random.Random, prefix: int) -> list[Predicate]:
    kind = column.kind
    edges: list[Predicate] = [Compare(column, "IS NULL"), Compare(column, "IS NOT NULL")]
    present = [v for v in values if v is not None]
    if isinstance(kind, BinaryType):
        return edges
    if isinstance(kind, BooleanType):
        return [*edges, Compare(column, "=", (True,)), Compare(column, "=", (False,))]
    ordered = sorted({v for v in present if not (isinstance(v, float) and math.isnan(v))}, key=_sort_key(kind))
    literals: list[Any] = []
    if ordered:
        low, high, some = ordered[0], ordered[-1], rng.choice(ordered)
        literals = [low, high, some]
        for value in (low, high):
            literals += [v for v in (_next(kind, value, +1), _next(kind, value, -1)) if v is not None]
        literals += _near(kind, low, high, prefix)
        for op, value in (("<", low), ("<=", low), (">", high), (">=", high), ("=", some), ("=", high), ("=", low)):
            edges.append(Compare(column, op, (value,)))
        edges.append(Compare(column, "IN", tuple(_unique([low, high, some]))))
        edges.append(Compare(column, "BETWEEN", (low, high)))
        edges.append(Compare(column, "BETWEEN", (some, some)))
        above = _next(kind, high, +1)
        if above is not None:
            edges.append(Compare(column, "BETWEEN", (high, above)))
            edges.append(Compare(column, "IN", (above,)))
    if isinstance(kind, _FLOATS):
        literals += [math.nan, -0.0, 0.0, math.inf, -math.inf]
    for value in _unique(literals):
        for op in rng.sample(_BINARY, 3):
            edges.append(Compare(column, op, (value,)))
    return edges


def _sort_key(kind: DataType) -> Callable[[Any], Any]:
    if isinstance(kind, StringType):
        return lambda v: v.encode("utf-8")  # Spark's and Parquet's order: UTF-8 bytes
    return lambda v: v


def _unique(values: Sequence[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if not any(_same(value, other) for other in seen):
            seen.append(value)
    return seen


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def _next(kind: DataType, value: Any, step: int) -> Any:
    """The value of ``kind`` next to ``value`` (above for +1), or None beyond the type's range."""
    for types, following in _FOLLOWING:
        if isinstance(kind, types):
            try:
                return following(kind, value, step)
            except OverflowError:  # beyond year 1 or 9999
                return None
    return None


def _next_integer(kind: DataType, value: int, step: int) -> int | None:
    bits = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}[type(kind)]
    following = value + step
    return following if -(2 ** (bits - 1)) <= following < 2 ** (bits - 1) else None


def _next_decimal(kind: DecimalType, value: Decimal, step: int) -> Decimal | None:
    with decimal.localcontext() as context:
        context.prec = 80  # exact: the default context rounds to 28 digits
        following = value + Decimal(step).scaleb(-kind.scale)
    return following if abs(following) < Decimal(10) ** (kind.precision - kind.scale) else None


_FOLLOWING: tuple[tuple[type | tuple[type, ...], Callable[[Any, Any, int], Any]], ...] = (
    (_INTEGERS, _next_integer),
    (DoubleType, lambda kind, value, step: math.nextafter(value, math.inf * step)),
    (FloatType, lambda kind, value, step: _next_float32(value, step)),
    (DecimalType, _next_decimal),
    (DateType, lambda kind, value, step: value + dt.timedelta(days=step)),
    (_TIMES, lambda kind, value, step: value + dt.timedelta(microseconds=step)),
    # a string's successor in UTF-8 order, or a string below it
    (StringType, lambda kind, value, step: value + "\x00" if step > 0 else (value[:-1] if value else None)),
)


def _next_float32(value: float, step: int) -> float | None:
    if math.isinf(value):
        return None
    bits = struct.unpack("<i", struct.pack("<f", value))[0]
    if value == 0.0:
        bits = 1 if step > 0 else -(2**31) + 1
    elif (value > 0) == (step > 0):
        bits += 1
    else:
        bits -= 1
    return float(struct.unpack("<f", struct.pack("<i", bits))[0])


def _near(kind: DataType, low: Any, high: Any, prefix: int) -> list[Any]:
    """More literals just inside or beyond a column's values: cut strings, timestamps at the
    millisecond below them and a microsecond around that."""
    if isinstance(kind, StringType):
        near: list[Any] = []
        for value in (low, high):
            for length in {32, prefix, 33, max(prefix, 0) + 1}:
                if 0 <= length < len(value):
                    near += [value[:length], value[:length] + "\U0010ffff", value[:length] + "\x7f"]
            near.append(value + "\U0010ffff")
        return near
    if isinstance(kind, _TIMES):
        near = []
        for value in (low, high):
            floor = value - dt.timedelta(microseconds=value.microsecond % 1000)
            near.append(floor)
            for step in (-1, 1, 1000):
                with contextlib.suppress(OverflowError):
                    near.append(floor + dt.timedelta(microseconds=step))
        return near
    if isinstance(kind, _FLOATS):
        finite = [v for v in (low, high) if math.isfinite(v)]
        return [math.nextafter(v, math.inf) for v in finite if isinstance(kind, DoubleType)]
    return []


# --- readers --------------------------------------------------------------------------------------


@dataclass
class Table:
    """A written case, as every reader opens it."""

    case: Case
    path: str
    twin: str
    log: Log
    _rows: dict[int, pa.Table] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def delta(self) -> DeltaTable:
        return DeltaTable(self.path)

    @functools.cached_property
    def footers(self) -> list[pq.FileMetaData]:
        """The data files' Parquet footers, in the order of ``log.adds``."""
        return [pq.read_metadata(os.path.join(self.path, unquote(add["path"]))) for add in self.log.adds]

    def rows_of(self, index: int) -> pa.Table:
        """The rows of the data file at ``index`` in ``log.adds`` (INT96 as microseconds), read once."""
        if index not in self._rows:
            file = os.path.join(self.path, unquote(self.log.adds[index]["path"]))
            self._rows[index] = pq.read_table(file, coerce_int96_timestamp_unit="us")
        return self._rows[index]

    def physical(self, kind: str) -> bool:
        """Whether a column of a data file has the Parquet physical type ``kind`` (``INT96``)."""
        return any(f.schema.column(i).physical_type == kind for f in self.footers for i in range(f.num_columns))

    def codecs(self) -> set[str]:
        return {
            f.row_group(g).column(i).compression
            for f in self.footers
            for g in range(f.num_row_groups)
            for i in range(f.num_columns)
        }

    def beyond_nanoseconds(self) -> bool:
        """Whether a timestamp of the rows (anywhere in them) is outside the years that 64-bit
        nanoseconds reach (1677-2262)."""
        return any(
            isinstance(v, dt.datetime) and not _NANOS_FIRST <= v.replace(tzinfo=None) <= _NANOS_LAST
            for row in self.case.rows
            for v in _flat(row)
        )


_NANOS_FIRST, _NANOS_LAST = dt.datetime(1677, 9, 21, 0, 12, 44), dt.datetime(2262, 4, 11, 23, 47, 16)


def _flat(value: Any) -> Iterator[Any]:
    if isinstance(value, tuple | list):
        for item in value:
            yield from _flat(item)
    elif isinstance(value, dict):
        yield from _flat(list(value.values()))
    else:
        yield value


class Reader:
    """A Delta reader: its count of each predicate's rows (``None``: no filter) with the table's
    statistics, and without its Delta skipping."""

    name = ""

    def refuses(self, table: Table) -> str | None:
        """Why the reader cannot read the table, or None."""
        return None

    def cannot(self, table: Table, predicate: Predicate) -> str | None:
        """Why the reader cannot ask the predicate of the table, or None."""
        return None

    def render(self, table: Table, predicate: Predicate) -> str:
        return str(predicate)

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        raise NotImplementedError

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        raise NotImplementedError

    def exact(self, table: Table, found: Sequence[Predicate | None]) -> list[int] | None:
        """Each predicate's true count in the reader's semantics (every row read, then filtered),
        for a reader whose count without Delta's skipping still prunes by the files' footers
        (whose own rules may be wrong), or None: its count without is taken as true."""
        return None


class DeltaSpark(Reader):
    """delta-spark: the files its data skipping keeps for ``WHERE p`` (the prepared scan's
    ``inputFiles``: the files a query of the predicate reads), and each file's rows that match,
    counted by one query with ``spark.databricks.delta.stats.skipping`` off (``count_if`` of every
    predicate, by ``_metadata.file_path``: Spark's own evaluation of the rows, without its Parquet
    filter pushdown, whose row-group pruning is Spark's, not the table's). With statistics, the
    rows of the kept files; without, of every file. A predicate costs delta-spark's skipping (a
    small job over the table's state), not a scan: at most ``budget`` of them per case
    (``SPARK_MLT_DIFF_SPARK_PREDICATES``, 24)."""

    name = "delta-spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.budget = int(os.environ.get("SPARK_MLT_DIFF_SPARK_PREDICATES", "24"))
        self._frames: dict[str, DataFrame] = {}
        self._per_file: tuple[Any, dict[str, list[int]]] = (None, {})

    def render(self, table: Table, predicate: Predicate) -> str:
        return predicate.render("spark")

    def _source(self, table: Table) -> str:
        return f"delta.{identifier(table.path)}"

    def kept(self, table: Table, predicate: Predicate | None) -> set[str]:
        """The files (normalised paths) delta-spark's skipping keeps for the predicate: the
        ``inputFiles`` of a filter on the table, read once (its snapshot is not listed again)."""
        if table.path not in self._frames:
            self._frames = {table.path: self.spark.read.format("delta").load(table.path)}
        rows = self._frames[table.path]
        if predicate is not None:
            rows = rows.where(self.render(table, predicate))
        with session_settings(self.spark, {"spark.databricks.delta.stats.skipping": "true"}):
            return {_spark_file(name, uri=False) for name in rows.inputFiles()}

    def per_file(self, table: Table, found: Sequence[Predicate | None]) -> dict[str, list[int]]:
        """Each file's matching rows for every predicate, every file read (skipping off); one
        query for both counts of a case."""
        key = (table.path, tuple(id(p) for p in found))
        if self._per_file[0] == key:
            return self._per_file[1]
        self._per_file = (key, self._count_per_file(table, found))
        return self._per_file[1]

    def _count_per_file(self, table: Table, found: Sequence[Predicate | None]) -> dict[str, list[int]]:
        columns = ", ".join("count(*)" if p is None else f"count_if({self.render(table, p)})" for p in found)
        query = f"SELECT _metadata.file_path AS f, {columns} FROM {self._source(table)} GROUP BY 1"
        settings = {"spark.databricks.delta.stats.skipping": "false", "spark.sql.parquet.filterPushdown": "false"}
        with session_settings(self.spark, settings):
            return {
                _spark_file(str(row[0]), uri=True): [int(n) for n in row[1:]] for row in self.spark.sql(query).collect()
            }

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        kept = [self.kept(table, p) for p in found]
        counts = self.per_file(table, found)
        return [sum(n[i] for f, n in counts.items() if f in kept[i]) for i in range(len(found))]

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        counts = self.per_file(table, found)
        return [sum(n[i] for n in counts.values()) for i in range(len(found))]


def _spark_file(name: str, *, uri: bool) -> str:
    """A data file as Spark names it, in one form: ``_metadata.file_path`` gives a URI (its
    path percent-encoded), ``inputFiles`` a Hadoop path (decoded, ``file:`` before it)."""
    path = unquote(name) if uri else name
    return os.path.normpath(path.removeprefix("file:").removeprefix("//")) if path.startswith("file:") else path


def plain_dataset(table: Table, delta: ds.FileSystemDataset) -> ds.FileSystemDataset:
    """The fragments of deltalake's dataset with only their partition values as guarantees (no
    statistics), over the same files, filesystem and format."""
    schema = delta.schema
    partitions = {unquote(add["path"]): add.get("partitionValues", {}) for add in table.log.adds}
    physical = _physical_partition_names(table.log)
    fragments = []
    for fragment in delta.get_fragments():
        values = partitions[fragment.path]
        terms = []
        for name in table.log.metadata.get("partitionColumns", []):
            text = values.get(physical.get(name, name))
            kind = schema.field(name).type
            terms.append(pc.field(name).is_null() if text is None else pc.field(name) == _partition_scalar(text, kind))
        expression = functools.reduce(lambda a, b: a & b, terms) if terms else pc.scalar(True)
        fragments.append(delta.format.make_fragment(fragment.path, delta.filesystem, partition_expression=expression))
    return ds.FileSystemDataset(fragments, schema, delta.format, delta.filesystem)


def _physical_partition_names(log: Log) -> dict[str, str]:
    schema = json.loads(log.metadata["schemaString"])
    return {
        f["name"]: f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"]) for f in schema["fields"]
    }


def _partition_scalar(text: str, kind: pa.DataType) -> pa.Scalar:
    """A partition value (the protocol's text form) as a scalar of the column's Arrow type."""
    if pa.types.is_timestamp(kind):
        moment = dt.datetime.fromisoformat(text.replace("Z", ""))
        return pa.scalar(moment.replace(tzinfo=_UTC) if kind.tz else moment, type=kind)
    if pa.types.is_date(kind):
        return pa.scalar(dt.date.fromisoformat(text), type=kind)
    if pa.types.is_boolean(kind):
        return pa.scalar(text.lower() == "true", type=kind)
    return pc.cast(pa.scalar(text), kind)


class PyarrowDataset(Reader):
    """deltalake's pyarrow dataset (statistics as fragment guarantees) against the same files as
    a plain dataset."""

    name = "pyarrow-dataset"

    def refuses(self, table: Table) -> str | None:
        if table.log.column_mapping:
            return "column mapping (deltalake's pyarrow dataset refuses it)"
        nulls = any(value is None for add in table.log.adds for value in add.get("partitionValues", {}).values())
        return _pyarrow_dataset_fails() if nulls else None

    def render(self, table: Table, predicate: Predicate) -> str:
        return str(predicate.arrow(pa.schema(table.delta.schema().to_arrow())))

    def cannot(self, table: Table, predicate: Predicate) -> str | None:
        # pyarrow's guarantees: with a file's bounds of 1.0, ``f < NaN`` simplifies to true
        # (extra rows, the plain dataset's filter returns none), whatever the table's statistics
        if _nan_literal(predicate):
            return "a comparison with NaN (pyarrow simplifies it by a file's bounds to true: extra rows)"
        return None

    @staticmethod
    def _counts(dataset: ds.Dataset, found: Sequence[Predicate | None]) -> list[int]:
        return [
            dataset.count_rows() if p is None else dataset.count_rows(filter=p.arrow(dataset.schema)) for p in found
        ]

    def exact(self, table: Table, found: Sequence[Predicate | None]) -> list[int] | None:
        """Arrow's own count: every row of every file read (partition values as columns), then
        filtered in memory."""
        rows = plain_dataset(table, self.dataset(table)).to_table()
        return [rows.num_rows if p is None else rows.filter(self._expression(p, rows.schema)).num_rows for p in found]

    @staticmethod
    def _expression(predicate: Predicate, schema: pa.Schema) -> pc.Expression:
        return predicate.arrow(schema)

    @staticmethod
    def dataset(table: Table) -> ds.FileSystemDataset:
        """deltalake's dataset of the table, INT96 timestamps read as microseconds (as its docs
        advise: as nanoseconds, the years outside 1677-2262 fail)."""
        options = ds.ParquetReadOptions(coerce_int96_timestamp_unit="us")
        return table.delta.to_pyarrow_dataset(parquet_read_options=options)

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return self._counts(self.dataset(table), found)

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return self._counts(plain_dataset(table, self.dataset(table)), found)


class PyarrowFilters(PyarrowDataset):
    """``DeltaTable.to_pyarrow_table(filters=<DNF tuples>)`` against the plain dataset with the
    same tuples."""

    name = "pyarrow-filters"

    def refuses(self, table: Table) -> str | None:
        if table.physical("INT96") and table.beyond_nanoseconds():
            return "INT96 timestamps beyond 1677-2262 (to_pyarrow_table reads INT96 as nanoseconds)"
        return super().refuses(table)

    def cannot(self, table: Table, predicate: Predicate) -> str | None:
        if predicate.dnf() is None:
            return "no DNF tuples for it (IS NULL, BETWEEN, OR inside AND)"
        return super().cannot(table, predicate)

    def render(self, table: Table, predicate: Predicate) -> str:
        return repr(predicate.dnf())

    @staticmethod
    def _expression(predicate: Predicate, schema: pa.Schema) -> pc.Expression:
        return pq.filters_to_expression(predicate.dnf())

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return [
            table.delta.to_pyarrow_table().num_rows
            if p is None
            else table.delta.to_pyarrow_table(filters=p.dnf()).num_rows
            for p in found
        ]

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        plain = plain_dataset(table, table.delta.to_pyarrow_dataset())
        return [
            plain.count_rows() if p is None else plain.count_rows(filter=pq.filters_to_expression(p.dnf()))
            for p in found
        ]


def _twin_counts(table: Table, found: Sequence[Predicate | None]) -> list[dict[int, int]]:
    """For each predicate, the matching rows of each file (by index in ``log.adds``), counted by
    DataFusion over the table's stats-free twin in one query."""
    branches = [
        f"SELECT {i} AS i, {FILE_COLUMN} AS f, count(*) AS n FROM t"
        + ("" if p is None else f" WHERE {p.render('datafusion')}")
        + f" GROUP BY {FILE_COLUMN}"
        for i, p in enumerate(found)
    ]
    twin = DeltaTable(table.twin)
    result = pa.table(QueryBuilder().register("t", twin).execute(" UNION ALL ".join(branches)).read_all())
    counts: list[dict[int, int]] = [{} for _ in found]
    for i, f, n in zip(*(result.column(c).to_pylist() for c in ("i", "f", "n")), strict=True):
        counts[i][f] = n
    return counts


class DeltaRsFileUris(Reader):
    """``file_uris(file_pruning_predicate=<SQL>)``: the rows (counted by DataFusion, file by file,
    on the twin) of the files it keeps, against those of every file."""

    name = "delta-rs-file-uris"

    def render(self, table: Table, predicate: Predicate) -> str:
        return predicate.render("datafusion")

    def cannot(self, table: Table, predicate: Predicate) -> str | None:
        if any(len(path) > 2 for path in predicate.columns()):
            return (
                "a struct field below the first level (file_pruning_predicate cannot plan get_field with 3 arguments)"
            )
        return None

    def kept(self, table: Table, predicate: Predicate | None) -> set[int]:
        """The indexes (in ``log.adds``) of the files ``file_uris`` keeps for the predicate."""
        if predicate is None:
            return set(range(len(table.log.adds)))
        root = os.path.realpath(table.path)
        index = {os.path.join(root, unquote(add["path"])): i for i, add in enumerate(table.log.adds)}
        uris = table.delta.file_uris(file_pruning_predicate=predicate.render("datafusion"))
        return {index[os.path.realpath(uri)] for uri in uris}

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        kept = [self.kept(table, p) for p in found]
        per_file = _twin_counts(table, found)
        return [sum(n for f, n in counts.items() if f in files) for counts, files in zip(per_file, kept, strict=True)]

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return [sum(counts.values()) for counts in _twin_counts(table, found)]


class DeltaRsScan(Reader):
    """``DeltaTable.scan(predicate=<SQL>)`` (DataFusion, file skipping by statistics) against the
    same scan of the stats-free twin."""

    name = "delta-rs-scan"

    def render(self, table: Table, predicate: Predicate) -> str:
        return predicate.render("datafusion")

    def cannot(self, table: Table, predicate: Predicate) -> str | None:
        # deltalake 1.6.3 (Spark 3.5's stack): a filter on a field of a struct<int, string>
        # matches every row (``a['x'] = 1`` counts both of (1, 'x'), (2, 'y')), statistics or not
        if not hasattr(DeltaTable, "scan") and any(len(path) > 1 for path in predicate.columns()):
            return "a struct field (deltalake 1.6.3's DataFusion filters struct fields wrongly, with statistics or not)"
        return None

    @staticmethod
    def _counts(delta: DeltaTable, found: Sequence[Predicate | None]) -> list[int]:
        if not hasattr(delta, "scan"):  # deltalake before 1.6.6: the same engine through QueryBuilder
            return [_query_count(delta, p) for p in found]
        return [
            sum(batch.num_rows for batch in delta.scan(predicate=None if p is None else p.render("datafusion")))
            for p in found
        ]

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return self._counts(table.delta, found)

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return self._counts(DeltaTable(table.twin), found)


def _query_count(delta: DeltaTable, predicate: Predicate | None) -> int:
    where = "" if predicate is None else f" WHERE {predicate.render('datafusion')}"
    result = QueryBuilder().register("t", delta).execute(f"SELECT count(*) AS n FROM t{where}").read_all()
    return int(pa.table(result).column("n")[0].as_py())


def polars_statistics_hook() -> str | None:
    """The name of the function through which this Polars' ``scan_delta`` reads the add actions'
    statistics (in ``polars.io.delta._dataset``), or None when it reads none."""
    with contextlib.suppress(ImportError):
        import polars.io.delta._dataset as dataset  # noqa: PLC0415 (an optional reader)

        name = "_extract_table_statistics_from_delta_add_actions"
        if hasattr(dataset, name):
            return name
    return None


class Polars(Reader):
    """``pl.scan_delta(path).filter(e)``, and the same scan with the function through which it
    reads the add actions' statistics returning none (its row-group pruning by the footers stays)."""

    name = "polars"

    def refuses(self, table: Table) -> str | None:
        return "column mapping (Polars' scan_delta refuses it)" if table.log.column_mapping else None

    def render(self, table: Table, predicate: Predicate) -> str:
        return str(predicate.polars())

    @staticmethod
    def _counts(table: Table, found: Sequence[Predicate | None]) -> list[int]:
        import polars as pl  # noqa: PLC0415 (an optional reader)

        scan = pl.scan_delta(table.path)
        frames = [(scan if p is None else scan.filter(p.polars())).select(pl.len()) for p in found]
        return [int(frame.item()) for frame in pl.collect_all(frames)]

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return self._counts(table, found)

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        hook = polars_statistics_hook()
        if hook is None:
            return self._counts(table, found)
        import polars.io.delta._dataset as dataset  # noqa: PLC0415 (an optional reader)

        original = getattr(dataset, hook)
        setattr(dataset, hook, lambda *args, **kwargs: None)
        try:
            return self._counts(table, found)
        finally:
            setattr(dataset, hook, original)


@functools.cache
def duckdb_delta_extension() -> str | None:
    """The signed ``delta`` extension that the ``duckdb-extension-delta`` package ships for the
    installed DuckDB, or None."""
    try:
        import duckdb  # noqa: PLC0415 (an optional reader)
        import duckdb_extension_delta  # noqa: PLC0415
    except ImportError:
        return None
    folder = os.path.dirname(duckdb_extension_delta.__file__)
    path = os.path.join(folder, "extensions", f"v{duckdb.__version__}", "delta.duckdb_extension")
    return path if os.path.exists(path) else None


@functools.cache
def _duckdb() -> Any:
    """One DuckDB connection per process with the ``delta`` extension loaded (loading its 80 MB
    costs half a second)."""
    import duckdb  # noqa: PLC0415 (an optional reader)

    connection = duckdb.connect()
    connection.execute(f"LOAD {_squote(duckdb_delta_extension() or '')}")
    connection.execute("SET TimeZone = 'UTC'")
    return connection


class DuckDB(Reader):
    """DuckDB's ``delta_scan`` (delta-kernel-rs): ``WHERE p`` per predicate in one ``UNION ALL``,
    against the same with ``pushdown_filters='none'``, which keeps the filter in DuckDB's Parquet
    scan (its row-group pruning) but gives the kernel none, so that it skips no file."""

    name = "duckdb"

    def refuses(self, table: Table) -> str | None:
        # pyarrow names Hadoop's LZ4 (Spark's "lz4") UNKNOWN, and LZ4_RAW LZ4
        if table.codecs() - {"UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD", "LZ4", "BROTLI"}:
            return "Hadoop's LZ4 codec (DuckDB reads LZ4_RAW only)"
        return None

    def cannot(self, table: Table, predicate: Predicate) -> str | None:
        if any("." in name for path in predicate.columns() for name in path):
            return "a column name with a dot (delta_scan's kernel predicate splits names at dots)"
        return None

    def render(self, table: Table, predicate: Predicate) -> str:
        return predicate.render("duckdb")

    @staticmethod
    def _counts(table: Table, found: Sequence[Predicate | None], options: str) -> list[int]:
        connection = _duckdb()
        source = f"delta_scan({_squote(table.path)}{options})"
        query = " UNION ALL ".join(
            f"SELECT {i} AS i, count(*) AS n FROM {source}" + ("" if p is None else f" WHERE {p.render('duckdb')}")
            for i, p in enumerate(found)
        )
        counts = dict(connection.execute(query).fetchall())
        return [int(counts[i]) for i in range(len(found))]

    def with_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return self._counts(table, found, "")

    def without_statistics(self, table: Table, found: Sequence[Predicate | None]) -> list[int]:
        return self._counts(table, found, ", pushdown_filters='none'")


def readers(spark: SparkSession | None) -> tuple[list[Reader], dict[str, str]]:
    """The readers this environment has (delta-spark when ``spark`` is given), and why each
    missing one is missing."""
    found: list[Reader] = [DeltaRsScan()]
    missing: dict[str, str] = {}
    if _pyarrow_dataset_skips():
        found[:0] = [PyarrowDataset(), PyarrowFilters()]
    else:
        missing["pyarrow-dataset"] = missing["pyarrow-filters"] = (
            "deltalake's pyarrow dataset skips no file by statistics here (deltalake 1.6.3 with pyarrow 14)"
        )
    if "file_pruning_predicate" in inspect.signature(DeltaTable.file_uris).parameters:
        found.insert(-1, DeltaRsFileUris())
    else:
        missing["delta-rs-file-uris"] = "this deltalake's file_uris takes no file_pruning_predicate"
    if spark is not None:
        found.insert(0, DeltaSpark(spark))
    else:
        missing["delta-spark"] = "not asked for (SPARK_MLT_TEST_DELTA_SPARK=1 with Delta's jars)"
    try:
        import polars  # noqa: F401, PLC0415 (an optional reader)

        found.append(Polars())
    except ImportError:
        missing["polars"] = "polars is not installed"
    if duckdb_delta_extension() is not None:
        found.append(DuckDB())
    else:
        missing["duckdb"] = "duckdb with duckdb-extension-delta of its version is not installed"
    return found, missing


@functools.cache
def _pyarrow_dataset_skips() -> bool:
    """Whether deltalake's pyarrow dataset skips a file whose statistics exclude the filter (the
    file is deleted from disk: reading it fails)."""
    from deltalake import write_deltalake  # noqa: PLC0415 (only these probes write through deltalake)

    with tempfile.TemporaryDirectory() as folder:
        write_deltalake(folder, pa.table({"x": pa.array([1], pa.int64())}))
        write_deltalake(folder, pa.table({"x": pa.array([100], pa.int64())}), mode="append")
        os.remove(os.path.join(folder, unquote(Log.read(folder).adds[1]["path"])))
        try:
            return bool(DeltaTable(folder).to_pyarrow_dataset().count_rows(filter=pc.field("x") < 50) == 1)
        except OSError:
            return False


@functools.cache
def _pyarrow_dataset_fails() -> str | None:
    """Why deltalake's pyarrow dataset fails on a table of one file in this environment, or None
    (deltalake 1.6.3 with pyarrow 14.0.1, PySpark 3.5.0's stack: TypeError in pyarrow.field)."""
    from deltalake import write_deltalake  # noqa: PLC0415 (only these probes write through deltalake)

    with tempfile.TemporaryDirectory() as folder:
        rows = pa.table({"x": pa.array([1, 2], pa.int64()), "p": pa.array(["a", None])})
        write_deltalake(folder, rows, partition_by=["p"])
        try:
            DeltaTable(folder).to_pyarrow_dataset().count_rows()
        except Exception as error:  # noqa: BLE001 (the reason it refuses)
            return f"a null partition value (to_pyarrow_dataset fails on one here: {_error(error)[:80]})"
    return None


READERS = (
    "delta-spark",
    "pyarrow-dataset",
    "pyarrow-filters",
    "delta-rs-file-uris",
    "delta-rs-scan",
    "polars",
    "duckdb",
)


# --- running cases ------------------------------------------------------------------------------


@dataclass
class Finding:
    """A reader that counted with statistics other than without (or failed)."""

    case: Case
    reader: str
    predicate: str
    rendered: str
    with_stats: int | None
    without: int | None
    error: str | None = None
    diagnosis: str = ""
    cause: str = ""

    @property
    def kind(self) -> str:
        if self.reader == "statistics":
            return "wrong statistic"
        if self.error is not None:
            return "error"
        if self.predicate == "":
            return "total"
        return "lost rows" if (self.with_stats or 0) < (self.without or 0) else "extra rows"

    def message(self) -> str:
        counts = (
            f"error {self.error}"
            if self.error is not None
            else f"{self.with_stats} rows with statistics, {self.without} without"
        )
        text = f"[{self.kind}] {self.reader}: {self.predicate or '(no filter)'}"
        if self.rendered and self.rendered != self.predicate:
            text += f"  [as {self.rendered}]"
        text += f": {counts}" + (f" [{self.cause}]" if self.cause else "") + f"\n    {self.case.describe()}"
        return text + (f"\n{self.diagnosis}" if self.diagnosis else "")


@dataclass
class Tally:
    """What a run of cases compared, skipped, found and spent."""

    cases: int = 0
    predicates: int = 0
    compared: Counter[str] = field(default_factory=Counter)
    skips: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def summary(self) -> str:
        kinds = Counter(f"{f.reader} {f.kind}" for f in self.findings)
        lines = [
            f"differential: {self.cases} cases, {self.predicates} predicates, "
            f"{sum(self.compared.values())} reader counts compared "
            f"({', '.join(f'{r} {n}' for r, n in sorted(self.compared.items()))}), "
            f"{len(self.findings)} findings "
            f"({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})"
        ]
        causes = Counter(f"{f.reader} {f.kind}: {f.cause}" for f in self.findings if f.cause)
        if causes:
            lines.append("by cause: " + "; ".join(f"{c}: {n}" for c, n in sorted(causes.items())))
        if self.skips:
            lines.append("skipped: " + "; ".join(f"{reason}: {n}" for reason, n in sorted(self.skips.items())))
        timing = ", ".join(
            f"{name} {sum(values) / len(values):.2f}" for name, values in sorted(self.seconds.items()) if values
        )
        lines.append(f"seconds per case: {timing}")
        return "\n".join(lines)


def run_case(
    spark: SparkSession,
    case: Case,
    root: str,
    found: Sequence[Reader],
    tally: Tally,
    *,
    limit: int = 48,
    chosen: Sequence[Predicate] | None = None,
) -> None:
    """Writes the case under ``root``, asks every reader the ``chosen`` predicates (by default
    ``limit`` of the case's own) and records into ``tally`` what they compared, skipped and found,
    and the seconds each part took."""
    path, twin = os.path.join(root, "table"), os.path.join(root, "twin")
    started = time.perf_counter()
    try:
        write_case(spark, case, path)
    except Exception as error:  # noqa: BLE001 (the writer failing on a valid case is a finding)
        tally.findings.append(Finding(case, "writer", "", "", None, None, error=_error(error)))
        return
    finally:
        tally.seconds["write"].append(time.perf_counter() - started)
    tally.cases += 1
    log = Log.read(path)
    write_twin(path, log, twin)
    table = Table(case, path, twin, log)
    if chosen is None:
        chosen = predicates(case, random.Random(f"predicates-{case.seed}"), limit=limit)
    tally.predicates += len(chosen)
    _audit_all(table, tally)
    for reader in found:
        reason = reader.refuses(table)
        if reason is not None:
            tally.skips[f"{reader.name}: {reason}"] += 1
            continue
        asked = _asked(reader, table, chosen, tally)
        started = time.perf_counter()
        answers = _ask(reader, table, asked)
        exact = _exact(reader, table, asked)
        tally.seconds[reader.name].append(time.perf_counter() - started)
        for predicate, answer, count in zip(asked, answers, exact, strict=True):
            _record(reader, table, predicate, answer, tally, exact=count)


#: What ``audit`` says that contradicts a file's values (not only a hazard to some reader).
_CONTRADICTIONS = ("above the file's smallest", "below the file's largest", "nullCount")


def _audit_all(table: Table, tally: Tally) -> None:
    """Every statistic of every leaf column that its file's values contradict, as a finding of
    the reader ``statistics`` (whether or not a predicate meets it)."""
    for column, _ in leaves(table.case):
        try:
            problems = audit(table, column.path)
        except OSError as error:  # pyarrow 14 (Spark 3.5's stack) fails on some of parquet-java's v2 pages
            tally.skips[f"audit: pyarrow {pa.__version__} cannot read a file ({_error(error)[:60]})"] += 1
            return
        for problem in problems:
            if any(text in problem for text in _CONTRADICTIONS):
                finding = Finding(table.case, "statistics", ".".join(column.path), "", None, None)
                finding.error = f"{column.kind.simpleString()}: {problem}"
                tally.findings.append(finding)


def _asked(reader: Reader, table: Table, chosen: Sequence[Predicate], tally: Tally) -> list[Predicate | None]:
    """What the reader is asked: no filter (every row), then the predicates it can ask, at most
    its ``budget`` of them."""
    budget = getattr(reader, "budget", None)
    mine = list(chosen)
    if budget is not None and len(mine) > budget:
        mine = random.Random(f"{reader.name}-{table.case.seed}").sample(mine, budget)
    asked: list[Predicate | None] = [None]
    for predicate in mine:
        why = reader.cannot(table, predicate)
        if why is None:
            asked.append(predicate)
        else:
            tally.skips[f"{reader.name}: {why}"] += 1
    return asked


def _record(
    reader: Reader,
    table: Table,
    predicate: Predicate | None,
    answer: tuple[int, int] | str,
    tally: Tally,
    *,
    exact: int | None = None,
) -> None:
    """Records one answer: compared, a known reader error (a skip), or a finding. Where the reader
    has an ``exact`` count (see ``Reader.exact``) and its count without Delta's statistics is not
    it, its own footer pruning is wrong there, and nothing tells the table's statistics by it."""
    if answer == "":  # the table failed as a whole: one finding already says so
        return
    if exact is not None and not isinstance(answer, str) and answer[1] != exact:
        tally.skips[f"{reader.name}: its count without Delta's statistics is not its exact count (its footers)"] += 1
        return
    finding = Finding(table.case, reader.name, "", "", None, None)
    if predicate is not None:
        finding.predicate = str(predicate)
        finding.rendered = _safely(functools.partial(reader.render, table, predicate))
    if isinstance(answer, str):
        known = [label for name, text, label in KNOWN_READER_ERRORS if name == reader.name and text in answer]
        if known:
            tally.skips[f"{reader.name}: its known bug: {known[0]}"] += 1
        else:
            finding.error = answer
            tally.findings.append(finding)
        return
    tally.compared[reader.name] += 1
    finding.with_stats, finding.without = answer
    if answer[0] == answer[1] and (predicate is not None or answer[1] == len(table.case.rows)):
        return
    if predicate is not None:
        finding.diagnosis = _safely(functools.partial(diagnose, table, predicate))
        finding.cause = _safely(functools.partial(cause, table, predicate))
    tally.findings.append(finding)


#: Errors that are the reader's, on tables any writer makes (each reproduced without spark-mlt:
#: see the module's notes): the reader, a text of the error, what it is.
KNOWN_READER_ERRORS: tuple[tuple[str, str, str], ...] = (
    *(
        (
            reader,
            "Integer overflow: out of range integral type conversion attempted",
            "delta-rs (arrow-rs) fails to decode parquet-java's DELTA_BINARY_PACKED pages "
            "(parquet.writer.version=v2) of a timestamp column from year 1 to 9999; pyarrow reads them",
        )
        for reader in ("delta-rs-scan", "delta-rs-file-uris")
    ),
    (
        "polars",
        "The children DataTypes of a StructArray must equal the children data types",
        "Polars 1.44 panics reading a struct holding a decimal that Parquet stores as bytes "
        "(writeLegacyFormat, or precision above 18)",
    ),
    (
        "polars",
        "incoming: Datetime('ms'",
        "Polars 1.44 does not read a file's millisecond timestamps into the table's microseconds",
    ),
    (
        "polars",
        '"DeltaByteArray"-encoded optional parquet pages not yet supported',
        "Polars 2.1 does not decode parquet-java 1.13's DELTA_BYTE_ARRAY pages of a fixed-length decimal "
        "(Spark 3.5, parquet.writer.version=v2)",
    ),
    (
        "polars",
        "structs do not have the same number of fields",
        "Polars 2.1 casts a struct's statistics to the struct's type, which fails when they bound "
        "fewer of its fields (none of a binary field)",
    ),
)


def _reader_error(error: BaseException) -> bool:
    """Whether ``error`` is a reader's failure: an Exception, or the panic of a Rust reader
    (pyo3's PanicException, a BaseException that cannot be imported)."""
    return isinstance(error, Exception) or type(error).__name__ == "PanicException"


def _exact(reader: Reader, table: Table, asked: Sequence[Predicate | None]) -> list[int | None]:
    """The reader's exact count of each predicate, None where it has none (or cannot say it)."""
    try:
        counts = reader.exact(table, asked)
    except BaseException as error:  # a predicate its in-memory filter cannot evaluate: no exact counts
        if not _reader_error(error):
            raise
        counts = None
    return [None] * len(asked) if counts is None else list(counts)


def _ask(reader: Reader, table: Table, asked: Sequence[Predicate | None]) -> list[tuple[int, int] | str]:
    """The reader's two counts of each predicate, all in one go, or, when that fails, one by one:
    the error of each predicate it fails on."""
    try:
        return list(zip(reader.with_statistics(table, asked), reader.without_statistics(table, asked), strict=True))
    except BaseException as error:  # which predicate failed, if not the table: each one alone
        if not _reader_error(error):
            raise
    answers: list[tuple[int, int] | str] = []
    for predicate in asked:
        try:
            alone = [predicate]
            answers.append((reader.with_statistics(table, alone)[0], reader.without_statistics(table, alone)[0]))
        except BaseException as error:  # a finding
            if not _reader_error(error):
                raise
            answers.append(_error(error))
            if predicate is None:  # the table itself: one finding
                return answers + ["" for _ in asked[1:]]
    return answers


def _safely(text: Callable[[], str]) -> str:
    """A message part, or why it could not be made (pyarrow cuts strings in an expression's text
    inside a UTF-8 sequence and then fails to decode it)."""
    try:
        return text()
    except Exception as error:  # noqa: BLE001 (a message must not end the run)
        return f"({_error(error)})"


def _error(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:800]}"


# --- diagnosis ------------------------------------------------------------------------------------


def audit(table: Table, path: tuple[str, ...], files: set[int] | None = None) -> list[str]:
    """The statistics of the column at the logical ``path`` that a file's own values contradict
    (a minimum above its smallest value or a maximum below its largest, in Spark's order:
    strings as UTF-8 bytes, NaN above every number, -0.0 below 0.0 as total orders put it), a
    null count other than its nulls, the bounds written alone, and zero bounds that readers
    ordering -0.0 below 0.0 misread (a minimum of 0.0, a maximum of -0.0: the Parquet format asks
    writers for -0.0 and 0.0 there), of the files at the indexes ``files`` (default: all). Dates
    and timestamps of files written in Spark's legacy calendar are left out (they read back
    shifted)."""
    kind = next((column.kind for column, _ in leaves(table.case) if column.path == path), None)
    if kind is None or path[0] in table.case.partition_by:
        return []
    physical = _physical_paths(table.log).get(path, path)
    found = []
    for index, (add, footer) in enumerate(zip(table.log.adds, table.footers, strict=True)):
        if files is not None and index not in files:
            continue
        name = unquote(add["path"])
        stats = json.loads(add.get("stats") or "{}", parse_float=Decimal, parse_constant=float)
        low, high = _get(stats.get("minValues"), physical), _get(stats.get("maxValues"), physical)
        nulls = _get(stats.get("nullCount"), physical)
        if (low is None) != (high is None):
            alone = ("minValues", low) if high is None else ("maxValues", high)
            found.append(f"{name}: {alone[0]} written alone ({alone[1]!r})")
        if isinstance(kind, _FLOATS):
            if low is not None and float(low) == 0.0 and math.copysign(1, float(low)) > 0:
                found.append(f"{name}: signed zero: minValues 0.0, not -0.0")
            if high is not None and float(high) == 0.0 and math.copysign(1, float(high)) < 0:
                found.append(f"{name}: signed zero: maxValues -0.0, not 0.0")
        legacy = any(key in (footer.metadata or {}) for key in _LEGACY_KEYS)
        if legacy and isinstance(kind, DateType | TimestampType | TimestampNTZType):
            continue
        values = _file_values(table.rows_of(index), physical)
        if nulls is not None and not isinstance(nulls, dict) and nulls != sum(v is None for v in values):
            found.append(f"{name}: nullCount {nulls}, the file holds {sum(v is None for v in values)} nulls")
        present = [v for v in values if v is not None]
        if not present or not _bounded(kind):
            continue
        key = _order(kind)
        smallest, largest = min(present, key=key), max(present, key=key)
        if low is not None and key(_stat_value(kind, low)) > key(smallest):
            found.append(f"{name}: minValues {low!r} above the file's smallest value {smallest!r}")
        if high is not None and key(_stat_value(kind, high)) < key(largest):
            found.append(f"{name}: maxValues {high!r} below the file's largest value {largest!r}")
    return found


_LEGACY_KEYS = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")


def _bounded(kind: DataType) -> bool:
    return isinstance(kind, (*_INTEGERS, *_FLOATS, DecimalType, StringType, DateType, *_TIMES))


def _file_values(rows: pa.Table, path: tuple[str, ...]) -> list[Any]:
    """The values of a leaf column of a data file's rows (Spark's view: timestamps as
    microseconds)."""
    array = rows.column(path[0]).combine_chunks()
    for name in path[1:]:
        array = pc.struct_field(array, name)  # a null parent makes the child null
    if pa.types.is_timestamp(array.type):
        return pc.cast(pc.cast(array, pa.timestamp("us", array.type.tz)), pa.int64()).to_pylist()
    if pa.types.is_date(array.type):
        return pc.cast(array, pa.int32()).to_pylist()
    return array.to_pylist()


def _order(kind: DataType) -> Callable[[Any], Any]:
    if isinstance(kind, StringType):
        return lambda v: v.encode("utf-8")
    if isinstance(kind, _FLOATS):
        # Spark's order, NaN above infinity; -0.0 below 0.0 (DataFusion's and the kernel's total order)
        return lambda v: (1, 0.0, 0) if math.isnan(v) else (0, v, math.copysign(1, v))
    return lambda v: v


def _stat_value(kind: DataType, value: Any) -> Any:
    """A statistic's JSON value as ``_file_values`` gives values of ``kind``."""
    if isinstance(kind, DateType):
        return (dt.date.fromisoformat(value) - dt.date(1970, 1, 1)).days
    if isinstance(kind, _TIMES):
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=None)
        return (moment - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    if isinstance(kind, _FLOATS):
        return float(value)
    if isinstance(kind, DecimalType):
        return Decimal(str(value))
    return value


_PROBLEMS = (
    ("written alone", "a bound written alone"),
    ("signed zero", "a signed zero bound"),
    ("above the file's smallest", "a minimum above a value"),
    ("below the file's largest", "a maximum below a value"),
    ("nullCount", "a wrong null count"),
)


def matching_files(table: Table, predicate: Predicate) -> set[int] | None:
    """The indexes of the files holding a row the predicate matches (DataFusion on the twin), or
    None when DataFusion cannot tell."""
    try:
        return {f for f, n in _twin_counts(table, [predicate])[0].items() if n}
    except Exception:  # noqa: BLE001 (then every file is a suspect)
        return None


def cause(table: Table, predicate: Predicate) -> str:
    """The kinds of wrong statistics (``audit``) of the predicate's columns in the files holding
    a matching row, with their types: ``"a maximum below a value (decimal(38,10))"``; ``"no wrong
    statistic"`` when none is."""
    kinds = {column.path: column.kind for column, _ in leaves(table.case)}
    files = matching_files(table, predicate)
    found = sorted(
        {
            f"{label} ({kinds[path].simpleString()})"
            for path in predicate.columns()
            for problem in audit(table, path, files)
            for text, label in _PROBLEMS
            if text in problem
        }
    )
    return "; ".join(found) or "no wrong statistic"


def diagnose(table: Table, predicate: Predicate) -> str:
    """What the statistics say of the predicate's columns: each wrong one (see ``audit``), then
    for each file its ``add``'s statistics and the Parquet footer's own, row group by row group."""
    files = matching_files(table, predicate)
    lines = [f"    WRONG {problem}" for path in sorted(predicate.columns()) for problem in audit(table, path, files)]
    if files is not None:
        lines.append(f"    files holding a matching row: {sorted(files)} (of {len(table.log.adds)}, in log order)")
    physical = _physical_paths(table.log)
    for add, footer in zip(table.log.adds, table.footers, strict=True):
        stats = json.loads(add.get("stats") or "{}", parse_float=Decimal, parse_constant=float)
        for logical in sorted(predicate.columns()):
            path = physical.get(logical, logical)
            recorded = {stat: _get(stats.get(stat), path) for stat in ("minValues", "maxValues", "nullCount")}
            groups = []
            for g in range(footer.num_row_groups):
                for c in range(footer.num_columns):
                    chunk = footer.row_group(g).column(c)
                    if tuple(chunk.path_in_schema.split(".")) == path:
                        groups.append(_footer_statistics(chunk))
            lines.append(
                f"    {unquote(add['path'])} ({stats.get('numRecords')} rows) {'.'.join(logical)}: {recorded}; "
                f"footer: {groups}"
            )
    return "\n".join(lines)


def _footer_statistics(chunk: pq.ColumnChunkMetaData) -> str:
    """A row group's statistics of one column: its raw bounds, and as its logical type says."""
    stats = chunk.statistics
    if stats is None:
        return f"{chunk.physical_type}: no statistics"
    text = f"{chunk.physical_type} {stats.logical_type}: nulls={stats.null_count if stats.has_null_count else None}"
    if stats.has_min_max:
        text += f" min_raw={stats.min_raw!r} max_raw={stats.max_raw!r}"
        with contextlib.suppress(Exception):
            text += f" (min={stats.min!r} max={stats.max!r})"
    return text


def _physical_paths(log: Log) -> dict[tuple[str, ...], tuple[str, ...]]:
    out: dict[tuple[str, ...], tuple[str, ...]] = {}

    def walk(fields: list[dict[str, Any]], logical: tuple[str, ...], physical: tuple[str, ...]) -> None:
        for f in fields:
            name = f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"])
            here, there = (*logical, f["name"]), (*physical, name)
            out[here] = there
            if isinstance(f["type"], dict) and f["type"].get("type") == "struct":
                walk(f["type"]["fields"], here, there)

    walk(json.loads(log.metadata["schemaString"])["fields"], (), ())
    return out


def _get(tree: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(tree, dict) or name not in tree:
            return None
        tree = tree[name]
    return tree
