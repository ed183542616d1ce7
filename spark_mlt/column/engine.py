"""The one interface every engine implements, and the one policy that picks an engine.

Every operation goes through an engine: encode, decode and unpack (the column functions and the ML
stages), and registering SQL functions. Three engines implement
[`ColumnEngine`][spark_mlt.column.engine.ColumnEngine]:

* ``"jvm"``: spark-mlt's jar, Spark expressions that call compiled Java
  ([`spark_mlt.column.jvm`][spark_mlt.column.jvm]); only where the session has the jar;
* ``"native"``: Spark SQL expressions ([`spark_mlt.column.native`][spark_mlt.column.native]); no Python worker;
* ``"udf"``: vectorised UDFs over the NumPy codec ([`spark_mlt.column.udf`][spark_mlt.column.udf]).

All give bit-identical tokens, the same nulls and the same errors. ``engine="auto"`` asks
`EnginePolicy`, which reads what it can see ([`Situation`][spark_mlt.column.engine.Situation]: the
operation, the codec, the layout, whether the input is bound to a lambda, the Spark line, whether
the session has the jar) and applies its rules in order; each rule says why its engine wins there. A
new engine implements [`ColumnEngine`][spark_mlt.column.engine.ColumnEngine], joins
[`ENGINES`][spark_mlt.column.engine.ENGINES] and adds the rules where it wins; nothing else changes.

Example::

    >>> from spark_mlt.column.layouts import LAYOUT
    >>> POLICY.choose(Situation("encode", MLTCodec.from_seed(13, 6), LAYOUT["array"], jvm=False)).engine
    'native'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pyspark.sql import Column, SparkSession

from spark_mlt.codec import MLTCodec
from spark_mlt.codec.tables import decode_tables, encode_tables
from spark_mlt.column.inputs import Input
from spark_mlt.column.jvm import JvmEngine, jvm_functions
from spark_mlt.column.layouts import PACKED, VECTOR, TokenLayout
from spark_mlt.column.native import NativeEngine
from spark_mlt.column.udf import UdfEngine
from spark_mlt.column.versions import PYSPARK_LINE, has_arrow_udfs
from spark_mlt.options import Engine, RowHandling

__all__ = [
    "ENGINES",
    "POLICY",
    "Choice",
    "ColumnEngine",
    "EnginePolicy",
    "Operation",
    "Rule",
    "Situation",
    "engine_for",
]

Operation = Literal["encode", "decode", "unpack", "register"]
EngineName = Literal["jvm", "native", "udf"]


class ColumnEngine(Protocol):
    """Builds the Columns (and SQL functions) that encode, decode and unpack, checked and named."""

    name: str

    def encode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        """Tokens of the ids in ``source``, in ``layout``."""
        ...

    def decode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        """Bigint ids of the tokens in ``source``, held in ``layout`` (a vector: its values)."""
        ...

    def unpack(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        """The tokens of packed tokens in ``source``, in ``layout`` (array or struct)."""
        ...

    def register(
        self,
        spark: SparkSession,
        codec: MLTCodec,
        names: tuple[str, str],
        layout: TokenLayout,
        handle_invalid: RowHandling,
    ) -> None:
        """Register the encoder and the decoder as SQL functions called ``names``."""
        ...


#: every engine, by name
ENGINES: dict[str, ColumnEngine] = {"jvm": JvmEngine(), "native": NativeEngine(), "udf": UdfEngine()}


@dataclass(frozen=True)
class Situation:
    """What the policy sees of one operation."""

    operation: Operation
    codec: MLTCodec
    layout: TokenLayout
    #: the input is bound to a lambda variable (a Column, not a column by name)
    bound: bool = False
    #: (major, minor) of the Spark that runs it: the session's for ``register``, else the driver's PySpark
    spark_line: tuple[int, int] = PYSPARK_LINE
    #: vectorised UDFs take Arrow batches (PySpark >= 4.1), not pandas ones
    arrow_udfs: bool = field(default_factory=has_arrow_udfs)
    #: the session has spark-mlt's JVM functions (its jar): the active session's for a column
    #: function; for ``register``, the given one's, where it can register them (`can_register`)
    jvm: bool = field(default_factory=jvm_functions)


@dataclass(frozen=True)
class Rule:
    """Where ``engine`` wins, and why."""

    engine: str
    applies: Callable[[Situation], bool]
    reason: str


@dataclass(frozen=True)
class Choice:
    engine: str
    reason: str


def _small_lambda(situation: Situation) -> bool:
    """A packed round trip whose lambda is small: lookup tables on both sides, p = 2, or at
    most six tokens."""
    codec = situation.codec
    tables = encode_tables(codec) is not None and decode_tables(codec) is not None
    return tables or codec.p == 2 or codec.n <= 6


RULES: tuple[Rule, ...] = (
    Rule(
        "native",
        lambda s: s.jvm and s.layout is PACKED and not s.bound and s.operation in ("encode", "decode"),
        "a packed column by name: the native expression (shifts and table reads that Spark's code generator "
        "inlines) ran as fast as the JVM engine's call or faster in every cell of the benchmark (PySpark 4.3, "
        "six codec families)",
    ),
    Rule(
        "jvm",
        lambda s: s.jvm,
        "spark-mlt's jar is in the session: its functions are Spark expressions that call compiled Java, "
        "one call per row in generated code, with no Python worker and no lambda whatever the input",
    ),
    Rule(
        "udf",
        lambda s: s.operation == "register" and s.spark_line < (4, 0),
        "Spark before 4.0 has no SQL functions (CREATE FUNCTION ... RETURN): vectorised UDFs are registered",
    ),
    Rule(
        "native",
        lambda s: s.operation in ("register", "unpack") or not s.bound,
        "a column by name becomes one expression that Spark's code generator compiles, with no Python "
        "worker; SQL functions and unpacking are such expressions",
    ),
    Rule(
        "udf",
        lambda s: s.operation == "decode" and s.layout is VECTOR,
        "a vector's values reach SQL text only through a lambda (SQL has no vector type); a UDF reads them as they are",
    ),
    Rule(
        "native",
        lambda s: not s.arrow_udfs and (s.layout is PACKED or s.codec.p == 2),
        "pandas UDFs (before PySpark 4.1) pay a conversion per batch and cannot take every packed value "
        "(nulls turn a bigint batch into float64); p = 2 is a few bit operations",
    ),
    Rule(
        "native",
        lambda s: s.arrow_udfs and s.layout is PACKED and _small_lambda(s),
        "a packed round trip through a small lambda (tables, p = 2 or at most six tokens) runs faster "
        "as expressions than through a UDF",
    ),
    Rule(
        "udf",
        lambda s: True,
        "Spark runs a lambda's body (which binds a Column input once) several times slower than the same "
        "expression in a projection; a UDF evaluates its argument once",
    ),
)


@dataclass(frozen=True)
class EnginePolicy:
    """Picks the engine for ``engine="auto"``: the first of [`RULES`][spark_mlt.column.engine.RULES] that applies and
    whose engine is available.

    Example::

        POLICY.choose(Situation("decode", codec, LAYOUT["array"], bound=True)).reason
    """

    rules: tuple[Rule, ...] = RULES
    engines: Mapping[str, ColumnEngine] = field(default_factory=lambda: ENGINES)

    def choose(self, situation: Situation) -> Choice:
        for rule in self.rules:
            if rule.engine in self.engines and rule.applies(situation):
                return Choice(rule.engine, rule.reason)
        raise LookupError(f"no engine for {situation}")  # pragma: no cover - the last rule always applies

    def engine(self, requested: Engine, situation: Situation) -> ColumnEngine:
        """The engine called ``requested``, or for ``"auto"`` the one `choose` picks."""
        name = self.choose(situation).engine if requested == "auto" else requested
        return self.engines[name]


POLICY = EnginePolicy()


def engine_for(requested: Engine, situation: Situation) -> ColumnEngine:
    """[`EnginePolicy.engine`][spark_mlt.column.engine.EnginePolicy.engine] of the default policy."""
    return POLICY.engine(requested, situation)
