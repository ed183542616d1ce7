"""The UDF engine: vectorised UDFs over the NumPy codec.

An Arrow UDF on PySpark >= 4.1, a pandas UDF before (the same Arrow code inside, so the same
tokens, errors and nulls). The codec travels to executors inside the UDF's closure as its
JSON document, not as a broadcast variable, so it also works over Spark Connect (no
SparkContext to broadcast from); workers parse and validate it once per process.

SQL checks the input first (type, whole numbers, range: ``builders.checked_id``, shared
with the native engine), so the UDF reads one checked bigint per row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf

from spark_mlt.codec import MLTCodec
from spark_mlt.column.arrow import (
    NULL_ID,
    codec_from_json,
    decode_arrow,
    encode_arrow,
    encode_packed_arrow,
    pandas_batch,
)
from spark_mlt.column.builders import checked_id, unpack_expr
from spark_mlt.column.inputs import Input, bound, expression
from spark_mlt.column.layouts import (
    Layout,
    shape_gate,
    shape_tokens,
    token_names,
    token_struct_type,
    unpack_tokens,
    vector_of_tokens,
    vector_tokens,
)
from spark_mlt.column.targets import ColumnTarget
from spark_mlt.column.versions import has_arrow_udfs

__all__ = ["UdfEngine", "decode_udf", "encode_udf"]


def vectorized_udf(batch: Callable[[pa.Array], pa.Array], return_type: str, name: str, *, takes: str) -> Any:
    """A vectorised UDF running ``batch`` (Arrow array in, Arrow array out): an Arrow UDF on
    PySpark >= 4.1, a pandas UDF before. ``takes`` is the input's Spark type: "bigint",
    "array" (array<int>) or "id": a checked id (bigint >= 0 or null; see :func:`_call_id_udf`).
    The functions shipped to the workers reference :mod:`spark_mlt.column.arrow` only, so a
    worker imports NumPy, pyarrow and the codec, not PySpark's ML modules and SciPy.
    """
    if has_arrow_udfs():

        def arrow_batch(values: pa.Array) -> pa.Array:
            return batch(values)

        return F.arrow_udf(arrow_batch, return_type)  # type: ignore[attr-defined]
    return pandas_udf(pandas_batch(batch, takes=takes, name=name), return_type)  # type: ignore[call-overload]


def _call_id_udf(udf: Any, checked: Column) -> Column:
    """Call a UDF made with ``takes="id"`` on a checked id column, reading it once.

    PySpark < 4.1 hands pandas a bigint batch holding nulls as float64, exact only below
    2**53; so the pandas path passes null as ``NULL_ID`` (-1, never a checked id) instead.
    """
    result: Column = udf(checked if has_arrow_udfs() else F.coalesce(checked, F.lit(NULL_ID).cast("bigint")))
    return result


def encode_udf(codec: MLTCodec, *, layout: str, handle_invalid: str, name: str, takes: str = "bigint") -> Any:
    """A vectorised UDF bigint -> tokens (array, struct, or ``layout="packed"``: the tokens
    packed in a bigint); the codec rides in the closure as its JSON document. ``takes``: see
    :func:`vectorized_udf`."""
    document = codec.to_json()
    if layout == "packed":

        def encode_packed_batch(ids: pa.Array) -> pa.Array:
            return encode_packed_arrow(codec_from_json(document), ids, handle_invalid=handle_invalid, name=name)

        return vectorized_udf(encode_packed_batch, "bigint", name, takes=takes)

    def encode_batch(ids: pa.Array) -> pa.Array:
        return encode_arrow(codec_from_json(document), ids, layout=layout, handle_invalid=handle_invalid, name=name)

    return_type = token_struct_type(codec.n) if layout == "struct" else "array<int>"
    return vectorized_udf(encode_batch, return_type, name, takes=takes)


def decode_udf(codec: MLTCodec, *, layout: str, handle_invalid: str, name: str) -> Any:
    """A vectorised UDF tokens -> bigint; the codec rides in the closure as its JSON document."""
    document = codec.to_json()

    def decode_batch(tokens: pa.Array) -> pa.Array:
        return decode_arrow(codec_from_json(document), tokens, layout=layout, handle_invalid=handle_invalid, name=name)

    return vectorized_udf(decode_batch, "bigint", name, takes="bigint" if layout == "packed" else "array")


def _unpacked(packed: Column, codec: MLTCodec, layout: Layout) -> Column:
    """The tokens of the UDF's packed result (valid: the UDF made them), unpacked by Spark."""
    t = ColumnTarget()
    tokens, _ = unpack_tokens(t, packed, codec)
    result: Column = F.when(packed.isNull(), F.lit(None)).otherwise(shape_tokens(t, tokens, codec, layout))
    return result


class UdfEngine:
    """Encodes and decodes with vectorised UDFs over the NumPy codec."""

    name = "udf"

    def encode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        """Tokens of the checked id. When the tokens fit in 64 bits and the input is small,
        the UDF returns them packed in a bigint, unpacked by Spark (see
        :mod:`spark_mlt.column.arrow`): moving one int64 is cheaper than a list (see the
        README's performance table). Unpacking reads
        the UDF's result n times, each a copy of its input; for a larger input the UDF
        returns the tokens' final shape instead."""
        if layout == "vector":
            tokens = self.encode(source, codec, "array", handle_invalid)
            return vector_of_tokens(Input(tokens, source.name, source.simple), codec)
        checked = expression(
            source, lambda t, v: checked_id(t, v, codec, handle_invalid=handle_invalid, sql_name=source.name)
        )

        def udf(shape: str) -> Column:
            made = encode_udf(codec, layout=shape, handle_invalid=handle_invalid, name=source.name, takes="id")
            return _call_id_udf(made, checked)

        if layout == "packed":
            return udf("packed")
        if codec.packed_bits is not None and source.simple:
            return _unpacked(udf("packed"), codec, layout)
        if layout == "struct" and not has_arrow_udfs():  # pandas UDFs cannot return a null struct
            return bound(Input(udf("array"), source.name, source.simple), lambda t: _struct_of_array(t, codec.n))
        return udf(layout)

    def decode(self, source: Input, codec: MLTCodec, layout: Layout, handle_invalid: str) -> Column:
        """The id of the tokens. pandas UDFs (PySpark < 4.1) see a bigint batch holding nulls
        as float64 (inexact above 2**53), and a struct as a DataFrame: they get the tokens as
        an array<int> instead."""
        if layout == "vector":  # decoded as the array of its tokens
            source, layout = vector_tokens(source, codec), "array"
        name = source.name

        def gated(body: Callable[[Column], Column]) -> Column:
            def checked(tokens: Column) -> Column:
                gate, fields = shape_gate(ColumnTarget(), tokens, codec, layout, name)
                result: Column = F.when(gate, F.lit(None)).otherwise(body(fields))
                return result

            return bound(source, checked)

        if has_arrow_udfs() or layout == "array":
            column = gated(lambda tokens: tokens)
        elif layout == "packed":
            t = ColumnTarget()
            column = gated(
                lambda k: unpack_expr(t, k, codec, layout="array", handle_invalid=handle_invalid, sql_name=name)
            )
        else:
            column = gated(lambda tokens: _array_of_struct(tokens, codec.n))
        udf = decode_udf(
            codec, layout=layout if has_arrow_udfs() else "array", handle_invalid=handle_invalid, name=name
        )
        decoded: Column = udf(column)
        return decoded


def _array_of_struct(tokens: Column, n: int) -> Column:
    items = F.array(*[tokens.getField(f) for f in token_names(n)])
    result: Column = F.when(tokens.isNull(), F.lit(None)).otherwise(items)
    return result


def _struct_of_array(tokens: Column, n: int) -> Column:
    struct = ColumnTarget().struct(token_names(n), [tokens.getItem(j) for j in range(n)])
    result: Column = F.when(tokens.isNull(), F.lit(None)).otherwise(struct)
    return result
