"""The batch job: tokenize id columns of any table into a Delta table, once.

The token column of an id column ``c`` is ``c_mlt`` (``TOKEN_SUFFIX``). Codecs are sized by
`spark_mlt.column.fit_codecs`, the same rule the ML stages use; a table that already exists keeps
its codecs and token layouts. The job opens its output table once
([`spark_mlt.storage.snapshot_for_write`][spark_mlt.storage.snapshot_for_write], before any Spark
work) and runs the tokenize pipeline ([`spark_mlt.batch.write.pipeline`][spark_mlt.batch.write.pipeline])
into it, whose commit stores the codecs in the table's properties.

Example::

    tokenize_table(spark, "orders.parquet", "out/orders_mlt", ["customer_id"])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from spark_mlt.batch.job.report import JobReport, phase
from spark_mlt.batch.job.thresholds import check_rejected, warn_capacity
from spark_mlt.batch.write.checks import check_id_types, check_output
from spark_mlt.batch.write.frames import planned_key_ids
from spark_mlt.batch.write.options import TokenizeOptions, resolve_input
from spark_mlt.batch.write.pipeline import TableSink, fit_job_codecs, job_backend, tokenize_frame
from spark_mlt.capabilities import Capabilities
from spark_mlt.storage import WriteOptions, read_delta, snapshot_for_write

__all__ = ["tokenize_table"]


def tokenize_table(
    spark: SparkSession,
    input: str,
    output: str,
    columns: Sequence[str],
    options: TokenizeOptions | None = None,
) -> JobReport:
    """Tokenize id columns of any table (a path read with ``options.input_format``: by default a
    Delta table's folder as Delta, anything else as Parquet, see `spark_mlt.batch.job.inputs`; or a
    catalog table's name with ``input_format="table"``) into the Delta table ``output``, once
    (``spark_mlt.batch.write.stream.tokenize_stream`` tokenizes the input's new rows as they land,
    each once).

    String columns are keys: each goes through an append-only vocabulary Delta table
    (``vocabulary_dir/<column>``, default ``<output>_vocab/<column>``) to a dense id, which is
    tokenized; the table property ``mlt.vocabulary.<column>`` names the vocabulary, and decoding
    returns the original keys. Invalid ids are handled as ``options.handle_invalid`` says (see
    [`TokenizeOptions`][spark_mlt.batch.write.options.TokenizeOptions]). With ``options.dry_run`` it sizes
    the codecs and layouts (``report.codecs``, ``report.layouts``) and returns before writing
    anything.

    A run that rejects more rows than ``options.max_rejected`` allows commits them, then raises
    ``RejectedRowsError``; a codec past half its capacity gets a warning in ``report.warnings``.

    Raises:
        UnknownColumnError: a column is not in the input.
        InputFormatError: the input is a Delta table read as files, or inside one (before Spark
            reads anything).
        RejectedRowsError: more rejected rows than ``options.max_rejected``; all is committed.
        CodecCapacityError: a string key's vocabulary would outgrow its codec (nothing written).
        TableOptionError: an option the existing table cannot take (see `check_output`).
        TableExistsError: ``mode="error"`` and ``output`` exists.

    Example::

        tokenize_table(spark, "orders.parquet", "out/orders_mlt", ["customer_id", "sku"],
                       TokenizeOptions(mode="append", handle_invalid="quarantine"))
    """
    opts = resolve_input(input, options or TokenizeOptions())  # a Delta table is read as one
    capabilities = Capabilities.of(spark)  # once: every step of the job reads them
    backend = job_backend(capabilities)
    snapshot = snapshot_for_write(
        output, opts.mode, storage_options=opts.storage_options, backend=backend
    )  # before any Spark work
    seconds: dict[str, float] = {}
    with phase(seconds, "read"):
        df = _read_input(spark, input, opts)
    if opts.dry_run:
        check_output(snapshot, df.columns, columns, opts)  # a run's sink checks
        check_id_types(snapshot, df, columns, opts)
        with phase(seconds, "vocabularies (planned)"):
            df, sources = planned_key_ids(spark, df, columns, output, opts)
        sized = fit_job_codecs(df, columns, opts, snapshot, sources=sources, seconds=seconds)
        return JobReport(codecs=sized.codecs, layouts=sized.layouts, seconds=seconds, dry_run=True)
    info = {"spark_mlt.job": "tokenize", "spark_mlt.input": input, "spark_mlt.handle_invalid": opts.handle_invalid}
    if opts.resize:
        info["spark_mlt.resize"] = "true"
    sink = TableSink(output, snapshot, opts, WriteOptions(commit_info=info, backend=backend))
    done = tokenize_frame(df, columns, sink, capabilities=capabilities)
    report = dataclasses.replace(done.report(), seconds={**seconds, **done.seconds})
    report = warn_capacity(report, output, "tokenize", storage_options=opts.storage_options)
    check_rejected(report, opts)
    return report


def _read_input(spark: SparkSession, input: str, options: TokenizeOptions) -> DataFrame:
    if options.input_format == "table":
        return spark.table(input)
    if options.input_format == "delta":
        return read_delta(spark, input, storage_options=options.storage_options)
    reader = spark.read.options(**options.read_options)
    if options.input_format == "csv":
        reader = reader.option("header", options.read_options.get("header", "true"))
        reader = reader.option("inferSchema", options.read_options.get("inferSchema", "true"))
    return reader.format(options.input_format).load(input)
