"""Generated tables for the file-statistics tests: schemas whose leaf names collide with other
columns at every depth, every primitive type Spark writes, and values at the edges (nulls, NaN,
-0.0, infinities, long and non-ASCII strings, whole and partial milliseconds).

One generator, driven by a ``random.Random``, serves hypothesis (``st.randoms()``) and the table
zoo (a fixed seed per table), so both draw from the same space.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import random
import string
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import DeltaError
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

#: Names that collide: Parquet's own leaf names (key, value, element, list) and each other.
NAMES = ("value", "k", "key", "element", "list", "id", "a")

PRIMITIVES: tuple[DataType, ...] = (
    ByteType(),
    ShortType(),
    IntegerType(),
    LongType(),
    FloatType(),
    DoubleType(),
    DecimalType(5, 2),
    DecimalType(18, 4),
    DecimalType(30, 2),
    DecimalType(38, 10),
    StringType(),
    BinaryType(),
    BooleanType(),
    DateType(),
    TimestampType(),
    TimestampNTZType(),
)
#: Partition column types (Hive-style folder values that every reader parses back).
PARTITION_TYPES: tuple[DataType, ...] = (IntegerType(), StringType(), DateType())

_UTC = dt.timezone.utc


@dataclass
class Case:
    """One generated table: schema, rows and table settings.

    Attributes:
        schema: the columns.
        rows: the rows, as ``spark.createDataFrame(rows, schema)`` takes them.
        partition_by: partition columns (top-level, of ``PARTITION_TYPES``).
        properties: Delta table properties (``delta.dataSkipping*``, column mapping, ...).
        files: how many files (Spark partitions) the rows are written as.
        row_group_bytes: ``parquet.block.size`` for the write (small: several row groups), or None.
        timestamps: how Spark stores timestamps (``spark.sql.parquet.outputTimestampType``).
    """

    schema: StructType
    rows: list[tuple[Any, ...]]
    partition_by: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    files: int = 1
    row_group_bytes: int | None = None
    timestamps: str = "TIMESTAMP_MICROS"

    def describe(self) -> str:
        return (
            f"{self.schema.simpleString()} partitioned by {self.partition_by} with {self.properties}, "
            f"{len(self.rows)} rows in {self.files} files, timestamps {self.timestamps}"
        )


@functools.cache
def delta_rs_creates_column_mapping() -> bool:
    """Whether this deltalake creates column-mapped tables (1.6.6 does, 1.6.3 does not)."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            schema = Schema.from_arrow(pa.schema([("a", pa.int64())]))
            DeltaTable.create(folder, schema, configuration={"delta.columnMapping.mode": "name"})
        except DeltaError:
            return False
    return True


def generate(rng: random.Random, *, jar_free: bool = False, max_rows: int = 240) -> Case:
    """A random case (see the module's notes); ``jar_free``: one the jar-free writer can create
    (deltalake 1.6 cannot create a table with a TIMESTAMP_NTZ inside a map, nor one with column
    mapping and TIMESTAMP_NTZ columns; 1.6.3 none with column mapping)."""
    fields = []
    for name in rng.sample(NAMES, rng.randint(2, 5)):
        kind = _type(rng, depth=0)
        while jar_free and "map<" in kind.simpleString() and "timestamp_ntz" in kind.simpleString():
            kind = _type(rng, depth=0)
        fields.append(StructField(name, kind, nullable=True))
    partition_by: list[str] = []
    if rng.random() < 0.3:
        name = rng.choice([n for n in ("p", "part") if n not in {f.name for f in fields}])
        fields.insert(rng.randrange(len(fields) + 1), StructField(name, rng.choice(PARTITION_TYPES), True))
        partition_by = [name]
    schema = StructType(fields)
    null_rate = rng.choice([0.0, 0.1, 0.4, 1.0])
    rows = [
        tuple(_value(rng, f.dataType, null_rate if f.name not in partition_by else 0.2) for f in schema.fields)
        for _ in range(rng.randint(1, max_rows))
    ]
    properties: dict[str, str] = {}
    choice = rng.random()
    if choice < 0.25:
        properties["delta.dataSkippingNumIndexedCols"] = str(rng.choice([-1, 0, 1, 2, 3, 5]))
    elif choice < 0.4:
        properties["delta.dataSkippingStatsColumns"] = _stats_columns(rng, schema, partition_by)
    if rng.random() < 0.15:
        properties["delta.dataSkippingStringPrefixLength"] = str(rng.choice([0, 1, 4]))
    # jar-free: deltalake cannot create a column-mapped table with a protocol of table features
    mapping = not jar_free or ("timestamp_ntz" not in schema.simpleString() and delta_rs_creates_column_mapping())
    if rng.random() < 0.25 and mapping:
        properties["delta.columnMapping.mode"] = "name"
    return Case(
        schema=schema,
        rows=rows,
        partition_by=partition_by,
        properties=properties,
        files=rng.choice([1, 1, 2, 3]),
        row_group_bytes=rng.choice([None, None, 1024]),
        timestamps=rng.choice(["TIMESTAMP_MICROS", "TIMESTAMP_MICROS", "INT96"]),
    )


def _type(rng: random.Random, depth: int) -> DataType:
    roll = rng.random()
    if depth >= 2 or roll < 0.6:
        return rng.choice(PRIMITIVES)
    if roll < 0.8:
        names = rng.sample(NAMES, rng.randint(1, 3))
        return StructType([StructField(n, _type(rng, depth + 1), True) for n in names])
    if roll < 0.9:
        return ArrayType(_type(rng, depth + 1), containsNull=True)
    return MapType(StringType(), _type(rng, depth + 1), valueContainsNull=True)


def _stats_columns(rng: random.Random, schema: StructType, partition_by: list[str]) -> str:
    """A ``delta.dataSkippingStatsColumns`` value naming top-level columns and struct fields,
    in any case (Delta matches them case-insensitively)."""
    paths: list[str] = []
    for f in schema.fields:
        if f.name in partition_by or rng.random() < 0.4:
            continue
        if isinstance(f.dataType, StructType) and rng.random() < 0.5:
            child = rng.choice(f.dataType.fields)
            paths.append(f"{f.name}.{child.name}")
        elif isinstance(f.dataType, ArrayType | MapType):
            continue  # Delta refuses stats columns of types it keeps no bounds for
        else:
            paths.append(f.name.upper() if rng.random() < 0.3 else f.name)
    return ",".join(paths) or next(f.name for f in schema.fields if f.name not in partition_by)


# --- values --------------------------------------------------------------------------------------

_STRINGS = (
    "",
    "a",
    "\x7e",
    "\x7f",
    "é",
    "中文",
    "\U0001f600",
    "\U0010ffff",
    "\uffff",
    "z" * 40,
    "a" * 31 + "\U0001f600" + "b",
    "a" * 32 + "\x7e" * 3,
    "a" * 32 + "\U0010ffff" * 3 + "x",
    "\U0010ffff" * 40,
    "é" * 33,
)


def _string(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(_STRINGS)
    alphabet = string.ascii_letters + "éü中\U0001f600\x7f"
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([1, 5, 31, 32, 33, 70])))


def _float(rng: random.Random) -> float:
    special = (math.nan, -0.0, 0.0, math.inf, -math.inf, 1e-30, -1e30, 3.4e38)
    if rng.random() < 0.3:
        return rng.choice(special)
    return rng.uniform(-1e6, 1e6)


def _decimal(rng: random.Random, kind: DecimalType) -> Decimal:
    limit = 10**kind.precision - 1
    unscaled = rng.choice([limit, -limit, 0, rng.randint(-limit, limit), rng.randint(-1000, 1000)])
    return Decimal(f"{unscaled}e-{kind.scale}")  # exact (scaleb rounds to 28 digits)


def _micros(rng: random.Random) -> int:
    # from 1900 (Spark 3.5 refuses to write older timestamps without a calendar rebase mode)
    low, high = -2_208_988_800_000_000, 4_102_444_800_000_000
    micros = rng.randint(low, high)
    return micros - micros % 1000 if rng.random() < 0.5 else micros  # whole milliseconds or not


_GENERATORS: dict[type, Callable[[random.Random], Any]] = {
    ByteType: lambda rng: rng.choice([-128, 127, 0, rng.randint(-128, 127)]),
    ShortType: lambda rng: rng.choice([-32768, 32767, rng.randint(-32768, 32767)]),
    IntegerType: lambda rng: rng.choice(
        [-(2**31), 2**31 - 1, rng.randint(-100, 100), rng.randint(-(2**31), 2**31 - 1)]
    ),
    LongType: lambda rng: rng.choice([-(2**63), 2**63 - 1, rng.randint(-100, 100), rng.randint(-(2**63), 2**63 - 1)]),
    FloatType: _float,
    DoubleType: _float,
    StringType: _string,
    BinaryType: lambda rng: bytearray(rng.randbytes(rng.randint(0, 12))),
    BooleanType: lambda rng: rng.random() < 0.5,
    DateType: lambda rng: dt.date(1583, 1, 1) + dt.timedelta(days=rng.randint(0, 3_000_000)),
    TimestampType: lambda rng: dt.datetime(1970, 1, 1, tzinfo=_UTC) + dt.timedelta(microseconds=_micros(rng)),
    TimestampNTZType: lambda rng: dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=_micros(rng)),
}


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
