"""A commit's metadata, read once as the Delta protocol defines it (no Spark needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.fs import locate
from spark_mlt.delta.log import DeltaLog
from spark_mlt.storage import read_snapshot

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})


def _commit_file(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def test_a_snapshots_history_is_its_own_commits_numbered_and_timed_by_the_log(tmp_path: Path) -> None:
    """The history of an older version lists that version and those before it, each with its
    own number (delta-rs' history of such a handle lists the newest commits, numbered down from
    the handle's version), timed by each commit file's modification time."""
    table = tmp_path / "t"
    for step in range(3):
        metadata = {"spark_mlt.job": f"step-{step}"}
        write_deltalake(str(table), ROWS, mode="append", commit_properties=CommitProperties(custom_metadata=metadata))
        os.utime(_commit_file(table, step), (1_700_000_000 + step, 1_700_000_000 + step))
    older = read_snapshot(str(table), version=1)
    assert [(e["version"], e["spark_mlt.job"]) for e in older.history()] == [(1, "step-1"), (0, "step-0")]
    assert [e["timestamp"] for e in older.history()] == [1_700_000_001_000, 1_700_000_000_000]
    assert [e["version"] for e in read_snapshot(str(table)).history(2)] == [2, 1]
    assert read_snapshot(str(table)).commits(1)[0].operation == "WRITE"


def test_spark_mlts_metadata_is_read_from_user_metadata_and_the_commit_wins(tmp_path: Path) -> None:
    """delta-spark keeps spark-mlt's entries in ``userMetadata`` (JSON): they are unpacked, and
    the commit's own fields win over the same keys in it."""
    table = tmp_path / "t"
    user = json.dumps({"spark_mlt.writer": "w", "operation": "FAKE", "version": 99})
    write_deltalake(str(table), ROWS, commit_properties=CommitProperties(custom_metadata={"userMetadata": user}))
    (entry,) = read_snapshot(str(table)).history()
    assert (entry["spark_mlt.writer"], entry["operation"], entry["version"]) == ("w", "WRITE", 0)
    assert read_snapshot(str(table)).commits()[0].metadata == {"spark_mlt.writer": "w"}


def test_an_in_commit_timestamp_wins_from_its_enablement_version_on(tmp_path: Path) -> None:
    """With in-commit timestamps a commit's time is its ``inCommitTimestamp``; commits before
    the feature was enabled keep their file's modification time."""
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    for version in (0, 1):
        info = {"commitInfo": {"operation": "WRITE", "inCommitTimestamp": 1_600_000_000_000 + version}}
        (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")
        os.utime(log / f"{version:020d}.json", (1_700_000_000, 1_700_000_000))
    properties = {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "1"}
    enabled = TableConfig.of(properties).in_commit_timestamps_from
    assert enabled == 1
    delta_log = DeltaLog(locate(str(tmp_path / "t")))
    first, second, third = delta_log.commits(
        [delta_log.commit_file(0), delta_log.commit_file(1), delta_log.commit_file(2)], in_commit_from=enabled
    )
    assert first is not None
    assert second is not None
    assert (first.timestamp, second.timestamp) == (1_700_000_000_000, 1_600_000_000_001)
    assert TableConfig.of({}).in_commit_timestamps_from is None
    assert third is None  # no such commit (or cleaned up)
