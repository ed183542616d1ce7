"""Where the native engine's expressions go: a PySpark ``Column`` or Spark SQL text.

The builders (:mod:`spark_mlt.column.builders`) emit the same arithmetic for two targets,
a ``Column`` and SQL text, through the small :class:`ExpressionTarget` interface, so the two
cannot drift apart.

SQL text is the fast way to build a large expression: ``F.expr`` sends it to Spark in one
call, where a Column costs a Py4J round trip per operation (several, on PySpark 4, which
records each call's origin), seconds for a long codec in a session whose JVM is still cold.
So the column functions build SQL text whenever their input is a column name, and
``CREATE TEMPORARY FUNCTION`` registers it as is; a Column is built only around an input
that is a Column expression. Lookup tables travel in SQL text as one string literal that
Spark's optimizer folds into an array once (:meth:`SqlTarget.long_array`): an array literal
of a thousand elements takes Spark's analyser seconds, a string a millisecond.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
from pyspark import SparkContext
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import functions as F
from pyspark.sql.utils import is_remote

from spark_mlt.codec import MAX_ID

try:
    from pyspark.sql.classic.column import Column as ClassicColumn
except ImportError:  # PySpark < 4.0
    from pyspark.sql.column import Column as ClassicColumn  # type: ignore[assignment,unused-ignore]

__all__ = ["ColumnTarget", "ExpressionTarget", "SqlTarget", "VectorValuesTarget"]

E = TypeVar("E")


class ExpressionTarget(Protocol[E]):
    """Operations the builders need, for one target representation E."""

    def lit(self, value: int | float | str | bool | None) -> E: ...
    def add(self, a: E, b: E) -> E: ...
    def mul(self, a: E, b: E) -> E: ...
    def mod(self, a: E, b: E) -> E: ...
    def div(self, a: E, b: E) -> E: ...
    def cmp(self, a: E, op: str, b: E) -> E: ...
    def and_(self, items: Sequence[E]) -> E: ...
    def or_(self, items: Sequence[E]) -> E: ...
    def is_null(self, a: E) -> E: ...
    def cast(self, a: E, sql_type: str) -> E: ...
    def try_cast(self, a: E, sql_type: str) -> E: ...
    def case(self, branches: Sequence[tuple[E, E]], otherwise: E) -> E: ...
    def call(self, name: str, args: Sequence[E]) -> E: ...
    def field(self, a: E, name: str) -> E: ...
    def with_field(self, a: E, name: str, value: E) -> E: ...
    def struct(self, names: Sequence[str], values: Sequence[E]) -> E: ...
    def vector(self, doubles: E) -> E: ...
    def vector_values(self, vector: E) -> E: ...
    def bit_and(self, a: E, b: E) -> E: ...
    def bit_or(self, a: E, b: E) -> E: ...
    def bit_xor(self, a: E, b: E) -> E: ...
    def long_array(self, values: Sequence[int]) -> E: ...
    def exists(self, array: E, predicate: Callable[[E], E]) -> E: ...


class SqlTarget:
    """Emits Spark SQL text.

    Operators are written as calls of the functions Spark registers them under (`` `+`(a, b)
    ``, `` `and`(a, b) ``): Spark's parser reads a deep nest of parenthesised infix
    expressions in time that grows with the square of its depth (a second to parse 40
    levels while the parser is cold), and function calls in linear time.
    """

    def lit(self, value: int | float | str | bool | None) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return f"{value}L" if abs(value) >= 2**31 else str(value)
        if isinstance(value, float):
            return f"CAST({value!r} AS DOUBLE)"
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    @staticmethod
    def _op(name: str, a: str, b: str) -> str:
        return f"`{name}`({a}, {b})"

    def add(self, a: str, b: str) -> str:
        return self._op("+", a, b)

    def mul(self, a: str, b: str) -> str:
        return self._op("*", a, b)

    def mod(self, a: str, b: str) -> str:
        return self._op("%", a, b)

    def div(self, a: str, b: str) -> str:
        return f"div({a}, {b})"

    def cmp(self, a: str, op: str, b: str) -> str:
        return f"not({self._op('=', a, b)})" if op == "<>" else self._op(op, a, b)

    def _tree(self, name: str, items: Sequence[str]) -> str:
        """``items`` joined by a binary function as a balanced tree: depth log2(n), not n."""
        while len(items) > 1:
            pairs = [self._op(name, items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
            items = pairs + ([items[-1]] if len(items) % 2 else [])
        return items[0]

    def and_(self, items: Sequence[str]) -> str:
        return self._tree("and", items)

    def or_(self, items: Sequence[str]) -> str:
        return self._tree("or", items)

    def is_null(self, a: str) -> str:
        return f"isnull({a})"

    def cast(self, a: str, sql_type: str) -> str:
        return f"CAST({a} AS {sql_type})"

    def try_cast(self, a: str, sql_type: str) -> str:
        return f"TRY_CAST({a} AS {sql_type})"

    def case(self, branches: Sequence[tuple[str, str]], otherwise: str) -> str:
        """Nested ``if(cond, value, otherwise)`` calls: the meaning of a CASE, but Spark's
        parser, while cold, takes seconds over ``CASE ... ELSE <a large expression> END``
        (10 s for the (3, 39) decoder's shape check, 0.8 s as an ``if``), and with the
        code Spark generates for ``if`` array encode runs 1.5-2.5x faster than with
        ``CASE`` (1.1x for (3, 39); 2M rows, PySpark 4.3).

        Example::

            >>> SqlTarget().case([("a", "1"), ("b", "2")], "NULL")
            'if(a, 1, if(b, 2, NULL))'
        """
        result = otherwise
        for cond, value in reversed(branches):
            result = f"if({cond}, {value}, {result})"
        return result

    def call(self, name: str, args: Sequence[str]) -> str:
        return f"{name}({', '.join(args)})"

    def field(self, a: str, name: str) -> str:
        return f"{a}.{name}"

    def with_field(self, a: str, name: str, value: str) -> str:
        """SQL cannot add a field to a struct: struct tokens are decoded through a Column."""
        raise NotImplementedError("SQL text cannot add a struct field")  # pragma: no cover - internal misuse

    def struct(self, names: Sequence[str], values: Sequence[str]) -> str:
        pairs = ", ".join(f"'{name}', {value}" for name, value in zip(names, values, strict=True))
        return f"named_struct({pairs})"

    def vector(self, doubles: str) -> str:
        """SQL has no ML vector type (:data:`~spark_mlt.column.layouts.SQL_LAYOUTS` leaves it out)."""
        raise NotImplementedError("SQL functions cannot return ML vectors")  # pragma: no cover - internal misuse

    def vector_values(self, vector: str) -> str:
        """SQL has no ML vector type (:data:`~spark_mlt.column.layouts.SQL_LAYOUTS` leaves it out)."""
        raise NotImplementedError("SQL functions cannot read ML vectors")  # pragma: no cover - internal misuse

    def bit_and(self, a: str, b: str) -> str:
        return self._op("&", a, b)

    def bit_or(self, a: str, b: str) -> str:
        return self._op("|", a, b)

    def bit_xor(self, a: str, b: str) -> str:
        return self._op("^", a, b)

    def exists(self, array: str, predicate: Callable[[str], str]) -> str:
        return f"exists({array}, spark_mlt_token -> {predicate('spark_mlt_token')})"

    def long_array(self, values: Sequence[int]) -> str:
        """An array<bigint> from one string literal, which the optimizer folds (it is
        constant) into an array literal before the query runs."""
        return "CAST(split('" + ",".join(map(str, values)) + "', ',') AS ARRAY<BIGINT>)"


class VectorValuesTarget(SqlTarget):
    """SQL text that decodes a vector whose values were read into an array<double> column
    first (SQL cannot read a vector; see
    :func:`~spark_mlt.column.functions.vector_values_column`): the vector's values are that
    column."""

    def vector_values(self, vector: str) -> str:
        return vector


class ColumnTarget:
    """Builds PySpark Columns (works on Spark Classic and Spark Connect)."""

    F = F

    def lit(self, value: int | float | str | bool | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return self.F.lit(value).cast("bigint" if abs(value) >= 2**31 else "int")
        return self.F.lit(value)

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    def mod(self, a: Any, b: Any) -> Any:
        return a % b

    def div(self, a: Any, b: Any) -> Any:
        return self.F.call_function("div", a, b)

    def cmp(self, a: Any, op: str, b: Any) -> Any:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "<>": a != b}[op]

    def and_(self, items: Sequence[Any]) -> Any:
        result = items[0]
        for item in items[1:]:
            result = result & item
        return result

    def or_(self, items: Sequence[Any]) -> Any:
        result = items[0]
        for item in items[1:]:
            result = result | item
        return result

    def is_null(self, a: Any) -> Any:
        return a.isNull()

    def cast(self, a: Any, sql_type: str) -> Any:
        return a.cast(sql_type)

    def try_cast(self, a: Any, sql_type: str) -> Any:
        """``TRY_CAST``; PySpark < 4.0 has no ``Column.try_cast``, so there only bigint is
        supported, as a cast of the value when it lies within the bigint range, else null."""
        if hasattr(type(a), "try_cast"):  # not hasattr(a): Column.__getattr__ reads struct fields
            return a.try_cast(sql_type)
        if sql_type != "BIGINT":
            raise NotImplementedError(sql_type)  # pragma: no cover - internal misuse
        low, high = self.lit(-MAX_ID - 1), self.lit(MAX_ID)
        return self.F.when((a >= low) & (a <= high), a).cast("bigint")

    def case(self, branches: Sequence[tuple[Any, Any]], otherwise: Any) -> Any:
        """Nested ``if`` calls, as :meth:`SqlTarget.case` writes them (the same generated code)."""
        result = otherwise
        for cond, value in reversed(branches):
            result = self.F.call_function("if", cond, value, result)
        return result

    def call(self, name: str, args: Sequence[Any]) -> Any:
        return self.F.call_function(name, *args)

    def field(self, a: Any, name: str) -> Any:
        return a.getField(name)

    def with_field(self, a: Any, name: str, value: Any) -> Any:
        return a.withField(name, value)

    def struct(self, names: Sequence[str], values: Sequence[Any]) -> Any:
        return self.F.struct(*[value.alias(name) for name, value in zip(names, values, strict=True)])

    def vector(self, doubles: Any) -> Any:
        """A dense ML vector of an array<double> that is never null (``array_to_vector``
        fails on a null array instead of returning null)."""
        return array_to_vector(doubles)

    def vector_values(self, vector: Any) -> Any:
        """The array<double> of an ML vector (dense or sparse), empty for a null vector
        (``vector_to_array`` fails on null instead of returning null)."""
        return vector_to_array(self.F.coalesce(vector, array_to_vector(self.F.array().cast("array<double>"))))

    def bit_and(self, a: Any, b: Any) -> Any:
        return a.bitwiseAND(b)

    def bit_or(self, a: Any, b: Any) -> Any:
        return a.bitwiseOR(b)

    def bit_xor(self, a: Any, b: Any) -> Any:
        return a.bitwiseXOR(b)

    def exists(self, array: Any, predicate: Callable[[Any], Any]) -> Any:
        return self.F.exists(array, predicate)

    def long_array(self, values: Sequence[int]) -> Any:
        """One array<bigint> literal. On Spark Classic ``F.lit`` of an array crosses Py4J
        once per element (a round trip each, thousands per table encoder), so the values go
        over as one byte[] and become a long[] in the JVM; Spark Connect builds the literal
        locally."""
        array = np.asarray(values, dtype="<i8")
        if is_remote():
            return self.F.lit(array)
        context = SparkContext._active_spark_context
        if context is None or context._gateway is None or context._jvm is None:  # let pyspark say why
            return self.F.lit(array)
        gateway, jvm = context._gateway, context._jvm
        longs = gateway.new_array(gateway.jvm.long, len(array))
        buffer = jvm.java.nio.ByteBuffer.wrap(bytearray(array.tobytes()))
        buffer.order(jvm.java.nio.ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(longs)
        return ClassicColumn(jvm.org.apache.spark.sql.functions.lit(longs))
