"""A tokenized mirror that follows its source Delta table (``spark-mlt sync``): the change data
feed read from the log, each key's last change applied, erasure, gaps and refusals; the cases of
a whole sync on both backends (the ``backend`` fixture: delta-spark's in a ``delta_spark`` run),
the jar-free path's own (its key checks, file ranges, value counts) on delta-rs.

The sources are written and changed through delta-rs (``write_deltalake``, ``DeltaTable``'s DML),
with the change data feed on; the tables written are read back through delta-rs too (no Spark
job), so that the Spark work of a test is its syncs'.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, Field, write_deltalake
from pyspark.sql import SparkSession

import spark_mlt.batch.mirror.apply as apply_module
import spark_mlt.batch.mirror.window as window_module
import spark_mlt.storage.counts as counts_module
import spark_mlt.storage.keys as keys_module
from spark_mlt import MLTError, SourceError
from spark_mlt.batch import DecodeOptions, TokenizeOptions, decode_table
from spark_mlt.batch.cli import main
from spark_mlt.batch.job.report import JobReport
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.batch.mirror.tables import COUNTS_SUFFIX, SYNC_APP_PREFIX
from spark_mlt.batch.write.tokenize import tokenize_table
from spark_mlt.storage.changes import ChangeFeedError, check_feed, feed_rows, read_changes
from spark_mlt.storage.replace import replace_keys
from spark_mlt.storage.vocabulary import check_vocabulary
from tests.support.backends import on_backend
from tests.support.paths import DATA
from tests.support.settings import session_settings

CDF = {"delta.enableChangeDataFeed": "true"}
#: Fixed codecs (13**3 = 2197 ids), so that a mirror and a fresh tokenize share them.
P, N = 13, 3
COLUMNS = ["cid", "email"]
FRESH = TokenizeOptions(p=P, n=N, input_format="delta", handle_invalid="quarantine")

Row = tuple[int | None, str | None, int | None]


def _customers(rows: Sequence[Row]) -> pa.Table:
    """Rows of ``(k, email, cid)``."""
    k, email, cid = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {"k": pa.array(k, pa.int64()), "email": pa.array(email, pa.string()), "cid": pa.array(cid, pa.int64())}
    )


def _create(path: Path, rows: Sequence[Row], *, cdf: bool = True) -> str:
    write_deltalake(str(path), _customers(rows), configuration=CDF if cdf else None)
    return str(path)


def _append(path: str, rows: Sequence[Row], mode: str = "append") -> None:
    write_deltalake(path, _customers(rows), mode=mode)  # type: ignore[call-overload]


def _version(path: str) -> int:
    return DeltaTable(path).version()


def _read(path: str | Path, *, drop: Sequence[str] = ()) -> list[tuple[Any, ...]]:
    """A table's rows (columns in name order, less ``drop``), sorted, read through delta-rs."""
    table = DeltaTable(str(path)).to_pyarrow_table()
    names = sorted(n for n in table.column_names if n not in drop)
    return sorted((tuple(row[n] for n in names) for row in table.to_pylist()), key=repr)


def _last_commit(path: str) -> list[dict[str, Any]]:
    entry = Path(path) / "_delta_log" / f"{_version(path):020d}.json"
    return [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]


def _app_id(source: str) -> str:
    return SYNC_APP_PREFIX + DeltaTable(source).metadata().id


# -- the change reader ---------------------------------------------------------------------------


def _feed(spark: SparkSession, path: str, after: int, until: int) -> Counter[tuple[Any, ...]]:
    """``read_changes``'s rows, as a multiset of (column, value) pairs."""
    rows = read_changes(spark, path, after, until, backend="delta-rs").collect()
    return Counter(tuple(sorted(row.asDict().items())) for row in rows)


def _delta_rs_feed(path: str, after: int, until: int) -> Counter[tuple[Any, ...]]:
    """delta-rs's own change data feed of the same commits, in the same form."""
    table = pa.table(DeltaTable(path).load_cdf(starting_version=after + 1, ending_version=until))
    rows = table.drop_columns(["_commit_timestamp"]).to_pylist()
    return Counter(tuple(sorted({**row, "_commit_version": int(row["_commit_version"])}.items())) for row in rows)


# not compat: its reference, delta-rs's own feed, comes as Arrow string views, which the oldest
# pyarrow we support (14) cannot read; the deletion-vector case below and the delta-spark
# differential tests cover the reader on every line
def test_the_jar_free_change_reader_returns_the_rows_delta_rs_feed_returns(spark: SparkSession, tmp_path: Path) -> None:
    """Updates, deletes, a merge, an append and an overwrite, on a plain source and on one
    partitioned by the column an update changes (the key moves between partitions)."""
    plain = _create(tmp_path / "plain", [(k, f"e{k % 3}", 100 + k) for k in range(6)])
    write_deltalake(
        str(tmp_path / "parted"),
        pa.table({"k": pa.array(range(6), pa.int64()), "part": [f"p{k % 2}" for k in range(6)]}),
        partition_by=["part"],
        configuration=CDF,
    )
    parted = str(tmp_path / "parted")
    for path, moved in ((plain, {"email": "'moved'"}), (parted, {"part": "'p9'"})):
        DeltaTable(path).update(predicate="k = 1", updates=moved)  # v1: the partitioned key moves to p9
        DeltaTable(path).delete("k = 2 OR k = 5")  # v2
        new = _customers([(3, "upd", 3), (7, "new", 7)])
        if path == parted:
            new = pa.table({"k": pa.array([3, 7], pa.int64()), "part": ["p0", "p1"]})  # 3 moves from p1 to p0
        merge = DeltaTable(path).merge(new, "t.k = s.k", source_alias="s", target_alias="t")
        merge.when_matched_update_all().when_not_matched_insert_all().execute()  # v3: an upsert
        more = (
            _customers([(8, "x", 8)]) if path == plain else pa.table({"k": pa.array([8], pa.int64()), "part": ["p1"]})
        )
        write_deltalake(path, more, mode="append")  # v4
        DeltaTable(path).delete("k = 8")  # v5: a whole file's only row
        last = _customers([(0, "o", 0), (9, "n", 9)])
        if path == parted:
            last = pa.table({"k": pa.array([0, 9], pa.int64()), "part": ["p0", "p9"]})
        write_deltalake(path, last, mode="overwrite")  # v6
        assert _version(path) == 6
        for after, until in ((0, 6), (2, 4)):
            expected = _delta_rs_feed(path, after, until)
            assert expected, (path, after, until)
            assert _feed(spark, path, after, until) == expected, (path, after, until)
            assert feed_rows(check_feed(path, after, until)) == expected.total(), (path, after, until)


@pytest.mark.compat  # deletion vectors: the reader numbers the rows of a file with _metadata.row_index
def test_a_delete_by_deletion_vectors_reads_as_the_deleted_rows_only(spark: SparkSession, tmp_path: Path) -> None:
    """The zoo's ``cdf`` table (delta-spark 4.4): ids 0..99 inserted at version 1, ``DELETE
    WHERE id % 4 = 0`` by deletion vectors at version 2, no change files."""
    path = tmp_path / "cdf"
    shutil.copytree(DATA / "zoo" / "tables" / "cdf", path)
    deletes = read_changes(spark, str(path), 1, 2, backend="delta-rs").collect()
    assert sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in deletes) == [
        (i, "delete", 2) for i in range(0, 100, 4)
    ]
    both = Counter(
        (r["id"], r["_change_type"], r["_commit_version"])
        for r in read_changes(spark, str(path), 0, 2, backend="delta-rs").collect()
    )
    assert both == Counter([(i, "insert", 1) for i in range(100)] + [(i, "delete", 2) for i in range(0, 100, 4)])
    # counted from the footers (version 1) and the deletion vector's rows (version 2), no job
    assert feed_rows(check_feed(str(path), 0, 2)) == 125
    assert feed_rows(check_feed(str(path), 1, 2)) == 25


# -- the mirror ----------------------------------------------------------------------------------


def _sync(spark: SparkSession, source: str, mirror: str, columns: Sequence[str] = COLUMNS, **options: Any) -> JobReport:
    """A sync of ``columns`` (an id column without a vocabulary: fewer Spark jobs)."""
    opts = SyncOptions(**{"key": ("k",), "p": P, "n": N, "handle_invalid": "quarantine", **options})
    return sync_table(spark, source, mirror, columns, opts)


@dataclass
class _Step:
    """What one sync of the customers' scenario left: its report, the mirror's and a fresh
    tokenize's rows and quarantines, the source's rows, the decoded mirror's mismatches and the
    email vocabulary."""

    report: JobReport
    mirror: list[tuple[Any, ...]]
    fresh: list[tuple[Any, ...]]
    quarantine: list[tuple[Any, ...]]
    fresh_quarantine: list[tuple[Any, ...]]
    kept: list[tuple[Any, ...]]
    source: list[tuple[Any, ...]]
    mismatches: int | None
    vocabulary: dict[int, str | None]
    vocabulary_path: str


def _vocabulary(path: str) -> dict[int, str | None]:
    return {row["id"]: row["key"] for row in DeltaTable(path).to_pyarrow_table().to_pylist()}


def _step(spark: SparkSession, report: JobReport, source: str, mirror: str, fresh: str | None) -> _Step:
    """The state after a sync (with a fresh tokenize of the source into ``fresh``)."""
    if fresh is not None:
        tokenize_table(spark, source, fresh, COLUMNS, FRESH)
    kept = [r[:3] for r in _read(mirror, drop=["cid_mlt", "email_mlt"])]
    rejected = [r[:3] for r in _read(f"{mirror}_quarantine", drop=["mlt_reason"])]
    return _Step(
        report,
        _read(mirror, drop=["email_mlt"]),  # string tokens aside: their ids depend on the vocabulary's history
        _read(fresh, drop=["email_mlt"]) if fresh else [],
        _read(f"{mirror}_quarantine"),
        _read(f"{fresh}_quarantine") if fresh else [],
        sorted([*kept, *rejected], key=repr),
        _read(source),
        decode_table(spark, mirror, DecodeOptions(verify=True)).mismatches if fresh else None,
        _vocabulary(f"{mirror}_vocab/email"),
        f"{mirror}_vocab/email",
    )


@pytest.fixture(
    scope="module",
    params=[
        "delta-rs, small windows",
        pytest.param("delta-rs, large windows", marks=pytest.mark.slow),
        pytest.param("delta-spark, small windows", marks=pytest.mark.delta_spark),
    ],
)
def customers(
    request: pytest.FixtureRequest, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> list[_Step]:
    """A customers table synced three times: created; a window of updates, deletes, an upsert,
    an insert deleted again, a double update, an id leaving the codec's range and one coming
    back; a window that overwrites the table (and a sync with nothing new). On each backend;
    with "large windows", each window takes the path of a window too large for the driver: its
    changes checked and its keys searched in Spark, and joined by a shuffle (jar-free: the path
    is the backends' common part)."""
    backend, windows = request.param.split(", ")
    with on_backend(backend, spark), pytest.MonkeyPatch.context() as patch:
        if windows == "large windows":
            patch.setattr(window_module, "LOCAL_WINDOW_ROWS", 0)
            patch.setattr(keys_module, "BROADCAST_KEYS", 0)
        return _customer_steps(spark, tmp_path_factory.mktemp("customers"))


def _customer_steps(spark: SparkSession, tmp: Path) -> list[_Step]:
    source, mirror = str(tmp / "customers"), str(tmp / "mirror")
    _create(
        tmp / "customers",
        [
            (0, "a@x", 100),
            (1, "b@x", 101),
            (2, "a@x", 102),
            (3, "c@x", 103),
            (4, "e@x", 104),
            (5, "d@x", 105),
            (6, "f@x", 106),
            (7, "g@x", 5000),
        ],
    )
    steps = [_step(spark, _sync(spark, source, mirror), source, mirror, None)]

    DeltaTable(source).update(predicate="k = 1", updates={"email": "'c@x'"})  # v1: no row holds b@x now
    DeltaTable(source).update(predicate="k = 3", updates={"cid": "9000"})  # v2: out of the codec's range
    DeltaTable(source).delete("k = 0 OR k = 4")  # v3: 2 holds a@x still; no row holds e@x
    upsert = DeltaTable(source).merge(
        _customers([(5, "d@x", 205), (8, "f@x", 108), (7, "g@x", 107)]), "t.k = s.k", source_alias="s", target_alias="t"
    )
    upsert.when_matched_update_all().when_not_matched_insert_all().execute()  # v4: 7 comes back in range
    _append(source, [(9, "d@x", 109)])  # v5
    DeltaTable(source).delete("k = 9")  # v6: inserted and deleted in one window, never in the mirror
    DeltaTable(source).update(predicate="k = 2", updates={"cid": "202"})  # v7
    DeltaTable(source).update(predicate="k = 2", updates={"cid": "302"})  # v8
    steps.append(_step(spark, _sync(spark, source, mirror), source, mirror, str(tmp / "fresh8")))

    overwrite = [(1, "c@x", 101), (2, "a@x", 402), (3, "c@x", 103), (6, "f@x", 106), (10, "z@x", 6000)]
    _append(source, [*overwrite, (11, "y@x", 111)], "overwrite")  # v9: 5, 7, 8 gone; 3 back in range
    steps.append(_step(spark, _sync(spark, source, mirror), source, mirror, str(tmp / "fresh9")))

    tables = [mirror, f"{mirror}_quarantine", f"{mirror}_vocab/email"]
    versions = [_version(t) for t in tables]
    again = _sync(spark, source, mirror)
    assert [_version(t) for t in tables] == versions  # nothing committed
    steps.append(_step(spark, again, source, mirror, None))
    return steps


def test_the_mirror_equals_a_fresh_tokenize_at_each_source_version(customers: list[_Step]) -> None:
    """After each window the mirror and its quarantine hold what a fresh tokenize of the source
    holds, and decode back to the source's rows; a sync with nothing new commits nothing."""
    created, window, overwritten, again = customers
    assert (created.report.source_version, created.report.rows_out, created.report.rows_rejected) == (0, 7, 1)
    assert created.kept == created.source
    for step in (window, overwritten):
        assert step.mirror == step.fresh
        assert step.quarantine == step.fresh_quarantine
        assert step.mismatches == 0
        assert step.kept == step.source
    report = window.report  # 1, 2, 5, 7, 8 in the mirror, 3 in the quarantine; 0 and 4 deleted
    assert (report.source_version, report.rows_out, report.rows_rejected, report.rows_deleted) == (8, 5, 1, 2)
    report = overwritten.report  # every row rewritten; 5, 7, 8 deleted; 10 in the quarantine
    assert (report.source_version, report.rows_out, report.rows_rejected, report.rows_deleted) == (9, 5, 1, 3)
    assert (again.report.source_version, again.report.write, again.report.rows_in) == (9, None, 0)
    assert (again.mirror, again.quarantine) == (overwritten.mirror, overwritten.quarantine)


def test_an_email_no_row_holds_leaves_the_vocabulary_and_its_id_is_never_given_again(
    spark: SparkSession, customers: list[_Step]
) -> None:
    """Erasure: an email no row holds any more keeps its id, keyless; an email another row
    still holds stays; a new email gets an id after every id ever given (the erased ones')."""
    created, window, overwritten, _ = customers
    ids = {key: id for id, key in created.vocabulary.items()}
    assert window.report.erased == {"email": 2}
    assert window.vocabulary == {**created.vocabulary, ids["b@x"]: None, ids["e@x"]: None}
    assert max(created.vocabulary) == ids["e@x"]  # the largest id is an erased one's
    assert overwritten.report.erased == {"email": 2}  # d@x and g@x; f@x is 6's still
    new = {key: id for id, key in overwritten.vocabulary.items() if id not in window.vocabulary}
    assert set(new) == {"y@x", "z@x"}
    assert min(new.values()) == max(created.vocabulary) + 1
    assert overwritten.vocabulary == {
        **window.vocabulary,
        ids["d@x"]: None,
        ids["g@x"]: None,
        **{i: k for k, i in new.items()},
    }
    check_vocabulary(spark, overwritten.vocabulary_path)


# -- gaps in the feed ----------------------------------------------------------------------------


def _refused_at(error: pytest.ExceptionInfo[ChangeFeedError], version: int) -> None:
    assert error.value.version == version
    assert f"version {version}" in str(error.value)
    assert "--full-refresh" in str(error.value)


def _copy(source: str, to: Path) -> str:
    shutil.copytree(source, to)
    return str(to)


def test_the_feed_refuses_a_range_it_cannot_cover(tmp_path: Path) -> None:
    """A column added, the feed turned off, or off at the version held and not turned on by the
    next, the log cleaned up past the version held, a file vacuumed: ``check_feed`` names the
    first version it cannot cover and the way forward, before any row is read. Another property
    set is no gap."""
    source = _create(tmp_path / "customers", [(1, "a@x", 1), (2, "b@x", 2)])

    appended = _copy(source, tmp_path / "appended")  # a column added by an append that merges schemas
    more = _customers([(3, "c@x", 3)]).append_column("city", pa.array(["x"]))
    write_deltalake(appended, more, mode="append", schema_mode="merge")
    with pytest.raises(ChangeFeedError) as error:
        check_feed(appended, 0, 1)
    _refused_at(error, 1)

    properties = _copy(source, tmp_path / "properties")  # another property set: no gap, no change
    DeltaTable(properties).alter.set_table_properties({"delta.logRetentionDuration": "interval 60 days"})
    assert check_feed(properties, 0, 1).changed_versions == []

    off = _copy(source, tmp_path / "off")  # the feed turned off for a commit, then on again
    DeltaTable(off).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    _append(off, [(3, "c@x", 3)])
    DeltaTable(off).alter.set_table_properties(CDF)
    with pytest.raises(ChangeFeedError) as error:
        check_feed(off, 0, 3)
    _refused_at(error, 1)

    late = _create(tmp_path / "late", [(1, "a@x", 1)], cdf=False)  # off at the version held
    _append(late, [(2, "b@x", 2)])  # v1: not recorded
    DeltaTable(late).alter.set_table_properties(CDF)  # v2
    DeltaTable(late).update(predicate="k = 1", updates={"cid": "2"})  # v3
    with pytest.raises(ChangeFeedError) as error:
        check_feed(late, 0, 3)
    _refused_at(error, 1)
    assert check_feed(late, 1, 3).changed_versions == [3]  # turned on by the version after the one held

    cleaned = _copy(source, tmp_path / "cleaned")  # the log cleaned up to a checkpoint, the version held too
    _append(cleaned, [(3, "c@x", 3)])
    _append(cleaned, [(4, "d@x", 4)])
    DeltaTable(cleaned).create_checkpoint()
    for version in (0, 1):
        (Path(cleaned) / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(ChangeFeedError) as error:
        check_feed(cleaned, 0, 2)
    _refused_at(error, 1)

    vacuumed = _copy(source, tmp_path / "vacuumed")  # the file version 1 added, which version 2 removed
    _append(vacuumed, [(3, "c@x", 3)])
    _append(vacuumed, [(1, "a@x", 1)], "overwrite")
    assert DeltaTable(vacuumed).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(ChangeFeedError) as error:
        check_feed(vacuumed, 0, 2)
    _refused_at(error, 1)


@pytest.mark.usefixtures("backend")
def test_a_gap_stops_the_sync_until_a_full_refresh_rebuilds_the_mirror(spark: SparkSession, tmp_path: Path) -> None:
    """A column added, a log entry gone: the sync stops at the version; a full refresh rebuilds
    the mirror and its quarantine in one commit each, or, when the source's columns changed,
    refuses before it writes anything (its overwrite keeps the mirror's schema)."""
    source = _create(tmp_path / "customers", [(1, "a@x", 1), (2, "b@x", 5000)])
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror)  # holds version 0 of the source, and of each copy below (same table id)

    schema = _copy(source, tmp_path / "schema")
    DeltaTable(schema).update(predicate="k = 2", updates={"cid": "2"})
    DeltaTable(schema).alter.add_columns([Field("city", "string", nullable=True)])
    with pytest.raises(ChangeFeedError) as error:
        _sync(spark, schema, mirror)
    _refused_at(error, 2)

    gone = _copy(source, tmp_path / "gone")  # a log entry cleaned up (a checkpoint after it keeps it readable)
    _append(gone, [(3, "c@x", 3)])
    DeltaTable(gone).update(predicate="k = 2", updates={"cid": "2"})  # back in the codec's range
    DeltaTable(gone).create_checkpoint()
    (Path(gone) / "_delta_log" / f"{1:020d}.json").unlink()
    with pytest.raises(ChangeFeedError) as error:
        _sync(spark, gone, mirror)
    _refused_at(error, 1)

    tables = [mirror, f"{mirror}_quarantine", f"{mirror}_vocab/email"]
    versions = [_version(t) for t in tables]
    with pytest.raises(MLTError, match=r"columns changed .* k int64, email string, cid int64, city string\)"):
        _sync(spark, schema, mirror, full_refresh=True)
    assert [_version(t) for t in tables] == versions  # refused before anything is written

    refreshed = _sync(spark, gone, mirror, full_refresh=True)
    assert refreshed.source_version == 2
    assert [_version(t) for t in tables[:2]] == [versions[0] + 1, versions[1] + 1]  # one commit each
    tokenize_table(spark, gone, str(tmp_path / "fresh"), COLUMNS, FRESH)
    assert _read(mirror, drop=["email_mlt"]) == _read(tmp_path / "fresh", drop=["email_mlt"])
    assert _read(f"{mirror}_quarantine") == []  # 2 came back in range
    assert _sync(spark, gone, mirror).write is None  # the mirror holds the latest version now


# -- the key -------------------------------------------------------------------------------------


def test_a_small_windows_key_check_reads_the_mirrors_and_quarantines_held_keys_on_the_driver(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a quarantine that holds rows, a small window's check counts the keys both tables
    hold from their files' key columns (a pandas frame, no Spark job): keys move between the
    two, and an insert of a key the quarantine holds is refused as one the mirror holds."""
    source = _create(tmp_path / "customers", [(1, "a@x", 1), (2, "b@x", P**N)])  # 2 quarantined
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror, ["cid"])
    checked: list[str] = []
    original = apply_module.check_changes

    def recording(window: Any, held: Any, *args: Any, **kwargs: Any) -> int:
        checked.append(type(held).__module__.split(".")[0])
        return int(original(window, held, *args, **kwargs))

    monkeypatch.setattr(apply_module, "check_changes", recording)
    DeltaTable(source).update(predicate="k = 2", updates={"cid": "2"})  # v1: 2 back in range
    DeltaTable(source).update(predicate="k = 1", updates={"cid": str(P**N)})  # v2: 1 out of it
    report = _sync(spark, source, mirror, ["cid"])
    assert (report.rows_out, report.rows_rejected) == (1, 1)
    assert sorted((k, cid) for cid, _, k in _read(mirror, drop=["cid_mlt"])) == [(2, 2)]
    assert [r[2] for r in _read(f"{mirror}_quarantine", drop=["mlt_reason"])] == [1]
    _append(source, [(1, "again@x", 5)])  # v3: a second row of key 1, which the quarantine holds
    with pytest.raises(SourceError, match=r"version 3 of .* an insert of a key the mirror holds \(k=1\)"):
        _sync(spark, source, mirror, ["cid"])
    assert checked == ["pandas", "pandas"]


@pytest.mark.usefixtures("backend")
def test_a_key_that_is_not_the_sources_primary_key_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    source = _create(tmp_path / "customers", [(1, "a@x", 1), (2, "b@x", 2)])
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror, ["cid"])
    _append(source, [(1, "again@x", 3)])  # v1: a second row of key 1
    with pytest.raises(SourceError, match=r"version 1 of .* an insert of a key the mirror holds \(k=1\)"):
        _sync(spark, source, mirror, ["cid"])
    with pytest.raises(SourceError, match=r"version 1 of .* has 2 rows with the key k=1"):
        _sync(spark, source, mirror, ["cid"], full_refresh=True)
    DeltaTable(source).delete("k = 1")
    _append(source, [(None, "null@x", 4)])  # v3: a row without a key
    with pytest.raises(SourceError, match=r"version 3 of .* has a row whose key \['k'\] is null"):
        _sync(spark, source, mirror, ["cid"])
    with pytest.raises(SourceError, match=r"version 3 of .* has a row whose key \['k'\] is null"):
        _sync(spark, source, mirror, ["cid"], full_refresh=True)
    assert _read(mirror, drop=["cid_mlt", "email_mlt"]) == [(1, "a@x", 1), (2, "b@x", 2)]  # as at version 0


@pytest.mark.usefixtures("backend")
def test_an_invalid_id_fails_a_window_under_error_and_commits_nothing_until_it_is_fixed(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Under ``handle_invalid="error"`` a window's resulting rows are counted from its collected
    changes and tokenized by the rewrite itself: an id out of the codec's range fails it with
    the id named and nothing committed (no file left behind); once fixed, the next window
    applies every version, a key updated twice with its last row."""
    source = _create(tmp_path / "customers", [(k, f"{k}@x", k) for k in range(6)])
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror, ["cid"], handle_invalid="error")
    version, files = _version(mirror), sorted(p.name for p in Path(mirror).iterdir())
    DeltaTable(source).update(predicate="k = 1", updates={"cid": "11"})  # v1
    DeltaTable(source).update(predicate="k = 1", updates={"cid": "21"})  # v2: overtakes v1's row
    DeltaTable(source).update(predicate="k = 2", updates={"cid": str(P**N)})  # v3: one past the range
    DeltaTable(source).delete("k = 3")  # v4
    _append(source, [(6, "6@x", 6)])  # v5
    with pytest.raises(Exception, match=f"{P**N}"):
        _sync(spark, source, mirror, ["cid"], handle_invalid="error")
    assert _version(mirror) == version
    assert sorted(p.name for p in Path(mirror).iterdir()) == files
    DeltaTable(source).update(predicate="k = 2", updates={"cid": "12"})  # v6
    report = _sync(spark, source, mirror, ["cid"], handle_invalid="error")
    assert (report.rows_out, report.rows_rejected, report.rows_deleted) == (3, 0, 1)
    assert sorted((k, cid) for cid, _, k in _read(mirror, drop=["cid_mlt"])) == [
        (0, 0),
        (1, 21),
        (2, 12),
        (4, 4),
        (5, 5),
        (6, 6),
    ]


# -- the jar-free rewrite ------------------------------------------------------------------------


def test_a_sync_rewrites_only_the_files_that_hold_changed_keys(spark: SparkSession, tmp_path: Path) -> None:
    """A mirror partitioned by key range (one file each): an update of two keys of one range
    commits the removal of that range's file only, its rewrite, and the source version."""
    source = str(tmp_path / "customers")
    for r in range(4):
        rows = _customers([(k, f"{k}@x", k) for k in range(10 * r, 10 * r + 10)])
        rows = rows.append_column("r", pa.array([r] * 10, pa.int64()))
        write_deltalake(source, rows, mode="append", configuration=CDF if r == 0 else None)
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror, ["cid"], partition_by=("r",))
    files = DeltaTable(mirror).file_uris()
    assert len(files) == 4
    DeltaTable(source).update(predicate="k = 21 OR k = 22", updates={"cid": "cid + 100"})
    report = _sync(spark, source, mirror, ["cid"])
    assert report.rows_out == 2
    actions = _last_commit(mirror)
    removed = [a["remove"] for a in actions if "remove" in a]
    added = [a["add"] for a in actions if "add" in a]
    assert [r["partitionValues"] for r in removed] == [{"r": "2"}]
    assert added
    assert all(a["partitionValues"] == {"r": "2"} for a in added)
    assert sum(json.loads(a["stats"])["numRecords"] for a in added) == 10
    assert [(a["txn"]["appId"], a["txn"]["version"]) for a in actions if "txn" in a] == [(_app_id(source), 4)]
    assert {(cid, k) for cid, _, k, _ in _read(mirror, drop=["cid_mlt", "email_mlt"]) if cid != k} == {
        (121, 21),
        (122, 22),
    }


def _counts(mirror: str) -> dict[str, int]:
    return {row["key"]: row["rows"] for row in DeltaTable(f"{mirror}_counts/email").to_pyarrow_table().to_pylist()}


@pytest.mark.usefixtures("backend")
def test_a_window_decides_erasure_from_value_counts_without_reading_the_other_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A mirror of four key ranges (one file each) with its file of keys 0-9 taken away: a
    window whose keys are all in other ranges (a delete of the only row holding an email, an
    update to an email other rows hold, an insert of a new one) never reads that file. The
    email no row holds leaves the vocabulary, the others stay, and the value counts are each
    email's rows; with the file back, the mirror is what a fresh tokenize writes."""
    source = _create(tmp_path / "customers", [(k, "only@x" if k == 35 else f"u{k % 7}@x", k) for k in range(40)])
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror, file_rows=10)
    assert [r[:2] for r in _ranges(mirror)] == [(0, 9), (10, 19), (20, 29), (30, 39)]
    assert _counts(mirror) == {**{f"u{i}@x": len(range(i, 40, 7)) - (i == 0) for i in range(7)}, "only@x": 1}
    DeltaTable(source).delete("k = 35")
    DeltaTable(source).update(predicate="k = 31", updates={"email": "'u1@x'"})  # u3@x: one row fewer
    _append(source, [(40, "new@x", 40)])
    (low,) = [u for u in DeltaTable(mirror).file_uris() if "min" not in u and _holds(u, 0)]
    hidden = Path(low.removeprefix("file://"))
    hidden.rename(hidden.with_suffix(".away"))
    try:
        report = _sync(spark, source, mirror, file_rows=10)
    finally:
        hidden.with_suffix(".away").rename(hidden)
    assert (report.source_version, report.rows_out, report.rows_deleted, report.erased) == (3, 2, 1, {"email": 1})
    emails = Counter(row["email"] for row in DeltaTable(source).to_pyarrow_table().to_pylist())
    assert _counts(mirror) == emails
    assert set(_vocabulary(f"{mirror}_vocab/email").values()) - {None} == set(emails)
    tokenize_table(spark, source, str(tmp_path / "fresh"), COLUMNS, FRESH)
    assert _read(mirror, drop=["email_mlt"]) == _read(str(tmp_path / "fresh"), drop=["email_mlt"])


@pytest.mark.parametrize("where", ["driver", "spark"])
def test_value_counts_change_alike_on_the_driver_and_in_spark_and_an_unchanged_value_commits_no_file(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A window's change of the value counts, counted on the driver (a small window) or in Spark
    (a window of more than ``LOCAL_VALUES`` change rows): the same counts (each email's rows)
    and the same erasure (the email no row holds any more; one a row held only within the
    window never enters the vocabulary). A (small) window that changes no email's count commits
    the counts' transaction alone: no file of them removed or added."""
    if where == "spark":
        monkeypatch.setattr(counts_module, "LOCAL_VALUES", 0)
    source = _create(tmp_path / "customers", [(k, f"u{k % 3}@x" if k != 5 else "only@x", k) for k in range(12)])
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror)
    DeltaTable(source).delete("k = 5")  # only@x: no row
    DeltaTable(source).update(predicate="k = 0", updates={"email": "'u1@x'"})
    _append(source, [(20, "brief@x", 20)])
    DeltaTable(source).delete("k = 20")  # brief@x: held within the window alone
    _append(source, [(21, "new@x", 21)])
    report = _sync(spark, source, mirror)
    emails = Counter(row["email"] for row in DeltaTable(source).to_pyarrow_table().to_pylist())
    assert _counts(mirror) == emails
    assert report.erased == {"email": 1}
    assert set(_vocabulary(f"{mirror}_vocab/email").values()) - {None} == set(emails)
    if where == "spark":  # (a window of no count change is a small one)
        return
    counts = f"{mirror}_counts/email"
    before = _version(counts)
    DeltaTable(source).update(predicate="k = 1", updates={"cid": "cid + 100"})
    report = _sync(spark, source, mirror)
    assert (report.rows_out, report.erased, _counts(mirror)) == (1, {}, emails)
    actions = _last_commit(counts)
    assert _version(counts) == before + 1
    assert [a for a in actions if "add" in a or "remove" in a] == []
    assert [(a["txn"]["appId"], a["txn"]["version"]) for a in actions if "txn" in a] == [
        (_app_id(source) + COUNTS_SUFFIX, _version(source))
    ]


def _holds(uri: str, k: int) -> bool:
    """Whether the Parquet file at ``uri`` holds key ``k``."""
    return k in pq.read_table(uri.removeprefix("file://"), columns=["k"]).column("k").to_pylist()


def _ranges(path: str) -> list[tuple[int, int, int]]:
    """Each file's key range and rows, from the log's statistics, in key order."""
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pydict()
    return sorted(zip(actions["min.k"], actions["max.k"], actions["num_records"], strict=True))


def test_the_mirrors_files_are_key_ranges_of_at_most_file_rows_rows(spark: SparkSession, tmp_path: Path) -> None:
    """A refresh of a source whose files interleave keys writes the mirror in disjoint key
    ranges of at most ``file_rows`` rows (through the email vocabulary's join). A window
    rewrites a full file on its own (its range less the changed keys) and writes the new rows
    in one small file beside it; the next window over that range merges the small file with its
    new rows, so small files do not pile up."""
    source = str(tmp_path / "customers")
    odd, even = [k for k in range(40) if k % 2], [k for k in range(40) if not k % 2]
    for keys in (odd[::-1], even):
        write_deltalake(source, _customers([(k, f"{k}@x", k) for k in keys]), mode="append", configuration=CDF)
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror, file_rows=10)
    ranges = _ranges(mirror)
    assert sum(rows for _, _, rows in ranges) == 40
    assert all(rows <= 10 for _, _, rows in ranges)
    assert all(high < low for (_, high, _), (low, _, _) in itertools.pairwise(ranges))  # disjoint
    (full,) = [r for r in ranges if r[0] <= 21 <= r[1]]
    DeltaTable(source).update(predicate="k = 21 OR k = 22", updates={"email": "'new@x'"})
    _sync(spark, source, mirror, file_rows=10)
    removed = [a["remove"] for a in _last_commit(mirror) if "remove" in a]
    assert len(removed) == 1
    after = _ranges(mirror)
    assert sorted(set(after) - set(ranges)) == sorted([(full[0], full[1], full[2] - 2), (21, 22, 2)])
    first = ranges[0]  # another full file, rewritten in a task of its own too (never one file of both)
    DeltaTable(source).update(predicate=f"k IN (22, {full[1]}, {first[0]})", updates={"cid": "cid + 100"})
    packing = {  # a session that reads all of these small files in one task
        "spark.sql.files.openCostInBytes": "1",
        "spark.sql.files.maxPartitionBytes": "1g",
        "spark.sql.files.minPartitionNum": "1",
    }
    with session_settings(spark, packing):
        _sync(spark, source, mirror, file_rows=10)
    assert len([a for a in _last_commit(mirror) if "remove" in a]) == 3
    final = _ranges(mirror)
    assert len(final) == len(after)  # the small file merged, not another one beside it
    assert sum(rows for _, _, rows in final) == 40
    kept = [k for k in range(full[0], full[1]) if k not in (21, 22)]
    assert (min(kept), max(kept), full[2] - 3) in final
    assert (first[0] + 1, first[1], first[2] - 1) in final


# -- options and the CLI -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "parameter"),
    [
        ({}, "key"),
        ({"key": ("k",), "input_format": "parquet"}, "input_format"),
        ({"key": ("k",), "file_rows": 0}, "file_rows"),
        ({"key": ("k",), "resize": True}, "resize"),
    ],
)
def test_sync_options_refuse_bad_values_naming_the_field(options: dict[str, Any], parameter: str) -> None:
    with pytest.raises(MLTError) as error:
        SyncOptions(**options)
    assert error.value.parameter == parameter
    assert str(error.value).startswith(f"{parameter}")


@pytest.mark.parametrize("setting", ["mode", "run_id", "dry_run", "read_options"])
def test_sync_options_have_no_batch_settings(setting: str) -> None:
    """A sync's commits are idempotent by the source version they reach: its options are
    composed without a batch run's settings, so there is nothing to refuse."""
    assert setting not in {f.name for f in dataclasses.fields(SyncOptions)}
    with pytest.raises(TypeError, match=setting):
        SyncOptions(key=("k",), **{setting: None})


@pytest.mark.usefixtures("backend")
def test_the_cli_syncs_a_mirror(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _create(tmp_path / "customers", [(1, "a@x", 1), (2, "b@x", 2)])
    argv = ["sync", "--input", source, "--output", str(tmp_path / "mirror"), "--columns", "cid", "--key", "k"]
    assert main(argv) == 0
    assert "spark-mlt sync: rows in 2, out 2, rejected 0, deleted 0, source version 0" in capsys.readouterr().out
    DeltaTable(source).delete("k = 2")
    assert main(argv) == 0
    assert "rows in 0, out 0, rejected 0, deleted 1, source version 1" in capsys.readouterr().out
    DeltaTable(source).delete("k = 1")
    assert main([*argv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["rows_deleted"], document["source_version"]) == (1, 2)
    assert document["spark_jobs"]["window"] > 0  # what a window costs in Spark jobs, counted
    with pytest.raises(SystemExit) as usage:
        main([*argv, "--mode", "append"])  # a batch run's option: not one of sync's
    assert usage.value.code == 2


class _StoppedError(Exception):
    """The sync stopped before the mirror's commit."""


@pytest.mark.usefixtures("backend")
def test_a_sync_stopped_between_the_quarantines_commit_and_the_mirrors_resumes(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quarantine committed a window (a key moved into it), the mirror did not: the next run
    checks the key against the quarantine as the mirror's version left it, and finishes."""
    source = _create(tmp_path / "customers", [(1, "a@x", 1), (2, "b@x", 2), (3, "c@x", 5000)])
    mirror = str(tmp_path / "mirror")
    _sync(spark, source, mirror, ["cid"])
    DeltaTable(source).update(predicate="k = 1", updates={"cid": "9000"})  # to the quarantine
    commits = []

    def quarantine_only(*args: Any, **kwargs: Any) -> Any:
        if commits:
            raise _StoppedError
        commits.append(replace_keys(*args, **kwargs))
        return commits[-1]

    monkeypatch.setattr(apply_module, "replace_keys", quarantine_only)
    with pytest.raises(_StoppedError):
        _sync(spark, source, mirror, ["cid"])
    monkeypatch.undo()
    assert sorted(r[2] for r in _read(f"{mirror}_quarantine")) == [1, 3]  # committed: ahead of the mirror
    DeltaTable(source).delete("k = 2")  # lands meanwhile
    resumed = _sync(spark, source, mirror, ["cid"])
    assert (resumed.source_version, resumed.rows_deleted) == (2, 1)
    assert _read(mirror) == []
    assert sorted(r[2] for r in _read(f"{mirror}_quarantine")) == [1, 3]
