"""The JVM engine: ``mlt_encode``, ``mlt_decode`` and ``mlt_unpack`` as Spark's own expressions.

spark-mlt's jar ([`spark_mlt.jars`][spark_mlt.jars]) registers three SQL functions,
``f(value, codec_json[, layout[, handle_invalid[, name]]])``. Each is a ``RuntimeReplaceable``
expression whose replacement is one ``StaticInvoke`` of compiled Java, the way Spark ships
``url_decode`` or ``aes_encrypt``: whole-stage code generation emits one call per row; no
Python worker, no lambda, and a composition is one nested call. The codec's JSON (the string
a table's properties hold) is the only parameter; each executor builds its tables once.

This engine calls the functions by name (``call_function``), so it works over Spark Connect
when the server has the jar. A session has them when its
[`Capabilities`][spark_mlt.capabilities.Capabilities] say so (``jvm_engine``: the catalog lists
spark-mlt's ``mlt_encode``, of this package's version); elsewhere (serverless, a locked-down
cluster) the policy picks the jar-free engines.

The vector layout crosses to and from Spark ML's vector type at the edge, as the native
engine does: the JVM functions read and write the vector's values (``layout => 'vector'``,
an array<double> of token / (p - 1)).

Example::

    spark.sql(f"SELECT mlt_encode(user_id, '{codec.to_json()}') AS tokens FROM ratings")
"""

from __future__ import annotations

from pyspark.ml.functions import array_to_vector
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from spark_mlt import _classic
from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column import sqltext as sql
from spark_mlt.column.builders import checked_id
from spark_mlt.column.inputs import Input
from spark_mlt.column.layouts import VECTOR, TokenLayout
from spark_mlt.column.native import ENCODE_PARAMETER
from spark_mlt.jars import JVM_EXTENSION
from spark_mlt.options import EngineName, RowHandling

__all__ = ["JvmEngine"]


def _call(
    function: str, value: Column, codec: MLTCodec, *, layout: str, handle_invalid: RowHandling, name: str
) -> Column:
    return F.call_function(function, value, F.lit(codec.to_json()), F.lit(layout), F.lit(handle_invalid), F.lit(name))


class JvmEngine:
    """Encodes, decodes, unpacks and registers SQL functions with spark-mlt's JVM functions."""

    name: EngineName = "jvm"

    def __init__(self, capabilities: Capabilities) -> None:
        self.capabilities = capabilities

    def unavailable(self, operation: str) -> str | None:
        """Without the jar's functions in the session, nothing; with them, everything but SQL
        functions over Spark Connect before Spark 4.0 (neither SQL functions nor a registry to reach)."""
        caps = self.capabilities
        if not caps.jvm_engine:
            what = "register SQL functions" if operation == "register" else operation
            return (
                f"engine='jvm' needs spark-mlt's jar in the session to {what}: start the session with "
                f"spark.jars=<the jar> and spark.sql.extensions={JVM_EXTENSION} (`spark-mlt jar --submit` prints "
                "both), or use engine='auto'"
            )
        if operation == "register" and caps.connect and not caps.sql_functions:
            return (
                f"engine='jvm' registers SQL functions over Spark Connect only from Spark 4.0 (this is "
                f"{caps.spark_version}); use engine='auto' or 'udf', or the column functions"
            )
        return None

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
        encode_name, decode_name = names
        if not self.capabilities.sql_functions:
            for name, function in ((encode_name, "mlt_encode"), (decode_name, "mlt_decode")):
                _classic.register_bound(spark, name, function, (codec.to_json(), layout.name, handle_invalid))
            return
        codec_sql = sql.lit(codec.to_json())
        tokens = layout.spark_type(codec).upper()
        create = "CREATE OR REPLACE TEMPORARY FUNCTION"
        # the id arrives as text, read as the native encoder reads it: a typed parameter would
        # truncate 2.9D to 2 before the jar saw it
        whole_id = checked_id("id", codec, handle_invalid=handle_invalid, sql_name=encode_name, text=True)
        for name, parameter, value, result, function in (
            (encode_name, ENCODE_PARAMETER, whole_id, tokens, "mlt_encode"),
            (decode_name, f"tokens {tokens}", "tokens", "BIGINT", "mlt_decode"),
        ):
            arguments = [value, codec_sql, sql.lit(layout.name), sql.lit(handle_invalid), sql.lit(name)]
            spark.sql(f"{create} {name}({parameter}) RETURNS {result} RETURN {sql.call(function, arguments)}")
