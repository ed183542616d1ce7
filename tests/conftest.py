"""Shared fixtures. One SparkSession per test session, created only when a test asks for it.

``SPARK_MLT_TEST_DELTA_SPARK=1`` gives that session Delta's jars (from ``make jars``), its SQL
extension and its catalog, so writes go through delta-spark; tests marked ``delta_spark`` run
only then (``tests/compat/run-line.sh`` runs them on each line that has Delta).

The session always gets the line's ``s3a`` jars (``make jars``; ``make test`` copies them) and
settings pointing at the local S3 server of :mod:`tests.support.s3`, which the ``s3`` fixture
starts for the tests that use it.

Every JVM the tests start through Spark's scripts (this session's, the subprocess jobs', the
notebooks' and spark-submit's drivers, and Spark's launcher) runs with C1 only and the serial
collector (``SPARK_SUBMIT_OPTS``, ``SPARK_LAUNCHER_OPTS``): a test's JVM lives seconds, where
C2's compilations and G1's threads cost two cores more than they return (a session's start
and first queries: about a third faster). The code Spark generates is the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from spark_mlt.batch import local_session
from spark_mlt.errors import MissingJarsError
from spark_mlt.jars import delta_session_conf, spark_jars
from tests.support import s3 as local_s3
from tests.support.backends import BACKEND_PARAMS, delta_spark_requested, on_backend, require_delta_spark
from tests.support.zoo import Zoo, find_zoo

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from spark_mlt.storage import StorageOptions

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")

#: JVM options for short-lived JVMs (see the module's notes).
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    """Every JVM started through Spark's scripts from here on gets ``FAST_JVM``, after the
    options the environment holds."""
    for variable in ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS"):
        if FAST_JVM not in os.environ.get(variable, ""):
            os.environ[variable] = f"{os.environ.get(variable, '')} {FAST_JVM}".strip()


@pytest.hookimpl(trylast=True)  # after -m and -k have chosen
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``SPARK_MLT_STEP_TESTS=k``, k of the ``step_points`` tests (pairs of sync runs
    interleaved or stopped at their step points) run, drawn by ``SPARK_MLT_STEP_SEED`` (which
    every test process must share: the runners set it), and the others are deselected."""
    wanted = os.environ.get("SPARK_MLT_STEP_TESTS", "all")
    pairs = [item for item in items if item.get_closest_marker("step_points")]
    if wanted == "all" or int(wanted) >= len(pairs):
        return
    seed = int(os.environ["SPARK_MLT_STEP_SEED"])
    kept = {pairs[i].nodeid for i in np.random.default_rng(seed).choice(len(pairs), int(wanted), replace=False)}
    dropped = [item for item in pairs if item.nodeid not in kept]
    config.hook.pytest_deselected(items=dropped)
    items[:] = [item for item in items if item not in dropped]


def pytest_report_header(config: pytest.Config) -> str | None:
    if os.environ.get("SPARK_MLT_STEP_TESTS", "all") == "all":
        return None
    drawn, seed = os.environ["SPARK_MLT_STEP_TESTS"], os.environ["SPARK_MLT_STEP_SEED"]
    return f"sync step points: {drawn} of the step_points tests drawn, SPARK_MLT_STEP_SEED={seed}"


#: Delta's defaults are sized for clusters: 50 partitions per log replay, 10,000 tasks per
#: VACUUM listing. Tiny local tables want 2.
_DELTA_TEST_CONF = {
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}


def _s3_jars() -> str | None:
    try:
        return spark_jars("s3")
    except MissingJarsError:
        return None


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local[2] SparkSession shared by the whole test session (with delta-spark when
    ``SPARK_MLT_TEST_DELTA_SPARK=1``; its catalog's warehouse is on local disk under tmp), with
    ``s3a`` set up for the local S3 server."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", **local_s3.spark_conf()}
    if delta_spark_requested():
        conf.update({**delta_session_conf(), **_DELTA_TEST_CONF})
    jars = [jar for jar in (conf.get("spark.jars"), _s3_jars()) if jar]
    if jars:
        conf["spark.jars"] = ",".join(jars)
    session = local_session(app_name="spark-mlt-tests", warehouse=str(warehouse), extra_conf=conf)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3() -> local_s3.MotoServer:
    """The local S3 server (moto), started at first use; the session's s3a points at it."""
    if _s3_jars() is None:
        pytest.fail("the S3 tests need the line's s3a jars: run `make jars JARS_GROUPS=s3` (make test does)")
    return local_s3.server()


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, StorageOptions | None]:
    """A new table's location on local disk or on the local S3 server, and its storage options:
    a test that takes it runs on both."""
    if request.param == "local":
        return str(tmp_path / "table"), None
    server: local_s3.MotoServer = request.getfixturevalue("s3")
    return f"s3a://{server.bucket()}/table", local_s3.storage_options()


@pytest.fixture(autouse=True)
def _delta_spark_only_with_its_jars(request: pytest.FixtureRequest) -> None:
    """Skips a ``delta_spark`` test unless it was asked for; fails it when it was and the session
    has no Delta jars."""
    if request.node.get_closest_marker("delta_spark") is not None:
        require_delta_spark(request.getfixturevalue("spark"))


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest, spark: SparkSession) -> Iterator[str]:
    """The Delta backend the jobs of a test (and of its module's fixtures) run on: a test that
    takes it runs on both (:mod:`tests.support.backends`)."""
    with on_backend(request.param, spark):
        yield request.param


@pytest.fixture(scope="session")
def zoo() -> Zoo:
    """The table zoo (Delta tables as delta-spark writes them, see :mod:`tests.support.zoo`),
    built by a PySpark line that has Delta; skips the test with the reason when there is none."""
    found = find_zoo()
    if isinstance(found, str):
        pytest.skip(found)
    return found
