"""The native engine: MLT as plain Spark SQL expressions, compiled by Spark's code generator.

No Python worker runs. The arithmetic is built by :mod:`spark_mlt.column.expressions` (exact
with ANSI mode on and off); this module only binds it to the input column.
"""

from __future__ import annotations

from pyspark.ml.functions import array_to_vector
from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_mlt.codec import MLTCodec
from spark_mlt.column import expressions
from spark_mlt.column.forms import shape_gate
from spark_mlt.column.inputs import Input, bound

__all__ = ["NativeEngine"]


class NativeEngine:
    """Encodes and decodes with Spark SQL expressions."""

    name = "native"

    def encode(self, source: Input, codec: MLTCodec, layout: str, handle_invalid: str) -> Column:
        b = expressions.ColumnBackend()
        output = "scaled" if layout == "vector" else layout
        wrap = array_to_vector if layout == "vector" else None
        return bound(
            source,
            lambda v: expressions.encode_expr(
                b, v, codec, layout=output, handle_invalid=handle_invalid, sql_name=source.name, wrap=wrap
            ),
        )

    def decode(self, source: Input, codec: MLTCodec, layout: str, handle_invalid: str) -> Column:
        b = expressions.ColumnBackend()

        def checked(tokens: Column) -> Column:
            gate, fields = shape_gate(tokens, codec, layout, source.name)
            ids = expressions.decode_expr(
                b, fields, codec, layout=layout, handle_invalid=handle_invalid, sql_name=source.name
            )
            result: Column = F.when(gate, F.lit(None)).otherwise(ids)
            return result

        return bound(source, checked)
