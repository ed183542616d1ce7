"""Decode a tokenized Delta table back to ids (or string keys), or verify that it decodes.

The codecs, token layouts and vocabularies come from the table itself (one
[`spark_mlt.storage.read_snapshot`][spark_mlt.storage.read_snapshot], whose handle the rows are then read through:
the input table is opened once), so decoding needs no option but where to write.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch.options import DecodeOptions
from spark_mlt.batch.report import JobReport, phase
from spark_mlt.codec import MLTCodec
from spark_mlt.column import mlt_decode, mlt_unpack, token_layouts
from spark_mlt.delta.fs import spark_uri
from spark_mlt.errors import MissingCodecError, MLTError
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import (
    WriteOptions,
    keys_for_ids,
    read_snapshot,
    read_snapshot_rows,
    vocabulary_paths,
    write_delta,
)

__all__ = ["decode_table", "unpack_token_columns"]


def unpack_token_columns(df: DataFrame, codecs: Mapping[str, MLTCodec]) -> DataFrame:
    """``df`` with every packed token column ``c_mlt`` (bigint) turned into array<int>.

    Example::

        ratings = unpack_token_columns(read_delta(spark, path), read_codecs(path))
    """
    for column, layout in token_layouts(df.schema, codecs).items():
        if layout == "packed":
            name = f"{column}{TOKEN_SUFFIX}"
            df = df.withColumn(name, mlt_unpack(name, codecs[column]))
    return df


def _check_token_columns(input: str, codecs: Mapping[str, MLTCodec], table: DataFrame) -> None:
    if not codecs:
        raise MissingCodecError(f"table {input} stores no codec (no mlt.codec.* property): nothing to decode")
    for column in codecs:
        if f"{column}{TOKEN_SUFFIX}" not in table.columns:
            raise MissingCodecError(f"table {input} has a codec for {column!r} but no {column}{TOKEN_SUFFIX} column")


def _decoded(
    spark: SparkSession, table: DataFrame, report: JobReport, vocabularies: Mapping[str, str], options: DecodeOptions
) -> tuple[DataFrame, dict[str, Column]]:
    """The decoded value of each codec column: its id, or its key where a vocabulary maps ids
    to string keys (joined in as ``__<column>_key``)."""
    decoded = {}
    for column, codec in report.codecs.items():
        layout = report.layouts[column]
        ids = mlt_decode(f"{column}{TOKEN_SUFFIX}", codec, layout=layout, engine=options.engine)
        if column not in vocabularies:
            decoded[column] = ids
            continue
        with_ids = table.withColumn(f"__{column}_id", ids)
        table = keys_for_ids(
            spark,
            with_ids,
            f"__{column}_id",
            vocabularies[column],
            key_column=f"__{column}_key",
            storage_options=options.storage_options,
        )
        table = table.drop(f"__{column}_id")
        decoded[column] = F.col(f"__{column}_key")
    return table, decoded


def _verify(report: JobReport, table: DataFrame, decoded: Mapping[str, Column]) -> None:
    """Count the rows whose decoded values differ from the kept original columns."""
    missing = [c for c in decoded if c not in table.columns]
    if missing:
        raise MLTError(
            f"verify=True needs the original column(s) {missing}, which the table does not keep", parameter="verify"
        )
    bad = F.lit(False)
    for column, value in decoded.items():
        bad = bad | ~F.col(column).eqNullSafe(value)
    counts = table.agg(F.count(F.lit(1)).alias("rows"), F.sum(bad.cast("long")).alias("bad")).first()
    report.rows_in = report.rows_out = int(counts["rows"]) if counts else 0
    report.mismatches = int(counts["bad"] or 0) if counts else 0


def _write_decoded(spark: SparkSession, result: DataFrame, report: JobReport, options: DecodeOptions) -> None:
    output = str(options.output)
    if options.output_format == "parquet":
        result.write.mode("errorifexists" if options.mode == "error" else options.mode).parquet(spark_uri(output))
        report.rows_out = spark.read.parquet(spark_uri(output)).count()
    else:
        commit = WriteOptions(commit_info={"spark_mlt.job": "decode"})
        report.write = write_delta(
            result, output, {}, mode=options.mode, options=commit, storage_options=options.storage_options
        )
        report.rows_out = report.write.rows
    report.rows_in = report.rows_out


def decode_table(spark: SparkSession, input: str, options: DecodeOptions | None = None) -> JobReport:
    """Decode every ``c_mlt`` column of a tokenized Delta table back to ``c``.

    With ``options.verify`` the decoded ids are compared with the kept original columns and
    the mismatches counted (0 expected); otherwise the decoded table is written to
    ``options.output`` (Delta, or Parquet with ``output_format="parquet"``).

    Raises:
        MLTError: neither ``output`` nor ``verify`` is given.
        MissingTableError: no Delta table at ``input``.
        MissingCodecError: the table stores no codec, or no token column for one.

    Example::

        report = decode_table(spark, "out/ratings_mlt", DecodeOptions(verify=True))
        report.mismatches  # 0: every decoded id equals the kept original
    """
    opts = options or DecodeOptions()
    if opts.output is None and not opts.verify:
        raise MLTError("output is needed (where to write the decoded table) unless verify=True", parameter="output")
    report = JobReport()
    with phase(report, "read"):
        snapshot = read_snapshot(input, storage_options=opts.storage_options)
        table = read_snapshot_rows(spark, snapshot)
        _check_token_columns(input, snapshot.codecs, table)
        report.codecs = snapshot.codecs
        report.layouts = dict(token_layouts(table.schema, snapshot.codecs))
    vocabularies = vocabulary_paths(snapshot.properties, location=snapshot.path)
    table, decoded = _decoded(spark, table, report, vocabularies, opts)
    if opts.verify:
        with phase(report, "verify"):
            _verify(report, table, decoded)
        return report
    with phase(report, "decode and write"):
        for column, value in decoded.items():
            table = table.withColumn(column, value)
        drop = [f"{c}{TOKEN_SUFFIX}" for c in report.codecs] + [f"__{c}_key" for c in vocabularies]
        _write_decoded(spark, table.drop(*drop), report, opts)
    return report
