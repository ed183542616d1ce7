"""Delta file statistics of the jar-free writer: exactly what delta-spark records, or absent.

Every Delta reader skips files by the bounds an ``add`` action records, so a wrong one loses rows
silently. Three oracles, over generated schemas (`tests.support.stats_cases`: leaf names that
collide with other columns at every depth, every primitive type, nulls, NaN, long and non-ASCII
strings, several files and row groups, partitions, column mapping, the ``delta.dataSkipping*``
properties):

* the rows of each file (`expected_stats`): the statistics computed from them must be the ones
  written, value for value;
* delta-spark: its own statistics of the very same files (``CONVERT TO DELTA`` of our files, on the
  lines with Delta's jars) and of files it wrote itself (the table zoo's ``stats_*`` tables, in
  ``make test``), which ours must equal or leave out for a documented reason;
* readers: filtered queries through delta-rs (its DataFusion engine skips files by the statistics)
  and delta-spark must count what the same query counts without statistics.

Each property test runs a fixed set of examples (``SPARK_MLT_STATS_EXAMPLES``; 8 in ``make
test``): ``tests/compat/run-line.sh`` runs 16 of the jar-free ones on each older
line, and 4 against delta-spark on 3.5 and 4.0 (``DELTA_SPARK_FULL_LINES``).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.delta import locate
from spark_mlt.delta import read_snapshot as read_delta_snapshot
from spark_mlt.delta.config import TableConfig, parse_column_list
from spark_mlt.delta.schema import layout_of
from spark_mlt.delta.stats import (
    StatsSpec,
    file_stats,
    stats_spec,
    truncate_max_string,
    truncate_min_string,
)
from spark_mlt.errors import ConcurrentWriteError
from spark_mlt.storage import WriteOptions, snapshot_for_write, write_delta
from spark_mlt.storage.spark_sql import session_conf
from tests.support.stats_cases import Case, generate
from tests.support.stats_checks import (
    STATS,
    Comparison,
    case_frame,
    counts_datafusion,
    data_file,
    differences,
    expected_stats,
    get,
    leaf_paths,
    log_adds,
    parquet_options,
    parse_stats,
    predicates,
    same_value,
    write_conf,
)
from tests.support.zoo import Zoo

EXAMPLES = int(os.environ.get("SPARK_MLT_STATS_EXAMPLES", "8"))
# a fixed set of examples, not shrunk (each is a Spark job): a failure names its case in full
_examples = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_tables = itertools.count()


# --- the rules, without Spark ----------------------------------------------------------------


@given(st.text(max_size=80), st.integers(min_value=0, max_value=40))
def test_cut_string_bounds_stay_bounds_in_utf8_order(text: str, prefix: int) -> None:
    """A cut minimum sorts at or before the string and a cut maximum at or after it, in the
    byte order of UTF-8 (Parquet's and Spark's order of strings)."""
    low, high = truncate_min_string(text, prefix), truncate_max_string(text, prefix)
    assert low.encode() <= text.encode()
    if high is not None:
        assert high.encode() >= text.encode()


@pytest.mark.parametrize(
    ("text", "prefix", "minimum", "maximum"),
    [
        ("abcdef", 3, "abc", "abc\x7f"),
        ("abc", 3, "abc", "abc"),
        ("abcé", 3, "abc", "abc\U0010ffff"),  # é is not ASCII: the largest code point follows
        ("ab\U0001f600c", 3, "ab\U0001f600", "ab\U0001f600\x7f"),  # a cut never splits a surrogate pair
        # the cut falls inside the U+10FFFF run: it is skipped over (3 units to 5)
        ("a\U0010ffff\U0010ffffb", 3, "a\U0010ffff\U0010ffff", "a\U0010ffff\U0010ffff\x7f"),
        ("ab\U0010ffff", 2, "ab", "ab\U0010ffff"),  # a U+10FFFF run to the end: the whole string
        ("a" + "\U0010ffff" * 3, 2, "a\U0010ffff", None),  # would take more than twice the prefix
        ("abc", 0, "", None),
    ],
)
def test_cut_strings_follow_delta_spark(text: str, prefix: int, minimum: str, maximum: str | None) -> None:
    """delta-spark's ``truncateMaxStringAgg`` (Delta 4) on Java's UTF-16 units, and Spark's
    ``substring`` (code points) for the minimum."""
    assert truncate_min_string(text, prefix) == minimum
    assert truncate_max_string(text, prefix) == maximum


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("a", [["a"]]),
        ("a, s.b ,`x.y`.z", [["a"], ["s", "b"], ["x.y", "z"]]),
        ("`a``b`", [["a`b"]]),
        ("a,,b", None),
        ("a b", None),
        ("", None),
    ],
)
def test_stats_columns_read_as_delta_reads_them(text: str, paths: list[list[str]] | None) -> None:
    assert parse_column_list(text) == paths


def _spec(fields: list[dict[str, object]], properties: dict[str, str], partitions: tuple[str, ...] = ()) -> StatsSpec:
    layout = layout_of({"type": "struct", "fields": fields}, properties, partitions)
    return stats_spec(layout, TableConfig.of(properties))


def _field(name: str, kind: object, physical: str | None = None) -> dict[str, object]:
    metadata = {} if physical is None else {"delta.columnMapping.physicalName": physical, "delta.columnMapping.id": 1}
    return {"name": name, "type": kind, "nullable": True, "metadata": metadata}


_NESTED = [
    _field("id", "long"),
    _field("p", "integer"),
    _field("tags", {"type": "array", "elementType": "long", "containsNull": True}),
    _field(
        "s",
        {"type": "struct", "fields": [_field("value", "long"), _field("flag", "boolean"), _field("k", "string")]},
    ),
    _field("attrs", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}),
    _field("value", "double"),
]


@pytest.mark.parametrize(
    ("properties", "columns"),
    [
        ({}, ["id", "tags", "s.value", "s.flag", "s.k", "attrs", "value"]),
        # the first 3 leaves: an array counts as one
        ({"delta.dataSkippingNumIndexedCols": "3"}, ["id", "tags", "s.value"]),
        ({"delta.dataSkippingNumIndexedCols": "0"}, []),
        ({"delta.dataSkippingNumIndexedCols": "-1"}, ["id", "tags", "s.value", "s.flag", "s.k", "attrs", "value"]),
        # named columns win; case-insensitive; a struct names all its leaves; unknown names are ignored
        (
            {"delta.dataSkippingStatsColumns": "VALUE,s,nope", "delta.dataSkippingNumIndexedCols": "1"},
            ["s.value", "s.flag", "s.k", "value"],
        ),
        ({"delta.dataSkippingStatsColumns": "s.K"}, ["s.k"]),
        ({"delta.dataSkippingNumIndexedCols": "many"}, []),  # not Delta's: no column statistics at all
    ],
)
def test_statistics_columns_are_the_ones_delta_spark_picks(properties: dict[str, str], columns: list[str]) -> None:
    """Partition columns are left out (``p``) before counting, as delta-spark does."""
    spec = _spec(_NESTED, properties, ("p",))
    assert [".".join(c.path) for c in spec.columns] == columns
    # bounds for the types Delta keeps them for, and booleans (as delta-rs writes them): not arrays or maps
    assert {".".join(c.path): c.bounds for c in spec.columns} == {
        name: name not in ("tags", "attrs") for name in columns
    }


def test_statistics_are_keyed_by_physical_names_under_column_mapping() -> None:
    fields = [
        _field("id", "long", "col-1"),
        _field("s", {"type": "struct", "fields": [_field("value", "long", "col-3")]}, "col-2"),
    ]
    spec = _spec(fields, {"delta.columnMapping.mode": "name", "delta.dataSkippingStatsColumns": "s.value"})
    assert [c.path for c in spec.columns] == [("col-2", "col-3")]


def _nan_rows(spark: SparkSession, start: int, nan: bool) -> DataFrame:
    """Rows ``id``, ``f`` (0.0, 1.0, 2.0, and NaN every 7th row when ``nan``) in two files."""
    f = F.col("id") % 3 * 1.0
    if nan:
        f = F.when(F.col("id") % 7 == 0, F.lit(float("nan"))).otherwise(f)
    return spark.range(start, start + 60, 1, 2).select("id", f.alias("f"))


@pytest.mark.compat
def test_a_file_that_cannot_bound_a_statistics_column_records_no_bounds_at_all(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Pins the writer's rule for a file it cannot bound: deltalake's pyarrow dataset reads one
    column's missing bounds among others' as ``>= null`` and loses the file's rows to every
    filter on it, so a file with a NaN in ``f`` records no bounds of any column (its counts
    stay), the others keep theirs, and the dataset counts ``f = 0.0`` and ``id = 70`` right at
    every version. Before, ``f``'s bounds alone were left out: the appended files' rows were lost."""
    path = str(tmp_path / "t")
    write_delta(_nan_rows(spark, 0, nan=False), path, options=WriteOptions(backend="delta-rs"))
    write_delta(_nan_rows(spark, 60, nan=True), path, mode="append", options=WriteOptions(backend="delta-rs"))
    stats = [json.loads(add["stats"]) for add in log_adds(path)]
    assert [("minValues" in s, "maxValues" in s, "nullCount" in s) for s in stats] == [(True, True, True)] * 2 + [
        (False, False, True)
    ] * 2
    assert "delta.dataSkippingStatsColumns" not in DeltaTable(path).metadata().configuration
    rows = _nan_rows(spark, 0, nan=False).union(_nan_rows(spark, 60, nan=True))
    for version, last in ((1, 60), (2, 120)):
        dataset = DeltaTable(path, version=version).to_pyarrow_table
        for predicate, sql in ((pc.field("f") == 0.0, "f = 0.0"), (pc.field("id") == 70, "id = 70")):
            assert dataset(filters=predicate).num_rows == rows.where(f"id < {last} AND {sql}").count(), sql


@pytest.mark.compat
def test_a_write_planned_before_another_writer_changed_the_statistics_columns_commits_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Pins the commit's check of the statistics its files record: a write planned when ``f`` was
    no statistics column records none of it, and another writer made it one meanwhile; the
    write's files would leave a statistics column without bounds, so nothing is committed.
    Before, they were committed, and deltalake's pyarrow dataset lost their rows to ``f = 0.0``."""
    path = str(tmp_path / "t")
    options = WriteOptions(backend="delta-rs", properties={"delta.dataSkippingStatsColumns": "id"})
    write_delta(_nan_rows(spark, 0, nan=False), path, options=options)
    planned = snapshot_for_write(path, "append", spark=spark, backend="delta-rs")
    DeltaTable(path).alter.set_table_properties({"delta.dataSkippingStatsColumns": "id, f"})
    with pytest.raises(ConcurrentWriteError, match=r"changed which columns the files .* record statistics for"):
        write_delta(_nan_rows(spark, 60, nan=False), path, mode="append", snapshot=planned, options=options)
    assert DeltaTable(path).version() == 2  # the other writer's change, and nothing after it


# --- delta-spark's own files (the table zoo) ---------------------------------------------------


def _spec_of(folder: str) -> StatsSpec:
    snapshot = read_delta_snapshot(locate(folder))
    features = snapshot.features.reader | snapshot.features.writer
    return stats_spec(snapshot.layout, snapshot.config, tight_bounds="deletionVectors" in features)


def test_statistics_of_delta_sparks_files_are_the_ones_it_recorded(zoo: Zoo) -> None:
    """For each file delta-spark wrote into a generated table (``stats_*`` in the zoo), the
    statistics spark-mlt reads from its footer equal what delta-spark recorded for it, value
    for value, or are absent for a documented reason."""
    tables = zoo.stats_tables()
    if not tables:
        pytest.skip(f"{zoo.built_by} built no statistics tables")
    comparison = Comparison()
    files = 0
    for name, folder in sorted(tables.items()):
        spec = _spec_of(folder)
        for add in log_adds(folder):
            footer = pq.read_metadata(data_file(folder, add))
            ours, theirs = parse_stats(file_stats(footer, spec)), parse_stats(add["stats"])
            before = len(comparison.problems)
            differences(ours, theirs, spec, footer, comparison)
            comparison.problems[before:] = [f"{name} {add['path']}: {p}" for p in comparison.problems[before:]]
            files += 1
    assert comparison.problems == [], "\n".join(comparison.problems[:20])
    assert comparison.agreed > 20 * len(tables), comparison  # most of them: not a writer that writes nothing
    print(f"{files} files of {len(tables)} tables by {zoo.built_by}: {comparison.agreed} values agree")
    print(f"left out: {comparison.left_out}")


# --- the jar-free writer, property-based ------------------------------------------------------


def _write_jar_free(spark: SparkSession, case: Case, path: str) -> None:
    """The case written jar-free: the first half creates the table (its settings from the
    write's properties), the rest appends (its settings from the table)."""
    df = case_frame(spark, case)
    half = max(1, len(case.rows) // 2)
    options = WriteOptions(
        backend="delta-rs",
        properties=case.properties,
        partition_by=case.partition_by,
        parquet_options=parquet_options(case),
    )
    with session_conf(spark, write_conf(case)):
        for mode, rows in (("error", case.rows[:half]), ("append", case.rows[half:])):
            if rows:
                part = spark.createDataFrame(rows, case.schema).repartition(case.files)
                try:
                    write_delta(part, path, {}, mode=mode, options=options)
                except Exception as error:
                    error.add_note(f"writing {case.describe()}")
                    raise
    assert df.count() == sum(add_rows(path))


def add_rows(path: str) -> Iterator[int]:
    for add in log_adds(path):
        yield int(json.loads(add["stats"])["numRecords"])


def _assert_exact(path: str, spec: StatsSpec, case: Case) -> None:
    """Each file's statistics equal the ones its rows give."""
    for add in log_adds(path):
        file = data_file(path, add)
        ours, expected = parse_stats(add["stats"]), expected_stats(file, spec)
        assert ours.get("numRecords") == expected["numRecords"]
        assert ours.get("tightBounds") == expected.get("tightBounds")
        for column in spec.columns:
            for stat in STATS:
                mine, truth = get(ours, stat, column.path), get(expected, stat, column.path)
                kind = column.kind if stat != "nullCount" else None
                assert same_value(kind, mine, truth) if kind is not None else mine == truth, (
                    f"{add['path']} {stat}.{'.'.join(column.path)}: written {mine!r}, its rows give {truth!r} "
                    f"({case.describe()})"
                )
        written = {(stat, p) for stat in STATS for p in leaf_paths(ours.get(stat, {}))}
        assert written <= {(stat, c.path) for stat in STATS for c in spec.columns}


@pytest.mark.compat
@_examples
@given(rng=st.randoms(use_true_random=False))
def test_jar_free_statistics_are_exact_and_delta_rs_filters_lose_no_rows(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, rng: random.Random
) -> None:
    """A generated table written jar-free: every statistic is what the file's rows give, and
    each filter at the edge of a column's values counts, through delta-rs' query engine, what
    the same engine counts when it reads every row."""
    case = generate(rng, jar_free=True)
    root = tmp_path_factory.mktemp(f"stats{next(_tables)}")
    path = str(root / "table")
    _write_jar_free(spark, case, path)
    _assert_exact(path, _spec_of(path), case)
    found = predicates(case, rng)
    for predicate, (filtered, everything) in zip(found, counts_datafusion(DeltaTable(path), found), strict=True):
        assert filtered == everything, f"{predicate} through delta-rs on {case.describe()}"
    shutil.rmtree(root)


# --- against delta-spark, on the lines with Delta's jars ----------------------------------------


def _convert(spark: SparkSession, path: str, into: Path, case: Case, spec: StatsSpec) -> dict[str, dict[str, object]]:
    """delta-spark's statistics of the data files of the table at ``path``: ``CONVERT TO DELTA``
    of a copy of them (every column's statistics, the table's string prefix), by their path
    without the staging folder (partition folders hold files of the same name)."""
    into.mkdir()
    for add in log_adds(path):
        relative = _relative(add)
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data_file(path, add), target)
    names = read_delta_snapshot(locate(path)).layout.physical_names  # the files' folders are named by physical names
    partitions = ", ".join(
        f"`{names[f.name]}` {f.dataType.simpleString()}" for f in case.schema.fields if f.name in case.partition_by
    )
    conf = {
        "spark.databricks.delta.properties.defaults.dataSkippingNumIndexedCols": "-1",
        "spark.databricks.io.skipping.stringPrefixLength": str(spec.string_prefix),
    }
    with session_conf(spark, conf):
        spark.sql(f"CONVERT TO DELTA parquet.`{into}`" + (f" PARTITIONED BY ({partitions})" if partitions else ""))
    return {unquote(add["path"]): parse_stats(add["stats"]) for add in log_adds(str(into))}


def _relative(add: dict[str, object]) -> str:
    """A file's path without the staging folder of its write."""
    return unquote(str(add["path"])).split("/", 1)[1]


@pytest.mark.delta_spark
@_examples
@given(rng=st.randoms(use_true_random=False))
def test_jar_free_statistics_are_delta_sparks_and_its_filters_lose_no_rows(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, rng: random.Random
) -> None:
    """A generated table written jar-free: delta-spark's statistics of the very same files
    (``CONVERT TO DELTA``) agree with ours, and each filter at the edge of a column's values
    counts through delta-spark what it counts over every row (no file skipped)."""
    case = generate(rng, jar_free=True)
    root = tmp_path_factory.mktemp(f"stats{next(_tables)}")
    path = str(root / "table")
    _write_jar_free(spark, case, path)
    spec = _spec_of(path)
    # the converted table's columns are the files' (physical) names, all of them with statistics
    theirs = _convert(spark, path, root / "converted", case, spec)
    comparison = Comparison()
    for add in log_adds(path):
        footer = pq.read_metadata(data_file(path, add))
        mine = parse_stats(add["stats"])
        if mine["numRecords"] == 0 and _relative(add) not in theirs:
            continue  # CONVERT TO DELTA leaves out a file without rows
        differences(mine, theirs[_relative(add)], spec, footer, comparison, same_columns=False)
    assert comparison.problems == [], f"{case.describe()}:\n" + "\n".join(comparison.problems[:20])
    # each filter counted with file skipping, against all of them counted over every row at once
    target = f"delta.`{path}`"
    found = predicates(case, rng, limit=6)
    if found:
        sums = ", ".join(f"count_if({p.spark()})" for p in found)
        everything = spark.sql(f"SELECT {sums} FROM {target}").collect()[0]
        for predicate, expected in zip(found, everything, strict=True):
            filtered = spark.sql(f"SELECT count(*) FROM {target} WHERE {predicate.spark()}").collect()[0][0]
            assert filtered == expected, f"{predicate} through delta-spark on {case.describe()}"
    shutil.rmtree(root)
