"""The JVM engine: ``mlt_encode``, ``mlt_decode`` and ``mlt_unpack`` as Spark's own expressions.

spark-mlt's jar ([`spark_mlt.jvm`][spark_mlt.jvm]) registers three SQL functions,
``f(value, codec_json[, layout[, handle_invalid[, name]]])``. Each is a ``RuntimeReplaceable``
expression whose replacement is one ``StaticInvoke`` of compiled Java, the way Spark ships
``url_decode`` or ``aes_encrypt``: whole-stage code generation emits one call per row; no
Python worker, no lambda, and a composition is one nested call. The codec's JSON (the string
a table's properties hold) is the only parameter; each executor builds its tables once.

This engine calls the functions by name (``call_function``), so it works over Spark Connect
when the server has the jar. A session has them when
[`jvm_functions`][spark_mlt.column.jvm.jvm_functions] finds them; elsewhere (serverless, a
locked-down cluster) the policy picks the jar-free engines.

The vector layout crosses to and from Spark ML's vector type at the edge, as the native
engine does: the JVM functions read and write the vector's values (``layout => 'vector'``,
an array<double> of token / (p - 1)).

Example::

    spark.sql(f"SELECT mlt_encode(user_id, '{codec.to_json()}') AS tokens FROM ratings")
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from pyspark.ml.functions import array_to_vector
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from spark_mlt.codec import MLTCodec
from spark_mlt.column import sqltext as sql
from spark_mlt.column.inputs import Input
from spark_mlt.column.layouts import VECTOR, TokenLayout
from spark_mlt.column.versions import spark_line
from spark_mlt.errors import OptionError
from spark_mlt.jvm import JVM_EXTENSION
from spark_mlt.options import RowHandling

__all__ = ["JvmEngine", "can_register", "check_jvm", "jvm_functions"]

#: the class a registered ``mlt_encode`` names when it is spark-mlt's
_ENCODE_CLASS = "io.sparkmlt.MltEncode"

_FOUND: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _active() -> SparkSession | None:
    try:
        return SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - no session (or none this PySpark can ask for) means no jar
        return None


def jvm_functions(spark: SparkSession | None = None) -> bool:
    """Whether ``spark`` (default: the active session) has spark-mlt's JVM functions.

    A classic session whose driver has the jar but whose extension did not run (the jar was
    added without ``spark.sql.extensions``) gets the functions registered here. The answer is
    kept per session.

    Example::

        jvm_functions(spark)  # True after SparkSession.builder.config(map=jvm_session_conf())
    """
    session = spark if spark is not None else _active()
    if session is None:
        return False
    try:
        return _FOUND[session]
    except (KeyError, TypeError):
        pass
    found = _registered(session) or _register(session)
    with contextlib.suppress(TypeError):  # a session type without weak references: asked each time
        _FOUND[session] = found
    return found


def _registered(spark: SparkSession) -> bool:
    try:
        return bool(spark.catalog.getFunction("mlt_encode").className == _ENCODE_CLASS)
    except Exception:  # noqa: BLE001 - AnalysisException on every line: no such function
        return False


def _register(spark: SparkSession) -> bool:
    """Register the functions in a classic session whose driver can load the jar's classes."""
    jvm = getattr(spark, "_jvm", None)
    session = getattr(spark, "_jsparkSession", None)
    if jvm is None or session is None:
        return False  # Spark Connect: the server's extension registers them, or nothing does
    try:
        jvm.io.sparkmlt.MltFunctions.register(session)
    except Exception:  # noqa: BLE001 - py4j: the class is not on the driver's class path
        return False
    return _registered(spark)


def _call(
    function: str, value: Column, codec: MLTCodec, *, layout: str, handle_invalid: RowHandling, name: str
) -> Column:
    return F.call_function(function, value, F.lit(codec.to_json()), F.lit(layout), F.lit(handle_invalid), F.lit(name))


def _unavailable(operation: str) -> OptionError:
    return OptionError(
        f"engine='jvm' needs spark-mlt's jar in the session to {operation}: start the session with "
        f"spark.jars=<the jar> and spark.sql.extensions={JVM_EXTENSION} (`spark-mlt jar --submit` prints both), "
        "or use engine='auto'",
        parameter="engine",
    )


def can_register(spark: SparkSession) -> bool:
    """Whether the JVM engine can register SQL functions in ``spark``: it has the functions, and
    it runs Spark 4 (SQL functions) or is a classic session (the jar registers them itself)."""
    classic = getattr(spark, "_jsparkSession", None) is not None
    return jvm_functions(spark) and (classic or spark_line(spark.version) >= (4, 0))


def check_jvm(operation: str) -> None:
    """Fail now, not when Spark analyses the query, where the active session lacks the functions."""
    if _active() is not None and not jvm_functions():
        raise _unavailable(operation)


class JvmEngine:
    """Encodes, decodes, unpacks and registers SQL functions with spark-mlt's JVM functions."""

    name = "jvm"

    def encode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        tokens = _call(
            "mlt_encode", source.column, codec, layout=layout.name, handle_invalid=handle_invalid, name=source.name
        )
        if layout is VECTOR:  # values in, a vector out; null (an invalid id) stays null
            vector: Column = F.when(tokens.isNotNull(), array_to_vector(tokens))
            return vector
        return tokens

    def decode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        return _call(
            "mlt_decode", source.column, codec, layout=layout.name, handle_invalid=handle_invalid, name=source.name
        )

    def unpack(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        return _call(
            "mlt_unpack", source.column, codec, layout=layout.name, handle_invalid=handle_invalid, name=source.name
        )

    def register(
        self,
        spark: SparkSession,
        codec: MLTCodec,
        names: tuple[str, str],
        layout: TokenLayout,
        handle_invalid: RowHandling,
    ) -> None:
        """``CREATE TEMPORARY FUNCTION`` of one JVM function call each (Spark 4.0 and later); on
        Spark 3.5, which has no SQL functions, the jar registers the two in the classic session's
        function registry itself."""
        if not jvm_functions(spark):
            raise _unavailable("register SQL functions")
        encode_name, decode_name = names
        if spark_line(spark.version) < (4, 0):
            if not can_register(spark):
                raise OptionError(
                    f"engine='jvm' registers SQL functions over Spark Connect only from Spark 4.0 (this is "
                    f"{spark.version}); use engine='auto' or 'udf', or the column functions",
                    parameter="engine",
                )
            functions = spark._jvm.io.sparkmlt.MltFunctions  # type: ignore[union-attr]
            for name, function in ((encode_name, "mlt_encode"), (decode_name, "mlt_decode")):
                functions.registerBound(
                    spark._jsparkSession, name, function, codec.to_json(), layout.name, handle_invalid
                )
            return
        codec_sql = sql.lit(codec.to_json())
        tokens = layout.spark_type(codec).upper()
        create = "CREATE OR REPLACE TEMPORARY FUNCTION"
        for name, parameter, result, function in (
            (encode_name, "id BIGINT", tokens, "mlt_encode"),
            (decode_name, f"tokens {tokens}", "BIGINT", "mlt_decode"),
        ):
            arguments = [parameter.split()[0], codec_sql, sql.lit(layout.name), sql.lit(handle_invalid), sql.lit(name)]
            spark.sql(f"{create} {name}({parameter}) RETURNS {result} RETURN {sql.call(function, arguments)}")
