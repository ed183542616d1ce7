"""The delta-spark backend, catalog tables and S3, on a session with Delta's jars.

Run by ``tests/compat/run-line.sh`` on each Spark line Delta publishes jars for
(``SPARK_MLT_TEST_DELTA_SPARK=1``); skipped elsewhere. One shared session, tiny tables. On S3
(the local moto server of ``tests/support/s3.py``) Delta writes through its default S3 log
store, which is safe for one driver: every writer here is in this one.
"""

from __future__ import annotations

import dataclasses
import glob
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType
from pyspark.testing import assertDataFrameEqual

from spark_mlt import MLTCodec, MLTError
from spark_mlt.batch import (
    DecodeOptions,
    StreamOptions,
    TokenizeOptions,
    decode_table,
    tokenize_stream,
    tokenize_table,
)
from spark_mlt.batch.cli import run
from spark_mlt.batch.read.inspect import inspect_table
from spark_mlt.batch.write.pipeline import TableSink, tokenize_frame
from spark_mlt.column import mlt_decode, mlt_encode
from spark_mlt.delta.fs import locate
from spark_mlt.errors import TableOptionError
from spark_mlt.storage import (
    AppTransaction,
    CodecMismatchError,
    ConcurrentWriteError,
    MissingTableError,
    StorageOptions,
    TableExistsError,
    TableSchemaError,
    WriteOptions,
    orphan_files,
    read_codecs,
    read_delta,
    read_properties,
    read_snapshot,
    table_exists,
    token_write_options,
    vacuum,
    write_delta,
)
from spark_mlt.storage.backends import delta_spark
from spark_mlt.storage.backends.plan import WritePlan
from spark_mlt.storage.replace import key_rows, replace_keys
from tests.support import s3 as local_s3
from tests.support.codecs import CODEC, OTHER
from tests.support.frames import assert_same_rows
from tests.support.zoo import Zoo

pytestmark = pytest.mark.delta_spark

RS = WriteOptions(backend="delta-rs")
_INVARIANT = json.dumps({"expression": {"expression": "s.v > 0"}})
_names = itertools.count()


def _ratings(spark: SparkSession, start: int = 0, rows: int = 20) -> DataFrame:
    df = spark.range(start, start + rows).select(
        F.col("id").alias("userId"),
        (F.col("id") % 3).cast("int").alias("part"),
        (F.col("id") % 5 + 0.5).alias("rating"),
    )
    return df.withColumn("userId_mlt", mlt_encode("userId", CODEC))


def _engines(path: str) -> list[str]:
    return [str(entry.get("engineInfo", "")) for entry in DeltaTable(path).history()]


def _protocol(path: str) -> tuple[int, int, object, object]:
    p = DeltaTable(path).protocol()
    return (p.min_reader_version, p.min_writer_version, p.reader_features, p.writer_features)


def _table_name() -> str:
    return f"mlt_test.t{next(_names)}"


@pytest.fixture(scope="module")
def database(spark: SparkSession) -> str:
    spark.sql("CREATE DATABASE IF NOT EXISTS mlt_test")
    return "mlt_test"


def test_a_new_table_gets_its_codecs_in_version_0_and_its_rows_in_version_1(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The codecs are in the table before its first tokens, and Delta wrote both commits."""
    path = str(tmp_path / "ratings")
    df = _ratings(spark)
    result = write_delta(df, path, {"userId": CODEC}, options=WriteOptions(partition_by=["part"]))
    assert (result.backend, result.version, result.rows) == ("delta-spark", 1, 20)
    first = DeltaTable(path, version=0)
    assert first.metadata().configuration["mlt.codec.userId"] == CODEC.to_json()
    assert first.metadata().partition_columns == ["part"]
    assert pa.table(first.get_add_actions()).num_rows == 0
    assert all(e.startswith("Apache-Spark/") and "Delta-Lake/" in e for e in _engines(path))
    assert read_codecs(path) == {"userId": CODEC}
    assertDataFrameEqual(read_delta(spark, path), df)
    assert DeltaTable(path).history(1)[0]["userMetadata"].count("spark_mlt.mode") == 1


def test_every_write_mode(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark), path, {"userId": CODEC})
    with pytest.raises(TableExistsError):
        write_delta(_ratings(spark), path, {"userId": CODEC})
    appended = write_delta(_ratings(spark, 20), path, {"userId": CODEC}, mode="append")
    assert (appended.version, read_delta(spark, path).count()) == (2, 40)
    overwritten = write_delta(_ratings(spark, 100, 5), path, mode="overwrite")
    assert overwritten.version == 3
    assertDataFrameEqual(read_delta(spark, path), _ratings(spark, 100, 5))
    assert read_codecs(path) == {"userId": CODEC}  # an overwrite keeps the table's properties
    assert read_delta(spark, path, version=1).count() == 20


def test_a_different_codec_or_schema_is_refused_and_the_table_kept(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark), path, {"userId": CODEC})
    with pytest.raises(CodecMismatchError, match="userId"):
        write_delta(_ratings(spark), path, {"userId": OTHER}, mode="append")
    with pytest.raises(TableSchemaError, match="does not match"):
        write_delta(_ratings(spark).drop("rating"), path, mode="append")
    assert read_snapshot(path).version == 1


def test_a_resize_is_one_replace_commit_that_time_travel_reads_past(spark: SparkSession, tmp_path: Path) -> None:
    """A re-size through delta-spark: one commit with the new codec, the new tokens and the
    table's partitioning, its other properties and its history kept."""
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark), path, {"userId": CODEC}, options=WriteOptions(partition_by=["part"]))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 60 days')")
    before = read_snapshot(path).version
    bigger = MLTCodec.from_seed(13, 4)
    rows = _ratings(spark, 0, 30).drop("userId_mlt").withColumn("userId_mlt", mlt_encode("userId", bigger))
    resized = write_delta(rows, path, {"userId": bigger}, mode="overwrite", options=WriteOptions(resize=True))
    assert resized.version == before + 1
    table = DeltaTable(path)
    assert table.metadata().partition_columns == ["part"]
    assert table.metadata().configuration["delta.logRetentionDuration"] == "interval 60 days"
    assert read_codecs(path) == {"userId": bigger}
    assert read_codecs(path, version=before) == {"userId": CODEC}
    decoded = read_delta(spark, path).select("userId", mlt_decode("userId_mlt", bigger).alias("back"))
    assert decoded.where("userId <> back").count() == 0
    assert read_delta(spark, path).count() == 30
    assert read_delta(spark, path, version=before).count() == 20


def test_a_run_id_goes_through_deltas_idempotent_writes(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    first = write_delta(_ratings(spark), path, {"userId": CODEC}, mode="append", run_id="2026-11-24")
    again = write_delta(_ratings(spark), path, {"userId": CODEC}, mode="append", run_id="2026-11-24")
    assert (first.skipped, again.skipped, again.rows) == (False, True, 0)
    assert DeltaTable(path).transaction_version("spark-mlt:2026-11-24") == 1
    # Delta itself skips the write when the planned check is bypassed (a concurrent re-run)
    stale = read_snapshot(path, version=0)
    racing = write_delta(_ratings(spark), path, mode="append", run_id="2026-11-24", snapshot=stale)
    assert (racing.skipped, racing.version) == (True, 1)  # a version the table has, never -1
    assert (read_snapshot(path).version, read_delta(spark, path).count()) == (1, 20)


def test_a_committed_write_is_found_however_many_commits_follow_it(spark: SparkSession, tmp_path: Path) -> None:
    """The write's commit is looked up among all the commits after the version it was planned
    on, not in a window of recent history: with 60 other commits after it, it is still reported
    as committed, with its version and rows (and a write id nobody committed, of rows to write,
    is an error, never a skipped write)."""
    path = str(tmp_path / "ratings")
    first = write_delta(_ratings(spark), path, {"userId": CODEC})
    log = Path(path, "_delta_log", f"{first.version:020d}.json").read_text().splitlines()
    info = next(json.loads(line)["commitInfo"] for line in log if '"commitInfo"' in line)
    write_id = json.loads(info["userMetadata"])["spark_mlt.write_id"]
    rows = DeltaTable(path).to_pyarrow_table().slice(0, 1)
    for _ in range(60):  # other writers' commits
        write_deltalake(path, rows, mode="append")
    plan = WritePlan(locate(path), "append", (), {}, {}, {}, None, {}, None)
    found = delta_spark.write_result(plan, write_id, first.version - 1, 0.0, _ratings(spark))
    assert (found.version, found.rows, found.skipped) == (first.version, 20, False)
    with pytest.raises(ConcurrentWriteError, match="no commit after version"):  # rows to write, and no commit
        delta_spark.write_result(plan, "not-a-write-id", first.version - 1, 0.0, _ratings(spark))


def test_the_jobs_parquet_choices_reach_the_files(spark: SparkSession, tmp_path: Path) -> None:
    """v2 pages (DELTA_BINARY_PACKED) and no dictionary for the token column, and the
    session's conf is as it was after the write."""
    path = str(tmp_path / "ratings")
    df = _ratings(spark).coalesce(1)
    options = WriteOptions(parquet_options=token_write_options(df, ["userId_mlt"]))
    write_delta(df, path, {"userId": CODEC}, options=options)
    (file,) = glob.glob(f"{path}/*.parquet")
    metadata = pq.ParquetFile(file).metadata.row_group(0)
    columns = [metadata.column(i) for i in range(metadata.num_columns)]
    (tokens,) = [c for c in columns if c.path_in_schema.startswith("userId_mlt")]  # userId_mlt.list.element
    assert not tokens.has_dictionary_page
    assert "DELTA_BINARY_PACKED" in tokens.encodings
    assert spark.conf.get("parquet.writer.version", None) is None


@pytest.mark.parametrize(("first", "second"), [("delta-rs", "delta-spark"), ("delta-spark", "delta-rs")])
def test_both_backends_write_the_same_table(spark: SparkSession, tmp_path: Path, first: str, second: str) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark), path, {"userId": CODEC}, options=WriteOptions(backend=first))  # type: ignore[arg-type]
    protocol, properties = _protocol(path), read_properties(path)
    result = write_delta(
        _ratings(spark, 20),
        path,
        {"userId": CODEC},
        mode="append",
        options=WriteOptions(backend=second),  # type: ignore[arg-type]
    )
    assert result.backend == second
    assert (_protocol(path), read_properties(path)) == (protocol, properties)
    expected = _ratings(spark, 0, 40)
    assertDataFrameEqual(read_delta(spark, path), expected)
    assert DeltaTable(path).to_pyarrow_table().num_rows == 40
    assert read_codecs(path) == {"userId": CODEC}


def test_tokenize_with_quarantine_and_a_vocabulary_then_decode_inspect_vacuum(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = str(tmp_path / "orders.parquet")
    spark.createDataFrame(
        [(1, "SKU-3", "a"), (2, "SKU-1", "b"), (-5, "SKU-3", "c"), (None, None, "d")],
        "customer_id bigint, sku string, note string",
    ).write.parquet(source)
    output = str(tmp_path / "orders_mlt")
    options = TokenizeOptions(p=13, n=3, handle_invalid="quarantine", run_id="day-1")
    report = tokenize_table(spark, source, output, ["customer_id", "sku"], options)
    assert (report.rows_out, report.rows_rejected, report.write and report.write.backend) == (3, 1, "delta-spark")
    assert [r.note for r in read_delta(spark, f"{output}_quarantine").collect()] == ["c"]
    vocabulary = str(tmp_path / "orders_mlt_vocab" / "sku")
    assert sorted(tuple(r) for r in read_delta(spark, vocabulary).collect()) == [("SKU-1", 0), ("SKU-3", 1)]
    again = tokenize_table(
        spark,
        source,
        output,
        ["customer_id", "sku"],
        TokenizeOptions(mode="append", handle_invalid="quarantine", run_id="day-1"),
    )
    assert again.write is not None
    assert again.write.skipped
    assert decode_table(spark, output, DecodeOptions(verify=True)).mismatches == 0
    info = inspect_table(output)
    assert (info["version"], info["rows"]) == (1, 3)
    assert "Delta-Lake/" in str(DeltaTable(output).history(1)[0]["engineInfo"])
    assert orphan_files(output) == []
    assert vacuum(output, spark=spark) == []  # Delta's VACUUM: nothing expired
    overwritten = tokenize_table(
        spark, source, output, ["customer_id", "sku"], TokenizeOptions(mode="overwrite", handle_invalid="quarantine")
    )
    assert overwritten.write is not None
    assert overwritten.write.version == 2
    expired = vacuum(output, retention_hours=0, spark=spark)
    assert expired
    assert all(name.endswith(".parquet") and not name.startswith("/") for name in expired)
    with pytest.raises(TableOptionError, match=r"^retention_hours=0: .* keeps removed files 168 hours"):
        vacuum(output, retention_hours=0, dry_run=False, spark=spark)  # as Delta's own VACUUM refuses it
    assert vacuum(output, retention_hours=0, spark=spark) == expired  # nothing was deleted
    assert vacuum(output, retention_hours=0, dry_run=False, allow_short_retention=True, spark=spark) == expired
    assert vacuum(output, retention_hours=0, spark=spark) == []
    assert decode_table(spark, output, DecodeOptions(verify=True)).mismatches == 0


def test_a_tokenize_that_quarantines_no_row_commits_its_table(spark: SparkSession, tmp_path: Path) -> None:
    """Delta records no commit for an append of no rows (``skipRecordingEmptyCommits``): the
    quarantine's empty write is nothing written, not a lost commit, with a run id or without."""
    source = str(tmp_path / "orders.parquet")
    spark.createDataFrame([(1, "a"), (2, "b")], "customer_id bigint, note string").write.parquet(source)
    for run_id in (None, "day-1"):
        output = str(tmp_path / f"orders_mlt_{run_id}")
        options = TokenizeOptions(p=13, n=3, handle_invalid="quarantine", run_id=run_id)
        report = tokenize_table(spark, source, output, ["customer_id"], options)
        assert (report.rows_out, report.rows_rejected, report.write and report.write.version) == (2, 0, 1)
        assert read_delta(spark, f"{output}_quarantine").count() == 0


# Catalog tables: Spark's own session catalog (Delta's), its warehouse under tmp (conftest)


def test_a_catalog_table_is_created_with_its_properties_and_read_by_name(spark: SparkSession, database: str) -> None:
    name = _table_name()
    df = _ratings(spark)
    result = write_delta(df, name, {"userId": CODEC}, options=WriteOptions(partition_by=["part"]))
    assert (result.backend, result.version) == ("delta-spark", 1)
    detail = spark.sql(f"DESCRIBE DETAIL {name}").first()
    assert detail is not None
    assert detail["properties"]["mlt.codec.userId"] == CODEC.to_json()
    assert read_codecs(name) == {"userId": CODEC}
    assert table_exists(name)
    assert not table_exists(f"{database}.nothing_here")
    assertDataFrameEqual(read_delta(spark, name), df)
    assertDataFrameEqual(read_delta(spark, f"spark_catalog.{name}"), df)  # three-part name
    write_delta(_ratings(spark, 20), name, {"userId": CODEC}, mode="append", options=RS)  # delta-rs, at its location
    assert spark.table(name).count() == 40
    with pytest.raises(TableExistsError):
        write_delta(df, name, {"userId": CODEC})
    with pytest.raises(CodecMismatchError):
        write_delta(df, name, {"userId": OTHER}, mode="append")
    with pytest.raises(MissingTableError, match="no table"):
        read_codecs(f"{database}.nothing_here")


def test_jobs_take_catalog_tables(spark: SparkSession, database: str, tmp_path: Path) -> None:
    source = _table_name()
    spark.createDataFrame(
        [(1, "SKU-3", "a"), (2, "SKU-1", "b"), (-5, "SKU-3", "c")], "customer_id bigint, sku string, note string"
    ).write.format("delta").saveAsTable(source)
    output = _table_name()
    options = TokenizeOptions(p=13, n=3, handle_invalid="quarantine", input_format="table")
    report = tokenize_table(spark, source, output, ["customer_id", "sku"], options)
    assert (report.rows_out, report.rows_rejected) == (2, 1)
    assert spark.catalog.tableExists(f"{output}_quarantine")
    assert spark.catalog.tableExists(f"{output}_vocab_sku")
    assert read_snapshot(output).properties["mlt.vocabulary.sku"] == f"{output}_vocab_sku"
    decoded = _table_name()
    assert decode_table(spark, output, DecodeOptions(verify=True)).mismatches == 0
    decode_table(spark, output, DecodeOptions(output=decoded))
    assert sorted((r.note, r.sku) for r in spark.table(decoded).collect()) == [("a", "SKU-3"), ("b", "SKU-1")]
    assert inspect_table(output)["rows"] == 2
    assert vacuum(output, spark=spark) == []
    assert run(["inspect", "--input", output]) == 0
    assert run(["vacuum", "--input", output]) == 0


def test_a_dotted_path_written_as_a_path_stays_a_path(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_delta(_ratings(spark), "./ratings.delta", {"userId": CODEC})
    assert (tmp_path / "ratings.delta" / "_delta_log").is_dir()
    assert read_codecs("./ratings.delta") == {"userId": CODEC}


# S3: Spark and Delta through s3a, delta-rs and pyarrow with the storage options


def test_tokenize_into_s3_then_decode_append_inspect_vacuum_and_read_with_delta_rs(
    spark: SparkSession, s3: local_s3.MotoServer, tmp_path: Path
) -> None:
    options = local_s3.storage_options()
    source = str(tmp_path / "orders.parquet")
    spark.createDataFrame(
        [(1, "SKU-3", "a"), (2, "SKU-1", "b"), (-5, "SKU-3", "c")], "customer_id bigint, sku string, note string"
    ).write.parquet(source)
    output = f"s3://{s3.bucket()}/orders_mlt"  # s3:// as a user names it; Spark and Delta get s3a://
    job = TokenizeOptions(p=13, n=3, handle_invalid="quarantine", storage_options=options)
    report = tokenize_table(spark, source, output, ["customer_id", "sku"], job)
    assert report.write is not None
    assert (report.write.backend, report.rows_out, report.rows_rejected) == ("delta-spark", 2, 1)
    assert decode_table(spark, output, DecodeOptions(verify=True, storage_options=options)).mismatches == 0
    again = TokenizeOptions(mode="append", handle_invalid="quarantine", storage_options=options)
    assert tokenize_table(spark, source, output, ["customer_id", "sku"], again).rows_out == 2
    with pytest.raises(CodecMismatchError, match="customer_id"):
        write_delta(
            read_delta(spark, output).limit(1), output, {"customer_id": OTHER}, mode="append", storage_options=options
        )
    info = inspect_table(output, storage_options=options)
    assert (info["version"], info["rows"]) == (2, 4)
    assert "Delta-Lake/" in str(info["history"][0].get("engineInfo", "Delta-Lake/"))
    plain = DeltaTable(output, storage_options=dict(options))
    assert plain.to_pyarrow_table().num_rows == 4
    assert all("Delta-Lake/" in str(entry.get("engineInfo", "")) for entry in plain.history())
    assert [r.note for r in read_delta(spark, f"{output}_quarantine").collect()] == ["c", "c"]
    assert orphan_files(output, storage_options=options) == []
    assert vacuum(output, spark=spark, storage_options=options) == []  # Delta's VACUUM on S3


# Races: a write whose Spark job is held open while another write commits


class Gate:
    """Holds a write's Spark job: :meth:`hold` wraps a DataFrame in an identity UDF that, in
    the job's tasks, waits until the test calls :meth:`release`. Delta's transaction of such a
    write has read the table before the job ran, so another write that commits meanwhile is a
    concurrent commit to it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def hold(self, df: DataFrame) -> DataFrame:
        folder = self.folder  # the UDF's closure holds the path only

        @F.pandas_udf("long")  # type: ignore[call-overload]
        def wait_for_release(ids: pd.Series) -> pd.Series:
            (folder / "started").touch()
            deadline = time.monotonic() + 120
            while not (folder / "released").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            return ids

        # one task: the other of local[2]'s two slots stays free for the concurrent write
        return df.coalesce(1).withColumn("userId", wait_for_release("userId"))

    def started(self) -> bool:
        return (self.folder / "started").exists()

    def release(self) -> None:
        (self.folder / "released").touch()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    folder = tmp_path / "gate"
    folder.mkdir()
    held = Gate(folder)
    yield held
    held.release()


def _while_held(gate: Gate, slow: Callable[[], Any], fast: Callable[[], Any]) -> Any:
    """Runs ``slow`` (whose job ``gate`` holds) in a thread, ``fast`` once that job runs, then
    releases ``slow``; returns both results."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["slow"] = slow()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            result["slow"] = error

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    while not gate.started() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    result["fast"] = fast()
    gate.release()
    thread.join(timeout=300)
    if isinstance(result["slow"], BaseException):
        raise result["slow"]
    return result["slow"], result["fast"]


def test_a_run_id_committed_by_another_writer_meanwhile_is_not_written_again(
    spark: SparkSession, gate: Gate, where: tuple[str, StorageOptions | None]
) -> None:
    """Delta refuses the held write's commit (the run id's transaction changed under it);
    spark-mlt reloads the table, finds the run id and writes nothing."""
    table, options = where
    write_delta(_ratings(spark), table, {"userId": CODEC}, storage_options=options)
    slow, fast = _while_held(
        gate,
        lambda: write_delta(gate.hold(_ratings(spark, 100)), table, mode="append", run_id="r", storage_options=options),
        lambda: write_delta(_ratings(spark, 200), table, mode="append", run_id="r", storage_options=options),
    )
    assert (fast.skipped, slow.skipped) == (False, True)
    ids = sorted(r.userId for r in read_delta(spark, table).collect())
    assert ids == [*range(20), *range(200, 220)]


@pytest.mark.parametrize("held_mode", ["overwrite", "append"])
def test_an_overwrite_racing_an_append_lands_as_if_one_ran_after_the_other_on_delta_spark(
    spark: SparkSession,
    gate: Gate,
    where: tuple[str, StorageOptions | None],
    held_mode: str,
) -> None:
    """A held overwrite loses to an append that commits meanwhile (Delta: ConcurrentAppendException)
    and is run again, replacing both; a held append commits after an overwrite by itself."""
    table, options = where
    write_delta(_ratings(spark), table, {"userId": CODEC}, storage_options=options)
    other = "append" if held_mode == "overwrite" else "overwrite"
    starts = {"overwrite": 100, "append": 200}
    slow, fast = _while_held(
        gate,
        lambda: write_delta(
            gate.hold(_ratings(spark, starts[held_mode])),
            table,
            mode=held_mode,
            storage_options=options,  # type: ignore[arg-type]
        ),
        lambda: write_delta(_ratings(spark, starts[other]), table, mode=other, storage_options=options),  # type: ignore[arg-type]
    )
    assert fast.version < slow.version
    ids = sorted(r.userId for r in read_delta(spark, table).collect())
    expected = [*range(100, 120), *range(200, 220)] if held_mode == "append" else list(range(100, 120))
    assert ids == expected


# --- the jar-free path on tables delta-spark wrote, read back by delta-spark -------------------


def _jar_free_append(spark: SparkSession, path: str, rows: DataFrame, mode: str = "append") -> None:
    write_delta(rows, path, mode=mode, options=RS)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["cm_name", "cm_id", "dv", "constraints", "generated", "v2_checkpoint"])
def test_delta_spark_reads_what_the_jar_free_writer_appended(
    spark: SparkSession, zoo: Zoo, tmp_path: Path, name: str
) -> None:
    """Appends under physical names, with constraints and generated columns kept, to tables with
    deletion vectors and v2 checkpoints: delta-spark and the jar-free reader see the same rows."""
    if zoo.missing(name):
        pytest.skip(str(zoo.missing(name)))
    path = zoo.copy(name, tmp_path)
    before = spark.read.format("delta").load(path)
    rows = before.count()
    new = {
        "constraints": lambda: spark.createDataFrame([(7, 8, "new")], "x int, y int, note string"),
        "generated": lambda: spark.createDataFrame([(21,)], "id bigint"),
        "v2_checkpoint": lambda: spark.createDataFrame([(999,)], "id bigint"),
    }.get(name, lambda: before.limit(7).withColumn("id", F.col("id") + 5_000_000))()
    new = spark.createDataFrame(new.collect(), new.schema)  # fixed rows, not a view of the table
    for _ in range(3):  # v2_checkpoint wants a checkpoint every 2 commits
        _jar_free_append(spark, path, new)
    delta = spark.read.format("delta").load(path)
    assert delta.count() == rows + 3 * new.count()
    assert_same_rows(read_delta(spark, path, backend="delta-rs"), delta)


def test_a_jar_free_overwrite_of_a_change_data_feed_table_gives_delta_spark_the_right_feed(
    spark: SparkSession, zoo: Zoo, tmp_path: Path
) -> None:
    """The overwrite removes files that have deletion vectors: delta-spark's feed deletes the
    rows still in them, not the ones deleted before."""
    if zoo.missing("cdf"):
        pytest.skip(str(zoo.missing("cdf")))
    path = zoo.copy("cdf", tmp_path)
    start = DeltaTable(path).version() + 1
    _jar_free_append(spark, path, spark.createDataFrame([(500,)], "id bigint"))
    _jar_free_append(spark, path, spark.createDataFrame([(900,)], "id bigint"), mode="overwrite")
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", start).load(path)
    changes = sorted((row[0], row[1]) for row in feed.select("_change_type", "id").collect())
    kept = [i for i in range(100) if i % 4] + [500]
    assert changes == sorted([("insert", 500), ("insert", 900), *(("delete", i) for i in kept)])


def test_delta_spark_reads_the_same_rows_after_a_jar_free_vacuum(spark: SparkSession, zoo: Zoo, tmp_path: Path) -> None:
    if zoo.missing("dv"):
        pytest.skip(str(zoo.missing("dv")))
    path = zoo.copy("dv", tmp_path)
    table = spark.read.format("delta").load(path)
    before = spark.createDataFrame(table.collect(), table.schema)
    vacuum(
        path, retention_hours=0, dry_run=False, allow_short_retention=True
    )  # no session: delta-rs' listing, vectors kept
    assert_same_rows(spark.read.format("delta").load(path), before)


def test_a_stream_follows_a_delta_table_through_deltas_source_and_commits_through_delta_spark(
    spark: SparkSession, database: str, tmp_path: Path
) -> None:
    """With Delta's jars: Delta's streaming source reads the new commits, delta-spark commits
    each batch with its transaction (txnAppId, txnVersion = the batch id), and a batch the table
    already holds is skipped by Delta itself."""
    source, output = str(tmp_path / "orders"), str(tmp_path / "orders_mlt")
    _ratings(spark, 0, 10).drop("userId_mlt").write.format("delta").save(source)
    options = TokenizeOptions(input_format="delta", p=13, n=3)
    stream = StreamOptions(checkpoint=str(tmp_path / "chk"))
    first = tokenize_stream(spark, source, output, ["userId"], options, stream=stream)
    assert first.write is not None
    assert (first.rows_out, first.write.backend) == (10, "delta-spark")
    _ratings(spark, 10, 5).drop("userId_mlt").write.format("delta").mode("append").save(source)
    second = tokenize_stream(spark, source, output, ["userId"], options, stream=stream)
    assert second.rows_out == 5
    assert spark.read.format("delta").load(output).count() == 15
    (stream,) = inspect_table(output)["streams"]
    replay = tokenize_frame(
        _ratings(spark, 10, 5).drop("userId_mlt"),
        ["userId"],
        TableSink(
            output,
            read_snapshot(output),
            TokenizeOptions(p=13, n=3, mode="append"),
            transaction=AppTransaction(stream["writer"], stream["last_batch"]),
        ),
    )
    assert replay.write is not None
    assert replay.write.skipped
    assert spark.read.format("delta").load(output).count() == 15

    # a Delta table in the catalog, by its name
    name = _table_name()
    _ratings(spark, 100, 4).drop("userId_mlt").write.format("delta").saveAsTable(name)
    by_name = dataclasses.replace(options, input_format="table")
    named_stream = StreamOptions(checkpoint=str(tmp_path / "chk_named"))
    named = tokenize_stream(spark, name, str(tmp_path / "named_mlt"), ["userId"], by_name, stream=named_stream)
    assert named.rows_out == 4


def _accepted(write: Callable[[], object]) -> bool:
    try:
        write()
    except Exception:  # noqa: BLE001 - refused: either writer's error
        return False
    return True


def test_nested_rules_refuse_exactly_the_rows_delta_spark_refuses(spark: SparkSession, tmp_path: Path) -> None:
    """The same rows appended to twin tables, one through delta-spark and one jar-free: a NOT
    NULL struct field inside a nullable struct (created by SQL) and an invariant of a nested field
    (a legacy table, created by a write whose schema carries it), at each depth and null parent."""
    nested = "id int, s struct<a: int, b: struct<c: string>>"
    legacy = StructType(
        [
            StructField("id", IntegerType()),
            StructField("s", StructType([StructField("v", IntegerType(), True, {"delta.invariants": _INVARIANT})])),
        ]
    )
    rows: dict[str, tuple[StructType | str, list[tuple[object, ...]]]] = {
        "nested": (
            nested,
            [(1, (1, ("x",))), (2, None), (3, (None, ("x",))), (4, (1, None)), (5, (1, (None,))), (6, (2, ("y",)))],
        ),
        "legacy": (legacy, [(1, (5,)), (2, (0,)), (3, None), (4, (None,)), (5, (7,))]),
    }
    twins: dict[str, tuple[str, str]] = {}
    for name in rows:
        ours, theirs = str(tmp_path / f"{name}_rs"), str(tmp_path / f"{name}_spark")
        for path in (ours, theirs):
            if name == "nested":
                spark.sql(
                    f"CREATE TABLE delta.`{path}` (id INT, s STRUCT<a: INT NOT NULL, b: STRUCT<c: STRING NOT NULL>>) "
                    "USING delta"
                )
            else:
                spark.createDataFrame([(0, (1,))], legacy).write.format("delta").save(path)
        twins[name] = (ours, theirs)
    outcomes = []
    for name, (schema, values) in rows.items():
        ours, theirs = twins[name]
        for row in values:
            df = spark.createDataFrame([row], schema)
            by_delta = _accepted(lambda df=df, theirs=theirs: df.write.format("delta").mode("append").save(theirs))
            jar_free = _accepted(lambda df=df, ours=ours: write_delta(df, ours, mode="append", options=RS))
            outcomes.append((name, row, by_delta, jar_free))
    assert [o for o in outcomes if o[2] != o[3]] == []
    assert [o[1][0] for o in outcomes if o[2]] == [1, 6, 1, 5]  # the rows both took
    assert_same_rows(read_delta(spark, twins["nested"][0]), spark.read.format("delta").load(twins["nested"][1]))


def _jar_free_stream(source: str, output: str, checkpoint: str) -> subprocess.CompletedProcess[str]:
    """``spark-mlt tokenize --stream`` of a Delta source in a session without Delta's jars."""
    argv = ["tokenize", "--stream", "--checkpoint", checkpoint, "--input", source, "--input-format", "delta"]
    argv += ["--output", output, "--columns", "userId", "--p", "13", "--n", "3"]
    environment = {k: v for k, v in os.environ.items() if k != "SPARK_MLT_DELTA"}
    code = "import sys; from spark_mlt.batch.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *argv], env=environment, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_stream_started_with_or_without_deltas_jars_refuses_to_switch(spark: SparkSession, tmp_path: Path) -> None:
    """One checkpoint, one loop: a stream started with Delta's jars (batch ids) refuses to run on
    without them (source versions), and the other way round; it keeps running as it started."""
    source = str(tmp_path / "orders")
    _ratings(spark, 0, 10).drop("userId_mlt").write.format("delta").save(source)
    options = TokenizeOptions(input_format="delta", p=13, n=3)
    with_jars = StreamOptions(checkpoint=str(tmp_path / "chk_jars"))
    assert tokenize_stream(spark, source, str(tmp_path / "a"), ["userId"], options, stream=with_jars).rows_out == 10
    refused = _jar_free_stream(source, str(tmp_path / "a"), str(tmp_path / "chk_jars"))
    assert refused.returncode != 0
    assert "was written by Spark's streaming query" in refused.stderr
    assert "Run the stream with Delta's jars" in refused.stderr

    started = _jar_free_stream(source, str(tmp_path / "b"), str(tmp_path / "chk_free"))
    assert started.returncode == 0, started.stderr[-2000:]
    without = StreamOptions(checkpoint=str(tmp_path / "chk_free"))
    with pytest.raises(MLTError, match="Run the stream without Delta's jars"):
        tokenize_stream(spark, source, str(tmp_path / "b"), ["userId"], options, stream=without)
    _ratings(spark, 10, 5).drop("userId_mlt").write.format("delta").mode("append").save(source)
    assert tokenize_stream(spark, source, str(tmp_path / "a"), ["userId"], options, stream=with_jars).rows_out == 5
    for output, rows in (("a", 15), ("b", 10)):  # the refused runs wrote nothing
        assert spark.read.format("delta").load(str(tmp_path / output)).count() == rows


def test_a_merge_keeps_its_transaction_to_itself_while_another_thread_of_the_session_writes(
    spark: SparkSession, gate: Gate, tmp_path: Path
) -> None:
    """Delta's idempotent-DML settings (txnAppId, txnVersion) and the commit's metadata are
    set on a clone of the session for the merge alone: a write another thread of the same
    session commits while the merge runs carries neither, and is not skipped as if it were the
    merge's transaction."""
    table, other = str(tmp_path / "mirror"), str(tmp_path / "other")
    write_delta(_ratings(spark), table, {"userId": CODEC})
    write_delta(_ratings(spark), other, {"userId": CODEC})
    transaction = AppTransaction("spark-mlt-sync:x", 1, after=-1)
    keys = spark.range(5).select(F.col("id").alias("userId"))
    keyed = key_rows(spark, read_snapshot(table), keys, ["userId"], backend="delta-spark")
    merge, plain = _while_held(
        gate,
        lambda: replace_keys(
            gate.hold(_ratings(spark, 0, 3)), keyed, {"userId": CODEC}, transaction=transaction, commit_info={}
        ),
        lambda: write_delta(_ratings(spark, 100, 3), other, mode="append"),
    )
    assert (merge.skipped, plain.skipped) == (False, False)
    assert read_snapshot(table).transaction_version(transaction.app_id) == 1
    written = read_snapshot(other)
    assert written.transaction_version(transaction.app_id) is None
    assert "spark-mlt-sync:x" not in json.dumps(written.history(1))
    assert sorted(r.userId for r in read_delta(spark, table).collect()) == [0, 1, 2, *range(5, 20)]
    assert read_delta(spark, other).count() == 23
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None
