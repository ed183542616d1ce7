"""The words spark-mlt uses for its options, the same in every layer.

* token layout: ``layout`` in Python, the ML stages' Params, the CLI (``--layout``) and conf
  files; ``array``, ``struct``, ``vector`` or ``packed`` (``auto`` where it can be inferred).
* invalid ids or tokens: ``handle_invalid`` in Python and conf files, ``handleInvalid`` as a
  Spark ML Param, ``--handle-invalid`` on the CLI; ``error``, ``null``, ``skip``, ``quarantine``.
* engine: ``engine`` / ``--engine``; ``auto``, ``jvm``, ``native`` or ``udf``.

Token layouts: ``array`` (array<int> of n tokens), ``struct`` (fields t0..t{n-1}), ``vector``
(a dense ML vector of token / (p - 1)), ``packed`` (one bigint, token j in bits
``[j*b, (j+1)*b)``). ``auto`` is accepted where the layout can be read from a schema (the
decoder stage, the decode job) or chosen for storage (the jobs: an existing table's layout,
else packed when the tokens fit in 64 bits). The layout values, their subsets and their Spark
types live in [`spark_mlt.column.layouts`][spark_mlt.column.layouts], beside the code that reads and writes them.

Invalid ids (negative, at or above the codec's capacity, fractional decimals) and invalid token
vectors: ``error`` fails the query naming the value; ``null`` keeps the row with a null result;
``skip`` drops the row (as Spark ML's ``handleInvalid="skip"``); ``quarantine`` writes the row
with its reason to a side table (jobs only). A column function cannot drop rows, so it takes
``error`` and ``null``; the ML stages take ``error``, ``null`` and ``skip``; the jobs all four.
spark-mlt does not use Spark's ``keep`` (invalid values into an extra bucket): MLT has no spare
token vector for them.

Renaming an option after the first release: the old spelling keeps working for two minor
releases, marked with ``typing_extensions.deprecated`` (PEP 702) where it is a function or a
keyword, and listed in the changelog; it is removed on that schedule. Before the first release
names change outright.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar, get_args

from spark_mlt.errors import OptionError

__all__ = [
    "ENGINES",
    "ENGINE_NAMES",
    "HANDLE_INVALID",
    "ROW_HANDLING",
    "STAGE_HANDLING",
    "TOKEN_SUFFIX",
    "Engine",
    "EngineName",
    "HandleInvalid",
    "RowHandling",
    "StageHandling",
    "check_choice",
]

#: what a column function does with an invalid row (it cannot drop rows)
RowHandling = Literal["error", "null"]
#: what an ML stage does with one
StageHandling = Literal[RowHandling, "skip"]
#: what a job does with one
HandleInvalid = Literal[StageHandling, "quarantine"]
#: the engines (`spark_mlt.column.engine`)
EngineName = Literal["jvm", "native", "udf"]
#: an engine, or ``auto``: the one the policy picks
Engine = Literal["auto", EngineName]

HANDLE_INVALID: tuple[HandleInvalid, ...] = get_args(HandleInvalid)
ROW_HANDLING: tuple[RowHandling, ...] = get_args(RowHandling)
STAGE_HANDLING: tuple[StageHandling, ...] = get_args(StageHandling)
ENGINE_NAMES: tuple[EngineName, ...] = get_args(EngineName)
ENGINES: tuple[Engine, ...] = get_args(Engine)

#: The token column of an id column ``c`` in the jobs' tables is ``c + TOKEN_SUFFIX``.
TOKEN_SUFFIX = "_mlt"

T = TypeVar("T", bound=str)


def check_choice(parameter: str, value: object, allowed: Sequence[T]) -> T:
    """``value`` if it is one of ``allowed``, else an error naming ``parameter``.

    Example::

        >>> check_choice("engine", "udf", ENGINES)
        'udf'
    """
    for choice in allowed:
        if value == choice:
            return choice
    raise OptionError(f"{parameter} must be one of {', '.join(map(repr, allowed))}; got {value!r}", parameter=parameter)
