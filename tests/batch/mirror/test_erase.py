"""Erasure made physical: what a sync's deletes leave in storage, shown by ``inspect`` and removed
by ``spark-mlt erase``, down to the bytes of the erased value in every file of the mirror, its
quarantine and its vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from spark_mlt.batch import SyncOptions, inspect_table, sync_table
from spark_mlt.batch.cli import main
from spark_mlt.batch.mirror.erase import erase_physically, erased_tables
from spark_mlt.errors import TableOptionError

ERASED = "forget.me@example.com"
KEPT = "kept@example.com"


def _files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under the tables' folders whose bytes hold ``needle`` (data files, vectors,
    checkpoints and commit files alike)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.fixture(scope="module")
def synced(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mirror whose source deleted the only row holding ``ERASED`` (and an id beyond the
    codec's capacity, so the quarantine held that row too), synced after the delete."""
    root = tmp_path_factory.mktemp("erase")
    source = root / "customers"
    rows = pa.table(
        {
            "customer_id": pa.array([1, 2, 3, 5_000], pa.int64()),
            "email": [KEPT, "other@example.com", ERASED, ERASED],
        }
    )
    write_deltalake(str(source), rows, configuration={"delta.enableChangeDataFeed": "true"})
    options = SyncOptions(key=("customer_id",), p=13, n=3, handle_invalid="quarantine", data_page_version=1)
    sync_table(spark, str(source), str(root / "mirror"), ["customer_id", "email"], options)
    DeltaTable(str(source)).delete(f"email = '{ERASED}'")
    report = sync_table(spark, str(source), str(root / "mirror"), ["customer_id", "email"], options)
    assert (report.rows_deleted, report.erased) == (2, {"email": 1})
    return root


def test_a_synced_delete_leaves_no_current_version_holding_the_value(synced: Path) -> None:
    for table in erased_tables(str(synced / "mirror")):
        values = DeltaTable(table).to_pyarrow_table().to_pylist()
        assert ERASED not in json.dumps(values)
    assert KEPT in json.dumps(DeltaTable(str(synced / "mirror")).to_pyarrow_table().to_pylist())


def test_inspect_shows_the_erasures_pending_a_vacuum_with_when_they_may_go(synced: Path) -> None:
    erasures = inspect_table(str(synced / "mirror"))["erasures"]
    assert erasures["removed_files"], "the sync's rewrite removed a file that storage still holds"
    for file in erasures["removed_files"]:
        assert file["deletable_after"] > file["removed_at"]
        assert (synced / "mirror" / file["path"]).exists()
    assert erasures["rows_in_deletion_vectors"] == 0
    listed = erase_physically(str(synced / "mirror"))  # no --apply: nothing deleted within the retention
    assert all(not entry["would_delete"] for entry in listed.values())
    assert _files_holding(synced, ERASED.encode())  # still in the removed files


def test_erase_refuses_a_retention_shorter_than_each_tables_own_unless_allowed(
    synced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 71 item 10: ``erase --apply --retention-hours 0`` deleted, without a word, files that
    time travel and running readers still need. It is refused before any table is touched,
    naming the table, its retention and the flag that allows it; a listing says it is short."""
    mirror = str(synced / "mirror")
    before = _files_holding(synced, ERASED.encode())
    assert main(["erase", "--input", mirror, "--retention-hours", "0", "--apply"]) == 2
    error = capsys.readouterr().err
    assert f"TableOptionError: --retention-hours 0: the table {mirror} keeps removed files 168 hours" in error
    assert "turn the check off with --allow-short-retention" in error
    assert _files_holding(synced, ERASED.encode()) == before  # nothing deleted, in any table
    with pytest.raises(TableOptionError, match=r"allow_short_retention=True") as caught:
        erase_physically(mirror, retention_hours=0, apply=True)
    assert caught.value.parameter == "retention_hours"
    listed = erase_physically(mirror, retention_hours=0)
    assert listed[mirror]["would_delete"]
    assert all("shorter than the table's 168" in entry["note"] for entry in listed.values())
    assert "note" not in erase_physically(mirror)[mirror]  # the tables' own retention
    assert _files_holding(synced, ERASED.encode()) == before


def test_erase_with_the_retention_passed_removes_the_value_from_every_data_file(
    synced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = str(synced / "mirror")
    assert main(["erase", "--input", mirror, "--retention-hours", "0", "--apply", "--allow-short-retention"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == set(erased_tables(mirror))
    assert all(entry["deleted"] and not entry["pending"] for entry in report.values())
    holding = [p for p in _files_holding(synced, ERASED.encode()) if not p.startswith("customers/")]
    # only the tables' logs still name it (file statistics), until the log's retention
    assert all("/_delta_log/" in p for p in holding), holding
    assert DeltaTable(mirror).to_pyarrow_table().num_rows == 2  # the tables still read
    assert not inspect_table(mirror)["erasures"]["removed_files"]
