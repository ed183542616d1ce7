"""PySpark column functions: ``mlt_encode``, ``mlt_decode`` and ``mlt_unpack``.

Each checks its arguments, sizes its input (:mod:`spark_mlt.column.inputs`) and hands it to
an engine (:mod:`spark_mlt.column.engine`). Input types are checked when Spark analyses the
query: anything but an integral or decimal id column fails with Spark's DATATYPE_MISMATCH
error, which names the column and its type. Decimal values must be whole numbers within the
bigint range; other values, negative ids and ids at or above the codec's capacity are invalid
rows, handled per ``handle_invalid`` (see :mod:`spark_mlt.options`).
"""

from __future__ import annotations

from pyspark.ml.functions import vector_to_array
from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_mlt.codec import MLTCodec
from spark_mlt.column.builders import unpack_expr
from spark_mlt.column.engine import engine_for
from spark_mlt.column.inputs import Input, as_input, expression
from spark_mlt.column.layouts import LAYOUTS, SQL_LAYOUTS, UNPACK_LAYOUTS, Layout, shape_gate
from spark_mlt.column.native import decode_vector_values
from spark_mlt.column.targets import ColumnTarget
from spark_mlt.errors import MLTTypeError
from spark_mlt.options import Engine, HandleInvalid, check_choice

__all__ = [
    "check_codec",
    "decode_vector_values_column",
    "mlt_decode",
    "mlt_encode",
    "mlt_unpack",
    "vector_values_column",
]

#: what a column function does with an invalid id or token vector (it cannot drop rows)
COLUMN_HANDLE_INVALID: tuple[HandleInvalid, ...] = ("error", "null")


def check_codec(codec: object) -> MLTCodec:
    """``codec`` if it is an :class:`MLTCodec`, else an error naming the type found."""
    if not isinstance(codec, MLTCodec):
        raise MLTTypeError(f"codec must be an MLTCodec, got {type(codec).__name__}", parameter="codec")
    return codec


def mlt_encode(
    col: str | Column,
    codec: MLTCodec,
    *,
    layout: Layout = "array",
    handle_invalid: HandleInvalid = "error",
    engine: Engine = "auto",
) -> Column:
    """The MLT tokens of an integer id column.

    Args:
        col: a column name or Column of an integral type (tinyint .. bigint) or a decimal
            holding whole numbers.
        codec: the codec to apply.
        layout: ``"array"`` (default: array<int> of n tokens), ``"struct"`` (fields
            t0..t{n-1}), ``"vector"`` (a dense ML vector of ``token / (p - 1)``, each in
            [0, 1]), or ``"packed"``: one bigint holding the n tokens, token j in bits
            ``[j*b, (j+1)*b)`` with ``b = codec.packed_bits`` (needs ``n * b <= 64``).
        handle_invalid: ``"error"`` fails the query naming the offending id and the valid
            range [0, capacity); ``"null"`` turns invalid ids into null.
        engine: ``"native"`` (Spark SQL expressions), ``"udf"`` (vectorised UDF over the
            NumPy codec) or ``"auto"``: native, or the udf engine where the
            input is a composed expression that it runs faster
            (:func:`~spark_mlt.column.engine.auto_engine` states the rule).

    Returns:
        A Column; null where the id is null.

    Raises:
        MLTTypeError: ``col`` or ``codec`` of the wrong type.
        OptionError: an unknown option value.
        CodecParameterError: ``layout="packed"`` and the tokens do not fit in 64 bits.

    Example::

        codec = MLTCodec.from_seed(13, 6)
        df.select(mlt_encode("user_id", codec).alias("user_tokens"))
    """
    codec = check_codec(codec)
    chosen = check_choice("layout", layout, LAYOUTS)
    handle = check_choice("handle_invalid", handle_invalid, COLUMN_HANDLE_INVALID)
    if chosen == "packed":
        codec.require_packed_bits()
    source = as_input(col)
    return (
        engine_for(engine, codec, chosen, source)
        .encode(source, codec, chosen, handle)
        .alias(_result_name("mlt_encode", source))
    )


def mlt_decode(
    col: str | Column,
    codec: MLTCodec,
    *,
    layout: Layout = "array",
    handle_invalid: HandleInvalid = "error",
    engine: Engine = "auto",
) -> Column:
    """The bigint ids of a token column written by :func:`mlt_encode`.

    Args:
        col: a column name or Column of tokens: array<int> (``layout="array"``, the
            default), a struct with fields t0..t{n-1} (``"struct"``), a dense ML vector of
            token / (p - 1) (``"vector"``: each value is scaled back and rounded to the
            nearest token), or packed in a bigint (``"packed"``).
        codec: the codec the tokens were made with.
        layout: the token column's layout. A column of another type fails when Spark
            analyses the query, naming the column, its type and the layout expected. A
            Column carries no type before analysis, so the layout is not inferred here;
            ``MLTDecoder`` (``layout="auto"``) and the decode job infer it from the schema.
            Tokens of any integer type decode (array<bigint> as well as array<int>).
        handle_invalid: ``"error"`` fails the query naming the offending token vector;
            ``"null"`` turns invalid vectors (wrong length, a null token, a token outside
            [0, p) (for a vector: a value that does not round into it), or one that decodes
            to 2**63 or more) into null.
        engine: ``"native"``, ``"udf"`` or ``"auto"`` (as for :func:`mlt_encode`).

    Returns:
        A bigint Column; null where the tokens are null.

    Example::

        df.select(mlt_decode("user_tokens", codec).alias("user_id"))
    """
    codec = check_codec(codec)
    chosen = check_choice("layout", layout, LAYOUTS)
    check_choice("handle_invalid", handle_invalid, COLUMN_HANDLE_INVALID)
    if chosen == "packed":
        codec.require_packed_bits()
    source = as_input(col)
    runner = engine_for(engine, codec, chosen, source)
    return runner.decode(source, codec, chosen, handle_invalid).alias(_result_name("mlt_decode", source))


def vector_values_column(col: str, codec: MLTCodec) -> Column:
    """The values of the vector column ``col`` as an array<double> (null for a null vector;
    the type is checked when Spark analyses the query), to add as a column of its own that
    :func:`decode_vector_values_column` decodes by name: ``MLTDecoder`` decodes vectors so.

    SQL cannot read a vector, so a decoder that reads one is built as Columns, a Py4J call
    per operation (0.6 s or more for a (13, 9) decoder). Spark keeps this column, which the decoder
    reads n times and which costs more than a reference, in a projection of its own.
    """
    t = ColumnTarget()
    source = as_input(col)
    gate, fields = shape_gate(t, source.column, codec, "vector", source.name)
    values: Column = t.case([(gate | fields.isNull(), F.lit(None))], vector_to_array(fields))
    return values


def decode_vector_values_column(col: str, vector: str, codec: MLTCodec, *, handle_invalid: HandleInvalid) -> Column:
    """The ids (native engine) of the vectors whose values :func:`vector_values_column` put
    in column ``col``; messages name the vector column ``vector``."""
    column = "`" + col.replace("`", "``") + "`"  # a column's own name, as withColumns gave it (dots are no path)
    return decode_vector_values(column, as_input(vector).name, codec, handle_invalid)


def _result_name(function: str, source: Input) -> str:
    """The name of a function's result column, as Spark names its own: ``mlt_encode(user_id)``
    (Spark's default, the expression's text, runs to kilobytes here)."""
    argument = source.name.removeprefix("column ").strip("'") if source.simple else "..."
    return f"{function}({argument})"


def mlt_unpack(
    col: str | Column,
    codec: MLTCodec,
    *,
    layout: Layout = "array",
    handle_invalid: HandleInvalid = "error",
) -> Column:
    """The tokens of a packed token column (``mlt_encode(..., layout="packed")``), as an
    array<int> (or a struct t0..t{n-1}): plain Spark shifts and masks, no Python.

    Args:
        col: a bigint column of packed tokens.
        codec: the codec the tokens were made with (it fixes n and the bits per token).
        layout: ``"array"`` (default) or ``"struct"``.
        handle_invalid: ``"error"`` fails the query naming the value; ``"null"`` turns
            values with a token >= p or bits set above the n tokens into null.

    Raises:
        CodecParameterError: the codec's tokens do not fit in 64 bits (never packed).

    Example::

        ratings = read_delta(spark, "/data/ratings_mlt")
        ratings.select(mlt_unpack("userId_mlt", codecs["userId"]).alias("user_tokens"))
    """
    codec = check_codec(codec)
    chosen = check_choice("layout", layout, UNPACK_LAYOUTS)
    check_choice("handle_invalid", handle_invalid, COLUMN_HANDLE_INVALID)
    codec.require_packed_bits()
    source = as_input(col)
    return expression(
        source,
        lambda t, k: unpack_expr(t, k, codec, layout=chosen, handle_invalid=handle_invalid, sql_name=source.name),
        text=chosen in SQL_LAYOUTS,
    ).alias(_result_name("mlt_unpack", source))
