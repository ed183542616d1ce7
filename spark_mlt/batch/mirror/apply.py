"""A window: the source's changes after the version the mirror holds applied to it, in the
order that keeps every step re-runnable (vocabularies, value counts, quarantine, mirror, then
the erasure), in a clone of the session.

Example::

    report = apply_window(run, mirror=read_snapshot("lake/customers_mlt"), after=12, source=source)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from spark_mlt._classic import clone_session
from spark_mlt.batch.job.report import JobReport, added_counts, phase
from spark_mlt.batch.mirror.counting import count_window, finish_erasure, window_counts, window_end
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.run import KEEP_LEVEL, SyncRun, quarantine_at, quarantine_table
from spark_mlt.batch.mirror.window import check_changes, last_rows, read_window
from spark_mlt.batch.write.pipeline import Sized, stored_tokens, tokenize_frame
from spark_mlt.column.sqltext import identifier
from spark_mlt.steps import reached
from spark_mlt.storage import (
    AppTransaction,
    DeltaWriteResult,
    KeyedRows,
    TableSnapshot,
    WriteOptions,
    key_rows,
    replace_keys,
    write_delta,
)
from spark_mlt.storage.changes import FeedRange, check_feed, read_changes
from spark_mlt.storage.keys import held_keys
from spark_mlt.storage.properties import NEVER


def apply_window(run: SyncRun, *, mirror: TableSnapshot, after: int, source: TableSnapshot) -> JobReport:
    """The changes of the source's versions ``after + 1 ..`` its latest (or the end of a window
    whose value counts landed and whose mirror commit did not), applied to the mirror (see the
    module's notes), in a clone of the session (its settings stay off the user's); returns what
    it did (its ``source_version``: the version the mirror holds now)."""
    own = clone_session(run.spark)
    run = dataclasses.replace(run, spark=own or run.spark)
    if own is not None:
        _log_partitions(own)
    spark, options = run.spark, run.options
    quarantine = quarantine_table(run)
    # what a stopped run left, erased before this one reads a vocabulary or the counts (the
    # erasure rewrites them: counts read before it would plan the window's change on stale files)
    erased = finish_erasure(run, source, held=after)
    with phase(run.run_log.seconds, "count values"):
        counts = window_counts(run, mirror, quarantine, source, after=after)
    until = window_end(counts, counts_app=run.tables.counts_app, after=after, latest=source.version)
    feed, changes = _read_feed(run, source, after, until)
    keys: DataFrame | None = None
    try:
        # jar-free, the feed's rows are counted from its files' footers (no Spark job)
        window = read_window(changes, options.key, rows=run.backend.feed_rows(feed))
        keys = window.keys().persist(KEEP_LEVEL)
        # the rows of the files that can hold the keys
        values = window.values  # (built once: up to a million keys)
        keyed = key_rows(spark, mirror, keys, options.key, backend=run.backend, values=values, key_count=window.rows)
        read = keyed.candidate_rows
        if own is not None and window.rows <= SMALL_WINDOW_ROWS and read is not None and read <= SMALL_REWRITE_ROWS:
            _small_plans(own)
        side = (
            key_rows(spark, quarantine, keys, options.key, backend=run.backend, values=values, key_count=window.rows)
            if quarantine is not None
            else None
        )
        with phase(run.run_log.seconds, "check the changes"):
            held_side = _held_at(run, side, keys, after=after, values=values)
            deleted = check_changes(
                window,
                _checked_keys(keyed, held_side, values),
                source.path,
                skipped_rows=options.handle_invalid == "skip",
            )
        final = last_rows(window, names=source.schema.names)

        def count_values() -> None:
            if counts:
                count_window(run, counts, changes, after=after, until=until, key_count=window.rows)
                reached("counts committed")

        sink = WindowSink(run, keyed, side, after=after, until=until, counted=count_values, own=own)
        done = tokenize_frame(final, run.columns, sink, capabilities=run.capabilities, row_count=window.final_rows)
    finally:
        changes.unpersist()
        if keys is not None:
            keys.unpersist()
    return dataclasses.replace(
        done.report(),
        source_version=until,
        rows_deleted=0 if done.write.skipped else deleted,
        erased=added_counts(erased, finish_erasure(run, source, held=until)),
    )


def _read_feed(run: SyncRun, source: TableSnapshot, after: int, until: int) -> tuple[FeedRange, DataFrame]:
    """The change data feed of the source's versions ``after + 1 .. until``: checked first (a
    gap stops it, with the way forward), then its rows, kept for the window's steps."""
    spark, options = run.spark, run.options
    with phase(run.run_log.seconds, "read the feed"):
        feed = check_feed(
            source.path, after, until, storage_options=options.storage_options, spark_version=spark.version
        )
        changes = read_changes(
            spark, source.path, after, until, storage_options=options.storage_options, backend=run.backend, feed=feed
        ).persist(KEEP_LEVEL)
    return feed, changes


def _window_info(run: SyncRun, after: int, until: int) -> dict[str, str]:
    """The commit info of a window's commits."""
    return {
        "spark_mlt.job": "sync",
        "spark_mlt.input": run.input,
        "spark_mlt.source_version": str(until),
        "spark_mlt.source_versions": f"{after + 1}-{until}",
    }


#: A window of at most this many change rows, whose mirror files hold at most
#: ``SMALL_REWRITE_ROWS`` rows, is planned for small data: Spark's adaptive execution (which
#: starts a job per shuffle, each costing its fixed tens of milliseconds) and broadcast joins
#: off, and as many shuffle partitions as the session has cores. Larger windows keep Spark's
#: plans (the keys broadcast to the files' rows, which are then never shuffled). No window keeps
#: the files' rows: each step reads what it needs (the key check, the key columns only), which
#: costs less than caching them.
SMALL_WINDOW_ROWS = 1_000_000
SMALL_REWRITE_ROWS = 2_000_000


def _small_plans(spark: SparkSession) -> None:
    """Plans a window's session for small data (see ``SMALL_WINDOW_ROWS``): no broadcast joins
    either (each broadcast is a job of its own; a shuffle is a stage of the query's job)."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    spark.conf.set("spark.sql.shuffle.partitions", str(max(1, spark.sparkContext.defaultParallelism)))


def _log_partitions(spark: SparkSession) -> None:
    """Delta (with its jars) rebuilds a table version's state from its log in 50 tasks unless
    told otherwise, which costs a small table's window seconds on a few cores: a window's
    session uses as many as it has cores, 50 at the most."""
    cores = max(1, spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.databricks.delta.snapshotPartitions", str(min(50, cores)))


def _file_per_task(spark: SparkSession) -> None:
    """A window's session reads each file in a task of its own (Spark packs small files into a
    task, and splits large ones), so that the rewrite of a file it keeps whole writes one file
    of the same key range (`replace_keys`)."""
    most = str(1 << 40)  # 1 TiB
    spark.conf.set("spark.sql.files.maxPartitionBytes", most)
    spark.conf.set("spark.sql.files.openCostInBytes", most)


@dataclasses.dataclass(frozen=True)
class WindowSink:
    """A window's commits, as the tokenize pipeline makes them: after its vocabularies, the value
    counts (``counted``); then the quarantine's rows of its keys replaced (or its first rows), then
    the mirror's, each with its transaction at source version ``until``, each only while its table
    still records what the window was planned from (the mirror: source version ``after``; the
    quarantine: the version it held then), so that of two runs planned from one version, the
    second commits nothing. The quarantine commits with every window, rows or not: its version
    moves in step with the mirror's, so a run that lost the mirror to another one planned from the
    same version (which then committed no quarantine rows) cannot commit its own quarantine rows
    after. The mirror's rewrite is given the window's rows counted (it writes them sorted in one
    file when they fit); ``own``: the window's session, whose files are read a file per task
    from the first commit on."""

    run: SyncRun
    keyed: KeyedRows
    side: KeyedRows | None
    after: int
    until: int
    counted: Callable[[], None]
    own: SparkSession | None = None

    @property
    def output(self) -> str:
        return self.run.output

    @property
    def snapshot(self) -> TableSnapshot:
        return self.keyed.snapshot

    @property
    def options(self) -> SyncOptions:
        return self.run.options

    @property
    def counts_first(self) -> bool:
        return True

    def check(self, df: DataFrame, columns: Sequence[str]) -> None:
        return None  # the sync checked the source and the mirror before its first step (check_sync)

    def prepare(self) -> None:
        self.counted()

    def _rewriting(self) -> None:
        if self.own is not None:  # from here on, the files read are the rewrite's
            _file_per_task(self.own)

    def commit_rejected(self, rows: DataFrame) -> int:
        self._rewriting()
        run, side = self.run, self.side
        info = {**_window_info(run, self.after, self.until), "spark_mlt.quarantine_of": run.output}
        app = run.tables.quarantine_app
        held = side.snapshot.transaction_version(app) if side is not None else None
        transaction = AppTransaction(app, self.until, after=NEVER if held is None else held)
        if side is not None:
            return replace_keys(rows, side, {}, transaction=transaction, commit_info=info).rows
        written = write_delta(
            rows,
            run.tables.quarantine,
            {},
            mode="append",
            run_id=transaction,
            options=WriteOptions(commit_info=info, backend=run.backend),
            storage_options=run.options.storage_options,
        )
        return written.rows

    def commit_rows(
        self, rows: DataFrame, sized: Sized, *, vocabularies: Mapping[str, str], row_count: int | None
    ) -> DeltaWriteResult:
        self._rewriting()
        options = self.run.options
        stored, parquet = stored_tokens(rows, sized.codecs, options, options.key)
        write = replace_keys(
            stored,
            self.keyed,
            sized.codecs,
            transaction=AppTransaction(self.run.tables.app, self.until, after=self.after),
            commit_info=_window_info(self.run, self.after, self.until),
            parquet_options=parquet,
            max_file_rows=options.file_rows,
            row_count=row_count,
        )
        reached("mirror committed")
        return write


def _held_at(
    run: SyncRun, side: KeyedRows | None, keys: DataFrame, *, after: int, values: list[Any] | None = None
) -> KeyedRows | None:
    """The quarantine's rows of the window's keys as they were when the mirror reached version
    ``after`` (see `_quarantine_at`): what the window's changes are checked against."""
    if side is None:
        return None
    before = quarantine_at(run, side.snapshot, after=after)
    if before is None:
        return None
    if before is side.snapshot:
        return side
    return key_rows(run.spark, before, keys, side.key, backend=side.backend, values=values)


def _checked_keys(keyed: KeyedRows, quarantine: KeyedRows | None, values: list[Any] | None) -> DataFrame | pd.DataFrame:
    """What a window's key check counts: the keys the mirror and the quarantine held, read on
    the driver where both can be (`spark_mlt.storage.keys.held_keys`), else their rows in Spark."""
    k = [identifier(c) for c in keyed.key]
    mine = held_keys(keyed, values)
    if quarantine is None:
        return keyed.held.select(*k) if mine is None else mine
    theirs = held_keys(quarantine, values) if mine is not None else None
    if mine is not None and theirs is not None:
        return pd.concat([mine, theirs], ignore_index=True)
    return keyed.held.select(*k).unionByName(quarantine.held.select(*k))
