"""The one expression form: Spark SQL text, built by small functions over strings.

Every engine writes its expressions as SQL text, which ``F.expr`` sends to Spark in one call
(a Column costs a Py4J round trip per operation: seconds for a long codec while the JVM is
cold) and ``CREATE TEMPORARY FUNCTION`` registers as it is.

Operators are written as calls of the functions Spark registers them under (`` `+`(a, b)``): Spark's
parser reads a deep nest of parenthesised infix expressions in time that grows with the square of
its depth, and function calls in linear time. Long sums, ANDs and ORs are folded as balanced trees
([`balanced`][spark_mlt.column.sqltext.balanced]) for the same reason. A CASE is written as nested
``if`` calls ([`case`][spark_mlt.column.sqltext.case]), and lookup tables as one string literal
([`long_array`][spark_mlt.column.sqltext.long_array]).

Example::

    >>> add(lit(1), identifier("user id"))
    '`+`(1, `user id`)'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = [
    "add",
    "and_",
    "balanced",
    "bit_and",
    "bit_or",
    "bit_xor",
    "call",
    "case",
    "cast",
    "cmp",
    "div",
    "exists",
    "field",
    "identifier",
    "is_null",
    "lit",
    "long_array",
    "mod",
    "mul",
    "or_",
    "string",
    "struct",
    "total",
    "try_cast",
]

T = TypeVar("T")

#: the variable of every lambda spark-mlt writes (an inner lambda shadows an outer one)
LAMBDA_VARIABLE = "spark_mlt_v"


def balanced(items: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """``items`` combined pairwise as a balanced tree: depth log2(n), not n.

    Example::

        >>> balanced(["a", "b", "c"], lambda x, y: f"({x}+{y})")
        '((a+b)+c)'
    """
    level = list(items)
    while len(level) > 1:
        pairs = [combine(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def string(value: str) -> str:
    """A SQL string literal of ``value``.

    Example::

        >>> string("it's")
        "'it\\\\'s'"
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def identifier(name: str) -> str:
    """``name`` as one quoted SQL identifier (a dot is part of it, not a path).

    Example::

        >>> identifier("a.b`c")
        '`a.b``c`'
    """
    return "`" + name.replace("`", "``") + "`"


def lit(value: int | float | str | bool | None) -> str:
    """A literal: int (bigint from 2**31), double, string, boolean or NULL."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}L" if abs(value) >= 2**31 else str(value)
    if isinstance(value, float):
        return f"CAST({value!r} AS DOUBLE)"
    return string(value)


def _op(name: str, a: str, b: str) -> str:
    return f"`{name}`({a}, {b})"


def add(a: str, b: str) -> str:
    return _op("+", a, b)


def mul(a: str, b: str) -> str:
    return _op("*", a, b)


def mod(a: str, b: str) -> str:
    return _op("%", a, b)


def div(a: str, b: str) -> str:
    return f"div({a}, {b})"


def cmp(a: str, op: str, b: str) -> str:
    """``a op b`` for ``op`` in ``<``, ``<=``, ``>``, ``>=``, ``=``, ``<>``."""
    return f"not({_op('=', a, b)})" if op == "<>" else _op(op, a, b)


def and_(items: Sequence[str]) -> str:
    return balanced(items, lambda a, b: _op("and", a, b))


def or_(items: Sequence[str]) -> str:
    return balanced(items, lambda a, b: _op("or", a, b))


def total(terms: Sequence[str]) -> str:
    """The sum of ``terms`` as a balanced tree of additions; 0 for no terms."""
    return balanced(terms, add) if terms else lit(0)


def is_null(a: str) -> str:
    return f"isnull({a})"


def cast(a: str, sql_type: str) -> str:
    return f"CAST({a} AS {sql_type})"


def try_cast(a: str, sql_type: str) -> str:
    return f"TRY_CAST({a} AS {sql_type})"


def case(branches: Sequence[tuple[str, str]], otherwise: str) -> str:
    """Nested ``if(cond, value, otherwise)`` calls: the meaning of a CASE, which Spark's
    parser, while cold, reads in time that grows steeply with the size of its ELSE branch
    (``make bench-functions`` measures the latency), and Spark generates faster code for ``if``.

    Example::

        >>> case([("a", "1"), ("b", "2")], "NULL")
        'if(a, 1, if(b, 2, NULL))'
    """
    result = otherwise
    for cond, value in reversed(branches):
        result = f"if({cond}, {value}, {result})"
    return result


def call(name: str, args: Sequence[str]) -> str:
    return f"{name}({', '.join(args)})"


def field(a: str, name: str) -> str:
    return f"{a}.{identifier(name)}"


def struct(names: Sequence[str], values: Sequence[str]) -> str:
    pairs = ", ".join(f"{string(name)}, {value}" for name, value in zip(names, values, strict=True))
    return f"named_struct({pairs})"


def bit_and(a: str, b: str) -> str:
    return _op("&", a, b)


def bit_or(a: str, b: str) -> str:
    return _op("|", a, b)


def bit_xor(a: str, b: str) -> str:
    return _op("^", a, b)


def exists(array: str, predicate: Callable[[str], str]) -> str:
    return f"exists({array}, {LAMBDA_VARIABLE} -> {predicate(LAMBDA_VARIABLE)})"


def long_array(values: Sequence[int]) -> str:
    """An array<bigint> from one string literal, which the optimizer folds (it is constant)
    into an array literal before the query runs: an array literal of a thousand elements
    takes Spark's analyser seconds, a string a millisecond."""
    return "CAST(split('" + ",".join(map(str, values)) + "', ',') AS ARRAY<BIGINT>)"
