"""Token layouts: their names, their Spark types, and how Spark lays tokens out in each.

* ``array``: array<int> of the n tokens;
* ``struct``: a struct with int fields t0..t{n-1};
* ``vector``: a dense ML vector of token / (p - 1), each in [0, 1];
* ``packed``: one bigint, token j in bits ``[j*b, (j+1)*b)``, ``b = codec.packed_bits``.

Design decisions:

* One :data:`Layout` Literal, and here the named subsets each API takes (SQL functions, the
  jobs' storage, ``mlt_unpack``, the decoder stage's ``auto``), so a layout is added or
  renamed in one place.
* A column's layout is read from its Spark type in one place, :func:`layout_of`;
  :func:`column_layout` checks it against a wanted one and :func:`token_layouts` reads a
  table's token columns, both through it.
* Decoding checks a column's type against its layout when Spark analyses the query
  (:func:`shape_gate`), so a wrong layout fails with Spark's DATATYPE_MISMATCH error naming the
  column, the type found and the layout expected.
* Packing in Spark (:func:`pack_tokens`, :func:`unpack_tokens`: shifts and masks) is written
  once for both expression targets, so the column functions and the SQL functions share it;
  the NumPy side is :mod:`spark_mlt.codec.packing`.
* A vector is decoded by scaling each value back by p - 1 and rounding to the nearest
  integer (exact: a double's error is far below one half), then decoding the tokens as an
  array; a value that rounds outside [0, p), NaN or infinity is an invalid token, handled
  per ``handle_invalid`` like any other (:func:`vector_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypeVar

from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, IntegralType, StructType

from spark_mlt.codec import MLTCodec
from spark_mlt.column.inputs import Input, bound
from spark_mlt.column.targets import ColumnTarget, ExpressionTarget
from spark_mlt.errors import MLTTypeError
from spark_mlt.options import TOKEN_SUFFIX

__all__ = [
    "DECODER_LAYOUTS",
    "LAYOUTS",
    "SQL_LAYOUTS",
    "STORAGE_LAYOUTS",
    "UNPACK_LAYOUTS",
    "Layout",
    "StorageLayout",
    "column_layout",
    "layout_of",
    "pack_tokens",
    "shape_gate",
    "shape_tokens",
    "token_layouts",
    "token_names",
    "token_struct_type",
    "unpack_tokens",
    "vector_of_tokens",
    "vector_scale",
    "vector_tokens",
    "vector_values_of",
]

E = TypeVar("E")

Layout = Literal["array", "struct", "vector", "packed"]
#: How the jobs store a token column: ``auto`` (an existing table's layout, else packed when
#: the tokens fit in 64 bits), ``packed`` or ``array``.
StorageLayout = Literal["auto", "packed", "array"]

#: every layout: ``mlt_encode``, ``mlt_decode`` and the encoder stage take them all
LAYOUTS: tuple[Layout, ...] = ("array", "struct", "vector", "packed")
#: the decoder stage also reads the layout from the column's type
DECODER_LAYOUTS: tuple[Layout | Literal["auto"], ...] = ("auto", *LAYOUTS)
#: what ``mlt_unpack`` returns
UNPACK_LAYOUTS: tuple[Layout, ...] = ("array", "struct")
#: the layouts a SQL function's parameter type can hold (ARRAY<INT>, BIGINT)
SQL_LAYOUTS: tuple[Layout, ...] = ("array", "packed")
STORAGE_LAYOUTS: tuple[StorageLayout, ...] = ("auto", "packed", "array")

TOKEN_COLUMN = "a token column (vector, array<int>, struct t0..t{n-1} or packed bigint)"


def token_names(n: int) -> list[str]:
    """Field names of the struct layout: t0 .. t{n-1}."""
    return [f"t{j}" for j in range(n)]


def token_struct_type(n: int) -> str:
    """The DDL of the struct layout: ``struct<t0:int, ..., t{n-1}:int>``.

    Example::

        >>> token_struct_type(2)
        'struct<t0:int, t1:int>'
    """
    return "struct<" + ", ".join(f"{name}:int" for name in token_names(n)) + ">"


# --- reading a layout from a Spark type -----------------------------------------------------


def layout_of(data_type: DataType) -> Layout | None:
    """The layout a column of this Spark type holds, or None when it is no token column:
    an integer is ``packed``, an array ``array``, a struct ``struct``, an ML vector ``vector``.

    Example::

        >>> from pyspark.sql.types import LongType
        >>> layout_of(LongType())
        'packed'
    """
    if isinstance(data_type, IntegralType):
        return "packed"
    if isinstance(data_type, ArrayType):
        return "array"
    if isinstance(data_type, StructType):
        return "struct"
    if type(data_type).__name__ == "VectorUDT":
        return "vector"
    return None


def column_layout(schema: StructType, column: str, wanted: Layout | Literal["auto"] = "auto") -> Layout:
    """The token layout of ``column`` in ``schema``: ``wanted`` if its type holds that
    layout, or (``"auto"``) the layout its type shows.

    Raises:
        MLTTypeError: the column's type is no token layout, or not the one wanted; the
            message names the column, its type and the layout to set.

    Example::

        column_layout(tokens.schema, "userId_mlt")  # "vector"
    """
    data_type = schema[column].dataType
    found = layout_of(data_type)
    if found is not None and wanted in ("auto", found):
        return found
    expected = TOKEN_COLUMN if wanted == "auto" else f"the {wanted} layout"
    hint = f"set layout='{found}' (or 'auto')" if found else "decode a column MLTEncoderModel or mlt_encode wrote"
    message = f"column {column!r} has type {data_type.simpleString()}, which is not {expected}; {hint}"
    raise MLTTypeError(f"layout: {message}" if wanted != "auto" else message, parameter="layout")


def token_layouts(schema: StructType, codecs: Mapping[str, MLTCodec]) -> dict[str, Layout]:
    """The layout of each codec column ``c``'s token column ``c_mlt`` (``TOKEN_SUFFIX``) in
    ``schema``, by its type; columns without a token column are left out.

    Raises:
        MLTTypeError: a token column's type is no token layout.

    Example::

        token_layouts(table.schema, read_codecs(path))  # {"userId": "packed"}
    """
    names = set(schema.names)
    return {
        column: column_layout(schema, f"{column}{TOKEN_SUFFIX}")
        for column in codecs
        if f"{column}{TOKEN_SUFFIX}" in names
    }


# --- checking a token column's type when Spark analyses the query ---------------------------

_EXPECTED = {"array": "array<int>", "struct": "struct<t0:int, ...>", "vector": "vector", "packed": "bigint"}


def _hint(codec: MLTCodec, layout: str, name: str) -> str:
    last = codec.n - 1
    fields = f", ..., t{last}:int" if last > 1 else ", t1:int" if last else ""
    expected = _EXPECTED[layout].replace(", ...", fields)
    others = ", ".join(f"layout='{other}' for {shape}" for other, shape in _EXPECTED.items() if other != layout)
    return (
        f"spark-mlt: {name} must hold {expected} tokens (layout='{layout}', n={codec.n}); "
        f"pass the layout the column holds ({others}), as mlt_encode's layout= wrote it"
    )


def shape_gate(t: ExpressionTarget[E], tokens: E, codec: MLTCodec, layout: str, name: str) -> tuple[E, E]:
    """A predicate that is always false (the optimizer removes it) but fails analysis unless
    ``tokens`` has the shape of ``layout``: an array of integers, a struct whose fields
    t0..t{n-1} are integers, an ML vector, or an integer. Every expression that can fail
    carries the hint, so Spark's DATATYPE_MISMATCH error, which names the column and the type
    it found, also says which layout was expected and how to pick another. Also returns the
    tokens to read items from, which fail with the hint too (the optimizer reduces them to
    ``tokens``).

    Any integer width is accepted (bigint tokens decode exactly); tokens outside [0, p) and
    an array of the wrong length fail at run time, naming the token vector.
    """
    hint = t.lit(_hint(codec, layout, name))
    length = t.call("length", [hint])

    def integral(value: E) -> E:  # fails for strings, floating point, nested types
        in_list = t.call(
            "array_contains", [t.call("array", [t.cast(t.lit(0), "BIGINT"), t.cast(length, "BIGINT")]), value]
        )
        return t.and_([in_list, t.is_null(t.bit_or(value, length))])

    fields = tokens
    if layout in ("array", "vector"):
        never = t.call("array", [t.cast(t.lit(0), "DOUBLE")])
        if layout == "array":
            check = t.exists(tokens, integral)
            fails = t.cmp(t.call("size", [tokens]), "<", t.lit(0))  # fails on anything but an array or map
        else:  # coalesce needs one type: a vector's (the vector is never built: the gate folds away)
            check = t.is_null(
                t.call("coalesce", [tokens, t.vector(t.case([(t.cmp(length, ">", t.lit(0)), never)], t.lit(None)))])
            )
            fails = t.is_null(t.call("coalesce", [tokens, t.vector(never)]))
        # Read through a gate: Spark 3.5 computes get()'s type before checking its input and
        # fails with a ClassCastException on a non-array, unless the input is unresolved. This
        # gate is small (it is read once per token); the gate above, read once, fails first
        # (Spark reports the first failure it meets) and names the layout expected.
        fields = t.case([(t.and_([t.lit(False), fails]), t.lit(None))], tokens)
    elif layout == "struct":
        fields = t.with_field(tokens, "spark_mlt_expects", hint)
        check = t.is_null(t.call("array", [integral(t.field(fields, f)) for f in token_names(codec.n)]))
    else:
        check = integral(tokens)
    return t.and_([t.lit(False), check]), fields


# --- laying tokens out, in Spark ------------------------------------------------------------


def _balanced(items: Sequence[E], combine: Callable[[E, E], E]) -> E:
    """``items`` combined pairwise as a balanced tree: depth log2(n), not n."""
    while len(items) > 1:
        pairs = [combine(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        items = pairs + ([items[-1]] if len(items) % 2 else [])
    return items[0]


def pack_tokens(t: ExpressionTarget[E], tokens: Sequence[E], bits: int) -> E:
    """One bigint holding ``tokens`` (bigint, each in [0, 2**bits)), token j in bits
    ``[j*bits, (j+1)*bits)``."""
    shifted = [token if j == 0 else t.call("shiftleft", [token, t.lit(bits * j)]) for j, token in enumerate(tokens)]
    return _balanced(shifted, t.bit_or)


def unpack_tokens(t: ExpressionTarget[E], packed: E, codec: MLTCodec) -> tuple[list[E], list[E]]:
    """The n tokens (bigint, each in [0, 2**bits), not checked against p) of a packed value,
    and the check that no bit above them is set (empty where they fill all 64 bits)."""
    bits = codec.require_packed_bits()
    whole = t.cast(packed, "BIGINT")
    mask = t.lit(2**bits - 1)
    tokens = [
        t.bit_and(whole if j == 0 else t.call("shiftrightunsigned", [whole, t.lit(bits * j)]), mask)
        for j in range(codec.n)
    ]
    top = bits * codec.n
    fits = [t.cmp(t.call("shiftrightunsigned", [whole, t.lit(top)]), "=", t.lit(0))] if top < 64 else []
    return tokens, fits


def vector_scale(codec: MLTCodec) -> int:
    """What the vector layout divides a token by: p - 1, so every value lies in [0, 1]."""
    return max(codec.p - 1, 1)


def shape_tokens(t: ExpressionTarget[E], tokens: Sequence[E], codec: MLTCodec, layout: str) -> E:
    """The n ``tokens`` (bigint expressions, in [0, p) when valid) in ``layout``: array,
    struct or packed (vectors are built from :func:`vector_values_of`)."""
    if layout == "packed":
        return pack_tokens(t, tokens, codec.require_packed_bits())
    ints = [t.cast(token, "INT") for token in tokens]
    return t.struct(token_names(codec.n), ints) if layout == "struct" else t.call("array", ints)


def vector_values_of(t: ExpressionTarget[E], tokens: Sequence[E], codec: MLTCodec) -> E:
    """The array<double> of token / (p - 1) that the vector layout holds, never null: a null
    token (from an invalid id whose row the caller discards) becomes 0, as
    ``array_to_vector`` fails on nulls."""
    scale = t.cast(t.lit(vector_scale(codec)), "DOUBLE")
    scaled = [t.call("try_divide", [t.cast(token, "DOUBLE"), scale]) for token in tokens]
    return t.call("array", [t.call("coalesce", [item, t.cast(t.lit(0), "DOUBLE")]) for item in scaled])


def vector_of_tokens(tokens: Input, codec: MLTCodec) -> Column:
    """A dense ML vector of token / (p - 1) from an array<int> of tokens (null stays null), by
    a lambda over the array: reading the tokens n times per row would copy their expression
    n times."""
    scale = float(vector_scale(codec))
    return bound(
        tokens,
        lambda t: F.when(t.isNull(), F.lit(None)).otherwise(
            array_to_vector(F.transform(t, lambda token: token.cast("double") / scale))
        ),
    )


_TOKEN_LIMIT = float(2**53)  # rounded values beyond it are invalid tokens anyway; it keeps the cast exact


def vector_tokens(source: Input, codec: MLTCodec) -> Input:
    """The tokens of a vector column, as an array<bigint> to decode in the array layout.

    Each value times p - 1, rounded to the nearest integer; the type is checked when Spark
    analyses the query (:func:`shape_gate`). Values beyond +-2**53, NaN and infinities become
    2**53 or -2**53, outside [0, p) like any other invalid token, so the cast to bigint never
    fails. The result is bound once where the decoder reads it n times.
    """
    scale = float(vector_scale(codec))

    def tokens(vector: Column) -> Column:
        gate, fields = shape_gate(ColumnTarget(), vector, codec, "vector", source.name)
        clamp = F.lit(_TOKEN_LIMIT)
        values = F.transform(
            vector_to_array(fields),
            lambda value: F.least(F.greatest(F.round(value * scale), -clamp), clamp).cast("bigint"),
        )
        result: Column = F.when(gate | fields.isNull(), F.lit(None)).otherwise(values)
        return result

    return Input(bound(source, tokens), source.name, simple=False)
