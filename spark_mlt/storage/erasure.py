"""Values no row holds any more, kept in their value counts until their vocabulary has erased them.

A mirror's change of a string column's value counts (`spark_mlt.storage.counts`) keeps a value
whose count falls to 0 as a row of ``rows = 0``, committed with the counts before the mirror's
commit; a full refresh's counts give every vocabulary key no row holds such a row too. Once the
mirror holds that source version, [`erase_pending`][spark_mlt.storage.erasure.erase_pending]
erases those values from the vocabulary, then takes their rows out of the counts. The rows of
count 0 are the erasure's work list, kept in a table: a run stopped anywhere in between leaves
them to the next run, which erases them before anything reads the vocabulary.

Why after the mirror's commit, and never before it: until the mirror holds the version that
leaves a value in no row, another run planned from the version before (a full refresh, or a
window of fewer source versions) may still commit rows that hold it; erasing it first would leave
those rows with the id of an erased key. And why before anything reads the vocabulary: a run
that looked a pending value up would give its rows an id about to be erased.

Each step checks what it was planned from: the erasure commits only while the vocabulary still
records the version read before the counts were (`next_change`), the clean-up only while the
counts still record the mirror's version; so a plan made before another run's changes (a value
that came back and was given a new id) erases nothing.

Example::

    erase_pending(spark, "/lake/c_mlt_counts/email", "/lake/c_mlt_vocab/email",
                  app="spark-mlt-sync:...:counts", held=12, backend="delta-rs")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from spark_mlt.delta.stats import column_bounds, parse_stats
from spark_mlt.errors import ConcurrentWriteError
from spark_mlt.steps import reached
from spark_mlt.storage.backends import Backend, DeltaBackend, resolve_backend
from spark_mlt.storage.properties import AppTransaction
from spark_mlt.storage.replace import key_rows, replace_keys
from spark_mlt.storage.table import TableSnapshot, read_snapshot, table_exists
from spark_mlt.storage.vocabulary import erase_keys

__all__ = ["ERASE_ATTEMPTS", "Erasure", "erase_pending", "pending_files"]

#: How often an erasure whose commit lost to another run's is planned again (each time from the
#: vocabulary and the counts read anew: what the other run did is then seen).
ERASE_ATTEMPTS = 5


@dataclass(frozen=True)
class Erasure:
    """What [`erase_pending`][spark_mlt.storage.erasure.erase_pending] did: the keys it erased
    from the vocabulary, and whether the counts hold none of count 0 now (False: their counts
    record another version than the mirror's, so their rows of count 0 are not the mirror's yet)."""

    erased: int
    done: bool


def pending_files(counts: TableSnapshot) -> list[str]:
    """The files of the value counts ``counts`` that can hold a row of count 0 (their
    statistics' lowest ``rows`` is 0, or unknown): read on the driver from the log alone."""
    found = []
    for path, add in counts.delta.files.items():
        bounds = column_bounds(parse_stats(add.stats), ("rows",), LongType())
        if bounds.empty:
            continue
        if bounds.low is None or int(bounds.low) <= 0:
            found.append(path)
    return found


def erase_pending(
    spark: SparkSession,
    counts: str,
    vocabulary: str,
    *,
    app: str,
    held: int,
    backend: Backend | DeltaBackend,
    storage_options: Mapping[str, str] | None = None,
    commit_info: Mapping[str, str] | None = None,
) -> Erasure:
    """Erase from the vocabulary at ``vocabulary`` the values that the value counts at ``counts``
    hold with a count of 0, then take their rows out of the counts, when the counts record
    ``held`` as their writer ``app``'s version (the source version the mirror holds: see the
    module's notes); nothing while they record another. Reading nothing but the log when no
    count is 0.

    Raises:
        ConcurrentWriteError: other runs changed the vocabulary or the counts in each of
            `ERASE_ATTEMPTS` attempts.
    """
    erased, backend = 0, resolve_backend(spark, backend)
    for _ in range(ERASE_ATTEMPTS):
        # the vocabulary first, then the counts: a value that came back since the counts were
        # read was given its new id after this version, so this plan's erasure cannot land
        known = table_exists(vocabulary, storage_options=storage_options)
        words = read_snapshot(vocabulary, storage_options=storage_options) if known else None
        if not table_exists(counts, storage_options=storage_options):
            return Erasure(erased, True)
        table = read_snapshot(counts, storage_options=storage_options)
        if table.transaction_version(app) != held:
            return Erasure(erased, False)
        files = pending_files(table)
        if not files:
            return Erasure(erased, True)
        zero = _zero_keys(spark, table, files, backend).persist()
        try:
            if zero.isEmpty():
                return Erasure(erased, True)
            if words is not None and (gone := erase_keys(spark, vocabulary, zero, backend=backend, snapshot=words)):
                erased += gone
                reached("vocabulary erased")
            cleaned = key_rows(spark, table, zero, ["key"], backend=backend)
            replace_keys(
                cleaned.held.where("rows > 0"),
                cleaned,
                {},
                # the counts' version stays the mirror's: no table holds this clean-up in advance
                transaction=AppTransaction(app, held, after=held, exact=True, skippable=False),
                commit_info={**(commit_info or {}), "spark_mlt.operation": "erased"},
            )
            return Erasure(erased, True)
        except ConcurrentWriteError:
            continue
        finally:
            zero.unpersist()
    raise ConcurrentWriteError(
        f"the erasure of the values of {counts} that no row holds lost to other runs' changes "
        f"{ERASE_ATTEMPTS} times in a row; what it erased stays erased, the rest is left to the next run"
    )


def _zero_keys(spark: SparkSession, counts: TableSnapshot, files: list[str], backend: DeltaBackend) -> DataFrame:
    """The keys of ``counts`` whose count is 0 (a ``key`` column), read from ``files`` (or, by a
    backend that reads no single files, from the version, whose data skipping reads the same)."""
    return backend.read(spark, counts, files=files).where(F.col("rows") <= 0).select("key")
