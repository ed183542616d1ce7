"""What a session can run, read from it once: the one place spark-mlt asks a session what it has.

A [`Capabilities`][spark_mlt.capabilities.Capabilities] is resolved explicitly from a session
(`Capabilities.of(spark)`) and then only read: the engine policy
([`spark_mlt.column.engine`][spark_mlt.column.engine]), the Delta backend choice
([`resolve_backend`][spark_mlt.storage.backends.resolve_backend]) and the stream's loop read it;
nothing else probes the session, nothing is cached between calls and resolving registers
nothing. A column function resolves the active session's when it is given none; a job resolves
its session's once and hands them to every step, a stream's batches included (``foreachBatch``
runs them on a thread that may see no active session).

Every call that needs Spark Classic's Py4J gateway, used only where Spark has no public API,
lives in [`spark_mlt._classic`][spark_mlt._classic].

Example::

    >>> Capabilities.without_session().jvm_engine
    False
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyspark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_mlt import _classic
from spark_mlt.errors import JarLineError, JarVersionError

__all__ = ["ENCODE_CLASS", "Capabilities", "foreign_jar", "jar_binary", "spark_line"]

#: the class a registered ``mlt_encode`` names when it is spark-mlt's
ENCODE_CLASS = "io.sparkmlt.MltEncode"
_JAR_VERSION = re.compile(r"\(spark-mlt (\S+)\)\s*$")
_DELTA_CLASS = "io.delta.tables.DeltaTable"
#: the extension that registers spark-mlt's functions (``spark_mlt.jars.JVM_EXTENSION``)
JVM_EXTENSION_CLASS = "io.sparkmlt.MltExtensions"
#: A spark-mlt jar's file name: its Spark binary line (``3.5_2.12``, ``4_2.13``) and version.
_JAR_NAME = re.compile(r"spark-mlt-jvm_(\d+(?:\.\d+)?_2\.1[23])-[^/,]*\.jar")


def spark_line(version: str) -> tuple[int, int]:
    """(major, minor) of a Spark or PySpark version string: the one parser of Spark versions.

    Example::

        >>> spark_line("4.0.0-preview2")
        (4, 0)
    """
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a Spark version: {version!r}")
    return int(found[1]), int(found[2])


def _package_version() -> str:
    from spark_mlt import __version__  # noqa: PLC0415 - the package imports this module

    return __version__


@dataclass(frozen=True)
class Capabilities:
    """What one session can run.

    Attributes:
        connect: a Spark Connect session (no Py4J gateway: the server decides what it has).
        spark_version: the version of the Spark that runs the session's queries (over
            Connect: the server's).
        arrow_udfs: vectorised UDFs take Arrow batches (``arrow_udf``: PySpark and Spark 4.1
            or later), not pandas ones.
        delta_jars: delta-spark can read and write Delta in the session.
        jar_version: the version of spark-mlt's jar whose functions the session has, or
            None when it has none. A session is asked when its settings name the jar
            (``spark.jars``) or its extension (``spark.sql.extensions``), as every way of
            adding it that docs/jvm.md lists does.
    """

    connect: bool
    spark_version: str
    arrow_udfs: bool
    delta_jars: bool
    jar_version: str | None
    foreign_jar: str | None = None
    """A spark-mlt jar that ``spark.jars`` names but that is built for another Spark line (its
    functions could not load), or None."""

    @property
    def spark_line(self) -> tuple[int, int]:
        """(major, minor) of the session's Spark."""
        return spark_line(self.spark_version)

    @property
    def jvm_engine(self) -> bool:
        """Whether the JVM engine runs here: the session has spark-mlt's functions.

        Raises:
            JarVersionError: they come from a jar of another version than this package.
            JarLineError: the session names a spark-mlt jar of another Spark line.
        """
        if self.foreign_jar is not None:
            raise JarLineError(
                f"the session's spark.jars names {self.foreign_jar}, spark-mlt's jar for another Spark line than "
                f"this Spark {self.spark_version}, so Spark could not load its functions; load "
                f"spark-mlt-jvm_{jar_binary(self.spark_version)}-{_package_version()}.jar instead (`spark-mlt jar "
                "--submit` prints it), or leave the jar "
                "out and pass engine='native' or 'udf'"
            )
        if self.jar_version is None:
            return False
        if self.jar_version != _package_version():
            raise JarVersionError(
                f"the session has spark-mlt's jar version {self.jar_version}, but this spark-mlt is "
                f"{_package_version()}: its functions may not match this package's; load the jar of this "
                "version (`spark-mlt jar --submit` prints it), or pass engine='native' or 'udf'"
            )
        return True

    @property
    def sql_functions(self) -> bool:
        """Whether the session has SQL functions (``CREATE FUNCTION ... RETURN``, Spark 4.0)."""
        return self.spark_line >= (4, 0)

    @classmethod
    def of(cls, spark: SparkSession) -> Capabilities:
        """Ask ``spark`` what it has: once per call, nothing kept, nothing registered."""
        connect = not _classic.is_classic(spark)
        version = spark.version
        jars = _setting(spark, "spark.jars")
        jar = _jar_version(spark, jars)
        return cls(
            connect=connect,
            spark_version=version,
            arrow_udfs=hasattr(F, "arrow_udf") and spark_line(version) >= (4, 1),
            delta_jars=_delta_jars(spark, connect),
            jar_version=jar,
            foreign_jar=None if jar is not None else foreign_jar(jars, version),
        )

    @classmethod
    def active(cls) -> Capabilities:
        """Those of the active session, else
        [`without_session`][spark_mlt.capabilities.Capabilities.without_session]'s."""
        try:
            spark = SparkSession.getActiveSession()
        except Exception:  # noqa: BLE001 - a PySpark that cannot tell (no JVM yet) has none active
            spark = None
        return cls.of(spark) if spark is not None else cls.without_session()

    @classmethod
    def without_session(cls) -> Capabilities:
        """What runs with no session to ask: the installed PySpark's line, no jars."""
        return cls(
            connect=False,
            spark_version=pyspark.__version__,
            arrow_udfs=hasattr(F, "arrow_udf"),
            delta_jars=False,
            jar_version=None,
        )


def _setting(spark: SparkSession, key: str) -> str:
    try:
        return spark.conf.get(key, "") or ""
    except Exception:  # noqa: BLE001 - a Connect server may refuse to show a setting: then it says nothing
        return ""


def _delta_jars(spark: SparkSession, connect: bool) -> bool:
    """The session names Delta's extension or catalog in its settings (what Databricks, EMR and
    ``delta_session_conf`` set) and, on Spark Classic, Spark's class loader finds delta-spark
    (settings without the jars do not count). Over Connect the server decides: the settings
    are the answer."""
    named = "DeltaCatalog" in _setting(spark, "spark.sql.catalog.spark_catalog") or (
        "DeltaSparkSessionExtension" in _setting(spark, "spark.sql.extensions")
    )
    if not named or connect:
        return named
    return _classic.loads_class(spark, _DELTA_CLASS)


def jar_binary(spark_version: str) -> str | None:
    """The Spark binary line in the name of spark-mlt's jar for a Spark version: ``4_2.13``
    (Spark 4.0 to 4.3, Scala 2.13), ``3.5_2.12`` (Spark 3.5, Scala 2.12), or None (no jar).

    Example::

        >>> jar_binary("4.1.0"), jar_binary("3.5.2"), jar_binary("3.4.1")
        ('4_2.13', '3.5_2.12', None)
    """
    try:
        line = spark_line(spark_version)
    except ValueError:
        return None
    return "4_2.13" if line[0] >= 4 else "3.5_2.12" if line == (3, 5) else None


def foreign_jar(jars: str, spark_version: str) -> str | None:
    """The first spark-mlt jar in ``jars`` (a ``spark.jars`` setting) built for another Spark line
    than ``spark_version``'s, or None.

    Example::

        >>> foreign_jar("/opt/spark-mlt-jvm_3.5_2.12-0.1.0.jar", "4.0.1")
        'spark-mlt-jvm_3.5_2.12-0.1.0.jar'
    """
    own = jar_binary(spark_version)
    return next((found[0] for found in _JAR_NAME.finditer(jars) if found[1] != own), None)


def _jar_version(spark: SparkSession, jars: str) -> str | None:
    """The version the registered ``mlt_encode`` reports, if it is spark-mlt's. Only a session
    whose settings name spark-mlt's extension or jar is asked: the catalog's answer costs tens of
    milliseconds (Spark 4.3), and a column function asks on every call."""
    named = f"{_setting(spark, 'spark.sql.extensions')},{jars}"
    if JVM_EXTENSION_CLASS not in named and "spark-mlt-jvm" not in named:
        return None
    try:
        function: Any = spark.catalog.getFunction("mlt_encode")
    except Exception:  # noqa: BLE001 - AnalysisException on every line: no such function
        return None
    if function.className != ENCODE_CLASS:
        return None
    found = _JAR_VERSION.search(function.description or "")
    return found[1] if found else "unknown"
