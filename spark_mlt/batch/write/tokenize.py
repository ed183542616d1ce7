"""Tokenize id columns of a DataFrame or any table into a Delta table.

The token column of an id column ``c`` is ``c_mlt`` (``TOKEN_SUFFIX``). Codecs are sized by
`spark_mlt.column.fit_codecs`, the same rule the ML stages use; a table that already exists keeps
its codecs and token layouts. A job opens its output table once
([`spark_mlt.storage.snapshot_for_write`][spark_mlt.storage.snapshot_for_write], before any Spark
work) and hands that snapshot down to
[`spark_mlt.storage.write_delta`][spark_mlt.storage.write_delta], which stores the codecs in the
table's properties.

Storage layouts: ``packed`` (the n tokens in one bigint, ``codec.packed_bits`` bits each)
when they fit in 64 bits, else ``array`` (array<int>). Packing keeps the job near the cost of
a plain Parquet write, since Spark's Parquet writer pays per value.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt.batch.job.options import InvalidRowOptions, JobOptions, TokenizingOptions, quarantine_path, sizing_of
from spark_mlt.batch.job.report import JobReport, phase
from spark_mlt.batch.job.thresholds import check_rejected, warn_capacity
from spark_mlt.batch.write.options import BatchOptions, TokenizeOptions, resolve_input
from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import DEFAULT_SEED, MLTCodec
from spark_mlt.column import fit_codecs, mlt_encode
from spark_mlt.column.layouts import Layout, StorageLayout, token_layouts
from spark_mlt.errors import MLTError, OptionError, TableOptionError, TableSchemaError, UnknownColumnError
from spark_mlt.options import ENGINES, HANDLE_INVALID, TOKEN_SUFFIX, Engine, HandleInvalid, RowHandling, check_choice
from spark_mlt.steps import reached
from spark_mlt.storage import (
    AppTransaction,
    DeltaWriteResult,
    TableSnapshot,
    WriteMode,
    WriteOptions,
    assign_ids,
    planned_size,
    read_delta,
    snapshot_for_write,
    token_write_options,
    vocabulary_properties,
    vocabulary_property_value,
    write_delta,
)
from spark_mlt.storage.backends import DeltaBackend, resolve_backend
from spark_mlt.storage.catalog import is_table_name
from spark_mlt.storage.properties import id_type_properties, id_types

__all__ = [
    "QUARANTINE_APP_SUFFIX",
    "REASON_COLUMN",
    "FrameTarget",
    "QuarantineWrite",
    "check_id_types",
    "check_names",
    "check_output",
    "fit_job_codecs",
    "job_backend",
    "job_tokens",
    "key_ids",
    "resolve_layouts",
    "split_invalid",
    "tokenize_dataframe",
    "tokenize_frame",
    "tokenize_table",
    "vocabulary_path",
    "write_tokens",
]


def resolve_layouts(
    codecs: Mapping[str, MLTCodec], layout: StorageLayout = "auto", existing: Mapping[str, Layout] | None = None
) -> dict[str, Layout]:
    """The storage layout of each token column: ``"packed"`` (one bigint) or ``"array"``.

    ``"auto"`` keeps an existing table's layout, else packs when the tokens fit in 64 bits.

    Raises:
        MLTError: ``layout`` contradicts the existing table's layout of a column.
        CodecParameterError: ``"packed"`` for tokens that do not fit in 64 bits.
    """
    layouts: dict[str, Layout] = {}
    for column, codec in codecs.items():
        stored = (existing or {}).get(column)
        if stored is not None and layout not in ("auto", stored):
            raise MLTError(
                f"layout={layout!r}: column {column}{TOKEN_SUFFIX} of the existing table stores tokens as "
                f"{stored!r}; cannot append them as {layout!r} (pass layout='auto' or layout={stored!r})",
                parameter="layout",
            )
        if stored is None and layout == "packed":
            codec.require_packed_bits()
        automatic: Layout = "packed" if codec.packed_bits else "array"
        layouts[column] = stored or ("packed" if layout == "packed" else "array" if layout == "array" else automatic)
    return layouts


#: The column that says why a row's ids got no tokens (``skip``, ``quarantine``): null when they all did.
REASON_COLUMN = "mlt_reason"


def _invalid_reason(source: str, column: str, codec: MLTCodec) -> Column:
    """Why the id in ``source`` got no tokens (out of range, negative, not a whole number), or
    null when it got some (or is null: null ids get null tokens). A string key's id comes from
    its vocabulary (``source`` is not ``column``): the reason names the key too."""
    value = F.col(source)
    domain = f"[0, {codec.max_id + 1}) of its codec (p={codec.p}, n={codec.n})"
    what = (
        F.lit(f"{column}: id ")
        if source == column
        else F.concat(F.lit(f"{column}: "), F.col(column).cast("string"), F.lit(": vocabulary id "))
    )
    why = (
        F.when(value < 0, F.lit(" is negative: ids are in " + domain))
        .when(
            value > F.lit(codec.max_id),
            F.lit(f" is out of range {domain}: re-size the codec (docs: Columns, Room to grow)"),
        )
        .otherwise(F.lit(" is not a whole number: ids are whole numbers in " + domain))
    )
    return F.when(
        value.isNotNull() & F.col(f"{column}{TOKEN_SUFFIX}").isNull(),
        F.concat(what, value.cast("string"), why),
    )


def job_backend(capabilities: Capabilities) -> DeltaBackend:
    """The Delta backend a job writes with in a session with ``capabilities``: delta-spark where
    it has Delta's jars, else the jar-free path."""
    return resolve_backend(capabilities)


def tokenize_dataframe(
    df: DataFrame,
    codecs: Mapping[str, MLTCodec],
    *,
    handle_invalid: HandleInvalid = "error",
    engine: Engine = "auto",
    sources: Mapping[str, str] | None = None,
    layouts: Mapping[str, Layout] | None = None,
    capabilities: Capabilities | None = None,
) -> DataFrame:
    """Add ``c_mlt`` tokens for every codec column ``c`` (encoding ``sources[c]`` if given,
    e.g. the dense id of a string key), as array<int> or, where ``layouts[c]`` is
    ``"packed"``, as one bigint (see [`spark_mlt.column.mlt_unpack`][spark_mlt.column.mlt_unpack]).

    ``handle_invalid``: ``error`` fails the query on an invalid id, ``null`` gives it null
    tokens; ``skip`` and ``quarantine`` give it null tokens too and add the column
    ``mlt_reason`` (`REASON_COLUMN`), which says why
    a row's ids got no tokens (null for a valid row):
    [`split_invalid`][spark_mlt.batch.write.tokenize.split_invalid] splits the valid rows from the
    rejected ones. To read the input once, count the rejected rows in the write of the valid
    ones (``DataFrame.observe``, as the jobs do for ``skip``) or persist the frame before
    writing both parts (``quarantine``). ``capabilities``: what ``df``'s session has
    (default: asked once here).

    Example::

        tokens = tokenize_dataframe(ratings, fit_codecs(ratings, ["userId"]))
    """
    check_choice("handle_invalid", handle_invalid, HANDLE_INVALID)  # a public function: its own boundary
    check_choice("engine", engine, ENGINES)
    sources = dict(sources or {})
    out = df
    per_row: RowHandling = "error" if handle_invalid == "error" else "null"
    caps = capabilities if capabilities is not None else Capabilities.of(df.sparkSession)
    for column, codec in codecs.items():
        layout = (layouts or {}).get(column, "array")
        source = sources.get(column, column)
        tokens = mlt_encode(source, codec, layout=layout, handle_invalid=per_row, engine=engine, capabilities=caps)
        out = out.withColumn(f"{column}{TOKEN_SUFFIX}", tokens)
    if handle_invalid in ("error", "null"):
        return out
    reasons = [_invalid_reason(sources.get(column, column), column, codec) for column, codec in codecs.items()]
    # concat_ws skips nulls: "" when every id got its tokens, which becomes null
    reason = F.concat_ws("; ", *reasons)
    return out.withColumn(REASON_COLUMN, F.when(reason != "", reason))


def split_invalid(tokens: DataFrame, codecs: Mapping[str, MLTCodec]) -> tuple[DataFrame, DataFrame]:
    """The valid rows of a frame of [`tokenize_dataframe`][spark_mlt.batch.write.tokenize.tokenize_dataframe]
    with ``handle_invalid="skip"`` or ``"quarantine"`` (without ``mlt_reason``), and the rejected
    rows (with ``mlt_reason``, without the token columns of ``codecs``). Both are filters of
    ``tokens``: persisted, it is computed once for the two.

    Example::

        good, rejected = split_invalid(tokenize_dataframe(df, codecs, handle_invalid="skip"), codecs)
    """
    reason = F.col(REASON_COLUMN)
    good = tokens.where(reason.isNull()).drop(REASON_COLUMN)
    rejected = tokens.where(reason.isNotNull()).drop(*[f"{c}{TOKEN_SUFFIX}" for c in codecs])
    return good, rejected


def check_names(names: Sequence[str], available: Sequence[str], parameter: str, where: str = "the input") -> None:
    """Refuses names that are not among ``available``, suggesting the nearest ones.

    Raises:
        UnknownColumnError: naming ``parameter``, the unknown names and the near ones.
    """
    unknown = [name for name in names if name not in available]
    if not unknown:
        return
    near = {name: difflib.get_close_matches(name, list(available), n=1, cutoff=0.6) for name in unknown}
    hints = "; ".join(f"did you mean {near[name][0]!r} for {name!r}?" for name in unknown if near[name])
    raise UnknownColumnError(
        f"{parameter} names column(s) {unknown} not in {where}, which has {list(available)}"
        + (f"; {hints}" if hints else ""),
        parameter=parameter,
    )


def check_output(
    snapshot: TableSnapshot | None,
    names: Sequence[str],
    columns: Sequence[str],
    options: JobOptions,
    *,
    kept_ids: Sequence[str] = (),
) -> None:
    """Refuses, before anything is written, options that the existing table ``snapshot`` cannot
    take with input columns ``names``: other id columns than it tokenizes, a codec (``p``, ``n``,
    ``seed``) or token layout other than it holds (unless the options ``resize``), or raw ids
    kept where it leaves them out (``drop_ids``) or the other way round.

    Raises:
        UnknownColumnError: a column is not among ``names``.
        TableOptionError: naming the option, what the table holds and the way forward.
    """
    check_names(columns, names, "columns")
    if snapshot is None or not snapshot.codecs:
        return
    where = f"the table {snapshot.path}"
    held = sorted(snapshot.codecs)
    if sorted(columns) != held:
        raise TableOptionError(
            f"columns: {where} tokenizes {held}; got {sorted(columns)}: a table keeps its id columns (write the "
            "others to a new table)",
            parameter="columns",
        )
    resize = sizing_of(options).resize
    for column, codec in snapshot.codecs.items():
        wanted = {"p": options.p, "n": options.n, "seed": options.seed if options.seed != DEFAULT_SEED else None}
        for name, value in wanted.items():
            if not resize and value is not None and value != getattr(codec, name):
                raise TableOptionError(
                    f"{name}={value}: {where} holds the codec p={codec.p}, n={codec.n}, seed={codec.seed} for column "
                    f"{column!r} (capacity {codec.capacity}); a table's rows hold one codec: give none, or "
                    "re-size every row with resize=True (docs: Columns, Room to grow)",
                    parameter=name,
                )
    layouts = token_layouts(from_arrow_schema(snapshot.schema), snapshot.codecs)
    for column, layout in layouts.items():
        if not resize and options.layout not in ("auto", layout):
            raise TableOptionError(
                f"layout={options.layout!r}: {where} stores the tokens of {column!r} as {layout!r}; pass "
                f"layout='auto' or layout={layout!r}",
                parameter="layout",
            )
    stored = set(snapshot.schema.names)
    columns = [c for c in columns if c not in kept_ids]
    kept = [c for c in columns if c in stored]
    if options.drop_ids and kept and not resize:
        raise TableOptionError(
            f"drop_ids: {where} keeps the raw id column(s) {kept} beside their tokens; a table keeps one shape: "
            "leave drop_ids out, or rewrite it with mode='overwrite' and resize=True",
            parameter="drop_ids",
        )
    dropped = [c for c in columns if c not in stored]
    if not options.drop_ids and dropped and not resize:
        raise TableOptionError(
            f"drop_ids: {where} leaves the raw id column(s) {dropped} out; pass drop_ids=True",
            parameter="drop_ids",
        )


def check_id_types(snapshot: TableSnapshot | None, df: DataFrame, columns: Sequence[str], options: JobOptions) -> None:
    """Refuses id columns of ``df`` of another type than the existing table ``snapshot`` records
    for them (``mlt.type.<column>``), before anything is written: decoding gives the table's ids
    back in the recorded type, which an id of a wider one may not fit (a re-size records anew).

    Raises:
        TableSchemaError: naming the column, both types and the way forward.
    """
    recorded = id_types(snapshot.properties) if snapshot is not None else {}
    if snapshot is None or not recorded or sizing_of(options).resize:
        return
    given = dict(df.dtypes)
    for column in columns:
        if column in recorded and column in given and given[column] != recorded[column]:
            raise TableSchemaError(
                f"columns: the table {snapshot.path} holds the ids of {column!r} as {recorded[column]} "
                f"(mlt.type.{column}), the type decoding gives them back in; this input's {column!r} is "
                f"{given[column]}: cast it to {recorded[column]}, or write a new table",
                parameter="columns",
            )


def fit_job_codecs(
    report: JobReport,
    df: DataFrame,
    columns: Sequence[str],
    options: JobOptions,
    snapshot: TableSnapshot | None,
    *,
    sources: Mapping[str, str] | None = None,
) -> None:
    """Set ``report.codecs`` (those of the existing table ``snapshot`` unless the options
    ``resize`` it, else sized from ``df``'s column or its ``sources[column]`` with the options'
    ``headroom``) and ``report.layouts``
    ([`resolve_layouts`][spark_mlt.batch.write.tokenize.resolve_layouts])."""
    kept = snapshot is not None and not sizing_of(options).resize
    codecs = snapshot.codecs if kept and snapshot is not None else {}
    layouts = token_layouts(from_arrow_schema(snapshot.schema), codecs) if kept and snapshot is not None else {}
    source = {c: (sources or {}).get(c, c) for c in columns}
    with phase(report, "size codecs"):
        sized = fit_codecs(
            df,
            list(source.values()),
            p=options.p,
            n=options.n,
            seed=options.seed,
            existing={source[c]: codec for c, codec in codecs.items() if c in source},
            headroom=sizing_of(options).headroom,
        )
        report.codecs = {c: sized[source[c]] for c in columns}
        report.layouts = dict(resolve_layouts(report.codecs, options.layout, layouts))


def write_tokens(
    tokens: DataFrame,
    output: str,
    report: JobReport,
    options: BatchOptions,
    *,
    snapshot: TableSnapshot | None,
    write: WriteOptions,
    transaction: AppTransaction | None = None,
    kept_ids: Sequence[str] = (),
) -> DeltaWriteResult:
    """Write ``tokens`` to the Delta table ``output`` (as the job found it: ``snapshot``) with
    ``report.codecs``, the options' partitioning, token columns in the options' Parquet data
    pages, idempotent by the options' run id or ``transaction``; ``write`` gives the commit's
    metadata and a new table's properties; with ``drop_ids`` the raw id columns are left out,
    but ``kept_ids``. A new table records each id column's type (``mlt.type.<column>``), which
    decoding gives its ids back in. Sets ``report.write`` and ``report.rows_out``, and returns
    the write's result."""
    token_columns = [f"{c}{TOKEN_SUFFIX}" for c in report.codecs]
    types = id_type_properties({c: tokens.schema[c].dataType.simpleString() for c in report.codecs})
    if options.drop_ids:
        tokens = tokens.drop(*(c for c in report.codecs if c not in kept_ids))
    parquet = token_write_options(tokens, token_columns, data_page_version=options.data_page_version)
    backend = job_backend(report.capabilities or Capabilities.of(tokens.sparkSession))
    report.write = write_delta(
        tokens,
        output,
        report.codecs,
        mode=options.mode,
        run_id=options.run_id if transaction is None else transaction,
        snapshot=snapshot,
        options=dataclasses.replace(
            write,
            properties={**types, **write.properties},
            partition_by=options.partition_by,
            parquet_options=parquet,
            backend=backend,
            resize=sizing_of(options).resize,
        ),
        storage_options=options.storage_options,
    )
    report.rows_out = report.write.rows
    return report.write


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


def key_ids(
    spark: SparkSession,
    df: DataFrame,
    columns: Sequence[str],
    output: str,
    options: TokenizingOptions,
    *,
    codecs: Mapping[str, MLTCodec] | None = None,
) -> tuple[DataFrame, dict[str, str], dict[str, str]]:
    """String key columns through their append-only vocabularies: ``df`` with a dense id
    column per key, the id column of each key, and the table properties naming the vocabularies.
    With ``handle_invalid="error"``, a vocabulary that would outgrow its column's codec (of the
    existing table: ``codecs``) is refused before anything is appended."""
    types = dict(df.dtypes)
    sources = {c: f"__{c}_id" for c in columns if types[c] == "string"}
    paths = {}
    for column, id_column in sources.items():
        path = vocabulary_path(output, column, options)
        codec = (codecs or {}).get(column) if options.handle_invalid == "error" and not options.resize else None
        df = assign_ids(
            spark,
            df,
            column,
            path,
            id_column=id_column,
            storage_options=options.storage_options,
            capacity=None if codec is None else codec.max_id + 1,
        )
        paths[column] = vocabulary_property_value(output, path)
    reached("vocabularies appended")
    return df, sources, vocabulary_properties(paths)


def _planned_key_ids(
    spark: SparkSession, df: DataFrame, columns: Sequence[str], output: str, options: TokenizeOptions
) -> tuple[DataFrame, dict[str, str]]:
    """A dry run's stand-in for [`key_ids`][spark_mlt.batch.write.tokenize.key_ids]: each key column's
    id column holds the largest id its vocabulary would hold after the run, so the codecs size as a
    real run's; nothing is written."""
    types = dict(df.dtypes)
    sources = {c: f"__{c}_id" for c in columns if types[c] == "string"}
    for column, id_column in sources.items():
        size = planned_size(
            spark, df, column, vocabulary_path(output, column, options), storage_options=options.storage_options
        )
        df = df.withColumn(id_column, F.lit(size - 1 if size else None).cast("bigint"))
    return df, sources


def vocabulary_path(output: str, column: str, options: InvalidRowOptions) -> str:
    """Where the vocabulary of key column ``column`` lives: ``<vocabulary_dir>/<column>``, by
    default ``<output>_vocab/<column>``; for a catalog table ``output`` the table
    ``<output>_vocab_<column>`` next to it."""
    if options.vocabulary_dir is None and is_table_name(output):
        name = f"{output}_vocab_{column}"
        if not is_table_name(name):
            raise OptionError(
                f"vocabulary_dir: key column {column!r} gives no table name ({name!r}); "
                "pass vocabulary_dir (a folder) for its vocabulary",
                parameter="vocabulary_dir",
            )
        return name
    return f"{(options.vocabulary_dir or output.rstrip('/') + '_vocab').rstrip('/')}/{column}"


#: Where ``quarantine`` keeps the tokens between its two writes (measured in ``make bench-delta``).
_SET_ASIDE_LEVEL = StorageLevel.MEMORY_AND_DISK


#: What follows the application id of a job's data in the id its quarantine's commits record.
QUARANTINE_APP_SUFFIX = ":quarantine"


@dataclass(frozen=True)
class QuarantineWrite:
    """How a job's rejected rows go to its quarantine: ``mode``, and the ``transaction`` that
    records them (None: the data's writer with ``:quarantine``, or the run id). A mirror's full
    refresh overwrites its quarantine, planned from the version it read."""

    mode: WriteMode = "append"
    transaction: AppTransaction | None = None


def _quarantine(
    rejected: DataFrame,
    output: str,
    report: JobReport,
    options: TokenizeOptions,
    info: Mapping[str, str],
    *,
    transaction: AppTransaction | None,
    side: QuarantineWrite,
) -> None:
    """Commit the rejected rows to the quarantine table before the data, so that if the job dies
    between the two commits no row is lost (a re-run with the same run id, or a replayed batch,
    then skips the quarantine commit: its writer is the data's ``app_id`` + ``:quarantine``)."""
    own = side.transaction
    if own is None and transaction is not None:
        own = AppTransaction(transaction.app_id + QUARANTINE_APP_SUFFIX, transaction.version)
    written = write_delta(
        rejected,
        quarantine_path(output, options.quarantine),
        {},
        mode=side.mode,
        run_id=own if own is not None else options.run_id,
        options=WriteOptions(
            commit_info={**info, "spark_mlt.quarantine_of": output},
            backend=job_backend(report.capabilities or Capabilities.of(rejected.sparkSession)),
        ),
        storage_options=options.storage_options,
    )
    report.rows_rejected = written.rows


def counts_with_the_write(capabilities: Capabilities) -> bool:
    """Whether ``skip`` counts its rejected rows with an observation on the write: in Classic
    (tested with both backends, on Spark 3.5 and 4) and over Connect from Spark 4.0, whose
    client sends a write's observations with it. PySpark 3.5's Connect client builds the plan,
    but its ``Observation`` has no result to get."""
    return not capabilities.connect or capabilities.spark_line >= (4, 0)


def _write_counting_rejected(
    tokens: DataFrame,
    output: str,
    report: JobReport,
    options: BatchOptions,
    *,
    snapshot: TableSnapshot | None,
    write: WriteOptions,
    transaction: AppTransaction | None,
    kept_ids: Sequence[str] = (),
) -> None:
    """``skip`` in one Spark job: the rejected rows are counted by an observation on the frame
    the valid rows are written from, so the count comes with the write and nothing is persisted.

    The count is taken above the filter (Spark pushes no filter through an observation) and is
    the successful task attempts' (a retried task is not counted twice). A write that the table
    already holds (``report.write.skipped``: its run id or transaction is committed) may run no
    Spark job at all, and ``Observation.get`` would then wait forever: it reports 0 rejected
    rows, as it reports 0 written ones."""
    observation = Observation()  # a fresh name per write: concurrent writes of a session do not mix
    rejected = F.count(F.when(F.col(REASON_COLUMN).isNotNull(), 1)).alias("rejected")
    good, _ = split_invalid(tokens.observe(observation, rejected), report.codecs)
    result = write_tokens(
        good, output, report, options, snapshot=snapshot, write=write, transaction=transaction, kept_ids=kept_ids
    )
    report.rows_rejected = 0 if result.skipped else int(observation.get["rejected"])


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
    report = JobReport(capabilities=capabilities)
    backend = job_backend(capabilities)
    snapshot = snapshot_for_write(
        output, opts.mode, storage_options=opts.storage_options, backend=backend
    )  # before any Spark work
    with phase(report, "read"):
        df = _read_input(spark, input, opts)
    if opts.dry_run:
        check_output(snapshot, df.columns, columns, opts)  # a run checks in tokenize_frame
        check_id_types(snapshot, df, columns, opts)
        with phase(report, "vocabularies (planned)"):
            df, sources = _planned_key_ids(spark, df, columns, output, opts)
        fit_job_codecs(report, df, columns, opts, snapshot, sources=sources)
        report.dry_run = True
        return report
    info = {"spark_mlt.job": "tokenize", "spark_mlt.input": input, "spark_mlt.handle_invalid": opts.handle_invalid}
    if opts.resize:
        info["spark_mlt.resize"] = "true"
    tokenize_frame(df, output, columns, opts, FrameTarget(snapshot, commit_info=info), report=report)
    warn_capacity(report, output, "tokenize", storage_options=opts.storage_options)
    check_rejected(report, opts)
    return report


def job_tokens(df: DataFrame, report: JobReport, options: TokenizingOptions, sources: Mapping[str, str]) -> DataFrame:
    """``df``'s id columns tokenized as a job tokenizes them: with the report's codecs and layouts
    and the job's engine and ``handle_invalid``, a string key from its vocabulary id column
    (``sources``: column -> id column, dropped after).

    Example::

        tokens = job_tokens(with_ids, report, options, sources)
    """
    return tokenize_dataframe(
        df,
        report.codecs,
        handle_invalid=options.handle_invalid,
        engine=options.engine,
        sources=sources,
        layouts=report.layouts,
        capabilities=report.capabilities or Capabilities.of(df.sparkSession),
    ).drop(*sources.values())


@dataclass(frozen=True)
class FrameTarget:
    """The table a frame's tokens commit to, as a job found it, and how they commit: the batch
    job's append or overwrite, a streaming batch, a mirror's full refresh.

    Attributes:
        snapshot: the output table as found (None: there is none yet).
        commit_info: the commit's metadata.
        transaction: the commit's application transaction (a streaming batch's, a refresh's);
            None: the options' run id.
        quarantine: how the rejected rows go to the quarantine (a mirror's full refresh
            overwrites it).
        files: how the table's files are laid out (a mirror's key ranges: ``cluster_by``,
            ``max_file_rows``).
        kept_ids: id columns written even with ``drop_ids`` (a mirror's key).
    """

    snapshot: TableSnapshot | None
    commit_info: Mapping[str, str] = dataclasses.field(default_factory=dict)
    transaction: AppTransaction | None = None
    quarantine: QuarantineWrite = QuarantineWrite()
    files: WriteOptions | None = None
    kept_ids: Sequence[str] = ()


def tokenize_frame(
    df: DataFrame,
    output: str,
    columns: Sequence[str],
    options: TokenizeOptions,
    target: FrameTarget,
    *,
    report: JobReport | None = None,
) -> JobReport:
    """Tokenize ``df``'s id columns into the Delta table ``output`` as it was found
    (``target.snapshot``): string keys through their vocabularies, codecs kept or sized, invalid ids
    handled, rejected rows set aside, then one commit, idempotent by the options' run id or
    ``transaction`` (a streaming batch). The batch job's and each streaming batch's work.

    One pass: each input row is computed once, whatever ``options.handle_invalid`` says. With
    ``skip`` the rejected rows are counted in the Spark job that writes the valid ones (an
    observation, nothing persisted). With ``quarantine`` the rejected rows are committed to the
    quarantine before the valid ones are committed, so the two outputs take two Spark jobs over one
    computation of the tokens, kept at ``_SET_ASIDE_LEVEL`` between them (``skip`` does the same
    where no observation reports the write: Connect on Spark 3.5). A kept partition that is lost
    is computed again from the same input and the committed vocabularies, which give the same rows.
    ``target`` says how it commits ([`FrameTarget`][spark_mlt.batch.write.tokenize.FrameTarget]).

    Example::

        tokenize_frame(df, "out/orders_mlt", ["sku"], TokenizeOptions(mode="append"), FrameTarget(None))
    """
    opts, report = options, report or JobReport()
    snapshot, transaction, kept_ids, files = target.snapshot, target.transaction, target.kept_ids, target.files
    quarantine, commit_info = target.quarantine, target.commit_info
    if report.capabilities is None:
        report.capabilities = Capabilities.of(df.sparkSession)
    info = dict(commit_info or {})
    check_output(snapshot, df.columns, columns, opts, kept_ids=kept_ids)
    check_id_types(snapshot, df, columns, opts)
    with phase(report, "vocabularies"):
        df, sources, properties = key_ids(
            df.sparkSession, df, columns, output, opts, codecs=snapshot.codecs if snapshot is not None else None
        )
    fit_job_codecs(report, df, columns, opts, snapshot, sources=sources)
    write = dataclasses.replace(
        files or WriteOptions(), commit_info=info, properties={**(files or WriteOptions()).properties, **properties}
    )
    with phase(report, "tokenize and write"):
        tokens = job_tokens(df, report, opts, sources)
        if opts.handle_invalid in ("error", "null"):
            write_tokens(
                tokens, output, report, opts, snapshot=snapshot, write=write, transaction=transaction, kept_ids=kept_ids
            )
        elif opts.handle_invalid == "skip" and counts_with_the_write(report.capabilities):
            _write_counting_rejected(
                tokens, output, report, opts, snapshot=snapshot, write=write, transaction=transaction, kept_ids=kept_ids
            )
        else:
            tokens = tokens.persist(_SET_ASIDE_LEVEL)
            try:
                good, rejected = split_invalid(tokens, report.codecs)
                if opts.handle_invalid == "skip":
                    report.rows_rejected = rejected.count()
                else:
                    _quarantine(rejected, output, report, opts, info, transaction=transaction, side=quarantine)
                    reached("quarantine committed")
                write_tokens(
                    good,
                    output,
                    report,
                    opts,
                    snapshot=snapshot,
                    write=write,
                    transaction=transaction,
                    kept_ids=kept_ids,
                )
            finally:
                tokens.unpersist()
    report.rows_in = report.rows_out + report.rows_rejected
    return report
