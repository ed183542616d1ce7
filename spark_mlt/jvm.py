"""spark-mlt's jar: where it is, and the session settings that load it.

The JVM engine (``mlt_encode``, ``mlt_decode`` and ``mlt_unpack`` as Spark's own expressions,
see [`spark_mlt.column.jvm`][spark_mlt.column.jvm]) ships as one jar per Spark binary line, inside
the wheel:

* ``spark-mlt-jvm_3.5_2.12-<version>.jar``: Spark 3.5 (Scala 2.12);
* ``spark-mlt-jvm_4_2.13-<version>.jar``: Spark 4.0 to 4.3 (Scala 2.13; one jar serves them all).

A session loads it with ``spark.jars`` (or ``--jars``) and registers its functions with
``spark.sql.extensions=io.sparkmlt.MltExtensions`` (Spark 4 also finds the extension by itself
through its service loader). ``spark-mlt jar`` prints the path, or the spark-submit arguments.
This module imports no PySpark.

Example::

    spark = SparkSession.builder.config(map=jvm_session_conf()).getOrCreate()
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from spark_mlt.errors import MissingJarsError, OptionError

__all__ = ["JVM_EXTENSION", "JVM_OFF_ENV", "jvm_jar", "jvm_jar_name", "jvm_session_conf", "merge_conf"]

#: The SparkSessionExtensions entry point that registers the functions.
JVM_EXTENSION = "io.sparkmlt.MltExtensions"
#: ``SPARK_MLT_JVM=0``: sessions spark-mlt starts do not load the jar (the jar-free engines run).
JVM_OFF_ENV = "SPARK_MLT_JVM"

_JARS_DIR = Path(__file__).resolve().parent / "jars"


def _version() -> str:
    from spark_mlt import __version__  # noqa: PLC0415 - the package imports this module's names lazily

    return __version__


def jvm_jar_name(spark_version: str, version: str | None = None) -> str:
    """The file name of the jar for a Spark version.

    Raises:
        OptionError: a Spark line the JVM engine has no jar for (before 3.5).

    Example::

        >>> jvm_jar_name("4.1.0", "0.1.0")
        'spark-mlt-jvm_4_2.13-0.1.0.jar'
    """
    found = re.match(r"(\d+)\.(\d+)", spark_version)
    line = (int(found[1]), int(found[2])) if found else (0, 0)
    if line[0] >= 4:
        binary = "4_2.13"
    elif line == (3, 5):
        binary = "3.5_2.12"
    else:
        raise OptionError(
            f"spark-mlt's jar needs Spark 3.5 or 4.x, got {spark_version!r}; the jar-free engines run on it",
            parameter="spark_version",
        )
    return f"spark-mlt-jvm_{binary}-{version or _version()}.jar"


def jvm_jar(spark_version: str | None = None, *, jars_dir: str | os.PathLike[str] | None = None) -> Path:
    """The jar of spark-mlt's JVM engine for ``spark_version`` (default: the installed PySpark's).

    Raises:
        MissingJarsError: this install carries no jar for that line (a source checkout
            before ``make jvm``).

    Example::

        spark_submit_args = ["--jars", str(jvm_jar("3.5.1"))]
    """
    if spark_version is None:
        import pyspark  # noqa: PLC0415 - only when no version is given: the module imports no PySpark

        spark_version = pyspark.__version__
    path = Path(jars_dir) if jars_dir is not None else _JARS_DIR
    jar = path / jvm_jar_name(spark_version)
    if not jar.is_file():
        raise MissingJarsError(
            f"no spark-mlt jar for Spark {spark_version} at {jar}: a source checkout builds it with `make jvm` "
            "(Maven); wheels carry it"
        )
    return jar


def merge_conf(conf: dict[str, str], key: str, value: str) -> None:
    """Add ``value`` to the comma-separated setting ``key`` of ``conf`` (spark.jars, spark.sql.extensions)."""
    present = [item for item in conf.get(key, "").split(",") if item]
    if value not in present:
        conf[key] = ",".join([*present, value])


def jvm_session_conf(spark_version: str | None = None) -> dict[str, str]:
    """The settings that load the JVM engine into a session: ``spark.jars`` and
    ``spark.sql.extensions``. Merge them into settings that hold others (Delta's) with
    [`merge_conf`][spark_mlt.jvm.merge_conf].

    Example::

        >>> sorted(jvm_session_conf("4.0.0"))  # doctest: +SKIP
        ['spark.jars', 'spark.sql.extensions']
    """
    return {"spark.jars": str(jvm_jar(spark_version)), "spark.sql.extensions": JVM_EXTENSION}
