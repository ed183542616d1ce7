"""Overlapping runs: a sync window, or a vocabulary append, planned from a version that another
run moved on meanwhile commits nothing; the next run carries on from where the winner left."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

import spark_mlt.batch.mirror.sync as sync_module
import spark_mlt.storage.keys as keys_module
import spark_mlt.storage.vocabulary as vocabulary_module
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.batch.mirror.window import check_changes, last_rows, read_window
from spark_mlt.delta.schema import TableLayout
from spark_mlt.errors import ConcurrentWriteError, SourceError
from spark_mlt.storage import AppTransaction, key_rows, read_snapshot
from spark_mlt.storage.spark_sql import statement_session
from spark_mlt.storage.vocabulary import assign_ids, check_vocabulary, next_id
from tests.support.interleavings import KINDS, Kind, Lake, at_point, check_fresh, finish, interleave, points, sampled

CDF = {"delta.enableChangeDataFeed": "true"}
OPTIONS = SyncOptions(key=("k",), handle_invalid="quarantine", p=13, n=3)


def _source(path: str, rows: list[tuple[int, str]], mode: str = "append") -> None:
    k, email = zip(*rows, strict=True)
    table = pa.table({"k": pa.array(k, pa.int64()), "email": pa.array(email, pa.string())})
    write_deltalake(path, table, mode=mode, configuration=CDF if mode == "overwrite" else None)  # type: ignore[call-overload]


def _rows(path: str) -> list[tuple[Any, ...]]:
    return sorted((r["k"], r["email"]) for r in DeltaTable(path).to_pyarrow_table().to_pylist())


def test_a_write_planned_from_another_version_of_its_writer_commits_nothing(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"a": [1]}))
    snapshot = read_snapshot(table)
    with pytest.raises(ConcurrentWriteError, match="from version 3 to none"):
        AppTransaction("w", 5, after=3).check_base(snapshot.transaction_version("w"), table)
    AppTransaction("w", 5, after=-1).check_base(None, table)  # planned from none: none it is
    AppTransaction("w", 5, after=3).check_base(5, table)  # already holds it: skipped before


def test_a_window_planned_from_a_version_another_sync_moved_on_commits_nothing(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run that lost: planned 0..2 while another run, started before version 2 landed,
    applied 0..1 (its first commit: the value counts'); committing 0..2 on top would apply
    version 1 twice."""
    source, mirror = str(tmp_path / "src"), str(tmp_path / "mirror")
    _source(source, [(1, "a@x"), (2, "b@x")], mode="overwrite")
    sync_table(spark, source, mirror, ["k", "email"], OPTIONS)
    _source(source, [(3, "c@x")])  # version 1
    _source(source, [(4, "d@x")])  # version 2
    latest = sync_module.source_snapshot

    def other_run_first() -> None:  # a run that saw the source at version 1 commits its window first
        monkeypatch.setattr(
            sync_module, "source_snapshot", lambda spark, input, options: read_snapshot(input, version=1)
        )
        sync_table(spark, source, mirror, ["k", "email"], OPTIONS)
        monkeypatch.setattr(sync_module, "source_snapshot", latest)

    before = DeltaTable(mirror).version()
    with (
        at_point("vocabularies appended", other_run_first),
        pytest.raises(ConcurrentWriteError, match="from version 0 to 1"),
    ):
        sync_table(spark, source, mirror, ["k", "email"], OPTIONS)
    assert DeltaTable(mirror).version() == before + 1  # the other run's window only
    assert _rows(mirror) == [(1, "a@x"), (2, "b@x"), (3, "c@x")]
    assert sync_table(spark, source, mirror, ["k", "email"], OPTIONS).source_version == 2  # not stuck
    assert _rows(mirror) == [(1, "a@x"), (2, "b@x"), (3, "c@x"), (4, "d@x")]
    check_vocabulary(spark, f"{mirror}_vocab/email")


def test_two_runs_numbering_new_keys_from_one_largest_id_never_share_an_id(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "vocab")
    first = spark.createDataFrame([("a",), ("b",)], "key string")
    assign_ids(spark, first, "key", path, id_column="id")
    numbered = vocabulary_module.numbered_keys
    raced: list[int] = []

    def other_run_first(*args: Any, **kwargs: Any) -> Any:
        result = numbered(*args, **kwargs)
        if not raced:  # after this run numbered its keys, another appends its own
            raced.append(1)
            assign_ids(spark, spark.createDataFrame([("x",), ("y",)], "key string"), "key", path, id_column="id")
        return result

    monkeypatch.setattr(vocabulary_module, "numbered_keys", other_run_first)
    ids = assign_ids(spark, spark.createDataFrame([("c",), ("d",)], "key string"), "key", path, id_column="id")
    assert sorted(r["id"] for r in ids.collect()) == [4, 5]  # planned again after x and y took 2 and 3
    check_vocabulary(spark, path)
    held = sorted((r["key"], r["id"]) for r in DeltaTable(path).to_pyarrow_table().to_pylist())
    assert sorted(i for _, i in held) == [0, 1, 2, 3, 4, 5]


def test_a_statements_settings_and_views_stay_off_the_users_session(spark: SparkSession) -> None:
    key = "spark.databricks.delta.write.txnAppId"
    with statement_session(spark, {key: "spark-mlt-sync:x"}, {"spark_mlt_v": spark.range(3)}) as own:
        assert own.conf.get(key) == "spark-mlt-sync:x"
        assert own.sql("SELECT count(*) FROM spark_mlt_v").first()[0] == 3
        assert spark.conf.get(key, None) is None  # what another thread of the session sees meanwhile
    assert not spark.catalog.tableExists("spark_mlt_v")


@pytest.mark.parametrize("kind", ["bigint", "string"])
def test_the_sorted_search_finds_the_files_the_join_of_every_file_finds(spark: SparkSession, kind: str) -> None:
    """Ranges that overlap, nest, touch, or are unknown (no statistics): each key's candidate
    files by the binary search over the sorted ranges are those of the join with every file."""
    rng = np.random.default_rng(7)
    convert: Any = int if kind == "bigint" else (lambda v: f"k{v:05d}")
    table = []
    for number in range(60):
        low = int(rng.integers(0, 900))
        high = low + int(rng.integers(0, 60 if number % 7 else 400))
        unknown = number % 11 == 0
        table.append((number, None if unknown else convert(low), None if unknown and number % 2 else convert(high)))
    table.append((60, convert(950), convert(950)))  # a range of one key
    values = [convert(int(v)) for v in rng.integers(0, 1000, 300)] + [convert(950), convert(2000)]
    keys = spark.createDataFrame([(v,) for v in values], f"k {kind}").repartition(3)
    schema = StructType([StructField("k", LongType() if kind == "bigint" else StringType())])
    layout = TableLayout(logical=schema, physical=schema, mapping="none", partition_columns=())
    joined = keys_module.join_key_files(spark, keys, ("k",), table, layout)
    assert keys_module.search_key_files(keys, "k", table) == joined  # in the keys' tasks
    assert keys_module.search_key_files(keys, "k", table, values) == joined  # on the driver
    assert 60 in joined
    assert keys_module.search_key_files(keys.limit(0), "k", table) == []
    assert keys_module.search_key_files(keys.limit(0), "k", table, []) == []


def test_the_next_vocabulary_id_comes_from_the_logs_statistics_without_reading_a_row(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "vocab")
    assign_ids(spark, spark.createDataFrame([("a",), ("b",), ("c",)], "key string"), "key", path, id_column="id")
    assign_ids(spark, spark.createDataFrame([("d",)], "key string"), "key", path, id_column="id")
    unread = spark.range(1).select(F.raise_error(F.lit("a row was read")).alias("id"))
    assert next_id(read_snapshot(path), unread) == 4
    write_deltalake(path, pa.table({"key": ["e"], "id": pa.array([9], pa.int64())}), mode="append")
    assert next_id(read_snapshot(path), unread) == 10


def _random_window(rng: np.random.Generator, broken: bool) -> tuple[list[tuple[int, str, int]], list[int]]:
    """Change rows (key, change type, version) of keys 0..29 over versions 1..4 from held keys
    (each once): a valid history, or (``broken``) one with a wrong change somewhere."""
    held = sorted(int(k) for k in rng.choice(30, 15, replace=False))
    present = set(held)
    rows = []
    for version in range(1, 5):
        for k in (int(k) for k in rng.choice(30, 6, replace=False)):
            if k in present:
                kind = rng.choice(["update", "delete"])
                if kind == "update":
                    rows += [(k, "update_preimage", version), (k, "update_postimage", version)]
                else:
                    rows.append((k, "delete", version))
                    present.discard(k)
            else:
                rows.append((k, "insert", version))
                present.add(k)
    if broken and rng.integers(2):  # a delete of a key no version holds
        absent = sorted(set(range(40)) - {k for k, _, _ in rows} - set(held))
        rows.append((absent[0], "delete", int(rng.integers(1, 5))))
    elif broken:
        k, _, version = rows[int(rng.integers(len(rows)))]
        rows.append((k, str(rng.choice(["insert", "delete", "update_postimage"])), version))
    return rows, held


def test_the_key_check_on_the_driver_decides_as_the_one_in_spark(spark: SparkSession) -> None:
    """Random windows, valid and broken: the same count of deleted keys, or the same error; and
    for a valid one, the same rows after it (the driver's without a join)."""
    rng = np.random.default_rng(11)
    outcomes = set()
    for case in range(12):  # every combination of kind (case % 3), broken (% 2) and skipped rows (% 4)
        rows, held = _random_window(rng, broken=case % 2 == 1)
        if case == 11:  # a null key, at version 3
            rows.append((None, "insert", 3))  # type: ignore[arg-type]
        kind, key = ("string", lambda k: None if k is None else f"k{k:02d}") if case % 3 else ("bigint", lambda k: k)
        rows = [(key(k), change, version) for k, change, version in rows]
        changes = spark.createDataFrame(rows, f"k {kind}, _change_type string, _commit_version bigint")
        mirror = spark.createDataFrame([(key(k),) for k in held], f"k {kind}")
        decided, final = [], []
        for local_rows in (0, 1000):
            window = read_window(changes, ["k"], local_rows=local_rows)
            assert (window.local is None) == (local_rows == 0)
            try:
                decided.append(check_changes(window, mirror, "src", skipped_rows=case % 4 == 3))
            except SourceError as error:
                decided.append(str(error))
                continue
            rows = sorted(tuple(r) for r in last_rows(window, names=["k", "_commit_version"]).collect())
            final.append(rows)
            assert window.final_rows in (None, len(rows))
        assert decided[0] == decided[1], (case, decided)
        assert not final or final[0] == final[1], (case, final)
        outcomes.add(type(decided[0]))
    assert outcomes == {int, str}  # both kinds of outcome were compared


@pytest.mark.parametrize("kind", ["int", "string"])
def test_the_held_keys_read_on_the_driver_are_the_rows_spark_reads(
    spark: SparkSession, tmp_path: Path, kind: str
) -> None:
    """A key check's held keys, read from the candidate files' key column with pyarrow, are the
    keys of the rows Spark reads from them (a key in two files counted twice), for an int and a
    string key under column mapping (the files name the column by its physical name) where the
    line's deltalake writes it (1.6.3 does not: the logical name then)."""
    path = str(tmp_path / "mirror")
    convert: Any = int if kind == "int" else (lambda v: f"k{v:03d}")
    arrow = pa.int32() if kind == "int" else pa.string()
    config: dict[str, str] | None = {
        "delta.columnMapping.mode": "name",
        "delta.minReaderVersion": "2",
        "delta.minWriterVersion": "5",
    }
    for part, keys in enumerate([range(0, 40), range(30, 70), range(100, 140)]):  # 30..39 twice
        table = pa.table({"k": pa.array([convert(k) for k in keys], arrow), "v": pa.array([part] * len(keys))})
        try:
            write_deltalake(path, table, mode="append", configuration=config if part == 0 else None)  # type: ignore[call-overload]
        except Exception as error:  # deltalake before column mapping's writes
            if part or "Column mapping is not supported" not in str(error):
                raise
            config = None
            write_deltalake(path, table, mode="append")
    snapshot = read_snapshot(path)
    assert (snapshot.delta.layout.physical_names["k"] != "k") == (config is not None)
    values = [convert(k) for k in (1, 35, 36, 69, 80, 120)]
    keys = spark.createDataFrame([(v,) for v in values], f"k {kind}")
    keyed = key_rows(spark, snapshot, keys, ["k"], backend="delta-rs", values=values)
    assert len(keyed.candidates) == 3
    read = keys_module.held_keys(keyed, values)
    assert read is not None
    spark_read = sorted(r["k"] for r in keyed.held.collect())
    assert sorted(read["k"].tolist()) == spark_read == sorted(convert(k) for k in (1, 35, 35, 36, 36, 69, 120))
    assert keys_module.held_keys(keyed, None) is None  # the keys not collected: Spark reads them


# -- two runs of one mirror, the second whole at each step point of the first -------------------


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A source and its mirror, synced once: copied by each test that changes them."""
    return Lake.synced(spark, tmp_path_factory.mktemp("interleavings") / "synced")


def _interleaved(
    spark: SparkSession, lake: Lake, root: Path, first: Kind, second: Kind, *, at: Sequence[int | str] = ()
) -> list[str]:
    """A run of ``first`` with a run of ``second`` whole at each of its step points (at those
    ``at`` names or numbers, if given: no run to find them), then the schedule's next run
    (`tests.support.interleavings`): the problems found (none: the mirror is a fresh
    tokenization of the source every time)."""
    places: list[tuple[int | str, str]] = [(where, str(where)) for where in at]
    chosen = "the points named"
    if not places:
        every = list(enumerate(points(spark, lake.copy(root / "points"), first)))
        places, chosen = sampled(every, f"{first} with {second}")
    problems = []
    for number, (where, named) in enumerate(places):
        copy = lake.copy(root / f"at{number}")
        outcome = interleave(spark, copy, first, second, where)
        finish(spark, copy)
        problems += [f"{first} with {second} at {named!r} ({outcome}; {chosen}): {p}" for p in check_fresh(spark, copy)]
    return problems


@pytest.mark.step_points
@pytest.mark.slow
@pytest.mark.parametrize(("first", "second"), list(itertools.product(KINDS, KINDS)))
def test_two_runs_interleaved_at_every_step_point_end_as_a_fresh_tokenization(
    spark: SparkSession, lake: Lake, tmp_path: Path, first: Kind, second: Kind
) -> None:
    """A run of ``first`` (a window, a full refresh, a re-size) with a whole run of ``second``
    at each of its step points, more source versions landing in between: each run commits, or
    commits nothing more and says so, and the schedule's next run leaves the mirror, quarantine,
    vocabulary and value counts as a fresh tokenization of the source."""
    assert _interleaved(spark, lake, tmp_path, first, second) == []


@pytest.mark.step_points
@pytest.mark.delta_spark
@pytest.mark.parametrize(("first", "second"), list(itertools.product(KINDS, KINDS)))
def test_two_runs_interleaved_at_every_step_point_end_as_a_fresh_tokenization_with_delta_spark(
    spark: SparkSession, lake: Lake, tmp_path: Path, first: Kind, second: Kind
) -> None:
    """The interleavings above, every commit through delta-spark (its MERGE, its idempotent
    writes)."""
    assert _interleaved(spark, lake, tmp_path, first, second) == []


@pytest.mark.slow  # make test-slow (CI): make test keeps to 10 minutes
def test_a_full_refresh_overtaken_by_a_window_commits_nothing_and_erases_nothing(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    """A refresh planned from one version, and a window that commits a later one in which an
    email the refresh's version does not hold comes back (only@x): the refresh's overwrite is
    refused rather than skipped, and it erases nothing of what the window's rows hold (it used
    to erase every key absent from its version before its commit)."""
    assert _interleaved(spark, lake, tmp_path, "refresh", "window", at=(0,)) == []


@pytest.mark.slow  # make test-slow (CI): make test keeps to 10 minutes
def test_a_window_stalled_before_its_erasure_never_erases_a_value_that_came_back(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    """A window that counted only@x out and stalls; meanwhile a later run finishes that window,
    erases only@x, and gives it a new id when it comes back: the stalled window, going on,
    erases nothing (it used to erase the value's new id)."""
    assert _interleaved(spark, lake, tmp_path, "window", "window", at=("counts committed",)) == []


@pytest.fixture(scope="module")
def ids_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A mirror of the integer ids alone: no vocabulary, no value counts."""
    return Lake.synced(spark, tmp_path_factory.mktemp("interleavings") / "ids", columns=["cid"])


def test_a_window_that_lost_the_mirror_commits_no_quarantine_rows_after_it(
    spark: SparkSession, ids_lake: Lake, tmp_path: Path
) -> None:
    """A window that set a row aside for the quarantine, and another planned from the same
    version that moved the mirror past it with the row valid again (and so set none aside):
    the quarantine commits with every window, so the first one's quarantine rows are refused
    too (they used to land, the key then in both tables)."""
    assert _interleaved(spark, ids_lake, tmp_path, "window", "window", at=("vocabularies appended",)) == []


@pytest.mark.step_points
@pytest.mark.slow
@pytest.mark.parametrize("second", KINDS)
def test_a_window_of_a_mirror_without_value_counts_interleaved_at_every_step_point_ends_as_a_fresh_tokenization(
    spark: SparkSession, ids_lake: Lake, tmp_path: Path, second: Kind
) -> None:
    """A window of a mirror of integer ids alone, whose windows have no commit of value counts
    before their quarantine's and mirror's (the first commit another run's check refuses), with
    each kind of run whole at each of its step points."""
    assert _interleaved(spark, ids_lake, tmp_path, "window", second) == []
