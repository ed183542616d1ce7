"""The Airflow DAGs in jobs/dags: they parse, wire their spark-submit tasks, render idempotent paths,
and submit every job with spark-mlt's jar and its session extension.

Airflow is loaded in a subprocess, never in the pytest process: importing it configures the
root logger (a handler at INFO), reads and creates ``AIRFLOW_HOME`` and emits its own
deprecation warnings, none of which should leak into the other tests (``filterwarnings =
error``). The subprocess gets a fresh ``AIRFLOW_HOME`` under ``tmp_path``, parses the DAG
folder with Airflow's ``DagBag`` (no metadata database needed), renders the task templates
as a run would, and prints JSON.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import spark_mlt.jars
from spark_mlt.batch import cli
from spark_mlt.batch.cli import JOBS
from spark_mlt.batch.cli.jobs import job_call, job_values
from spark_mlt.batch.cli.main import parse_command_line
from spark_mlt.batch.write.stream import tokenize_stream
from spark_mlt.jars import DELTA_EXTENSION, JVM_EXTENSION, jvm_jar_name
from tests.support.paths import ROOT

DAGS = ROOT / "jobs" / "dags"
DAG_ID = "spark_mlt_movielens"
INCREMENTAL_ID = "spark_mlt_orders_incremental"
MIRROR_ID = "spark_mlt_customers_sync"
SPARK_SUBMIT = "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator"


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# Looked up, never imported here (see the module docstring), hence not pytest.importorskip;
# find_spec of a submodule would import its parent packages, so the provider is checked by distribution.
if importlib.util.find_spec("airflow") is None or not _installed("apache-airflow-providers-apache-spark"):
    pytest.skip(
        "Airflow or its Spark provider is not installed: pip install -e '.[airflow]' "
        "(apache-airflow, apache-airflow-providers-apache-spark) to test jobs/dags",
        allow_module_level=True,
    )

# Runs in the subprocess. argv[1]: the DAG folder; argv[2]: JSON list of parse-time environments.
PROBE = r"""
import copy, inspect, json, os, sys, warnings
from datetime import datetime, timezone

try:
    from airflow.dag_processing.dagbag import DagBag  # Airflow 3
except ImportError:
    from airflow.models.dagbag import DagBag  # Airflow 2
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

class Variables:  # stands in for Airflow's `var.value` accessor: no metadata database here
    def __init__(self, values):
        self.values = values
    def get(self, key, default=None):
        return self.values.get(key, default)

class DagRun:
    run_after = datetime(2025, 3, 4, 5, 6, tzinfo=timezone.utc)

kwargs = {"include_examples": False} if "include_examples" in inspect.signature(DagBag.__init__).parameters else {}
SCHEDULED = {"ds": "2025-01-02", "var": {"value": Variables({})}, "dag_run": DagRun()}

def rendered(task, dag, context):
    copied = copy.copy(task)
    copied.render_template_fields(context, jinja_env=dag.get_template_env())
    return copied

def submitted_conf(dag):  # each task's conf as a scheduled run submits it (templates rendered)
    return {task.task_id: dict(rendered(task, dag, SCHEDULED).conf or {}) for task in dag.tasks}
results = []
for env in json.loads(sys.argv[2]):
    os.environ.pop("SPARK_MLT_HOME", None)
    os.environ.pop("SPARK_MLT_DELTA_JARS", None)
    os.environ.pop("SPARK_MLT_VERSION", None)
    os.environ.pop("SPARK_MLT_JVM", None)
    os.environ.update(env)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(dag_folder=sys.argv[1], **kwargs)
    result = {
        "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
        # warnings raised by the DAG file: those DagBag kept (Airflow 3) and any that reached us
        "warnings": sorted(
            {str(w) for ws in getattr(bag, "captured_warnings", {}).values() for w in ws}
            | {f"{w.category.__name__}: {w.message} ({w.filename})" for w in caught if "jobs/dags" in w.filename}
        ),
        "dag_ids": sorted(bag.dags),
        "imported": sorted(m for m in ("spark_mlt", "pyspark") if m in sys.modules),
    }
    dag = bag.dags.get("spark_mlt_movielens")
    if dag is not None:
        result["dag"] = {
            "catchup": dag.catchup,
            "schedule": str(getattr(dag, "schedule", None) or getattr(dag, "schedule_interval", None)),
            "max_active_runs": dag.max_active_runs,
        }
        tasks = {}
        for task in dag.tasks:
            cls = type(task)
            info = {
                "type": f"{cls.__module__}.{cls.__qualname__}",
                "is_spark_submit": isinstance(task, SparkSubmitOperator),
                "downstream": sorted(task.downstream_task_ids),
                "conn_id": task._conn_id,
                "retries": task.retries,
                "retry_delay_s": task.retry_delay.total_seconds(),
                "application": task.application,
                "application_args": list(task.application_args or []),
                "py_files": task.py_files,
                "conf": dict(task.conf or {}),
            }
            for label, context in {
                "scheduled": SCHEDULED,
                "manual": {"var": {"value": Variables({})}, "dag_run": DagRun()},  # Airflow 3: no logical date
                "variables": {
                    "ds": "2025-01-02",
                    "dag_run": DagRun(),
                    "var": {"value": Variables({
                        "spark_mlt_movielens_input": "/data/ml-25m",
                        "spark_mlt_movielens_output": "s3a://bucket/mlt",
                        "spark_mlt_py_files": "/opt/zips/spark_mlt.zip",
                        "spark_mlt_jar": "s3://bucket/jars/spark-mlt-jvm_3.5_2.12.jar",
                    })},
                },
            }.items():
                done = rendered(task, dag, context)
                info[label] = {
                    "application_args": list(done.application_args),
                    "py_files": done.py_files,
                    "conf": dict(done.conf or {}),
                }
            tasks[task.task_id] = info
        result["tasks"] = tasks
    result["submitted_conf"] = {dag_id: submitted_conf(each) for dag_id, each in sorted(bag.dags.items())}
    incremental = bag.dags.get("spark_mlt_orders_incremental")
    if incremental is not None:
        result["incremental"] = {
            "schedule": str(getattr(incremental, "schedule", None) or getattr(incremental, "schedule_interval", None)),
            "max_active_runs": incremental.max_active_runs,
            "tasks": {
                task.task_id: {"application": task.application, "application_args": list(task.application_args or [])}
                for task in incremental.tasks
            },
        }
    mirror = bag.dags.get("spark_mlt_customers_sync")
    if mirror is not None:
        result["mirror"] = {
            "max_active_runs": mirror.max_active_runs,
            "tasks": {
                task.task_id: {
                    "application": task.application,
                    "application_args": list(task.application_args or []),
                    "downstream": sorted(task.downstream_task_ids),
                }
                for task in mirror.tasks
            },
        }
    results.append(result)
print("PROBE-JSON " + json.dumps(results))
"""


def _probe(tmp_path: Path, environments: list[dict[str, str]]) -> list[dict[str, Any]]:
    home = tmp_path / "airflow_home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SPARK_MLT_"))}
    env |= {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(DAGS), json.dumps(environments)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    line = next((line for line in proc.stdout.splitlines() if line.startswith("PROBE-JSON ")), None)
    assert proc.returncode == 0, f"probe failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert line is not None, f"no probe output:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert not (home / "airflow.db").exists(), "parsing the DAG must not need the metadata database"
    return list(json.loads(line.removeprefix("PROBE-JSON ")))


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """[default environment, cluster environment with SPARK_MLT_HOME and the Delta jars, the
    Delta jars without spark-mlt's (SPARK_MLT_JVM=0)]."""
    return _probe(
        tmp_path_factory.mktemp("airflow"),
        [
            {},
            {"SPARK_MLT_HOME": "/opt/spark-mlt", "SPARK_MLT_DELTA_JARS": "true"},
            {"SPARK_MLT_DELTA_JARS": "true", "SPARK_MLT_JVM": "0"},
        ],
    )


def _project_version() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    assert match is not None
    return match.group(1)


def test_dag_parses_without_errors_or_warnings(parsed: list[dict[str, Any]]) -> None:
    for result in parsed:
        assert result["import_errors"] == {}
        assert result["warnings"] == []
        assert result["dag_ids"] == sorted([DAG_ID, INCREMENTAL_ID, MIRROR_ID])
        assert result["imported"] == []  # parsing must not need spark_mlt (nor pyspark) on the scheduler
        assert result["dag"] == {"catchup": False, "schedule": "@daily", "max_active_runs": 1}


def test_two_spark_submit_tasks_tokenize_then_verify(parsed: list[dict[str, Any]]) -> None:
    tasks = parsed[0]["tasks"]
    assert set(tasks) == {"tokenize_movielens", "decode_verify"}
    for task in tasks.values():
        assert task["type"] == SPARK_SUBMIT
        assert task["is_spark_submit"]
        assert task["conn_id"] == "spark_default"
        assert task["retries"] >= 1
        assert task["retry_delay_s"] > 0
    assert tasks["tokenize_movielens"]["downstream"] == ["decode_verify"]
    assert tasks["decode_verify"]["downstream"] == []


#: the exit codes the DAG's docstring lists, by the words it gives each, and the command's constants
EXIT_WORDS = {
    "failure": cli.EXIT_FAILURE,
    "usage error": cli.EXIT_USAGE,
    "``decode --verify`` found": cli.EXIT_MISMATCH,
    "more rows rejected": cli.EXIT_REJECTED,
    "interrupted": cli.EXIT_INTERRUPTED,
}


def test_the_docstring_gives_the_exit_codes_the_jobs_return() -> None:
    """The docstring said ``decode_verify`` fails with exit 1 on a mismatch, where ``decode
    --verify`` exits 3 (``EXIT_MISMATCH``); each code it lists is the command's for its meaning.
    Read from the file, as the DAG's ``doc_md``: no Airflow needed."""
    doc = ast.get_docstring(ast.parse((DAGS / "spark_mlt_movielens.py").read_text(encoding="utf-8"))) or ""
    prose = " ".join(doc.split())
    verify = re.search(r"``decode_verify`` runs .*?: the job then exits (\d+)\.", prose)
    assert verify is not None, "the docstring says no exit code of decode_verify's mismatch"
    assert int(verify[1]) == cli.EXIT_MISMATCH
    listed = {words: int(code) for code, words in re.findall(rf"(\d+) ({'|'.join(map(re.escape, EXIT_WORDS))})", prose)}
    assert listed == EXIT_WORDS


def test_applications_are_the_repository_jobs(parsed: list[dict[str, Any]]) -> None:
    tasks = parsed[0]["tasks"]  # no SPARK_MLT_HOME: the DAG finds the repository it sits in
    assert Path(tasks["tokenize_movielens"]["application"]) == ROOT / "jobs" / "tokenize_movielens.py"
    assert Path(tasks["decode_verify"]["application"]) == ROOT / "jobs" / "decode_table.py"
    for task in tasks.values():
        assert Path(task["application"]).is_file()
        assert task["scheduled"]["py_files"] == str(ROOT / "dist" / f"spark_mlt-{_project_version()}.zip")
        # no Delta jars assumed (the jobs use delta-rs): spark-mlt's extension alone
        assert task["conf"]["spark.sql.extensions"] == JVM_EXTENSION
        assert "spark.sql.catalog.spark_catalog" not in task["conf"]

    cluster = parsed[1]["tasks"]
    assert cluster["tokenize_movielens"]["application"] == "/opt/spark-mlt/jobs/tokenize_movielens.py"
    assert cluster["decode_verify"]["scheduled"]["py_files"].startswith("/opt/spark-mlt/dist/spark_mlt-")
    for task in cluster.values():
        assert task["conf"]["spark.sql.extensions"] == f"{DELTA_EXTENSION},{JVM_EXTENSION}"
        assert task["conf"]["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def test_each_run_overwrites_its_own_table(parsed: list[dict[str, Any]]) -> None:
    tasks = parsed[0]["tasks"]
    table = str(ROOT / "output" / "movielens_mlt" / "ds=2025-01-02")
    tokenize = tasks["tokenize_movielens"]["scheduled"]["application_args"]
    assert tokenize == ["--input", str(ROOT / "data" / "ml-latest-small"), "--output", table, "--mode", "overwrite"]
    assert tasks["decode_verify"]["scheduled"]["application_args"] == ["--input", table, "--verify"]


def test_manual_run_without_logical_date_uses_its_run_day(parsed: list[dict[str, Any]]) -> None:
    args = parsed[0]["tasks"]["decode_verify"]["manual"]["application_args"]
    assert args == ["--input", str(ROOT / "output" / "movielens_mlt" / "ds=2025-03-04"), "--verify"]


def test_variables_override_paths(parsed: list[dict[str, Any]]) -> None:
    tasks = parsed[0]["tasks"]
    tokenize = tasks["tokenize_movielens"]["variables"]
    assert tokenize["application_args"] == [
        "--input",
        "/data/ml-25m",
        "--output",
        "s3a://bucket/mlt/ds=2025-01-02",
        "--mode",
        "overwrite",
    ]
    assert tokenize["py_files"] == "/opt/zips/spark_mlt.zip"
    assert tasks["decode_verify"]["variables"]["application_args"] == [
        "--input",
        "s3a://bucket/mlt/ds=2025-01-02",
        "--verify",
    ]


def test_the_incremental_dag_streams_new_files_available_now(parsed: list[dict[str, Any]]) -> None:
    """One hourly task: the tokenize job as an available-now stream with its checkpoint, whose
    flags the real parser takes."""
    incremental = parsed[0]["incremental"]
    assert (incremental["schedule"], incremental["max_active_runs"]) == ("@hourly", 1)
    (task,) = incremental["tasks"].values()
    assert Path(task["application"]) == ROOT / "jobs" / "tokenize_table.py"
    args = task["application_args"]
    assert args[:3] == ["--stream", "--trigger", "available-now"]
    assert "--checkpoint" in args
    parsed_args, config = parse_command_line(["tokenize", *args])
    run, call = job_call(JOBS["tokenize"], job_values(JOBS["tokenize"], parsed_args, config))
    assert run is tokenize_stream
    assert call["stream"].interval is None  # available-now
    assert call["stream"].checkpoint == args[args.index("--checkpoint") + 1]


def test_the_mirror_dag_syncs_then_vacuums_the_erasures_with_the_repository_jobs(
    parsed: list[dict[str, Any]],
) -> None:
    """One writer per mirror; the sync runs the sync command by its key, then the erase job
    vacuums: both are the repository's spark-submit scripts, whose flags the real parser takes."""
    mirror = parsed[0]["mirror"]
    assert mirror["max_active_runs"] == 1
    tasks = mirror["tasks"]
    assert tasks["sync_customers"]["downstream"] == ["erase_customers"]
    for task, command in (("sync_customers", "sync"), ("erase_customers", "erase")):
        application = Path(tasks[task]["application"])
        assert application.is_file()
        assert f'main(["{command}"' in application.read_text()
    args = tasks["sync_customers"]["application_args"]
    assert args[args.index("--key") + 1] == "customer_id"
    assert "--apply" in tasks["erase_customers"]["application_args"]


def _jar_in_checkout(home: Path | str, spark_version: str) -> str:
    """Where a checkout's `make jvm` (and so `make dist`) puts spark-mlt's jar for a Spark line:
    the folder spark_mlt.jars.jvm_jar reads, under ``home``."""
    folder = Path(spark_mlt.jars.__file__).resolve().parent / "jars"
    return str(Path(home) / folder.relative_to(ROOT) / jvm_jar_name(spark_version, _project_version()))


def test_every_job_is_submitted_with_spark_mlt_jar_and_its_extension(parsed: list[dict[str, Any]]) -> None:
    """Regression: the DAGs listed Delta's extension alone, so their jobs never ran the JVM engine.
    Every task of every DAG submits what `spark-mlt jar --submit` prints (--jars is spark.jars) and,
    with Delta's jars, both extensions, as docs/jvm.md says."""
    for result, home in ((parsed[0], ROOT), (parsed[1], "/opt/spark-mlt")):
        submitted = result["submitted_conf"]
        assert set(submitted) == {DAG_ID, INCREMENTAL_ID, MIRROR_ID}
        for dag_id, tasks in submitted.items():
            assert tasks, dag_id
            for task_id, conf in tasks.items():
                assert conf["spark.jars"] == _jar_in_checkout(home, "4.0.0"), (dag_id, task_id)
                extensions = conf["spark.sql.extensions"].split(",")
                assert JVM_EXTENSION in extensions, (dag_id, task_id)
                assert (DELTA_EXTENSION in extensions) == (result is parsed[1]), (dag_id, task_id)


def test_the_jar_variable_picks_another_jar(parsed: list[dict[str, Any]]) -> None:
    for task in parsed[0]["tasks"].values():
        assert task["variables"]["conf"]["spark.jars"] == "s3://bucket/jars/spark-mlt-jvm_3.5_2.12.jar"
        assert task["variables"]["conf"]["spark.sql.extensions"] == JVM_EXTENSION


def test_without_the_jvm_engine_no_jar_is_submitted(parsed: list[dict[str, Any]]) -> None:
    """SPARK_MLT_JVM=0, as for the sessions spark-mlt starts: no jar, Delta's extension alone."""
    for tasks in parsed[2]["submitted_conf"].values():
        for conf in tasks.values():
            assert "spark.jars" not in conf
            assert conf["spark.sql.extensions"] == DELTA_EXTENSION
