"""A window: the source's changes after the version the mirror holds applied to it, in the
order that keeps every step re-runnable (vocabularies, value counts, quarantine, mirror, then
the erasure), in a clone of the session.

Example::

    report = apply_window(run, mirror=read_snapshot("lake/customers_mlt"), after=12, source=source)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt._classic import clone_session
from spark_mlt.batch.job.report import JobReport, phase
from spark_mlt.batch.mirror.counting import count_window, finish_erasure, window_counts, window_end
from spark_mlt.batch.mirror.run import KEEP_LEVEL, SyncRun, add_erased, quarantine_at, quarantine_table
from spark_mlt.batch.mirror.window import check_changes, last_rows, read_window
from spark_mlt.batch.write.tokenize import REASON_COLUMN, fit_job_codecs, job_tokens, key_ids, split_invalid
from spark_mlt.column.sqltext import identifier
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.steps import reached
from spark_mlt.storage import (
    AppTransaction,
    KeyedRows,
    TableSnapshot,
    WriteOptions,
    key_rows,
    replace_keys,
    token_write_options,
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
    report = JobReport(capabilities=run.report.capabilities)
    run = dataclasses.replace(run, spark=own or run.spark, report=report)
    if own is not None:
        _log_partitions(own)
    spark, options = run.spark, run.options
    quarantine = quarantine_table(run)
    # what a stopped run left, erased before this one reads a vocabulary or the counts (the
    # erasure rewrites them: counts read before it would plan the window's change on stale files)
    report.erased = finish_erasure(run, source, held=after, report=report)
    with phase(report, "count values"):
        counts = window_counts(run, mirror, quarantine, source, after=after)
    until = window_end(counts, counts_app=run.tables.counts_app, after=after, latest=source.version)
    feed, changes = _read_feed(run, source, after, until)
    keys: DataFrame | None = None
    tokens: DataFrame | None = None
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
        with phase(report, "check the changes"):
            held_side = _held_at(run, side, keys, after=after, values=values)
            deleted = check_changes(
                window,
                _checked_keys(keyed, held_side, values),
                source.path,
                skipped_rows=options.handle_invalid == "skip",
            )
        final = last_rows(window, names=source.schema.names)
        tokens, good, rejected = _tokens(run, final, mirror, counted=window.final_rows is not None)
        if counts:
            count_window(run, counts, changes, after=after, until=until, key_count=window.rows)
            reached("counts committed")
        written = _written(tokens, window.final_rows)
        if own is not None:  # from here on, the files read are the rewrite's
            _file_per_task(own)
        with phase(report, "commit"):
            _commit_window(run, good, rejected, keyed, side, after=after, until=until, written=written)
        _count(report, written, deleted)
        report.source_version = until
    finally:
        changes.unpersist()
        if keys is not None:
            keys.unpersist()
        if tokens is not None:
            tokens.unpersist()
    add_erased(report, finish_erasure(run, source, held=until, report=report))
    return report


def _read_feed(run: SyncRun, source: TableSnapshot, after: int, until: int) -> tuple[FeedRange, DataFrame]:
    """The change data feed of the source's versions ``after + 1 .. until``: checked first (a
    gap stops it, with the way forward), then its rows, kept for the window's steps."""
    spark, options = run.spark, run.options
    with phase(run.report, "read the feed"):
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


def _tokens(
    run: SyncRun, final: DataFrame, mirror: TableSnapshot, *, counted: bool
) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    """A window's resulting rows tokenized with the mirror's codecs (string keys through its
    vocabularies, new keys appended first): all of them, the valid ones, and the rejected ones
    (None without a quarantine column). Kept where a job will count them before the write
    (`_written`); not where the window ``counted`` its resulting rows and none is set aside, so
    that the rewrite's job tokenizes them (and fails on an invalid id, under ``error``)."""
    spark, options, report = run.spark, run.options, run.report
    with phase(report, "vocabularies"):
        with_ids, sources, _ = key_ids(spark, final, run.columns, run.output, options, codecs=mirror.codecs)
    fit_job_codecs(report, with_ids, run.columns, options, mirror, sources=sources)
    tokens = job_tokens(with_ids, report, options, sources)
    if REASON_COLUMN not in tokens.columns:
        if not counted:
            tokens = tokens.persist(KEEP_LEVEL)
        return tokens, tokens, None
    tokens = tokens.persist(KEEP_LEVEL)
    good, rejected = split_invalid(tokens, report.codecs)
    return tokens, good, rejected


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


def _commit_window(
    run: SyncRun,
    good: DataFrame,
    rejected: DataFrame | None,
    keyed: KeyedRows,
    side: KeyedRows | None,
    *,
    after: int,
    until: int,
    written: tuple[int, int],
) -> None:
    """A window's two commits: the quarantine's rows of its keys replaced (or its first rows),
    then the mirror's, each with its transaction at source version ``until``, each only while
    its table still records what the window was planned from (the mirror: source version
    ``after``; the quarantine: the version it held then), so that of two runs planned from one
    version, the second commits nothing. The quarantine commits with every window, rows or not:
    its version moves in step with the mirror's, so a run that lost the mirror to another one
    planned from the same version (which then committed no quarantine rows) cannot commit its
    own quarantine rows after. ``written``: the window's rows and, of them, the rejected ones
    (the mirror's rewrite writes the others sorted in one file when they fit)."""
    options, report, output = run.options, run.report, run.output
    backend = run.backend
    info = _window_info(run, after, until)
    side_path = run.tables.quarantine
    transaction = AppTransaction(run.tables.app, until, after=after)
    if options.handle_invalid == "quarantine" and rejected is not None:
        q_info = {**info, "spark_mlt.quarantine_of": output}
        q_app = run.tables.quarantine_app
        q_held = side.snapshot.transaction_version(q_app) if side is not None else None
        q_transaction = AppTransaction(q_app, until, after=NEVER if q_held is None else q_held)
        if side is not None:
            replace_keys(rejected, side, {}, transaction=q_transaction, commit_info=q_info)
        else:
            write_delta(
                rejected,
                side_path,
                {},
                mode="append",
                run_id=q_transaction,
                options=WriteOptions(commit_info=q_info, backend=backend),
                storage_options=options.storage_options,
            )
        reached("quarantine committed")
    if options.drop_ids:
        good = good.drop(*(c for c in report.codecs if c not in options.key))
    parquet = token_write_options(
        good, [f"{c}{TOKEN_SUFFIX}" for c in report.codecs], data_page_version=options.data_page_version
    )
    report.write = replace_keys(
        good,
        keyed,
        report.codecs,
        transaction=transaction,
        commit_info=info,
        parquet_options=parquet,
        max_file_rows=options.file_rows,
        row_count=written[0] - written[1],
    )
    reached("mirror committed")


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


def _written(tokens: DataFrame, final_rows: int | None) -> tuple[int, int]:
    """A window's tokenized rows and, of them, the rejected ones: its resulting rows
    (``final_rows``, where counted) when no row is set aside, else one job over the kept rows."""
    if final_rows is not None and REASON_COLUMN not in tokens.columns:
        return final_rows, 0
    counted = tokens.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count(F.col(REASON_COLUMN)).alias("rejected")
        if REASON_COLUMN in tokens.columns
        else F.lit(0).alias("rejected"),
    ).first()
    return (0, 0) if counted is None else (int(counted["rows"]), int(counted["rejected"]))


def _count(report: JobReport, written: tuple[int, int], deleted: int) -> None:
    """A window's rows (``written``: all and rejected) and deleted keys into its ``report``,
    unless its commit was there already."""
    rows, rejected = written
    if report.write is not None and not report.write.skipped:
        report.rows_out, report.rows_rejected, report.rows_deleted = rows - rejected, rejected, deleted
    report.rows_in = report.rows_out + report.rows_rejected
