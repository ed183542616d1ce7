"""The native engine: MLT as plain Spark SQL expressions, compiled by Spark's code generator.

No Python worker runs. The expressions are SQL text from [`spark_mlt.column.builders`][spark_mlt.column.builders]
(exact with ANSI mode on and off), over the input's SQL text ([`bind`][spark_mlt.column.inputs.bind]);
the vector layout is SQL text over the vector's values, and two Column calls at its edge.
Its SQL functions are ``CREATE TEMPORARY FUNCTION`` of the same text (Spark 4.0 and later).
"""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column import sqltext as sql
from spark_mlt.column.builders import decode_expr, encode_expr, encode_parts, unpack_expr
from spark_mlt.column.inputs import Input, bind
from spark_mlt.column.layouts import VECTOR, TokenLayout
from spark_mlt.options import EngineName, RowHandling

__all__ = ["ENCODE_PARAMETER", "NativeEngine", "function_bodies"]

#: The encoder's parameter: a string, to which Spark casts every argument exactly (to a
#: bigint it would truncate 2.5 or 2.9D to 2); the body reads the id off the text.
ENCODE_PARAMETER = "id STRING"


class NativeEngine:
    """Encodes, decodes, unpacks and registers SQL functions with Spark SQL expressions."""

    name: EngineName = "native"

    def __init__(self, capabilities: Capabilities) -> None:
        self.capabilities = capabilities

    def unavailable(self, operation: str) -> str | None:
        """Everything runs, but SQL functions before Spark 4.0."""
        caps = self.capabilities
        if operation == "register" and not caps.sql_functions:
            return (
                f"engine='native' registers SQL functions, which Spark {caps.spark_version} lacks (they need "
                "Spark 4.0); use engine='auto' or 'udf' (vectorised UDFs), or the column functions"
            )
        return None

    def encode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        if layout is VECTOR:  # SQL text for the values and the pick; SQL has no vector type
            if source.sql is None:  # bind once, to a struct of both parts
                both = bind(source, lambda v: _vector_parts(v, codec, handle_invalid, source.name))
                return VECTOR.vector(both.getField("values"), both.getField("pick"))
            parts = encode_parts(source.sql, codec, layout=VECTOR, handle_invalid=handle_invalid, sql_name=source.name)
            return VECTOR.vector(F.expr(parts[0]), F.expr(sql.case(parts[1], sql.lit(1))))
        return bind(
            source, lambda v: encode_expr(v, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name)
        )

    def decode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        def build(tokens: str) -> str:
            gate, fields = layout.gate(tokens, codec, source.name)
            ids = decode_expr(fields, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name)
            return sql.case([(gate, sql.lit(None))], ids)

        return bind(source, build)

    def unpack(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        return bind(
            source, lambda k: unpack_expr(k, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name)
        )

    def register(
        self,
        spark: SparkSession,
        codec: MLTCodec,
        names: tuple[str, str],
        layout: TokenLayout,
        handle_invalid: RowHandling,
    ) -> None:
        """``CREATE TEMPORARY FUNCTION`` of the encoder and the decoder (`function_bodies`)."""
        encode_name, decode_name = names
        encode_sql, decode_sql = function_bodies(codec, names, layout, handle_invalid)
        tokens = layout.spark_type(codec).upper()
        create = "CREATE OR REPLACE TEMPORARY FUNCTION"
        spark.sql(f"{create} {encode_name}({ENCODE_PARAMETER}) RETURNS {tokens} RETURN {encode_sql}")
        spark.sql(f"{create} {decode_name}(tokens {tokens}) RETURNS BIGINT RETURN {decode_sql}")


def function_bodies(
    codec: MLTCodec, names: tuple[str, str], layout: TokenLayout, handle_invalid: RowHandling
) -> tuple[str, str]:
    """The SQL bodies of an encoder of ``id`` (`ENCODE_PARAMETER`: STRING) and a decoder of
    ``tokens`` (the layout's type), whose errors name the functions ``names`` (encoder, decoder). SQL functions
    cannot hold lambdas, so the expressions copy what they read several times (Spark evaluates
    their parameters once already).

    Example::

        encode_sql, decode_sql = function_bodies(codec, ("enc", "dec"), LAYOUT["packed"], "error")
    """
    encode_name, decode_name = names
    encode_sql = encode_expr("id", codec, layout=layout, handle_invalid=handle_invalid, sql_name=encode_name, text=True)
    decode_sql = decode_expr("tokens", codec, layout=layout, handle_invalid=handle_invalid, sql_name=decode_name)
    return encode_sql, decode_sql


def _vector_parts(value: str, codec: MLTCodec, handle_invalid: RowHandling, name: str) -> str:
    """A struct of a vector's values and its pick (see `VectorLayout.vector`)."""
    values, checks = encode_parts(value, codec, layout=VECTOR, handle_invalid=handle_invalid, sql_name=name)
    return sql.struct(["values", "pick"], [values, sql.case(checks, sql.lit(1))])
