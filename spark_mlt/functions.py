"""PySpark column functions: ``mlt_encode`` / ``mlt_decode``, and SQL registration.

Two engines give bit-identical results:

* ``"native"``: the MLT arithmetic as plain Spark SQL expressions (digit extraction,
  multiply-accumulate mod p), compiled by Spark's code generator; no Python worker runs.
  Exact with ANSI mode on (Spark 4's default, where overflow raises) and off: see
  :mod:`spark_mlt._sqlgen` for how every intermediate stays below 2**63.
* ``"udf"``: a vectorised UDF wrapping the NumPy codec: an Arrow UDF on PySpark >= 4.1, a
  pandas UDF before (same Arrow code inside, so the same tokens, errors and nulls). The codec travels to
  executors inside the UDF's closure as its JSON document, not as a broadcast variable, so
  it also works over Spark Connect (no SparkContext to broadcast from); workers parse and
  validate it once per process.
* ``"auto"`` picks the native engine: on ``local[2]`` it measured faster than the UDF for
  encode and decode (see the README's benchmark table), and it needs no Python on the
  executors.

Input types are checked when Spark analyses the query: anything but an integral or decimal
column fails with Spark's DATATYPE_MISMATCH error, which names the column and its type.
Decimal values must be whole numbers within the bigint range; other values, negative ids and
ids at or above the codec's capacity are invalid rows, handled per ``handle_invalid``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from spark_mlt import _sqlgen
from spark_mlt.codec import MLTCodec
from spark_mlt.errors import MLTError, MLTTypeError

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

__all__ = ["mlt_decode", "mlt_encode", "mlt_unpack", "register_mlt_functions", "token_struct_type"]

Output = Literal["array", "struct", "vector", "packed"]
Form = Literal["array", "struct", "packed"]
HandleInvalid = Literal["error", "null"]
Engine = Literal["auto", "udf", "native"]


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise MLTTypeError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def _check_codec(codec: object) -> MLTCodec:
    if not isinstance(codec, MLTCodec):
        raise MLTTypeError(f"codec must be an MLTCodec, got {type(codec).__name__}")
    return codec


class _Input(NamedTuple):
    """A function's input column, its name for error messages, and whether it is small
    enough to copy into an expression that reads it several times."""

    column: Column
    name: str
    simple: bool


SIMPLE_INPUT_NODES = 8  # largest input (expression nodes) copied, not bound, where it is read twice or more


def _as_input(col: str | Column) -> _Input:
    """The input column, named and sized without rendering it.

    Rendering a composed Column as text (``str(column)``) expands Spark's shared expression
    DAG into a tree, which for ``mlt_decode(mlt_encode(...))`` on Spark 3.5 exhausted a 1 GiB
    driver. So only a small expression, sized by walking at most ``SIMPLE_INPUT_NODES + 1``
    of its nodes, is named by its text; anything larger is "a column expression".
    """
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    if isinstance(col, str):
        return _Input(F.col(col), f"column {col!r}", True)
    if not isinstance(col, Column):
        raise MLTTypeError(f"col must be a column name or a Column, got {type(col).__name__}")
    if _expression_nodes(col, SIMPLE_INPUT_NODES) > SIMPLE_INPUT_NODES:
        return _Input(col, "a column expression", False)
    connect = type(col).__module__.startswith("pyspark.sql.connect")
    handle: Any = col  # the JVM Column (_jc), or Spark Connect's expression (_expr)
    text = str(handle._expr) if connect else handle._jc.toString()
    return _Input(col, f"column {text!r}", True)


# Nodes that hold no other expression. Any other node without children (a UDF call, say,
# whose arguments some Spark versions do not list as children) counts as too large to copy.
LEAF_NODES = frozenset({"ColumnReference", "LiteralExpression", "UnresolvedAttribute", "AttributeReference", "Literal"})


def _expression_nodes(column: Column, limit: int) -> int:
    """The number of expression nodes in ``column``, counted up to ``limit + 1``; an
    expression whose shape cannot be read counts as larger than ``limit``."""
    handle: Any = column
    if type(column).__module__.startswith("pyspark.sql.connect"):

        def connect_children(node: Any) -> list[Any]:
            return list(node.children) if hasattr(type(node), "children") else []

        return _walk(handle._expr, connect_children, lambda node: type(node).__name__, limit)
    from py4j.protocol import Py4JError

    def jvm_children(node: Any) -> list[Any]:
        if node.getClass().getSimpleName() == "ExpressionColumnNode":  # Spark 4: a Catalyst expression inside
            return [node.expression()]
        children = node.children()
        return [children.apply(i) for i in range(children.size())]

    try:
        root = handle._jc.node() if int(_pyspark_version().split(".")[0]) >= 4 else handle._jc.expr()
        return _walk(root, jvm_children, lambda node: node.getClass().getSimpleName(), limit)
    except Py4JError:  # pragma: no cover - an unknown JVM Column layout: bind it, which is always safe
        return limit + 1


def _walk(root: Any, children: Callable[[Any], list[Any]], kind: Callable[[Any], str], limit: int) -> int:
    stack, count = [root], 0
    while stack and count <= limit:
        node = stack.pop()
        count += 1
        below = children(node)
        if not below and kind(node) not in LEAF_NODES:
            return limit + 1
        stack.extend(below)
    return count


def _bound(source: _Input, body: Callable[[Column], Column]) -> Column:
    """``body(column)``, with the input column evaluated once.

    A native expression reads its input several times (each token reads the id; each digit
    reads every token), and Spark keeps each read as a copy of the input's expression tree.
    A column reference or a small expression is cheap to copy. A larger input, such as
    another spark-mlt function (``mlt_decode(mlt_encode(...))``), is bound to a lambda
    variable instead, ``transform(array(input), v -> body(v))[0]``, so the plan holds it
    once and the composed plan's size is the sum of its parts, not their product.
    """
    from pyspark.sql import functions as F

    if source.simple:
        return body(source.column)
    return F.transform(F.array(source.column), body).getItem(0)


def token_struct_type(n: int) -> str:
    """The DDL of the struct output: ``struct<t0:int, ..., t{n-1}:int>``."""
    return "struct<" + ", ".join(f"{name}:int" for name in _sqlgen.token_names(n)) + ">"


def _resolve_engine(engine: str) -> str:
    engine = _check_choice("engine", engine, ("auto", "udf", "native"))
    return "native" if engine == "auto" else engine


def mlt_encode(
    col: str | Column,
    codec: MLTCodec,
    *,
    output: Output = "array",
    handle_invalid: HandleInvalid = "error",
    engine: Engine = "auto",
) -> Column:
    """The MLT tokens of an integer id column.

    Args:
        col: a column name or Column of an integral type (tinyint .. bigint) or a decimal
            holding whole numbers.
        codec: the codec to apply.
        output: ``"array"`` (array<int> of n tokens), ``"struct"`` (fields t0..t{n-1}),
            ``"vector"`` (a dense ML vector of ``token / (p - 1)``, each in [0, 1]), or
            ``"packed"``: one bigint holding the n tokens, token j in bits ``[j*b, (j+1)*b)``
            with ``b = codec.packed_bits`` (the compact storage layout; see
            :func:`mlt_unpack`). Packed needs ``n * b <= 64``.
        handle_invalid: ``"error"`` fails the query naming the offending id and the valid
            range [0, capacity); ``"null"`` turns invalid ids into null.
        engine: ``"native"`` (Spark SQL expressions), ``"udf"`` (vectorised UDF over the
            NumPy codec) or ``"auto"`` (native).

    Returns:
        A Column; null where the id is null.

    Raises:
        MLTTypeError: an unknown option, or ``col``/``codec`` of the wrong type.
        CodecParameterError: ``output="packed"`` and the tokens do not fit in 64 bits.

    Example::

        codec = MLTCodec.from_seed(13, 6)
        df.select(mlt_encode("user_id", codec).alias("user_tokens"))
    """
    codec = _check_codec(codec)
    _check_choice("output", output, ("array", "struct", "vector", "packed"))
    _check_choice("handle_invalid", handle_invalid, ("error", "null"))
    _resolve_engine(engine)
    source = _as_input(col)
    name = source.name
    if output == "packed":
        codec.require_packed_bits()
    if output == "vector":
        from pyspark.ml.functions import array_to_vector
        from pyspark.sql import functions as F

        if _resolve_engine(engine) == "native":
            b = _sqlgen.ColumnBackend()
            return _bound(
                source,
                lambda v: _sqlgen.encode_expr(
                    b, v, codec, output="scaled", handle_invalid=handle_invalid, sql_name=name, wrap=array_to_vector
                ),
            )
        tokens = _encode_udf_column(source, codec, output="array", handle_invalid=handle_invalid)
        scale = float(max(codec.p - 1, 1))
        # Scaled by a lambda over the array (null stays null): reading the tokens n times per
        # row inlined the whole token expression n times and ran at under 0.1M rows/s.
        return _bound(
            _Input(tokens, name, source.simple),
            lambda t: F.when(t.isNull(), F.lit(None)).otherwise(
                array_to_vector(F.transform(t, lambda token: token.cast("double") / scale))
            ),
        )
    if _resolve_engine(engine) == "native":
        b = _sqlgen.ColumnBackend()
        return _bound(
            source,
            lambda v: _sqlgen.encode_expr(b, v, codec, output=output, handle_invalid=handle_invalid, sql_name=name),
        )
    return _encode_udf_column(source, codec, output=output, handle_invalid=handle_invalid)


def _has_arrow_udfs() -> bool:
    from pyspark.sql import functions as F

    return hasattr(F, "arrow_udf")  # PySpark >= 4.1


def _arrow_to_pandas(result: pa.Array) -> pd.Series:
    """A UDF result for pandas UDFs: bigint as the nullable Int64 (exact; float64 is not)."""
    return result.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def _bigint_from_pandas(values: pd.Series, name: str) -> pa.Array:
    """The int64 Arrow array of a bigint pandas UDF argument. PySpark < 4.1 hands a batch
    holding nulls to pandas as float64, exact only below 2**53."""
    if values.dtype.kind in "iu":  # numpy int64, or pandas Int64 from a chained pandas UDF
        return pa.array(values, type=pa.int64(), from_pandas=True)
    floats = values.to_numpy(np.float64)
    present = ~np.isnan(floats)
    if (np.abs(floats[present]) >= 2.0**53).any():
        raise MLTError(
            f"spark-mlt: {name}: PySpark {_pyspark_version()} passes a batch of bigint values that "
            "holds nulls to pandas as float64, which cannot represent values of 2^53 or more "
            "exactly; filter the nulls out first, use the column functions mlt_encode/mlt_decode "
            "(exact on every PySpark), or PySpark >= 4.1"
        )
    return pa.array(np.where(present, floats, 0).astype(np.int64), mask=~present)


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


NULL_ID = -1  # a null id, as the pandas UDF path passes it (every id it sees is checked and >= 0)


def _vectorized_udf(batch: Callable[[pa.Array], pa.Array], return_type: str, name: str, *, takes: str) -> Any:
    """A vectorised UDF running ``batch`` (Arrow array in, Arrow array out): an Arrow UDF on
    PySpark >= 4.1, a pandas UDF before. ``takes`` is the input's Spark type: "bigint",
    "array" (array<int>) or "id": a checked id (bigint >= 0 or null; see :func:`_call_id_udf`).

    The pandas UDF converts at the boundary and runs the same Arrow function, so both give
    the same tokens, errors and nulls. Its bigint results travel as pandas' nullable Int64.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import pandas_udf

    if _has_arrow_udfs():

        def arrow_batch(values: pa.Array) -> pa.Array:
            return batch(values)

        return F.arrow_udf(arrow_batch, return_type)  # type: ignore[attr-defined]

    if takes == "id":

        def pandas_id_batch(values: pd.Series) -> pd.Series:
            ids = values.to_numpy(np.int64)
            return _arrow_to_pandas(batch(pa.array(ids, mask=ids == NULL_ID)))

        return pandas_udf(pandas_id_batch, return_type)  # type: ignore[call-overload]

    if takes == "bigint":

        def pandas_bigint_batch(values: pd.Series) -> pd.Series:
            return _arrow_to_pandas(batch(_bigint_from_pandas(values, name)))

        return pandas_udf(pandas_bigint_batch, return_type)  # type: ignore[call-overload]

    def pandas_array_batch(values: pd.Series) -> pd.Series:
        return _arrow_to_pandas(batch(pa.array(values, type=pa.list_(pa.int64()), from_pandas=True)))

    return pandas_udf(pandas_array_batch, return_type)  # type: ignore[call-overload]


def _call_id_udf(udf: Any, checked: Column) -> Column:
    """Call a UDF made with ``takes="id"`` on a checked id column, reading it once.

    PySpark < 4.1 hands pandas a bigint batch holding nulls as float64, exact only below
    2**53; so the pandas path passes null as ``NULL_ID`` (-1, never a checked id) instead.
    """
    from pyspark.sql import functions as F

    result: Column = udf(checked if _has_arrow_udfs() else F.coalesce(checked, F.lit(NULL_ID).cast("bigint")))
    return result


def _encode_udf(codec: MLTCodec, *, output: str, handle_invalid: str, name: str, takes: str = "bigint") -> Any:
    """A vectorised UDF bigint -> tokens (or ``output="packed"``: the tokens packed in a
    bigint); the codec rides in the closure as its JSON document. ``takes``: see
    :func:`_vectorized_udf`."""
    document = codec.to_json()
    if output == "packed":

        def encode_packed_batch(ids: pa.Array) -> pa.Array:
            from spark_mlt._arrow import codec_from_json, encode_packed_arrow

            return encode_packed_arrow(codec_from_json(document), ids, handle_invalid=handle_invalid, name=name)

        return _vectorized_udf(encode_packed_batch, "bigint", name, takes=takes)

    def encode_batch(ids: pa.Array) -> pa.Array:
        from spark_mlt._arrow import codec_from_json, encode_arrow

        return encode_arrow(codec_from_json(document), ids, output=output, handle_invalid=handle_invalid, name=name)

    return_type = token_struct_type(codec.n) if output == "struct" else "array<int>"
    return _vectorized_udf(encode_batch, return_type, name, takes=takes)


def _decode_udf(codec: MLTCodec, *, form: str, handle_invalid: str, name: str) -> Any:
    """A vectorised UDF tokens -> bigint; the codec rides in the closure as its JSON document."""
    document = codec.to_json()

    def decode_batch(tokens: pa.Array) -> pa.Array:
        from spark_mlt._arrow import codec_from_json, decode_arrow

        return decode_arrow(codec_from_json(document), tokens, form=form, handle_invalid=handle_invalid, name=name)

    return _vectorized_udf(decode_batch, "bigint", name, takes="bigint" if form == "packed" else "array")


def _encode_udf_column(source: _Input, codec: MLTCodec, *, output: str, handle_invalid: str) -> Column:
    """The UDF engine's column. SQL checks the input first (type, whole numbers, range:
    ``checked_id``), so the UDF reads one checked bigint per row.

    When the tokens fit in 64 bits and the input is small, the UDF returns them packed in a
    bigint, unpacked here by Spark (see :mod:`spark_mlt._arrow`): it measured 1.5x faster
    than returning a list. Unpacking reads the UDF's result n times, each read a copy of its
    input; for a larger input the UDF returns the tokens' final shape instead.
    """
    from pyspark.sql import functions as F

    b = _sqlgen.ColumnBackend()
    name = source.name
    checked = _bound(source, lambda v: _sqlgen.checked_id(b, v, codec, handle_invalid=handle_invalid, sql_name=name))

    def udf(shape: str) -> Column:
        return _call_id_udf(
            _encode_udf(codec, output=shape, handle_invalid=handle_invalid, name=name, takes="id"), checked
        )

    bits = codec.packed_bits
    if output == "packed":
        return udf("packed")
    if bits is not None and source.simple:
        packed = udf("packed")
        mask = (1 << bits) - 1
        items = [
            F.shiftright(packed, bits * j).bitwiseAND(F.lit(mask).cast("bigint")).cast("int") for j in range(codec.n)
        ]
        shaped = b.struct(_sqlgen.token_names(codec.n), items) if output == "struct" else F.array(*items)
        unpacked: Column = F.when(packed.isNull(), F.lit(None)).otherwise(shaped)
        return unpacked
    if output == "struct" and not _has_arrow_udfs():  # pandas UDFs cannot return a null struct
        return _bound(
            _Input(udf("array"), name, source.simple),
            lambda t: F.when(t.isNull(), F.lit(None)).otherwise(
                b.struct(_sqlgen.token_names(codec.n), [t.getItem(j) for j in range(codec.n)])
            ),
        )
    return udf(output)


SHAPES = {"array": "array<int>", "struct": "struct<t0:int, ...>", "packed": "bigint"}


def _shape_gate(tokens: Column, codec: MLTCodec, form: str, name: str) -> tuple[Column, Column]:
    """A predicate that is always false (the optimizer removes it) but fails analysis unless
    ``tokens`` has the shape of ``form``: an array of integers, a struct whose fields
    t0..t{n-1} are integers, or an integer. Every expression that can fail carries the hint,
    so Spark's DATATYPE_MISMATCH error, which names the column and the type it found, also
    says which form was expected and how to pick another. Also returns the tokens to read
    items from, which fail with the hint too (the optimizer reduces them to ``tokens``).

    Any integer width is accepted (bigint tokens decode exactly); tokens outside [0, p) and
    an array of the wrong length fail at run time, naming the token vector.
    """
    from pyspark.sql import functions as F

    last = codec.n - 1
    expected = SHAPES[form].replace(", ...", f", ..., t{last}:int" if last > 1 else ", t1:int" if last else "")
    others = ", ".join(f"form='{other}' for {shape}" for other, shape in SHAPES.items() if other != form)
    hint = F.lit(
        f"spark-mlt: {name} must hold {expected} tokens (form='{form}', n={codec.n}); "
        f"pass the form the column holds ({others}), as mlt_encode's output= wrote it"
    )

    def integral(value: Column) -> Column:  # fails for strings, floating point, nested types
        in_list = F.array_contains(F.array(F.lit(0).cast("bigint"), F.length(hint).cast("bigint")), value)
        return in_list & value.bitwiseOR(F.length(hint)).isNull()

    fields = tokens
    if form == "array":
        check = F.exists(tokens, integral)
        # Read through the gate: Spark 3.5 computes get()'s type before checking its input
        # and fails with a ClassCastException on a non-array, unless the input is unresolved.
        fields = F.when(F.lit(False) & check, F.lit(None)).otherwise(tokens)
    elif form == "struct":
        fields = tokens.withField("spark_mlt_expects", hint)
        check = F.array(*[integral(fields.getField(f)) for f in _sqlgen.token_names(codec.n)]).isNull()
    else:
        check = integral(tokens)
    gate: Column = F.lit(False) & check
    return gate, fields


def mlt_decode(
    col: str | Column,
    codec: MLTCodec,
    *,
    form: Form = "array",
    handle_invalid: HandleInvalid = "error",
    engine: Engine = "auto",
) -> Column:
    """The bigint ids of a token column written by :func:`mlt_encode`.

    Args:
        col: a column name or Column of tokens: array<int> (``form="array"``), a struct
            with fields t0..t{n-1} (``form="struct"``), or packed in a bigint
            (``form="packed"``, as ``mlt_encode(..., output="packed")`` writes them).
        codec: the codec the tokens were made with.
        form: the token column's shape. A column of another type fails when Spark analyses
            the query, naming the column, its type and the form expected. A Column carries
            no type before analysis, so the form is not inferred here; ``MLTDecoder``
            (``inputFormat="auto"``) and the decode job infer it from the schema.
            Tokens of any integer type decode (array<bigint> as well as array<int>).
        handle_invalid: ``"error"`` fails the query naming the offending token vector;
            ``"null"`` turns invalid vectors (wrong length, a null token, a token outside
            [0, p), or one that decodes to 2**63 or more) into null.
        engine: ``"native"``, ``"udf"`` or ``"auto"`` (native).

    Returns:
        A bigint Column; null where the tokens are null.

    Example::

        df.select(mlt_decode("user_tokens", codec).alias("user_id"))
    """
    codec = _check_codec(codec)
    _check_choice("form", form, ("array", "struct", "packed"))
    _check_choice("handle_invalid", handle_invalid, ("error", "null"))
    _resolve_engine(engine)
    source = _as_input(col)
    name = source.name
    if form == "packed":
        codec.require_packed_bits()
    from pyspark.sql import functions as F

    b = _sqlgen.ColumnBackend()

    def gated(body: Callable[[Column], Column]) -> Column:
        def checked(t: Column) -> Column:
            gate, fields = _shape_gate(t, codec, form, name)
            result: Column = F.when(gate, F.lit(None)).otherwise(body(fields))
            return result

        return _bound(source, checked)

    if _resolve_engine(engine) == "native":
        return gated(
            lambda t: _sqlgen.decode_expr(b, t, codec, form=form, handle_invalid=handle_invalid, sql_name=name)
        )
    if _has_arrow_udfs() or form == "array":
        column = _bound(source, lambda t: F.when(_shape_gate(t, codec, form, name)[0], F.lit(None)).otherwise(t))
    elif form == "packed":
        # pandas UDFs see a bigint batch holding nulls as float64 (inexact above 2**53), and
        # a struct as a DataFrame: they get the tokens as an array<int> instead.
        column = gated(
            lambda k: _sqlgen.unpack_expr(b, k, codec, output="array", handle_invalid=handle_invalid, sql_name=name)
        )
    else:
        fields = _sqlgen.token_names(codec.n)
        column = gated(lambda t: F.when(t.isNull(), F.lit(None)).otherwise(F.array(*[t.getField(f) for f in fields])))
    udf = _decode_udf(codec, form=form if _has_arrow_udfs() else "array", handle_invalid=handle_invalid, name=name)
    decoded: Column = udf(column)
    return decoded


def mlt_unpack(
    col: str | Column,
    codec: MLTCodec,
    *,
    output: Form = "array",
    handle_invalid: HandleInvalid = "error",
) -> Column:
    """The tokens of a packed token column (``mlt_encode(..., output="packed")``), as an
    array<int> (or a struct t0..t{n-1}): plain Spark shifts and masks, no Python.

    Args:
        col: a bigint column of packed tokens.
        codec: the codec the tokens were made with (it fixes n and the bits per token).
        output: ``"array"`` or ``"struct"``.
        handle_invalid: ``"error"`` fails the query naming the value; ``"null"`` turns
            values with a token >= p or bits set above the n tokens into null.

    Raises:
        CodecParameterError: the codec's tokens do not fit in 64 bits (never packed).

    Example::

        ratings = read_delta(spark, "/data/ratings_mlt")
        ratings.select(mlt_unpack("userId_mlt", codecs["userId"]).alias("user_tokens"))
    """
    codec = _check_codec(codec)
    _check_choice("output", output, ("array", "struct"))
    _check_choice("handle_invalid", handle_invalid, ("error", "null"))
    codec.require_packed_bits()
    source = _as_input(col)
    b = _sqlgen.ColumnBackend()
    return _bound(
        source,
        lambda k: _sqlgen.unpack_expr(b, k, codec, output=output, handle_invalid=handle_invalid, sql_name=source.name),
    )


def register_mlt_functions(
    spark: SparkSession,
    codec: MLTCodec,
    name: str,
    *,
    handle_invalid: HandleInvalid = "error",
    engine: Engine = "auto",
    form: Literal["array", "packed"] = "array",
) -> tuple[str, str]:
    """Register ``mlt_encode_<name>(id)`` and ``mlt_decode_<name>(tokens)`` for ``spark.sql``.

    The native engine registers SQL functions (``CREATE TEMPORARY FUNCTION``, parameter
    types BIGINT and ARRAY<INT>, so Spark converts the arguments by its own rules; Spark
    4.0 and later); the UDF engine registers the vectorised UDFs. ``engine="auto"`` picks
    the native engine where Spark has SQL functions and the UDF engine on Spark 3.5.
    Both are temporary: they live as long as the session.
    With ``form="packed"`` the tokens are one BIGINT per id (the jobs' storage layout; see
    ``mlt_encode(..., output="packed")``): encode returns it and decode takes it.

    Returns:
        The two function names.

    Raises:
        MLTTypeError: ``name`` is not a plain identifier.

    Example::

        register_mlt_functions(spark, codec, "user")
        spark.sql("SELECT mlt_encode_user(user_id) AS tokens FROM ratings")
        register_mlt_functions(spark, codec, "user_packed", form="packed")
        spark.sql("SELECT mlt_decode_user_packed(userId_mlt) AS userId FROM ratings_mlt")
    """
    codec = _check_codec(codec)
    if not name.isidentifier() or not name.isascii():
        raise MLTTypeError(f"name must be a plain identifier (letters, digits, _), got {name!r}")
    _check_choice("handle_invalid", handle_invalid, ("error", "null"))
    _check_choice("form", form, ("array", "packed"))
    if form == "packed":
        codec.require_packed_bits()
    encode_name, decode_name = f"mlt_encode_{name}", f"mlt_decode_{name}"
    sql_functions = int(spark.version.split(".")[0]) >= 4  # CREATE FUNCTION ... RETURN: Spark >= 4.0
    if engine == "native" and not sql_functions:
        raise MLTTypeError(
            f"engine='native' registers SQL functions, which Spark {spark.version} lacks (they need "
            "Spark 4.0); use engine='auto' or 'udf' (vectorised UDFs), or the column functions"
        )
    if _resolve_engine(engine) == "native" and sql_functions:
        b = _sqlgen.SqlBackend()
        encode_sql = _sqlgen.encode_expr(
            b, "id", codec, output=form, handle_invalid=handle_invalid, sql_name=encode_name
        )
        decode_sql = _sqlgen.decode_expr(
            b, "tokens", codec, form=form, handle_invalid=handle_invalid, sql_name=decode_name
        )
        tokens = "ARRAY<INT>" if form == "array" else "BIGINT"
        create = "CREATE OR REPLACE TEMPORARY FUNCTION"
        spark.sql(f"{create} {encode_name}(id BIGINT) RETURNS {tokens} RETURN {encode_sql}")
        spark.sql(f"{create} {decode_name}(tokens {tokens}) RETURNS BIGINT RETURN {decode_sql}")
    else:
        spark.udf.register(
            encode_name, _encode_udf(codec, output=form, handle_invalid=handle_invalid, name=encode_name)
        )
        spark.udf.register(decode_name, _decode_udf(codec, form=form, handle_invalid=handle_invalid, name=decode_name))
    return encode_name, decode_name
