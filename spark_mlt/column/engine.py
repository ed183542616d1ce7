"""The one interface every engine implements, and the one policy that picks an engine.

Every operation goes through an engine: encode, decode and unpack (the column functions and the ML
stages), and registering SQL functions. Three engines implement
[`ColumnEngine`][spark_mlt.column.engine.ColumnEngine]:

* ``"jvm"``: spark-mlt's jar, Spark expressions that call compiled Java
  ([`spark_mlt.column.jvm`][spark_mlt.column.jvm]); only where the session has the jar;
* ``"native"``: Spark SQL expressions (`spark_mlt.column.native`); no Python worker;
* ``"udf"``: vectorised UDFs over the NumPy codec (`spark_mlt.column.udf`).

All give bit-identical tokens, the same nulls and the same errors. An engine is made for one
session's [`Capabilities`][spark_mlt.capabilities.Capabilities] and says itself whether it can run an
operation there (`ColumnEngine.unavailable`). ``engine="auto"`` asks `EnginePolicy`, which reads what
it can see ([`Situation`][spark_mlt.column.engine.Situation]: the operation, the codec, the layout,
whether the input is bound to a lambda, and the session's capabilities) and applies its rules in
order: the first whose engine is available there and that applies wins, and each rule says why. A new
engine implements [`ColumnEngine`][spark_mlt.column.engine.ColumnEngine], joins
`ENGINE_TYPES` and adds the rules where it wins; nothing
else changes.

Example::

    >>> from spark_mlt.column.layouts import LAYOUT
    >>> situation = Situation("encode", MLTCodec.from_seed(13, 6), LAYOUT["array"], Capabilities.without_session())
    >>> POLICY.choose(situation).engine
    'native'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pyspark.sql import Column, SparkSession

from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.codec.tables import decode_tables, encode_tables
from spark_mlt.column.inputs import Input
from spark_mlt.column.jvm import JvmEngine
from spark_mlt.column.layouts import PACKED, VECTOR, TokenLayout
from spark_mlt.column.native import NativeEngine
from spark_mlt.column.udf import UdfEngine
from spark_mlt.errors import OptionError
from spark_mlt.options import Engine, EngineName, RowHandling

__all__ = [
    "ENGINE_TYPES",
    "POLICY",
    "RULES",
    "Choice",
    "ColumnEngine",
    "ColumnOperation",
    "EnginePolicy",
    "EngineRule",
    "Situation",
]

#: what an engine is asked to do
ColumnOperation = Literal["encode", "decode", "unpack", "register"]


class ColumnEngine(Protocol):
    """Builds the Columns (and SQL functions) that encode, decode and unpack, checked and named,
    for the session whose capabilities it was made with."""

    name: EngineName

    def unavailable(self, operation: ColumnOperation) -> str | None:
        """Why this engine cannot run ``operation`` in its session (a message that says what to
        do instead), or None when it can."""
        ...

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


#: every engine's type, by name: an engine is made for one session's capabilities
ENGINE_TYPES: dict[EngineName, Callable[[Capabilities], ColumnEngine]] = {
    "jvm": JvmEngine,
    "native": NativeEngine,
    "udf": UdfEngine,
}


@dataclass(frozen=True)
class Situation:
    """What the policy sees of one operation."""

    operation: ColumnOperation
    codec: MLTCodec
    layout: TokenLayout
    #: what the session that runs it has: the given one's for ``register``, else the active one's
    capabilities: Capabilities
    #: the input is bound to a lambda variable (a Column, not a column by name)
    bound: bool = False


@dataclass(frozen=True)
class EngineRule:
    """Where ``engine`` wins, and why."""

    engine: EngineName
    applies: Callable[[Situation], bool]
    reason: str


@dataclass(frozen=True)
class Choice:
    engine: EngineName
    reason: str


def _small_lambda(situation: Situation) -> bool:
    """A packed round trip whose lambda is small: lookup tables on both sides, p = 2, or at
    most six tokens."""
    codec = situation.codec
    tables = encode_tables(codec) is not None and decode_tables(codec) is not None
    return tables or codec.p == 2 or codec.n <= 6


#: the rules of ``engine="auto"``, in order; a rule whose engine is unavailable in the session is passed over
RULES: tuple[EngineRule, ...] = (
    EngineRule(
        "jvm",
        lambda s: True,
        "spark-mlt's jar is in the session: its functions are Spark expressions whose generated code is each "
        "codec's own kernel, with no Python worker and no lambda whatever the input (bench-functions, "
        "2026-11-27: at or above the native engine, within 10%, in every encode and decode cell of every layout, "
        "16 codec families on PySpark 4.3 and 7 on 3.5)",
    ),
    EngineRule(
        "udf",
        lambda s: s.operation == "register" and not s.capabilities.sql_functions,
        "Spark before 4.0 has no SQL functions (CREATE FUNCTION ... RETURN): vectorised UDFs are registered",
    ),
    EngineRule(
        "native",
        lambda s: s.operation in ("register", "unpack") or not s.bound,
        "a column by name becomes one expression that Spark's code generator compiles, with no Python "
        "worker; SQL functions and unpacking are such expressions (bench-functions, PySpark 4.3, 2026-11-25: "
        "native 0.26-1.06x xxhash64 against the udf engine's 0.08-0.35x in every encode and decode cell)",
    ),
    EngineRule(
        "udf",
        lambda s: s.operation == "decode" and s.layout is VECTOR,
        "a vector's values reach SQL text only through a lambda (SQL has no vector type); a UDF reads them as they are",
    ),
    EngineRule(
        "native",
        lambda s: not s.capabilities.arrow_udfs and (s.layout is PACKED or s.codec.p == 2),
        "pandas UDFs (before PySpark 4.1) pay a conversion per batch and cannot take every packed value "
        "(nulls turn a bigint batch into float64); p = 2 is a few bit operations (bench-functions, PySpark "
        "3.5, 2026-11-25: in one expression both engines ran at 0.01-0.06x xxhash64, the UDF faster by at most "
        "0.02x)",
    ),
    EngineRule(
        "native",
        lambda s: s.capabilities.arrow_udfs and s.layout is PACKED and _small_lambda(s),
        "a packed round trip through a small lambda (tables, p = 2 or at most six tokens) runs faster "
        "as expressions than through a UDF (bench-functions, PySpark 4.3, one expression packed, native / udf "
        "x xxhash64: (13, 6) 0.32 / 0.12, (1009, 5) 0.24 / 0.09, (65521, 4) 0.23 / 0.08, (2, 40) 0.36 / 0.05)",
    ),
    EngineRule(
        "udf",
        lambda s: True,
        "Spark runs a lambda's body (which binds a Column input once) several times slower than the same "
        "expression in a projection; a UDF evaluates its argument once (bench-functions, PySpark 4.3, one "
        "expression array, native / udf x xxhash64: (3, 39) 0.01 / 0.08, (13, 6) 0.00 / 0.10, (251, 8) 0.00 / 0.10; "
        "packed (251, 8), whose lambda is large: 0.01 / 0.13)",
    ),
)


@dataclass(frozen=True)
class EnginePolicy:
    """Picks the engine for ``engine="auto"``: the first of `RULES` whose
    engine is available in the session and that applies.

    Example::

        POLICY.choose(Situation("decode", codec, LAYOUT["array"], Capabilities.of(spark), bound=True)).reason
    """

    rules: tuple[EngineRule, ...] = RULES
    engines: Mapping[EngineName, Callable[[Capabilities], ColumnEngine]] = field(default_factory=lambda: ENGINE_TYPES)

    def choose(self, situation: Situation) -> Choice:
        """The engine ``engine="auto"`` runs in ``situation``, and why."""
        return self._pick(situation)[0]

    def engine(self, requested: Engine, situation: Situation) -> ColumnEngine:
        """The engine called ``requested``, or for ``"auto"`` the one `choose` picks, made for
        the situation's session.

        Raises:
            OptionError: the engine requested cannot run the operation there (the message says why).
        """
        if requested == "auto":
            return self._pick(situation)[1]
        engine = self.engines[requested](situation.capabilities)
        reason = engine.unavailable(situation.operation)
        if reason is not None:
            raise OptionError(reason, parameter="engine")
        return engine

    def _pick(self, situation: Situation) -> tuple[Choice, ColumnEngine]:
        made: dict[EngineName, ColumnEngine] = {}
        for rule in self.rules:
            if rule.engine not in self.engines:
                continue
            engine = made.get(rule.engine) or made.setdefault(
                rule.engine, self.engines[rule.engine](situation.capabilities)
            )
            if engine.unavailable(situation.operation) is None and rule.applies(situation):
                return Choice(rule.engine, rule.reason), engine
        raise LookupError(f"no engine for {situation}")  # pragma: no cover - the last rule always applies


POLICY = EnginePolicy()
