"""A tiny evaluator of the SQL text the native engine's arithmetic is written in, on Python ints.

It reads the subset of Spark SQL that :mod:`spark_mlt.column.sqltext` writes for the
arithmetic (literals, column names, CAST, ``if``, operators as backquoted function calls, and
the functions the builders call) and compiles it to Python closures with Spark's semantics:
null in, null out; ``get()`` outside the array is null; a bigint that overflows becomes
:class:`Overflow`, which an ``if`` may discard (Spark evaluates only the branch it takes) and
which fails any other use. So every path can be checked on whole domains in milliseconds,
on the very text Spark parses.

Example::

    >>> compile_sql("`+`(x, 1)")({"x": 41})
    42
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Node", "Overflow", "compile_sql"]

Env = Mapping[str, Any]
Node = Callable[[Env], Any]
_Inner = Callable[[Env, dict[int, Any]], Any]

_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|-?\d+L?|[A-Za-z_][A-Za-z_0-9]*|<|>|\(|\)|,)")


class Overflow:
    """A bigint result that overflowed: ANSI mode would fail the query if it were used."""


def _bigint(value: int) -> int | Overflow:
    return value if -(2**63) <= value < 2**63 else Overflow()


def _strict(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` over evaluated arguments: null if any is null; an overflow used fails."""

    def run(*args: Any) -> Any:
        if any(isinstance(arg, Overflow) for arg in args):
            return Overflow()
        return None if any(arg is None for arg in args) else function(*args)

    return run


def _cmp(test: Callable[[int, int], bool]) -> Callable[..., Any]:
    return _strict(test)


def _and(a: Any, b: Any) -> Any:
    return False if False in (a, b) else None if None in (a, b) else True


def _or(a: Any, b: Any) -> Any:
    return True if True in (a, b) else None if None in (a, b) else False


def _get(table: Any, index: Any) -> Any:
    return None if table is None or index is None or not 0 <= index < len(table) else table[index]


def _try(function: Callable[[int, int], int]) -> Callable[..., Any]:
    def run(a: Any, b: Any) -> Any:
        if a is None or b is None or isinstance(a, Overflow) or isinstance(b, Overflow):
            return None  # Spark's try_ functions catch their arguments' errors too
            return None
        result = _bigint(function(a, b))
        return None if isinstance(result, Overflow) else result

    return run


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "+": _strict(lambda a, b: _bigint(a + b)),
    "*": _strict(lambda a, b: _bigint(a * b)),
    "%": _strict(lambda a, b: a % b),
    "div": _strict(lambda a, b: a // b),  # ids are non-negative here
    "&": _strict(lambda a, b: a & b),
    "|": _strict(lambda a, b: a | b),
    "^": _strict(lambda a, b: _bigint(a ^ b)),
    "=": _cmp(lambda a, b: a == b),
    "<": _cmp(lambda a, b: a < b),
    "<=": _cmp(lambda a, b: a <= b),
    ">": _cmp(lambda a, b: a > b),
    ">=": _cmp(lambda a, b: a >= b),
    "and": _and,
    "or": _or,
    "not": lambda a: None if a is None else not a,
    "isnull": lambda a: a is None,
    "get": _get,
    "try_add": _try(lambda a, b: a + b),
    "try_multiply": _try(lambda a, b: a * b),
    "bit_count": _strict(lambda a: bin(a & (2**64 - 1)).count("1")),
    "shiftleft": _strict(lambda a, s: _bigint(((a << s) + 2**63) % 2**64 - 2**63)),
    "shiftright": _strict(lambda a, s: a >> s),
    "shiftrightunsigned": _strict(lambda a, s: (a % 2**64) >> s),
    "least": _strict(min),
    "greatest": _strict(max),
    "array": lambda *items: tuple(items),
    "split": _strict(lambda text, sep: tuple(text.split(sep))),
    "coalesce": lambda *items: next((item for item in items if item is not None), None),
}


def _cast(value: Any, sql_type: str) -> Any:
    if isinstance(value, Overflow):
        return value
    if value is None:
        return None
    if sql_type == "ARRAY<BIGINT>":
        return tuple(int(item) for item in value)
    assert sql_type in ("INT", "BIGINT"), sql_type
    if sql_type == "INT":
        assert -(2**31) <= value < 2**31, value
    return int(value)


class _Parser:
    """Compiles to closures of (environment, cache); a subexpression that occurs several times
    (each token copies the word it reads) is one closure, evaluated once per environment."""

    def __init__(self, text: str) -> None:
        self.tokens = _TOKEN.findall(text)
        self.at = 0
        self.shared: dict[tuple[str, ...], _Inner] = {}

    def expression(self) -> _Inner:
        start = self.at
        node = self._expression()
        key = tuple(self.tokens[start : self.at])
        if key in self.shared:
            return self.shared[key]
        slot = len(self.shared)

        def cached(env: Env, cache: dict[int, Any]) -> Any:
            if slot not in cache:
                cache[slot] = node(env, cache)
            return cache[slot]

        self.shared[key] = cached
        return cached

    def next(self) -> str:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def expect(self, token: str) -> None:
        found = self.next()
        assert found.upper() == token, (found, token)

    def _expression(self) -> _Inner:
        token = self.next()
        literal = _literal(token)
        if literal is not None:
            value = literal[0]
            return lambda env, cache: value
        if token.upper() == "CAST":
            return self._cast()
        name = token[1:-1] if token.startswith("`") else token
        if self.at < len(self.tokens) and self.tokens[self.at] == "(":
            return self._call(name)
        return lambda env, cache: env[name]

    def _cast(self) -> _Inner:
        self.expect("(")
        inner = self.expression()
        self.expect("AS")
        sql_type = self.next().upper()
        while self.tokens[self.at] != ")":
            sql_type += self.next().upper()
        self.expect(")")
        return lambda env, cache: _cast(inner(env, cache), sql_type)

    def _call(self, name: str) -> _Inner:
        self.next()
        args: list[_Inner] = []
        while self.tokens[self.at] != ")":
            args.append(self.expression())
            if self.tokens[self.at] == ",":
                self.next()
        self.next()
        if name == "if":
            cond, then, otherwise = args
            return lambda env, cache: then(env, cache) if cond(env, cache) is True else otherwise(env, cache)
        function = FUNCTIONS[name]
        return lambda env, cache: function(*(arg(env, cache) for arg in args))


def _literal(token: str) -> tuple[Any] | None:
    """The value of a literal token (in a 1-tuple: it may be None), or None for another token."""
    if re.fullmatch(r"-?\d+L?", token):
        return (int(token.rstrip("L")),)
    if token.startswith("'"):
        return (token[1:-1].replace("\\'", "'").replace("\\\\", "\\"),)
    if token.upper() == "NULL":
        return (None,)
    if token in ("true", "false"):
        return (token == "true",)
    return None


def compile_sql(text: str) -> Node:
    """A function of an environment (column name -> value) that evaluates ``text``."""
    parser = _Parser(text)
    node = parser.expression()
    assert parser.at == len(parser.tokens), f"unread: {parser.tokens[parser.at :][:5]}"
    return lambda env: node(env, {})
