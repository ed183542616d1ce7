"""Local SparkSession settings for tests, jobs and the demo.

On a cluster, spark-submit and the platform configure the session; these helpers only
matter for local runs. Executors must run the same Python as the driver (they unpickle our
UDFs), so ``spark.pyspark.python`` defaults to ``sys.executable``.

``SPARK_MLT_DELTA=spark`` in the environment gives local sessions Delta's jars (from ``make
jars``), its SQL extension and catalog (:func:`spark_mlt.batch.jars.delta_session_conf`), so
the jobs and the demo write through delta-spark (``DELTA=spark make demo``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from spark_mlt.batch.jars import delta_session_conf

__all__ = ["DELTA_ENV", "LOCAL_CONF", "job_session", "local_session"]

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
) -> SparkSession:
    """Get or create a local SparkSession with spark-mlt's defaults (see ``LOCAL_CONF``).

    Example::

        spark = local_session("my-job", extra_conf={"spark.ui.enabled": "false"})
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    conf = {**LOCAL_CONF, "spark.pyspark.python": sys.executable}
    if os.environ.get(DELTA_ENV) == "spark":
        conf.update(delta_session_conf())
    conf.update(extra_conf or {})
    if warehouse:
        conf["spark.sql.warehouse.dir"] = warehouse
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def job_session(app_name: str, *, master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """The session for a job: spark-submit's when launched by it, else a local one with
    ``conf`` (e.g. :func:`spark_mlt.storage.s3a_conf` of the job's storage options).

    Under spark-submit the driver's Python finds a running JVM gateway and the master and the
    settings come from spark-submit, so nothing is overridden here.
    """
    if "PYSPARK_GATEWAY_PORT" in os.environ and master is None:
        return SparkSession.builder.appName(app_name).getOrCreate()
    return local_session(app_name, master=master or "local[2]", extra_conf=conf)
