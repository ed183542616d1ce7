"""A mirror's value counts (`spark_mlt.storage.counts`) as its runs keep them: counted anew
where they are behind the mirror, changed by each window's change rows before the mirror's
commit, and the erasure of the values no row holds after it.

Example::

    counts = window_counts(run, mirror, quarantine, source, after=12)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt.batch.job.report import phase
from spark_mlt.batch.mirror.run import SyncRun, held_version, left_to_next_run, quarantine_at
from spark_mlt.column import mlt_decode
from spark_mlt.column.layouts import token_layouts
from spark_mlt.column.sqltext import identifier
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.steps import reached
from spark_mlt.storage import AppTransaction, TableSnapshot, WriteOptions, read_delta, read_snapshot, table_exists
from spark_mlt.storage.counts import change_counts, value_counts, with_absent, write_counts
from spark_mlt.storage.erasure import erase_pending
from spark_mlt.storage.properties import NEVER
from spark_mlt.storage.reader import read_snapshot_rows

log = logging.getLogger("spark_mlt")


def counted_version(run: SyncRun, column: str) -> int:
    """The source version the value counts of ``column`` record (``NEVER``: none, or no table)."""
    path, storage = run.tables.counts(column), run.options.storage_options
    if not table_exists(path, storage_options=storage):
        return NEVER
    return held_version(read_snapshot(path, storage_options=storage), run.tables.counts_app)


def vocabulary_keys(run: SyncRun, vocabulary: str) -> DataFrame | None:
    """The keys of the vocabulary at ``vocabulary`` (a ``key`` column), None when there is none."""
    storage = run.options.storage_options
    if not table_exists(vocabulary, storage_options=storage):
        return None
    return read_delta(run.spark, vocabulary, storage_options=storage, backend=run.backend).select("key")


def finish_erasure(run: SyncRun, source: TableSnapshot, *, held: int) -> dict[str, int]:
    """The values no source row holds at version ``held`` (the mirror's), which each string
    column's value counts keep with a count of 0, erased from its vocabulary
    ([`erase_pending`][spark_mlt.storage.erasure.erase_pending]); returns the keys erased per
    column. Nothing but the counts' log is read when no value is pending."""
    erased: dict[str, int] = {}
    info = {"spark_mlt.job": "sync", "spark_mlt.counts_of": run.output, "spark_mlt.source_version": str(held)}
    for column in string_columns(source, run.columns):

        def erase(column: str = column) -> None:
            done = erase_pending(
                run.spark,
                run.tables.counts(column),
                run.tables.vocabulary(column, run.options),
                app=run.tables.counts_app,
                held=held,
                backend=run.backend,
                storage_options=run.options.storage_options,
                commit_info=info,
            )
            if done.erased:
                erased[column] = done.erased

        with phase(run.run_log.seconds, "erase"):
            left_to_next_run(run.run_log, erase)
    reached("erasure done")
    return erased


@dataclasses.dataclass(frozen=True)
class _Counts:
    """A string column's value counts (`spark_mlt.storage.counts`) as a window found them: how
    many rows of the source, at the version the mirror holds, hold each value."""

    column: str
    path: str
    vocabulary: str
    snapshot: TableSnapshot


def string_columns(source: TableSnapshot, columns: Sequence[str]) -> list[str]:
    """The string columns among ``columns`` of the source (the ones with vocabularies)."""
    kinds = {f.name: f.type for f in source.schema}
    return [
        c
        for c in columns
        if pa.types.is_string(kinds[c])
        or pa.types.is_large_string(kinds[c])
        or getattr(pa.types, "is_string_view", lambda _: False)(kinds[c])
    ]


def window_counts(
    run: SyncRun, mirror: TableSnapshot, quarantine: TableSnapshot | None, source: TableSnapshot, *, after: int
) -> list[_Counts]:
    """Each string column's value counts as the window finds them: counted first (`_counted_at`:
    the mirror and its quarantine read whole, once) where there are none or they count an older
    version than the mirror holds (a full refresh stopped before its counts)."""
    found = []
    for column in string_columns(source, run.columns):
        path = run.tables.counts(column)
        vocabulary = run.tables.vocabulary(column, run.options)
        storage = run.options.storage_options
        snapshot = read_snapshot(path, storage_options=storage) if table_exists(path, storage_options=storage) else None
        counted = None if snapshot is None else snapshot.transaction_version(run.tables.counts_app)
        if snapshot is None or counted is None or counted < after:
            log.info("sync: counting the values of %s in %s (once)", column, run.output)
            rows = _counted_at(run, column, vocabulary, tables=(mirror, quarantine), source=source, after=after)
            rows = with_absent(rows, vocabulary_keys(run, vocabulary))  # the keys no row holds: to erase
            base = NEVER if counted is None else counted
            snapshot = write_mirror_counts(run, path, rows, version=after, after=base)
        found.append(_Counts(column, path, vocabulary, snapshot))
    return found


def _counted_at(
    run: SyncRun,
    column: str,
    vocabulary: str,
    *,
    tables: tuple[TableSnapshot, TableSnapshot | None],
    source: TableSnapshot,
    after: int,
) -> DataFrame:
    """The value counts of string key column ``column`` (its ``vocabulary``) over the source's
    rows at version ``after``: the rows of ``tables`` (the mirror and its quarantine: every
    source row, unless rows were skipped), or with ``handle_invalid="skip"`` the source's
    version itself."""
    if run.options.handle_invalid == "skip":
        rows = read_delta(
            run.spark, source.path, version=after, storage_options=run.options.storage_options, backend=run.backend
        )
        return value_counts(rows, column)
    mirror, quarantine = tables
    side = None if quarantine is None else quarantine_at(run, quarantine, after=after)
    held = [t for t in (mirror, side) if t is not None]
    keys = [_keys_of(run, read_snapshot_rows(run.spark, t, backend=run.backend), t, column, vocabulary) for t in held]
    return value_counts(_union(keys), "key")


def recount(run: SyncRun, rows: DataFrame, counted: Mapping[str, int], *, version: int) -> None:
    """Each string column's value counts of ``rows`` (the source at ``version``, which a full
    refresh just committed), planned from the version they counted (``counted``), the keys of the
    vocabulary no row holds kept at 0 (to erase); after the mirror's commit, so a sync stopped
    before them counts anew at its next window."""
    for column, base in counted.items():
        vocabulary = run.tables.vocabulary(column, run.options)
        counts = with_absent(value_counts(rows, column), vocabulary_keys(run, vocabulary))
        path = run.tables.counts(column)
        write = functools.partial(write_mirror_counts, run, path, counts, version=version, after=base)
        left_to_next_run(run.run_log, write)
    reached("counts committed")


def write_mirror_counts(run: SyncRun, path: str, counts: DataFrame, *, version: int, after: int) -> TableSnapshot:
    """``counts`` as the value counts at ``path`` of the mirror at source version ``version``,
    planned from the counts' version ``after`` (``NEVER``: none): skipped where the counts count
    that very version already, refused where another run moved them meanwhile."""
    storage = run.options.storage_options
    write_counts(
        counts,
        path,
        transaction=AppTransaction(run.tables.counts_app, version, after=after, exact=True),
        commit_info={
            "spark_mlt.job": "sync",
            "spark_mlt.counts_of": run.output,
            "spark_mlt.source_version": str(version),
        },
        max_file_rows=run.options.file_rows,
        storage_options=storage,
        backend=run.backend,
    )
    return read_snapshot(path, storage_options=storage)


def window_end(counts: Sequence[_Counts], *, counts_app: str, after: int, latest: int) -> int:
    """The source version a window ends at: the latest, unless a window's value counts landed and
    its mirror's commit did not (a sync stopped between them): that window, finished first, as
    its counts were changed once and for it alone."""
    ahead = [v for c in counts if (v := c.snapshot.transaction_version(counts_app)) is not None and v > after]
    return max(ahead) if ahead else latest


def count_window(
    run: SyncRun, counts: Sequence[_Counts], changes: DataFrame, *, after: int, until: int, key_count: int
) -> None:
    """A window's change of each string column's value counts, from its change rows alone (the
    values of its inserted and post-update rows in, of its deleted and pre-update rows out), as
    one commit each, before the mirror's: a value no row holds any more stays with a count of 0
    until the erasure after the mirror's commit (`_finish_erasure`)."""
    options = run.options
    transaction = AppTransaction(run.tables.counts_app, until, after=after, exact=True)
    info = {"spark_mlt.job": "sync", "spark_mlt.counts_of": run.output, "spark_mlt.source_version": str(until)}
    for count in counts:
        with phase(run.run_log.seconds, "count values"):
            change_counts(
                run.spark,
                count.snapshot,
                changes,
                count.column,
                transaction=transaction,
                options=WriteOptions(commit_info=info, max_file_rows=options.file_rows, backend=run.backend),
                feed_rows=key_count,
            )


def _keys_of(run: SyncRun, rows: DataFrame, table: TableSnapshot, column: str, vocabulary: str) -> DataFrame:
    """The values (as ``key``) of string key column ``column`` in ``rows`` of ``table``: the
    column itself, or where the table leaves it out (``drop_ids``) its tokens decoded to ids and
    looked up in its ``vocabulary``."""
    if column in rows.columns:
        return rows.select(F.col(identifier(column)).alias("key"))
    codec = table.codecs[column]
    layout = token_layouts(from_arrow_schema(table.schema), {column: codec})[column]
    ids = rows.select(mlt_decode(f"{column}{TOKEN_SUFFIX}", codec, layout=layout).alias("__id"))
    known = read_delta(run.spark, vocabulary, storage_options=run.options.storage_options, backend=run.backend)
    return ids.join(known.select(F.col("id").alias("__id"), "key"), "__id").select("key")


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out
