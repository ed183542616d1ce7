"""Every jar spark-mlt knows of: its own (the JVM engine), and those ``make jars`` copies for each Spark line.

**spark-mlt's jar.** The JVM engine (``mlt_encode``, ``mlt_decode`` and ``mlt_unpack`` as Spark's
own expressions, see [`spark_mlt.column.jvm`][spark_mlt.column.jvm]) ships as one jar per Spark
binary line, inside the wheel:

* ``spark-mlt-jvm_3.5_2.12-<version>.jar``: Spark 3.5 (Scala 2.12);
* ``spark-mlt-jvm_4_2.13-<version>.jar``: Spark 4.0 to 4.3 (Scala 2.13; one jar serves them all).

A session loads it with ``spark.jars`` (or ``--jars``) and registers its functions with
``spark.sql.extensions=io.sparkmlt.MltExtensions`` ([`jvm_session_conf`][spark_mlt.jars.jvm_session_conf]).
``spark-mlt jar`` prints the path, or the spark-submit arguments.

**Jars of a source checkout.** Users get Delta's, Spark Connect's and s3a's jars from their
platform (Databricks, EMR) or from ``spark-submit --packages``. A source checkout instead resolves them once with Maven
(``jars/pom.xml``) into ``.jars/spark-<line>/<group>/``, so that tests, ``make test-compat``
and the benchmarks start sessions with the same jars and nothing downloads at test time.
This module only finds those folders: it never downloads.

Groups, one folder each so that a session adds only what it needs:

* ``delta``: delta-spark for the line and its own dependencies (delta-storage; from Delta 4
  the delta-kernel and unitycatalog jars), without what pyspark already ships;
* ``connect``: the Spark Connect server of Spark 3.5 (pyspark 4 ships its own);
* ``s3``: hadoop-aws of the Hadoop that the line's pyspark bundles, and its AWS SDK bundle.

Example::

    from spark_mlt.jars import delta_session_conf, jvm_session_conf
    spark = local_session(extra_conf=delta_session_conf())  # Delta's jars, extension and catalog
    spark = SparkSession.builder.config(map=jvm_session_conf()).getOrCreate()  # the JVM engine
"""

from __future__ import annotations

import os
from pathlib import Path

import pyspark

from spark_mlt.capabilities import JVM_EXTENSION_CLASS, jar_binary, spark_line
from spark_mlt.errors import MissingJarsError, OptionError

__all__ = [
    "DELTA_CATALOG",
    "DELTA_EXTENSION",
    "JAR_GROUPS",
    "JVM_EXTENSION",
    "JVM_OFF_ENV",
    "LINE_GROUPS",
    "default_jars_dir",
    "delta_session_conf",
    "jar_line",
    "jar_paths",
    "jvm_jar",
    "jvm_jar_name",
    "jvm_session_conf",
    "merge_conf",
    "spark_jars",
]

#: The SparkSessionExtensions entry point that registers spark-mlt's functions.
JVM_EXTENSION = JVM_EXTENSION_CLASS
#: ``SPARK_MLT_JVM=0``: sessions spark-mlt starts do not load its jar (the jar-free engines run).
JVM_OFF_ENV = "SPARK_MLT_JVM"

_JVM_JARS_DIR = Path(__file__).resolve().parent / "jars"

JAR_GROUPS: tuple[str, ...] = ("delta", "connect", "s3")

#: The groups that exist per Spark line; keep in step with the Makefile's ``jar_groups_*``.
#: Delta publishes nothing for Spark 4.3 yet (no ``delta-spark_4.3_2.13``).
LINE_GROUPS: dict[str, tuple[str, ...]] = {
    "3.5": ("delta", "connect", "s3"),
    "4.0": ("delta", "s3"),
    "4.1": ("delta", "s3"),
    "4.2": ("delta", "s3"),
    "4.3": ("s3",),
}

#: What a session needs besides Delta's jars (the same on every line, Databricks and EMR set
#: them themselves): Delta's SQL extension and its session catalog, which holds Delta tables
#: by name (``db.table``) next to Spark's own.
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

#: Overrides where the jar folders are (default: ``.jars`` of the checkout this module is in).
JARS_DIR_ENV = "SPARK_MLT_JARS_DIR"

_WHY_MISSING = {
    "delta": "Delta publishes no delta-spark for this Spark line yet",
    "connect": "pyspark 4 ships the Spark Connect server in its own jars",
}


def jar_line(version: str | None = None) -> str:
    """The name of the jar folder of a PySpark version's Spark line (``major.minor``), by
    default the installed one's.

    Example::

        jar_line("3.5.0")  # "3.5"
    """
    try:
        major, minor = spark_line(_installed_pyspark() if version is None else version)
    except ValueError:
        raise OptionError(
            f"spark_version {version!r} is no PySpark version like '3.5.0'", parameter="spark_version"
        ) from None
    return f"{major}.{minor}"


def _installed_pyspark() -> str:
    return str(pyspark.__version__)


def default_jars_dir() -> Path:
    """``$SPARK_MLT_JARS_DIR`` when set, else the ``.jars`` folder of this source checkout."""
    override = os.environ.get(JARS_DIR_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / ".jars"


def jar_paths(
    group: str, *, spark_version: str | None = None, jars_dir: str | os.PathLike[str] | None = None
) -> list[str]:
    """The jar files of one group for a PySpark version's line, sorted by name.

    Args:
        group: ``"delta"``, ``"connect"`` or ``"s3"``.
        spark_version: a PySpark version such as ``"3.5.0"``; default: the installed one.
        jars_dir: the folder ``make jars`` filled; default: [`default_jars_dir`][spark_mlt.jars.default_jars_dir].

    Returns:
        Absolute paths of the group's jars.

    Raises:
        OptionError: ``group`` is none of `JAR_GROUPS`.
        MissingJarsError: the line has no such jars, or ``make jars`` has not copied them yet
            (the message gives the command).

    Example::

        jar_paths("delta", spark_version="3.5.0")  # [".../.jars/spark-3.5/delta/delta-spark_2.12-3.2.0.jar", ...]
    """
    if group not in JAR_GROUPS:
        raise OptionError(f"group {group!r} is not one of {', '.join(JAR_GROUPS)}", parameter="group")
    version = spark_version or _installed_pyspark()
    line = jar_line(version)
    if line not in LINE_GROUPS:
        raise MissingJarsError(
            f"no jars for Spark {line} (pyspark {version}): `make jars` covers the lines {', '.join(LINE_GROUPS)}"
        )
    if group not in LINE_GROUPS[line]:
        raise MissingJarsError(
            f"no {group} jars for Spark {line} (pyspark {version}): {_WHY_MISSING[group]}; "
            f"this line has: {', '.join(LINE_GROUPS[line])}"
        )
    folder = Path(jars_dir) if jars_dir is not None else default_jars_dir()
    folder = folder.resolve() / f"spark-{line}" / group
    # `make jars` writes .complete last, after the folder holds every jar of the group
    jars = sorted(str(path) for path in folder.glob("*.jar")) if (folder / ".complete").is_file() else []
    if not jars:
        raise MissingJarsError(
            f"no {group} jars for Spark {line} in {folder}: run `make jars JARS_LINE={line}` "
            f"in the spark-mlt checkout (or point ${JARS_DIR_ENV} at a folder it filled)"
        )
    return jars


def spark_jars(*groups: str, spark_version: str | None = None, jars_dir: str | os.PathLike[str] | None = None) -> str:
    """The ``spark.jars`` value for one or more groups: their jar paths joined by commas.

    Arguments and errors as in [`jar_paths`][spark_mlt.jars.jar_paths].

    Example::

        SparkSession.builder.config("spark.jars", spark_jars("delta", "s3"))
    """
    if not groups:
        raise OptionError("groups: name at least one of " + ", ".join(JAR_GROUPS), parameter="groups")
    return ",".join(
        path for group in groups for path in jar_paths(group, spark_version=spark_version, jars_dir=jars_dir)
    )


def delta_session_conf(
    *, spark_version: str | None = None, jars_dir: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """Session settings for delta-spark from the jars ``make jars`` copied: ``spark.jars``,
    Delta's SQL extension and its session catalog. On a cluster use ``--packages`` with the
    line's coordinates instead of ``spark.jars`` (docs/compatibility.md lists them); the other two
    settings are the same.

    Arguments and errors as in [`jar_paths`][spark_mlt.jars.jar_paths].

    Example::

        spark = local_session("my-job", extra_conf=delta_session_conf())
    """
    return {
        "spark.jars": spark_jars("delta", spark_version=spark_version, jars_dir=jars_dir),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    }


# --- spark-mlt's own jar ------------------------------------------------------------------


def _version() -> str:
    from spark_mlt import __version__  # noqa: PLC0415 - the package imports this module's names lazily

    return __version__


def jvm_jar_name(spark_version: str, version: str | None = None) -> str:
    """The file name of spark-mlt's jar for a Spark version.

    Raises:
        OptionError: a Spark line the JVM engine has no jar for (before 3.5).

    Example::

        >>> jvm_jar_name("4.1.0", "0.1.0")
        'spark-mlt-jvm_4_2.13-0.1.0.jar'
    """
    binary = jar_binary(spark_version)
    if binary is None:
        raise OptionError(
            f"spark-mlt's jar needs Spark 3.5 or 4.x, got {spark_version!r}; the jar-free engines run on it",
            parameter="spark_version",
        )
    return f"spark-mlt-jvm_{binary}-{version or _version()}.jar"


def jvm_jar(spark_version: str | None = None, *, jars_dir: str | os.PathLike[str] | None = None) -> Path:
    """spark-mlt's jar (the JVM engine) for ``spark_version`` (default: the installed PySpark's).

    Raises:
        MissingJarsError: this install carries no jar for that line (a source checkout
            before ``make jvm``).

    Example::

        spark_submit_args = ["--jars", str(jvm_jar("3.5.1"))]
    """
    spark_version = spark_version or _installed_pyspark()
    path = Path(jars_dir) if jars_dir is not None else _JVM_JARS_DIR
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
    [`merge_conf`][spark_mlt.jars.merge_conf].

    Example::

        >>> sorted(jvm_session_conf("4.0.0"))  # doctest: +SKIP
        ['spark.jars', 'spark.sql.extensions']
    """
    return {"spark.jars": str(jvm_jar(spark_version)), "spark.sql.extensions": JVM_EXTENSION}
