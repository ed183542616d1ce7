"""Step points: the places between a job's commits where a run can stop, and another run can come in.

A job that makes several commits (a mirror's sync: vocabularies, value counts, quarantine, mirror,
erasure) calls [`reached`][spark_mlt.steps.reached] after each one, naming what has landed
(``"mirror committed"``). Each commit checks, where it lands, that its table still holds what the
run planned it from, so whatever another run does at such a point, the first one either carries
on or commits nothing more and says so; and a run that stops there for good leaves what the next
run finishes.

Nothing happens at a point unless a caller watches ([`watch_steps`][spark_mlt.steps.watch_steps]):
a test that runs a second run's steps at each point of the first (every interleaving of two runs),
or stops a run there (a kill at each point); an operator who traces where a run is. The watcher
is a context variable, so concurrent runs in other threads are not watched.

Example::

    >>> seen = []
    >>> with watch_steps(seen.append):
    ...     reached("vocabularies appended")
    >>> seen
    ['vocabularies appended']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["StepWatcher", "reached", "watch_steps"]

log = logging.getLogger("spark_mlt")

#: Called with the name of each step point a run reaches.
StepWatcher = Callable[[str], object]

_WATCHER: ContextVar[StepWatcher | None] = ContextVar("spark_mlt_step_watcher", default=None)


def reached(point: str) -> None:
    """Tells the watcher (if any) that the run has reached ``point``: everything before it has
    landed, nothing after it has."""
    log.debug("step: %s", point)
    watcher = _WATCHER.get()
    if watcher is not None:
        watcher(point)


@contextmanager
def watch_steps(watcher: StepWatcher | None) -> Iterator[None]:
    """Calls ``watcher`` at each step point the runs in this context reach (None: none, e.g. for
    a second run started from inside a watcher)."""
    token = _WATCHER.set(watcher)
    try:
        yield
    finally:
        _WATCHER.reset(token)
