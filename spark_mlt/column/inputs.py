"""A function's input column: its name for messages, its size, and reading it once.

Spark expressions are trees: a value read k times is k copies of its subtree, and every
optimizer rule works on the copies. The engines read their input several times (each token
reads the id; each digit every token), so a small input (a column reference, a cast) is
copied, and a larger one (another spark-mlt function: ``mlt_encode(mlt_decode(...))``) is
bound once to a lambda variable, ``transform(array(input), v -> body(v))[0]``, so a composed
plan is the sum of its parts, not their product.

An input that is a column, by name or ``F.col``, also has its SQL text (``Input.sql``), so
the native engine can build its expression as SQL text (see :mod:`spark_mlt.column.targets`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from py4j.protocol import Py4JError
from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_mlt.column.targets import ColumnTarget, ExpressionTarget, SqlTarget
from spark_mlt.column.versions import PYSPARK_LINE
from spark_mlt.errors import MLTTypeError

__all__ = ["SIMPLE_INPUT_NODES", "Input", "as_input", "bound", "expression", "expression_nodes", "quoted_name"]

SIMPLE_INPUT_NODES = 8  # largest input (expression nodes) copied, not bound, where it is read twice or more

# Nodes that hold no other expression. Any other node without children (a UDF call, say,
# whose arguments some Spark versions do not list as children) counts as too large to copy.
LEAF_NODES = frozenset({"ColumnReference", "LiteralExpression", "UnresolvedAttribute", "AttributeReference", "Literal"})


class Input(NamedTuple):
    """A function's input column, its name for error messages, whether it is small enough to
    copy into an expression that reads it several times, and its SQL text when it is a
    column reference (a quoted identifier)."""

    column: Column
    name: str
    simple: bool
    sql: str | None = None


def as_input(col: str | Column) -> Input:
    """The input column, named and sized without rendering it.

    Rendering a composed Column as text (``str(column)``) expands Spark's shared expression
    DAG into a tree, which for ``mlt_decode(mlt_encode(...))`` on Spark 3.5 exhausted a 1 GiB
    driver. So only a small expression, sized by walking at most ``SIMPLE_INPUT_NODES + 1``
    of its nodes, is named by its text; anything larger is "a column expression".
    """
    if isinstance(col, str):
        return Input(F.col(col), f"column {col!r}", True, quoted_name(col))
    if not isinstance(col, Column):
        raise MLTTypeError(f"col must be a column name or a Column, got {type(col).__name__}", parameter="col")
    if expression_nodes(col, SIMPLE_INPUT_NODES) > SIMPLE_INPUT_NODES:
        return Input(col, "a column expression", False)
    handle: Any = col  # the JVM Column (_jc), or Spark Connect's expression (_expr)
    text = str(handle._expr) if _is_connect(col) else handle._jc.toString()
    return Input(col, f"column {text!r}", True, _reference_sql(col))


def quoted_name(name: str) -> str | None:
    """The SQL text of the column ``F.col(name)`` reads: each part of the name (parts are
    separated by dots, and a part in backticks may hold dots) in backticks. None for a name
    that ``F.col`` reads otherwise (a star) or that is malformed (Spark then says why).

    Example::

        >>> quoted_name("user.`id.v2`")
        '`user`.`id.v2`'
    """
    parts: list[str] = []
    part: list[str] = []
    quoted = closed = False
    i = 0
    while i < len(name):
        char = name[i]
        if quoted:
            if char != "`":
                part.append(char)
            elif name[i + 1 : i + 2] == "`":
                part.append("`")
                i += 1
            else:
                quoted, closed = False, True
        elif char == "`":
            if part or closed:
                return None
            quoted = True
        elif char == ".":
            parts.append("".join(part))
            part, closed = [], False
        elif closed:
            return None
        else:
            part.append(char)
        i += 1
    parts.append("".join(part))
    if quoted or "*" in parts or any(not piece for piece in parts):
        return None
    return ".".join("`" + piece.replace("`", "``") + "`" for piece in parts)


def _reference_sql(column: Column) -> str | None:
    """The SQL text of a plain column reference (``F.col(name)``, not bound to a DataFrame),
    else None."""
    handle: Any = column
    try:
        if _is_connect(column):
            node = handle._expr
            if type(node).__name__ != "ColumnReference" or getattr(node, "_plan_id", None) is not None:
                return None
            return quoted_name(node._unparsed_identifier)
        node = handle._jc.node() if PYSPARK_LINE >= (4, 0) else handle._jc.expr()
        if node.getClass().getSimpleName() != "UnresolvedAttribute":
            return None
        if PYSPARK_LINE >= (4, 0) and node.planId().isDefined():
            return None
        names = node.nameParts()
        parts = [names.apply(i) for i in range(names.size())]
    except (Py4JError, AttributeError):  # pragma: no cover - an unknown Column layout: no SQL text
        return None
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def _is_connect(column: Column) -> bool:
    return type(column).__module__.startswith("pyspark.sql.connect")


def expression_nodes(column: Column, limit: int) -> int:
    """The number of expression nodes in ``column``, counted up to ``limit + 1``; an
    expression whose shape cannot be read counts as larger than ``limit``."""
    handle: Any = column
    if _is_connect(column):
        return _walk(handle._expr, _connect_children, lambda node: type(node).__name__, limit)
    try:
        root = handle._jc.node() if PYSPARK_LINE >= (4, 0) else handle._jc.expr()
        return _walk(root, _jvm_children, lambda node: node.getClass().getSimpleName(), limit)
    except Py4JError:  # pragma: no cover - an unknown JVM Column layout: bind it, which is always safe
        return limit + 1


def _connect_children(node: Any) -> list[Any]:
    return list(node.children) if hasattr(type(node), "children") else []


def _jvm_children(node: Any) -> list[Any]:
    if node.getClass().getSimpleName() == "ExpressionColumnNode":  # Spark 4: a Catalyst expression inside
        return [node.expression()]
    children = node.children()
    return [children.apply(i) for i in range(children.size())]


def _walk(root: Any, children: Callable[[Any], list[Any]], kind: Callable[[Any], str], limit: int) -> int:
    stack, count = [root], 0
    while stack and count <= limit:
        node = stack.pop()
        count += 1
        below = children(node)
        if not below and kind(node) not in LEAF_NODES:
            return limit + 1
        stack.extend(below)
    return count


def bound(source: Input, body: Callable[[Column], Column]) -> Column:
    """``body(column)``, with the input column evaluated once (see the module docs)."""
    if source.simple:
        return body(source.column)
    return F.transform(F.array(source.column), body).getItem(0)


def expression(source: Input, build: Callable[[ExpressionTarget[Any], Any], Any], *, text: bool = True) -> Column:
    """``build(target, input)`` as a Column: from SQL text in one call where the input is a
    column reference (and ``text``), else built as a Column around the input, bound once when
    it is large (see :mod:`spark_mlt.column.targets`)."""
    if text and source.sql is not None:
        return F.expr(build(SqlTarget(), source.sql))
    target = ColumnTarget()
    return bound(source, lambda column: build(target, column))
