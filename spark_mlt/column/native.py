"""The native engine: MLT as plain Spark SQL expressions, compiled by Spark's code generator.

No Python worker runs. The arithmetic is built by :mod:`spark_mlt.column.builders` (exact
with ANSI mode on and off); this module only binds it to the input column: as SQL text,
parsed by Spark in one call, when the input is a column (by name or ``F.col``), else as a
Column around the input (see :mod:`spark_mlt.column.targets` for why). SQL has no ML vector
type, so vector tokens of a column are SQL text around two Column calls, and a vector input
is decoded as a Column (``MLTDecoder`` first reads its values into an array column of their
own, :func:`~spark_mlt.column.functions.vector_values_column`, and decodes that by name as
SQL text: :func:`decode_vector_values`).
"""

from __future__ import annotations

from typing import TypeVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_mlt.codec import MLTCodec
from spark_mlt.column.builders import decode_expr, encode_expr, encode_vector_parts, vector_of_parts
from spark_mlt.column.inputs import Input, expression
from spark_mlt.column.layouts import SQL_LAYOUTS, Layout, shape_gate
from spark_mlt.column.targets import ColumnTarget, ExpressionTarget, SqlTarget, VectorValuesTarget

__all__ = ["NativeEngine", "decode_vector_values"]

E = TypeVar("E")


class NativeEngine:
    """Encodes and decodes with Spark SQL expressions."""

    name = "native"

    def encode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        def build(t: ExpressionTarget[E], value: E) -> E:
            return encode_expr(t, value, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name)

        if layout == "vector" and source.sql is not None:
            return _vector_from_text(source.sql, source.name, codec, handle_invalid)
        return expression(source, build, text=layout != "vector")

    def decode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        def build(t: ExpressionTarget[E], tokens: E) -> E:
            gate, fields = shape_gate(t, tokens, codec, layout, source.name)
            ids = decode_expr(t, fields, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name)
            return t.case([(gate, t.lit(None))], ids)

        # the gate of a struct or a vector needs a Column (SQL cannot add a field, or read a vector)
        return expression(source, build, text=layout in SQL_LAYOUTS)


def decode_vector_values(sql: str, name: str, codec: MLTCodec, handle_invalid: str) -> Column:
    """The ids of token vectors whose values are the array<double> column ``sql`` (see
    :func:`~spark_mlt.column.functions.vector_values_column`), as SQL text; messages name
    the vector column ``name``."""
    text = decode_expr(VectorValuesTarget(), sql, codec, layout="vector", handle_invalid=handle_invalid, sql_name=name)
    return F.expr(text)


def _vector_from_text(sql: str, name: str, codec: MLTCodec, handle_invalid: str) -> Column:
    """Vector tokens of the column whose SQL text is ``sql``: SQL text for the vector's
    values and for the pick, and two Column calls for the vector, which SQL has no type for.
    Built as Columns throughout, a Py4J call per operation, a (13, 9) encoder took 0.15-0.3 s
    per column."""
    doubles, pick = encode_vector_parts(SqlTarget(), sql, codec, handle_invalid=handle_invalid, sql_name=name)
    vector: Column = vector_of_parts(ColumnTarget(), F.expr(doubles), F.expr(pick))
    return vector
