"""Airflow DAG ``spark_mlt_movielens``: tokenize MovieLens into Delta, then verify the round trip.

Two ``SparkSubmitOperator`` tasks, once a day::

    tokenize_movielens  ->  decode_verify

* ``tokenize_movielens`` runs ``jobs/tokenize_movielens.py --input <release> --output
  <root>/ds=<date> --mode overwrite``.
* ``decode_verify`` runs ``jobs/decode_table.py --input <root>/ds=<date> --verify``; it fails
  when a decoded id differs from the original: the job then exits 3.

A task fails when its job exits with any code but 0 (docs/cli.md, "Exit codes"): 1 failure (one
line ``spark-mlt: error: ...`` on stderr), 2 usage error (a bad flag or conf value, before any
Spark work, or an option the job's tables cannot take, before anything is written), 3 ``decode
--verify`` found decoded ids that differ from the originals, 4 more rows rejected than
``--max-rejected`` allows (the rows and the quarantine are committed: a data-quality failure),
130 interrupted. The tasks that quarantine rows pass ``--max-rejected 0``, so that a quarantined
row fails its run where a scheduler shows it; raise it (a count, or a share such as ``0.1%``)
where some rejected rows are expected.

Idempotent reruns: each DAG run writes its own table, ``<root>/ds=<logical date>``, in
``overwrite`` mode, so a retried task or a cleared and re-run DAG run replaces that run's
table (one new Delta version, same rows) instead of appending a second copy. A manual run
without a logical date uses the day it was triggered.

Deployment:

1. Install Airflow 3 and the Spark provider on the scheduler and workers
   (``pip install -e ".[airflow]"``, or ``apache-airflow`` and
   ``apache-airflow-providers-apache-spark``), with ``spark-submit`` on the workers' PATH.
2. Put this file in the dags folder: symlink it (then the repository is found from the
   link's target), or copy it and set ``SPARK_MLT_HOME`` to the repository's checkout on the
   workers (default: this file's repository when it is in one, else ``/opt/spark-mlt``).
   The file imports neither spark_mlt nor pyspark.
3. Run ``make dist`` in that checkout: the tasks ship ``dist/spark_mlt-<version>.zip`` with
   ``--py-files`` and the jar it builds into ``spark_mlt/jars/``. The driver also needs
   ``deltalake`` and ``pyyaml``, and executors ``numpy``, ``pandas`` and ``pyarrow``
   (``pip install .`` on the cluster's Python does it).
4. Point the ``spark_default`` connection at the cluster, e.g. for a local run
   ``AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}'``, or
   ``yarn``, ``spark://host:7077``, ``k8s://https://host:443``.
5. Optional Airflow Variables, read when a task runs (defaults in brackets):
   ``spark_mlt_movielens_input`` (``$SPARK_MLT_HOME/data/ml-latest-small``),
   ``spark_mlt_movielens_output`` (``$SPARK_MLT_HOME/output/movielens_mlt``, the root of the
   per-run tables), ``spark_mlt_py_files`` (``$SPARK_MLT_HOME/dist/spark_mlt-<version>.zip``)
   and ``spark_mlt_jar`` (spark-mlt's jar for Spark 4,
   ``$SPARK_MLT_HOME/spark_mlt/jars/spark-mlt-jvm_4_2.13-<version>.jar``, which ``make dist``
   builds; on Spark 3.5 point it at ``spark-mlt-jvm_3.5_2.12-<version>.jar``, on a cluster at
   a copy the cluster reaches, e.g. on S3). docs/airflow.md lists the other two DAGs' Variables.

Every task submits its job with spark-mlt's jar and its session extension (``spark.jars`` and
``spark.sql.extensions=io.sparkmlt.MltExtensions``, what ``spark-mlt jar --submit`` prints), so
the jobs run the JVM engine (docs/jvm.md).

Environment variables, read when the DAG file is parsed: ``SPARK_MLT_HOME`` (above),
``SPARK_MLT_VERSION`` (the zip's and the jar's version; default: the one in the checkout's
pyproject.toml, else the installed spark-mlt's), ``SPARK_MLT_JVM=0`` where no jar can be added
(the jobs then run the jar-free engines), and ``SPARK_MLT_DELTA_JARS=true`` on clusters that
have the Delta Lake jars (delta-spark for Spark 4): the jobs then get Delta's session extension
(listed before spark-mlt's) and catalog and write through delta-spark. Leave it unset
elsewhere: the jobs detect that the jars are missing and commit through delta-rs on the driver,
no jars needed.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from importlib import metadata
from pathlib import Path
from types import ModuleType

# A DAG file is Airflow's to import: here Airflow is no optional dependency (TID253 is for the package).
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10+
    from airflow import DAG  # type: ignore[attr-defined,no-redef]

tomllib: ModuleType | None
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None


def _default_home() -> str:
    """The spark-mlt checkout: $SPARK_MLT_HOME, else this file's repository, else /opt/spark-mlt."""
    if os.environ.get("SPARK_MLT_HOME"):
        return os.environ["SPARK_MLT_HOME"]
    repo = Path(__file__).resolve().parent.parent.parent  # <repo>/jobs/dags/<this file>
    return str(repo) if (repo / "jobs" / "tokenize_movielens.py").is_file() else "/opt/spark-mlt"


def _project_version(home: str) -> str:
    """$SPARK_MLT_VERSION, else the version in the checkout's pyproject.toml (what ``make dist`` uses), else the
    installed spark-mlt's."""
    if os.environ.get("SPARK_MLT_VERSION"):
        return os.environ["SPARK_MLT_VERSION"]
    try:
        if tomllib is not None:
            with open(Path(home) / "pyproject.toml", "rb") as file:
                return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, ValueError):  # no checkout here: the installed package's
        pass
    return metadata.version("spark-mlt")


def _variable(name: str, default: str) -> str:
    """A template that reads Airflow Variable ``name`` when the task runs (no database access at parse time)."""
    return "{{ var.value.get(%s, %s) }}" % (json.dumps(name), json.dumps(default))  # noqa: UP031 - Jinja braces


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


SPARK_MLT_HOME = _default_home()
SPARK_MLT_VERSION = _project_version(SPARK_MLT_HOME)

PY_FILES = _variable("spark_mlt_py_files", f"{SPARK_MLT_HOME}/dist/spark_mlt-{SPARK_MLT_VERSION}.zip")
INPUT = _variable("spark_mlt_movielens_input", f"{SPARK_MLT_HOME}/data/ml-latest-small")
OUTPUT_ROOT = _variable("spark_mlt_movielens_output", f"{SPARK_MLT_HOME}/output/movielens_mlt")
# The run's logical date; a manual run without one (Airflow 3) uses the day it was triggered.
RUN_DATE = "{{ ds if ds is defined else dag_run.run_after | ds }}"
OUTPUT = f"{OUTPUT_ROOT}/ds={RUN_DATE}"

# The same settings as conf/spark-local.conf, minus the master and the memory (the
# connection and the cluster decide those).
SPARK_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
}
# Session extensions, comma-separated: Delta's (only where the cluster has its jars: with it set
# and the jars missing the session cannot load its catalog; without it the jobs commit through
# delta-rs), then spark-mlt's, which registers the jar's functions (spark_mlt.jars.JVM_EXTENSION).
EXTENSIONS: list[str] = []
if _truthy(os.environ.get("SPARK_MLT_DELTA_JARS")):
    EXTENSIONS.append("io.delta.sql.DeltaSparkSessionExtension")
    SPARK_CONF["spark.sql.catalog.spark_catalog"] = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# spark-mlt's jar, as `spark-mlt jar --submit` gives it (--jars is spark.jars), unless SPARK_MLT_JVM=0
# as for the sessions spark-mlt starts. Its version is the zip's: a session refuses a jar of another.
if os.environ.get("SPARK_MLT_JVM") != "0":
    SPARK_CONF["spark.jars"] = _variable(
        "spark_mlt_jar", f"{SPARK_MLT_HOME}/spark_mlt/jars/spark-mlt-jvm_4_2.13-{SPARK_MLT_VERSION}.jar"
    )
    EXTENSIONS.append("io.sparkmlt.MltExtensions")
if EXTENSIONS:
    SPARK_CONF["spark.sql.extensions"] = ",".join(EXTENSIONS)

default_args = {
    "owner": "spark-mlt",
    "depends_on_past": False,
    "retries": 2,
    "retry_delay": timedelta(minutes=5),
    "retry_exponential_backoff": True,
    "execution_timeout": timedelta(hours=2),
}

with DAG(
    dag_id="spark_mlt_movielens",
    description="Tokenize MovieLens into Delta with spark-mlt, then check that decoding gives the ids back",
    doc_md=__doc__,
    schedule="@daily",  # None to run only when triggered
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,  # no backfill of the days before the DAG was deployed
    max_active_runs=1,
    default_args=default_args,
    tags=["spark-mlt", "movielens", "delta"],
) as dag:
    tokenize_movielens = SparkSubmitOperator(
        task_id="tokenize_movielens",
        conn_id="spark_default",
        application=f"{SPARK_MLT_HOME}/jobs/tokenize_movielens.py",
        py_files=PY_FILES,
        conf=SPARK_CONF,
        name="spark-mlt-movielens-tokenize",
        # Overwrite this run's own table: retries and re-runs replace it, never duplicate rows.
        application_args=["--input", INPUT, "--output", OUTPUT, "--mode", "overwrite"],
    )

    decode_verify = SparkSubmitOperator(
        task_id="decode_verify",
        conn_id="spark_default",
        application=f"{SPARK_MLT_HOME}/jobs/decode_table.py",
        py_files=PY_FILES,
        conf=SPARK_CONF,
        name="spark-mlt-movielens-decode-verify",
        application_args=["--input", OUTPUT, "--verify"],
    )

    tokenize_movielens >> decode_verify


# ---------------------------------------------------------------------------- incremental
# New order files land in a folder all day; each run tokenizes the ones that arrived since the
# last run, once, and stops (Structured Streaming's available-now trigger). The checkpoint
# remembers what was taken, and each batch is one idempotent Delta commit, so a retried or
# overlapping run writes nothing twice.
LANDING = _variable("spark_mlt_orders_landing", f"{SPARK_MLT_HOME}/data/orders")
ORDERS = _variable("spark_mlt_orders_output", f"{SPARK_MLT_HOME}/output/orders_mlt")
CHECKPOINT = _variable("spark_mlt_orders_checkpoint", f"{SPARK_MLT_HOME}/output/checkpoints/orders_mlt")

with DAG(
    dag_id="spark_mlt_orders_incremental",
    description="Tokenize the order files that landed since the last run, each row exactly once",
    doc_md="Hourly, available-now: the new files of the landing folder into one Delta table.",
    schedule="@hourly",
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,  # one writer per checkpoint
    default_args=default_args,
    tags=["spark-mlt", "streaming", "delta"],
) as incremental:
    SparkSubmitOperator(
        task_id="tokenize_new_orders",
        conn_id="spark_default",
        application=f"{SPARK_MLT_HOME}/jobs/tokenize_table.py",
        py_files=PY_FILES,
        conf=SPARK_CONF,
        name="spark-mlt-orders-incremental",
        application_args=[
            "--stream",
            "--trigger",
            "available-now",
            "--checkpoint",
            CHECKPOINT,
            "--input",
            LANDING,
            "--input-format",
            "parquet",
            "--columns",
            "customer_id",
            "product_id",
            "--output",
            ORDERS,
            "--handle-invalid",
            "quarantine",
            "--max-rejected",
            "0",
        ],
    )


# -------------------------------------------------------------------------------- mirror
# A tokenized mirror of a Delta table that changes (customers: corrected, merged, erased):
# each run applies the source's changes since the version the mirror holds (its change data
# feed), in one commit, exactly once: the mirror records the source version it reached, so a
# retried or overlapping run commits nothing twice. After each sync the erasures are made
# physical as far as the retention allows: the files the syncs removed longer ago than each table's
# retention (delta.deletedFileRetentionDuration, 7 days unless set) are
# vacuumed from the mirror, its quarantine and its vocabularies (docs/sync.md: erasure step by step).
CUSTOMERS = _variable("spark_mlt_customers_source", f"{SPARK_MLT_HOME}/data/customers")
CUSTOMERS_MLT = _variable("spark_mlt_customers_output", f"{SPARK_MLT_HOME}/output/customers_mlt")

with DAG(
    dag_id="spark_mlt_customers_sync",
    description="Keep a tokenized mirror of a changing Delta table: its updates, deletes and erasures",
    doc_md="Hourly: the source's changes into the mirror, one commit per run, then the expired files vacuumed.",
    schedule="@hourly",
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,  # one writer per mirror
    default_args=default_args,
    tags=["spark-mlt", "sync", "delta", "erasure"],
) as mirror:
    sync_customers = SparkSubmitOperator(
        task_id="sync_customers",
        conn_id="spark_default",
        application=f"{SPARK_MLT_HOME}/jobs/sync_table.py",
        py_files=PY_FILES,
        conf=SPARK_CONF,
        name="spark-mlt-customers-sync",
        application_args=[
            "--input",
            CUSTOMERS,
            "--output",
            CUSTOMERS_MLT,
            "--columns",
            "customer_id",
            "email",
            "--key",
            "customer_id",
            "--handle-invalid",
            "quarantine",
            "--max-rejected",
            "0",
        ],
    )
    erase_customers = SparkSubmitOperator(
        task_id="erase_customers",
        conn_id="spark_default",
        application=f"{SPARK_MLT_HOME}/jobs/erase_mirror.py",
        py_files=PY_FILES,
        conf=SPARK_CONF,
        name="spark-mlt-customers-erase",
        # the files the syncs removed longer ago than each table's retention (7 days unless set)
        application_args=["--input", CUSTOMERS_MLT, "--apply"],
    )
    sync_customers >> erase_customers
