"""``inspect`` explains a table's capacity and a mirror's sync state, from the logs alone.

The mirror's sources are written and changed through delta-rs with the change data feed on, and
synced jar-free; everything ``inspect_table`` and ``capacity_usage`` read is the tables' logs.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, Schema, write_deltalake
from pyspark.sql import SparkSession

from spark_mlt.batch import SyncOptions, inspect_table, sync_table
from spark_mlt.batch.cli import main
from spark_mlt.batch.job.capacity import CAPACITY_WARNING, Usage, capacity_usage
from spark_mlt.codec import MLTCodec
from spark_mlt.storage import read_snapshot

CDF = {"delta.enableChangeDataFeed": "true"}
#: A codec sized tight: 2**3 = 8 ids.
P, N = 2, 3

Row = tuple[int, str, int]


def _customers(rows: Sequence[Row]) -> pa.Table:
    """Rows of ``(k, email, cid)``."""
    k, email, cid = zip(*rows, strict=True)
    return pa.table(
        {"k": pa.array(k, pa.int64()), "email": pa.array(email, pa.string()), "cid": pa.array(cid, pa.int64())}
    )


def _sync(spark: SparkSession, source: str, mirror: str) -> None:
    options = SyncOptions(key=("k",), p=P, n=N, handle_invalid="quarantine")
    sync_table(spark, source, mirror, ["cid", "email"], options)


def _last_commit(path: str) -> tuple[int, str]:
    """The version of a table's last commit and its timestamp as ``inspect`` writes it: the
    protocol's, its commit file's modification time (the table has no in-commit timestamps)."""
    version = DeltaTable(path).version()
    millis = (Path(path) / "_delta_log" / f"{version:020d}.json").stat().st_mtime_ns // 1_000_000
    moment = dt.datetime.fromtimestamp(millis / 1000, tz=dt.timezone.utc)
    return version, moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class _Mirror:
    """What ``inspect`` said of one mirror at each step, and the facts to compare it with."""

    source: str
    mirror: str
    source_id: str
    created: dict[str, Any]
    created_commit: tuple[int, str]
    behind: dict[str, Any]
    synced: dict[str, Any]
    synced_commit: tuple[int, str]
    replaced: dict[str, Any]
    gone: dict[str, Any]


@pytest.fixture(scope="module")
def mirrored(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> _Mirror:
    """A customers table synced into a mirror (cid 9 is past the codec's 8 ids: quarantined);
    then a source version appended (inspected before its sync, and after); then the source
    replaced by a new table at the same path; then removed."""
    root = tmp_path_factory.mktemp("inspect")
    source, mirror = str(root / "customers"), str(root / "mirror")
    write_deltalake(source, _customers([(1, "a@x", 2), (2, "b@x", 6), (3, "a@x", 4), (4, "c@x", 9)]), configuration=CDF)
    _sync(spark, source, mirror)
    created, created_commit = inspect_table(mirror), _last_commit(mirror)
    write_deltalake(source, _customers([(5, "d@x", 1)]), mode="append")  # v1
    behind = inspect_table(mirror)
    _sync(spark, source, mirror)
    synced, synced_commit = inspect_table(mirror), _last_commit(mirror)
    source_id = DeltaTable(source).metadata().id
    shutil.rmtree(source)
    write_deltalake(source, _customers([(1, "a@x", 2)]), configuration=CDF)  # another table, same path
    replaced = inspect_table(mirror)
    shutil.rmtree(source)
    return _Mirror(
        source,
        mirror,
        source_id,
        created,
        created_commit,
        behind,
        synced,
        synced_commit,
        replaced,
        inspect_table(mirror),
    )


def test_inspect_shows_the_source_version_a_mirror_holds_and_when_it_got_there(mirrored: _Mirror) -> None:
    sync = mirrored.created["sync"]
    version, at = mirrored.created_commit
    assert sync["source"] == mirrored.source
    assert sync["source_table_id"] == mirrored.source_id
    assert (sync["source_version"], sync["mirror_version"], sync["synced_at"]) == (0, version, at)
    assert sync["last_full_refresh"] == {"version": version, "timestamp": at, "source_version": 0}
    assert sync["next_window"] == "up to date"
    assert sync["quarantine"] == {"path": f"{mirrored.mirror}_quarantine", "source_version": 0}
    assert sync["value_counts"] == {"email": {"path": f"{mirrored.mirror}_counts/email", "source_version": 0}}


def test_a_source_version_the_mirror_lacks_is_the_next_window(mirrored: _Mirror) -> None:
    """Before the second sync the window is version 1; after it (a window, not a refresh) the
    mirror holds version 1, reached by its newest commit, and its last full refresh is the first."""
    assert mirrored.behind["sync"]["next_window"] == {"from": 1, "to": 1}
    sync = mirrored.synced["sync"]
    version, at = mirrored.synced_commit
    assert (sync["source_version"], sync["mirror_version"], sync["synced_at"]) == (1, version, at)
    assert sync["next_window"] == "up to date"
    assert sync["last_full_refresh"] == mirrored.created["sync"]["last_full_refresh"]
    assert sync["value_counts"]["email"]["source_version"] == 1  # the window's change of them


def test_a_replaced_source_asks_for_a_full_refresh(mirrored: _Mirror) -> None:
    window = mirrored.replaced["sync"]["next_window"]
    assert isinstance(window, str)
    assert "another table" in window
    assert mirrored.source_id in window
    assert "--full-refresh" in window


def test_a_source_that_is_gone_is_named(mirrored: _Mirror) -> None:
    assert mirrored.gone["sync"]["next_window"] == (
        f"unknown: no Delta table at the source {mirrored.source} (a relative path is relative to where the sync ran)"
    )
    assert mirrored.gone["sync"]["source_version"] == 1


def test_capacity_counts_the_vocabularys_ids_and_the_largest_kept_id(mirrored: _Mirror) -> None:
    """Three emails took ids 0-2 (c@x's row is quarantined: its key has an id all the same); the
    mirror's largest cid is 6 of the codec's 8 ids: past the 50% warning."""
    capacity = mirrored.created["capacity"]
    assert capacity["email"] == {"used": 3, "capacity": 8, "share": 0.375, "source": "vocabulary"}
    cid = capacity["cid"]
    assert {k: cid[k] for k in ("used", "capacity", "share", "source")} == {
        "used": 7,
        "capacity": 8,
        "share": 0.875,
        "source": "statistics",
    }
    assert "50%" in cid["warning"]
    assert "spark-mlt sync ... --full-refresh --resize" in cid["warning"]


def test_a_windows_new_key_takes_the_next_id(mirrored: _Mirror) -> None:
    """d@x took id 3: 4 of 8 email ids, where the warning starts (50%)."""
    capacity = mirrored.synced["capacity"]
    assert (capacity["email"]["used"], capacity["email"]["share"], capacity["cid"]["used"]) == (4, 0.5, 7)
    assert "warning" in capacity["email"]


def test_the_cli_prints_the_capacity_and_sync_state(mirrored: _Mirror, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--input", mirrored.mirror]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["capacity"]["email"]["used"] == 4
    assert printed["sync"]["source_version"] == 1


# -- capacity_usage without a mirror ---------------------------------------------------------------


def _table(path: Path, columns: dict[str, pa.Array], *, partition_by: Sequence[str] = (), **properties: str) -> str:
    """A table of ``columns`` with ``properties`` (delta-rs refuses properties it does not know
    unless told, as spark-mlt's writer tells it)."""
    rows = pa.table(columns)
    DeltaTable.create(
        str(path),
        Schema.from_arrow(rows.schema),
        partition_by=list(partition_by) or None,
        configuration=properties,
        raise_if_key_not_exists=False,
    )
    write_deltalake(str(path), rows, mode="append")
    return str(path)


def _codec(p: int = 7, n: int = 2) -> str:
    return MLTCodec.from_seed(p, n, seed=0).to_json()


def test_an_integer_id_column_takes_its_largest_value_over_every_file(tmp_path: Path) -> None:
    """Ids 0 and 3, then 10, then a file of null ids only: 11 of 7**2 = 49 ids."""
    path = _table(tmp_path / "t", {"cid": pa.array([0, 3], pa.int64())}, **{"mlt.codec.cid": _codec()})
    write_deltalake(path, pa.table({"cid": pa.array([10], pa.int64())}), mode="append")
    write_deltalake(path, pa.table({"cid": pa.array([None], pa.int64())}), mode="append")
    assert capacity_usage(read_snapshot(path)) == {"cid": Usage("cid", 49, 11, "statistics")}


def test_a_partition_column_of_ids_takes_its_largest_partition_value(tmp_path: Path) -> None:
    path = _table(
        tmp_path / "t",
        {"cid": pa.array([2, 30, None], pa.int32()), "x": pa.array([1, 2, 3], pa.int64())},
        partition_by=["cid"],
        **{"mlt.codec.cid": _codec()},
    )
    assert capacity_usage(read_snapshot(path))["cid"] == Usage("cid", 49, 31, "statistics")


def test_a_file_without_the_ids_statistics_leaves_the_usage_unknown(tmp_path: Path) -> None:
    path = _table(
        tmp_path / "t",
        {"cid": pa.array([1, 5], pa.int64())},
        **{"mlt.codec.cid": _codec(), "delta.dataSkippingNumIndexedCols": "0"},
    )
    usage = capacity_usage(read_snapshot(path))["cid"]
    assert usage.used is None
    assert usage.share is None
    assert not usage.full
    assert usage.source.startswith("unknown: the file ")
    assert "records no maximum of cid" in usage.source


def test_a_missing_id_column_or_vocabulary_is_unknown_and_says_why(tmp_path: Path) -> None:
    path = _table(
        tmp_path / "t",
        {"sku": pa.array(["x"], pa.string()), "note": pa.array(["n"], pa.string())},
        **{
            "mlt.codec.gone": _codec(),
            "mlt.codec.sku": _codec(),
            "mlt.vocabulary.sku": str(tmp_path / "no_vocab"),
            "mlt.codec.note": _codec(),
        },
    )
    usage = capacity_usage(read_snapshot(path))
    assert usage["gone"] == Usage("gone", 49, None, "unknown: the id column is not kept")
    assert usage["sku"].used is None
    assert usage["sku"].source == f"unknown: no vocabulary table at {tmp_path / 'no_vocab'}"
    assert usage["note"].source == "unknown: the id column is string, with no vocabulary recorded"


def test_a_tokenized_table_past_half_its_capacity_is_told_to_resize_by_tokenize(tmp_path: Path) -> None:
    """Ids up to 6 of a 2**3 codec (a table that no sync wrote): 7 of 8 ids."""
    path = _table(tmp_path / "t", {"cid": pa.array([0, 6], pa.int64())}, **{"mlt.codec.cid": _codec(P, N)})
    info = inspect_table(path)
    assert info["sync"] is None
    assert (info["capacity"]["cid"]["used"], info["capacity"]["cid"]["share"]) == (7, 0.875)
    assert "spark-mlt tokenize ... --mode overwrite --resize" in info["capacity"]["cid"]["warning"]


def test_an_erased_keys_id_stays_taken(tmp_path: Path) -> None:
    """A vocabulary whose keys of ids 1 and 3 were erased (keyless rows, ids kept) has given 4
    ids, whichever file holds the largest."""
    vocabulary = _table(tmp_path / "vocab", {"key": pa.array(["a", None], pa.string()), "id": pa.array([0, 1])})
    write_deltalake(vocabulary, pa.table({"key": pa.array(["c", None], pa.string()), "id": [2, 3]}), mode="append")
    path = _table(
        tmp_path / "t",
        {"sku": pa.array(["a", "c"], pa.string())},
        **{"mlt.codec.sku": _codec(), "mlt.vocabulary.sku": vocabulary},
    )
    assert capacity_usage(read_snapshot(path)) == {"sku": Usage("sku", 49, 4, "vocabulary")}


def test_capacity_is_the_codecs_id_domain_and_the_warning_starts_at_half() -> None:
    """A codec past 2**63 ids maps 2**63 of them (ids are bigints)."""
    big = MLTCodec.from_seed(3, 40, seed=0)
    assert big.capacity > 2**63
    assert CAPACITY_WARNING == 0.5
    assert Usage("c", 8, 4, "statistics").full
    assert not Usage("c", 8, 3, "statistics").full
    assert Usage("c", 8, 9, "statistics").share == 1.125  # ids past the capacity: too small already


def test_an_empty_table_takes_no_id(tmp_path: Path) -> None:
    path = _table(tmp_path / "t", {"cid": pa.array([], pa.int64())}, **{"mlt.codec.cid": _codec(3, 40)})
    assert capacity_usage(read_snapshot(path))["cid"] == Usage("cid", 2**63, 0, "statistics")
