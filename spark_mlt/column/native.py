"""The native engine: MLT as plain Spark SQL expressions, compiled by Spark's code generator.

No Python worker runs. The arithmetic is built by :mod:`spark_mlt.column.builders` (exact
with ANSI mode on and off); this module only binds it to the input column.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_mlt.codec import MLTCodec
from spark_mlt.column.builders import decode_expr, encode_expr
from spark_mlt.column.inputs import Input, bound
from spark_mlt.column.layouts import Layout, shape_gate
from spark_mlt.column.targets import ColumnTarget

__all__ = ["NativeEngine"]


class NativeEngine:
    """Encodes and decodes with Spark SQL expressions."""

    name = "native"

    def encode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        t = ColumnTarget()
        return bound(
            source,
            lambda v: encode_expr(t, v, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name),
        )

    def decode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        t = ColumnTarget()

        def checked(tokens: Column) -> Column:
            gate, fields = shape_gate(tokens, codec, layout, source.name)
            ids = decode_expr(t, fields, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name)
            result: Column = F.when(gate, F.lit(None)).otherwise(ids)
            return result

        return bound(source, checked)
