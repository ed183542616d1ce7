"""Every engine gives, for generated values at and past every edge, what the NumPy codec and the
documented ``handle_invalid`` semantics give (the harness of `tests.support.engine_differential`).

``SPARK_MLT_ENGINE_EXAMPLES`` generated cases (``make test-engines``: 500; each older line in
``tests/compat/run-line.sh``), seeds from ``SPARK_MLT_ENGINE_SEED`` (0) on: a failing case reruns
alone with its seed and ``SPARK_MLT_ENGINE_EXAMPLES=1``. ``SPARK_MLT_ENGINE_SHARDS`` test items
share the cases (seed by seed), so that pytest-xdist's ``--dist load`` runs them side by side.
``SPARK_MLT_ENGINE_REPORT`` names a file that receives the summary and every finding. Without
``SPARK_MLT_ENGINE_EXAMPLES``, ``make test`` runs the handful of `HANDFUL`, one per codec family.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.engine_cases import generate
from tests.support.engine_differential import run_cases

EXAMPLES = int(os.environ.get("SPARK_MLT_ENGINE_EXAMPLES", "0"))
FIRST_SEED = int(os.environ.get("SPARK_MLT_ENGINE_SEED", "0"))
SHARDS = int(os.environ.get("SPARK_MLT_ENGINE_SHARDS", "1"))
#: the cases ``make test`` runs: cheap seeds whose cases cover every codec family, operation and engine
HANDFUL = (1, 6, 11, 16, 20, 24, 25, 29, 33, 36)


def _line(spark: SparkSession) -> tuple[int, int]:
    major, minor = spark.version.split(".")[:2]
    return int(major), int(minor)


def _report(text: str, shard: int) -> None:
    if os.environ.get("SPARK_MLT_ENGINE_REPORT"):
        name = os.environ["SPARK_MLT_ENGINE_REPORT"] + (f".{shard}" if SHARDS > 1 else "")
        with open(name, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


@pytest.mark.compat
@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_engine_answers_every_generated_value_as_the_codec_does(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], shard: int
) -> None:
    """For each generated case and value, the engine's tokens (or id) are the NumPy codec's, its
    NULLs and errors those ``handle_invalid`` documents, and ``decode(encode(x)) == x``: a row
    never gets tokens of another id, nor NULL where the contract says error."""
    seeds = range(FIRST_SEED + shard, FIRST_SEED + EXAMPLES, SHARDS) if EXAMPLES else HANDFUL
    line = _line(spark)
    # a task that fails on an invalid row logs its stack trace: hundreds per run
    spark.sparkContext.setLogLevel("FATAL")
    try:
        tally = run_cases(spark, [generate(seed, line=line) for seed in seeds], str(tmp_path))
    finally:
        spark.sparkContext.setLogLevel("WARN")  # the tests' log4j configuration's level
    report = tally.summary() + "".join("\n" + finding.message() for finding in tally.findings)
    _report(report, shard)
    with capsys.disabled():
        print("\n" + tally.summary())
    assert not tally.findings, report
