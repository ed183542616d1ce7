"""A tokenized mirror that follows its source: inserts, updates, deletes and erasure, each
source version exactly once.

``sync_table`` keeps the Delta table ``output`` equal to what ``tokenize_table`` would write
from the source Delta table at the version the mirror has reached (rows, tokens, quarantine;
string keys through the mirror's own vocabularies):

* **State.** The mirror records the source version it holds as a Delta application transaction,
  ``spark-mlt-sync:<the source table's id>`` (its ``metaData.id``), committed atomically with
  the rows; the quarantine records the same under ``...:quarantine``, and each string column's
  value counts under ``...:counts``. There is no other checkpoint: a sync killed between any
  two commits and run again finds what landed and does the rest (a commit the table holds is
  skipped; a window whose value counts landed is finished before the next, as counts add up).
* **First run or full refresh.** The source at its latest version is tokenized into the mirror
  in one commit (an overwrite when it exists), its quarantine likewise, after checking that the
  key is unique and never null; then the value counts are counted anew.
* **A window.** The change data feed of the versions after the one held, up to the latest
  ([`read_changes`][spark_mlt.storage.changes.read_changes]; checked first by
  [`check_feed`][spark_mlt.storage.changes.check_feed], which stops at a gap with the way
  forward), is reduced to each key's last version: its inserted or post-update row, or none (a
  delete). Every change of a key is checked against the mirror: a key with two resulting rows in
  one version, or an insert of a key that exists (or a delete of one that does not), is refused,
  naming the key and version. The resulting rows are tokenized with the mirror's codecs and
  ``handle_invalid``; then, in this order, each step idempotent: new string keys into the
  vocabularies, each string column's value counts changed by the window's change rows
  ([`spark_mlt.storage.counts`][spark_mlt.storage.counts]: how many source rows hold each
  value, so that no step reads the rows of other keys), the values
  the window's changes carried that no row holds any more (none counted) out of the vocabularies
  ([`erase_keys`][spark_mlt.storage.vocabulary.erase_keys]), the quarantine's rows of the keys
  replaced, the mirror's rows of the keys replaced
  ([`replace_keys`][spark_mlt.storage.replace.replace_keys]: delta-spark's ``MERGE``, or a
  jar-free rewrite of the files that hold the keys).
* **Triggers.** ``available-now`` syncs up to the source's latest version and returns (the
  scheduled form); an interval syncs, sleeps, and syncs again.

Erasure (docs/sync.md): a deleted row leaves the mirror and the quarantine in the window's
commits, and a string value no row holds any more leaves its vocabulary; the bytes stay in the
tables' older files until ``spark-mlt erase`` (vacuum, and purge of deletion vectors) removes them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt._classic import clone_session
from spark_mlt.batch.options import SyncOptions, TokenizeOptions, quarantine_path
from spark_mlt.batch.report import JobReport, counted_jobs, phase
from spark_mlt.batch.thresholds import check_rejected, warn_capacity
from spark_mlt.batch.tokenize import (
    REASON_COLUMN,
    check_names,
    check_output,
    fit_job_codecs,
    job_backend,
    job_tokens,
    key_ids,
    split_invalid,
    tokenize_frame,
    vocabulary_path,
)
from spark_mlt.batch.window import check_changes, last_rows, read_window
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_decode
from spark_mlt.column.layouts import token_layouts
from spark_mlt.column.sqltext import identifier
from spark_mlt.errors import ChangeFeedError, MLTError, SourceError, TableOptionError
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import (
    AppTransaction,
    TableSnapshot,
    WriteMode,
    WriteOptions,
    nullable_type,
    read_delta,
    read_snapshot,
    snapshot_for_write,
    table_exists,
    token_write_options,
    write_delta,
)
from spark_mlt.storage.catalog import Backend, resolve_location
from spark_mlt.storage.changes import FULL_REFRESH, check_feed, feed_rows, read_changes
from spark_mlt.storage.counts import change_counts, counts_path, value_counts, write_counts
from spark_mlt.storage.properties import NEVER
from spark_mlt.storage.reader import read_snapshot_rows
from spark_mlt.storage.replace import KeyedRows, key_rows, replace_keys
from spark_mlt.storage.vocabulary import erase_keys

__all__ = ["COUNTS_SUFFIX", "KEY_PROPERTY", "SYNC_APP_PREFIX", "check_sync", "sync_app_id", "sync_table"]

log = logging.getLogger("spark_mlt")

#: Application transaction ids of a mirror's syncs: this prefix and the source table's id.
SYNC_APP_PREFIX = "spark-mlt-sync:"
#: Where a window's tokenized rows are kept between its commits.
_KEEP_LEVEL = StorageLevel.MEMORY_AND_DISK


@dataclasses.dataclass(frozen=True)
class _Run:
    """One sync's arguments, as every step reads them."""

    spark: SparkSession
    input: str
    output: str
    columns: list[str]
    options: SyncOptions
    report: JobReport

    @property
    def backend(self) -> Backend:
        return job_backend(self.report.capabilities or Capabilities.of(self.spark))


def sync_app_id(source: TableSnapshot) -> str:
    """The application transaction id of a mirror of ``source``: one per source table (its
    ``metaData.id``), so a source replaced by another table is never taken for the old one."""
    return SYNC_APP_PREFIX + str(source.table_id)


def sync_table(spark: SparkSession, input: str, output: str, columns: Sequence[str], options: SyncOptions) -> JobReport:
    """Keep the Delta table ``output`` a tokenized mirror of the Delta table ``input`` (see the
    module's notes): created on the first run (or with ``options.full_refresh``), then each run
    applies the source's changes since the version the mirror holds, in one commit per window.

    Raises:
        ChangeFeedError: the source's change data feed cannot cover the next window (the
            message names the version; the way forward is ``full_refresh=True``).
        SourceError: a column or key column is not in the source, a key is null, or the key
            is not unique (naming the key and version).
        MLTError: the mirror exists but holds no sync of this source (made by another job, or
            the source was replaced): rebuild it with ``full_refresh=True``.

    Example::

        sync_table(spark, "/lake/customers", "/lake/customers_mlt", ["customer_id", "email"],
                   SyncOptions(key=("customer_id",), handle_invalid="quarantine"))
    """
    report = JobReport(capabilities=Capabilities.of(spark))
    interval = options.interval
    refresh = options.full_refresh
    run = _Run(spark, input, output, list(columns), options, report)
    while True:
        _sync_once(run, refresh=refresh)
        check_rejected(report, options)
        warn_capacity(report, output, "sync", storage_options=options.storage_options)
        if refresh and options.resize:  # the next windows keep the re-sized codecs
            run = dataclasses.replace(run, options=dataclasses.replace(options, full_refresh=False, resize=False))
        refresh = False
        if interval is None:
            return report
        time.sleep(interval)


def _source_snapshot(spark: SparkSession, input: str, options: SyncOptions) -> TableSnapshot:
    location = resolve_location(input, spark=spark) if options.input_format == "table" else input
    return read_snapshot(location, storage_options=options.storage_options)


def _sync_once(run: _Run, *, refresh: bool) -> None:
    spark, options, report = run.spark, run.options, run.report
    started = time.perf_counter()
    source = _source_snapshot(spark, run.input, options)
    app = sync_app_id(source)
    backend = job_backend(report.capabilities or Capabilities.of(spark))
    mirror = snapshot_for_write(
        run.output, "append", storage_options=options.storage_options, spark=spark, backend=backend
    )
    check_sync(run, source, mirror, refresh=refresh)
    held = None if mirror is None else mirror.transaction_version(app)
    if refresh or mirror is None or (held is None and mirror.created_empty):
        with counted_jobs(spark, report, "full refresh"):
            report.add(_refresh(run, source=source, mirror=mirror, app=app))
    elif held is None:
        raise MLTError(
            f"output: the mirror {run.output} holds no sync of the source {source.path} (table id "
            f"{source.table_id}): it was written by another job, or the source was replaced; "
            f"{FULL_REFRESH}",
            parameter="output",
        )
    elif held >= source.version:
        log.info("sync: %s holds source version %d, the latest: nothing to do", run.output, held)
        report.source_version = held
        return
    else:
        while True:  # a window whose counts landed before its mirror's commit is finished first
            with counted_jobs(spark, report, "window"):
                window = _apply_window(run, mirror=mirror, after=held, source=source, app=app)
            report.add(window)
            held = window.source_version
            if held is None or held >= source.version:
                break
            mirror = read_snapshot(run.output, storage_options=options.storage_options)
    log.info(
        "sync: %s now holds source version %s (%.1f s): %s",
        run.output,
        report.source_version,
        time.perf_counter() - started,
        report.summary(),
    )


#: The mirror's table property that records its source's primary key (``customer_id`` or
#: ``a,b``), checked on every later run.
KEY_PROPERTY = "mlt.sync.key"


def check_sync(run: _Run, source: TableSnapshot, mirror: TableSnapshot | None, *, refresh: bool) -> None:
    """Refuses, before anything is written, what the source and the mirror cannot take: columns
    or a key the source lacks (naming the near ones), a source without its change data feed,
    other id columns, key, codec, layout or shape than the mirror holds (see
    [`check_output`][spark_mlt.batch.tokenize.check_output]), and ``handle_invalid`` other than
    ``quarantine`` beside a quarantine the mirror has.

    Raises:
        UnknownColumnError: a column or key column is not in the source.
        ChangeFeedError: the source's change data feed is off.
        TableOptionError: an option the mirror cannot take (the message says what it holds).
    """
    options = run.options
    names = source.schema.names
    where = f"the source {source.path}"
    check_names(options.key, names, "key", where)
    check_output(
        mirror if not (refresh and options.resize) else None, names, run.columns, options, kept_ids=options.key
    )
    if not source.delta.config.change_data_feed:
        raise ChangeFeedError(
            f"input: {where} has no change data feed (delta.enableChangeDataFeed), which a mirror follows after its "
            f"first run; turn it on first: ALTER TABLE delta.`{source.path}` SET TBLPROPERTIES "
            "(delta.enableChangeDataFeed = true)",
            version=source.version,
        )
    if mirror is None:
        return
    key = mirror.properties.get(KEY_PROPERTY)
    if key is not None and key != ",".join(options.key):
        raise TableOptionError(
            f"key: the mirror {mirror.path} follows its source by the key [{key}]; got {list(options.key)}: a mirror "
            "keeps its key (sync into a new output for another key)",
            parameter="key",
        )
    quarantine = quarantine_path(run.output, options.quarantine)
    if options.handle_invalid != "quarantine" and table_exists(quarantine, storage_options=options.storage_options):
        raise TableOptionError(
            f"handle_invalid={options.handle_invalid!r}: the mirror {mirror.path} has a quarantine ({quarantine}) "
            "whose rows its windows keep in step with the source; pass handle_invalid='quarantine', or remove "
            "the mirror and its quarantine and sync anew",
            parameter="handle_invalid",
        )


def _refresh(run: _Run, *, source: TableSnapshot, mirror: TableSnapshot | None, app: str) -> JobReport:
    """The mirror rebuilt from the source at its version, in one commit (and its quarantine's);
    returns what it did."""
    report = JobReport(capabilities=run.report.capabilities)
    run = dataclasses.replace(run, report=report)
    spark, options = run.spark, run.options
    version = source.version
    if mirror is not None:
        _check_columns(mirror, source, run.columns)
    backend = job_backend(report.capabilities or Capabilities.of(spark))
    rows = read_delta(spark, source.path, version=version, storage_options=options.storage_options, backend=backend)
    rows = rows.persist(_KEEP_LEVEL)
    try:
        with phase(report, "check the key"):
            _check_unique(rows, options.key, f"version {version} of {source.path}")
            deleted = _deleted_by_refresh(run, rows, mirror) if mirror is not None else 0
        # before the mirror's commit: a run killed after it finds nothing left to do
        with phase(report, "erase"):
            erased = _erase_absent(spark, rows, run.output, _string_columns(source, run.columns), options)
        mode: WriteMode = "overwrite" if mirror is not None else "error"
        snapshot = snapshot_for_write(
            run.output, mode, storage_options=options.storage_options, spark=spark, backend=backend
        )
        refreshing = _tokenize_options(options, mode)
        info = {
            "spark_mlt.job": "sync",
            "spark_mlt.input": run.input,
            "spark_mlt.sync": "full refresh",
            "spark_mlt.source_version": str(version),
        }
        done = tokenize_frame(
            rows,
            run.output,
            run.columns,
            refreshing,
            snapshot=snapshot,
            report=JobReport(capabilities=report.capabilities),
            commit_info=info,
            transaction=AppTransaction(app, version),
            quarantine_mode="overwrite" if mirror is not None else "append",
            files=_mirror_files(options),
            kept_ids=options.key,
        )
        # after the mirror's commit: a sync stopped before these counts anew at its next window
        for column in _string_columns(source, run.columns):
            _write_counts(run, counts_path(run.output, column), value_counts(rows, column), app=app, version=version)
    finally:
        rows.unpersist()
    report.add(done)  # (its rows_in: rows out and rejected)
    report.source_version, report.erased = version, erased
    if done.write is not None and not done.write.skipped:
        report.rows_deleted = deleted
    return report


def _deleted_by_refresh(run: _Run, rows: DataFrame, mirror: TableSnapshot) -> int:
    """How many keys the mirror (and its quarantine) hold that no row of the source holds: the
    keys a full refresh deletes."""
    options = run.options
    key = [identifier(c) for c in options.key]
    held = read_snapshot_rows(run.spark, mirror, backend=run.backend).select(*key)
    quarantine = quarantine_path(run.output, options.quarantine)
    if options.handle_invalid == "quarantine" and table_exists(quarantine, storage_options=options.storage_options):
        side = read_snapshot(quarantine, storage_options=options.storage_options)
        held = held.unionByName(read_snapshot_rows(run.spark, side, backend=run.backend).select(*key))
    return held.distinct().join(rows.select(*key), list(options.key), "left_anti").count()


def _mirror_files(options: SyncOptions) -> WriteOptions:
    """The mirror's files: key ranges of at most ``file_rows`` rows each, so that a window's
    changed keys fall into few small files; a new mirror records its key."""
    return WriteOptions(
        cluster_by=options.key, max_file_rows=options.file_rows, properties={KEY_PROPERTY: ",".join(options.key)}
    )


def _check_columns(mirror: TableSnapshot, source: TableSnapshot, columns: Sequence[str]) -> None:
    """Refuses a full refresh whose source's columns (names, types) are no longer the mirror's:
    its overwrite keeps the mirror's schema, and would fail only after the vocabularies were
    changed. Checked before anything is written."""
    tokens = {f"{c}{TOKEN_SUFFIX}" for c in columns}
    held = [(f.name, nullable_type(f.type)) for f in mirror.schema if f.name not in tokens]
    left_out = {c for c in columns if c not in mirror.schema.names}  # drop_ids
    now = [(f.name, nullable_type(f.type)) for f in source.schema if f.name not in left_out]
    if dict(held) != dict(now):  # the order aside: a partitioned mirror may hold its partition columns last
        raise MLTError(
            f"output: the source {source.path}'s columns changed since the mirror {mirror.path} was written "
            f"({', '.join(f'{n} {t}' for n, t in held)} -> {', '.join(f'{n} {t}' for n, t in now)}); a full refresh "
            "rewrites the mirror's rows, not its schema: sync into a new output path (the vocabularies carry "
            "over with --vocabulary-dir), or remove the mirror and its quarantine first",
            parameter="output",
        )


def _tokenize_options(options: SyncOptions, mode: WriteMode) -> TokenizeOptions:
    """The batch job's options of a sync's full refresh: its own, writing with ``mode``."""
    fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(TokenizeOptions)}
    return TokenizeOptions(**{**fields, "mode": mode})


def _check_unique(rows: DataFrame, key: Sequence[str], where: str) -> None:
    """Refuses a null key or a key with two rows."""
    k = [identifier(c) for c in key]
    null = rows.where(" OR ".join(f"{c} IS NULL" for c in k)).limit(1).collect()
    if null:
        raise SourceError(
            f"key: {where} has a row whose key {list(key)} is null; a mirror needs a key for every row",
            parameter="key",
        )
    twice = rows.groupBy(*k).count().where("count > 1").limit(1).collect()
    if twice:
        raise SourceError(
            f"key: {where} has {twice[0]['count']} rows with the key {_key_text(twice[0], key)}; "
            f"{list(key)} must be unique (the source's primary key)",
            parameter="key",
        )


def _key_text(row: object, key: Sequence[str]) -> str:
    return ", ".join(f"{c}={row[c]!r}" for c in key)  # type: ignore[index]


def _apply_window(run: _Run, *, mirror: TableSnapshot, after: int, source: TableSnapshot, app: str) -> JobReport:
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
    quarantine = _quarantine(run)
    with phase(report, "count values"):
        counts = _window_counts(run, mirror, quarantine, source, app=app, after=after)
    until = _window_end(counts, app=app, after=after, latest=source.version)
    with phase(report, "read the feed"):
        feed = check_feed(
            source.path, after, until, storage_options=options.storage_options, spark_version=spark.version
        )
        changes = read_changes(
            spark, source.path, after, until, storage_options=options.storage_options, backend=run.backend, feed=feed
        ).persist(_KEEP_LEVEL)
    keys: DataFrame | None = None
    tokens: DataFrame | None = None
    try:
        # jar-free, the feed's rows are counted from its files' footers (no Spark job)
        window = read_window(changes, options.key, rows=feed_rows(feed) if run.backend == "delta-rs" else None)
        keys = window.keys().persist(_KEEP_LEVEL)
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
            held_side = _held_at(run, side, keys, app=app, after=after, values=values)
            deleted = check_changes(
                window,
                _checked_keys(keyed, held_side, values),
                source.path,
                skipped_rows=options.handle_invalid == "skip",
            )
        final = last_rows(window, names=source.schema.names)
        tokens, good, rejected = _tokens(run, final, mirror, counted=window.final_rows is not None)
        if counts:
            report.erased = _count_and_erase(
                run,
                counts,
                changes,
                app=app,
                after=after,
                until=until,
                key_count=window.rows,
            )
        written = _written(tokens, window.final_rows)
        if rejected is not None and not written[1] and _untouched(side):
            rejected = None  # no quarantined row, and none of its rows to replace: no commit
        info = {
            "spark_mlt.job": "sync",
            "spark_mlt.input": run.input,
            "spark_mlt.source_version": str(until),
            "spark_mlt.source_versions": f"{after + 1}-{until}",
        }
        if own is not None:  # from here on, the files read are the rewrite's
            _file_per_task(own)
        with phase(report, "commit"):
            _commit_window(
                run, good, rejected, keyed, side, app=app, after=after, until=until, info=info, written=written
            )
        _count(report, written, deleted)
        report.source_version = until
        return report
    finally:
        changes.unpersist()
        if keys is not None:
            keys.unpersist()
        if tokens is not None:
            tokens.unpersist()


def _quarantine(run: _Run) -> TableSnapshot | None:
    """The mirror's quarantine, when the sync quarantines and it exists."""
    options = run.options
    path = quarantine_path(run.output, options.quarantine)
    if options.handle_invalid != "quarantine" or not table_exists(path, storage_options=options.storage_options):
        return None
    return read_snapshot(path, storage_options=options.storage_options)


def _tokens(
    run: _Run, final: DataFrame, mirror: TableSnapshot, *, counted: bool
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
            tokens = tokens.persist(_KEEP_LEVEL)
        return tokens, tokens, None
    tokens = tokens.persist(_KEEP_LEVEL)
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


def _untouched(side: KeyedRows | None) -> bool:
    """Whether the quarantine holds no row a window could replace: there is none, or (jar-free)
    no file of it can hold one of the window's keys."""
    return side is None or (side.backend == "delta-rs" and not side.candidates)


def _commit_window(
    run: _Run,
    good: DataFrame,
    rejected: DataFrame | None,
    keyed: KeyedRows,
    side: KeyedRows | None,
    *,
    app: str,
    after: int,
    until: int,
    info: dict[str, str],
    written: tuple[int, int],
) -> None:
    """A window's two commits: the quarantine's rows of its keys replaced (or its first rows),
    then the mirror's, each with its transaction at source version ``until``, each only while
    its table still records what the window was planned from (the mirror: source version
    ``after``; the quarantine: the version it held then), so that of two runs planned from one
    version, the second commits nothing. ``written``: the window's rows and, of them, the
    rejected ones (the mirror's rewrite writes the others sorted in one file when they fit)."""
    options, report, output = run.options, run.report, run.output
    backend = run.backend
    side_path = quarantine_path(output, options.quarantine)
    transaction = AppTransaction(app, until, after=after)
    if options.handle_invalid == "quarantine" and rejected is not None:
        q_info = {**info, "spark_mlt.quarantine_of": output}
        q_app = f"{app}:quarantine"
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


def _held_at(
    run: _Run, side: KeyedRows | None, keys: DataFrame, *, app: str, after: int, values: list[Any] | None = None
) -> KeyedRows | None:
    """The quarantine's rows of the window's keys as they were when the mirror reached version
    ``after`` (see `_quarantine_at`): what the window's changes are checked against."""
    if side is None:
        return None
    before = _quarantine_at(run, side.snapshot, app=app, after=after)
    if before is None:
        return None
    if before is side.snapshot:
        return side
    return key_rows(run.spark, before, keys, side.key, backend=side.backend, values=values)


def _checked_keys(keyed: KeyedRows, quarantine: KeyedRows | None, values: list[Any] | None) -> DataFrame | pd.DataFrame:
    """What a window's key check counts: the keys the mirror and the quarantine held, read on
    the driver where both can be (`KeyedRows.held_keys`), else their rows in Spark."""
    k = [identifier(c) for c in keyed.key]
    mine = keyed.held_keys(values)
    if quarantine is None:
        return keyed.held.select(*k) if mine is None else mine
    theirs = quarantine.held_keys(values) if mine is not None else None
    if mine is not None and theirs is not None:
        return pd.concat([mine, theirs], ignore_index=True)
    return keyed.held.select(*k).unionByName(quarantine.held.select(*k))


def _quarantine_at(run: _Run, quarantine: TableSnapshot, *, app: str, after: int) -> TableSnapshot | None:
    """The quarantine's version that goes with the mirror's source version ``after``:
    ``quarantine`` itself, unless a sync stopped between the quarantine's commit of a window and
    the mirror's left it ahead; then its version before the first such commit (None: that
    commit created it)."""
    reached = quarantine.transaction_version(f"{app}:quarantine")
    if reached is None or reached <= after:
        return quarantine
    first = quarantine.version
    for commit in quarantine.commits():  # newest first: the commits ahead of the mirror, then older ones
        version = commit.metadata.get("spark_mlt.source_version")
        if commit.metadata.get("spark_mlt.quarantine_of") is None or version is None or int(version) <= after:
            break
        first = commit.version
    if first == 0:
        return None
    return read_snapshot(quarantine.path, version=first - 1, storage_options=run.options.storage_options)


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


#: What follows a sync's application transaction id in its mirror's value counts'.
COUNTS_SUFFIX = ":counts"


@dataclasses.dataclass(frozen=True)
class _Counts:
    """A string column's value counts (`spark_mlt.storage.counts`) as a window found them: how
    many rows of the source, at the version the mirror holds, hold each value."""

    column: str
    path: str
    vocabulary: str
    snapshot: TableSnapshot


def _string_columns(source: TableSnapshot, columns: Sequence[str]) -> list[str]:
    """The string columns among ``columns`` of the source (the ones with vocabularies)."""
    kinds = {f.name: f.type for f in source.schema}
    return [
        c
        for c in columns
        if pa.types.is_string(kinds[c])
        or pa.types.is_large_string(kinds[c])
        or getattr(pa.types, "is_string_view", lambda _: False)(kinds[c])
    ]


def _window_counts(
    run: _Run, mirror: TableSnapshot, quarantine: TableSnapshot | None, source: TableSnapshot, *, app: str, after: int
) -> list[_Counts]:
    """Each string column's value counts as the window finds them: counted first (`_counted_at`:
    the mirror and its quarantine read whole, once) where there are none or they count an older
    version than the mirror holds (a full refresh stopped before its counts)."""
    found = []
    for column in _string_columns(source, run.columns):
        path = counts_path(run.output, column)
        vocabulary = vocabulary_path(run.output, column, run.options)
        storage = run.options.storage_options
        snapshot = read_snapshot(path, storage_options=storage) if table_exists(path, storage_options=storage) else None
        counted = None if snapshot is None else snapshot.transaction_version(app + COUNTS_SUFFIX)
        if snapshot is None or counted is None or counted < after:
            log.info("sync: counting the values of %s in %s (once)", column, run.output)
            rows = _counted_at(run, column, vocabulary, tables=(mirror, quarantine), source=source, after=after)
            snapshot = _write_counts(run, path, rows, app=app, version=after)
        found.append(_Counts(column, path, vocabulary, snapshot))
    return found


def _counted_at(
    run: _Run,
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
    side = None if quarantine is None else _quarantine_at(run, quarantine, app=sync_app_id(source), after=after)
    held = [t for t in (mirror, side) if t is not None]
    keys = [_keys_of(run, read_snapshot_rows(run.spark, t, backend=run.backend), t, column, vocabulary) for t in held]
    return value_counts(_union(keys), "key")


def _write_counts(run: _Run, path: str, counts: DataFrame, *, app: str, version: int) -> TableSnapshot:
    """``counts`` as the value counts at ``path`` of the mirror at source version ``version``."""
    storage = run.options.storage_options
    write_counts(
        counts,
        path,
        transaction=AppTransaction(app + COUNTS_SUFFIX, version, exact=True),
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


def _window_end(counts: Sequence[_Counts], *, app: str, after: int, latest: int) -> int:
    """The source version a window ends at: the latest, unless a window's value counts landed and
    its mirror's commit did not (a sync stopped between them): that window, finished first, as
    its counts were changed once and for it alone."""
    ahead = [v for c in counts if (v := c.snapshot.transaction_version(app + COUNTS_SUFFIX)) is not None and v > after]
    return max(ahead) if ahead else latest


def _count_and_erase(
    run: _Run, counts: Sequence[_Counts], changes: DataFrame, *, app: str, after: int, until: int, key_count: int
) -> dict[str, int]:
    """A window's change of each string column's value counts, from its change rows alone (the
    values of its inserted and post-update rows in, of its deleted and pre-update rows out), as
    one commit each; then the values its change rows carried that no row holds any more (none
    counted) are erased from the vocabularies. Returns the values erased per column."""
    options = run.options
    erased: dict[str, int] = {}
    transaction = AppTransaction(app + COUNTS_SUFFIX, until, after=after, exact=True)
    info = {"spark_mlt.job": "sync", "spark_mlt.counts_of": run.output, "spark_mlt.source_version": str(until)}
    for count in counts:
        with phase(run.report, "count values"):
            done = change_counts(
                run.spark,
                count.snapshot,
                changes,
                count.column,
                transaction=transaction,
                commit_info=info,
                max_file_rows=options.file_rows,
                backend=run.backend,
                feed_rows=key_count,
            )
        if done.gone is not None:
            with phase(run.report, "erase"):
                erased[count.column] = erase_keys(
                    run.spark, count.vocabulary, done.gone, storage_options=options.storage_options
                )
    return erased


def _keys_of(run: _Run, rows: DataFrame, table: TableSnapshot, column: str, vocabulary: str) -> DataFrame:
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


def _erase_absent(
    spark: SparkSession, rows: DataFrame, output: str, columns: Sequence[str], options: SyncOptions
) -> dict[str, int]:
    """A full refresh's erasure: each string column's (``columns``) vocabulary keys that no
    source row holds."""
    erased: dict[str, int] = {}
    for column in columns:
        path = vocabulary_path(output, column, options)
        if not table_exists(path, storage_options=options.storage_options):
            continue
        vocabulary = read_delta(spark, path, storage_options=options.storage_options)
        present = rows.select(F.col(identifier(column)).cast("string").alias("key"))
        absent = vocabulary.where("key IS NOT NULL").select("key").join(present, "key", "left_anti")
        erased[column] = erase_keys(spark, path, absent, storage_options=options.storage_options)
    return erased
