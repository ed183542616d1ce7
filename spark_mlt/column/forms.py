"""Token layouts, as both engines and every reader of a token column see them.

* ``array``: array<int> of the n tokens;
* ``struct``: a struct with int fields t0..t{n-1};
* ``vector``: a dense ML vector of token / (p - 1) (written, decoded by the ML stages);
* ``packed``: one bigint, token j in bits ``[j*b, (j+1)*b)``, ``b = codec.packed_bits``.

Decoding checks a column's type against its layout when Spark analyses the query
(:func:`shape_gate`), so a wrong layout fails with Spark's DATATYPE_MISMATCH error naming the
column, the type found and the layout expected.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, IntegralType, StructType

from spark_mlt.codec import MLTCodec
from spark_mlt.options import Layout

__all__ = ["layout_of", "shape_gate", "token_names", "token_struct_type"]


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


def layout_of(data_type: DataType) -> Layout | None:
    """The layout a column of this Spark type holds, or None when it is no token column:
    an integer is ``packed``, an array ``array``, a struct ``struct``, an ML vector ``vector``."""
    if isinstance(data_type, IntegralType):
        return "packed"
    if isinstance(data_type, ArrayType):
        return "array"
    if isinstance(data_type, StructType):
        return "struct"
    if type(data_type).__name__ == "VectorUDT":
        return "vector"
    return None


_EXPECTED = {"array": "array<int>", "struct": "struct<t0:int, ...>", "packed": "bigint"}


def _hint(codec: MLTCodec, layout: str, name: str) -> Column:
    last = codec.n - 1
    fields = f", ..., t{last}:int" if last > 1 else ", t1:int" if last else ""
    expected = _EXPECTED[layout].replace(", ...", fields)
    others = ", ".join(f"layout='{other}' for {shape}" for other, shape in _EXPECTED.items() if other != layout)
    return F.lit(
        f"spark-mlt: {name} must hold {expected} tokens (layout='{layout}', n={codec.n}); "
        f"pass the layout the column holds ({others}), as mlt_encode's layout= wrote it"
    )


def shape_gate(tokens: Column, codec: MLTCodec, layout: str, name: str) -> tuple[Column, Column]:
    """A predicate that is always false (the optimizer removes it) but fails analysis unless
    ``tokens`` has the shape of ``layout``: an array of integers, a struct whose fields
    t0..t{n-1} are integers, or an integer. Every expression that can fail carries the hint,
    so Spark's DATATYPE_MISMATCH error, which names the column and the type it found, also
    says which layout was expected and how to pick another. Also returns the tokens to read
    items from, which fail with the hint too (the optimizer reduces them to ``tokens``).

    Any integer width is accepted (bigint tokens decode exactly); tokens outside [0, p) and
    an array of the wrong length fail at run time, naming the token vector.
    """
    hint = _hint(codec, layout, name)

    def integral(value: Column) -> Column:  # fails for strings, floating point, nested types
        in_list = F.array_contains(F.array(F.lit(0).cast("bigint"), F.length(hint).cast("bigint")), value)
        return in_list & value.bitwiseOR(F.length(hint)).isNull()

    fields = tokens
    if layout == "array":
        check = F.exists(tokens, integral)
        # Read through the gate: Spark 3.5 computes get()'s type before checking its input
        # and fails with a ClassCastException on a non-array, unless the input is unresolved.
        fields = F.when(F.lit(False) & check, F.lit(None)).otherwise(tokens)
    elif layout == "struct":
        fields = tokens.withField("spark_mlt_expects", hint)
        check = F.array(*[integral(fields.getField(f)) for f in token_names(codec.n)]).isNull()
    else:
        check = integral(tokens)
    gate: Column = F.lit(False) & check
    return gate, fields
