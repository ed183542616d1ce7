"""Shared fixtures. One SparkSession per test session, created only when a test asks for it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from spark_mlt.batch import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local[2] SparkSession shared by the whole test session."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    session = local_session(
        app_name="spark-mlt-tests", warehouse=str(warehouse), extra_conf={"spark.ui.enabled": "false"}
    )
    yield session
    session.stop()
