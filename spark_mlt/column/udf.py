"""The UDF engine: vectorised UDFs over the NumPy codec.

An Arrow UDF on PySpark >= 4.1, a pandas UDF before (the same Arrow code inside, so the same
tokens, errors and nulls). The codec travels to executors inside the UDF's closure as its
JSON document, not as a broadcast variable, so it also works over Spark Connect (no
SparkContext to broadcast from); workers parse and validate it once per process.

SQL text does everything around the UDF: it checks the input (type, whole numbers, range:
[`checked_id`][spark_mlt.column.builders.checked_id], shared with the native engine), so the UDF
reads one checked bigint per row, and it reads each layout for the decoder. Where the tokens
fit in 64 bits and the input is a column by name, the encoder's UDF returns them packed in
one bigint, which Spark unpacks (SQL text around the UDF, registered in the session under a
name derived from what it computes): moving one int64 instead of a list of n int32 through
Arrow is what makes this engine as cheap as an identity UDF.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf

from spark_mlt.codec import MLTCodec
from spark_mlt.column import sqltext as sql
from spark_mlt.column.arrow import (
    NULL_ID,
    codec_from_json,
    decode_arrow,
    encode_arrow,
    encode_packed_arrow,
    pandas_batch,
)
from spark_mlt.column.builders import checked_id, unpack_expr
from spark_mlt.column.inputs import Input, bind
from spark_mlt.column.layouts import LAYOUT, PACKED, VECTOR, TokenLayout, token_names
from spark_mlt.column.versions import has_arrow_udfs
from spark_mlt.options import RowHandling

__all__ = ["UdfEngine", "decode_udf", "encode_udf"]

#: what a UDF's argument is: a bigint, an array<int>, a checked id (bigint >= 0 or null), or
#: a vector's values (array<double>)
Takes = Literal["bigint", "array", "id", "vector"]


def vectorized_udf(batch: Callable[[pa.Array], pa.Array], return_type: str, name: str, *, takes: Takes) -> Any:
    """A vectorised UDF running ``batch`` (Arrow array in, Arrow array out): an Arrow UDF on
    PySpark >= 4.1, a pandas UDF before. The functions shipped to the workers reference
    `spark_mlt.column.arrow` only, so a worker imports NumPy, pyarrow and the codec, not
    PySpark's ML modules and SciPy."""
    if has_arrow_udfs():

        def arrow_batch(values: pa.Array) -> pa.Array:
            return batch(values)

        return F.arrow_udf(arrow_batch, return_type)  # type: ignore[attr-defined]
    return pandas_udf(pandas_batch(batch, takes=takes, name=name), return_type)  # type: ignore[call-overload]


def encode_udf(codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, name: str, takes: Takes) -> Any:
    """A vectorised UDF id -> tokens in ``layout`` (a vector: its values, array<double>)."""
    document, shape = codec.to_json(), layout.name
    if layout is PACKED:

        def encode_packed_batch(ids: pa.Array) -> pa.Array:
            return encode_packed_arrow(codec_from_json(document), ids, handle_invalid=handle_invalid, name=name)

        return vectorized_udf(encode_packed_batch, "bigint", name, takes=takes)

    def encode_batch(ids: pa.Array) -> pa.Array:
        return encode_arrow(codec_from_json(document), ids, layout=shape, handle_invalid=handle_invalid, name=name)

    return_type = "array<double>" if layout is VECTOR else layout.spark_type(codec)
    return vectorized_udf(encode_batch, return_type, name, takes=takes)


def decode_udf(codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, name: str) -> Any:
    """A vectorised UDF tokens (array, struct or packed) -> bigint id."""
    document, shape = codec.to_json(), layout.name

    def decode_batch(tokens: pa.Array) -> pa.Array:
        return decode_arrow(codec_from_json(document), tokens, layout=shape, handle_invalid=handle_invalid, name=name)

    takes: Takes = "bigint" if layout is PACKED else "vector" if layout is VECTOR else "array"
    return vectorized_udf(decode_batch, "bigint", name, takes=takes)


def _id_argument(checked: str) -> str:
    """A checked id as a UDF takes it: PySpark < 4.1 hands pandas a bigint batch holding
    nulls as float64, exact only below 2**53, so there null travels as ``NULL_ID`` (-1,
    never a checked id)."""
    return checked if has_arrow_udfs() else sql.call("coalesce", [checked, sql.lit(NULL_ID)])


def _registered(spark: SparkSession, udf: Any, *key: str) -> str:
    """The name ``udf`` is registered under in ``spark``, derived from ``key`` (what it computes)."""
    name = "spark_mlt_udf_" + hashlib.sha256("\0".join(key).encode()).hexdigest()[:24]
    spark.udf.register(name, udf)
    return name


class UdfEngine:
    """Encodes and decodes with vectorised UDFs over the NumPy codec."""

    name = "udf"

    def encode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        def checked(value: str) -> str:
            return _id_argument(checked_id(value, codec, handle_invalid=handle_invalid, sql_name=source.name))

        def made(shape: TokenLayout) -> Any:
            return encode_udf(codec, layout=shape, handle_invalid=handle_invalid, name=source.name, takes="id")

        if source.sql is not None and codec.packed_bits is not None and layout is not PACKED:
            # packed by the UDF, laid out by Spark: SQL text around the registered UDF
            function = _registered(
                SparkSession.active(), made(PACKED), "encode", codec.to_json(), handle_invalid, source.name
            )
            packed = sql.call(function, [checked(source.sql)])
            tokens, _ = PACKED.unpack(packed, codec)
            value = layout.write(tokens, codec)
            if layout is VECTOR:
                return VECTOR.vector(
                    F.expr(value), F.expr(sql.case([(sql.is_null(packed), sql.lit(None))], sql.lit(1)))
                )
            return F.expr(sql.case([(sql.is_null(packed), sql.lit(None))], value))
        ids = bind(source, checked)
        if layout is VECTOR:
            values = made(VECTOR)(ids)
            return VECTOR.vector(F.coalesce(values, F.array().cast("array<double>")), F.when(values.isNotNull(), 1))
        if layout is LAYOUT["struct"] and not has_arrow_udfs():  # pandas UDFs cannot return a null struct
            array = Input(made(LAYOUT["array"])(ids), source.name)
            return bind(array, lambda a: sql.case([(sql.is_null(a), sql.lit(None))], _struct_of_array(a, codec)))
        result: Column = made(layout)(ids)
        return result

    def decode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        """The id of the tokens. pandas UDFs (PySpark < 4.1) see a bigint batch holding nulls
        as float64 (inexact above 2**53), and a struct as a DataFrame: they get the tokens as
        an array<int> instead. A vector's values go to the UDF as they are (no lambda)."""
        if layout is VECTOR:  # the values, gated where they were read: the UDF takes them as they are
            values: Column = decode_udf(codec, layout=VECTOR, handle_invalid=handle_invalid, name=source.name)(
                source.column
            )
            return values
        takes = layout if has_arrow_udfs() else LAYOUT["array"]

        def prepared(tokens: str) -> str:
            gate, fields = layout.gate(tokens, codec, source.name)
            if takes is layout:
                argument = fields
            elif layout is PACKED:
                argument = unpack_expr(
                    fields, codec, layout=LAYOUT["array"], handle_invalid=handle_invalid, sql_name=source.name
                )
            else:
                argument = sql.case([(sql.is_null(fields), sql.lit(None))], _array_of_struct(fields, codec))
            return sql.case([(gate, sql.lit(None))], argument)

        udf = decode_udf(codec, layout=takes, handle_invalid=handle_invalid, name=source.name)
        decoded: Column = udf(bind(source, prepared))
        return decoded

    def unpack(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        """Shifts and masks in SQL text, around no UDF: none would compute them faster."""

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
        """The vectorised UDFs, registered for ``spark.sql``."""
        encode_name, decode_name = names
        spark.udf.register(
            encode_name,
            encode_udf(codec, layout=layout, handle_invalid=handle_invalid, name=encode_name, takes="bigint"),
        )
        spark.udf.register(
            decode_name, decode_udf(codec, layout=layout, handle_invalid=handle_invalid, name=decode_name)
        )


def _array_of_struct(tokens: str, codec: MLTCodec) -> str:
    return sql.call("array", [sql.field(tokens, f) for f in token_names(codec.n)])


def _struct_of_array(tokens: str, codec: MLTCodec) -> str:
    return sql.struct(token_names(codec.n), [sql.call("get", [tokens, sql.lit(j)]) for j in range(codec.n)])
