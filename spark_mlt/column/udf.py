"""The UDF engine: vectorised UDFs over the NumPy codec.

An Arrow UDF on PySpark >= 4.1, a pandas UDF before (the same Arrow code inside, so the same
tokens, errors and nulls). The codec travels to executors inside the UDF's closure as its
JSON document, not as a broadcast variable, so it also works over Spark Connect (no
SparkContext to broadcast from); workers parse and validate it once per process.

SQL text does everything around the UDF: it checks the input (type, whole numbers, range:
[`checked_id`][spark_mlt.column.builders.checked_id], shared with the native engine), so the UDF
reads one checked bigint per row, and it reads each layout for the decoder. Where the tokens
fit in 64 bits and the input is a column by name, the encoder's UDF returns them packed in
one bigint, which Spark unpacks (shifts and masks around the UDF's Column: Spark evaluates one
UDF call however often an expression reads it): moving one int64 instead of a list of n int32
through Arrow is what makes this engine as cheap as an identity UDF. Building a Column
registers nothing in any session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf

from spark_mlt.capabilities import Capabilities
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
from spark_mlt.column.native import ENCODE_PARAMETER
from spark_mlt.options import EngineName, RowHandling

__all__ = ["UdfEngine", "decode_udf", "encode_udf"]

#: what a UDF's argument is: a bigint, an array<int>, a checked id (bigint >= 0 or null), or
#: a vector's values (array<double>)
Takes = Literal["bigint", "array", "id", "vector"]


def vectorized_udf(
    batch: Callable[[pa.Array], pa.Array],
    return_type: str,
    name: str,
    *,
    takes: Takes,
    arrow: bool,
    null_invalid: bool = False,
) -> Any:
    """A vectorised UDF running ``batch`` (Arrow array in, Arrow array out): an Arrow UDF where
    the session takes them (``arrow``: PySpark and Spark >= 4.1), a pandas UDF before. The
    functions shipped to the workers reference `spark_mlt.column.arrow` only, so a worker
    imports NumPy, pyarrow and the codec, not PySpark's ML modules and SciPy."""
    if arrow:

        def arrow_batch(values: pa.Array) -> pa.Array:
            return batch(values)

        return F.arrow_udf(arrow_batch, return_type)  # type: ignore[attr-defined]
    function = pandas_batch(batch, takes=takes, name=name, null_invalid=null_invalid)
    return pandas_udf(function, return_type)  # type: ignore[call-overload]


def encode_udf(
    codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, name: str, takes: Takes, arrow: bool
) -> Any:
    """A vectorised UDF id -> tokens in ``layout`` (a vector: its values, array<double>)."""
    document, shape = codec.to_json(), layout.name
    null_invalid = handle_invalid == "null"  # a registered function's argument that is no whole id (3.5)
    if layout is PACKED:

        def encode_packed_batch(ids: pa.Array) -> pa.Array:
            return encode_packed_arrow(codec_from_json(document), ids, handle_invalid=handle_invalid, name=name)

        return vectorized_udf(encode_packed_batch, "bigint", name, takes=takes, arrow=arrow, null_invalid=null_invalid)

    def encode_batch(ids: pa.Array) -> pa.Array:
        return encode_arrow(codec_from_json(document), ids, layout=shape, handle_invalid=handle_invalid, name=name)

    return_type = "array<double>" if layout is VECTOR else layout.spark_type(codec)
    return vectorized_udf(encode_batch, return_type, name, takes=takes, arrow=arrow, null_invalid=null_invalid)


def decode_udf(codec: MLTCodec, *, layout: TokenLayout, handle_invalid: RowHandling, name: str, arrow: bool) -> Any:
    """A vectorised UDF tokens (array, struct or packed) -> bigint id."""
    document, shape = codec.to_json(), layout.name

    def decode_batch(tokens: pa.Array) -> pa.Array:
        return decode_arrow(codec_from_json(document), tokens, layout=shape, handle_invalid=handle_invalid, name=name)

    takes: Takes = "bigint" if layout is PACKED else "vector" if layout is VECTOR else "array"
    return vectorized_udf(decode_batch, "bigint", name, takes=takes, arrow=arrow)


def _id_argument(checked: str, *, arrow: bool) -> str:
    """A checked id as a UDF takes it: a pandas UDF (before Spark 4.1) gets a bigint batch
    holding nulls as float64, exact only below 2**53, so there null travels as ``NULL_ID``
    (-1, never a checked id)."""
    return checked if arrow else sql.call("coalesce", [checked, sql.lit(NULL_ID)])


def _laid_out(packed: Column, codec: MLTCodec, layout: TokenLayout) -> Column:
    """The tokens packed in ``packed`` (never invalid: the UDF packed them), in ``layout``; null
    where ``packed`` is. Column calls, each reading the one UDF Column."""
    bits = codec.require_packed_bits()
    mask = F.lit(2**bits - 1)
    tokens = [(packed if j == 0 else F.shiftrightunsigned(packed, bits * j)).bitwiseAND(mask) for j in range(codec.n)]
    if layout is VECTOR:
        scale = float(VECTOR.scale(codec))
        values = F.array(*[F.coalesce(token.cast("double") / F.lit(scale), F.lit(0.0)) for token in tokens])
        return VECTOR.vector(values, F.when(packed.isNotNull(), F.lit(1)))
    if layout is LAYOUT["struct"]:
        value = F.struct(
            *[token.cast("int").alias(name) for token, name in zip(tokens, token_names(codec.n), strict=True)]
        )
    else:
        value = F.array(*[token.cast("int") for token in tokens])
    laid_out: Column = F.when(packed.isNotNull(), value)
    return laid_out


class UdfEngine:
    """Encodes and decodes with vectorised UDFs over the NumPy codec."""

    name: EngineName = "udf"

    def __init__(self, capabilities: Capabilities) -> None:
        self.capabilities = capabilities

    def unavailable(self, operation: str) -> str | None:
        """Everything runs everywhere: PySpark ships the UDFs to the executors."""
        return None

    def encode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        arrow = self.capabilities.arrow_udfs

        def checked(value: str) -> str:
            checked_value = checked_id(value, codec, handle_invalid=handle_invalid, sql_name=source.name)
            return _id_argument(checked_value, arrow=arrow)

        def made(shape: TokenLayout) -> Any:
            return encode_udf(
                codec, layout=shape, handle_invalid=handle_invalid, name=source.name, takes="id", arrow=arrow
            )

        if source.sql is not None and codec.packed_bits is not None and layout is not PACKED:
            # packed by the UDF, laid out by Spark around its one call
            return _laid_out(made(PACKED)(F.expr(checked(source.sql))), codec, layout)
        ids = bind(source, checked)
        if layout is VECTOR:
            values = made(VECTOR)(ids)
            return VECTOR.vector(F.coalesce(values, F.array().cast("array<double>")), F.when(values.isNotNull(), 1))
        if layout is LAYOUT["struct"] and not arrow:  # pandas UDFs cannot return a null struct
            array = Input(made(LAYOUT["array"])(ids), source.name)
            return bind(array, lambda a: sql.case([(sql.is_null(a), sql.lit(None))], _struct_of_array(a, codec)))
        result: Column = made(layout)(ids)
        return result

    def decode(self, source: Input, codec: MLTCodec, layout: TokenLayout, handle_invalid: RowHandling) -> Column:
        """The id of the tokens. pandas UDFs (PySpark < 4.1) see a bigint batch holding nulls
        as float64 (inexact above 2**53), and a struct as a DataFrame: they get the tokens as
        an array<int> instead. A vector's values go to the UDF as they are (no lambda)."""
        arrow = self.capabilities.arrow_udfs
        if layout is VECTOR:  # the values, gated where they were read: the UDF takes them as they are
            values: Column = decode_udf(
                codec, layout=VECTOR, handle_invalid=handle_invalid, name=source.name, arrow=arrow
            )(source.column)
            return values
        takes = layout if arrow else LAYOUT["array"]

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

        udf = decode_udf(codec, layout=takes, handle_invalid=handle_invalid, name=source.name, arrow=arrow)
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
        """The vectorised UDFs, registered for ``spark.sql``. From Spark 4.0 the encoder is a SQL
        function of a string (`ENCODE_PARAMETER`) that checks its id as the native encoder does and
        calls the UDF, registered as ``<encoder>_ids``, with it: a UDF takes its argument as it comes,
        and would truncate a decimal 2.5 to 2."""
        encode_name, decode_name = names
        arrow = self.capabilities.arrow_udfs
        if self.capabilities.sql_functions:
            ids = f"{encode_name}_ids"
            udf = encode_udf(
                codec, layout=layout, handle_invalid=handle_invalid, name=encode_name, takes="id", arrow=arrow
            )
            spark.udf.register(ids, udf)
            checked = checked_id("id", codec, handle_invalid=handle_invalid, sql_name=encode_name, text=True)
            tokens = "array<double>" if layout is VECTOR else layout.spark_type(codec)
            spark.sql(
                f"CREATE OR REPLACE TEMPORARY FUNCTION {encode_name}({ENCODE_PARAMETER}) RETURNS {tokens.upper()} "
                f"RETURN {ids}({_id_argument(checked, arrow=arrow)})"
            )
        else:  # Spark 3.5: the UDF itself, which refuses what is no whole id
            spark.udf.register(
                encode_name,
                encode_udf(
                    codec, layout=layout, handle_invalid=handle_invalid, name=encode_name, takes="bigint", arrow=arrow
                ),
            )
        spark.udf.register(
            decode_name, decode_udf(codec, layout=layout, handle_invalid=handle_invalid, name=decode_name, arrow=arrow)
        )


def _array_of_struct(tokens: str, codec: MLTCodec) -> str:
    return sql.call("array", [sql.field(tokens, f) for f in token_names(codec.n)])


def _struct_of_array(tokens: str, codec: MLTCodec) -> str:
    return sql.struct(token_names(codec.n), [sql.call("get", [tokens, sql.lit(j)]) for j in range(codec.n)])
