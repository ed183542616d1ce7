"""Spark Classic's Py4J gateway: every call spark-mlt makes through it, where Spark has no public API.

There are four, and each has a public-API path (or nothing to do) for Spark Connect beside it:

* [`loads_class`][spark_mlt._classic.loads_class]: whether Spark's class loader finds a class
  (delta-spark's, to tell a session with Delta's jars from one that only names its settings);
* [`register_bound`][spark_mlt._classic.register_bound]: a one-codec SQL function from
  spark-mlt's jar on Spark 3.5, which has no ``CREATE FUNCTION ... RETURN`` to wrap a call in;
* [`clone_session`][spark_mlt._classic.clone_session]: a session's clone (``cloneSession``:
  its settings and temporary views), so that Delta's session-wide write settings stay with one
  statement (Connect: None, the caller sets the session itself);
* [`tagged_jobs`][spark_mlt._classic.tagged_jobs]: how many jobs a job tag started (Spark's
  status tracker; Connect: None, not counted).

Nothing else in spark-mlt reads a private name of PySpark.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

__all__ = ["clone_session", "is_classic", "loads_class", "register_bound", "tagged_jobs"]


def is_classic(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Classic session (not a Spark Connect one), by its type."""
    return not type(spark).__module__.startswith("pyspark.sql.connect")


def _gateway(spark: SparkSession) -> tuple[Any, Any]:
    jvm, session = getattr(spark, "_jvm", None), getattr(spark, "_jsparkSession", None)
    if jvm is None or session is None:
        raise TypeError(f"not a Spark Classic session: {type(spark).__module__}.{type(spark).__name__}")
    return jvm, session


def loads_class(spark: SparkSession, name: str) -> bool:
    """Whether the classic session's class loader (jars added with ``spark.jars`` or
    ``--packages`` included) finds the class ``name``."""
    jvm, _ = _gateway(spark)
    try:
        jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader().loadClass(name)
    except Exception:  # noqa: BLE001 - py4j raises a generic error when the class is missing
        return False
    return True


def register_bound(spark: SparkSession, name: str, function: str, arguments: tuple[str, str, str]) -> None:
    """Register ``name(value)``: spark-mlt's ``function`` (``mlt_encode`` or ``mlt_decode``)
    with its other ``arguments`` (codec JSON, layout, handle_invalid) fixed, in a classic
    session's function registry."""
    jvm, session = _gateway(spark)
    jvm.io.sparkmlt.MltFunctions.registerBound(session, name, function, *arguments)


def clone_session(spark: SparkSession) -> SparkSession | None:
    """A classic session's clone (Spark's ``cloneSession``: the same context, a copy of its
    settings and temporary views); None over Spark Connect."""
    session = getattr(spark, "_jsparkSession", None)
    if not is_classic(spark) or session is None:
        return None
    return type(spark)(spark.sparkContext, session.cloneSession())


def tagged_jobs(spark: SparkSession, tag: str) -> int | None:
    """How many jobs the classic session's context started with the job tag ``tag`` (as far as
    its listener has recorded them); None over Spark Connect."""
    if not is_classic(spark):
        return None
    return len(spark.sparkContext._jsc.sc().statusTracker().getJobIdsForTag(tag))
