"""A function's input column: its name for messages, and the SQL text that reads it once.

The engines build SQL text (`spark_mlt.column.sqltext`) over the SQL text of their input.
An input given by name has one: the quoted name, which Spark reads as ``F.col(name)`` does.
An input given as a Column has none (a Column's expression is not public API), so it is
bound once to a lambda variable, ``transform(array(input), spark_mlt_v -> body)[0]``, with
the body as SQL text over the variable: the input is evaluated once however often the body
reads it, and a composed plan (``mlt_decode(mlt_encode(id))``) is the sum of its parts, not
their product. Spark runs a lambda's body slower than the same expression in a projection of
its own (see `EnginePolicy`), so the fastest input is a
column name; a DataFrame-level step (the ML stages, the jobs) adds an expression as a column
of its own first.

Example::

    tokens = bind(as_input("user_id"), lambda id_sql: f"`+`({id_sql}, 1)")  # F.expr("`+`(`user_id`, 1)")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_mlt.column import sqltext as sql
from spark_mlt.errors import MLTTypeError

__all__ = ["Input", "as_input", "bind", "column_input", "quoted_name"]


@dataclass(frozen=True)
class Input:
    """A function's input column, its name for messages, and its SQL text when it is a column
    given by name (else None: it is bound once, see the module docs)."""

    column: Column
    name: str
    sql: str | None = None

    @property
    def by_name(self) -> bool:
        """Whether SQL text reads the input directly (no lambda binds it)."""
        return self.sql is not None


def as_input(col: str | Column) -> Input:
    """The input ``col``: a column name (read as ``F.col`` reads it) or a Column."""
    if isinstance(col, str):
        return Input(F.col(col), f"column {col!r}", quoted_name(col))
    if not isinstance(col, Column):
        raise MLTTypeError(f"col must be a column name or a Column, got {type(col).__name__}", parameter="col")
    return Input(col, "a column expression")


def column_input(name: str, shown: str) -> Input:
    """The column called ``name`` (one identifier: dots are part of it), named ``shown`` in
    messages: a column a DataFrame-level step added."""
    return Input(F.col(sql.identifier(name)), shown, sql.identifier(name))


def bind(source: Input, body: Callable[[str], str]) -> Column:
    """``body(input)`` (SQL text over the input's SQL text) as a Column, reading the input
    once: SQL text in one call for an input by name, else bound to a lambda variable."""
    if source.sql is not None:
        return F.expr(body(source.sql))
    variable = sql.LAMBDA_VARIABLE
    bound = F.call_function("transform", F.array(source.column), F.expr(f"{variable} -> {body(variable)}"))
    return bound.getItem(0)


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
    return ".".join(sql.identifier(piece) for piece in parts)
