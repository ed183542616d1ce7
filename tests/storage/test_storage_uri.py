"""Storage on URIs and the storage package's helpers: tables at ``file://`` URIs, vocabulary
properties under their one name, snapshots, and one ``DeltaTable`` handle per write."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark_mlt.batch.cli import main
from spark_mlt.column import mlt_encode
from spark_mlt.errors import MLTError, TableOptionError
from spark_mlt.storage import (
    TABLE_FORMAT_VERSION,
    MissingTableError,
    WriteOptions,
    orphan_files,
    pending_erasures,
    read_codecs,
    read_delta,
    read_snapshot,
    vacuum,
    vocabulary_paths,
    vocabulary_properties,
    write_delta,
)
from spark_mlt.storage.maintenance import retention_shortfall
from tests.support.codecs import CODEC
from tests.support.delta_opens import count_delta_opens
from tests.support.spark_lines import QUERY_ERRORS

pytestmark = pytest.mark.compat


def _ratings(spark: SparkSession, start: int = 0, rows: int = 100) -> DataFrame:
    df = spark.range(start, start + rows).select(
        F.col("id").alias("userId"), (F.col("id") % 3).cast("int").alias("part")
    )
    return df.withColumn("userId_mlt", mlt_encode("userId", CODEC))


@pytest.mark.parametrize("partition_by", [[], ["part"]])
def test_a_table_at_a_file_uri_is_written_appended_read_and_vacuumed(
    spark: SparkSession, tmp_path: Path, partition_by: list[str]
) -> None:
    """Pins the pyarrow.fs route: every storage operation works on a ``file://`` URI."""
    uri = (tmp_path / "ratings").as_uri()
    assert uri.startswith("file:///")
    write_delta(_ratings(spark, 0, 100), uri, {"userId": CODEC}, options=WriteOptions(partition_by=partition_by))
    result = write_delta(_ratings(spark, 100, 50), uri, {"userId": CODEC}, mode="append")
    assert (result.path, result.version, result.rows) == (uri, 2, 50)
    assertDataFrameEqual(read_delta(spark, uri), _ratings(spark, 0, 150))
    assert read_delta(spark, uri, version=1).count() == 100
    assert read_codecs(uri) == {"userId": CODEC}
    assert DeltaTable(str(tmp_path / "ratings")).version() == 2  # the same table as the plain path
    assert orphan_files(uri) == []

    # an uncommitted staging folder, as a driver dying before its Delta commit leaves one
    orphan = tmp_path / "ratings" / "mlt-20261122T000000-000000000000" / "part-00000.parquet"
    orphan.parent.mkdir()
    pq.write_table(pa.table({"userId": [1]}), orphan)
    assert orphan_files(uri) == ["mlt-20261122T000000-000000000000/part-00000.parquet"]
    assert vacuum(uri) == []  # younger than the table's retention (Delta's default, 7 days)
    assert vacuum(uri, retention_hours=0.5) == []
    DeltaTable(str(tmp_path / "ratings")).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 0 hours"}
    )
    assert vacuum(uri) == ["mlt-20261122T000000-000000000000/part-00000.parquet"]  # the table's own retention
    assert pending_erasures(uri)["retention_hours"] == 0
    with pytest.raises(MLTError, match=r"retention_hours must be a number of hours >= 0.*got -1"):
        vacuum(uri, retention_hours=-1)
    assert vacuum(uri, retention_hours=0, dry_run=False) == ["mlt-20261122T000000-000000000000/part-00000.parquet"]
    assert not orphan.parent.exists()
    assert orphan_files(uri) == []
    assert read_delta(spark, uri).count() == 150


def _overwritten(table: Path, configuration: dict[str, str] | None = None) -> str:
    """A table whose second version removed the first one's file (still in storage)."""
    for value in (1, 2):
        write_deltalake(str(table), pa.table({"v": [value]}), mode="overwrite", configuration=configuration)
    return str(table)


def test_a_vacuum_shorter_than_the_tables_retention_deletes_only_when_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 71 item 10: a retention below the table's own (``delta.deletedFileRetentionDuration``)
    was taken without a word, deleting files time travel and running readers need. As Delta's
    VACUUM, a vacuum that deletes refuses it unless ``allow_short_retention``; a dry run lists
    what it would delete, and ``retention_shortfall`` (the CLI's note) says that it is short."""
    table = _overwritten(tmp_path / "t")
    removed = vacuum(table, retention_hours=0)  # a listing: what a vacuum of 0 hours would delete
    assert len(removed) == 1
    assert retention_shortfall(table, 0) == 168
    with pytest.raises(
        TableOptionError,
        match=rf"^retention_hours=0: the table {table} keeps removed files 168 hours .* nothing was deleted.* "
        r"allow_short_retention=True",
    ) as caught:
        vacuum(table, retention_hours=0, dry_run=False)
    assert caught.value.parameter == "retention_hours"
    assert (tmp_path / "t" / removed[0]).exists()
    assert main(["vacuum", "--input", table, "--retention-hours", "0"]) == 0
    assert "shorter than the table's 168 hours: --apply refuses it without --allow-short-retention" in (
        capsys.readouterr().out
    )
    assert main(["vacuum", "--input", table, "--retention-hours", "0", "--apply"]) == 2
    error = capsys.readouterr().err
    assert f"--retention-hours 0: the table {table} keeps removed files 168 hours" in error
    assert "turn the check off with --allow-short-retention" in error
    assert (tmp_path / "t" / removed[0]).exists()
    assert vacuum(table, retention_hours=0, dry_run=False, allow_short_retention=True) == removed
    assert not (tmp_path / "t" / removed[0]).exists()
    hourly = _overwritten(tmp_path / "hourly", {"delta.deletedFileRetentionDuration": "interval 1 hours"})
    assert retention_shortfall(hourly, 1) is None
    assert retention_shortfall(hourly, 0.5) == 1
    with pytest.raises(TableOptionError, match=r"^retention_hours=0.5: .* keeps removed files 1 hours"):
        vacuum(hourly, retention_hours=0.5, dry_run=False)
    assert vacuum(hourly, retention_hours=1, dry_run=False) == []  # the table's own: nothing that old


def test_a_failed_write_to_a_file_uri_leaves_no_staging_folder(spark: SparkSession, tmp_path: Path) -> None:
    uri = (tmp_path / "ratings").as_uri()
    write_delta(_ratings(spark, 0, 10), uri, {"userId": CODEC})
    before = sorted(os.listdir(tmp_path / "ratings"))
    bad = _ratings(spark, 0, 10).withColumn("userId_mlt", mlt_encode(F.lit(-1).cast("bigint"), CODEC))
    with pytest.raises(QUERY_ERRORS, match=r"id -1 is outside"):
        write_delta(bad, uri, {"userId": CODEC}, mode="append")
    assert sorted(os.listdir(tmp_path / "ratings")) == before
    assert read_snapshot(uri).version == 1


def test_the_snapshot_has_rows_history_and_the_format_version(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 100), path, {"userId": CODEC}, run_id="r1")
    write_delta(_ratings(spark, 100, 20), path, {"userId": CODEC}, mode="append")
    snapshot = read_snapshot(path)
    assert (snapshot.version, snapshot.rows, snapshot.codecs) == (2, 120, {"userId": CODEC})
    assert snapshot.properties["mlt.format.version"] == str(TABLE_FORMAT_VERSION) == "1"
    assert [entry["version"] for entry in snapshot.history()] == [2, 1, 0]
    assert snapshot.history(1)[0]["spark_mlt.rows"] == 20
    assert snapshot.has_run("r1")
    assert not snapshot.has_run("r2")
    old = read_snapshot(path, version=0)
    assert (old.version, old.rows) == (0, 0)


def test_a_missing_table_is_a_table_not_found_error_naming_path(tmp_path: Path) -> None:
    for function in (read_snapshot, orphan_files, vacuum):
        with pytest.raises(MissingTableError, match=r"no Delta table at") as error:
            function(tmp_path / "nothing")
        assert error.value.parameter == "path"


def test_vocabulary_paths_read_the_vocabulary_properties_only() -> None:
    assert vocabulary_properties({"sku": "/v/sku"}) == {"mlt.vocabulary.sku": "/v/sku"}
    properties = {"mlt.vocab.store": "/x/store", "mlt.vocabulary.sku": "/v/sku", "mlt.codec.sku": "{}"}
    assert vocabulary_paths(properties, location="/t") == {"sku": "/v/sku"}  # mlt.vocab. is no name of ours
    assert vocabulary_paths({}, location="/t") == {}


@pytest.fixture
def handles(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every read of a table's log (a listing, or a delta-rs handle) while the test runs."""
    return count_delta_opens(monkeypatch)


def test_a_write_reads_the_log_once_and_opens_delta_rs_only_to_commit(
    spark: SparkSession, tmp_path: Path, handles: list[tuple[str, str]]
) -> None:
    """Pins issue 17 (a write opened its table up to 6 times): an append lists the log once
    and opens one delta-rs handle, to commit; a write its run id already holds opens none."""
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 10), path, {"userId": CODEC})
    created = [kind for kind, _ in handles]
    handles.clear()
    write_delta(_ratings(spark, 10, 10), path, {"userId": CODEC}, mode="append", run_id="r1")
    assert handles == [("log", path), ("delta-rs", path)]
    handles.clear()
    assert write_delta(_ratings(spark, 10, 10), path, {"userId": CODEC}, mode="append", run_id="r1").skipped
    assert handles == [("log", path)]
    # a new table: the log found empty, DeltaTable.create's own handle, the created version read
    assert created == ["log", "delta-rs", "log"]
