"""A tokenized mirror's sync (``spark_mlt.batch.mirror.sync``) in a session with Delta's jars, against
what delta-spark itself reads and writes.

* The jar-free change reader (``read_changes(..., backend="delta-rs")``) returns the rows Delta's
  own ``readChangeFeed`` returns, on sources delta-spark's SQL wrote: ``UPDATE``, ``DELETE``,
  ``MERGE``, ``INSERT OVERWRITE``, a key moved to another partition, with deletion vectors on
  (Delta computes the changes of a vector from the vectors) and off (``cdc`` files).
* ``sync_table`` through delta-spark's ``MERGE`` keeps the mirror equal to a fresh
  ``tokenize_table`` of the source at each version, and to the mirror the jar-free sync writes.
* Each window is applied once: its transaction is in the mirror's log, a run again does nothing,
  and a ``MERGE`` whose transaction the table holds is skipped by Delta itself.
* One mirror, synced by either backend in turn, ends as if one backend had done it all.

Run by ``tests/compat/run-line.sh`` (``SPARK_MLT_TEST_DELTA_SPARK=1``); skipped elsewhere.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deltalake
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import spark_mlt.storage.keys as keys_module
from spark_mlt.batch import TokenizeOptions, tokenize_table
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.batch.mirror.tables import SYNC_APP_PREFIX
from spark_mlt.batch.read.decode import unpack_token_columns
from spark_mlt.column import mlt_decode
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import AppTransaction, read_snapshot, vocabulary_paths
from spark_mlt.storage.changes import CHANGE_TYPE, COMMIT_VERSION, read_changes
from spark_mlt.storage.replace import key_rows, replace_keys
from tests.support.backends import on_backend, require_delta_spark
from tests.support.frames import assert_same_rows

pytestmark = pytest.mark.delta_spark

#: The source's columns: ``id`` the key, ``user`` and ``sku`` tokenized (an integer id and a
#: string key), ``qty`` kept as it is.
SCHEMA = "id bigint, user int, sku string, qty double, part int"
COLUMNS = ["user", "sku"]
P, N = 13, 3
_names = itertools.count()


def _target(path: str) -> str:
    return f"delta.`{path}`"


def _create(spark: SparkSession, path: str, *, dvs: bool, partitioned: bool = False) -> None:
    properties = f"'delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = '{str(dvs).lower()}'"
    partitioning = " PARTITIONED BY (part)" if partitioned else ""
    spark.sql(f"CREATE TABLE {_target(path)} ({SCHEMA}) USING delta{partitioning} TBLPROPERTIES ({properties})")


def _rows(spark: SparkSession, start: int, count: int, *, salt: int = 0) -> DataFrame:
    """``count`` rows from key ``start``: a view's worth of values that depend on ``salt``."""
    return spark.range(start, start + count, numPartitions=2).select(
        F.col("id"),
        ((F.col("id") * 7 + salt) % 50).cast("int").alias("user"),
        F.concat(F.lit("SKU-"), ((F.col("id") + salt) % 17).cast("string")).alias("sku"),
        (F.col("id") / 4 + salt).cast("double").alias("qty"),
        (F.col("id") % 3).cast("int").alias("part"),
    )


def _view(df: DataFrame) -> str:
    name = f"sync_src_{next(_names)}"
    df.createOrReplaceTempView(name)
    return name


def _insert(spark: SparkSession, path: str, start: int, count: int, *, salt: int = 0) -> None:
    spark.sql(f"INSERT INTO {_target(path)} SELECT * FROM {_view(_rows(spark, start, count, salt=salt))}")


def _merge(spark: SparkSession, path: str, start: int, count: int, *, salt: int) -> None:
    """A MERGE with update, insert and delete clauses: of the keys ``start ..``, an existing
    one divisible by 4 is deleted, the others updated; a new one inserted."""
    view = _view(_rows(spark, start, count, salt=salt))
    spark.sql(
        f"MERGE INTO {_target(path)} t USING {view} s ON t.id = s.id "
        "WHEN MATCHED AND t.id % 4 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.user = s.user, t.sku = s.sku, t.qty = s.qty "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def _history(spark: SparkSession, path: str) -> list[Callable[[], object]]:
    """The steps of a source's history after its creation: delta-spark SQL, one commit each
    (versions 1 to 8)."""
    t = _target(path)
    return [
        lambda: _insert(spark, path, 0, 40),  # 1
        lambda: spark.sql(f"UPDATE {t} SET user = user + 1, sku = concat(sku, '-u') WHERE id % 5 = 0"),  # 2
        lambda: spark.sql(f"DELETE FROM {t} WHERE id % 7 = 3"),  # 3
        lambda: _merge(spark, path, 30, 20, salt=3),  # 4
        lambda: spark.sql(f"UPDATE {t} SET part = (part + 1) % 3, qty = qty + 1 WHERE id IN (1, 2, 11)"),  # 5
        lambda: spark.sql(f"DELETE FROM {t} WHERE id IN (4, 9, 10)"),  # 6
        lambda: spark.sql(f"INSERT OVERWRITE {t} SELECT * FROM {_view(_rows(spark, 10, 30, salt=5))}"),  # 7
        lambda: spark.sql(f"UPDATE {t} SET sku = 'SKU-new' WHERE id % 6 = 1"),  # 8
    ]


def _changes(spark: SparkSession, path: str, after: int, until: int, backend: str) -> DataFrame:
    rows = read_changes(spark, path, after, until, backend=backend)  # type: ignore[arg-type]
    names = ["id", "user", "sku", "qty", "part", CHANGE_TYPE, COMMIT_VERSION]
    return rows.select(*names)


#: The versions that end each window of the history (a sync runs after each).
WINDOWS = (1, 4, 8)
#: The mirrors the sync tests follow, each synced by a backend per window: through delta-spark
#: all along (the MERGE path), and the two backends in turn (made by the jar-free path, synced
#: through MERGE, then jar-free again: each backend continues a mirror the other one wrote).
MIRRORS = {
    "merge": ("delta-spark", "delta-spark", "delta-spark"),
    "turns": ("delta-rs", "delta-spark", "delta-rs"),
}


def _jar_free_rewrites() -> bool:
    """Whether this deltalake commits remove actions (1.6.6 on), which a jar-free sync's
    window needs (1.6.3, which the 3.5 line's compatibility venv pins, refuses it)."""
    try:
        from deltalake.transaction import RemoveAction  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _decoded(spark: SparkSession, path: str, at: tuple[int, int] | None = None) -> DataFrame:
    """A tokenized table as delta-spark reads it (at ``at``: its version and its vocabulary's;
    None: the latest), comparable across tables: integer token columns as arrays of tokens, the
    string column's tokens decoded to its key through the table's own vocabulary
    (``sku_decoded``), in one column order."""
    version, vocabulary_version = at if at is not None else (None, None)
    snapshot = read_snapshot(path, version=version)
    table = spark.read.format("delta").option("versionAsOf", snapshot.version).load(path)
    table = unpack_token_columns(table, snapshot.codecs)
    vocabularies = vocabulary_paths(snapshot.properties, location=snapshot.path)
    assert sorted(snapshot.codecs) == sorted(COLUMNS)
    assert sorted(vocabularies) == ["sku"]
    vocabulary = spark.read.format("delta")
    if vocabulary_version is not None:
        vocabulary = vocabulary.option("versionAsOf", vocabulary_version)
    keys = vocabulary.load(vocabularies["sku"]).select(F.col("id").alias("__id"), F.col("key").alias("sku_decoded"))
    ids = mlt_decode(f"sku{TOKEN_SUFFIX}", snapshot.codecs["sku"], layout="array")
    table = table.withColumn("__id", ids).join(keys, "__id", "left")
    return table.select("id", "user", "sku", "qty", "part", f"user{TOKEN_SUFFIX}", "sku_decoded")


def _windows(frames: list[DataFrame]) -> DataFrame:
    """One frame per window, as one (tagged ``window``): one Spark job compares them all."""
    tagged = [frame.withColumn("window", F.lit(i)) for i, frame in enumerate(frames)]
    out = tagged[0]
    for frame in tagged[1:]:
        out = out.unionByName(frame)
    return out


def _commit(path: str, version: int | None = None) -> list[dict[str, Any]]:
    """The actions of a commit of the table at ``path`` (None: its last), from its log."""
    logs = sorted(Path(path, "_delta_log").glob("*.json"))
    entry = logs[-1] if version is None else Path(path, "_delta_log", f"{version:020d}.json")
    return [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]


def _state(path: str) -> tuple[int, int]:
    """A mirror's version and its vocabulary's."""
    return read_snapshot(path).version, read_snapshot(f"{path}_vocab/sku").version


@dataclasses.dataclass
class History:
    """A source (deletion vectors on, partitioned, change data feed on) that delta-spark
    wrote window by window; its mirrors, synced after each window (``states[name][i]``: each
    one's version and its vocabulary's after window ``i``); a fresh tokenization of the
    source after each window of changes (``fresh[i]``, at version ``WINDOWS[i + 1]``: the first
    run is a tokenization already); and the MERGE-based mirror's second run of window 1 (its
    state before and after it, and the source version it reported)."""

    source: str
    mirrors: dict[str, str]
    states: dict[str, list[tuple[int, int]]]
    fresh: list[str]
    rerun: tuple[tuple[int, int], tuple[int, int], int | None] | None = None


OPTIONS = SyncOptions(key=("id",), p=P, n=N)


@pytest.fixture(scope="module")
def history(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> History:
    require_delta_spark(spark)
    root = tmp_path_factory.mktemp("sync")
    source = str(root / "source")
    _create(spark, source, dvs=True, partitioned=True)
    steps = _history(spark, source)
    mirrors = {name: str(root / name) for name in MIRRORS if name == "merge" or _jar_free_rewrites()}
    made = History(source, mirrors, {name: [] for name in mirrors}, [])
    done = 0
    for window, until in enumerate(WINDOWS):
        for step in steps[done:until]:
            step()
        done = until
        assert read_snapshot(source).version == until
        for name, path in mirrors.items():
            with on_backend(MIRRORS[name][window], spark):
                report = sync_table(spark, source, path, COLUMNS, OPTIONS)
            assert report.source_version == until
            made.states[name].append(_state(path))
        if window:
            fresh = str(root / f"fresh_{until}")
            tokenize_table(spark, source, fresh, COLUMNS, TokenizeOptions(p=P, n=N, input_format="delta"))
            made.fresh.append(fresh)
        if window == 1:  # the MERGE-based window run again, after it committed
            before = _state(mirrors["merge"])
            report = sync_table(spark, source, mirrors["merge"], COLUMNS, OPTIONS)
            made.rerun = (before, _state(mirrors["merge"]), report.source_version)
    return made


def _operations(path: str, states: list[tuple[int, int]]) -> list[str]:
    """The operation of the commit that ends each window of a mirror (its ``commitInfo``)."""
    return [
        next(a["commitInfo"] for a in _commit(path, version) if "commitInfo" in a)["operation"] for version, _ in states
    ]


def test_the_merge_sync_keeps_the_mirror_what_a_fresh_tokenization_writes(
    spark: SparkSession, history: History
) -> None:
    """At the end of each window of changes the MERGE-based mirror holds the rows, integer
    tokens and (decoded) string keys that tokenizing the source at that version writes, and its
    vocabulary holds the source's string keys of that version, no other (the others erased)."""
    mirror, states = history.mirrors["merge"], history.states["merge"]
    assert _operations(mirror, states)[1:] == ["MERGE", "MERGE"]  # a window, not a refresh: Delta's MERGE
    synced = _windows([_decoded(spark, mirror, state) for state in states[1:]])
    assert synced.where(~F.col("sku").eqNullSafe(F.col("sku_decoded"))).count() == 0
    assert_same_rows(synced, _windows([_decoded(spark, fresh) for fresh in history.fresh]))
    vocabulary = spark.read.format("delta")
    held = [
        vocabulary.option("versionAsOf", words).load(f"{mirror}_vocab/sku").where("key IS NOT NULL").select("key")
        for _, words in states[1:]
    ]
    source = spark.read.format("delta")
    keys = [
        source.option("versionAsOf", version).load(history.source).select(F.col("sku").alias("key")).distinct()
        for version in WINDOWS[1:]
    ]
    assert_same_rows(_windows(held), _windows(keys))


def test_the_backends_in_turn_make_the_mirror_the_merge_sync_makes(spark: SparkSession, history: History) -> None:
    """A mirror made by the jar-free sync, synced through MERGE, then jar-free again (each
    backend continuing the other's mirror) equals the MERGE-based mirror after every window:
    the jar-free sync's window equals the MERGE one's."""
    if "turns" not in history.mirrors:
        pytest.skip(f"a jar-free sync's window needs deltalake 1.6.6 or newer; this is {deltalake.__version__}")
    mirror, states = history.mirrors["turns"], history.states["turns"]
    engines = [
        "Delta-Lake/" in str(next(a["commitInfo"] for a in _commit(mirror, v) if "commitInfo" in a).get("engineInfo"))
        for v, _ in states
    ]
    assert engines == [backend == "delta-spark" for backend in MIRRORS["turns"]]
    assert _operations(mirror, states)[1] == "MERGE"
    expected = [_decoded(spark, history.mirrors["merge"], state) for state in history.states["merge"]]
    assert_same_rows(_windows([_decoded(spark, mirror, state) for state in states]), _windows(expected))


def test_each_window_is_committed_once(spark: SparkSession, history: History, tmp_path: Path) -> None:
    """The mirror's window commit records the sync's application transaction (the source's
    table id, the source version); a sync run again after it committed writes nothing; and a
    MERGE whose transaction the table holds is skipped by Delta itself."""
    app = SYNC_APP_PREFIX + str(read_snapshot(history.source).table_id)
    for name, path in history.mirrors.items():
        for (version, _), until in zip(history.states[name], WINDOWS, strict=True):
            txn = [a["txn"] for a in _commit(path, version) if "txn" in a]
            assert [(t["appId"], t["version"]) for t in txn] == [(app, until)], (name, version)
        assert history.states[name][-1][0] == read_snapshot(path).version
    assert history.rerun is not None
    before, after, reported = history.rerun
    assert after == before
    assert reported == WINDOWS[1]

    path = str(tmp_path / "table")
    spark.sql(f"CREATE TABLE {_target(path)} (id bigint, v int) USING delta")
    spark.sql(f"INSERT INTO {_target(path)} VALUES (1, 10), (2, 20), (3, 30)")
    planned = read_snapshot(path)
    keys = spark.createDataFrame([(2,), (3,), (4,)], "id bigint")
    keyed = key_rows(spark, planned, keys, ["id"], backend="delta-spark")
    transaction = AppTransaction("spark-mlt-test:merge", 7)
    rows = spark.createDataFrame([(2, 21), (4, 41)], "id bigint, v int")
    first = replace_keys(rows, keyed, {}, transaction=transaction, commit_info={"test": "first"})
    assert (first.skipped, first.version, first.backend) == (False, planned.version + 1, "delta-spark")
    # planned on the version before the first: only Delta's own check can tell it committed
    other = spark.createDataFrame([(2, 99), (4, 99)], "id bigint, v int")
    again = replace_keys(other, keyed, {}, transaction=transaction, commit_info={"test": "again"})
    assert again.skipped
    assert read_snapshot(path).version == first.version
    expected = spark.createDataFrame([(1, 10), (2, 21), (4, 41)], "id bigint, v int")
    assert_same_rows(spark.read.format("delta").load(path), expected)
    txn = [a["txn"] for a in _commit(path) if "txn" in a]
    assert [(t["appId"], t["version"]) for t in txn] == [(transaction.app_id, transaction.version)]


@pytest.fixture(scope="module")
def sources(spark: SparkSession, history: History, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Sources that delta-spark wrote with the whole history: the sync tests' (deletion
    vectors on, partitioned: an UPDATE moves keys to another partition) and one with deletion
    vectors off (so ``cdc`` files), not partitioned."""
    require_delta_spark(spark)
    path = str(tmp_path_factory.mktemp("sources") / "cdc")
    _create(spark, path, dvs=False)
    for step in _history(spark, path):
        step()
    return {"deletion_vectors": history.source, "cdc": path}


#: The ranges (after, until) read: the whole history (every commit), and one inside it (its
#: first commit read without the one before, its last without the ones after).
RANGES = ((0, 8), (3, 6))


@pytest.mark.parametrize("name", ["deletion_vectors", "cdc"])
def test_the_jar_free_change_reader_reads_what_delta_reads(
    spark: SparkSession, sources: dict[str, str], name: str
) -> None:
    """``read_changes`` without the jars returns Delta's ``readChangeFeed`` rows (a multiset)
    over the whole history and a range inside it; an empty range is empty for both."""
    path = sources[name]
    assert read_snapshot(path).version == WINDOWS[-1]
    expected = _windows([_changes(spark, path, after, until, "delta-spark") for after, until in RANGES])
    actual = _windows([_changes(spark, path, after, until, "delta-rs") for after, until in RANGES])
    assert_same_rows(actual, expected)
    empty = _changes(spark, path, 3, 3, "delta-spark")  # no commit: Delta would refuse the range
    assert empty.schema == _changes(spark, path, 3, 3, "delta-rs").schema
    assert empty.count() == 0


@pytest.mark.parametrize("dvs", [False, True], ids=["rewrite", "deletion-vectors"])
def test_a_merge_reads_only_the_mirror_files_its_keys_range_over(
    spark: SparkSession, tmp_path: Path, dvs: bool
) -> None:
    """The mirror's files are key ranges of 10 rows; a window that changes keys 21 and 24 merges
    with the keys' range in its condition, and reads the mirror's rows of the keys within it
    (Delta's data skipping: one file of six), and rewrites the one file that holds them, or with deletion vectors
    on the mirror marks its two rows deleted and copies none."""
    source, mirror = str(tmp_path / "src"), str(tmp_path / "mirror")
    _create(spark, source, dvs=False)
    _insert(spark, source, 0, 60)
    options = dataclasses.replace(OPTIONS, file_rows=10)
    sync_table(spark, source, mirror, COLUMNS, options)
    if dvs:
        spark.sql(f"ALTER TABLE {_target(mirror)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    assert len(spark.read.format("delta").load(mirror).inputFiles()) == 6
    spark.sql(f"UPDATE {_target(source)} SET qty = -1 WHERE id IN (21, 24)")
    keys = spark.createDataFrame([(21,), (24,)], "id bigint")
    keyed = key_rows(spark, read_snapshot(mirror), keys, ["id"], backend="delta-spark")
    assert keys_module.key_ranges(keyed) == ["t.`id` BETWEEN 21 AND 24"]
    assert len(keyed.rows.inputFiles()) == 1  # what the window reads of the mirror
    assert sorted(r.id for r in keyed.held.collect()) == [21, 24]
    report = sync_table(spark, source, mirror, COLUMNS, options)
    assert report.source_version == 2
    metrics = read_snapshot(mirror).history(1)[0]["operationMetrics"]
    assert metrics["numTargetRowsUpdated"] == "2"
    if dvs:
        assert (metrics["numTargetDeletionVectorsAdded"], metrics["numTargetRowsCopied"]) == ("1", "0")
    else:
        assert (metrics["numTargetFilesRemoved"], metrics["numTargetRowsCopied"]) == ("1", "8")
    assert sorted(r.id for r in spark.read.format("delta").load(mirror).where("qty = -1").collect()) == [21, 24]
