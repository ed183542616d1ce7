"""Marks shared by the test modules.

``exhaustive`` marks the breadth beyond one case per code path: more codecs of a family the
kept cases already cover. ``make test-slow`` (CI, after ``make test``) runs them on the newest
line; ``make test`` and the older lines' compatibility runs (``tests/compat/run-line.sh``) leave
them out, so each still runs every path once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import pytest


def exhaustive_beyond(cases: Iterable[tuple[Any, ...]], kept: Collection[tuple[Any, ...]]) -> list[Any]:
    """``cases`` for ``pytest.mark.parametrize``, those not in ``kept`` marked ``exhaustive``.

    >>> [getattr(case, "marks", ()) and "exhaustive" or case for case in exhaustive_beyond([(2, 3), (5, 7)], {(2, 3)})]
    [(2, 3), 'exhaustive']
    """
    return [case if case in kept else pytest.param(*case, marks=pytest.mark.exhaustive) for case in cases]
