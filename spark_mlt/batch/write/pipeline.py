"""One tokenize pipeline for every job that commits tokens, and the sinks it commits to.

The steps, the same for a batch job's append or overwrite, a streaming batch, a mirror's full
refresh and a mirror's window: the sink checks the frame against its table as the job found it;
string keys get their vocabulary ids (new keys appended first); codecs are kept or sized; the
tokens are computed once; rows with an invalid id (``skip``, ``quarantine``) are counted or
committed to the quarantine, always before the valid rows; then the valid rows commit, once,
to the sink. [`tokenize_frame`][spark_mlt.batch.write.pipeline.tokenize_frame] runs them and
returns what it committed ([`Tokenized`][spark_mlt.batch.write.pipeline.Tokenized]); a sink
([`TokenSink`][spark_mlt.batch.write.pipeline.TokenSink]) says where the rows go:
[`TableSink`][spark_mlt.batch.write.pipeline.TableSink] appends to or overwrites a table, a
mirror's window replaces its keys' rows (``spark_mlt.batch.mirror.apply.WindowSink``).

Example::

    done = tokenize_frame(df, ["customer_id"], TableSink("out/orders_mlt", None, TokenizeOptions(mode="append")))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt.batch.job.options import JobOptions, TokenizingOptions, quarantine_path, sizing_of
from spark_mlt.batch.job.report import JobReport, phase
from spark_mlt.batch.write.checks import check_id_types, check_output
from spark_mlt.batch.write.frames import REASON_COLUMN, key_ids, resolve_layouts, split_invalid, tokenize_dataframe
from spark_mlt.batch.write.options import BatchOptions, TokenizeOptions
from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column import fit_codecs
from spark_mlt.column.layouts import Layout, token_layouts
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.steps import reached
from spark_mlt.storage import (
    AppTransaction,
    DeltaWriteResult,
    TableSnapshot,
    WriteMode,
    WriteOptions,
    token_write_options,
    write_delta,
)
from spark_mlt.storage.backends import DeltaBackend, resolve_backend
from spark_mlt.storage.properties import id_type_properties

__all__ = [
    "QUARANTINE_APP_SUFFIX",
    "QuarantineWrite",
    "Sized",
    "TableSink",
    "TokenSink",
    "Tokenized",
    "counts_with_the_write",
    "fit_job_codecs",
    "job_backend",
    "job_tokens",
    "stored_tokens",
    "tokenize_frame",
    "write_tokens",
]

#: Where the tokens are kept while two jobs read them (the rejected rows' and the valid rows'
#: commits, or a count before a commit; measured in ``make bench-delta``).
SET_ASIDE_LEVEL = StorageLevel.MEMORY_AND_DISK

#: What follows the application id of a job's data in the id its quarantine's commits record.
QUARANTINE_APP_SUFFIX = ":quarantine"


def job_backend(capabilities: Capabilities) -> DeltaBackend:
    """The Delta backend a job writes with in a session with ``capabilities``: delta-spark where
    it has Delta's jars, else the jar-free path."""
    return resolve_backend(capabilities)


@dataclass(frozen=True)
class Sized:
    """The codec of each id column and the layout of its token column, as a job tokenizes them."""

    codecs: dict[str, MLTCodec]
    layouts: dict[str, Layout]


def fit_job_codecs(
    df: DataFrame,
    columns: Sequence[str],
    options: JobOptions,
    snapshot: TableSnapshot | None,
    *,
    sources: Mapping[str, str] | None = None,
    seconds: dict[str, float] | None = None,
) -> Sized:
    """The codecs of the existing table ``snapshot`` unless the options ``resize`` it, else sized
    from ``df``'s column or its ``sources[column]`` with the options' ``headroom``, and each token
    column's layout ([`resolve_layouts`][spark_mlt.batch.write.frames.resolve_layouts]); the time
    it took goes to ``seconds`` (``size codecs``).

    Example::

        sized = fit_job_codecs(ratings, ["userId"], TokenizeOptions(), None)
    """
    kept = snapshot is not None and not sizing_of(options).resize
    codecs = snapshot.codecs if kept and snapshot is not None else {}
    layouts = token_layouts(from_arrow_schema(snapshot.schema), codecs) if kept and snapshot is not None else {}
    source = {c: (sources or {}).get(c, c) for c in columns}
    with phase({} if seconds is None else seconds, "size codecs"):
        sized = fit_codecs(
            df,
            list(source.values()),
            p=options.p,
            n=options.n,
            seed=options.seed,
            existing={source[c]: codec for c, codec in codecs.items() if c in source},
            headroom=sizing_of(options).headroom,
        )
        by_column = {c: sized[source[c]] for c in columns}
        return Sized(by_column, dict(resolve_layouts(by_column, options.layout, layouts)))


def job_tokens(
    df: DataFrame, sized: Sized, options: TokenizingOptions, sources: Mapping[str, str], capabilities: Capabilities
) -> DataFrame:
    """``df``'s id columns tokenized as a job tokenizes them: with ``sized``'s codecs and layouts
    and the job's engine and ``handle_invalid``, a string key from its vocabulary id column
    (``sources``: column -> id column, dropped after).

    Example::

        tokens = job_tokens(with_ids, sized, options, sources, Capabilities.of(spark))
    """
    return tokenize_dataframe(
        df,
        sized.codecs,
        handle_invalid=options.handle_invalid,
        engine=options.engine,
        sources=sources,
        layouts=sized.layouts,
        capabilities=capabilities,
    ).drop(*sources.values())


def stored_tokens(
    rows: DataFrame, codecs: Mapping[str, MLTCodec], options: JobOptions, kept_ids: Sequence[str] = ()
) -> tuple[DataFrame, dict[str, str]]:
    """The rows as a table stores them: without the raw id columns under ``drop_ids`` (but
    ``kept_ids``), and the Parquet writer's options of their token columns."""
    if options.drop_ids:
        rows = rows.drop(*(c for c in codecs if c not in kept_ids))
    tokens = [f"{c}{TOKEN_SUFFIX}" for c in codecs]
    return rows, token_write_options(rows, tokens, data_page_version=options.data_page_version)


def write_tokens(
    rows: DataFrame,
    output: str,
    codecs: Mapping[str, MLTCodec],
    options: BatchOptions,
    *,
    snapshot: TableSnapshot | None,
    write: WriteOptions,
    transaction: AppTransaction | None = None,
    kept_ids: Sequence[str] = (),
) -> DeltaWriteResult:
    """Write tokenized ``rows`` to the Delta table ``output`` (as the job found it: ``snapshot``)
    with ``codecs``, the options' mode and partitioning, token columns in the options' Parquet
    data pages, idempotent by the options' run id or ``transaction``; ``write`` gives the
    commit's metadata, files and a new table's properties; with ``drop_ids`` the raw id columns
    are left out, but ``kept_ids``. A new table records each id column's type
    (``mlt.type.<column>``), which decoding gives its ids back in.

    Example::

        write_tokens(tokens, "out/ratings_mlt", sized.codecs, options, snapshot=None, write=WriteOptions())
    """
    types = id_type_properties({c: rows.schema[c].dataType.simpleString() for c in codecs})
    stored, parquet = stored_tokens(rows, codecs, options, kept_ids)
    return write_delta(
        stored,
        output,
        codecs,
        mode=options.mode,
        run_id=options.run_id if transaction is None else transaction,
        snapshot=snapshot,
        options=dataclasses.replace(
            write,
            properties={**types, **write.properties},
            partition_by=options.partition_by,
            parquet_options=parquet,
            resize=sizing_of(options).resize,
        ),
        storage_options=options.storage_options,
    )


@dataclass(frozen=True)
class Tokenized:
    """What a run of the pipeline committed: the codecs and layouts it tokenized with, the
    rows' commit, how many valid rows it committed and how many it rejected (skipped or
    quarantined), and the seconds of each step."""

    codecs: dict[str, MLTCodec]
    layouts: dict[str, Layout]
    write: DeltaWriteResult
    rows_out: int
    rows_rejected: int
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def rows_in(self) -> int:
        """The rows tokenized: the valid ones and the rejected ones."""
        return self.rows_out + self.rows_rejected

    def report(self) -> JobReport:
        """This run as a job's report."""
        return JobReport(
            rows_in=self.rows_in,
            rows_out=self.rows_out,
            rows_rejected=self.rows_rejected,
            write=self.write,
            codecs=dict(self.codecs),
            layouts=dict(self.layouts),
            seconds=dict(self.seconds),
        )


class TokenSink(Protocol):
    """Where the pipeline's rows commit, and the table they commit to as the job found it.

    A sink commits the rejected rows (``commit_rejected``, only with ``quarantine``) before the
    valid ones (``commit_rows``); the pipeline calls ``prepare`` after the vocabularies and
    before any of the sink's commits; a sink that ``counts_first`` gets the count of the rows
    it commits before it commits them.
    """

    @property
    def output(self) -> str:
        """The table the rows commit to: the vocabularies of its string keys are beside it."""

    @property
    def snapshot(self) -> TableSnapshot | None:
        """The table as the job found it (None: there is none yet): its codecs are kept."""

    @property
    def options(self) -> TokenizingOptions:
        """How the rows are tokenized."""

    @property
    def counts_first(self) -> bool:
        """Whether ``commit_rows`` is given the count of its rows (a window sizes its rewrite by it)."""

    def check(self, df: DataFrame, columns: Sequence[str]) -> None:
        """Refuses, before anything is written, a frame the table cannot take."""

    def prepare(self) -> None:
        """What lands after the vocabularies and before the sink's commits."""

    def commit_rejected(self, rows: DataFrame) -> int:
        """Commits the rejected rows to the quarantine; returns how many it committed."""

    def commit_rows(
        self, rows: DataFrame, sized: Sized, *, vocabularies: Mapping[str, str], row_count: int | None
    ) -> DeltaWriteResult:
        """Commits the valid rows (``row_count`` of them, where counted); ``vocabularies``: the
        table properties naming the string keys' vocabularies."""


@dataclass(frozen=True)
class QuarantineWrite:
    """How a job's rejected rows go to its quarantine: ``mode``, and the ``transaction`` that
    records them (None: the data's writer with ``:quarantine``, or the run id). A mirror's full
    refresh overwrites its quarantine, planned from the version it read."""

    mode: WriteMode = "append"
    transaction: AppTransaction | None = None


@dataclass(frozen=True)
class TableSink:
    """A table's append or overwrite, as the options' mode says: the batch job's, a streaming
    batch's, a mirror's full refresh.

    Attributes:
        output: the table.
        snapshot: the table as found (None: there is none yet).
        options: the job's options (mode, run id, layout, partitioning, quarantine).
        write: the commit's metadata and backend, a new table's properties, how its files are
            laid out (a mirror's key ranges: ``cluster_by``, ``max_file_rows``).
        transaction: the commit's application transaction (a streaming batch's, a refresh's);
            None: the options' run id.
        quarantine: how the rejected rows go to the quarantine (a mirror's full refresh
            overwrites it).
        kept_ids: id columns written even with ``drop_ids`` (a mirror's key).
    """

    output: str
    snapshot: TableSnapshot | None
    options: TokenizeOptions
    write: WriteOptions = field(default_factory=WriteOptions)
    transaction: AppTransaction | None = None
    quarantine: QuarantineWrite = field(default_factory=QuarantineWrite)
    kept_ids: Sequence[str] = ()

    @property
    def counts_first(self) -> bool:
        return False

    def check(self, df: DataFrame, columns: Sequence[str]) -> None:
        check_output(self.snapshot, df.columns, columns, self.options, kept_ids=self.kept_ids)
        check_id_types(self.snapshot, df, columns, self.options)

    def prepare(self) -> None:
        return None

    def commit_rejected(self, rows: DataFrame) -> int:
        """The quarantine's commit, idempotent as the data's (a re-run with the same run id, or a
        replayed batch, skips it: its writer is the data's application id + ``:quarantine``)."""
        own = self.quarantine.transaction
        if own is None and self.transaction is not None:
            own = AppTransaction(self.transaction.app_id + QUARANTINE_APP_SUFFIX, self.transaction.version)
        written = write_delta(
            rows,
            quarantine_path(self.output, self.options.quarantine),
            {},
            mode=self.quarantine.mode,
            run_id=own if own is not None else self.options.run_id,
            options=WriteOptions(
                commit_info={**self.write.commit_info, "spark_mlt.quarantine_of": self.output},
                backend=self.write.backend,
            ),
            storage_options=self.options.storage_options,
        )
        return written.rows

    def commit_rows(
        self, rows: DataFrame, sized: Sized, *, vocabularies: Mapping[str, str], row_count: int | None
    ) -> DeltaWriteResult:
        write = dataclasses.replace(self.write, properties={**self.write.properties, **vocabularies})
        return write_tokens(
            rows,
            self.output,
            sized.codecs,
            self.options,
            snapshot=self.snapshot,
            write=write,
            transaction=self.transaction,
            kept_ids=self.kept_ids,
        )


def counts_with_the_write(capabilities: Capabilities) -> bool:
    """Whether ``skip`` counts its rejected rows with an observation on the write: in Classic
    (tested with both backends, on Spark 3.5 and 4) and over Connect from Spark 4.0, whose
    client sends a write's observations with it. PySpark 3.5's Connect client builds the plan,
    but its ``Observation`` has no result to get."""
    return not capabilities.connect or capabilities.spark_line >= (4, 0)


def tokenize_frame(
    df: DataFrame,
    columns: Sequence[str],
    sink: TokenSink,
    *,
    capabilities: Capabilities | None = None,
    row_count: int | None = None,
) -> Tokenized:
    """Tokenize ``df``'s id columns into ``sink``: checked against its table as found, string keys
    through their vocabularies, codecs kept or sized, invalid ids handled as the sink's options
    say, rejected rows set aside, then one commit of the rows (see the module's notes).
    ``capabilities``: what the session has (default: asked here); ``row_count``: ``df``'s rows,
    where known (a window counts them from its feed).

    One pass: each input row is computed once, whatever ``handle_invalid`` says. With ``skip``
    the rejected rows are counted in the Spark job that writes the valid ones (an observation,
    nothing persisted). With ``quarantine`` the rejected rows are committed to the quarantine
    before the valid ones, so the two outputs take two Spark jobs over one computation of the
    tokens, kept at ``SET_ASIDE_LEVEL`` between them (``skip`` does the same where no
    observation reports the write, Connect on Spark 3.5, or the sink counts its rows first). A
    kept partition that is lost is computed again from the same input and the committed
    vocabularies, which give the same rows.

    Example::

        tokenize_frame(df, ["sku"], TableSink("out/orders_mlt", None, TokenizeOptions(mode="append")))
    """
    caps = capabilities if capabilities is not None else Capabilities.of(df.sparkSession)
    options, snapshot, seconds = sink.options, sink.snapshot, dict[str, float]()
    sink.check(df, columns)
    with phase(seconds, "vocabularies"):
        codecs = snapshot.codecs if snapshot is not None else None
        df, sources, vocabularies = key_ids(df.sparkSession, df, columns, sink.output, options, codecs=codecs)
    sized = fit_job_codecs(df, columns, options, snapshot, sources=sources, seconds=seconds)
    with phase(seconds, "tokenize and write"):
        tokens = job_tokens(df, sized, options, sources, caps)
        sink.prepare()
        if REASON_COLUMN not in tokens.columns:  # error, null: every row commits
            write, rows, rejected = _commit_all(tokens, sized, sink, vocabularies, row_count)
        elif options.handle_invalid == "skip" and not sink.counts_first and counts_with_the_write(caps):
            write, rows, rejected = _commit_observed(tokens, sized, sink, vocabularies)
        else:
            write, rows, rejected = _commit_set_aside(tokens, sized, sink, vocabularies)
    if write.skipped and sink.counts_first:
        rows, rejected = 0, 0
    return Tokenized(sized.codecs, sized.layouts, write, rows, rejected, seconds)


_Committed = tuple[DeltaWriteResult, int, int]


def _commit_all(
    tokens: DataFrame, sized: Sized, sink: TokenSink, vocabularies: Mapping[str, str], row_count: int | None
) -> _Committed:
    """Every row commits (no id is rejected): counted first where the sink asks and the count is
    not known, over the tokens kept for the commit."""
    if not sink.counts_first or row_count is not None:
        write = sink.commit_rows(tokens, sized, vocabularies=vocabularies, row_count=row_count)
        return write, write.rows if row_count is None else row_count, 0
    kept = tokens.persist(SET_ASIDE_LEVEL)
    try:
        rows = kept.count()
        return sink.commit_rows(kept, sized, vocabularies=vocabularies, row_count=rows), rows, 0
    finally:
        kept.unpersist()


def _commit_observed(tokens: DataFrame, sized: Sized, sink: TokenSink, vocabularies: Mapping[str, str]) -> _Committed:
    """``skip`` in one Spark job: the rejected rows are counted by an observation on the frame
    the valid rows are written from, so the count comes with the write and nothing is persisted.

    The count is taken above the filter (Spark pushes no filter through an observation) and is
    the successful task attempts' (a retried task is not counted twice). A write that the table
    already holds (its run id or transaction is committed) may run no Spark job at all, and
    ``Observation.get`` would then wait forever: it reports 0 rejected rows, as it reports 0
    written ones."""
    observation = Observation()  # a fresh name per write: concurrent writes of a session do not mix
    rejected = F.count(F.when(F.col(REASON_COLUMN).isNotNull(), 1)).alias("rejected")
    good, _ = split_invalid(tokens.observe(observation, rejected), sized.codecs)
    write = sink.commit_rows(good, sized, vocabularies=vocabularies, row_count=None)
    return write, write.rows, 0 if write.skipped else int(observation.get["rejected"])


def _commit_set_aside(tokens: DataFrame, sized: Sized, sink: TokenSink, vocabularies: Mapping[str, str]) -> _Committed:
    """The tokens kept while the rejected rows are counted (``skip``, or a sink that counts
    first: one job counts both) or committed to the quarantine, then the valid rows commit. The
    quarantine commits whether it has rows or not."""
    kept = tokens.persist(SET_ASIDE_LEVEL)
    try:
        good, bad = split_invalid(kept, sized.codecs)
        rows: int | None = None
        rejected: int | None = None
        if sink.counts_first:
            counted = kept.agg(F.count(F.lit(1)).alias("rows"), F.count(F.col(REASON_COLUMN)).alias("bad")).first()
            rows, rejected = (0, 0) if counted is None else (int(counted["rows"]), int(counted["bad"]))
        elif sink.options.handle_invalid == "skip":
            rejected = bad.count()
        if sink.options.handle_invalid == "quarantine":
            committed = sink.commit_rejected(bad)
            rejected = committed if rejected is None else rejected
            reached("quarantine committed")
        valid = None if rows is None else rows - (rejected or 0)
        write = sink.commit_rows(good, sized, vocabularies=vocabularies, row_count=valid)
        return write, write.rows if valid is None else valid, rejected or 0
    finally:
        kept.unpersist()
