"""Two runs of one mirror, the second run whole at each step point of the first; and a run
stopped for good at each point, then run again (for tests/batch/mirror/test_sync_overlap.py and
tests/batch/mirror/test_sync_recovery.py).

A lake (`Lake`) is a source Delta table (change data feed on; key ``k``, an int id ``cid``
whose values from 13**3 on go to the quarantine, a string key ``email`` through its vocabulary)
and its mirror, synced once. `CHANGES` land on the source in three steps: the first before the
first run starts, the second at the point where the other run comes in (so that it syncs more
versions than the first had planned), the third before the run that finishes. They update,
delete and insert rows, move ids into and out of the quarantine (one id into it in the first
run's versions and out again in the second's, which then sets no row aside), take an email out
of every row (its vocabulary erases it) and bring an erased one back (it gets a new id), so that
every commit of a run has something to do.

Whatever the two runs do, a last run of the mirror's schedule (a window; the re-size itself
again where a re-size stopped halfway) leaves the mirror, its quarantine, vocabulary and value
counts as a fresh tokenization of the source's latest version would have them
(`check_fresh`): each source row exactly once, with its tokens, and no vocabulary key that no
row holds. The runs read each other's tables through the same session (one Spark session per
test process).
"""

from __future__ import annotations

import os
import secrets
import shutil
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.errors import ConcurrentWriteError, IncompleteWriteError
from spark_mlt.steps import watch_steps
from spark_mlt.storage import read_codecs, read_delta

T = TypeVar("T")
Kind = Literal["window", "refresh", "resize"]
KINDS: tuple[Kind, ...] = ("window", "refresh", "resize")
COLUMNS = ["cid", "email"]
#: 13**3 ids: larger ones go to the quarantine
CAPACITY = 13**3
SYNC = SyncOptions(key=("k",), handle_invalid="quarantine", p=13, n=3)
#: What a run of each kind is given.
RUNS: dict[Kind, SyncOptions] = {
    "window": SYNC,
    "refresh": replace(SYNC, full_refresh=True),
    "resize": replace(SYNC, full_refresh=True, resize=True),
}
#: What a run that another run overtook may raise: it then commits nothing more, and says so.
REFUSALS = (ConcurrentWriteError, IncompleteWriteError)

Row = tuple[int, int, str]
FIRST: list[Row] = [(k, 100 + k, f"u{k % 4}@x") for k in range(12)]
FIRST[11] = (11, 111, "only@x")
FIRST[10] = (10, 5_000, "u2@x")  # in the quarantine from the start


def _change_1(table: DeltaTable, path: str) -> None:
    table.update({"cid": "9000"}, predicate="k = 1")  # into the quarantine
    table.update({"email": "'new2@x'"}, predicate="k = 2")  # a new email
    table.delete("k = 11")  # only@x: in no row any more, its vocabulary erases it
    _insert(path, [(20, 120, "u1@x")])


def _change_2(table: DeltaTable, path: str) -> None:
    table.update({"cid": "101"}, predicate="k = 1")  # out of the quarantine again, before a run put it there
    table.update({"email": "'only@x'"}, predicate="k = 3")  # the erased email comes back: a new id
    table.update({"email": "'u2@x'"}, predicate="k = 2")  # new2@x: in no row any more
    table.delete("k = 20")


def _change_3(table: DeltaTable, path: str) -> None:
    table.update({"cid": "50"}, predicate="k = 10")  # out of the quarantine
    _insert(path, [(21, 9_100, "new21@x"), (22, 122, "new2@x")])  # into the quarantine; new2@x comes back


#: The source's changes, in the order they land (see the module's notes).
CHANGES: tuple[Callable[[DeltaTable, str], None], ...] = (_change_1, _change_2, _change_3)


def _rows(rows: Sequence[Row]) -> pa.Table:
    k, cid, email = zip(*rows, strict=True)
    return pa.table(
        {"k": pa.array(k, pa.int64()), "cid": pa.array(cid, pa.int64()), "email": pa.array(email, pa.string())}
    )


def _insert(path: str, rows: Sequence[Row]) -> None:
    write_deltalake(path, _rows(rows), mode="append")


@dataclass(frozen=True)
class Lake:
    """A source and its mirror under ``root``, of the id ``columns`` (``cid`` alone: a mirror
    without value counts, whose runs have one commit fewer to check)."""

    root: Path
    columns: tuple[str, ...] = tuple(COLUMNS)

    @property
    def source(self) -> str:
        return str(self.root / "customers")

    @property
    def mirror(self) -> str:
        return str(self.root / "customers_mlt")

    @classmethod
    def synced(cls, spark: SparkSession, root: Path, columns: Sequence[str] = COLUMNS) -> Lake:
        """A new lake: the source's first rows, synced once."""
        lake = cls(root, tuple(columns))
        write_deltalake(lake.source, _rows(FIRST), configuration={"delta.enableChangeDataFeed": "true"})
        lake.run(spark, "window")
        return lake

    def copy(self, root: Path) -> Lake:
        """The lake copied under ``root`` (its tables' paths are relative to one another)."""
        shutil.copytree(self.root, root)
        return Lake(root, self.columns)

    def change(self, step: int) -> None:
        """Lands the source's change ``step`` (0, 1, 2)."""
        CHANGES[step](DeltaTable(self.source), self.source)

    def run(self, spark: SparkSession, kind: Kind) -> None:
        sync_table(spark, self.source, self.mirror, list(self.columns), RUNS[kind])


def sampled(places: Sequence[T], label: str) -> tuple[list[T], str]:
    """Every place, or with ``SPARK_MLT_STEP_POINTS=k`` k of them drawn by a seeded generator
    (``SPARK_MLT_STEP_SEED``, else a fresh seed each run, so that runs cover different points):
    the places and how they were chosen, for a failure's message (with the seed to run again)."""
    wanted = os.environ.get("SPARK_MLT_STEP_POINTS", "all")
    if wanted == "all" or int(wanted) >= len(places):
        return list(places), "every point"
    seed = int(os.environ.get("SPARK_MLT_STEP_SEED") or secrets.randbelow(2**32))
    rng = np.random.default_rng([seed, zlib.crc32(label.encode())])
    picked = sorted(rng.choice(len(places), size=int(wanted), replace=False))
    return [places[i] for i in picked], f"{wanted} of {len(places)} points, SPARK_MLT_STEP_SEED={seed}"


def points(spark: SparkSession, lake: Lake, kind: Kind) -> list[str]:
    """The step points a run of ``kind`` reaches after the source's first change, undisturbed
    (``lake`` is changed: pass a copy)."""
    lake.change(0)
    seen: list[str] = []
    with watch_steps(seen.append):
        lake.run(spark, kind)
    return seen


class Stopped(BaseException):
    """A run stopped for good at a step point: no handler of the library's catches it, as none
    catches a kill."""


@contextmanager
def at_point(where: int | str, action: Callable[[], None]) -> Iterator[list[str]]:
    """Watches the runs in the block: ``action`` runs at the ``where``-th step point they reach,
    or at the first one of that name (its own runs unwatched). Yields the points reached."""
    seen: list[str] = []

    def watcher(point: str) -> None:
        seen.append(point)
        first = isinstance(where, str) and point == where and seen.count(where) == 1
        if first or len(seen) - 1 == where:
            with watch_steps(None):
                action()

    with watch_steps(watcher):
        yield seen


def _tolerated(run: Callable[[], None]) -> str:
    """Runs ``run``: "done", or the refusal's class name (`REFUSALS`)."""
    try:
        run()
    except REFUSALS as error:
        return type(error).__name__
    return "done"


def interleave(spark: SparkSession, lake: Lake, first: Kind, second: Kind, where: int | str) -> tuple[str, str]:
    """The source's first change lands; a run of ``first`` starts; at its ``where``-th step point
    (or the first of that name) the second change lands and a run of ``second`` runs whole; then
    the first goes on. Returns how each ended ("done", or the refusal it raised)."""
    lake.change(0)
    outcome: dict[str, str] = {}

    def other() -> None:
        lake.change(1)
        outcome["second"] = _tolerated(lambda: lake.run(spark, second))

    with at_point(where, other) as seen:
        outcome["first"] = _tolerated(lambda: lake.run(spark, first))
    if "second" not in outcome:
        raise AssertionError(f"the run of {first} never reached its step point {where!r}: {seen}")
    return outcome["first"], outcome["second"]


def stop_and_rerun(spark: SparkSession, lake: Lake, kind: Kind, index: int) -> str:
    """The source's first change lands; a run of ``kind`` stops for good at its ``index``-th step
    point; the second change lands, the schedule's next window runs (a window may refuse a
    mirror that a re-size left halfway: `REFUSALS`), and the stopped run (its retry) runs again
    whole. Returns the point it stopped at."""
    lake.change(0)

    def stop() -> None:
        raise Stopped

    with at_point(index, stop) as seen:
        try:
            lake.run(spark, kind)
        except Stopped:
            pass
        else:
            raise AssertionError(f"the run of {kind} reached {len(seen)} step points, not {index + 1}: {seen}")
    lake.change(1)
    _tolerated(lambda: lake.run(spark, "window"))
    lake.run(spark, kind)
    return seen[index]


def finish(spark: SparkSession, lake: Lake) -> None:
    """The source's last change lands and the schedule's next run syncs it: a window, or the
    re-size again where one stopped halfway (the window says so), then the window."""
    lake.change(2)
    try:
        lake.run(spark, "window")
    except IncompleteWriteError:
        lake.run(spark, "resize")
        lake.run(spark, "window")


def _table(spark: SparkSession, path: str) -> list[dict[str, Any]]:
    """A table's rows, read through the session (the files deltalake 1.x rewrites hold Arrow types
    that pyarrow before 15 cannot read)."""
    return [row.asDict(recursive=True) for row in read_delta(spark, path).collect()]


def _ids(codec: Any, tokens: list[Any]) -> list[int]:
    """The ids of a token column's values (packed bigints or arrays), by the NumPy codec."""
    values = np.array(tokens, dtype=np.int64)
    if values.ndim == 1:  # packed
        values = codec.unpack(values)
    return [int(i) for i in codec.decode(values)]


def check_fresh(spark: SparkSession, lake: Lake) -> list[str]:
    """What differs between the lake's mirror (its quarantine, vocabulary and value counts) and a
    fresh tokenization of the source's latest version: each problem, in words (none: the same).
    The tables read through the session, the tokens decoded by the NumPy codec."""
    problems: list[str] = []
    source = _table(spark, lake.source)
    codecs = read_codecs(lake.mirror)
    mirror = _table(spark, lake.mirror)
    cids = _ids(codecs["cid"], [row["cid_mlt"] for row in mirror]) if mirror else []
    if "email" in lake.columns:  # the emails through their tokens and the vocabulary
        words = _vocabulary_problems(spark, lake, source, problems)
        ids = _ids(codecs["email"], [row["email_mlt"] for row in mirror]) if mirror else []
        mails = [words.get(i) for i in ids]
    else:
        mails = [row["email"] for row in mirror]
    held = sorted((row["k"], cid, mail) for row, cid, mail in zip(mirror, cids, mails, strict=True))
    plain = sorted((row["k"], row["cid"], row["email"]) for row in mirror)
    capacity = codecs["cid"].capacity  # CAPACITY, or a re-size's
    valid = sorted((row["k"], row["cid"], row["email"]) for row in source if row["cid"] < capacity)
    if held != valid:
        problems.append(f"the mirror's rows, decoded, {held} are not the source's valid rows {valid}")
    if plain != valid:
        problems.append(f"the mirror's id columns {plain} are not the source's valid rows {valid}")
    quarantine = sorted((row["k"], row["cid"], row["email"]) for row in _table(spark, f"{lake.mirror}_quarantine"))
    invalid = sorted((row["k"], row["cid"], row["email"]) for row in source if row["cid"] >= capacity)
    if quarantine != invalid:
        problems.append(f"the quarantine {quarantine} is not the source's invalid rows {invalid}")
    return problems


def _vocabulary_problems(
    spark: SparkSession, lake: Lake, source: list[dict[str, Any]], problems: list[str]
) -> dict[Any, Any]:
    """The email vocabulary's ids and keys, its problems (an id given twice, a key with two ids,
    keys that are not the source's emails) and its value counts' added to ``problems``."""
    vocabulary = _table(spark, f"{lake.mirror}_vocab/email")
    ids = Counter(row["id"] for row in vocabulary)
    if max(ids.values(), default=1) > 1:
        problems.append(f"an id given twice: {sorted(i for i, n in ids.items() if n > 1)}")
    keys = Counter(row["key"] for row in vocabulary if row["key"] is not None)
    if max(keys.values(), default=1) > 1:
        problems.append(f"a key with two ids: {sorted(k for k, n in keys.items() if n > 1)}")
    emails = {row["email"] for row in source}
    if set(keys) != emails:
        problems.append(f"vocabulary keys {sorted(set(keys))} are not the source's emails {sorted(emails)}")
    counts = {row["key"]: row["rows"] for row in _table(spark, f"{lake.mirror}_counts/email")}
    if counts != Counter(row["email"] for row in source):
        problems.append(f"the value counts {counts} are not the source's {dict(Counter(r['email'] for r in source))}")
    return {row["id"]: row["key"] for row in vocabulary}
