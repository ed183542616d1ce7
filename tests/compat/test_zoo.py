"""The committed table zoo against one built fresh by a line's delta-spark.

``make test`` reads the committed zoo (``tests/data/zoo``, built by one Delta release);
``tests/compat/run-line.sh`` builds a fresh one with each line's Delta into ``.zoo/`` and runs
this module with ``$SPARK_MLT_TEST_ZOO`` naming it: for every table and version both zoos have,
delta-spark must have returned the same rows (order aside) and the same columns. A table the
line's Delta cannot build is listed in its manifest as skipped, and skipped here with that
reason. Without a fresh zoo (``make test``) there is nothing to compare.

Plain pyarrow, no Spark: the rows are small, and the check needs no session.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pyarrow.parquet as pq
import pytest

from tests.support.zoo import COMMITTED, MANIFEST, ZOO_ENV, Zoo


def _fresh() -> Zoo | None:
    folder = os.environ.get(ZOO_ENV)
    if not folder or os.path.realpath(folder) == os.path.realpath(COMMITTED):
        return None
    return Zoo(folder)


def _committed_cases() -> list[tuple[str, int]]:
    return Zoo(str(COMMITTED)).cases() if (COMMITTED / MANIFEST).is_file() else []


@pytest.fixture(scope="module")
def zoos() -> tuple[Zoo, Zoo]:
    fresh = _fresh()
    if fresh is None:
        pytest.skip(f"no fresh zoo to compare: ${ZOO_ENV} names none other than the committed one")
    return Zoo(str(COMMITTED)), fresh


def _rows(folder: str) -> tuple[list[tuple[str, str]], Counter[str]]:
    """The columns (name, type) and the rows (as a multiset) of an ``expected/`` folder."""
    table = pq.read_table(folder)
    columns = [(field.name, str(field.type)) for field in table.schema]
    return columns, Counter(json.dumps(row, sort_keys=True, default=repr) for row in table.to_pylist())


@pytest.mark.parametrize(("name", "version"), _committed_cases())
def test_delta_spark_reads_the_fresh_tables_as_it_read_the_committed_ones(
    zoos: tuple[Zoo, Zoo], name: str, version: int
) -> None:
    committed, fresh = zoos
    missing = fresh.missing(name)
    if missing:
        pytest.skip(missing)
    if str(version) not in fresh.manifest["tables"][name]["expected"]:
        pytest.skip(f"{fresh.built_by} built {name} without version {version}: {fresh.versions(name)}")
    theirs, ours = _rows(fresh.expected(name, version)), _rows(committed.expected(name, version))
    assert theirs[0] == ours[0], f"{name}@{version}: columns of {fresh.built_by} and of {committed.built_by}"
    extra, lacking = theirs[1] - ours[1], ours[1] - theirs[1]
    assert not extra, f"{name}@{version}: rows {fresh.built_by} returned, the committed zoo not: {list(extra)[:3]}"
    assert not lacking, f"{name}@{version}: rows of the committed zoo {fresh.built_by} lacks: {list(lacking)[:3]}"


def test_the_fresh_zoo_has_each_committed_table_or_says_why_not(zoos: tuple[Zoo, Zoo]) -> None:
    committed, fresh = zoos
    unexplained = set(committed.manifest["tables"]) - set(fresh.manifest["tables"]) - set(fresh.manifest["skipped"])
    assert not unexplained, f"{fresh.built_by} neither built nor skipped {sorted(unexplained)}"
