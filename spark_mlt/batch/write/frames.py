"""A frame's id columns tokenized: string keys to dense ids through their vocabularies, token
columns added with each column's codec and layout, invalid ids given a reason, and the valid rows
split from the rejected ones. The steps every job's pipeline
([`spark_mlt.batch.write.pipeline`][spark_mlt.batch.write.pipeline]) runs, free of where the rows go.

Storage layouts: ``packed`` (the n tokens in one bigint, ``codec.packed_bits`` bits each)
when they fit in 64 bits, else ``array`` (array<int>). Packing keeps the job near the cost of
a plain Parquet write, since Spark's Parquet writer pays per value.

Example::

    tokens = tokenize_dataframe(ratings, fit_codecs(ratings, ["userId"]))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch.job.options import InvalidRowOptions, TokenizingOptions
from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column import mlt_encode
from spark_mlt.column.layouts import Layout, StorageLayout
from spark_mlt.errors import MLTError, OptionError
from spark_mlt.options import ENGINES, HANDLE_INVALID, TOKEN_SUFFIX, Engine, HandleInvalid, RowHandling, check_choice
from spark_mlt.steps import reached
from spark_mlt.storage import assign_ids, planned_size, vocabulary_properties, vocabulary_property_value
from spark_mlt.storage.catalog import is_table_name

__all__ = [
    "REASON_COLUMN",
    "key_ids",
    "planned_key_ids",
    "resolve_layouts",
    "split_invalid",
    "tokenize_dataframe",
    "vocabulary_path",
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
    [`split_invalid`][spark_mlt.batch.write.frames.split_invalid] splits the valid rows from the
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
    """The valid rows of a frame of [`tokenize_dataframe`][spark_mlt.batch.write.frames.tokenize_dataframe]
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


def planned_key_ids(
    spark: SparkSession, df: DataFrame, columns: Sequence[str], output: str, options: TokenizingOptions
) -> tuple[DataFrame, dict[str, str]]:
    """A dry run's stand-in for [`key_ids`][spark_mlt.batch.write.frames.key_ids]: each key column's
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
