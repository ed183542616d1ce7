"""Token layouts: one object per layout, which every engine and layer asks.

* ``array``: array<int> of the n tokens;
* ``struct``: a struct with int fields t0..t{n-1};
* ``packed``: one bigint, token j in bits ``[j*b, (j+1)*b)``, ``b = codec.packed_bits``;
* ``vector``: a dense ML vector of token / (p - 1), each in [0, 1]: an array, scaled.

Each [`TokenLayout`][spark_mlt.column.layouts.TokenLayout] knows its Spark type, how to write n
token expressions in it and how to read them back (SQL text, `spark_mlt.column.sqltext`), and the
analysis-time gate that makes Spark reject a column of another type with a message that names the
layout. SQL has no ML vector type, so the vector layout's SQL side works on the vector's values, an
array<double>; [`VectorLayout.values`][spark_mlt.column.layouts.VectorLayout.values] and
[`VectorLayout.vector`][spark_mlt.column.layouts.VectorLayout.vector] are the two Column calls at
its edge. The NumPy side of packing is `spark_mlt.codec.packing`, the Arrow side of every layout
`spark_mlt.column.arrow` (it runs in Python workers, which must not import PySpark's ML modules).

A column's layout is read from its Spark type in one place,
[`layout_of`][spark_mlt.column.layouts.layout_of];
[`column_layout`][spark_mlt.column.layouts.column_layout] checks it against a wanted one and
[`token_layouts`][spark_mlt.column.layouts.token_layouts] reads a table's token columns, both
through it.

Example::

    >>> LAYOUT["packed"].spark_type(MLTCodec.from_seed(13, 3))
    'bigint'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Literal, get_args

from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, IntegralType, StructType

from spark_mlt.codec import MLTCodec
from spark_mlt.column import sqltext as sql
from spark_mlt.errors import MLTTypeError
from spark_mlt.options import TOKEN_SUFFIX

__all__ = [
    "DECODE_LAYOUTS",
    "LAYOUT",
    "LAYOUTS",
    "PACKED",
    "SQL_LAYOUTS",
    "STORAGE_LAYOUTS",
    "UNPACK_LAYOUTS",
    "VECTOR",
    "DecodeLayout",
    "Layout",
    "SqlLayout",
    "StorageLayout",
    "TokenLayout",
    "UnpackLayout",
    "column_layout",
    "layout_of",
    "token_layouts",
    "token_names",
    "token_struct_type",
]

#: what ``mlt_unpack`` returns
UnpackLayout = Literal["array", "struct"]
#: every layout: ``mlt_encode``, ``mlt_decode`` and the ML stages take them all
Layout = Literal[UnpackLayout, "vector", "packed"]
#: what a decoder reads: a layout, or ``auto``: the one the column's type shows
DecodeLayout = Literal["auto", Layout]
#: the layouts a SQL function's parameter type can hold (ARRAY<INT>, BIGINT)
SqlLayout = Literal["array", "packed"]
#: How the jobs store a token column: ``auto`` (an existing table's layout, else packed when
#: the tokens fit in 64 bits), ``packed`` or ``array``.
StorageLayout = Literal["auto", "packed", "array"]

LAYOUTS: tuple[Layout, ...] = get_args(Layout)
DECODE_LAYOUTS: tuple[DecodeLayout, ...] = get_args(DecodeLayout)
UNPACK_LAYOUTS: tuple[UnpackLayout, ...] = get_args(UnpackLayout)
SQL_LAYOUTS: tuple[SqlLayout, ...] = get_args(SqlLayout)
STORAGE_LAYOUTS: tuple[StorageLayout, ...] = get_args(StorageLayout)

TOKEN_COLUMN = "a token column (vector, array<int>, struct t0..t{n-1} or packed bigint)"

#: rounded vector values beyond it are invalid tokens anyway; it keeps the cast to bigint exact
_TOKEN_LIMIT = float(2**53)


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


def _integral(value: str, hint: str) -> str:
    """An expression that fails analysis, showing ``hint``, unless ``value`` is integral."""
    length = sql.call("length", [hint])
    listed = sql.call("array", [sql.cast(sql.lit(0), "BIGINT"), sql.cast(length, "BIGINT")])
    return sql.and_([sql.call("array_contains", [listed, value]), sql.is_null(sql.bit_or(value, length))])


def _least(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else sql.call("least", items)


def _greatest(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else sql.call("greatest", items)


class TokenLayout(ABC):
    """How n tokens are laid out in one Spark column (SQL text in and out): the interface
    every layout implements."""

    name: Layout
    #: the type a message shows for the layout
    shown: str

    @abstractmethod
    def spark_type(self, codec: MLTCodec) -> str:
        """The column's Spark type (DDL)."""

    @abstractmethod
    def write(self, tokens: Sequence[str], codec: MLTCodec) -> str:
        """The layout's value of the n ``tokens`` (bigint expressions in [0, p))."""

    @abstractmethod
    def read(self, column: str, codec: MLTCodec) -> tuple[list[str], list[str]]:
        """The n tokens of ``column`` as bigints (null where a token is null) and the checks
        of their shape and range, written so that the checks' code does not grow with n."""

    @abstractmethod
    def gate(self, column: str, codec: MLTCodec, name: str) -> tuple[str, str]:
        """A predicate that is always false (the optimizer removes it) but fails analysis
        unless ``column`` has this layout's type, and the column to read the tokens from.
        Every expression that can fail carries `hint`, so Spark's DATATYPE_MISMATCH
        error, which names the column and its type, also says which layout was expected."""

    def hint(self, codec: MLTCodec, name: str) -> str:
        """The message a mistyped column fails with: what was expected, and how to pick another
        layout."""
        last = codec.n - 1
        fields = f", ..., t{last}:int" if last > 1 else ", t1:int" if last else ""
        expected = self.shown.replace(", ...", fields)
        others = ", ".join(f"layout='{other.name}' for {other.shown}" for other in LAYOUT.values() if other is not self)
        return (
            f"spark-mlt: {name} must hold {expected} tokens (layout='{self.name}', n={codec.n}); "
            f"pass the layout the column holds ({others}), as mlt_encode's layout= wrote it"
        )


class ArrayLayout(TokenLayout):
    name: Layout = "array"
    shown = "array<int>"

    def spark_type(self, codec: MLTCodec) -> str:
        return "array<int>"

    def write(self, tokens: Sequence[str], codec: MLTCodec) -> str:
        return sql.call("array", [sql.cast(token, "INT") for token in tokens])

    def read(self, column: str, codec: MLTCodec) -> tuple[list[str], list[str]]:
        # get(): 0-based, null outside the array in every ANSI mode, and twice as fast as
        # try_element_at on cached or Parquet arrays. array_min and array_max skip null
        # tokens: a null token makes the decoded value null, which the caller checks.
        items = [sql.cast(sql.call("get", [column, sql.lit(j)]), "BIGINT") for j in range(codec.n)]
        checks = [
            sql.cmp(sql.call("size", [column]), "=", sql.lit(codec.n)),
            sql.cmp(sql.call("array_min", [column]), ">=", sql.lit(0)),
            sql.cmp(sql.call("array_max", [column]), "<", sql.lit(codec.p)),
        ]
        return items, checks

    def gate(self, column: str, codec: MLTCodec, name: str) -> tuple[str, str]:
        hint = sql.lit(self.hint(codec, name))
        check = sql.exists(column, lambda token: _integral(token, hint))
        fails = sql.cmp(sql.call("size", [column]), "<", sql.lit(0))  # fails on anything but an array or map
        # Read through a gate: Spark 3.5 computes get()'s type before checking its input and
        # fails with a ClassCastException on a non-array, unless the input is unresolved. This
        # gate is small (it is read once per token); the check above, read once, fails first
        # (Spark reports the first failure it meets) and names the layout expected.
        fields = sql.case([(sql.and_([sql.lit(False), fails]), sql.lit(None))], column)
        return sql.and_([sql.lit(False), check]), fields


class StructLayout(TokenLayout):
    name: Layout = "struct"
    shown = "struct<t0:int, ...>"

    def spark_type(self, codec: MLTCodec) -> str:
        return token_struct_type(codec.n)

    def write(self, tokens: Sequence[str], codec: MLTCodec) -> str:
        return sql.struct(token_names(codec.n), [sql.cast(token, "INT") for token in tokens])

    def read(self, column: str, codec: MLTCodec) -> tuple[list[str], list[str]]:
        items = [sql.cast(sql.field(column, name), "BIGINT") for name in token_names(codec.n)]
        return items, [sql.cmp(_least(items), ">=", sql.lit(0)), sql.cmp(_greatest(items), "<", sql.lit(codec.p))]

    def gate(self, column: str, codec: MLTCodec, name: str) -> tuple[str, str]:
        hint = sql.lit(self.hint(codec, name))
        # if(hint, column, column) folds to the column, and shows the hint where Spark cannot
        # read a field of it (it names the expression it tried)
        shown = sql.case([(sql.cmp(sql.call("length", [hint]), ">", sql.lit(0)), column)], column)
        check = sql.is_null(sql.call("array", [_integral(sql.field(shown, f), hint) for f in token_names(codec.n)]))
        return sql.and_([sql.lit(False), check]), shown


class PackedLayout(TokenLayout):
    name: Layout = "packed"
    shown = "bigint"

    def spark_type(self, codec: MLTCodec) -> str:
        return "bigint"

    def write(self, tokens: Sequence[str], codec: MLTCodec) -> str:
        """One bigint holding ``tokens`` (each in [0, 2**bits)), token j in bits ``[j*b, (j+1)*b)``."""
        bits = codec.require_packed_bits()
        shifted = [
            token if j == 0 else sql.call("shiftleft", [token, sql.lit(bits * j)]) for j, token in enumerate(tokens)
        ]
        return sql.balanced(shifted, sql.bit_or)

    def unpack(self, column: str, codec: MLTCodec) -> tuple[list[str], list[str]]:
        """The n tokens (bigint, each in [0, 2**bits), not checked against p) of a packed
        value, and the check that no bit above them is set (none where they fill 64 bits)."""
        bits = codec.require_packed_bits()
        whole = sql.cast(column, "BIGINT")
        mask = sql.lit(2**bits - 1)
        tokens = [
            sql.bit_and(whole if j == 0 else sql.call("shiftrightunsigned", [whole, sql.lit(bits * j)]), mask)
            for j in range(codec.n)
        ]
        top = bits * codec.n
        fits = [sql.cmp(sql.call("shiftrightunsigned", [whole, sql.lit(top)]), "=", sql.lit(0))] if top < 64 else []
        return tokens, fits

    def read(self, column: str, codec: MLTCodec) -> tuple[list[str], list[str]]:
        items, fits = self.unpack(column, codec)  # never null, each in [0, 2**bits)
        below = [sql.cmp(_greatest(items), "<", sql.lit(codec.p))] if codec.p < 2**codec.token_bits else []
        return items, fits + below

    def gate(self, column: str, codec: MLTCodec, name: str) -> tuple[str, str]:
        return sql.and_([sql.lit(False), _integral(column, sql.lit(self.hint(codec, name)))]), column


class VectorLayout(TokenLayout):
    """An array, scaled: the SQL side reads and writes the vector's values (an array<double>
    of token / (p - 1)); `vector` and `values` cross to and from the ML vector.
    A value is read back by scaling it by p - 1 and rounding to the nearest integer (exact:
    a double's error is far below one half); a value that rounds outside [0, p), NaN or
    infinity is an invalid token, handled per ``handle_invalid`` like any other."""

    name: Layout = "vector"
    shown = "vector"

    def spark_type(self, codec: MLTCodec) -> str:
        return "vector"

    @staticmethod
    def scale(codec: MLTCodec) -> int:
        """What a token is divided by: p - 1, so every value lies in [0, 1]."""
        return max(codec.p - 1, 1)

    def write(self, tokens: Sequence[str], codec: MLTCodec) -> str:
        """The values, never null: a null token (of an invalid id, whose row the caller
        discards) becomes 0, as ``array_to_vector`` fails on nulls."""
        scale = sql.cast(sql.lit(self.scale(codec)), "DOUBLE")
        scaled = [sql.call("try_divide", [sql.cast(token, "DOUBLE"), scale]) for token in tokens]
        return sql.call("array", [sql.call("coalesce", [item, sql.cast(sql.lit(0), "DOUBLE")]) for item in scaled])

    def read(self, column: str, codec: MLTCodec) -> tuple[list[str], list[str]]:
        items = [self._token(sql.call("get", [column, sql.lit(j)]), codec) for j in range(codec.n)]
        checks = [
            sql.cmp(sql.call("size", [column]), "=", sql.lit(codec.n)),
            sql.cmp(_least(items), ">=", sql.lit(0)),
            sql.cmp(_greatest(items), "<", sql.lit(codec.p)),
        ]
        return items, checks

    def _token(self, value: str, codec: MLTCodec) -> str:
        """value * (p - 1), rounded; beyond +-2**53, NaN and infinities become +-2**53 (outside
        [0, p) like any other invalid token), so the cast to bigint never fails."""
        rounded = sql.call("round", [sql.mul(value, sql.lit(float(self.scale(codec))))])
        clamped = sql.call("least", [sql.call("greatest", [rounded, sql.lit(-_TOKEN_LIMIT)]), sql.lit(_TOKEN_LIMIT)])
        return sql.cast(clamped, "BIGINT")

    def gate(self, column: str, codec: MLTCodec, name: str) -> tuple[str, str]:
        return sql.lit(False), column  # the values were gated where the vector was read (values)

    def values(self, vector: Column, codec: MLTCodec, name: str) -> Column:
        """The values (array<double>) of the vector column ``vector``; null for a null vector.
        Analysis fails with `hint` unless the column is an ML vector."""
        hint = F.lit(self.hint(codec, name))
        never = F.array(F.lit(0.0))
        check = F.coalesce(vector, array_to_vector(F.when(F.length(hint) > 0, never))).isNull()
        gate = F.lit(False) & check
        result: Column = F.when(gate | vector.isNull(), F.lit(None)).otherwise(vector_to_array(vector))
        return result

    def vector(self, values: Column, pick: Column) -> Column:
        """The vector of ``values`` (never null), where ``pick`` is 1; null (or the error
        ``pick`` raises) elsewhere."""
        return F.call_function("try_element_at", F.array(array_to_vector(values)), pick)


VECTOR = VectorLayout()
PACKED = PackedLayout()
#: the object of each layout
LAYOUT: dict[Layout, TokenLayout] = {layout.name: layout for layout in (ArrayLayout(), StructLayout(), VECTOR, PACKED)}


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


def column_layout(schema: StructType, column: str, wanted: DecodeLayout = "auto") -> Layout:
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
