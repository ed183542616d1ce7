"""The jar-free Delta core: one log replay (commits and checkpoints of every kind), typed
actions and configuration, and nothing outside it reading the log (no Spark needed).

The replay is checked against delta-rs, a reference reader, on every version of every table of
the zoo (tables delta-spark wrote, one per feature) and on tables with classic, multi-part and
v2 checkpoints whose older commits were cleaned up.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import os
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_mlt.delta import locate, read_snapshot
from spark_mlt.delta.actions import AddFile, RemoveFile, Txn, parse_action
from spark_mlt.delta.config import TableConfig, parse_interval
from spark_mlt.delta.log import DeltaLog, clear_cache, stats_json
from spark_mlt.errors import MissingTableError, TableError
from tests.support.paths import ROOT
from tests.support.zoo import Zoo

PACKAGE = ROOT / "spark_mlt"
ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"]})


def _files_of_delta_rs(path: str, version: int) -> dict[str, tuple[int, int | None]]:
    """delta-rs' view of a version's files: path -> (size, rows its deletion vector deletes)."""
    table = DeltaTable(path, version=version)
    deleted = {}
    if "deletionVectors" in (table.protocol().reader_features or ()):
        masks = pa.table(table.deletion_vectors())
        root = unquote(table.table_uri).rstrip("/") + "/"
        paths, selections = masks.column("filepath").to_pylist(), masks.column("selection_vector").to_pylist()
        for uri, mask in zip(paths, selections, strict=True):
            deleted[unquote(str(uri)).removeprefix(root)] = mask.count(False)
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    return {
        unquote(str(row["path"])): (int(row["size_bytes"]), deleted.get(unquote(str(row["path"])))) for row in actions
    }


def _files_of_ours(path: str, version: int) -> dict[str, tuple[int, int | None]]:
    snapshot = read_snapshot(locate(path), version)
    return {
        add.path: (add.size, None if add.deletion_vector is None else add.deletion_vector.cardinality)
        for add in snapshot.files.values()
    }


def test_every_zoo_version_replays_as_delta_rs_reads_it(zoo: Zoo) -> None:
    """Files (with their vectors), protocol, id, properties, schema and transactions of every
    version of every table delta-spark wrote, as delta-rs reads them."""
    compared = 0
    for name in sorted(zoo.manifest["tables"]):
        path = zoo.path(name)
        latest = DeltaLog(locate(path)).listing().latest
        assert latest is not None
        for version in range(latest + 1):
            try:
                theirs = DeltaTable(path, version=version)
            except Exception:  # noqa: BLE001 - a feature delta-rs cannot open: nothing to compare with
                continue
            ours = read_snapshot(locate(path), version)
            assert _files_of_ours(path, version) == _files_of_delta_rs(path, version), f"{name}@{version}"
            protocol = theirs.protocol()
            assert (ours.protocol.min_reader_version, ours.protocol.min_writer_version) == (
                protocol.min_reader_version,
                protocol.min_writer_version,
            ), f"{name}@{version}"
            assert ours.protocol.reader_features == (
                None if protocol.reader_features is None else frozenset(protocol.reader_features)
            )
            metadata = theirs.metadata()
            assert ours.metadata.id == metadata.id
            assert dict(ours.metadata.configuration) == {
                k: v for k, v in metadata.configuration.items() if v is not None
            }
            assert list(ours.metadata.partition_columns) == list(metadata.partition_columns)
            assert ours.metadata.schema() == json.loads(theirs.schema().to_json())
            compared += 1
    assert compared > 30, compared


def _table_with_commits(path: Path, commits: int) -> None:
    for step in range(commits):
        mode = "overwrite" if step == 3 else "append"  # a version that removes files: tombstones
        rows = ROWS.set_column(0, "id", pa.array([step, step + 100], pa.int64()))
        write_deltalake(str(path), rows, mode=mode, partition_by=["p"])


def _state(path: str, version: int | None = None) -> tuple[Any, ...]:
    snapshot = read_snapshot(locate(path), version)
    return (
        snapshot.version,
        sorted(snapshot.files),
        sorted(k for k in snapshot.tombstones),
        snapshot.metadata.id,
        snapshot.records,
    )


def _drop_commits_before(path: Path, version: int) -> None:
    for commit in (path / "_delta_log").glob("*.json"):
        if commit.name[:20].isdigit() and int(commit.name[:20]) < version:
            commit.unlink()
    clear_cache()


def test_a_classic_checkpoint_rebuilds_a_version_whose_commits_are_gone(tmp_path: Path) -> None:
    """A version read from its checkpoint and the commits after it equals the same version
    replayed from version 0; once the commits before the checkpoint are cleaned up, the log
    still rebuilds the versions from the checkpoint on and says it no longer reaches older ones."""
    path = tmp_path / "t"
    _table_with_commits(path, 8)
    replayed = {v: _state(str(path), v) for v in (5, 7)}
    DeltaTable(str(path), version=5).create_checkpoint()
    assert (path / "_delta_log" / f"{5:020d}.checkpoint.parquet").exists()
    clear_cache()
    assert read_snapshot(locate(str(path)), 7).segment.checkpoint is not None
    assert {v: _state(str(path), v) for v in (5, 7)} == replayed
    _drop_commits_before(path, 5)
    assert {v: _state(str(path), v) for v in (5, 7)} == replayed
    with pytest.raises(MissingTableError, match=r"no longer reaches back to version 4 .* versions 5 to 7"):
        read_snapshot(locate(str(path)), 4)


def test_a_multi_part_checkpoint_is_read_whole_and_ignored_with_a_part_missing(tmp_path: Path) -> None:
    """The parts of a multi-part checkpoint together rebuild its version; with a part missing
    it is no checkpoint at all, and the version is replayed from the commits."""
    path = tmp_path / "t"
    _table_with_commits(path, 6)
    expected = _state(str(path), 5)
    DeltaTable(str(path), version=5).create_checkpoint()
    log = path / "_delta_log"
    classic = log / f"{5:020d}.checkpoint.parquet"
    rows = pq.read_table(classic)
    half = rows.num_rows // 2
    for part, piece in enumerate((rows.slice(0, half), rows.slice(half)), start=1):
        pq.write_table(piece, log / f"{5:020d}.checkpoint.{part:010d}.0000000002.parquet")
    classic.unlink()
    (log / "_last_checkpoint").unlink(missing_ok=True)
    clear_cache()
    snapshot = read_snapshot(locate(str(path)), 5)
    assert snapshot.segment.checkpoint is not None
    assert snapshot.segment.checkpoint.kind == "multi-part"
    assert _state(str(path), 5) == expected
    (log / f"{5:020d}.checkpoint.0000000002.0000000002.parquet").unlink()
    clear_cache()
    assert read_snapshot(locate(str(path)), 5).segment.checkpoint is None
    assert _state(str(path), 5) == expected


def test_a_v2_checkpoint_with_sidecars_rebuilds_its_version_alone(zoo: Zoo, tmp_path: Path) -> None:
    """delta-spark's UUID-named v2 checkpoint (JSON, its files in sidecars) is the whole state of
    its version: with every commit before it gone, the version reads as before."""
    path = Path(zoo.copy("v2_checkpoint", tmp_path))
    expected = _files_of_delta_rs(str(path), 6)
    before = _state(str(path), 6)
    _drop_commits_before(path, 6)
    snapshot = read_snapshot(locate(str(path)), 6)
    assert snapshot.segment.checkpoint is not None
    assert snapshot.segment.checkpoint.kind == "uuid"
    assert _state(str(path), 6) == before
    assert _files_of_ours(str(path), 6) == expected


def _log(path: Path, *commits: list[dict[str, Any]]) -> str:
    log = path / "_delta_log"
    log.mkdir(parents=True)
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    clear_cache()
    return str(path)


_PROTOCOL = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"]}}
_METADATA = {
    "metaData": {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True}]}),
        "partitionColumns": [],
        "configuration": {"delta.enableDeletionVectors": "true"},
    }
}


def _add(path: str, vector: str | None = None) -> dict[str, Any]:
    add: dict[str, Any] = {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}
    if vector is not None:
        add["deletionVector"] = {"storageType": "i", "pathOrInlineDv": vector, "sizeInBytes": 1, "cardinality": 1}
    return {"add": add}


def _remove(path: str, vector: str | None = None) -> dict[str, Any]:
    remove: dict[str, Any] = {"path": path, "deletionTimestamp": 5, "dataChange": True}
    if vector is not None:
        remove["deletionVector"] = {"storageType": "i", "pathOrInlineDv": vector, "sizeInBytes": 1, "cardinality": 1}
    return {"remove": remove}


@pytest.mark.parametrize("order", ["add first", "remove first"])
def test_a_files_new_vector_replaces_its_old_one_whatever_the_order_in_the_commit(tmp_path: Path, order: str) -> None:
    """A logical file is its path and its vector: a commit that removes ``(a, v1)`` and adds
    ``(a, v2)`` leaves ``(a, v2)`` and the tombstone of ``(a, v1)``, in either order (the
    protocol does not order a commit's actions); a path percent-encoded in the log is decoded."""
    change = [_add("a%20b.parquet", "00000"), _remove("a%20b.parquet", "11111")]
    path = _log(
        tmp_path, [_PROTOCOL, _METADATA, _add("a%20b.parquet", "11111")], change[:: 1 if order == "add first" else -1]
    )
    snapshot = read_snapshot(locate(path))
    (add,) = snapshot.files.values()
    assert add.key == ("a b.parquet", "i00000")
    assert list(snapshot.tombstones) == [("a b.parquet", "i11111")]
    # a remove of another vector than the file's leaves the file
    (tmp_path / "_delta_log" / f"{2:020d}.json").write_text(json.dumps(_remove("a%20b.parquet", "22222")) + "\n")
    assert [a.key for a in read_snapshot(locate(path)).files.values()] == [("a b.parquet", "i00000")]


def test_transactions_domains_protocol_and_metadata_reconcile_as_the_protocol_says(tmp_path: Path) -> None:
    """The latest txn version of an application wins (even a smaller one), a removed domain is
    gone, the latest protocol and metadata win; an add of a tombstoned key revives it."""
    renamed = json.loads(json.dumps(_METADATA))
    renamed["metaData"]["configuration"] = {"delta.appendOnly": "true"}
    path = _log(
        tmp_path,
        [
            _PROTOCOL,
            _METADATA,
            {"txn": {"appId": "x", "version": 5}},
            {"domainMetadata": {"domain": "d", "configuration": "{}"}},
        ],
        [
            {"txn": {"appId": "x", "version": 3}},
            {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": True}},
        ],
        [renamed, _add("f.parquet"), _remove("f.parquet"), _add("f.parquet")],
    )
    snapshot = read_snapshot(locate(path))
    assert snapshot.transaction_version("x") == 3
    assert snapshot.transaction_version("y") is None
    assert snapshot.domains == {}
    assert snapshot.config.append_only
    assert list(snapshot.files) == ["f.parquet"]
    assert read_snapshot(locate(path), 0).transaction_version("x") == 5


def test_a_log_without_metadata_or_with_a_broken_line_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = _log(tmp_path / "a", [_PROTOCOL])
    with pytest.raises(TableError, match=r"has no metaData action up to version 0"):
        read_snapshot(locate(path))
    broken = _log(tmp_path / "b", [_PROTOCOL, _METADATA])
    with open(os.path.join(broken, "_delta_log", f"{1:020d}.json"), "w") as handle:
        handle.write('{"add": {"path": "x"}}\n')  # no size
    clear_cache()
    with pytest.raises(TableError, match=r"00000000000000000001.json holds a malformed 'add' action"):
        read_snapshot(locate(broken))


def test_a_metadata_action_without_schema_replaced_by_the_next_version_is_no_error(tmp_path: Path) -> None:
    """Pins the replay's judgement of the state a version ends in: Delta Live Tables commit a
    first ``metaData`` without ``schemaString`` and replace it in version 1 (the shape of
    delta-rs' test table ``delta-live-table``), which delta-spark and delta-rs read. Before, every
    version was refused as holding a malformed action; now only version 0 is, naming the field."""
    first = {"id": "dlt", "format": {"provider": "parquet", "options": {}}, "partitionColumns": [], "configuration": {}}
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    second = {**first, "schemaString": json.dumps(schema), "configuration": {"pipelines.pipelineId": "p"}}
    path = tmp_path / "t"
    path.mkdir()
    pq.write_table(ROWS.select(["id"]), path / "part-0.parquet")
    add = _add("part-0.parquet")
    add["add"]["size"] = (path / "part-0.parquet").stat().st_size
    _log(
        path,
        [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": first}],
        [{"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}, {"metaData": second}, add],
    )
    snapshot = read_snapshot(locate(str(path)))
    assert (snapshot.version, snapshot.metadata.schema(), list(snapshot.files)) == (1, schema, ["part-0.parquet"])
    assert snapshot.config.properties == {"pipelines.pipelineId": "p"}
    assert DeltaTable(str(path)).to_pyarrow_table().to_pydict() == {"id": [1, 2]}  # delta-rs reads it too
    with pytest.raises(TableError, match=r"metaData action in force at version 0 .* has no schemaString"):
        read_snapshot(locate(str(path)), 0)


def test_a_table_written_again_at_the_same_place_is_read_anew(tmp_path: Path) -> None:
    """The caches key a log file by its size and time: a table deleted and written again at the
    same place is not read from a stale cache."""
    path = tmp_path / "t"
    write_deltalake(str(path), ROWS)
    first = read_snapshot(locate(str(path)))
    shutil.rmtree(path)
    write_deltalake(str(path), ROWS.slice(0, 1))
    again = read_snapshot(locate(str(path)))
    assert (again.version, again.records) == (0, 1)
    assert again.metadata.id != first.metadata.id


def test_a_newer_version_replays_only_the_commits_after_a_cached_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version of a table whose older version is cached is that version plus the commits in
    between: neither the checkpoint nor older commits are read again."""
    path = tmp_path / "t"
    _table_with_commits(path, 12)
    DeltaTable(str(path), version=9).create_checkpoint()
    clear_cache()
    expected = _state(str(path), 11)
    clear_cache()
    read_snapshot(locate(str(path)), 10)
    read: list[str] = []
    original = DeltaLog.commit_actions

    def counting(self: DeltaLog, file: Any) -> Any:
        read.append(file.name)
        return original(self, file)

    monkeypatch.setattr(DeltaLog, "checkpoint_actions", lambda *_: pytest.fail("the checkpoint was read again"))
    monkeypatch.setattr(DeltaLog, "commit_actions", counting)
    assert _state(str(path)) == expected
    assert read == [f"{11:020d}.json"]


def test_statistics_kept_as_structs_in_a_checkpoint_read_as_their_json() -> None:
    """A checkpoint written with ``delta.checkpoint.writeStatsAsJson = false`` holds
    ``stats_parsed`` only: read back as the JSON it stands for."""
    parsed = {
        "numRecords": 2,
        "minValues": {"t": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc), "d": Decimal("1.50")},
        "maxValues": {"n": dt.datetime(2024, 1, 2), "day": dt.date(2024, 1, 3), "x": None},
    }
    assert json.loads(stats_json(parsed), parse_float=Decimal) == {
        "numRecords": 2,
        "minValues": {"t": "2024-01-02T03:04:05.678Z", "d": Decimal("1.50")},
        "maxValues": {"n": "2024-01-02T00:00:00.000", "day": "2024-01-03"},
    }


def test_actions_of_unknown_kinds_are_ignored_and_known_ones_typed() -> None:
    assert parse_action({"somethingNew": {"a": 1}}) is None
    assert parse_action({"txn": {"appId": "a", "version": 2}}) == Txn("a", 2)
    remove = parse_action({"remove": {"path": "p%3Dx/f", "dataChange": False}})
    assert isinstance(remove, RemoveFile)
    assert (remove.path, remove.deletion_timestamp, remove.data_change) == ("p=x/f", None, False)
    add = parse_action(_add("f"))
    assert isinstance(add, AddFile)
    assert add.key == ("f", None)


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, {"column_mapping": "none", "indexed_columns": 32, "string_prefix": 32, "stats_columns": None}),
        ({"DELTA.ColumnMapping.Mode": "Name"}, {"column_mapping": "name"}),
        ({"delta.dataSkippingNumIndexedCols": "many"}, {"indexed_columns": None}),
        ({"delta.dataSkippingNumIndexedCols": "-2"}, {"indexed_columns": None}),
        ({"delta.dataSkippingStatsColumns": "a, s.b"}, {"stats_columns": (("a",), ("s", "b"))}),
        ({"delta.dataSkippingStatsColumns": "a b"}, {"stats_columns": ()}),
        ({"delta.dataSkippingStringPrefixLength": "4"}, {"string_prefix": 4}),
        ({"delta.enableChangeDataCapture": "true"}, {"change_data_feed": True}),
        ({"delta.enableInCommitTimestamps": "true"}, {"in_commit_timestamps_from": 0}),
        ({"delta.deletedFileRetentionDuration": "interval 2 days"}, {"deleted_file_retention_ms": 172_800_000}),
        ({"delta.logRetentionDuration": "forever"}, {"log_retention_ms": 30 * 86_400_000}),
    ],
)
def test_table_properties_are_typed_with_deltas_defaults(properties: dict[str, str], expected: dict[str, Any]) -> None:
    config = TableConfig.of(properties)
    assert {key: getattr(config, key) for key in expected} == expected


def test_intervals_read_as_delta_reads_them() -> None:
    assert parse_interval("interval 1 week") == 604_800_000
    assert parse_interval("2 days 12 hours") == 216_000_000
    assert parse_interval("1 month") is None
    assert parse_interval("") is None


# --- nothing else reads the log -----------------------------------------------------------------

#: delta-rs methods that read a table's log (its state), which only the core may call.
_LOG_READERS = {"get_add_actions", "deletion_vectors", "load_cdf", "file_uris", "to_pyarrow_dataset", "is_deltatable"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def log_readers(package: Path = PACKAGE) -> list[str]:
    """Where a module outside ``spark_mlt/delta`` names the ``_delta_log`` folder in code (to
    open or parse its files), opens a delta-rs ``DeltaTable`` or calls a delta-rs reader of a
    table's state."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if "delta" in path.relative_to(package).parts[:1]:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = _docstrings(tree)
        where = path.relative_to(package.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if "_delta_log" in node.value:
                    found.append(f"{where}:{node.lineno}: names _delta_log")
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
                if name == "DeltaTable" or owner == "DeltaTable" or name in _LOG_READERS:
                    found.append(f"{where}:{node.lineno}: calls {owner + '.' if owner else ''}{name}")
    return found


def test_nothing_outside_the_core_reads_the_log() -> None:
    """The log has one reader, `spark_mlt.delta`: four modules used to parse its JSON, two
    copies of the deletion-vector scan drifted apart."""
    assert log_readers() == []


def test_the_rule_finds_a_module_that_reads_the_log(tmp_path: Path) -> None:
    (tmp_path / "spark_mlt").mkdir()
    (tmp_path / "spark_mlt" / "sneaky.py").write_text(
        '"""Mentions _delta_log in its docstring: allowed."""\n'
        "import json\n"
        "def f(fs):\n"
        '    return json.loads(fs.open_input_stream("t/_delta_log/0.json").read())\n'
        "def g(DeltaTable, t):\n"
        "    return DeltaTable(t).get_add_actions()\n"
    )
    assert sorted(line.split(": ", 1)[1] for line in log_readers(tmp_path / "spark_mlt")) == [
        "calls DeltaTable",
        "calls get_add_actions",
        "names _delta_log",
    ]
