"""The engine-differential harness: every engine's answer for every generated value against the
NumPy codec's and the documented ``handle_invalid`` semantics.

Cases come from `tests.support.engine_cases` (a seed each). For each value the reference
([`expect`][tests.support.engine_differential.expect]) says which outcomes are right:

* the tokens (or the id) the NumPy codec gives, in the layout's Python form: exactly those;
* NULL: a null input, or an invalid one with ``handle_invalid="null"``;
* an error: an invalid value with ``handle_invalid="error"`` (its message must name the value),
  or an input type the function refuses when Spark analyses the query (the column functions and
  the jar's functions take integral and decimal ids: a double, float or string fails with
  ``DATATYPE_MISMATCH``, docs/columns.md).

Where the docs leave a choice, an error is always acceptable and a wrong answer never: the SQL
functions take their id as a parameter (``BIGINT``, or ``STRING`` for the native engine's and the
published ones), so a double, float or string argument is Spark's to convert, and a whole id in
range may give its tokens or fail (or give NULL with ``handle_invalid="null"``), while a
fraction, NaN, an infinity or a number past the codec's range must fail (or give NULL with
``handle_invalid="null"``), never the tokens of another id. A row never gets tokens of another
id, nor NULL where the contract says error.

Cost: one DataFrame of all the values a case may answer together (one query; an encode case adds
``decode(encode(x))`` with the same engine, the round trip, as a second column), and with
``handle_invalid="error"`` each value that must fail in a query of its own (at most
``ALONE`` of them, drawn by the case's seed), since one invalid row fails a whole query. A batch
that fails is rerun value by value to name the value that failed it. The functions a case
registers (``register_mlt_functions``) or publishes (``publish_table``, into the schema
``mlt_engines`` from a two-column Delta table written jar-free) are made once per codec, layout
and ``handle_invalid`` and kept for the session's later cases.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, Schema
from pyspark.ml.functions import array_to_vector
from pyspark.ml.linalg import DenseVector
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from spark_mlt import MLTCodec
from spark_mlt.batch import PublishOptions, publish_table
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_decode, mlt_encode, mlt_unpack, register_mlt_functions
from spark_mlt.column.sqltext import string
from spark_mlt.storage.properties import codec_properties
from tests.support.engine_cases import COLUMN_ENGINES, Case

__all__ = ["ALONE", "Expected", "Finding", "Runner", "Tally", "expect", "refused", "run_cases"]

#: values with ``handle_invalid="error"`` that each get a query of their own, per case
ALONE = 3
#: the schema published functions go in
PUBLISH_SCHEMA = "mlt_engines"
#: the settings of a case that runs in generated code, and of one that runs interpreted (every
#: expression's ``eval``): ``ConvertToLocalRelation`` folds a projection of an inline table while
#: optimizing, interpreted; the generated case keeps it out
_FOLD_RULE = "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"
_GENERATED = {
    "spark.sql.optimizer.excludedRules": _FOLD_RULE,
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}
_INTERPRETED = {
    "spark.sql.optimizer.excludedRules": "",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
_MAX_ID = 2**63 - 1


# --- the reference -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """The outcomes that are right for one value: ``value`` (then ``result``), ``null``,
    ``error`` (then ``names``: texts of which the message must hold one, or None)."""

    outcomes: frozenset[str]
    result: Any = None
    names: tuple[str, ...] | None = None

    def __str__(self) -> str:
        parts = []
        if "value" in self.outcomes:
            parts.append(repr(self.result))
        if "null" in self.outcomes:
            parts.append("NULL")
        if "error" in self.outcomes:
            parts.append("an error" + (f" naming {' or '.join(self.names)}" if self.names else ""))
        return " or ".join(parts)


def _value(result: Any) -> Expected:
    return Expected(frozenset({"value"}), result)


_NULL = Expected(frozenset({"null"}))


def _invalid(case: Case, names: tuple[str, ...] | None, *, loose: bool = False) -> Expected:
    """An invalid value: an error naming it (``names``), or NULL with ``handle_invalid="null"``
    (``loose``: or an error, where the docs leave it to Spark's conversion)."""
    if case.handle_invalid == "null":
        return Expected(frozenset({"null", "error"} if loose else {"null"}))
    return Expected(frozenset({"error"}), names=names)


def refused(case: Case) -> bool:
    """Whether the function refuses the case's input type when Spark analyses the query: the
    column functions and the jar's take integral and decimal ids (docs/columns.md), and so does
    the jar's own registered function on Spark 3.5 (no SQL functions: docs/sql-functions.md)."""
    takes_types = case.engine in COLUMN_ENGINES or (case.engine == "sql-jvm" and case.line < (4, 0))
    return case.operation == "encode" and takes_types and case.kind in ("double", "float", "string")


def _converted(case: Case) -> bool:
    """A SQL function's argument that Spark converts to its STRING parameter (from Spark 4.0), or that a UDF
    registered on Spark 3.5 reads as it comes."""
    return case.operation == "encode" and not refused(case) and case.kind in ("double", "float", "string")


def _whole(case: Case, value: Any) -> int | None:
    """The id a value is, or None where it is no whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else None
    if isinstance(value, float):
        if case.kind == "float":
            value = float(np.float32(value))
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except ArithmeticError:
            return None
        return int(number) if number.is_finite() and number == number.to_integral_value() else None
    raise TypeError(value)


def _texts(value: Any) -> tuple[str, ...]:
    """The value as an error message may show it: Spark casts a decimal to a string plainly
    with ANSI on, in scientific notation off (-1E-37)."""
    if isinstance(value, Decimal):
        return (format(value, "f"), str(value))
    return (str(value),)


def encoded(codec: MLTCodec, layout: str, x: int) -> Any:
    """The tokens of id ``x`` in ``layout``'s Python form (what ``collect`` returns)."""
    tokens = [int(t) for t in codec.encode([x])[0]]
    if layout == "struct":
        return tuple(tokens)
    if layout == "packed":
        return int(codec.pack([tokens])[0])
    if layout == "vector":
        scale = float(max(codec.p - 1, 1))
        return [t / scale for t in tokens]
    return tokens


def _decoded(codec: MLTCodec, tokens: Sequence[int]) -> int | None:
    """The id of tokens (each in [0, p)), or None where it is 2**63 or more."""
    ids, valid = codec.decode_masked(np.array([list(tokens)], dtype=np.int64))
    return int(ids[0]) if valid[0] else None


def _rounded(value: float, scale: float) -> int | None:
    """A vector value read back: ``value * (p - 1)`` rounded half away from zero (as the docs
    say), None for NaN and infinities."""
    scaled = value * scale
    if not math.isfinite(scaled):
        return None
    return int(Decimal(scaled).to_integral_value(rounding="ROUND_HALF_UP"))


def _tokens_read(case: Case, value: Any) -> list[int | None] | None:
    """The tokens a decode (or unpack) input holds, or None where its shape is no token vector."""
    codec = case.codec
    if case.layout == "packed" or case.operation == "unpack":
        bits = codec.require_packed_bits()
        whole = value & (2**64 - 1)
        if whole >> (bits * codec.n):
            return None
        return [(whole >> (bits * j)) & (2**bits - 1) for j in range(codec.n)]
    if case.layout == "vector":
        scale = float(max(codec.p - 1, 1))
        return [_rounded(v, scale) for v in value] if len(value) == codec.n else None
    if case.kind.startswith("struct"):
        names = [part.split(":")[0] for part in case.kind[len("struct<") : -1].split(", ")]
        by_name = dict(zip(names, value, strict=True))
        return [by_name[f"t{j}"] for j in range(codec.n)]
    return list(value) if len(value) == codec.n else None


def _spark_array_text(tokens: Sequence[Any]) -> str:
    return "[" + ", ".join("null" if t is None else str(t) for t in tokens) + "]"


def _shown(case: Case, value: Any) -> tuple[str, ...] | None:
    """How an invalid decode input's message shows it, where the harness checks it: an array as
    Spark prints it, a packed value as a number (a vector shows its tokens, a struct as Spark
    casts it: not checked)."""
    if case.layout == "packed" or case.operation == "unpack":
        return (str(value),)
    if case.kind.startswith("array"):
        return (_spark_array_text(value),)
    return None


def _expect_encoded(case: Case, value: Any) -> Expected:
    codec = case.codec
    x = _whole(case, value)
    loose = _converted(case)
    if x is None or not 0 <= x <= codec.max_id:
        return _invalid(case, None if loose else _texts(value), loose=loose)
    result = encoded(codec, case.layout, x)
    if not loose:
        return _value(result)
    # Spark's text of a converted number may be one the function refuses (1.1172683E7): an
    # invalid id then, never another id's tokens
    return Expected(frozenset({"value", "error", *(["null"] if case.handle_invalid == "null" else [])}), result)


def expect(case: Case, value: Any) -> Expected:
    """What is right for ``value`` in ``case`` (see the module's notes)."""
    codec = case.codec
    if value is None:
        return _NULL
    if case.operation == "encode":
        return _expect_encoded(case, value)
    tokens = _tokens_read(case, value)
    shown = _shown(case, value)
    valid = (
        tokens is not None
        and all(t is not None and 0 <= t < codec.p for t in tokens)
        and (case.operation == "unpack" or _decoded(codec, tokens) is not None)  # type: ignore[arg-type]
    )
    if not valid:
        # a SQL function's ARRAY<INT> parameter: Spark converts an array of wider integers (its
        # error names the element that does not fit)
        loose = case.engine not in COLUMN_ENGINES and case.kind == "array<bigint>"
        return _invalid(case, None if loose else shown, loose=loose)
    assert tokens is not None
    if case.operation == "unpack":
        return _value(tuple(tokens) if case.layout == "struct" else list(tokens))
    return _value(_decoded(codec, tokens))  # type: ignore[arg-type]


# --- running ------------------------------------------------------------------------------------


@dataclass
class Finding:
    """A value whose answer is none of the right ones."""

    case: Case
    value: Any
    expected: str
    got: str
    what: str = "result"

    def message(self) -> str:
        rerun = f"SPARK_MLT_ENGINE_SEED={self.case.seed} SPARK_MLT_ENGINE_EXAMPLES=1"
        return (
            f"[{self.case.engine} {self.what}] value {self.value!r}: expected {self.expected}, got "
            f"{self.got[:600]}\n    {self.case.describe()[:1500]}\n    rerun: {rerun}"
        )


@dataclass
class Tally:
    """What a run compared, skipped, found and spent."""

    cases: int = 0
    queries: int = 0
    values: int = 0
    round_trips: int = 0
    engines: Counter[str] = field(default_factory=Counter)
    skips: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    setup: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def summary(self) -> str:
        kinds = Counter(f"{f.case.engine} {f.case.operation}" for f in self.findings)
        lines = [
            f"engines: {self.cases} cases, {self.values} values and {self.round_trips} round trips compared in "
            f"{self.queries} queries ({', '.join(f'{e} {n}' for e, n in sorted(self.engines.items()))}), "
            f"{len(self.findings)} findings ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})"
        ]
        if self.skips:
            lines.append("skipped: " + "; ".join(f"{reason}: {n}" for reason, n in sorted(self.skips.items())))
        per_case = sum(self.seconds) / len(self.seconds) if self.seconds else 0.0
        setup = ", ".join(f"{name} {sum(v):.1f} s" for name, v in sorted(self.setup.items()))
        lines.append(f"seconds per case: {per_case:.2f} ({sum(self.seconds):.0f} s in all; setup {setup or 'none'})")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Row:
    index: int
    value: Any
    expected: Expected


def _literal(kind: str, value: Any) -> str:
    """SQL text of ``value`` as a ``kind`` (an element or field type for arrays and structs)."""
    if value is None:
        return "NULL"
    if kind.startswith("array<"):
        element = kind[len("array<") : -1]
        return f"array({', '.join(_literal(element, v) for v in value)})" if value else f"CAST(array() AS {kind})"
    if kind.startswith("struct<"):
        fields = [part.split(":") for part in kind[len("struct<") : -1].split(", ")]
        pairs = [f"'{name}', {_literal(field_kind, v)}" for (name, field_kind), v in zip(fields, value, strict=True)]
        return f"named_struct({', '.join(pairs)})"
    if isinstance(value, float):
        text = (
            "NaN"
            if math.isnan(value)
            else "Infinity"
            if value == math.inf
            else "-Infinity"
            if value == -math.inf
            else repr(value)
        )
        return f"CAST('{text}' AS {kind})"
    if isinstance(value, str):
        return string(value)
    return f"CAST('{_texts(value)[0]}' AS {kind})"


def _frame(spark: SparkSession, case: Case, rows: Sequence[_Row]) -> DataFrame:
    """The rows as an inline table (``VALUES``: no Python worker reads it), ``v`` of the
    case's type; a vector built from its values by ``array_to_vector``."""
    kind = "array<double>" if case.kind == "vector" else case.kind
    values = ", ".join(f"({row.index}, CAST({_literal(kind, row.value)} AS {kind}))" for row in rows)
    frame = spark.sql(f"SELECT * FROM VALUES {values} AS t(i, v)")
    if case.kind == "vector":
        frame = frame.withColumn("v", F.when(F.col("v").isNotNull(), array_to_vector(F.col("v"))))
    return frame


def _result(value: Any) -> Any:
    """A collected value in the reference's form."""
    if isinstance(value, DenseVector):
        return value.toArray().tolist()
    if isinstance(value, Row):
        return tuple(value)
    return value


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, float) and isinstance(got, float):
        return got == want or (math.isnan(got) and math.isnan(want))
    return type(got) is type(want) and got == want if not isinstance(want, tuple) else tuple(got) == want


class Runner:
    """Runs cases in one session, keeping the functions it registers and publishes."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark = spark
        self.root = root
        self.caps = Capabilities.of(spark)
        self.jvm = self.caps.jvm_engine
        self.without_jar = dataclasses.replace(self.caps, jar_version=None)
        self.registered: dict[tuple[Any, ...], tuple[str, str]] = {}
        self.published: dict[str, str] = {}
        self.schema_made = False
        # the runner's own names: the shards of a test process share its session and catalog
        self.token = uuid.uuid4().hex[:8]

    # -- what a case needs --------------------------------------------------------------------

    def unavailable(self, case: Case) -> str | None:
        if "jvm" in case.engine and not self.jvm:
            return "no spark-mlt jar in the session"
        if case.engine in ("sql-native", "publish") and not self.caps.sql_functions:
            return f"no SQL functions on Spark {self.caps.spark_version}"
        return None

    def _functions(self, case: Case, tally: Tally) -> tuple[str, str]:
        """The encoder's and the decoder's names: registered, or published (once per codec)."""
        codec = case.codec
        if case.engine == "publish":
            prefix = self._publish(codec, tally)
            column = "a" if case.layout == "array" else "k"
            return f"{PUBLISH_SCHEMA}.{prefix}_encode_{column}", f"{PUBLISH_SCHEMA}.{prefix}_decode_{column}"
        key = (codec.fingerprint, case.layout, case.handle_invalid, case.engine)
        if key not in self.registered:
            started = time.perf_counter()
            name = f"e{len(self.registered)}_{self.token}"
            self.registered[key] = register_mlt_functions(
                self.spark,
                codec,
                name,
                layout=case.layout,  # type: ignore[arg-type]
                handle_invalid=case.handle_invalid,  # type: ignore[arg-type]
                engine=case.engine.removeprefix("sql-"),  # type: ignore[arg-type]
            )
            tally.setup["register"].append(time.perf_counter() - started)
        return self.registered[key]

    def _publish(self, codec: MLTCodec, tally: Tally) -> str:
        """Publishes the functions of a table whose ``a_mlt`` holds arrays and ``k_mlt`` packed
        tokens (where they fit) of ``codec``; returns their prefix."""
        if codec.fingerprint in self.published:
            return self.published[codec.fingerprint]
        started = time.perf_counter()
        if not self.schema_made:
            self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {PUBLISH_SCHEMA}")
            self.schema_made = True
        prefix = f"c{len(self.published)}_{self.token}"
        path = os.path.join(self.root, prefix)
        fields = [pa.field("a_mlt", pa.list_(pa.int32()))]
        codecs = {"a": codec}
        if codec.packed_bits is not None:
            fields.append(pa.field("k_mlt", pa.int64()))
            codecs["k"] = codec
        # no rows: publishing reads the schema and the codecs
        DeltaTable.create(
            path,
            Schema.from_arrow(pa.schema(fields)),
            configuration=codec_properties(codecs),
            raise_if_key_not_exists=False,
        )
        publish_table(self.spark, path, PublishOptions(schema=PUBLISH_SCHEMA, prefix=prefix, view=False))
        self.published[codec.fingerprint] = prefix
        tally.setup["publish"].append(time.perf_counter() - started)
        return prefix

    def _expression(self, case: Case, tally: Tally) -> tuple[Column, Column | None]:
        """The column under test over ``v``, and (encode) its round trip through the decoder."""
        codec = case.codec
        if case.engine not in COLUMN_ENGINES:
            encoder, decoder = self._functions(case, tally)
            if case.operation == "encode":
                return F.expr(f"{encoder}(v)"), F.expr(f"{decoder}({encoder}(v))")
            return F.expr(f"{decoder}(v)"), None
        source: str | Column = "v" if case.by_name else F.col("v")
        options: dict[str, Any] = {"layout": case.layout, "handle_invalid": case.handle_invalid}
        if case.operation == "unpack":
            caps = self.caps if case.engine == "jvm" else self.without_jar
            return mlt_unpack(source, codec, capabilities=caps, **options), None
        options["engine"] = case.engine
        if case.operation == "decode":
            return mlt_decode(source, codec, **options), None
        tokens = mlt_encode(source, codec, **options)
        return tokens, mlt_decode(tokens, codec, **options)

    # -- running ------------------------------------------------------------------------------

    def run(self, case: Case, tally: Tally) -> None:
        """Runs ``case`` and records into ``tally`` what it compared and found."""
        reason = self.unavailable(case)
        if reason is not None:
            tally.skips[f"{case.engine}: {reason}"] += 1
            return
        started = time.perf_counter()
        conf = {"spark.sql.ansi.enabled": str(case.ansi).lower(), **(_GENERATED if case.codegen else _INTERPRETED)}
        for key, value in conf.items():
            self.spark.conf.set(key, value)
        try:
            self._run(case, tally)
        except Exception as error:  # noqa: BLE001 (a case that cannot even be built is a finding)
            tally.findings.append(Finding(case, None, "a query", _error(error), what="setup"))
        finally:
            tally.seconds.append(time.perf_counter() - started)
        tally.cases += 1
        tally.engines[case.engine] += 1

    def _run(self, case: Case, tally: Tally) -> None:
        rows = [_Row(i, value, expect(case, value)) for i, value in enumerate(case.values)]
        try:
            expression = self._expression(case, tally)
        except Exception as error:  # noqa: BLE001 (a column function may refuse in Python)
            if not refused(case):
                tally.findings.append(Finding(case, None, "the case's functions", _error(error), what="setup"))
            return
        if refused(case):
            error = self._query(case, expression, rows, tally, round_trip=False)
            tally.values += len(rows)
            if not isinstance(error, str):
                tally.findings.append(Finding(case, "(every value)", "an analysis error (the type)", "a result"))
            elif "must hold" not in error and "DATATYPE_MISMATCH" not in error:
                tally.findings.append(Finding(case, "(every value)", "a type error", error, what="message"))
            return
        alone = [row for row in rows if row.expected.outcomes == {"error"}]
        batch = [row for row in rows if row.expected.outcomes != {"error"}]
        random.Random(f"alone-{case.seed}").shuffle(alone)
        tally.skips["invalid values beyond ALONE per case"] += max(0, len(alone) - ALONE)
        self._batch(case, expression, batch, tally)
        for row in alone[:ALONE]:
            self._batch(case, expression, [row], tally)

    def _batch(self, case: Case, expression: tuple[Column, Column | None], rows: list[_Row], tally: Tally) -> None:
        """Rows answered in one query; a failed one is rerun row by row (to name the row)."""
        if not rows:
            return
        round_trip = len(rows) > 1 or rows[0].expected.outcomes != {"error"}
        answer = self._query(case, expression, rows, tally, round_trip=round_trip)
        if isinstance(answer, str):
            if len(rows) == 1:
                self._check(case, rows[0], None, answer, tally)
                return
            for row in rows:
                self._batch(case, expression, [row], tally)
            return
        for row in rows:
            got, back = answer[row.index]
            self._check(case, row, got, None, tally)
            self._round_trip(case, row, back, tally)

    def _query(
        self, case: Case, expression: tuple[Column, Column | None], rows: list[_Row], tally: Tally, *, round_trip: bool
    ) -> dict[int, Any] | str:
        """Each row's answer (and round trip), or the query's error."""
        tally.queries += 1
        frame = _frame(self.spark, case, rows)
        tested, back = expression
        try:
            columns = [F.col("i"), tested.alias("got")]
            both = round_trip and back is not None
            if both:
                columns.append(back.alias("back"))
            collected = frame.select(*columns).collect()
        except Exception as error:  # noqa: BLE001 (every engine fails in its own class)
            return _error(error)
        return {r["i"]: (_result(r["got"]), r["back"] if both else None) for r in collected}

    def _check(self, case: Case, row: _Row, got: Any, error: str | None, tally: Tally) -> None:
        tally.values += 1
        expected = row.expected
        if error is not None:
            if "error" not in expected.outcomes:
                tally.findings.append(Finding(case, row.value, str(expected), error))
            elif expected.names is not None and not any(name in error for name in expected.names):
                tally.findings.append(Finding(case, row.value, str(expected), error, what="message"))
            return
        if got is None:
            if "null" not in expected.outcomes:
                tally.findings.append(Finding(case, row.value, str(expected), "NULL"))
            return
        if "value" not in expected.outcomes or not _same(got, expected.result):
            tally.findings.append(Finding(case, row.value, str(expected), repr(got)))

    def _round_trip(self, case: Case, row: _Row, back: Any, tally: Tally) -> None:
        if case.operation != "encode" or "value" not in row.expected.outcomes:
            return
        tally.round_trips += 1
        x = _whole(case, row.value)
        if back != x and not (back is None and "null" in row.expected.outcomes):
            tally.findings.append(Finding(case, row.value, f"decode(encode(x)) = {x}", repr(back), what="round trip"))


def _error(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:4000]


def run_cases(
    spark: SparkSession, cases: Sequence[Case], root: str, *, progress: Callable[[Case], None] | None = None
) -> Tally:
    """Runs ``cases`` in ``spark`` (ANSI mode and the optimizer's rules restored after)."""
    keys = ("spark.sql.ansi.enabled", *_GENERATED)
    saved = {key: spark.conf.get(key, None) for key in keys}
    tally = Tally()
    runner = Runner(spark, root)
    try:
        for case in cases:
            if progress is not None:
                progress(case)
            runner.run(case, tally)
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    return tally
