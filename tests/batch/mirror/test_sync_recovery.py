"""A sync killed between any two of its commits and run again: the mirror ends as a fresh
tokenization of its source, every row exactly once; and a sync on an object store."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import deltalake.transaction
import pyarrow as pa
import pytest
from deltalake import DeltaTable, Field, write_deltalake
from pyspark.sql import SparkSession

from spark_mlt.batch import TokenizeOptions, tokenize_table
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.batch.read.inspect import inspect_table
from spark_mlt.column import mlt_decode, token_layouts
from spark_mlt.errors import IncompleteWriteError
from spark_mlt.storage import StorageOptions, read_codecs, read_delta
from tests.support import s3 as local_s3
from tests.support.interleavings import (
    KINDS,
    RUNS,
    Kind,
    Lake,
    Stopped,
    at_point,
    check_fresh,
    finish,
    points,
    sampled,
    stop_and_rerun,
)
from tests.support.paths import ROOT, SUPPORT
from tests.support.sync_jobs import COLUMNS, SYNC

SYNC_JOBS = SUPPORT / "sync_jobs.py"
#: how a fresh batch run tokenizes the sync's columns (tests/support/sync_jobs.py)
FRESH = TokenizeOptions(p=13, n=3, input_format="delta", handle_invalid="quarantine")
CAPACITY = 13**3  # larger ids go to the quarantine
CDF = {"delta.enableChangeDataFeed": "true"}
#: the only row that holds it (k = 7) is deleted: the email leaves the vocabulary
ERASED = "only@example.com"


def _rows(ks: list[int], ids: list[int], emails: list[str]) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(ks, pa.int64()),
            "customer_id": pa.array(ids, pa.int64()),
            "email": pa.array(emails, pa.string()),
        }
    )


def _store(storage: StorageOptions | None) -> dict[str, str] | None:
    """delta-rs' own calls take a dict."""
    return None if storage is None else dict(storage)


def _insert(source: str, rows: list[tuple[int, int, str]]) -> None:
    ks, ids, emails = (list(c) for c in zip(*rows, strict=True))
    write_deltalake(source, _rows(ks, ids, emails), mode="append")


def _source(path: str, rows: list[tuple[int, int, str]], storage: StorageOptions | None = None) -> DeltaTable:
    ks, ids, emails = (list(c) for c in zip(*rows, strict=True))
    write_deltalake(path, _rows(ks, ids, emails), configuration=CDF, storage_options=_store(storage))
    return DeltaTable(path, storage_options=_store(storage))


def _run_sync(source: Path, output: Path, kill_at: str | None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SYNC_JOBS), str(source), str(output), *([kill_at] if kill_at else [])]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, env=env)


def _table(path: Path | str, storage: StorageOptions | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = DeltaTable(str(path), storage_options=_store(storage)).to_pyarrow_table().to_pylist()
    return rows


def _decoded(
    spark: SparkSession, path: str, storage: StorageOptions | None = None
) -> list[tuple[int, int | None, str | None]]:
    """Each row's key with its tokens decoded: the id, and the email through the vocabulary."""
    codecs = read_codecs(path, storage_options=storage)
    table = read_delta(spark, path, storage_options=storage)
    layouts = token_layouts(table.schema, codecs)
    ids = table.select(
        "k",
        *(mlt_decode(f"{c}_mlt", codecs[c], layout=layouts[c]).alias(c) for c in COLUMNS),
    ).collect()
    vocabulary = {row["id"]: row["key"] for row in _table(f"{path}_vocab/email", storage)}
    return sorted((row["k"], row["customer_id"], vocabulary.get(row["email"])) for row in ids)


def _without(rows: list[dict[str, Any]], column: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(v for c, v in sorted(row.items()) if c != column) for row in rows)


def _assert_fresh(
    spark: SparkSession, source: Path, output: Path, expected: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The mirror and its quarantine hold what a fresh tokenize of the source writes (the string
    tokens, whose ids depend on history, compared decoded); returns the mirror's rows, the
    quarantine's and the source's."""
    tokenize_table(spark, str(source), str(expected), COLUMNS, FRESH)
    mirror, fresh = _table(output), _table(expected)
    assert _without(mirror, "email_mlt") == _without(fresh, "email_mlt")
    assert _decoded(spark, str(output)) == sorted((r["k"], r["customer_id"], r["email"]) for r in fresh)
    quarantine = _table(f"{output}_quarantine")
    assert sorted(quarantine, key=lambda r: r["k"]) == sorted(_table(f"{expected}_quarantine"), key=lambda r: r["k"])
    latest = DeltaTable(str(source)).to_pyarrow_table().to_pylist()
    counts = {row["key"]: row["rows"] for row in _table(f"{output}_counts/email")}
    assert counts == Counter(row["email"] for row in latest)  # every row is held: in the mirror or the quarantine
    return mirror, quarantine, latest


@pytest.mark.slow
def test_a_sync_killed_at_each_point_and_restarted_ends_as_a_fresh_tokenization(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Synced once; then updates (one making an id invalid: to the quarantine), deletes (one of
    the only row holding an email) and inserts; then the sync is killed (SIGKILL) after the
    vocabulary appends, after the value counts' commit (the next run finishes that window
    first), after the erasure that follows the mirror's commit, after the quarantine's commit and
    before the mirror's, with more changes landing while it is down; then it runs to the end: the mirror and the
    quarantine are what a fresh tokenize of the source's latest version writes (the string
    tokens, whose ids depend on history, compared decoded), each source row exactly once, the
    erased email gone from the vocabulary, like every key no row holds (new100: appended by the
    killed run, its row deleted before the restart), and no id given twice."""
    source, output = tmp_path / "customers", tmp_path / "customers_mlt"
    first = [(k, 100 + k, f"u{k % 6}@example.com") for k in range(30)]
    first[7] = (7, 107, ERASED)
    first[29] = (29, 5_000, "u5@example.com")  # invalid from the start
    table = _source(str(source), first)
    assert sync_table(spark, str(source), str(output), COLUMNS, SYNC).rows_rejected == 1  # here: one JVM fewer

    def changes_a() -> None:
        table.update({"customer_id": "9000"}, predicate="k = 1")  # to the quarantine
        table.update({"email": "'new2@example.com'"}, predicate="k = 2")  # a new key
        table.delete("k = 7 OR k = 3")  # k = 7: the only row with ERASED
        _insert(str(source), [(100, 300, "new100@example.com"), (101, 7_777, "u1@example.com")])

    def changes_b() -> None:
        table.update({"customer_id": "50"}, predicate="k = 29")  # out of the quarantine
        table.delete("k = 100")  # its email may be in the vocabulary already
        _insert(str(source), [(102, 302, "u2@example.com")])

    def changes_c() -> None:
        table.update({"email": "'u5@example.com'"}, predicate="k = 4")
        table.delete("k = 101")  # inserted to the quarantine, and gone
        _insert(str(source), [(103, 6_000, "new103@example.com")])

    def changes_d() -> None:
        table.update({"customer_id": "200"}, predicate="k = 5")
        table.delete("k = 6")

    changes_a()

    def changes_e() -> None:
        table.update({"email": "'u3@example.com'"}, predicate="k = 8")
        _insert(str(source), [(105, 305, "new105@example.com")])

    for kill_at, more in (
        ("vocabulary", changes_b),
        ("counts", changes_e),
        ("erasure", changes_c),
        ("quarantine", changes_d),
        ("before-commit", lambda: _insert(str(source), [(104, 304, "u0@example.com")])),
    ):
        killed = _run_sync(source, output, kill_at)
        assert killed.returncode == -signal.SIGKILL, f"{kill_at}: {killed.stderr[-3000:]}"
        more()  # lands while the sync is down
    finished = _run_sync(source, output, None)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert json.loads(finished.stdout.splitlines()[-1])["source_version"] == DeltaTable(str(source)).version()

    mirror, quarantine, latest = _assert_fresh(spark, source, output, tmp_path / "fresh")
    held = Counter(row["k"] for row in mirror + quarantine)
    assert held == Counter(row["k"] for row in latest)  # every source row exactly once
    assert {row["k"] for row in quarantine} == {row["k"] for row in latest if row["customer_id"] >= CAPACITY}
    vocabulary = _table(f"{output}_vocab/email")
    keys = [row["key"] for row in vocabulary if row["key"] is not None]
    assert ERASED not in keys
    assert len({row["id"] for row in vocabulary}) == len(vocabulary)  # no id given twice
    assert len(set(keys)) == len(keys)
    assert set(keys) == {row["email"] for row in latest}  # no key that no row holds


def _start_sync(source: Path, output: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, str(SYNC_JOBS), str(source), str(output)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_syncs_racing_in_separate_processes_while_versions_land_end_as_a_fresh_tokenization(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Rounds of two syncs of one mirror started a moment apart (a scheduled run beside a retry),
    each round with source versions landing before, between and after their starts: each run
    commits its window or, planned from a version the other moved on, commits nothing and says
    so; a last run carries on from wherever the winners left the mirror, and the mirror, its
    quarantine and its vocabulary are what a fresh tokenize of the source writes, no id given
    twice."""
    source, output = tmp_path / "customers", tmp_path / "customers_mlt"
    table = _source(str(source), [(k, 100 + k, f"u{k % 5}@example.com") for k in range(20)])
    assert sync_table(spark, str(source), str(output), COLUMNS, SYNC).source_version == 0
    outcomes: Counter[str] = Counter()
    for round_ in range(3):
        base = 1000 * (round_ + 1)
        _insert(str(source), [(base, 300 + round_, f"r{round_}@example.com")])
        first = _start_sync(source, output)
        table.update({"email": f"'moved{round_}@example.com'"}, predicate=f"k = {round_}")
        table.update({"customer_id": str(9000 + round_)}, predicate=f"k = {10 + round_}")  # to the quarantine
        second = _start_sync(source, output)
        table.delete(f"k = {5 + round_}")
        _insert(str(source), [(base + 1, 400 + round_, f"u{round_}@example.com")])
        for run in (first, second):
            _, err = run.communicate(timeout=600)
            if run.returncode == 0:
                outcomes["committed"] += 1
            else:
                assert "ConcurrentWriteError" in err, err[-3000:]
                assert "nothing of it was committed" in err, err[-3000:]
                outcomes["refused"] += 1
    last = _run_sync(source, output, None)
    assert last.returncode == 0, last.stderr[-3000:]
    assert json.loads(last.stdout.splitlines()[-1])["source_version"] == DeltaTable(str(source)).version()

    _, _, latest = _assert_fresh(spark, source, output, tmp_path / "fresh")
    vocabulary = _table(f"{output}_vocab/email")
    keys = [row["key"] for row in vocabulary if row["key"] is not None]
    assert len({row["id"] for row in vocabulary}) == len(vocabulary)  # no id given twice
    assert len(set(keys)) == len(keys)
    assert set(keys) == {row["email"] for row in latest}
    assert outcomes["committed"] >= 3, outcomes  # each round: at least one run lands


@pytest.mark.slow  # a minute of make test: CI runs it after (make test-slow) and on every full compat line
@pytest.mark.skipif(
    not hasattr(deltalake.transaction, "RemoveAction"),
    reason="a jar-free sync rewrites files, which needs deltalake 1.6.6 (remove actions)",
)
@pytest.mark.compat  # like the stream's S3 test: the s3a settings differ between lines
def test_a_sync_keeps_its_mirror_on_s3(spark: SparkSession, s3: local_s3.MotoServer) -> None:
    """Source and mirror on the local S3 server: a first sync, an update and a delete, a second
    sync; the mirror holds the source's rows with their tokens."""
    bucket, storage = s3.bucket("sync"), local_s3.storage_options()
    source, output = f"s3://{bucket}/customers", f"s3://{bucket}/customers_mlt"
    table = _source(source, [(1, 11, "a@example.com"), (2, 12, "b@example.com"), (3, 13, "c@example.com")], storage)
    options = SyncOptions(p=13, n=3, handle_invalid="quarantine", key=("k",), storage_options=storage)
    first = sync_table(spark, source, output, COLUMNS, options)
    assert (first.rows_out, first.source_version) == (3, 0)
    table.update({"customer_id": "21", "email": "'d@example.com'"}, predicate="k = 2")
    table.delete("k = 3")
    second = sync_table(spark, source, output, COLUMNS, options)
    assert (second.source_version, second.rows_deleted, second.erased) == (2, 1, {"email": 2})
    rows = sorted((r["k"], r["customer_id"], r["email"]) for r in _table(source, storage))
    assert rows == [(1, 11, "a@example.com"), (2, 21, "d@example.com")]
    assert sorted((r["k"], r["customer_id"], r["email"]) for r in _table(output, storage)) == rows
    assert _decoded(spark, output, storage) == rows


# -- a run stopped for good at each step point, then run again ------------------------------------


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A source and its mirror, synced once: copied by each test that changes them."""
    return Lake.synced(spark, tmp_path_factory.mktemp("stops") / "synced")


def _stopped(spark: SparkSession, lake: Lake, root: Path, kind: Kind) -> list[str]:
    """A run of ``kind`` stopped for good at each of its step points, then run again, then the
    schedule's next run: the problems found (none: a fresh tokenization every time)."""
    problems = []
    places, chosen = sampled(list(enumerate(points(spark, lake.copy(root / "points"), kind))), kind)
    for index, point in places:
        copy = lake.copy(root / f"at{index}")
        stop_and_rerun(spark, copy, kind, index)
        finish(spark, copy)
        problems += [f"{kind} stopped at {point!r} ({chosen}): {problem}" for problem in check_fresh(spark, copy)]
    return problems


@pytest.mark.step_points
@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_run_stopped_at_each_step_point_and_run_again_ends_as_a_fresh_tokenization(
    spark: SparkSession, lake: Lake, tmp_path: Path, kind: Kind
) -> None:
    """A window, a full refresh or a re-size stopped for good between any two of its commits
    (as a kill stops it: no handler runs), more source versions landing, then run again: the
    mirror, quarantine, vocabulary and value counts are a fresh tokenization of the source."""
    assert _stopped(spark, lake, tmp_path, kind) == []


@pytest.mark.step_points
@pytest.mark.delta_spark
@pytest.mark.parametrize("kind", KINDS)
def test_a_run_stopped_at_each_step_point_and_run_again_ends_as_a_fresh_tokenization_with_delta_spark(
    spark: SparkSession, lake: Lake, tmp_path: Path, kind: Kind
) -> None:
    """The stops above, every commit through delta-spark."""
    assert _stopped(spark, lake, tmp_path, kind) == []


def _stop() -> None:
    raise Stopped


@pytest.mark.slow  # make test-slow (CI): make test keeps to 10 minutes
def test_a_resize_stopped_between_its_two_commits_is_refused_by_windows_until_it_is_run_again(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    """Jar-free, a re-size is two commits: the mirror anew (empty, its new codecs) and its rows.
    Stopped between them, the mirror records no source version: a window refuses it, saying how
    to complete it (it used to apply its changes onto the empty mirror), and the re-size run
    again completes it."""
    copy = lake.copy(tmp_path / "lake")
    copy.change(0)
    with at_point("re-size: the table anew", _stop), pytest.raises(Stopped):
        copy.run(spark, "resize")
    assert _table(copy.mirror) == []
    state = inspect_table(copy.mirror)["sync"]
    assert (state["source_version"], state["next_window"][:5]) == (-1, "none:")
    with pytest.raises(IncompleteWriteError, match=r"holds no source version.*--full-refresh --resize"):
        copy.run(spark, "window")
    copy.run(spark, "resize")
    finish(spark, copy)
    assert check_fresh(spark, copy) == []


def test_a_resize_whose_rows_cannot_commit_says_what_landed(spark: SparkSession, lake: Lake, tmp_path: Path) -> None:
    """Another writer changes the mirror's schema between a jar-free re-size's two commits: the
    re-size's error says its first commit landed and how to complete it (it used to say that
    nothing of it was committed), and a window refuses the mirror."""
    copy = lake.copy(tmp_path / "lake")
    copy.change(0)

    def other_writer() -> None:
        DeltaTable(copy.mirror).alter.add_columns(Field("note", "string"))

    with (
        at_point("re-size: the table anew", other_writer),
        pytest.raises(
            IncompleteWriteError, match=r"committed its first step, version \d+ .* but not its rows"
        ) as raised,
    ):
        copy.run(spark, "resize")
    assert "nothing of" not in str(raised.value)
    with pytest.raises(IncompleteWriteError, match="holds no source version"):
        copy.run(spark, "window")


def _refreshed_after_damage(spark: SparkSession, lake: Lake, root: Path) -> None:
    """A mirror that holds its source's latest version, damaged (a row deleted by hand, another
    changed), then refreshed, then re-sized (another p): each rewrites it (they used to be
    skipped as already held), and the re-size's codec is the new one."""
    copy = lake.copy(root / "lake")
    copy.change(0)
    copy.run(spark, "window")
    DeltaTable(copy.mirror).delete("k = 3")
    DeltaTable(copy.mirror).update({"cid": "777"}, predicate="k = 4")
    assert check_fresh(spark, copy) != []
    copy.run(spark, "refresh")
    assert check_fresh(spark, copy) == []
    sync_table(spark, copy.source, copy.mirror, ["cid", "email"], dataclasses.replace(RUNS["resize"], p=17))
    assert {column: codec.p for column, codec in read_codecs(copy.mirror).items()} == {"cid": 17, "email": 17}
    assert check_fresh(spark, copy) == []


@pytest.mark.slow  # make test-slow (CI): make test keeps to 10 minutes
def test_a_full_refresh_or_resize_of_an_up_to_date_mirror_rewrites_it(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    _refreshed_after_damage(spark, lake, tmp_path)


@pytest.mark.delta_spark
def test_a_full_refresh_or_resize_of_an_up_to_date_mirror_rewrites_it_with_delta_spark(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    """The same with delta-spark, whose idempotent writes would skip a version the table holds."""
    _refreshed_after_damage(spark, lake, tmp_path)
