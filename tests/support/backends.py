"""The Delta backend a test's jobs run on, chosen by the test (``on_backend``) instead of by the
session: ``delta-spark`` through the session's Delta jars (only where a run asked for them:
``SPARK_MLT_TEST_DELTA_SPARK=1``), ``delta-rs`` as a session without them runs (every job asks
``Capabilities.of``, which then says no jars).

Example::

    with on_backend("delta-rs", spark):
        sync_table(spark, source, mirror, ["cid"], options)  # jar-free, in any session
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pyspark.sql import SparkSession

from spark_mlt.capabilities import Capabilities

DELTA_SPARK_ENV = "SPARK_MLT_TEST_DELTA_SPARK"

#: The backends of a test that runs on both: delta-spark's only in a ``delta_spark`` run.
BACKEND_PARAMS = ["delta-rs", pytest.param("delta-spark", marks=pytest.mark.delta_spark)]


def delta_spark_requested() -> bool:
    return os.environ.get(DELTA_SPARK_ENV) == "1"


def require_delta_spark(spark: SparkSession) -> None:
    """Skips the test unless a run asked for Delta's jars; fails it when one did and the session
    has none (a suite asked for never skips green)."""
    if not delta_spark_requested():
        pytest.skip(
            f"needs Delta's jars: run with {DELTA_SPARK_ENV}=1 after `make jars` (tests/compat/run-line.sh does)"
        )
    if not Capabilities.of(spark).delta_jars:
        pytest.fail(f"{DELTA_SPARK_ENV}=1 but the session has no Delta jars: run `make jars JARS_GROUPS=delta` first")


@contextmanager
def on_backend(backend: str, spark: SparkSession) -> Iterator[None]:
    """The block's jobs on ``backend``; ``delta-spark`` only as `require_delta_spark` allows (a
    module fixture is built before the autouse check of the ``delta_spark`` mark: it checks here)."""
    if backend == "delta-spark":
        require_delta_spark(spark)
        yield
        return
    real = Capabilities.of

    def without_jars(cls: type[Capabilities], session: SparkSession) -> Capabilities:
        return dataclasses.replace(real(session), delta_jars=False)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Capabilities, "of", classmethod(without_jars))
        yield
