"""Incremental tokenization: new input tokenized as it lands, each row exactly once.

A Structured Streaming query reads a folder of new files (Parquet, ORC, JSON or CSV, with a
schema) or a Delta table (Delta's streaming source, which needs Delta's jars; without them the
table's versions are followed one by one), and each
micro-batch goes through [`tokenize_frame`][spark_mlt.batch.write.pipeline.tokenize_frame], the batch
job's own path, as one idempotent Delta append:

* The stream is one writer of the output table. Its application transaction id is
  ``spark-mlt-stream:<writer>``, where ``<writer>`` is an id kept in the checkpoint folder
  (``spark_mlt.json``), and its version is the batch id, as Delta's own streaming sink does.
  A batch replayed after a crash, committed but not yet in the checkpoint, is recognised by
  the table and written again by nobody.
* Rejected rows go to the quarantine first, under the writer ``...:quarantine``, so a crash
  between the two commits loses no row and duplicates none.
* String keys' vocabularies grow inside the batch. A replayed batch finds its keys there and
  gets the same ids.
* The table fixes the codecs: the first batch creates the table with codecs from ``--p`` /
  ``--n`` or sized from that batch; later ids beyond a codec's capacity are handled as
  ``handle_invalid`` says (the quarantine, as in batch).

A Delta table's folder is streamed as a Delta table, never as a folder of files: a file source
would take the files its commits removed as new files too (`spark_mlt.batch.job.inputs` resolves the
format once, before the query starts).

The checkpoint belongs to one output table and its id columns: a checkpoint of another table,
columns or codecs is refused before the query starts. It also records which loop writes it, as
their transaction versions count different things: Spark's streaming query (batch ids; file
sources, catalog tables, and Delta tables with Delta's jars) or, for a Delta source without
Delta's jars, the source table's versions. A run that would switch loops (the same Delta source
read once with the jars and once without) would skip or repeat batches, and is refused.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import StructType

from spark_mlt.batch.job.report import JobReport
from spark_mlt.batch.job.thresholds import check_rejected, warn_capacity
from spark_mlt.batch.write.options import StreamOptions, TokenizeOptions, resolve_input
from spark_mlt.batch.write.pipeline import TableSink, Tokenized, job_backend, tokenize_frame
from spark_mlt.capabilities import Capabilities
from spark_mlt.delta.fs import locate, spark_uri
from spark_mlt.errors import MLTError, SourceError
from spark_mlt.storage import (
    AppTransaction,
    WriteOptions,
    read_appended,
    read_delta,
    read_snapshot,
    snapshot_for_write,
    table_exists,
)

__all__ = [
    "CHECKPOINT_MARKER",
    "LOOPS",
    "STREAM_APP_PREFIX",
    "StreamTotals",
    "check_checkpoint",
    "check_stream_job",
    "start_stream",
    "tokenize_stream",
]

log = logging.getLogger("spark_mlt")

#: The file in the checkpoint folder that names the stream's writer, output and columns.
CHECKPOINT_MARKER = "spark_mlt.json"
#: Application transaction ids of streaming writers: this prefix and the checkpoint's writer id.
STREAM_APP_PREFIX = "spark-mlt-stream:"

#: The loops a checkpoint can be written by, and what their transaction versions count.
LOOPS = {
    "spark": "Spark's streaming query, whose transaction versions are its batch ids",
    "delta-versions": "the source table's versions read without Delta's jars, which are its transaction versions",
}
Loop = Literal["spark", "delta-versions"]


def _marker(checkpoint: str, options: TokenizeOptions) -> tuple[Any, str]:
    location = locate(checkpoint, options.storage_options)
    return location, location.path(CHECKPOINT_MARKER)


def _read_marker(checkpoint: str, options: TokenizeOptions) -> dict[str, Any] | None:
    location, path = _marker(checkpoint, options)
    if not location.exists(CHECKPOINT_MARKER):
        return None
    with location.filesystem.open_input_stream(path) as stream:
        return dict(json.loads(stream.read().decode()))


def _write_marker(checkpoint: str, options: TokenizeOptions, marker: dict[str, Any]) -> None:
    """Replace the marker whole (written beside it, then moved over it): a crash leaves the old
    one or the new one, never half of one."""
    location, path = _marker(checkpoint, options)
    location.filesystem.create_dir(location.root, recursive=True)
    partial = f"{path}.{uuid.uuid4().hex[:8]}.partial"
    with location.filesystem.open_output_stream(partial) as stream:
        stream.write(json.dumps(marker, sort_keys=True, indent=1).encode())
    location.filesystem.move(partial, path)


def check_checkpoint(
    checkpoint: str, output: str, columns: Sequence[str], options: TokenizeOptions, *, loop: Loop
) -> str:
    """The stream's writer id: the checkpoint's, checked against this run's output, columns,
    loop and the table's codecs, or a new one written into a new checkpoint.

    Example::

        writer = check_checkpoint("chk/orders", "out/orders_mlt", ["customer_id"], options, loop="spark")

    Raises:
        MLTError: the checkpoint belongs to another output table, other columns, another loop
            (see the module's notes), or codecs the table no longer has (it was replaced).
    """
    marker = _read_marker(checkpoint, options)
    target = spark_uri(output)  # one spelling per place: an absolute path, s3a:// for S3
    if marker is None:
        marker = {"writer": uuid.uuid4().hex, "output": target, "columns": list(columns), "codecs": {}, "loop": loop}
        _write_marker(checkpoint, options, marker)
        return str(marker["writer"])
    if marker.get("loop") != loop:
        with_jars = "with Delta's jars" if marker.get("loop") == "spark" else "without Delta's jars"
        raise MLTError(
            f"checkpoint: {checkpoint} was written by {LOOPS.get(str(marker.get('loop')), 'an unknown loop')}; "
            f"this run would follow its source by {LOOPS[loop]}: one numbering in place of the other would "
            f"skip or repeat batches. Run the stream {with_jars}, as it was started, or start over with a new "
            "checkpoint and a new output table",
            parameter="checkpoint",
        )
    if marker.get("output") != target or marker.get("columns") != list(columns):
        raise MLTError(
            f"checkpoint: {checkpoint} belongs to the stream into {marker.get('output')} of columns "
            f"{marker.get('columns')}; this run writes {output} of columns {list(columns)}: use its own checkpoint",
            parameter="checkpoint",
        )
    recorded = dict(marker.get("codecs") or {})
    if recorded and table_exists(output, storage_options=options.storage_options):
        current = {
            c: codec.fingerprint
            for c, codec in read_snapshot(output, storage_options=options.storage_options).codecs.items()
        }
        changed = sorted(c for c, fingerprint in recorded.items() if current.get(c) != fingerprint)
        if changed:
            raise MLTError(
                f"checkpoint: {checkpoint} was written with other codecs for {changed} than {output} now "
                "has (the table was replaced): start the stream with a new checkpoint",
                parameter="checkpoint",
            )
    return str(marker["writer"])


def _record_codecs(checkpoint: str, options: TokenizeOptions, report: Tokenized) -> None:
    marker = _read_marker(checkpoint, options) or {}
    codecs = {c: codec.fingerprint for c, codec in report.codecs.items()}
    if marker.get("codecs") != codecs:
        _write_marker(checkpoint, options, {**marker, "codecs": codecs})


def check_stream_job(options: TokenizeOptions) -> None:
    """Refuses the batch settings a stream's batches cannot take: ``run_id`` and ``dry_run``
    (a stream's batches are idempotent by its checkpoint's writer and batch ids) and
    ``mode="overwrite"`` (a stream appends).

    Raises:
        MLTError: naming the setting.
    """
    for name, refused in (("run_id", options.run_id is not None), ("dry_run", options.dry_run)):
        if refused:
            raise MLTError(
                f"{name}: a stream's batches are idempotent by its checkpoint's writer and batch ids; "
                f"{name} is for batch runs",
                parameter=name,
            )
    if options.mode == "overwrite":
        raise MLTError("mode: a stream appends; mode='overwrite' is for batch runs", parameter="mode")


def _source(spark: SparkSession, input: str, options: TokenizeOptions, stream: StreamOptions) -> DataFrame:
    """The streaming DataFrame of ``input``: new files of a folder, or a Delta table's new commits."""
    reader: DataStreamReader = spark.readStream.options(**options.read_options)
    if stream.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(stream.max_files_per_trigger))
    if options.input_format == "delta":  # with Delta's jars: Delta's streaming source
        return reader.format("delta").load(locate(input, options.storage_options).spark_path())
    if options.input_format == "table":
        return reader.table(input)
    if options.input_format == "csv":
        reader = reader.option("header", options.read_options.get("header", "true"))
    schema: str | StructType | None = stream.schema
    if schema is None:  # the schema of the files already there, read once
        static = spark.read.options(**options.read_options)
        if options.input_format == "csv":
            static = static.option("header", options.read_options.get("header", "true")).option("inferSchema", "true")
        try:
            schema = static.format(options.input_format).load(input).schema
        except Exception as error:  # no files yet: the schema must be given
            raise SourceError(
                f"input {input!r}: no {options.input_format} files to read the schema from; pass schema "
                "(e.g. 'customer_id bigint, sku string')",
                parameter="schema",
            ) from error
    return reader.schema(schema).format(options.input_format).load(input)


def start_stream(
    spark: SparkSession,
    input: str,
    output: str,
    columns: Sequence[str],
    options: TokenizeOptions,
    *,
    stream: StreamOptions,
    capabilities: Capabilities | None = None,
    totals: StreamTotals | None = None,
) -> StreamingQuery:
    """Start the streaming query that tokenizes ``input``'s new rows into ``output`` (see the
    module's notes), each batch as ``options`` say, and return it; ``totals`` (if given) adds
    up every batch. The session's capabilities are resolved once, here (or given:
    ``capabilities``), and every batch runs with them: ``foreachBatch`` calls a batch on a
    thread that may see no active session.

    Example::

        query = start_stream(spark, "landing/orders", "out/orders_mlt", ["customer_id"],
                             TokenizeOptions(), stream=StreamOptions(checkpoint="chk/orders", trigger="30 seconds"))

    Raises:
        MLTError: ``options`` hold a batch run's setting (see
            `check_stream_job`).
        SourceError: a column is not in the input.
        InputFormatError: the input is a Delta table read as files, or inside one.
    """
    check_stream_job(options)
    options = resolve_input(input, options)  # a Delta table streams as one, never as its files
    source = _source(spark, input, options, stream)
    unknown = [c for c in columns if c not in source.columns]
    if unknown:
        raise SourceError(
            f"columns names column(s) {unknown} not in the input; it has {source.columns}", parameter="columns"
        )
    checkpoint = stream.checkpoint
    app_id = STREAM_APP_PREFIX + check_checkpoint(checkpoint, output, columns, options, loop="spark")
    caps = capabilities if capabilities is not None else Capabilities.of(spark)
    total = totals if totals is not None else StreamTotals()
    batch = _batch_writer(
        output, columns, options, checkpoint=checkpoint, app_id=app_id, total=total, source=input, capabilities=caps
    )
    location = locate(checkpoint, options.storage_options).spark_path()
    writer = source.writeStream.foreachBatch(batch).option("checkpointLocation", location)
    interval = stream.interval
    if interval is None:
        writer = writer.trigger(availableNow=True)
    else:  # in milliseconds, a unit every Spark line reads
        writer = writer.trigger(processingTime=f"{round(interval * 1000)} milliseconds")
    return writer.queryName(_query_name(output)).start()


def _batch_writer(
    output: str,
    columns: Sequence[str],
    options: TokenizeOptions,
    *,
    checkpoint: str,
    app_id: str,
    total: StreamTotals,
    source: str,
    capabilities: Capabilities,
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function: each batch appended to ``output`` with the stream's
    ``capabilities``, added up in ``total``."""
    appending = dataclasses.replace(options, mode="append")  # every batch appends
    info = {
        "spark_mlt.job": "tokenize-stream",
        "spark_mlt.input": source,
        "spark_mlt.handle_invalid": options.handle_invalid,
        "spark_mlt.writer": app_id,
    }
    backend = job_backend(capabilities)  # once for the stream, as its capabilities

    def batch(df: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        snapshot = snapshot_for_write(output, "append", storage_options=options.storage_options, backend=backend)
        sink = TableSink(
            output,
            snapshot,
            appending,
            WriteOptions(commit_info={**info, "spark_mlt.batch": str(batch_id)}, backend=backend),
            transaction=AppTransaction(app_id, int(batch_id)),
        )
        done = tokenize_frame(df, columns, sink, capabilities=capabilities)
        _record_codecs(checkpoint, options, done)
        total.add(done)
        _log_batch(f"batch {batch_id}", done, time.perf_counter() - started)

    return batch


def _log_batch(name: str, done: Tokenized, seconds: float) -> None:
    rows = done.rows_out + done.rows_rejected
    log.info(
        "%s: rows in %d, written %d, rejected %d, %.1f rows/s, %.1f s, table version %s%s",
        name,
        rows,
        done.rows_out,
        done.rows_rejected,
        rows / seconds if seconds else 0.0,
        seconds,
        done.write.version if done.write else "-",
        " (already committed: replayed, nothing written)" if done.write and done.write.skipped else "",
    )


def tokenize_stream(
    spark: SparkSession,
    input: str,
    output: str,
    columns: Sequence[str],
    options: TokenizeOptions,
    *,
    stream: StreamOptions,
) -> JobReport:
    """Tokenize ``input``'s new rows into ``output`` as they land, each once, each batch as
    ``options`` say, and run until the stream ends: with ``trigger="available-now"`` once
    everything present has been tokenized (the scheduled, incremental form), else until it
    fails or is stopped.

    Example::

        tokenize_stream(spark, "landing/orders", "out/orders_mlt", ["customer_id"],
                        TokenizeOptions(handle_invalid="quarantine"), stream=StreamOptions(checkpoint="chk/orders"))

    Raises:
        MLTError: ``options`` hold a batch run's setting (see
            `check_stream_job`), or the checkpoint
            belongs to another stream (see `check_checkpoint`).
        InputFormatError: the input is a Delta table read as files, or inside one.
        StreamingQueryException: a batch failed (its cause is the batch's error); the
            checkpoint holds the batches committed before it.
    """
    check_stream_job(options)
    options = resolve_input(input, options)  # a Delta table streams as one, never as its files
    capabilities = Capabilities.of(spark)  # once: the loop and every batch read them
    totals = StreamTotals()
    if options.input_format == "delta" and not capabilities.delta_jars:
        _follow_delta(spark, input, output, columns, options, stream=stream, capabilities=capabilities, totals=totals)
        return _checked(totals.report, output, options)
    query = start_stream(
        spark, input, output, columns, options, stream=stream, capabilities=capabilities, totals=totals
    )
    logged = -1
    try:
        while True:
            ended = query.awaitTermination(PROGRESS_SECONDS)
            logged = _log_progress(query, logged)
            if ended:
                break
    except KeyboardInterrupt:
        query.stop()
        raise
    return _checked(totals.report, output, options)


def _checked(report: JobReport, output: str, options: TokenizeOptions) -> JobReport:
    """The stream's report, once it stopped, after its thresholds: a warning per codec past half
    its capacity, and ``RejectedRowsError`` past ``max_rejected`` (over all its batches)."""
    report = warn_capacity(report, output, "tokenize", storage_options=options.storage_options)
    check_rejected(report, options)
    return report


#: How often a running stream's progress (Spark's, per batch) is logged.
PROGRESS_SECONDS = 5


def _log_progress(query: StreamingQuery, logged: int) -> int:
    """Log the batches Spark reported since batch ``logged``: how long each took and where the
    source is after it (a file source's log offset, a Delta source's version); the last one
    logged. (The rows are in each batch's own line: Spark counts a batch's input once per scan,
    and a batch scans its input for the vocabularies and again for the write.)"""
    for progress in query.recentProgress:
        batch = int(progress.batchId if hasattr(progress, "batchId") else progress["batchId"])
        if batch <= logged:
            continue
        document = progress if isinstance(progress, dict) else json.loads(progress.json)
        sources = "; ".join(str(source.get("endOffset")) for source in document.get("sources", []))
        seconds = float((document.get("durationMs") or {}).get("triggerExecution", 0)) / 1000
        log.info("stream batch %d: %.1f s, source now at %s", batch, seconds, sources)
        logged = batch
    return logged


def _follow_delta(
    spark: SparkSession,
    input: str,
    output: str,
    columns: Sequence[str],
    options: TokenizeOptions,
    *,
    stream: StreamOptions,
    capabilities: Capabilities,
    totals: StreamTotals,
) -> None:
    """Without Delta's jars: the input table's versions after the checkpoint's last one, each
    one batch, read jar-free (the first batch: the table as it is, as Delta's source starts).
    A batch's transaction version is its source version, so a batch the table already holds
    (the checkpoint missed it) is skipped; the checkpoint then records it."""
    checkpoint = stream.checkpoint
    app_id = STREAM_APP_PREFIX + check_checkpoint(checkpoint, output, columns, options, loop="delta-versions")
    appending = dataclasses.replace(options, mode="append")
    info = {"spark_mlt.job": "tokenize-stream", "spark_mlt.input": input, "spark_mlt.writer": app_id}
    backend = job_backend(capabilities)
    while True:
        latest = read_snapshot(input, storage_options=options.storage_options).version
        done = (_read_marker(checkpoint, options) or {}).get("source_version")
        for version in range(latest if done is None else int(done) + 1, latest + 1):
            started = time.perf_counter()
            if done is None:
                rows = read_delta(
                    spark, input, version=version, storage_options=options.storage_options, backend="delta-rs"
                )
            else:
                rows = read_appended(spark, input, version - 1, version, storage_options=options.storage_options)
            rows = rows.persist()
            snapshot = snapshot_for_write(output, "append", storage_options=options.storage_options, backend="delta-rs")
            sink = TableSink(
                output,
                snapshot,
                appending,
                WriteOptions(commit_info={**info, "spark_mlt.batch": str(version)}, backend=backend),
                transaction=AppTransaction(app_id, version),
            )
            batch = tokenize_frame(rows, columns, sink, capabilities=capabilities)
            rows.unpersist()
            _write_marker(checkpoint, options, {**(_read_marker(checkpoint, options) or {}), "source_version": version})
            _record_codecs(checkpoint, options, batch)
            totals.add(batch)
            _log_batch(f"source version {version}", batch, time.perf_counter() - started)
            done = version
        interval = stream.interval
        if interval is None:
            return
        time.sleep(interval)


@dataclasses.dataclass
class StreamTotals:
    """What a stream's batches committed so far, added up as each batch ends (on the thread
    ``foreachBatch`` calls it on): ``report`` is the stream's report of them.

    Example::

        totals = StreamTotals()
        query = start_stream(spark, "landing/orders", "out/orders_mlt", ["customer_id"], options,
                             stream=StreamOptions(checkpoint="chk/orders"), totals=totals)
        query.awaitTermination()
        print(totals.report.summary())
    """

    report: JobReport = dataclasses.field(default_factory=JobReport)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, batch: Tokenized) -> None:
        """Adds a batch's rows; its codecs, layouts and commit are the stream's latest."""
        with self._lock:
            rows_out = self.report.rows_out + batch.rows_out
            rejected = self.report.rows_rejected + batch.rows_rejected
            self.report = dataclasses.replace(
                self.report,
                rows_in=rows_out + rejected,
                rows_out=rows_out,
                rows_rejected=rejected,
                codecs=batch.codecs,
                layouts=batch.layouts,
                write=batch.write,
            )


def _query_name(output: str) -> str:
    return f"spark-mlt tokenize {output}"
