"""``mlt_encode_<name>`` / ``mlt_decode_<name>`` as functions of ``spark.sql``, registered by
the engine the policy picks (`spark_mlt.column.engine`): where the session has spark-mlt's jar,
its functions (wrapped in SQL functions on Spark 4, registered by the jar itself on 3.5); else
SQL functions of the native engine's expressions on Spark 4.0 and later, the UDF engine's
vectorised UDFs before."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_mlt.capabilities import Capabilities
from spark_mlt.codec import MLTCodec
from spark_mlt.column.engine import POLICY, Situation
from spark_mlt.column.functions import check_codec
from spark_mlt.column.layouts import LAYOUT, SQL_LAYOUTS, SqlLayout
from spark_mlt.errors import OptionError
from spark_mlt.options import ENGINES, ROW_HANDLING, Engine, RowHandling, check_choice

__all__ = ["register_mlt_functions"]


def register_mlt_functions(
    spark: SparkSession,
    codec: MLTCodec,
    name: str,
    *,
    layout: SqlLayout = "array",
    handle_invalid: RowHandling = "error",
    engine: Engine = "auto",
) -> tuple[str, str]:
    """Register ``mlt_encode_<name>(id)`` and ``mlt_decode_<name>(tokens)`` for ``spark.sql``.

    SQL functions take parameter types BIGINT and ARRAY<INT> (or BIGINT for
    ``layout="packed"``, the jobs' storage layout), so Spark converts arguments by its own
    rules. ``engine="auto"`` picks the JVM engine where the session has spark-mlt's jar, else
    the native engine where Spark has SQL functions (4.0 and later) and the UDF engine on
    Spark 3.5. Both are temporary: they live as long as the
    session.

    Args:
        spark: the session to register in.
        codec: the codec of the tokens.
        name: the suffix of the two function names (a plain identifier).
        layout: ``"array"`` (default) or ``"packed"``.
        handle_invalid: ``"error"`` or ``"null"``, as for `mlt_encode`.
        engine: ``"auto"``, ``"jvm"``, ``"native"`` or ``"udf"``.

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
    chosen = LAYOUT[check_choice("layout", layout, SQL_LAYOUTS)]
    handle = check_choice("handle_invalid", handle_invalid, ROW_HANDLING)
    if chosen is LAYOUT["packed"]:
        codec.require_packed_bits()
    names = f"mlt_encode_{name}", f"mlt_decode_{name}"
    situation = Situation("register", codec, chosen, Capabilities.of(spark))
    POLICY.engine(check_choice("engine", engine, ENGINES), situation).register(spark, codec, names, chosen, handle)
    return names
