"""Every reader counts, with the statistics the jar-free writer committed, what it counts with its
statistics-based skipping off (the differential harness of `tests.support.differential`).

``SPARK_MLT_DIFF_EXAMPLES`` cases (4 in ``make test``; 200 per Spark line in CI), seeds from
``SPARK_MLT_DIFF_SEED`` (0) on: a failing case reruns alone with its seed and
``SPARK_MLT_DIFF_EXAMPLES=1``. ``SPARK_MLT_DIFF_SHARDS`` test items share the cases (seed by
seed), so that pytest-xdist's ``--dist load`` runs them side by side. ``SPARK_MLT_DIFF_PREDICATES``
predicates per case (48; delta-spark asks ``SPARK_MLT_DIFF_SPARK_PREDICATES`` of them, 24: each
costs it a skipping job). With ``SPARK_MLT_TEST_DELTA_SPARK=1`` delta-spark is one of the readers.

Every case is written, its statistics checked against its files' values, and read by the readers
that cost little (deltalake's pyarrow dataset and its filters, its file listing). The others
(DataFusion's scan, Polars, DuckDB, delta-spark) read every case, or with
``SPARK_MLT_DIFF_ROTATE=1`` (CI's 200 per line) one of them each case in turn: each still reads a
quarter of the cases, and a case costs about a second less.

``SPARK_MLT_DIFF_REPORT`` names a file that receives the summary and every finding, each with its
case in full, the statistics and footers of the predicate's columns and the statistics its files'
values contradict.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import shutil
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType

from tests.support.backends import delta_spark_requested
from tests.support.differential import (
    Case,
    Column,
    Compare,
    DeltaRsFileUris,
    DeltaSpark,
    Log,
    Reader,
    Table,
    Tally,
    generate,
    predicates,
    readers,
    run_case,
    spark_line,
    write_twin,
)

#: run on their own beside the delta-spark tests where a line has delta-spark (tests/compat/run-line.sh)
pytestmark = pytest.mark.differential

EXAMPLES = int(os.environ.get("SPARK_MLT_DIFF_EXAMPLES", "4"))
FIRST_SEED = int(os.environ.get("SPARK_MLT_DIFF_SEED", "0"))
PREDICATES = int(os.environ.get("SPARK_MLT_DIFF_PREDICATES", "48"))
SHARDS = int(os.environ.get("SPARK_MLT_DIFF_SHARDS", "1"))
ROTATE = os.environ.get("SPARK_MLT_DIFF_ROTATE") == "1"
#: The readers that read every case: they cost little.
EVERY_CASE = ("pyarrow-dataset", "pyarrow-filters", "delta-rs-file-uris")


def _case_readers(found: list[Reader], seed: int) -> list[Reader]:
    """The readers of the case of ``seed``: all of them, or (``ROTATE``) the cheap ones and one
    of the others in turn."""
    if not ROTATE:
        return found
    others = [reader for reader in found if reader.name not in EVERY_CASE]
    turn = others[(seed // SHARDS) % len(others)] if others else None  # every shard gets each in turn
    return [reader for reader in found if reader.name in EVERY_CASE or reader is turn]


@pytest.mark.compat
@pytest.mark.parametrize("shard", range(SHARDS))
def test_readers_count_with_statistics_what_they_count_without(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], shard: int
) -> None:
    """For each generated case and predicate, each reader's count with the table's statistics is
    its count with its Delta skipping off: a statistic that makes a reader skip a file holding a
    matching row loses rows silently."""
    found, missing = readers(spark if delta_spark_requested() else None)
    tally = Tally()
    seeds = range(FIRST_SEED + shard, FIRST_SEED + EXAMPLES, SHARDS)
    for reader, reason in missing.items():
        tally.skips[f"{reader}: {reason}"] += len(seeds)
    line = spark_line(spark)
    # parquet-java warns "Too much memory used" at each row group of a few hundred bytes
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for seed in seeds:
            case = generate(seed, line=line)
            root = tmp_path_factory.mktemp(f"differential{seed}")
            run_case(spark, case, str(root), _case_readers(found, seed), tally, limit=PREDICATES)
            shutil.rmtree(root, ignore_errors=True)
    finally:
        spark.sparkContext.setLogLevel("WARN")  # the tests' log4j configuration's level
    report = tally.summary() + "".join("\n" + finding.message() for finding in tally.findings)
    if os.environ.get("SPARK_MLT_DIFF_REPORT"):
        name = os.environ["SPARK_MLT_DIFF_REPORT"] + (f".{shard}" if SHARDS > 1 else "")
        with open(name, "w", encoding="utf-8") as handle:
            handle.write(report + "\n")
    with capsys.disabled():
        print("\n" + tally.summary())
    assert not tally.findings, report


#: Values the jar-free writer gives no bounds of: a NaN (and zeros of both signs), a string whose
#: maximum cannot be cut and one longer than parquet-java keeps in a footer; and timestamps,
#: written as INT96 (no bounds in a footer).
_UNBOUNDED_ROWS = [
    (1, math.nan, dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), "\U0010ffff" * 40, (1.5,)),
    (2, -0.0, dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc), "x" * 5000, (math.nan,)),
    (3, 0.0, dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc), "abc", (2.5,)),
    (4, 3.0, None, None, None),
]


@pytest.mark.compat
@pytest.mark.parametrize(
    "properties",
    [{}, {"delta.dataSkippingStatsColumns": "id, F, t, s, n.y"}],
)
def test_a_column_no_file_can_bound_loses_no_row_in_any_reader(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, properties: dict[str, str]
) -> None:
    """Pins the writer's statistics of a file it cannot bound: deltalake's pyarrow dataset reads
    a statistics column (by default, or named in any case) that a file gives no bounds of among
    others' as one without values (``>= null``) and loses the file's rows to every filter on it,
    so such a file records no bounds at all, at creation and on append. Before, ``f = 0.0`` and
    ``s = 'abc'`` returned no row there (and the harness skipped such predicates instead of
    comparing them with Arrow's exact count)."""
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("f", DoubleType()),
            StructField("t", TimestampType()),
            StructField("s", StringType()),
            StructField("n", StructType([StructField("y", DoubleType())])),
        ]
    )
    session = {"spark.sql.parquet.outputTimestampType": "INT96"}
    case = Case(-2, schema, _UNBOUNDED_ROWS * 3, properties=properties, session=session, split=4, files=(1, 2))
    found, _ = readers(spark if delta_spark_requested() else None)
    tally = Tally()
    chosen = predicates(case, random.Random("unbounded"), limit=60, combinations=0)
    run_case(spark, case, str(tmp_path_factory.mktemp("unbounded")), found, tally, chosen=chosen)
    report = tally.summary() + "".join("\n" + finding.message() for finding in tally.findings)
    assert not tally.findings, report
    # the columns were asked, not skipped: of the reader that lost the rows, where the line has it
    # (deltalake 1.6.3 with pyarrow 14, Spark 3.5's stack, has no pyarrow dataset of a table)
    names = {reader.name for reader in found}
    assert tally.compared["pyarrow-dataset" if "pyarrow-dataset" in names else "duckdb"] >= 30, report


def _two_files(path: str) -> str:
    """A table of two files, ``x`` 1-10 and 100-110; returns the second's path after deleting it
    from disk (the log still holds it): a reader that skips it by statistics reads the table, one
    that does not fails."""
    write_deltalake(path, pa.table({"x": pa.array(range(1, 11), pa.int64())}))
    write_deltalake(path, pa.table({"x": pa.array(range(100, 111), pa.int64())}), mode="append")
    second = Log.read(path).adds[1]["path"]
    os.remove(os.path.join(path, second))
    return second


@pytest.mark.compat
def test_each_reader_skips_files_by_statistics_and_not_without(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each reader's two counts are what they claim: with statistics it skips a file whose bounds
    exclude the predicate (here: deleted from disk, so reading it fails), without them it reads
    it; the two whose counts read every file (delta-spark and delta-rs' file listing) keep only
    the other file."""
    found, _ = readers(spark if delta_spark_requested() else None)
    root = tmp_path_factory.mktemp("skipping")
    path, twin = str(root / "table"), str(root / "twin")
    _two_files(path)
    log = Log.read(path)
    write_twin(path, log, twin)
    case = Case(seed=-1, schema=StructType([StructField("x", LongType())]), rows=[])
    table = Table(case, path, twin, log)
    below = Compare(Column(("x",), LongType()), "<", (50,))
    problems = []
    for reader in found:
        if isinstance(reader, DeltaRsFileUris | DeltaSpark):  # their counts read every file: the files kept
            kept = reader.kept(table, below)
            expected = {0} if isinstance(reader, DeltaRsFileUris) else {_first_file(path)}
            if kept != expected:
                problems.append(f"{reader.name} keeps files {kept}, not {expected}")
            continue
        try:
            answer = _count_with_statistics(reader, table, below)
        except Exception as error:  # noqa: BLE001 (reported with the reader's name)
            problems.append(f"{reader.name} read the file its statistics exclude: {error}"[:300])
            continue
        if answer != 10:
            problems.append(f"{reader.name} counted {answer} rows, not 10")
        try:
            _count_without(reader, table, below)
            problems.append(f"{reader.name} without statistics did not read the second file")
        except Exception:  # noqa: BLE001 (each reader has its own error for a missing file)
            pass
    assert not problems, "\n".join(problems)


def _first_file(path: str) -> str:
    return os.path.normpath(os.path.join(path, unquote(Log.read(path).adds[0]["path"])))


def _count_with_statistics(reader: Reader, table: Table, predicate: Compare) -> int:
    """The reader's count with statistics alone (the count without would read the deleted file)."""
    return reader.with_statistics(table, [predicate])[0]


def _count_without(reader: Reader, table: Table, predicate: Compare) -> int:
    return reader.without_statistics(table, [predicate])[0]
