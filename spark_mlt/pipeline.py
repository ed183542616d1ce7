"""The batch jobs as library functions; ``spark_mlt.cli`` and ``jobs/`` are thin wrappers.

Every job reads, tokenises or decodes with the column functions, and writes through
:func:`spark_mlt.delta.write_delta`, so the codec of every token column is stored with
the table. The token column of an id column ``c`` is ``c_mlt``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import pyarrow as pa

from spark_mlt.codec import DEFAULT_SEED, MLTCodec
from spark_mlt.delta import (
    DeltaWriteResult,
    MissingCodecError,
    TableExistsError,
    check_data_page_version,
    read_codecs,
    read_delta,
    token_write_options,
    write_delta,
)
from spark_mlt.errors import MLTError
from spark_mlt.functions import mlt_decode, mlt_encode, mlt_unpack

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from spark_mlt.delta import WriteMode

__all__ = [
    "TOKEN_SUFFIX",
    "JobReport",
    "TokenLayout",
    "decode_table",
    "inspect_table",
    "size_codecs",
    "tokenize_dataframe",
    "tokenize_movielens",
    "tokenize_table",
    "unpack_token_columns",
]

TOKEN_SUFFIX = "_mlt"
VOCAB_PROPERTY_PREFIX = "mlt.vocab."
TokenLayout = Literal["auto", "packed", "array"]
LAYOUTS = ("auto", "packed", "array")
log = logging.getLogger("spark_mlt")


@dataclass
class JobReport:
    """Counts and timings of one job run, printed at its end."""

    rows_in: int = 0
    rows_out: int = 0
    rows_rejected: int = 0
    mismatches: int | None = None
    write: DeltaWriteResult | None = None
    codecs: dict[str, MLTCodec] = field(default_factory=dict)
    layouts: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [f"rows in {self.rows_in}", f"out {self.rows_out}", f"rejected {self.rows_rejected}"]
        if self.mismatches is not None:
            parts.append(f"mismatches {self.mismatches}")
        if self.write is not None:
            parts.append(f"table {self.write.path} version {self.write.version}")
            if self.write.skipped:
                parts.append("run id already committed: nothing written")
        return ", ".join(parts)


class _Phase:
    """Logs a job phase with its duration and records it in the report."""

    def __init__(self, report: JobReport, name: str) -> None:
        self.report, self.name = report, name

    def __enter__(self) -> None:
        log.info("%s ...", self.name)
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        seconds = time.perf_counter() - self.start
        self.report.seconds[self.name] = seconds
        log.info("%s done in %.2f s", self.name, seconds)


def size_codecs(
    df: DataFrame,
    columns: Sequence[str],
    *,
    p: int | None = None,
    n: int | None = None,
    seed: int = DEFAULT_SEED,
    existing: Mapping[str, MLTCodec] | None = None,
) -> dict[str, MLTCodec]:
    """A codec per column: the stored one if any, else sized from the column's largest id."""
    from pyspark.sql import functions as F

    existing = dict(existing or {})
    missing = [c for c in columns if c not in existing]
    codecs = {c: existing[c] for c in columns if c in existing}
    if not missing:
        return codecs
    if p is not None and n is not None:
        return {**codecs, **{c: MLTCodec.from_seed(p, n, seed) for c in missing}}
    row = df.agg(*[F.max(F.col(c)).cast("decimal(38,0)").alias(c) for c in missing]).first()
    for column in missing:
        largest = 0 if row is None or row[column] is None else max(0, int(row[column]))
        codecs[column] = MLTCodec.for_cardinality(min(largest, 2**63 - 1), p=p, n=n, seed=seed)
    return codecs


def resolve_layouts(
    codecs: Mapping[str, MLTCodec], layout: str = "auto", existing: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The storage layout of each token column: ``"packed"`` (one bigint) or ``"array"``.

    ``"auto"`` keeps an existing table's layout, else packs when the tokens fit in 64 bits.
    An explicit layout that contradicts the existing table's, or ``"packed"`` for tokens that
    do not fit in 64 bits, is refused.
    """
    if layout not in LAYOUTS:
        raise MLTError(f"token layout must be one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}")
    existing = dict(existing or {})
    layouts = {}
    for column, codec in codecs.items():
        stored = existing.get(column)
        if stored is not None and layout not in ("auto", stored):
            raise MLTError(
                f"column {column}{TOKEN_SUFFIX} of the existing table stores tokens as {stored!r}; "
                f"cannot append them as {layout!r} (use --token-layout auto or {stored})"
            )
        if stored is None and layout == "packed":
            codec.require_packed_bits()
        chosen = stored or (layout if layout != "auto" else ("packed" if codec.packed_bits else "array"))
        layouts[column] = chosen
    return layouts


def stored_layouts(schema: Any, codecs: Mapping[str, MLTCodec]) -> dict[str, str]:
    """The layout of each codec column's token column in a Spark schema, by its type:
    bigint is ``"packed"``, array ``"array"``, struct ``"struct"``."""
    from pyspark.sql.types import ArrayType, LongType, StructType

    layouts = {}
    for column in codecs:
        name = f"{column}{TOKEN_SUFFIX}"
        if name not in schema.names:
            continue
        kind = schema[name].dataType
        if isinstance(kind, LongType):
            layouts[column] = "packed"
        elif isinstance(kind, ArrayType):
            layouts[column] = "array"
        elif isinstance(kind, StructType):
            layouts[column] = "struct"
        else:
            raise MLTError(f"token column {name} has type {kind.simpleString()}; expected bigint, array or struct")
    return layouts


def unpack_token_columns(df: DataFrame, codecs: Mapping[str, MLTCodec]) -> DataFrame:
    """``df`` with every packed token column ``c_mlt`` (bigint) turned into array<int>.

    Example::

        ratings = unpack_token_columns(read_delta(spark, path), read_codecs(path))
    """
    for column, layout in stored_layouts(df.schema, codecs).items():
        if layout == "packed":
            name = f"{column}{TOKEN_SUFFIX}"
            df = df.withColumn(name, mlt_unpack(name, codecs[column]))
    return df


def tokenize_dataframe(
    df: DataFrame,
    codecs: Mapping[str, MLTCodec],
    *,
    handle_invalid: str = "error",
    engine: str = "auto",
    sources: Mapping[str, str] | None = None,
    layouts: Mapping[str, str] | None = None,
) -> tuple[DataFrame, DataFrame | None]:
    """Add ``c_mlt`` tokens for every codec column ``c`` (encoding ``sources[c]`` if given,
    e.g. the dense id of a string key), as an array<int> or, where ``layouts[c]`` is
    ``"packed"``, as one bigint (see :func:`spark_mlt.functions.mlt_unpack`).

    With ``handle_invalid="quarantine"`` the second value is the rejected rows with a
    ``mlt_reason`` column (the first holds only valid rows); otherwise it is None.
    """
    from pyspark.sql import functions as F

    per_row = "error" if handle_invalid == "error" else "null"
    sources = dict(sources or {})
    layouts = dict(layouts or {})
    out = df
    for column, codec in codecs.items():
        source = sources.get(column, column)
        output = "packed" if layouts.get(column) == "packed" else "array"
        tokens = mlt_encode(source, codec, output=output, handle_invalid=per_row, engine=engine)  # type: ignore[arg-type]
        out = out.withColumn(f"{column}{TOKEN_SUFFIX}", tokens)
    if handle_invalid != "quarantine":
        return out, None
    reasons = [
        F.when(
            F.col(sources.get(column, column)).isNotNull() & F.col(f"{column}{TOKEN_SUFFIX}").isNull(),
            F.concat(
                F.lit(f"{column}: id "),
                F.col(sources.get(column, column)).cast("string"),
                F.lit(f" is not a whole number in [0, {codec.max_id + 1}) (p={codec.p}, n={codec.n})"),
            ),
        )
        for column, codec in codecs.items()
    ]
    with_reason = out.withColumn("mlt_reason", F.concat_ws("; ", *reasons))
    good = with_reason.where(F.col("mlt_reason") == "").drop("mlt_reason")
    rejected = with_reason.where(F.col("mlt_reason") != "").drop(*[f"{c}{TOKEN_SUFFIX}" for c in codecs])
    return good, rejected


def _existing_codecs(output: str, mode: str) -> tuple[dict[str, MLTCodec], dict[str, str]]:
    """The codecs already stored at ``output`` and their token layouts (appends and
    overwrites keep the table's schema); fails early when mode="error" and the table exists."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(output):
        return {}, {}
    if mode == "error":
        raise TableExistsError(f"a Delta table already exists at {output} (use --mode append or overwrite)")
    codecs = read_codecs(output)
    return codecs, _table_layouts(DeltaTable(output), codecs)


def _table_layouts(table: Any, codecs: Mapping[str, MLTCodec]) -> dict[str, str]:
    """:func:`stored_layouts` of a delta-rs ``DeltaTable``'s schema (no Spark session needed)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return stored_layouts(from_arrow_schema(pa.schema(table.schema().to_arrow())), codecs)


def tokenize_movielens(
    spark: SparkSession,
    input_folder: str,
    output: str,
    *,
    mode: str = "error",
    p: int | None = None,
    n: int | None = None,
    seed: int = DEFAULT_SEED,
    engine: str = "auto",
    partition_by: Sequence[str] = (),
    run_id: str | None = None,
    token_layout: str = "auto",
    data_page_version: int = 2,
) -> JobReport:
    """Tokenise a MovieLens release's ratings (userId, movieId) into a Delta table.

    The table holds userId, movieId, rating, timestamp, the paper's label (rating >= 4, as 0/1,
    as the paper's code labels it)
    and ``userId_mlt`` / ``movieId_mlt``; both codecs are stored in its properties. Tokens are
    stored packed in a bigint when they fit (``token_layout="auto"``; see
    :func:`resolve_layouts`), else as array<int>, in Parquet v2 data pages unless
    ``data_page_version=1`` (see :func:`spark_mlt.delta.token_write_options`). With a
    ``run_id`` the write is idempotent (see :func:`spark_mlt.delta.write_delta`).
    """
    from pyspark.sql import functions as F

    from spark_mlt.movielens import detect_layout, read_ratings

    page_version = check_data_page_version(data_page_version)

    report = JobReport()
    with _Phase(report, "read"):
        layout = detect_layout(input_folder)
        ratings = read_ratings(spark, input_folder).withColumn("label", (F.col("rating") >= 4).cast("int"))
    existing, existing_layouts = _existing_codecs(output, mode)
    with _Phase(report, "size codecs"):
        report.codecs = size_codecs(ratings, ["userId", "movieId"], p=p, n=n, seed=seed, existing=existing)
        report.layouts = resolve_layouts(report.codecs, token_layout, existing_layouts)
    with _Phase(report, "tokenize and write"):
        tokens, _ = tokenize_dataframe(ratings, report.codecs, engine=engine, layouts=report.layouts)
        info = {"spark_mlt.job": "movielens", "spark_mlt.input": input_folder, "spark_mlt.layout": layout.name}
        report.write = write_delta(
            tokens,
            output,
            report.codecs,
            mode=cast("WriteMode", mode),
            partition_by=partition_by,
            commit_info=info,
            run_id=run_id,
            write_options=token_write_options(
                tokens, [f"{c}{TOKEN_SUFFIX}" for c in report.codecs], data_page_version=page_version
            ),
        )
    report.rows_in = report.rows_out = report.write.rows
    return report


def _read_input(spark: SparkSession, source: str, fmt: str | None, options: Mapping[str, str]) -> DataFrame:
    if fmt is None:
        return spark.table(source)
    if fmt == "delta":
        return read_delta(spark, source)
    reader = spark.read.options(**options)
    if fmt == "csv":
        reader = reader.option("header", options.get("header", "true")).option(
            "inferSchema", options.get("inferSchema", "true")
        )
    return reader.format(fmt).load(source)


def tokenize_table(
    spark: SparkSession,
    source: str,
    output: str,
    columns: Sequence[str],
    *,
    input_format: str | None = "parquet",
    read_options: Mapping[str, str] | None = None,
    mode: str = "error",
    p: int | None = None,
    n: int | None = None,
    seed: int = DEFAULT_SEED,
    handle_invalid: str = "error",
    quarantine: str | None = None,
    engine: str = "auto",
    partition_by: Sequence[str] = (),
    vocabulary_dir: str | None = None,
    run_id: str | None = None,
    token_layout: str = "auto",
    data_page_version: int = 2,
) -> JobReport:
    """Tokenise id columns of any table (a path with a format, or a catalog table if
    ``input_format`` is None) into a Delta table.

    ``handle_invalid``: ``"error"`` fails the job, ``"null"`` keeps the row with null tokens,
    ``"quarantine"`` writes rejected rows with a ``mlt_reason`` column to a side Delta table
    (``quarantine``, default ``<output>_quarantine``) so no row is lost.

    String columns are keys: each goes through an append-only vocabulary Delta table
    (``vocabulary_dir/<column>``, default ``<output>_vocab/<column>``) to a dense id, which is
    tokenised; the vocabulary's path is stored in the table property ``mlt.vocab.<column>``
    and decoding returns the original keys. Token columns are written as by
    :func:`tokenize_movielens` (``data_page_version``).
    """
    page_version = check_data_page_version(data_page_version)
    if handle_invalid not in ("error", "null", "quarantine"):
        raise MLTError(f"handle_invalid must be 'error', 'null' or 'quarantine', got {handle_invalid!r}")
    report = JobReport()
    with _Phase(report, "read"):
        df = _read_input(spark, source, input_format, read_options or {})
        unknown = [c for c in columns if c not in df.columns]
        if unknown:
            raise MLTError(f"column(s) {unknown} not in the input; it has {df.columns}")
    existing, existing_layouts = _existing_codecs(output, mode)
    types = dict(df.dtypes)
    string_keys = [c for c in columns if types[c] == "string"]
    sources = {c: f"__{c}_id" for c in string_keys}
    properties = {}
    if string_keys:
        from spark_mlt.vocab import assign_ids

        with _Phase(report, "vocabularies"):
            for column in string_keys:
                path = os.path.join(vocabulary_dir or f"{output.rstrip('/')}_vocab", column)
                df = assign_ids(spark, df, column, path, id_column=sources[column])
                properties[f"{VOCAB_PROPERTY_PREFIX}{column}"] = os.path.abspath(path)
    with _Phase(report, "size codecs"):
        sized = size_codecs(
            df,
            [sources.get(c, c) for c in columns],
            p=p,
            n=n,
            seed=seed,
            existing={sources.get(c, c): k for c, k in existing.items()},
        )
        report.codecs = {c: sized[sources.get(c, c)] for c in columns}
        report.layouts = resolve_layouts(report.codecs, token_layout, existing_layouts)
    with _Phase(report, "tokenize and write"):
        good, rejected = tokenize_dataframe(
            df, report.codecs, handle_invalid=handle_invalid, engine=engine, sources=sources, layouts=report.layouts
        )
        good = good.drop(*sources.values())
        if rejected is not None:
            rejected = rejected.drop(*sources.values())
        info = {"spark_mlt.job": "tokenize", "spark_mlt.input": source, "spark_mlt.handle_invalid": handle_invalid}
        if rejected is not None:
            # The rejected rows are committed first: if the job dies between the two commits,
            # no row is lost (a re-run with the same run id then skips the quarantine commit).
            target = quarantine or f"{output.rstrip('/')}_quarantine"
            side = write_delta(
                rejected,
                target,
                {},
                mode="append",
                commit_info={**info, "spark_mlt.quarantine_of": output},
                run_id=run_id,
            )
            report.rows_rejected = side.rows
        report.write = write_delta(
            good,
            output,
            report.codecs,
            mode=cast("WriteMode", mode),
            partition_by=partition_by,
            commit_info=info,
            properties=properties,
            run_id=run_id,
            write_options=token_write_options(
                good, [f"{c}{TOKEN_SUFFIX}" for c in report.codecs], data_page_version=page_version
            ),
        )
        report.rows_out = report.write.rows
    report.rows_in = report.rows_out + report.rows_rejected
    return report


def decode_table(
    spark: SparkSession,
    source: str,
    *,
    output: str | None = None,
    output_format: str = "delta",
    mode: str = "error",
    verify: bool = False,
    engine: str = "auto",
) -> JobReport:
    """Decode every ``c_mlt`` column of a tokenised Delta table back to ``c``.

    With ``verify`` the decoded ids are compared with the kept original columns and the
    mismatches counted (0 expected); otherwise the decoded table is written to ``output``
    (Delta, or Parquet with ``output_format="parquet"``).
    """
    from pyspark.sql import functions as F

    report = JobReport()
    with _Phase(report, "read"):
        codecs = read_codecs(source)
        table = read_delta(spark, source)
        for column in codecs:
            if f"{column}{TOKEN_SUFFIX}" not in table.columns:
                raise MissingCodecError(
                    f"table {source} has a codec for {column!r} but no {column}{TOKEN_SUFFIX} column"
                )
        if not codecs:
            raise MissingCodecError(f"table {source} stores no codec (no mlt.codec.* property): nothing to decode")
        report.codecs = codecs
    from spark_mlt.delta import read_properties

    vocabularies = {
        key.removeprefix(VOCAB_PROPERTY_PREFIX): value
        for key, value in read_properties(source).items()
        if key.startswith(VOCAB_PROPERTY_PREFIX)
    }
    report.layouts = stored_layouts(table.schema, codecs)
    decoded = {}
    for column, codec in codecs.items():
        form = report.layouts[column]
        ids = mlt_decode(f"{column}{TOKEN_SUFFIX}", codec, form=form, engine=engine)  # type: ignore[arg-type]
        if column in vocabularies:
            from spark_mlt.vocab import keys_for_ids

            table = keys_for_ids(
                spark,
                table.withColumn(f"__{column}_id", ids),
                f"__{column}_id",
                vocabularies[column],
                key_column=f"__{column}_key",
            ).drop(f"__{column}_id")
            decoded[column] = F.col(f"__{column}_key")
        else:
            decoded[column] = ids
    if verify:
        with _Phase(report, "verify"):
            missing = [c for c in codecs if c not in table.columns]
            if missing:
                raise MLTError(f"--verify needs the original column(s) {missing}, which the table does not keep")
            bad = F.lit(False)
            for column, ids in decoded.items():
                bad = bad | ~F.col(column).eqNullSafe(ids)
            counts = table.agg(F.count(F.lit(1)).alias("rows"), F.sum(bad.cast("long")).alias("bad")).first()
            report.rows_in = report.rows_out = int(counts["rows"]) if counts else 0
            report.mismatches = int(counts["bad"] or 0) if counts else 0
        return report
    if output is None:
        raise MLTError("decode needs --output, or --verify")
    with _Phase(report, "decode and write"):
        result = table
        for column, ids in decoded.items():
            result = result.withColumn(column, ids)
        result = result.drop(*[f"{c}{TOKEN_SUFFIX}" for c in codecs], *[f"__{c}_key" for c in vocabularies])
        if output_format == "parquet":
            result.write.mode("errorifexists" if mode == "error" else mode).parquet(output)
            report.rows_out = spark.read.parquet(output).count()
        else:
            report.write = write_delta(result, output, {}, mode=mode, commit_info={"spark_mlt.job": "decode"})  # type: ignore[arg-type]
            report.rows_out = report.write.rows
        report.rows_in = report.rows_out
    return report


def inspect_table(path: str) -> dict[str, Any]:
    """A table's codecs (p, n, capacity, fingerprint, token layout), versions and row count."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        raise FileNotFoundError(f"no Delta table at {os.fspath(path)}")
    table = DeltaTable(path)
    codecs = read_codecs(path)
    import pyarrow.compute as pc

    actions = pa.table(table.get_add_actions(flatten=True))
    rows = int(pc.sum(actions.column("num_records")).as_py() or 0)
    layouts = _table_layouts(table, codecs)
    return {
        "path": os.fspath(path),
        "version": table.version(),
        "rows": rows,
        "codecs": {
            c: {
                "p": k.p,
                "n": k.n,
                "seed": k.seed,
                "capacity": k.capacity,
                "fingerprint": k.fingerprint,
                "layout": layouts.get(c),
                "packed_bits": k.packed_bits if layouts.get(c) == "packed" else None,
            }
            for c, k in codecs.items()
        },
        "history": [
            {key: entry.get(key) for key in ("version", "timestamp", "operation", "spark_mlt.job", "spark_mlt.rows")}
            for entry in table.history(10)
        ],
    }
