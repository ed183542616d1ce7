"""Local SparkSession settings for tests, jobs and the demo.

On a cluster, spark-submit and the platform configure the session; these helpers only
matter for local runs. Executors must run the same Python as the driver (they unpickle our
UDFs), so ``spark.pyspark.python`` defaults to ``sys.executable``.

``SPARK_MLT_DELTA=spark`` in the environment gives local sessions Delta's jars (from ``make jars``),
its SQL extension and catalog
([`spark_mlt.jars.delta_session_conf`][spark_mlt.jars.delta_session_conf]), so the jobs
and the demo write through delta-spark (``DELTA=spark make demo``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession

from spark_mlt.errors import MissingJarsError, OptionError
from spark_mlt.jars import JVM_EXTENSION, JVM_OFF_ENV, delta_session_conf, jvm_jar, merge_conf

__all__ = ["DELTA_ENV", "LOCAL_CONF", "is_local", "job_session", "local_session", "spark_defaults"]

log = logging.getLogger("spark_mlt")

#: ``spark``: local sessions get delta-spark (see the module doc); anything else: they do not.
DELTA_ENV = "SPARK_MLT_DELTA"

LOCAL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Larger Arrow batches amortise the per-batch cost of our vectorised UDFs.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    "spark.driver.memory": "4g",
    "spark.ui.showConsoleProgress": "true",
}


def local_session(
    app_name: str = "spark-mlt",
    *,
    master: str = "local[2]",
    warehouse: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
) -> SparkSession:
    """Get or create a local SparkSession with spark-mlt's defaults (see ``LOCAL_CONF``).

    ``log_level`` is Spark's (``WARN``, ``ERROR``, ``INFO``). A session this call starts gets a
    log4j configuration at that level (unless ``spark.driver.extraJavaOptions`` is given): no
    start-up banner, and at ``ERROR`` no progress bar either.

    Example::

        spark = local_session("my-job", extra_conf={"spark.ui.enabled": "false"})
    """
    return _session(app_name, master, {**LOCAL_CONF, **(extra_conf or {})}, warehouse=warehouse, log_level=log_level)


def _session(
    app_name: str, master: str, conf: Mapping[str, str], *, warehouse: str | None = None, log_level: str
) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {"spark.pyspark.python": sys.executable}
    if os.environ.get(DELTA_ENV) == "spark":
        settings.update(delta_session_conf())
    settings.update(conf)
    _add_jvm_engine(settings)
    if warehouse:
        settings["spark.sql.warehouse.dir"] = warehouse
    if "spark.driver.extraJavaOptions" not in settings and not _jvm_started():
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={_log4j(log_level)}"
    if log_level == "ERROR":
        settings["spark.ui.showConsoleProgress"] = "false"
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session


def _add_jvm_engine(settings: dict[str, str]) -> None:
    """spark-mlt's jar and its extension, when this install carries a jar for the PySpark line
    (a wheel; a checkout after ``make jvm``) and ``SPARK_MLT_JVM`` is not ``0``."""
    if os.environ.get(JVM_OFF_ENV) == "0":
        return
    try:
        jar = jvm_jar()
    except (MissingJarsError, OptionError):
        return
    merge_conf(settings, "spark.jars", str(jar))
    merge_conf(settings, "spark.sql.extensions", JVM_EXTENSION)


def _jvm_started() -> bool:
    return SparkSession.getActiveSession() is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def _log4j(level: str) -> str:
    """A log4j2 configuration at ``level`` for a JVM this process starts: Spark's own start-up
    lines (its default profile's banner, "Setting default log level") are left out, and a quiet
    (``ERROR``) run prints nothing but errors."""
    path = Path(tempfile.gettempdir()) / f"spark-mlt-log4j2-{level.lower()}.properties"
    text = (
        f"rootLogger.level = {level.lower()}\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n"
        # PySpark's gateway is what Spark treats as its shell: its logger at the root's level,
        # Spark prints no "Setting default log level" line
        "logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer\n"
        f"logger.gateway.level = {level.lower()}\n"
    )
    if not path.exists() or path.read_text() != text:
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(text)
        partial.replace(path)
    return path.as_uri()


def is_local(master: str | None) -> bool:
    """Whether ``master`` runs Spark in this process (``local``, ``local[2]``, ``local-cluster[...]``)."""
    return master is None or master.startswith("local")


def spark_defaults() -> tuple[dict[str, str], Path | None]:
    """The settings of the ``spark-defaults.conf`` that spark-submit (and so ``pyspark``) reads:
    the one under ``SPARK_CONF_DIR``, else under ``SPARK_HOME/conf`` (PySpark's own home when
    ``SPARK_HOME`` is not set), and its path; ``({}, None)`` when there is none.

    Example::

        settings, path = spark_defaults()
        settings.get("spark.master")  # 'yarn' on a cluster's edge node
    """
    folder = os.environ.get("SPARK_CONF_DIR")
    if not folder:
        home = os.environ.get("SPARK_HOME")
        if not home:
            home = _find_spark_home()
        folder = os.path.join(home, "conf")
    path = Path(folder) / "spark-defaults.conf"
    if not path.is_file():
        return {}, None
    settings: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        # java.util.Properties, as Spark reads the file: the key ends at whitespace, '=' or ':'
        key, value = re.match(r"([^\s=:]*)\s*[=:\s]?\s*(.*)", line).groups()  # type: ignore[union-attr]
        settings[key] = value.strip()
    return settings, path


def job_session(
    app_name: str, *, master: str | None = None, conf: Mapping[str, str] | None = None, log_level: str = "WARN"
) -> SparkSession:
    """The session for a job: spark-submit's when launched by it, else one at ``master`` with
    ``conf`` (e.g. [`spark_mlt.storage.s3a_conf`][spark_mlt.storage.s3a_conf] of the job's
    storage options, and the command's ``--conf``).

    Without ``master``, the master of the Spark defaults file
    ([`spark_defaults`][spark_mlt.batch.spark_defaults]) as ``pyspark`` and
    ``spark-sql`` take it, else ``local[2]``. Only a local master also gets ``LOCAL_CONF`` (2
    shuffle partitions, a 4g driver, ...), each setting only where the defaults file does not
    set it; ``conf`` wins over both. The master used is logged at INFO, with where it came from.

    Under spark-submit the driver's Python finds a running JVM gateway and the master and the
    settings come from spark-submit; ``conf`` still applies where Spark lets a running session
    change a setting (SQL settings).
    """
    if "PYSPARK_GATEWAY_PORT" in os.environ and master is None:
        builder = SparkSession.builder.appName(app_name)
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel(log_level)
        log.info("Spark master %s (spark-submit's)", session.sparkContext.master)
        return session
    defaults, path = spark_defaults()
    source = "--master"
    if master is None:
        master = defaults.get("spark.master") or "local[2]"
        where = str(path) if path else "no spark-defaults.conf"
        source = f"spark.master of {where}" if "spark.master" in defaults else f"the default: {where}"
    if is_local(master):
        local = {key: value for key, value in LOCAL_CONF.items() if key not in defaults}
        session = _session(app_name, master, {**local, **(conf or {})}, log_level=log_level)
    else:
        session = _session(app_name, master, dict(conf or {}), log_level=log_level)
    log.info("Spark master %s (%s)", session.sparkContext.master, source)
    return session
