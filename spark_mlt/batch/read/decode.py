"""Decode a tokenized Delta table back to ids (or string keys), or verify that it decodes.

The codecs, token layouts and vocabularies come from the table itself (one
[`spark_mlt.storage.read_snapshot`][spark_mlt.storage.read_snapshot], whose handle the rows are then read through:
the input table is opened once), so decoding needs no option but where to write.

The decoded table has the source's types: each id column comes back in its type (the kept raw
column's, else the one the table records, ``mlt.type.<column>``; bigint, with a warning, for a
table written before types were recorded), in the place of its token column, and every other
column as the table holds it. An id its type cannot hold fails the query, naming it: a cast would
wrap it (or give null) where ANSI mode is off. A Parquet output stores timestamps as
``TIMESTAMP(MICROS)``, as the Delta writer does: Spark's default, INT96, reads back in other
readers (pyarrow, pandas, DuckDB) as timestamps without a time zone.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch.job.report import JobReport, RunLog, phase
from spark_mlt.batch.read.options import DecodeOptions
from spark_mlt.codec import MLTCodec
from spark_mlt.column import mlt_decode, mlt_unpack, token_layouts
from spark_mlt.column.layouts import Layout
from spark_mlt.delta.fs import spark_uri
from spark_mlt.errors import CodecFormatError, MissingCodecError, MLTError
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import (
    DeltaWriteResult,
    TableSnapshot,
    WriteOptions,
    keys_for_ids,
    read_snapshot,
    read_snapshot_rows,
    vocabulary_paths,
    write_delta,
)
from spark_mlt.storage.properties import id_types
from spark_mlt.storage.spark_sql import TIMESTAMP_TYPE, session_conf

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
    spark: SparkSession,
    table: DataFrame,
    codecs: Mapping[str, MLTCodec],
    layouts: Mapping[str, Layout],
    *,
    vocabularies: Mapping[str, str],
    options: DecodeOptions,
) -> tuple[DataFrame, dict[str, Column]]:
    """The decoded value of each codec column: its bigint id (as ``__<column>_id``, computed
    once), or its key where a vocabulary maps ids to string keys (joined in as
    ``__<column>_key``)."""
    decoded = {}
    for column, codec in codecs.items():
        layout = layouts[column]
        ids = mlt_decode(f"{column}{TOKEN_SUFFIX}", codec, layout=layout, engine=options.engine)
        table = table.withColumn(f"__{column}_id", ids)
        if column not in vocabularies:
            decoded[column] = F.col(f"__{column}_id")
            continue
        table = keys_for_ids(
            spark,
            table,
            f"__{column}_id",
            vocabularies[column],
            key_column=f"__{column}_key",
            storage_options=options.storage_options,
        )
        decoded[column] = F.col(f"__{column}_key")
    return table, decoded


#: The largest id each integral type holds (bigint holds every id: they are below 2**63).
_LARGEST = {"tinyint": 2**7 - 1, "smallint": 2**15 - 1, "int": 2**31 - 1, "bigint": None}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def _id_types(
    snapshot: TableSnapshot, table: DataFrame, codecs: Iterable[str], keys: Iterable[str], run_log: RunLog
) -> dict[str, str]:
    """The type each decoded id column of ``snapshot`` is written in: the raw column's where the
    table keeps it (what it holds now), else the recorded ``mlt.type.<column>``, else bigint
    with a warning in ``run_log``; a key column (``keys``) stays a string.

    Raises:
        CodecFormatError: a recorded type is none an id column can have.
    """
    recorded, held = id_types(snapshot.properties), dict(table.dtypes)
    types = {}
    for column in codecs:
        kind = "string" if column in keys else held.get(column) or recorded.get(column)
        if kind is None:
            kind = "bigint"
            run_log.warn(
                f"the table {snapshot.path} records no type for {column!r} (written before spark-mlt recorded "
                f"them as mlt.type.<column>, and it keeps no raw {column!r}): its ids are decoded as bigint"
            )
        if kind not in (*_LARGEST, "string") and not _DECIMAL.fullmatch(kind):
            raise CodecFormatError(
                f"table {snapshot.path}, property mlt.type.{column}: {kind!r} is no type of ids (an integral type, "
                "a decimal, or string for a key)"
            )
        types[column] = kind
    return types


def _largest(kind: str) -> int | None:
    """The largest id of the type ``kind``, or None where every id fits (bigint, a decimal of
    19 or more integer digits, a key's string)."""
    found = _DECIMAL.fullmatch(kind)
    if found is None:
        return _LARGEST.get(kind)
    digits = int(found[1]) - int(found[2])
    return 10**digits - 1 if digits < 19 else None


def _typed(ids: Column, column: str, kind: str, where: str) -> Column:
    """The bigint ``ids`` in the id column's type ``kind``; an id ``kind`` cannot hold fails the
    query, naming it (ids are never negative: only the top can be passed)."""
    largest = _largest(kind)
    if largest is None:
        return ids.cast(kind)
    message = F.concat(
        F.lit(f"decode: {column}{TOKEN_SUFFIX} of {where} decodes to the id "),
        ids.cast("string"),
        F.lit(
            f", beyond {largest}, the largest {kind} ({column}'s type in the table's source): refusing to wrap it; "
            "these tokens are not of this column's ids"
        ),
    )
    return F.when(ids > F.lit(largest), F.raise_error(message)).otherwise(ids).cast(kind)


def _verify(table: DataFrame, decoded: Mapping[str, Column]) -> tuple[int, int]:
    """The rows, and those whose decoded values differ from the kept original columns."""
    missing = [c for c in decoded if c not in table.columns]
    if missing:
        raise MLTError(
            f"verify=True needs the original column(s) {missing}, which the table does not keep", parameter="verify"
        )
    bad = F.lit(False)
    for column, value in decoded.items():
        bad = bad | ~F.col(column).eqNullSafe(value)
    counts = table.agg(F.count(F.lit(1)).alias("rows"), F.sum(bad.cast("long")).alias("bad")).first()
    return (int(counts["rows"]), int(counts["bad"] or 0)) if counts else (0, 0)


def _write_decoded(
    spark: SparkSession, result: DataFrame, options: DecodeOptions
) -> tuple[int, DeltaWriteResult | None]:
    """Writes the decoded table: the rows written, and the Delta commit (None for Parquet)."""
    output = str(options.output)
    if options.output_format == "parquet":
        key, value = TIMESTAMP_TYPE  # not INT96, which other readers take for timestamps without a zone
        conf = {} if spark.conf.get(key, None) is not None else {key: value}
        with session_conf(spark, conf):
            result.write.mode("errorifexists" if options.mode == "error" else options.mode).parquet(spark_uri(output))
        return spark.read.parquet(spark_uri(output)).count(), None
    commit = WriteOptions(commit_info={"spark_mlt.job": "decode"})
    written = write_delta(
        result, output, {}, mode=options.mode, options=commit, storage_options=options.storage_options
    )
    return written.rows, written


def decode_table(spark: SparkSession, input: str, options: DecodeOptions | None = None) -> JobReport:
    """Decode every ``c_mlt`` column of a tokenized Delta table back to ``c``.

    With ``options.verify`` the decoded ids are compared with the kept original columns and
    the mismatches counted (0 expected); otherwise the decoded table is written to
    ``options.output`` (Delta, or Parquet with ``output_format="parquet"``).

    The decoded table has the source's types (see the module's notes): each id column its own
    (bigint, with a warning in ``report.warnings``, where the table records none), in its place.

    Raises:
        MLTError: neither ``output`` nor ``verify`` is given.
        MissingTableError: no Delta table at ``input``.
        MissingCodecError: the table stores no codec, or no token column for one.
        CodecFormatError: the type the table records for an id column is no type of ids.

    A decoded id that its column's type cannot hold fails the write's query, naming the id.

    Example::

        report = decode_table(spark, "out/ratings_mlt", DecodeOptions(verify=True))
        report.mismatches  # 0: every decoded id equals the kept original
    """
    opts = options or DecodeOptions()
    if opts.output is None and not opts.verify:
        raise MLTError("output is needed (where to write the decoded table) unless verify=True", parameter="output")
    run_log = RunLog()
    with phase(run_log.seconds, "read"):
        snapshot = read_snapshot(input, storage_options=opts.storage_options)
        table = read_snapshot_rows(spark, snapshot)
        _check_token_columns(input, snapshot.codecs, table)
        codecs, layouts = dict(snapshot.codecs), dict(token_layouts(table.schema, snapshot.codecs))
    vocabularies = vocabulary_paths(snapshot.properties, location=snapshot.path)
    types = _id_types(snapshot, table, codecs, vocabularies, run_log)
    columns = table.columns  # the table's own, in its order
    table, decoded = _decoded(spark, table, codecs, layouts, vocabularies=vocabularies, options=opts)
    report = JobReport(codecs=codecs, layouts=layouts)
    if opts.verify:
        with phase(run_log.seconds, "verify"):
            rows, mismatches = _verify(table, decoded)
        return dataclasses.replace(report, rows_in=rows, rows_out=rows, mismatches=mismatches).logged(run_log)
    with phase(run_log.seconds, "decode and write"):
        typed = {c: _typed(value, c, types[c], input).alias(c) for c, value in decoded.items()}
        rows, written = _write_decoded(spark, table.select(*_in_place(columns, typed)), opts)
    return dataclasses.replace(report, rows_in=rows, rows_out=rows, write=written).logged(run_log)


def _in_place(columns: Sequence[str], decoded: Mapping[str, Column]) -> list[Column]:
    """The decoded table's columns: the table's ``columns`` in their order, each decoded id
    column where the table keeps it, else where its token column was."""
    out = []
    for name in columns:
        column = name.removesuffix(TOKEN_SUFFIX)
        if name in decoded:  # a raw id column the table keeps: its decoded ids in its place
            out.append(decoded[name])
        elif name.endswith(TOKEN_SUFFIX) and column in decoded:
            if column not in columns:
                out.append(decoded[column])
        else:
            out.append(F.col(f"`{name.replace('`', '``')}`"))
    return out
