"""spark-submit on a real standalone cluster whose Python does not have spark-mlt installed.

The session's one standalone cluster (``tests/support/cluster.py``) runs the apps. Driver and
executors run ``no-spark-mlt-python``: the venv's
interpreter with ``-S`` (no ``site``, so no ``.pth`` files and no editable-install finder) and
``PYTHONPATH`` ending in a copy of the venv's site-packages, as symlinks, minus spark-mlt's
editable hooks and metadata. spark-mlt then comes only from the ``--py-files`` zip that
``make dist`` builds (``jobs/build_pyfiles.py``), on the driver (spark-submit puts the zip
on its PYTHONPATH) and on the executors (Spark ships the zip to them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tomllib
from deltalake import DeltaTable

import spark_mlt
from spark_mlt import MLTCodec
from spark_mlt.batch import generate_synthetic
from spark_mlt.jars import JVM_EXTENSION, jvm_jar
from spark_mlt.storage import read_codecs
from tests.support.cluster import FAST_JVM, SPARK_HOME, Cluster, clean_env
from tests.support.paths import ROOT
from tests.support.processes import stop

pytestmark = pytest.mark.slow
pytest_plugins = ("tests.support.cluster_plugin",)  # the session's one standalone cluster

SUBMIT_TIMEOUT = 240.0
PROBE_IDS = 5000
RATINGS = 2000

PROBE = textwrap.dedent(
    '''
    """Submitted by tests/project/test_spark_submit.py: the UDF engine on the cluster, and where
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
@dataclass
class Submitted:
    returncode: int
    stdout: str
    log: Path


def _submit_all(
    cluster: Cluster, home: Path, python: Path, py_files: Path, apps: Mapping[str, list[str]]
) -> dict[str, Submitted]:
    """spark-submit (client mode) each ``script args...`` at once, driver and executors on
    ``python``, their logs in ``home``."""
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
            log = home / f"{name}-driver.log"
            with open(log, "wb") as out:
                # spark-mlt's jar as a user adds it: $(spark-mlt jar --submit)
                jar = ["--jars", str(jvm_jar()), "--conf", f"spark.sql.extensions={JVM_EXTENSION}"]
                command = [*base, *jar, "--py-files", str(py_files), *args]
                proc = subprocess.Popen(
                    command, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
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


# ---------------------------------------------------------------------- tests
def test_py_files_zip_holds_the_package_at_its_root(py_files: Path) -> None:
    with zipfile.ZipFile(py_files) as archive:
        names = archive.namelist()
    assert "spark_mlt/__init__.py" in names
    assert "spark_mlt/column/functions.py" in names
    metadata = f"spark_mlt-{spark_mlt.__version__}.dist-info/METADATA"
    assert metadata in names  # so that importlib.metadata (spark_mlt.__version__) finds the version
    assert all(name.startswith("spark_mlt/") and "__pycache__" not in name for name in names if name != metadata)
    assert not any(name.endswith(".pyc") for name in names)


def test_the_zip_and_the_package_carry_the_version_of_pyproject(py_files: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert spark_mlt.__version__ == version  # read from the package metadata
    assert py_files.name == f"spark_mlt-{version}.zip"


def _run_python(python: Path, code: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", code], cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=60, check=False
    )


def test_executor_python_lacks_spark_mlt_but_the_zip_provides_it(python: Path, py_files: Path, home: Path) -> None:
    env = clean_env(home)
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
        "import spark_mlt.batch.cli, spark_mlt.storage, spark_mlt.column, spark_mlt.ml; "
        "print(spark_mlt.__file__, spark_mlt.__version__)",
        neutral,
        {**env, "PYTHONPATH": str(py_files)},
    )
    assert from_zip.returncode == 0, from_zip.stderr
    assert from_zip.stdout.split() == [str(py_files / "spark_mlt" / "__init__.py"), spark_mlt.__version__]


@pytest.fixture(scope="module")
def runs(standalone_cluster: Cluster, home: Path, python: Path, py_files: Path) -> dict[str, Submitted]:
    """Both apps, submitted at once (one executor each): the UDF probe and the MovieLens job
    (the jvm engine, from the jar spark-submit ships to the executor)."""
    probe = home / "probe.py"
    probe.write_text(PROBE)
    release = generate_synthetic(home / "ml", ratings=RATINGS, users=300, movies=400)
    job = ["--input", str(release), "--output", str(home / "ratings_mlt"), "--engine", "jvm"]
    apps = {
        "probe": [str(probe), str(home / "probe.json"), str(PROBE_IDS)],
        "movielens": [str(ROOT / "jobs" / "tokenize_movielens.py"), *job, "--p", "7", "--n", "5"],
    }
    return _submit_all(standalone_cluster, home, python, py_files, apps)


def test_udf_engine_runs_on_executors_from_the_py_files_zip(
    standalone_cluster: Cluster, home: Path, runs: dict[str, Submitted], py_files: Path
) -> None:
    cluster = standalone_cluster
    run = runs["probe"]
    assert run.returncode == 0, cluster.diagnostics(run.log)
    result = json.loads((home / "probe.json").read_text())
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


def test_tokenize_movielens_job_with_the_jvm_engine_from_the_submitted_jar(
    standalone_cluster: Cluster, home: Path, runs: dict[str, Submitted]
) -> None:
    cluster = standalone_cluster
    run = runs["movielens"]
    assert run.returncode == 0, cluster.diagnostics(run.log)
    assert f"spark-mlt movielens: rows in {RATINGS}, out {RATINGS}" in run.stdout, cluster.diagnostics(run.log)

    output = home / "ratings_mlt"
    table = DeltaTable(str(output)).to_pyarrow_table().to_pandas()
    assert len(table) == RATINGS
    codecs = read_codecs(output)
    assert {column: (codec.p, codec.n) for column, codec in codecs.items()} == {"userId": (7, 5), "movieId": (7, 5)}
    for column, codec in codecs.items():
        tokens = codec.unpack(table[f"{column}_mlt"].to_numpy())  # the default, packed layout
        np.testing.assert_array_equal(codec.decode(tokens), table[column].to_numpy())
    source = pd.read_csv(home / "ml" / "ratings.csv")
    for column in ("userId", "movieId"):
        np.testing.assert_array_equal(np.sort(table[column].to_numpy()), np.sort(source[column].to_numpy()))
