"""spark-submit on a real standalone cluster whose Python does not have spark-mlt installed.

A master and one worker run on localhost (``spark-class``: PySpark's pip package ships no
``sbin/start-master.sh``). Driver and executors run ``no-spark-mlt-python``: the venv's
interpreter with ``-S`` (no ``site``, so no ``.pth`` files and no editable-install finder) and
``PYTHONPATH`` ending in a copy of the venv's site-packages, as symlinks, minus spark-mlt's
editable hooks and metadata. spark-mlt then comes only from the ``--py-files`` zip that
``make dist`` builds (``jobs/build_pyfiles.py``), on the driver (spark-submit puts the zip
on its PYTHONPATH) and on the executors (Spark ships the zip to them).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyspark
import pytest
import tomllib
from deltalake import DeltaTable

import spark_mlt
from spark_mlt import MLTCodec
from spark_mlt.batch import generate_synthetic
from spark_mlt.storage import read_codecs
from tests.support.processes import stop, tail

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SPARK_HOME = Path(pyspark.__file__).parent
READY_TIMEOUT = 60.0
SUBMIT_TIMEOUT = 240.0
# Short-lived JVMs start faster with the client compiler only and a serial GC.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
PROBE_IDS = 5000
RATINGS = 2000

PROBE = textwrap.dedent(
    '''
    """Submitted by tests/test_spark_submit.py: the UDF engine on the cluster, and where
    driver and executors imported spark_mlt from."""
    import json
    import sys

    from pyspark.sql import SparkSession


    def origin(_=None):
        import os
        import sys

        import spark_mlt

        return {
            "file": os.path.abspath(spark_mlt.__file__),
            "executable": sys.executable,
            "no_site": sys.flags.no_site,
            "cwd": os.getcwd(),
        }


    def main(result_path, count):
        from spark_mlt import MLTCodec
        from spark_mlt.column import mlt_decode, mlt_encode

        spark = SparkSession.builder.appName("spark-mlt udf probe").getOrCreate()
        codec = MLTCodec.from_seed(p=7, n=7, seed=42)
        ids = spark.range(0, count, numPartitions=2).withColumnRenamed("id", "userId")
        tokens = ids.select("userId", mlt_encode("userId", codec, engine="udf").alias("tokens"))
        decoded = tokens.select("userId", "tokens", mlt_decode("tokens", codec, engine="udf").alias("decoded"))
        plan = decoded._jdf.queryExecution().executedPlan().toString()
        rows = decoded.collect()
        executors = spark.sparkContext.parallelize(range(2), 2).map(origin).collect()
        result = {
            "driver": origin(),
            "executors": executors,
            "plan": plan,
            "rows": [[r.userId, list(r.tokens), r.decoded] for r in rows],
        }
        with open(result_path, "w") as handle:
            json.dump(result, handle)
        spark.stop()


    if __name__ == "__main__":
        main(sys.argv[1], int(sys.argv[2]))
    '''
)


# ---------------------------------------------------------------------- helpers
def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _clean_env(home: Path) -> dict[str, str]:
    """The caller's environment without Spark or Python settings that could leak spark-mlt in."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SPARK_", "PYSPARK_", "PYTHON", "VIRTUAL_ENV"))
    }
    conf_dir = home / "conf"
    conf_dir.mkdir(exist_ok=True)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf_dir), SPARK_LOCAL_IP="127.0.0.1")
    return env


@dataclass
class Cluster:
    url: str
    home: Path
    work_dir: Path
    env: dict[str, str]

    def diagnostics(self, *extra: Path) -> str:
        parts = [f"--- {path.name} ---\n{tail(path)}" for path in extra]
        parts += [f"--- {name} ---\n{tail(self.home / name)}" for name in ("master.log", "worker.log")]
        for path in sorted(self.work_dir.glob("app-*/*/stderr")):
            parts.append(f"--- executor {path.relative_to(self.work_dir)} ---\n{tail(path, 3000)}")
        return "\n".join(parts)


@dataclass
class Submitted:
    returncode: int
    stdout: str
    log: Path


def _submit_all(cluster: Cluster, python: Path, py_files: Path, apps: Mapping[str, list[str]]) -> dict[str, Submitted]:
    """spark-submit (client mode) each ``script args...`` at once, driver and executors on ``python``."""
    env = {**cluster.env, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
    conf = {
        "spark.pyspark.python": str(python),
        "spark.pyspark.driver.python": str(python),
        "spark.executorEnv.PYSPARK_PYTHON": str(python),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": FAST_JVM,
        "spark.executor.extraJavaOptions": FAST_JVM,
        "spark.ui.enabled": "false",
        "spark.cores.max": "1",  # one executor per app, so the apps run side by side
        "spark.executor.cores": "1",
        "spark.executor.memory": "1g",
        "spark.sql.shuffle.partitions": "2",
        "spark.log.level": "WARN",
    }
    base = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.url, "--deploy-mode", "client"]
    for key, value in conf.items():
        base += ["--conf", f"{key}={value}"]
    procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    try:
        for name, args in apps.items():
            log = cluster.home / f"{name}-driver.log"
            with open(log, "wb") as out:
                command = [*base, "--py-files", str(py_files), *args]
                proc = subprocess.Popen(
                    command, cwd=cluster.home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            procs[name] = (proc, log)
        deadline = time.monotonic() + SUBMIT_TIMEOUT
        results = {}
        for name, (proc, log) in procs.items():
            try:
                returncode = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                returncode = -1  # reported as a failure, with the logs
            results[name] = Submitted(returncode, log.read_text(errors="replace"), log)
        return results
    finally:
        for proc, _ in procs.values():
            stop(proc)


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark-submit")


@pytest.fixture(scope="module")
def py_files(home: Path) -> Path:
    """The --py-files zip, built by the script ``make dist`` runs."""
    completed = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "build_pyfiles.py"), "--out-dir", str(home / "dist")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return Path(completed.stdout.strip())


@pytest.fixture(scope="module")
def python(home: Path) -> Path:
    """An interpreter with the venv's packages but not spark-mlt (see the module docstring)."""
    lib = home / "site-packages-without-spark-mlt"
    lib.mkdir()
    sources = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    for source in sources:
        for entry in Path(source).iterdir():
            name = entry.name
            hooks = name.startswith(("__editable__", "spark_mlt", "spark-mlt")) or name.endswith(".pth")
            if not hooks and not (lib / name).exists():
                (lib / name).symlink_to(entry)
    wrapper = home / "no-spark-mlt-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        "# The venv's Python without site (no .pth, no editable finder); packages from PYTHONPATH,\n"
        "# whose earlier entries (Spark's, the --py-files zip) win.\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{lib}"\n'
        "export PYTHONPATH\n"
        f'exec "{sys.executable}" -S "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="module")
def cluster(home: Path) -> Iterator[Cluster]:
    """A standalone master and one worker (2 cores, 2 GiB: two 1-core apps) on localhost; always stopped."""
    master_port, master_ui, worker_port, worker_ui = _free_ports(4)
    env = _clean_env(home)
    daemon_env = {**env, "SPARK_DAEMON_JAVA_OPTS": FAST_JVM, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    work_dir = home / "work"
    work_dir.mkdir()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    url = f"spark://127.0.0.1:{master_port}"
    commands = {
        "master": [
            *(spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"),
            *("--port", str(master_port), "--webui-port", str(master_ui)),
        ],
        "worker": [
            *(spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"),
            *("--port", str(worker_port), "--webui-port", str(worker_ui)),
            *("--cores", "2", "--memory", "2g", "--work-dir", str(work_dir)),
        ],
    }
    procs: list[subprocess.Popen[bytes]] = []
    running = Cluster(url, home, work_dir, env)
    try:
        for name, command in commands.items():
            with open(home / f"{name}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        command, cwd=home, env=daemon_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            dead = [name for name, proc in zip(commands, procs, strict=True) if proc.poll() is not None]
            assert not dead, f"{dead} exited early\n{running.diagnostics()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=2) as response:
                    state = json.load(response)
                if any(worker.get("state") == "ALIVE" for worker in state.get("workers", [])):
                    break
            except (OSError, ValueError):
                pass
            assert time.monotonic() < deadline, f"no live worker after {READY_TIMEOUT} s\n{running.diagnostics()}"
            time.sleep(0.5)
        yield running
    finally:
        for proc in reversed(procs):
            stop(proc)


# ---------------------------------------------------------------------- tests
def test_py_files_zip_holds_the_package_at_its_root(py_files: Path) -> None:
    with zipfile.ZipFile(py_files) as archive:
        names = archive.namelist()
    assert "spark_mlt/__init__.py" in names
    assert "spark_mlt/column/functions.py" in names
    assert all(name.startswith("spark_mlt/") and "__pycache__" not in name for name in names), names
    assert not any(name.endswith(".pyc") for name in names)


def test_the_zip_and_the_package_carry_the_version_of_pyproject(py_files: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert spark_mlt.__version__ == version  # written in both places: they must agree
    assert py_files.name == f"spark_mlt-{version}.zip"


def _run_python(python: Path, code: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", code], cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=60, check=False
    )


def test_executor_python_lacks_spark_mlt_but_the_zip_provides_it(python: Path, py_files: Path, home: Path) -> None:
    env = _clean_env(home)
    neutral = home / "neutral-cwd"
    neutral.mkdir(exist_ok=True)
    missing = _run_python(python, "import spark_mlt", neutral, env)
    assert missing.returncode != 0
    assert "No module named 'spark_mlt'" in missing.stderr, missing.stderr
    metadata = _run_python(python, "import importlib.metadata as m; m.version('spark-mlt')", neutral, env)
    assert "PackageNotFoundError" in metadata.stderr, metadata.stderr
    has_the_rest = _run_python(python, "import numpy, pandas, pyarrow, pyspark, deltalake", neutral, env)
    assert has_the_rest.returncode == 0, has_the_rest.stderr
    from_zip = _run_python(
        python,
        "import spark_mlt.batch.cli, spark_mlt.storage, spark_mlt.column, spark_mlt.ml; print(spark_mlt.__file__)",
        neutral,
        {**env, "PYTHONPATH": str(py_files)},
    )
    assert from_zip.returncode == 0, from_zip.stderr
    assert from_zip.stdout.strip() == str(py_files / "spark_mlt" / "__init__.py")


@pytest.fixture(scope="module")
def runs(cluster: Cluster, python: Path, py_files: Path) -> dict[str, Submitted]:
    """Both apps, submitted at once: the UDF probe and the MovieLens job (udf engine)."""
    probe = cluster.home / "probe.py"
    probe.write_text(PROBE)
    release = generate_synthetic(cluster.home / "ml", ratings=RATINGS, users=300, movies=400)
    job = ["--input", str(release), "--output", str(cluster.home / "ratings_mlt"), "--engine", "udf"]
    apps = {
        "probe": [str(probe), str(cluster.home / "probe.json"), str(PROBE_IDS)],
        "movielens": [str(ROOT / "jobs" / "tokenize_movielens.py"), *job, "--p", "7", "--n", "5"],
    }
    return _submit_all(cluster, python, py_files, apps)


def test_udf_engine_runs_on_executors_from_the_py_files_zip(
    cluster: Cluster, runs: dict[str, Submitted], py_files: Path
) -> None:
    run = runs["probe"]
    assert run.returncode == 0, cluster.diagnostics(run.log)
    result = json.loads((cluster.home / "probe.json").read_text())
    assert "ArrowEvalPython" in result["plan"], result["plan"]  # the udf engine, not native SQL

    assert result["driver"]["file"] == str(py_files / "spark_mlt" / "__init__.py"), result["driver"]
    assert result["driver"]["no_site"] == 1
    assert len(result["executors"]) == 2
    for where in result["executors"]:
        # Spark's copy of the zip in the executor's directory under the worker's work dir.
        assert where["file"].startswith(str(cluster.work_dir) + os.sep), where
        assert where["file"].endswith(f"{os.sep}{py_files.name}{os.sep}spark_mlt{os.sep}__init__.py"), where
        assert where["no_site"] == 1, where
        assert where["executable"] == sys.executable, where
        assert Path(where["cwd"]).resolve() != ROOT, where

    rows = sorted(result["rows"])
    ids = np.array([row[0] for row in rows])
    codec = MLTCodec.from_seed(p=7, n=7, seed=42)
    np.testing.assert_array_equal(ids, np.arange(PROBE_IDS))
    np.testing.assert_array_equal(np.array([row[1] for row in rows]), codec.encode(ids))
    np.testing.assert_array_equal(np.array([row[2] for row in rows]), ids)


def test_tokenize_movielens_job_with_the_udf_engine(cluster: Cluster, runs: dict[str, Submitted]) -> None:
    run = runs["movielens"]
    assert run.returncode == 0, cluster.diagnostics(run.log)
    assert f"spark-mlt movielens: rows in {RATINGS}, out {RATINGS}" in run.stdout, cluster.diagnostics(run.log)

    output = cluster.home / "ratings_mlt"
    table = DeltaTable(str(output)).to_pyarrow_table().to_pandas()
    assert len(table) == RATINGS
    codecs = read_codecs(output)
    assert {column: (codec.p, codec.n) for column, codec in codecs.items()} == {"userId": (7, 5), "movieId": (7, 5)}
    for column, codec in codecs.items():
        tokens = codec.unpack(table[f"{column}_mlt"].to_numpy())  # the default, packed layout
        np.testing.assert_array_equal(codec.decode(tokens), table[column].to_numpy())
    source = pd.read_csv(cluster.home / "ml" / "ratings.csv")
    for column in ("userId", "movieId"):
        np.testing.assert_array_equal(np.sort(table[column].to_numpy()), np.sort(source[column].to_numpy()))
