"""``mlt_encode_<name>`` / ``mlt_decode_<name>`` as functions of ``spark.sql``.

The native engine registers SQL functions (``CREATE TEMPORARY FUNCTION``, Spark 4.0 and
later) built by the same expression builders as the column functions; the UDF engine
registers the vectorised UDFs. SQL functions cannot hold lambdas, so their expressions copy
what they read several times (their parameters are evaluated once by Spark already).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_mlt.codec import MLTCodec
from spark_mlt.column.builders import decode_expr, encode_expr
from spark_mlt.column.functions import COLUMN_HANDLE_INVALID, check_codec
from spark_mlt.column.layouts import SQL_LAYOUTS, Layout
from spark_mlt.column.targets import SqlTarget
from spark_mlt.column.udf import decode_udf, encode_udf
from spark_mlt.column.versions import spark_line
from spark_mlt.errors import OptionError
from spark_mlt.options import ENGINES, Engine, HandleInvalid, check_choice

__all__ = ["register_mlt_functions"]

_SQL_TYPES = {"array": "ARRAY<INT>", "packed": "BIGINT"}


def register_mlt_functions(
    spark: SparkSession,
    codec: MLTCodec,
    name: str,
    *,
    layout: Layout = "array",
    handle_invalid: HandleInvalid = "error",
    engine: Engine = "auto",
) -> tuple[str, str]:
    """Register ``mlt_encode_<name>(id)`` and ``mlt_decode_<name>(tokens)`` for ``spark.sql``.

    SQL functions take parameter types BIGINT and ARRAY<INT> (or BIGINT for
    ``layout="packed"``, the jobs' storage layout), so Spark converts arguments by its own
    rules. ``engine="auto"`` picks the native engine where Spark has SQL functions (4.0 and
    later) and the UDF engine on Spark 3.5. Both are temporary: they live as long as the
    session.

    Args:
        spark: the session to register in.
        codec: the codec of the tokens.
        name: the suffix of the two function names (a plain identifier).
        layout: ``"array"`` (default) or ``"packed"``.
        handle_invalid: ``"error"`` or ``"null"``, as for :func:`mlt_encode`.
        engine: ``"auto"``, ``"native"`` or ``"udf"``.

    Returns:
        The two function names.

    Raises:
        OptionError: ``name`` is not a plain identifier, or ``engine="native"`` on Spark 3.5.

    Example::

        register_mlt_functions(spark, codec, "user")
        spark.sql("SELECT mlt_encode_user(user_id) AS tokens FROM ratings")
    """
    codec = check_codec(codec)
    if not name.isidentifier() or not name.isascii():
        raise OptionError(f"name must be a plain identifier (letters, digits, _), got {name!r}", parameter="name")
    chosen = check_choice("layout", layout, SQL_LAYOUTS)
    check_choice("handle_invalid", handle_invalid, COLUMN_HANDLE_INVALID)
    if chosen == "packed":
        codec.require_packed_bits()
    names = f"mlt_encode_{name}", f"mlt_decode_{name}"
    if _uses_sql_functions(spark, check_choice("engine", engine, ENGINES)):
        _create_sql_functions(spark, codec, names, chosen, handle_invalid)
    else:
        spark.udf.register(names[0], encode_udf(codec, layout=chosen, handle_invalid=handle_invalid, name=names[0]))
        spark.udf.register(names[1], decode_udf(codec, layout=chosen, handle_invalid=handle_invalid, name=names[1]))
    return names


def _uses_sql_functions(spark: SparkSession, engine: str) -> bool:
    sql_functions = spark_line(spark.version) >= (4, 0)  # CREATE FUNCTION ... RETURN; the session's Spark
    if engine == "native" and not sql_functions:
        raise OptionError(
            f"engine='native' registers SQL functions, which Spark {spark.version} lacks (they need "
            "Spark 4.0); use engine='auto' or 'udf' (vectorised UDFs), or the column functions",
            parameter="engine",
        )
    return engine != "udf" and sql_functions


def _create_sql_functions(
    spark: SparkSession, codec: MLTCodec, names: tuple[str, str], layout: Layout, handle_invalid: str
) -> None:
    t = SqlTarget()
    encode_name, decode_name = names
    encode_sql = encode_expr(t, "id", codec, layout=layout, handle_invalid=handle_invalid, sql_name=encode_name)
    decode_sql = decode_expr(t, "tokens", codec, layout=layout, handle_invalid=handle_invalid, sql_name=decode_name)
    tokens = _SQL_TYPES[layout]
    create = "CREATE OR REPLACE TEMPORARY FUNCTION"
    spark.sql(f"{create} {encode_name}(id BIGINT) RETURNS {tokens} RETURN {encode_sql}")
    spark.sql(f"{create} {decode_name}(tokens {tokens}) RETURNS BIGINT RETURN {decode_sql}")
