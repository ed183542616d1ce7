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
* **Every commit checks what it was planned from** (`spark_mlt.steps` names the points between
  them): it lands only while its table still records the version the run read, or commits
  nothing and says so (``ConcurrentWriteError``), whatever another run did in between. The
  quarantine commits with every window, rows or not, so its version moves in step with the
  mirror's.
* **First run or full refresh.** The source at its latest version is tokenized into the mirror
  in one commit (an overwrite when it exists), its quarantine likewise (first), after checking
  that the key is unique and never null; then the value counts are counted anew. A refresh is
  never skipped as already held (the mirror may be damaged, or want a re-size) and is planned
  from the version the mirror held. A jar-free re-size is two commits: the first leaves the
  mirror empty with its new codecs and recording no source version (``NEVER``), which windows
  refuse until the re-size, run again, completes it.
* **A window.** The change data feed of the versions after the one held, up to the latest
  ([`read_changes`][spark_mlt.storage.changes.read_changes]; checked first by
  [`check_feed`][spark_mlt.storage.changes.check_feed], which stops at a gap with the way
  forward), is reduced to each key's last version: its inserted or post-update row, or none (a
  delete). Every change of a key is checked against the mirror: a key with two resulting rows in
  one version, or an insert of a key that exists (or a delete of one that does not), is refused,
  naming the key and version. The resulting rows are tokenized with the mirror's codecs and
  ``handle_invalid``; then, in this order: new string keys into the vocabularies, each string
  column's value counts changed by the window's change rows
  ([`spark_mlt.storage.counts`][spark_mlt.storage.counts]: how many source rows hold each
  value, so that no step reads the rows of other keys; a value no row holds any more is kept
  at 0), the quarantine's rows of the keys replaced, the mirror's rows of the keys replaced
  ([`replace_keys`][spark_mlt.storage.replace.replace_keys]: delta-spark's ``MERGE``, or a
  jar-free rewrite of the files that hold the keys).
* **Erasure, after the mirror's commit.** The values the counts keep at 0 leave their
  vocabularies ([`erase_pending`][spark_mlt.storage.erasure.erase_pending]) once the mirror
  holds the version that left them in no row, never before (another run planned from an
  earlier version may still commit rows that hold them), and every run erases what a stopped
  one left before it reads a vocabulary.
* **Triggers.** ``available-now`` syncs up to the source's latest version and returns (the
  scheduled form); an interval syncs, sleeps, and syncs again.

The steps live beside this module: ``run`` (one run's arguments and the mirror's tables),
``refresh`` (the first run or a full refresh), ``apply`` (a window), ``counting`` (the value
counts and the erasure after a commit), all naming the mirror's tables through
[`Mirror`][spark_mlt.batch.mirror.tables.Mirror].

Erasure (docs/sync.md): a deleted row leaves the mirror and the quarantine in the window's
commits, and a string value no row holds any more leaves its vocabulary; the bytes stay in the
tables' older files until ``spark-mlt erase`` (vacuum, and purge of deletion vectors) removes them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from pyspark.sql import SparkSession

from spark_mlt.batch.job.report import JobReport, counted_jobs
from spark_mlt.batch.job.thresholds import check_rejected, warn_capacity
from spark_mlt.batch.mirror.apply import apply_window
from spark_mlt.batch.mirror.counting import finish_erasure
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.refresh import refresh_mirror
from spark_mlt.batch.mirror.run import SyncRun
from spark_mlt.batch.mirror.tables import KEY_PROPERTY
from spark_mlt.batch.write.checks import check_names, check_output
from spark_mlt.errors import ChangeFeedError, IncompleteWriteError, MLTError, TableOptionError
from spark_mlt.storage import TableSnapshot, read_snapshot, snapshot_for_write, table_exists
from spark_mlt.storage.catalog import resolve_location
from spark_mlt.storage.changes import FULL_REFRESH
from spark_mlt.storage.properties import NEVER

log = logging.getLogger("spark_mlt")


__all__ = ["check_sync", "sync_table"]


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
    interval = options.interval
    refresh = options.full_refresh
    run = SyncRun.start(spark, input=input, output=output, columns=list(columns), options=options)
    done = JobReport()  # the runs' reports so far; the run log's phases, warnings and jobs go with them
    while True:
        done = done.plus(_sync_once(run, refresh=refresh))
        report = done.logged(run.run_log)
        check_rejected(report, options)
        report = warn_capacity(report, output, "sync", storage_options=options.storage_options)
        if refresh and options.resize:  # the next windows keep the re-sized codecs
            run = dataclasses.replace(run, options=dataclasses.replace(options, full_refresh=False, resize=False))
        refresh = False
        if interval is None:
            return report
        time.sleep(interval)


def source_snapshot(spark: SparkSession, input: str, options: SyncOptions) -> TableSnapshot:
    """The source's newest snapshot: a path as given, a catalog name through the session."""
    location = resolve_location(input, spark=spark) if options.input_format == "table" else input
    return read_snapshot(location, storage_options=options.storage_options)


def _sync_once(run: SyncRun, *, refresh: bool) -> JobReport:
    """One run up to the source's latest version: a full refresh, or the windows after the
    version the mirror holds; returns what it did."""
    spark, options = run.spark, run.options
    started = time.perf_counter()
    source = source_snapshot(spark, run.input, options)
    run = dataclasses.replace(run, tables=run.tables.following(source))
    mirror = snapshot_for_write(
        run.output, "append", storage_options=options.storage_options, spark=spark, backend=run.backend
    )
    check_sync(run, source, mirror, refresh=refresh)
    held = None if mirror is None else mirror.transaction_version(run.tables.app)
    if refresh or mirror is None or (held is None and mirror.created_empty):
        with counted_jobs(spark, run.run_log, "full refresh"):
            done = refresh_mirror(run, source=source, mirror=mirror)
    elif held is None:
        raise MLTError(
            f"output: the mirror {run.output} holds no sync of the source {source.path} (table id "
            f"{source.table_id}): it was written by another job, or the source was replaced; "
            f"{FULL_REFRESH}",
            parameter="output",
        )
    elif held == NEVER:
        raise IncompleteWriteError(
            f"output: the mirror {run.output} holds no source version: a re-size of it stopped between its two "
            "commits and left it empty, with its new codecs; run it again to complete it (spark-mlt sync ... "
            "--full-refresh --resize, or full_refresh=True and resize=True): its windows refuse it until then",
            parameter="output",
        )
    elif held >= source.version:
        erased = finish_erasure(run, source, held=held)
        log.info("sync: %s holds source version %d, the latest: nothing to do", run.output, held)
        return JobReport(source_version=held, erased=erased)
    else:
        done = JobReport()
        while True:  # a window whose counts landed before its mirror's commit is finished first
            with counted_jobs(spark, run.run_log, "window"):
                window = apply_window(run, mirror=mirror, after=held, source=source)
            done = done.plus(window)
            held = window.source_version
            if held is None or held >= source.version:
                break
            mirror = read_snapshot(run.output, storage_options=options.storage_options)
    log.info(
        "sync: %s now holds source version %s (%.1f s): %s",
        run.output,
        done.source_version,
        time.perf_counter() - started,
        done.summary(),
    )
    return done


def check_sync(run: SyncRun, source: TableSnapshot, mirror: TableSnapshot | None, *, refresh: bool) -> None:
    """Refuses, before anything is written, what the source and the mirror cannot take: columns
    or a key the source lacks (naming the near ones), a source without its change data feed,
    other id columns, key, codec, layout or shape than the mirror holds (see
    [`check_output`][spark_mlt.batch.write.checks.check_output]), and ``handle_invalid`` other than
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
    quarantine = run.tables.quarantine
    if options.handle_invalid != "quarantine" and table_exists(quarantine, storage_options=options.storage_options):
        raise TableOptionError(
            f"handle_invalid={options.handle_invalid!r}: the mirror {mirror.path} has a quarantine ({quarantine}) "
            "whose rows its windows keep in step with the source; pass handle_invalid='quarantine', or remove "
            "the mirror and its quarantine and sync anew",
            parameter="handle_invalid",
        )
