"""Generated cases for the engine-differential harness (`tests.support.engine_differential`).

A case is one query shape: a codec, an operation (encode, decode, unpack), a layout, an engine,
the input's Spark type, ``handle_invalid``, ANSI mode on or off, whether Spark evaluates the
expressions in generated code or interpreted (``eval``, which must agree with it), and the values: many
per case, so that one DataFrame (one query) compares them all. Each is drawn by one
``random.Random`` named by its seed, so a case reruns alone from its seed.

Codec families (``FAMILIES``), each a small fixed pool of (p, n) so that the functions a case
registers or publishes for its codec serve later cases of the same codec:

* ``p2``: p = 2 (parity tables, one bit per token), n up to 63;
* ``tables``: small p with lookup tables on both sides (p**2 <= 1024 for encoding,
  4**bit_length(p - 1) <= 1024 for decoding, `spark_mlt.codec.tables`), and p = 37, 97 with
  tables for encoding only;
* ``mid``: p from 251 to 65537, no tables, lanes of several outputs per bigint;
* ``large``: p near 2**30 and 2**31 (one output per bigint, ``sum_mod`` groups);
* ``wide``: p**n past 2**63 (ids stop at 2**63 - 1; token vectors above it are invalid).

Values sit at and past every edge: for encode, every integer width, decimals of several
precisions and scales (``decimal(38,0)`` beyond bigint), doubles, floats and strings of digits;
negative, zero, ``max_id`` and ``max_id + 1``, fractions, NaN and infinities, nulls. For decode:
token vectors of valid ids and invalid ones (a token at p or above, a negative token, too few or
too many tokens, a null token, a vector that decodes past 2**63, packed bits above the n tokens
or a lane at p or above, vector values that round outside [0, p), NaN and infinities, values
half way between two tokens).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from decimal import Context, Decimal, localcontext
from typing import Any

from spark_mlt import MLTCodec

__all__ = [
    "COLUMN_ENGINES",
    "DECIMALS",
    "FAMILIES",
    "INTEGRAL",
    "SQL_ENGINES",
    "Case",
    "codec_of",
    "engines_of_line",
    "generate",
    "integer_range",
]

#: (p, n) per family: a few codecs each, so that cases share them (see the module's notes).
FAMILIES: dict[str, tuple[tuple[int, int], ...]] = {
    "p2": ((2, 1), (2, 7), (2, 20), (2, 40), (2, 63)),
    "tables": ((3, 5), (5, 3), (13, 3), (13, 16), (17, 6), (31, 12), (37, 4), (97, 5)),
    "mid": ((251, 8), (1009, 4), (65521, 4), (65537, 3)),
    "large": ((2**30 + 3, 2), (2**30 + 3, 8), (2**31 - 1, 1), (2**31 - 1, 2)),
    "wide": ((13, 20), (251, 9), (3, 40), (65537, 4), (2**31 - 1, 3)),
}
#: matrix seeds: two matrices per (p, n)
MATRIX_SEEDS = (42, 7)

#: the column functions' engines, and the SQL functions': ``sql-<engine>`` registered by
#: ``register_mlt_functions(engine=...)``, ``publish`` the catalog functions of ``publish_table``
COLUMN_ENGINES = ("udf", "native", "jvm")
SQL_ENGINES = ("sql-native", "sql-jvm", "sql-udf", "publish")

INTEGRAL = ("tinyint", "smallint", "int", "bigint")
#: decimal types of ids: INT32- and INT64-sized, bigint's own width, beyond it, fractions
DECIMALS = ((3, 0), (9, 2), (18, 0), (19, 0), (20, 1), (38, 0), (38, 10), (38, 37))

ENCODE_LAYOUTS = ("array", "struct", "packed", "vector")
#: layouts the SQL functions have (``register_mlt_functions``, ``publish_table``)
SQL_LAYOUTS = ("array", "packed")


def integer_range(kind: str) -> tuple[int, int]:
    """The values a Spark integral type holds."""
    bits = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}[kind]
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


@dataclass(frozen=True)
class Case:
    """One query shape and its values (see the module's notes).

    Attributes:
        seed: the seed it was drawn from (``SPARK_MLT_ENGINE_SEED`` reruns it).
        family, p, n, matrix_seed: the codec, ``MLTCodec.from_seed(p, n, matrix_seed)``.
        operation: ``encode``, ``decode`` or ``unpack``.
        layout: the tokens' layout (encode's output, decode's input, unpack's output).
        engine: one of `COLUMN_ENGINES` or `SQL_ENGINES`.
        by_name: the column functions' input is a column name (else a Column, bound to a lambda).
        kind: the input's Spark type (DDL; ``vector`` for an ML vector).
        handle_invalid: ``error`` or ``null``.
        ansi: ``spark.sql.ansi.enabled``.
        codegen: the query runs in generated code (else interpreted: no whole-stage code
            generation, ``spark.sql.codegen.factoryMode=NO_CODEGEN``).
        values: the input values, as ``spark.createDataFrame`` takes them for ``kind``.
        line: the Spark line it was drawn for (major, minor).
    """

    seed: int
    family: str
    p: int
    n: int
    matrix_seed: int
    operation: str
    layout: str
    engine: str
    by_name: bool
    kind: str
    handle_invalid: str
    ansi: bool
    codegen: bool
    values: tuple[Any, ...]
    line: tuple[int, int] = (4, 3)

    @property
    def codec(self) -> MLTCodec:
        return codec_of(self.p, self.n, self.matrix_seed)

    def describe(self) -> str:
        shown = ", ".join(_shown(v) for v in self.values)
        return (
            f"case seed={self.seed}: {self.operation} {self.family} codec p={self.p} n={self.n} "
            f"seed={self.matrix_seed}, layout {self.layout}, engine {self.engine}"
            f"{'' if self.engine not in COLUMN_ENGINES else ' by name' if self.by_name else ' as a Column'}, "
            f"input {self.kind}, handle_invalid={self.handle_invalid}, ansi={'on' if self.ansi else 'off'}, "
            f"{'generated code' if self.codegen else 'interpreted'}; values [{shown}]"
        )


def _shown(value: Any) -> str:
    if isinstance(value, Decimal):
        return f"Decimal('{value}')"
    return repr(value)


_CODECS: dict[tuple[int, int, int], MLTCodec] = {}


def codec_of(p: int, n: int, matrix_seed: int) -> MLTCodec:
    """``MLTCodec.from_seed(p, n, matrix_seed)``, made once per process."""
    key = (p, n, matrix_seed)
    if key not in _CODECS:
        _CODECS[key] = MLTCodec.from_seed(p, n, seed=matrix_seed)
    return _CODECS[key]


def engines_of_line(line: tuple[int, int]) -> tuple[str, ...]:
    """The engines a Spark line has: no SQL functions before 4.0 (``CREATE FUNCTION ...
    RETURN``), so neither the native engine's registered functions nor published ones; the jar
    registers its own on 3.5, and the udf engine registers UDFs everywhere."""
    if line >= (4, 0):
        return COLUMN_ENGINES + SQL_ENGINES
    return (*COLUMN_ENGINES, "sql-jvm", "sql-udf")


def generate(seed: int, *, line: tuple[int, int] = (4, 3)) -> Case:
    """The case of ``seed`` for a Spark ``line`` (see the module's notes)."""
    rng = random.Random(f"spark-mlt-engines-{seed}")
    family = rng.choice(sorted(FAMILIES))
    p, n = rng.choice(FAMILIES[family])
    matrix_seed = rng.choice(MATRIX_SEEDS)
    codec = codec_of(p, n, matrix_seed)
    packs = codec.packed_bits is not None
    engines = engines_of_line(line)
    # the column functions get twice the SQL functions' share: they have every layout and form
    engine = rng.choice([*COLUMN_ENGINES, *COLUMN_ENGINES, *engines[len(COLUMN_ENGINES) :]])
    sql = engine not in COLUMN_ENGINES
    operations = ["encode", "encode", "decode", "decode"] + (["unpack"] if packs and not sql else [])
    operation = rng.choice(operations)
    if operation == "unpack":
        engine = rng.choice(("native", "jvm"))
    layouts = SQL_LAYOUTS if sql else ENCODE_LAYOUTS
    if operation == "unpack":
        layouts = ("array", "struct")
    choices = [layout for layout in layouts if layout != "packed" or packs]
    layout = rng.choice(choices)
    handle_invalid = "error" if engine == "publish" else rng.choice(("error", "null"))
    kind, values = _input(rng, codec, operation, layout)
    return Case(
        seed=seed,
        family=family,
        p=p,
        n=n,
        matrix_seed=matrix_seed,
        operation=operation,
        layout=layout,
        engine=engine,
        by_name=rng.random() < 0.6,
        kind=kind,
        handle_invalid=handle_invalid,
        ansi=rng.random() < 0.5,
        codegen=rng.random() < 0.6,
        values=tuple(values),
        line=line,
    )


def _input(rng: random.Random, codec: MLTCodec, operation: str, layout: str) -> tuple[str, list[Any]]:
    if operation == "encode":
        return _ids(rng, codec)
    if operation == "unpack" or layout == "packed":
        kind = rng.choice(["bigint", "bigint", "int", "smallint", "tinyint"])
        return kind, _packed(rng, codec, kind)
    if layout == "vector":
        return "vector", _vectors(rng, codec)
    element = rng.choice(["int", "int", "bigint", "smallint", "tinyint"])
    if layout == "struct":
        extra = rng.random() < 0.3
        names = [f"t{j}" for j in range(codec.n)] + (["x"] if extra else [])
        if rng.random() < 0.4:
            rng.shuffle(names)
        fields = ", ".join(f"{name}:{'string' if name == 'x' else element}" for name in names)
        vectors = _token_vectors(rng, codec, element, struct=True)
        rows = [
            None if v is None else tuple("x" if name == "x" else v[int(name[1:])] for name in names) for v in vectors
        ]
        return f"struct<{fields}>", rows
    return f"array<{element}>", _token_vectors(rng, codec, element, struct=False)


# --- ids -----------------------------------------------------------------------------------------


def _valid_ids(rng: random.Random, codec: MLTCodec, high: int) -> list[int]:
    top = min(codec.max_id, high)
    return [0, 1, top, top - 1, rng.randint(0, top), rng.randint(0, top), rng.randint(0, min(top, 1000))]


def _ids(rng: random.Random, codec: MLTCodec) -> tuple[str, list[Any]]:
    roll = rng.random()
    if roll < 0.45:
        kind = rng.choice(INTEGRAL)
        low, high = integer_range(kind)
        values: list[Any] = [*_valid_ids(rng, codec, high), -1, low, high, codec.max_id + 1, None]
        values = [v for v in values if v is None or low <= v <= high]
    elif roll < 0.75:
        kind, values = _decimal_ids(rng, codec)
    elif roll < 0.9:
        kind = rng.choice(["double", "float"])
        top = min(codec.max_id, 2**24)
        values = [0.0, 1.0, float(rng.randint(0, top)), 2.5, -1.0, math.nan, math.inf, -math.inf, 1e19, 0.1, None]
    else:
        kind = "string"
        top = codec.max_id
        values = [
            "0",
            "7",
            str(rng.randint(0, top)),
            str(top),
            str(top + 1),
            "-1",
            "2.5",
            " 3 ",
            "99999999999999999999",
        ]
        values += [None]
    rng.shuffle(values)
    return kind, values


def _decimal_ids(rng: random.Random, codec: MLTCodec) -> tuple[str, list[Any]]:
    precision, scale = rng.choice(DECIMALS)
    limit = 10 ** (precision - scale)  # whole part below it
    with localcontext(Context(prec=80)):
        quantum = Decimal(1).scaleb(-scale)
        whole = [Decimal(v) for v in _valid_ids(rng, codec, limit - 1) if v < limit]
        values: list[Any] = [*whole, Decimal(-1), Decimal(codec.max_id + 1), Decimal(2**63), Decimal(limit - 1)]
        if scale:
            values += [Decimal(2) + quantum, Decimal("2.5"), Decimal(codec.max_id) - quantum, -quantum]
        values = [v.quantize(quantum) for v in values if abs(v) < limit and v.quantize(quantum) == v]
    return f"decimal({precision},{scale})", [*values, None]


# --- tokens --------------------------------------------------------------------------------------


def _tokens_of(codec: MLTCodec, ids: list[int]) -> list[list[int]]:
    return [[int(t) for t in row] for row in codec.encode(ids)] if ids else []


def _beyond_2_63(rng: random.Random, codec: MLTCodec) -> list[int] | None:
    """Tokens in [0, p) that decode to an id of 2**63 or more (only where p**n > 2**63)."""
    if codec.capacity <= 2**63:
        return None
    x = rng.randint(2**63, codec.capacity - 1)
    p, n = codec.p, codec.n
    digits = [(x // p ** (n - 1 - i)) % p for i in range(n)]
    matrix = codec.M.tolist()
    return [sum(digits[i] * int(matrix[i][j]) for i in range(n)) % p for j in range(n)]


def _token_vectors(rng: random.Random, codec: MLTCodec, element: str, *, struct: bool) -> list[Any]:
    """Token vectors of valid ids and invalid ones (see the module's notes), those whose tokens
    ``element`` holds."""
    p, n = codec.p, codec.n
    low, high = integer_range(element)
    vectors: list[Any] = _tokens_of(codec, _valid_ids(rng, codec, 2**63 - 1))
    base = rng.choice(vectors)
    j = rng.randrange(n)
    invalid = [
        [*base[:j], p, *base[j + 1 :]],
        [*base[:j], -1, *base[j + 1 :]],
        [*base[:j], high, *base[j + 1 :]],
        [*base[:j], None, *base[j + 1 :]],
    ]
    if not struct:
        invalid += [base[:-1], [*base, 0]]
    beyond = _beyond_2_63(rng, codec)
    if beyond is not None:
        invalid.append(beyond)
    vectors += invalid
    vectors.append(None)
    fits = [v for v in vectors if v is None or all(t is None or low <= t <= high for t in v)]
    rng.shuffle(fits)
    return fits


def _packed(rng: random.Random, codec: MLTCodec, kind: str) -> list[Any]:
    """Packed values of valid ids, and invalid ones: bits above the n tokens, a lane at p or
    above (where p is below 2**bits), negative values (bit 63 set); those ``kind`` holds."""
    bits = codec.require_packed_bits()
    low, high = integer_range(kind)
    valid = [int(v) for v in codec.pack(codec.encode(_valid_ids(rng, codec, 2**63 - 1)))]
    top = bits * codec.n
    values: list[Any] = [*valid, -1, low, high]
    if top < 64:
        values.append(valid[0] | (1 << top))
        values.append(1 << min(top, 62))
    if codec.p < 2**bits:
        j = rng.randrange(codec.n)
        lane = (2**bits - 1) << (bits * j)
        signed = (valid[1] | lane) - (2**64 if (valid[1] | lane) >= 2**63 else 0)
        values.append(signed)
    values.append(None)
    fits = [v for v in values if v is None or low <= v <= high]
    rng.shuffle(fits)
    return fits


def _vectors(rng: random.Random, codec: MLTCodec) -> list[Any]:
    """A vector's values (token / (p - 1)) of valid ids, nudged by less than half a token, half
    way between two tokens, and invalid: NaN, infinities, values that round outside [0, p), too
    few or too many values."""
    p, n = codec.p, codec.n
    scale = float(max(p - 1, 1))
    tokens = _tokens_of(codec, _valid_ids(rng, codec, 2**63 - 1))
    vectors: list[Any] = [[t / scale for t in v] for v in tokens]
    base = tokens[rng.randrange(len(tokens))]
    j = rng.randrange(n)

    def replaced(value: float) -> list[float]:
        return [*(t / scale for t in base[:j]), value, *(t / scale for t in base[j + 1 :])]

    vectors += [
        replaced((base[j] + 0.3) / scale),
        replaced((base[j] - 0.3) / scale),
        replaced((base[j] + 0.5) / scale),  # half way: rounds half away from zero
        replaced(0.5 / scale),
        replaced(math.nan),
        replaced(math.inf),
        replaced(-math.inf),
        replaced(-0.6 / scale),
        replaced((p - 0.4) / scale),
        replaced(1e300),
        [t / scale for t in base[:-1]],
        [*(t / scale for t in base), 0.0],
    ]
    beyond = _beyond_2_63(rng, codec)
    if beyond is not None:
        vectors.append([t / scale for t in beyond])
    vectors.append(None)
    rng.shuffle(vectors)
    return vectors
