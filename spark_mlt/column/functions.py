"""PySpark column functions: ``mlt_encode``, ``mlt_decode`` and ``mlt_unpack``.

Each takes its options as the [`spark_mlt.options`][spark_mlt.options] words, checks them once
([`check_choice`][spark_mlt.options.check_choice]), resolves the session's
[`Capabilities`][spark_mlt.capabilities.Capabilities] once (the active session's unless given), and
hands its input (`spark_mlt.column.inputs`) with the layout's object
([`spark_mlt.column.layouts`][spark_mlt.column.layouts]) to the engine the policy picks for them
(`spark_mlt.column.engine`). Input types are checked when
Spark analyses the query: anything but an integral or decimal id column fails with Spark's
DATATYPE_MISMATCH error, which names the column and its type. Decimal values must be whole
numbers within the bigint range; other values, negative ids and ids at or above the codec's
capacity are invalid rows, handled per ``handle_invalid``.
"""

from __future__ import annotations

from pyspark.sql import Column

from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column.engine import POLICY, ColumnOperation, Situation
from spark_mlt.column.inputs import Input, as_input
from spark_mlt.column.layouts import LAYOUT, LAYOUTS, UNPACK_LAYOUTS, VECTOR, Layout, TokenLayout, UnpackLayout
from spark_mlt.errors import MLTTypeError
from spark_mlt.options import ENGINES, ROW_HANDLING, Engine, RowHandling, check_choice

__all__ = ["check_codec", "decode_input", "mlt_decode", "mlt_encode", "mlt_unpack"]


def check_codec(codec: object) -> MLTCodec:
    """``codec`` if it is an [`MLTCodec`][spark_mlt.codec.codec.MLTCodec], else an error naming the type found."""
    if not isinstance(codec, MLTCodec):
        raise MLTTypeError(f"codec must be an MLTCodec, got {type(codec).__name__}", parameter="codec")
    return codec


def _options(
    codec: object, layout: object, layouts: tuple[Layout, ...], handle_invalid: object, engine: object
) -> tuple[MLTCodec, TokenLayout, RowHandling, Engine]:
    """The options of a column function, checked once."""
    checked = check_codec(codec)
    chosen = LAYOUT[check_choice("layout", layout, layouts)]
    if chosen is LAYOUT["packed"]:
        checked.require_packed_bits()
    return (
        checked,
        chosen,
        check_choice("handle_invalid", handle_invalid, ROW_HANDLING),
        check_choice("engine", engine, ENGINES),
    )


def _run(
    operation: ColumnOperation,
    source: Input,
    *,
    codec: MLTCodec,
    layout: TokenLayout,
    handle: RowHandling,
    engine: Engine,
    capabilities: Capabilities | None,
) -> Column:
    caps = capabilities if capabilities is not None else Capabilities.active()
    chosen = POLICY.engine(engine, Situation(operation, codec, layout, caps, bound=not source.by_name))
    run = {"encode": chosen.encode, "decode": chosen.decode, "unpack": chosen.unpack}[operation]
    return run(source, codec, layout, handle)


def mlt_encode(
    col: str | Column,
    codec: MLTCodec,
    *,
    layout: Layout = "array",
    handle_invalid: RowHandling = "error",
    engine: Engine = "auto",
    capabilities: Capabilities | None = None,
) -> Column:
    """The MLT tokens of an integer id column.

    Args:
        col: a column name or Column of an integral type (tinyint .. bigint) or a decimal
            holding whole numbers. A name is the fastest input: a Column is bound once to a
            lambda variable, which Spark runs slower (see `spark_mlt.column.inputs`).
        codec: the codec to apply.
        layout: ``"array"`` (default: array<int> of n tokens), ``"struct"`` (fields
            t0..t{n-1}), ``"vector"`` (a dense ML vector of ``token / (p - 1)``, each in
            [0, 1]), or ``"packed"``: one bigint holding the n tokens, token j in bits
            ``[j*b, (j+1)*b)`` with ``b = codec.packed_bits`` (needs ``n * b <= 64``).
        handle_invalid: ``"error"`` fails the query naming the offending id and the valid
            range [0, capacity); ``"null"`` turns invalid ids into null.
        engine: ``"jvm"`` (spark-mlt's jar: Spark expressions over compiled Java),
            ``"native"`` (Spark SQL expressions), ``"udf"`` (vectorised UDF over the NumPy
            codec) or ``"auto"``: the one `EnginePolicy` picks (jvm where the session has
            the jar, else native for a column by name).
        capabilities: what the session that runs the Column has (default: the active
            session's, [`Capabilities.active`][spark_mlt.capabilities.Capabilities.active],
            resolved once per call); a job or stream passes its session's.

    Returns:
        A Column; null where the id is null.

    Raises:
        MLTTypeError: ``col`` or ``codec`` of the wrong type.
        OptionError: an unknown option value.
        CodecParameterError: ``layout="packed"`` and the tokens do not fit in 64 bits.

    Example::

        codec = MLTCodec.from_seed(13, 6)
        df.select(mlt_encode("user_id", codec).alias("user_tokens"))
    """
    checked, chosen, handle, engine_name = _options(codec, layout, LAYOUTS, handle_invalid, engine)
    source = as_input(col)
    run = _run(
        "encode", source, codec=checked, layout=chosen, handle=handle, engine=engine_name, capabilities=capabilities
    )
    return run.alias(_result_name("mlt_encode", source))


def mlt_decode(
    col: str | Column,
    codec: MLTCodec,
    *,
    layout: Layout = "array",
    handle_invalid: RowHandling = "error",
    engine: Engine = "auto",
    capabilities: Capabilities | None = None,
) -> Column:
    """The bigint ids of a token column written by [`mlt_encode`][spark_mlt.column.functions.mlt_encode].

    Args:
        col: a column name or Column of tokens: array<int> (``layout="array"``, the
            default), a struct with fields t0..t{n-1} (``"struct"``), a dense ML vector of
            token / (p - 1) (``"vector"``: each value is scaled back and rounded to the
            nearest token), or packed in a bigint (``"packed"``, as the jobs store them).
        codec: the codec the tokens were made with.
        layout: the token column's layout. A column of another type fails when Spark
            analyses the query, naming the column, its type and the layout to pass. A
            Column has no type until Spark analyses its query, so a column function cannot
            read the layout from it; ``MLTDecoder`` and the decode job read it from the
            schema (``layout="auto"``). Tokens of any integer type decode.
        handle_invalid: ``"error"`` fails the query naming the offending token vector;
            ``"null"`` turns invalid vectors (wrong length, a null token, a token outside
            [0, p) (for a vector: a value that does not round into it), or one that decodes
            to 2**63 or more) into null.
        engine: ``"jvm"``, ``"native"``, ``"udf"`` or ``"auto"`` (as for
            [`mlt_encode`][spark_mlt.column.functions.mlt_encode]).
        capabilities: as for [`mlt_encode`][spark_mlt.column.functions.mlt_encode].

    Returns:
        A bigint Column; null where the tokens are null.

    Example::

        df.select(mlt_decode("user_tokens", codec).alias("user_id"))
    """
    checked, chosen, handle, engine_name = _options(codec, layout, LAYOUTS, handle_invalid, engine)
    source = as_input(col)
    tokens = Input(VECTOR.values(source.column, checked, source.name), source.name) if chosen is VECTOR else source
    run = _run(
        "decode", tokens, codec=checked, layout=chosen, handle=handle, engine=engine_name, capabilities=capabilities
    )
    return run.alias(_result_name("mlt_decode", source))


def decode_input(
    source: Input,
    codec: MLTCodec,
    layout: TokenLayout,
    handle: RowHandling,
    *,
    engine: Engine,
    capabilities: Capabilities,
) -> Column:
    """The ids of ``source`` (a vector's values for the vector layout): ``mlt_decode`` for a
    DataFrame-level step that added its input as a column of its own (``MLTDecoder``)."""
    return _run("decode", source, codec=codec, layout=layout, handle=handle, engine=engine, capabilities=capabilities)


def _result_name(function: str, source: Input) -> str:
    """The name of a function's result column, as Spark names its own: ``mlt_encode(user_id)``
    (Spark's default, the expression's text, runs to kilobytes here)."""
    argument = source.name.removeprefix("column ").strip("'") if source.by_name else "..."
    return f"{function}({argument})"


def mlt_unpack(
    col: str | Column,
    codec: MLTCodec,
    *,
    layout: UnpackLayout = "array",
    handle_invalid: RowHandling = "error",
    capabilities: Capabilities | None = None,
) -> Column:
    """The tokens of a packed token column (``mlt_encode(..., layout="packed")``), as an
    array<int> (or a struct t0..t{n-1}): plain Spark shifts and masks, no Python.

    Args:
        col: a bigint column of packed tokens.
        codec: the codec the tokens were made with (it fixes n and the bits per token).
        layout: ``"array"`` (default) or ``"struct"``.
        handle_invalid: ``"error"`` fails the query naming the value; ``"null"`` turns
            values with a token >= p or bits set above the n tokens into null.
        capabilities: as for [`mlt_encode`][spark_mlt.column.functions.mlt_encode].

    Raises:
        CodecParameterError: the codec's tokens do not fit in 64 bits (never packed).

    Example::

        ratings = read_delta(spark, "/data/ratings_mlt")
        ratings.select(mlt_unpack("userId_mlt", codecs["userId"]).alias("user_tokens"))
    """
    checked, chosen, handle, _ = _options(codec, layout, UNPACK_LAYOUTS, handle_invalid, "auto")
    checked.require_packed_bits()
    source = as_input(col)
    run = _run("unpack", source, codec=checked, layout=chosen, handle=handle, engine="auto", capabilities=capabilities)
    return run.alias(_result_name("mlt_unpack", source))
