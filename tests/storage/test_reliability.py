"""Reliability: faults, idempotent re-runs, concurrent writers, bad input, fuzzing and scale.

The fault scenarios run tests/support/fault_jobs.py in separate processes (own JVM): a task that
fails once and is retried, a driver that dies between Spark's job commit and the Delta
commit, and two processes appending to one table at once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_mlt import MLTCodec
from spark_mlt.batch import DecodeOptions, TokenizeOptions, decode_table, tokenize_table
from spark_mlt.batch.cli import main as cli_main
from spark_mlt.column import mlt_decode, mlt_encode
from spark_mlt.errors import InvalidTokenError, MLTError
from spark_mlt.storage import (
    MissingCodecError,
    WriteOptions,
    orphan_files,
    read_codecs,
    read_delta,
    token_write_options,
    vacuum,
    write_delta,
)
from tests.support.codecs import CODEC
from tests.support.paths import SUPPORT
from tests.support.spark_lines import ENGINES

FAULT_JOBS = SUPPORT / "fault_jobs.py"


def _launch(scenario: str, output: Path, start: int, rows: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(FAULT_JOBS), scenario, str(output), str(start), str(rows)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, dict[str, object], str]:
    out, err = process.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return process.returncode, json.loads(lines[-1]) if lines else {}, err[-3000:]


def _committed(path: Path) -> tuple[list[int], list[list[int]]]:
    table = DeltaTable(str(path)).to_pyarrow_table()
    return table.column("userId").to_pylist(), table.column("userId_mlt").to_pylist()


def _assert_exactly_once(path: Path, expected: range) -> None:
    ids, tokens = _committed(path)
    assert len(ids) == len(expected), f"{len(ids)} rows committed, expected {len(expected)}"
    assert sorted(ids) == list(expected)  # every id once: none lost, none duplicated
    codec = read_codecs(str(path))["userId"]
    assert codec.decode(np.array(tokens)).tolist() == ids


# ---------------------------------------------------------------------- faults
@pytest.mark.slow
def test_a_task_that_fails_once_is_retried_and_commits_every_row_exactly_once(tmp_path: Path) -> None:
    table = tmp_path / "retry"
    code, result, err = _finish(_launch("retry", table, 0, 40_000))
    assert code == 0, err
    attempts = sorted(os.listdir(f"{table}.attempts"))
    assert "1-1" in attempts, f"partition 1 was not retried: {attempts}"  # the injected failure happened
    assert result["rows"] == 40_000
    _assert_exactly_once(table, range(40_000))
    assert orphan_files(table) == []  # the failed attempt's files never reached the table folder


def _append_here(spark: SparkSession, table: Path, start: int, rows: int) -> None:
    """The same append as fault_jobs.py's, in this process."""
    ids = spark.range(start, start + rows, numPartitions=4).withColumnRenamed("id", "userId")
    df = ids.withColumn("userId_mlt", mlt_encode("userId", CODEC)).withColumn("batch", F.lit(start))
    write_delta(df, str(table), {"userId": CODEC}, mode="append")


@pytest.mark.slow
def test_a_driver_dying_before_the_commit_leaves_the_table_unchanged_and_a_rerun_succeeds(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "crash"
    _append_here(spark, table, 0, 1_000)
    code, result, err = _finish(_launch("crash", table, 1_000, 1_000))
    assert code == 3, err  # died between Spark's job commit and the Delta commit
    assert result["crashed"] is True
    assert DeltaTable(str(table)).version() == 1  # create + first append: the crash committed nothing
    _assert_exactly_once(table, range(1_000))
    orphans = orphan_files(table)
    staging = os.path.basename(str(result["staging"]))
    assert orphans
    assert all(name.startswith(staging + "/") for name in orphans)
    assert vacuum(table) == []  # younger than the 7-day retention: a write in flight is never touched
    assert sorted(vacuum(table, retention_hours=0, dry_run=False, allow_short_retention=True)) == orphans
    assert orphan_files(table) == []
    assert not os.path.exists(table / staging)

    _append_here(spark, table, 1_000, 1_000)  # the re-run
    _assert_exactly_once(table, range(2_000))


@pytest.mark.slow
def test_two_processes_appending_at_once_both_land_without_loss_or_duplicates(tmp_path: Path) -> None:
    table = tmp_path / "race"  # does not exist yet: both also race to create it
    first, second = _launch("append", table, 0, 5_000), _launch("append", table, 5_000, 5_000)
    outcomes = [_finish(first), _finish(second)]
    for code, _, err in outcomes:
        assert code == 0, err
    _assert_exactly_once(table, range(10_000))
    history = DeltaTable(str(table)).history()
    assert sum(1 for entry in history if entry.get("spark_mlt.rows") == 5_000) == 2


# ---------------------------------------------------------------------- idempotent runs
def test_a_rerun_with_the_same_run_id_writes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "runs")
    df = spark.range(100).withColumnRenamed("id", "userId").withColumn("userId_mlt", mlt_encode("userId", CODEC))
    first = write_delta(df, path, {"userId": CODEC}, mode="append", run_id="2026-11-22")
    again = write_delta(df, path, {"userId": CODEC}, mode="append", run_id="2026-11-22")
    other = write_delta(df, path, {"userId": CODEC}, mode="append", run_id="2026-11-23")
    assert (first.skipped, again.skipped, other.skipped) == (False, True, False)
    assert again.version == first.version
    assert other.version == first.version + 1
    assert DeltaTable(path).to_pyarrow_table().num_rows == 200
    assert DeltaTable(path).transaction_version("spark-mlt:2026-11-22") == 1
    assert not [name for name in os.listdir(path) if name.startswith("mlt-") and not os.listdir(Path(path, name))]


def test_the_cli_reports_an_already_committed_run_and_exits_0(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = str(tmp_path / "in")
    spark.range(50).withColumnRenamed("id", "sku").write.parquet(source)
    argv = ["tokenize", "--input", source, "--columns", "sku", "--output", str(tmp_path / "out")]
    argv += ["--mode", "append", "--run-id", "r1"]
    assert cli_main(argv) == 0
    assert cli_main(argv) == 0
    assert "run id already committed: nothing written" in capsys.readouterr().out
    assert DeltaTable(str(tmp_path / "out")).to_pyarrow_table().num_rows == 50


def _encodings(path: Path) -> dict[str, tuple[str, ...]]:
    files = list(DeltaTable(str(path)).file_uris())
    columns = pq.read_metadata(files[0]).row_group(0)
    return {columns.column(i).path_in_schema: columns.column(i).encodings for i in range(columns.num_columns)}


def test_token_columns_are_written_without_dictionary_in_v2_pages(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.range(1000).select(F.col("id").alias("userId"), (F.col("id") % 3).alias("part"))
    df = df.withColumn("userId_mlt", mlt_encode("userId", CODEC))
    options = token_write_options(df, ["userId_mlt"])
    assert options == {"parquet.writer.version": "v2", "parquet.enable.dictionary#userId_mlt.list.element": "false"}
    write_delta(df.coalesce(1), str(tmp_path / "v2"), {"userId": CODEC}, options=WriteOptions(parquet_options=options))
    encodings = _encodings(tmp_path / "v2")
    assert "DELTA_BINARY_PACKED" in encodings["userId_mlt.list.element"]  # v2's integer encoding, no dictionary
    assert not any("DICTIONARY" in e for e in encodings["userId_mlt.list.element"])
    assert any("DICTIONARY" in e for e in encodings["part"])  # other columns keep Spark's defaults

    options = token_write_options(df, ["userId_mlt"], data_page_version=1)
    assert options == {"parquet.enable.dictionary#userId_mlt.list.element": "false"}
    write_delta(df.coalesce(1), str(tmp_path / "v1"), {"userId": CODEC}, options=WriteOptions(parquet_options=options))
    assert set(_encodings(tmp_path / "v1")["userId_mlt.list.element"]) == {"PLAIN", "RLE"}  # order varies


@pytest.mark.parametrize("version", [0, 3, True, "2", None])
def test_a_data_page_version_other_than_1_or_2_is_refused(version: object) -> None:
    """Checked before the DataFrame is looked at: no Spark needed."""
    with pytest.raises(MLTError, match=rf"^data_page_version must be 1 or 2; got {version!r}"):
        token_write_options(None, ["userId_mlt"], data_page_version=version)  # type: ignore[arg-type]


def test_v2_pages_of_every_column_type_read_back_the_same_in_spark_and_delta_rs(
    spark: SparkSession, tmp_path: Path
) -> None:
    schema = (
        "userId bigint, small int, price decimal(12,2), score double, name string, flag boolean, day date, "
        "at timestamp, local timestamp_ntz, tags array<string>, point struct<x: int, y: double>, part string"
    )
    rows = [
        (
            i,
            i % 7 if i % 5 else None,
            Decimal(i) / 4,
            i / 3 if i % 4 else None,
            f"key-{i % 11}" if i % 6 else None,
            i % 2 == 0 if i % 9 else None,
            dt.date(2020, 1, 1) + dt.timedelta(days=i),
            dt.datetime(2026, 11, 22, 12, 0, 0) + dt.timedelta(seconds=i) if i % 8 else None,
            dt.datetime(2026, 11, 22, 12, 0, 0) + dt.timedelta(minutes=i),
            [f"t{i % 3}", "x"] if i % 10 else None,
            (i, i / 2) if i % 12 else None,
            "a" if i % 2 else "b",
        )
        for i in range(300)
    ]
    df = spark.createDataFrame(rows, schema).withColumn("userId_mlt", mlt_encode("userId", CODEC))
    path = tmp_path / "t"
    write_delta(
        df.repartition(2),
        str(path),
        {"userId": CODEC},
        options=WriteOptions(partition_by=["part"], parquet_options=token_write_options(df, ["userId_mlt"])),
    )
    expected = sorted(tuple(r) for r in df.collect())
    assert sorted(tuple(r) for r in read_delta(spark, str(path)).select(*df.columns).collect()) == expected
    arrow = DeltaTable(str(path)).to_pyarrow_table().select(df.columns).sort_by("userId")
    assert arrow.column("userId_mlt").to_pylist() == [list(r.userId_mlt) for r in df.orderBy("userId").collect()]
    assert arrow.column("name").to_pylist() == [r[4] for r in rows]
    assert arrow.column("price").to_pylist() == [r[2] for r in rows]
    assert arrow.column("tags").to_pylist() == [r[9] for r in rows]
    assert arrow.column("day").to_pylist() == [r[6] for r in rows]
    utc = dt.timezone.utc  # the session's time zone (spark_mlt.batch.job.session): naive datetimes are UTC
    assert arrow.column("at").to_pylist() == [r[7] and r[7].replace(tzinfo=utc) for r in rows]
    assert arrow.column("local").to_pylist() == [r[8] for r in rows]


# ---------------------------------------------------------------------- bad input
def test_an_empty_input_writes_an_empty_table_with_codecs(spark: SparkSession, tmp_path: Path) -> None:
    source = str(tmp_path / "in")
    spark.range(0).withColumnRenamed("id", "sku").write.parquet(source)
    report = tokenize_table(spark, source, str(tmp_path / "out"), ["sku"], TokenizeOptions(p=13, n=3))
    assert (report.rows_in, report.rows_out) == (0, 0)
    assert read_codecs(str(tmp_path / "out"))["sku"] == MLTCodec.from_seed(13, 3, 42)


def test_a_missing_column_is_named_before_any_work(spark: SparkSession, tmp_path: Path) -> None:
    source = str(tmp_path / "in")
    spark.range(3).withColumnRenamed("id", "sku").write.parquet(source)
    with pytest.raises(MLTError, match=r"column\(s\) \['store'\] not in the input"):
        tokenize_table(spark, source, str(tmp_path / "out"), ["store"])
    assert not os.path.exists(tmp_path / "out")


def test_bad_ids_are_quarantined_with_reasons_and_none_lost(spark: SparkSession, tmp_path: Path) -> None:
    source = str(tmp_path / "in")
    rows = [(0,), (None,), (-1,), (CODEC.max_id,), (CODEC.max_id + 1,), (2**63 - 1,), (-(2**63),), (7,)]
    spark.createDataFrame(rows, "sku bigint").write.parquet(source)
    out = str(tmp_path / "out")
    options = TokenizeOptions(p=CODEC.p, n=CODEC.n, handle_invalid="quarantine", quarantine=f"{out}_q")
    report = tokenize_table(spark, source, out, ["sku"], options)
    assert (report.rows_in, report.rows_out, report.rows_rejected) == (8, 4, 4)
    kept = DeltaTable(out).to_pyarrow_table().to_pydict()
    assert sorted(kept["sku"], key=lambda v: -1 if v is None else v) == [None, 0, 7, CODEC.max_id]
    rejected = DeltaTable(f"{out}_q").to_pyarrow_table().to_pydict()
    assert sorted(rejected["sku"]) == sorted([-1, CODEC.max_id + 1, 2**63 - 1, -(2**63)])
    reasons = dict(zip(rejected["sku"], rejected["mlt_reason"], strict=True))
    domain = f"[0, {CODEC.capacity}) of its codec (p={CODEC.p}, n={CODEC.n})"
    assert reasons[-1] == f"sku: id -1 is negative: ids are in {domain}"
    assert reasons[-(2**63)].startswith(f"sku: id {-(2**63)} is negative")
    for big in (CODEC.max_id + 1, 2**63 - 1):
        assert reasons[big].startswith(f"sku: id {big} is out of range {domain}: re-size the codec"), reasons[big]


def test_decoding_a_table_without_codec_properties_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "plain")
    write_delta(spark.range(3).withColumn("id_mlt", F.array(F.lit(1))), path, {})
    with pytest.raises(MissingCodecError, match="stores no codec"):
        decode_table(spark, path, DecodeOptions(verify=True))


# ---------------------------------------------------------------------- fuzzing the decoder
@given(
    st.lists(st.integers(min_value=-3, max_value=CODEC.p + 2), min_size=0, max_size=CODEC.n + 2).filter(
        lambda t: len(t) != CODEC.n or any(not 0 <= v < CODEC.p for v in t)
    )
)
def test_random_invalid_token_vectors_are_rejected(tokens: list[int]) -> None:
    if len(tokens) != CODEC.n:
        with pytest.raises(MLTError):
            CODEC.decode(np.array([tokens]).reshape(1, -1))
        return
    with pytest.raises(InvalidTokenError):
        CODEC.decode(np.array([tokens]))
    _ids, ok = CODEC.decode_masked(np.array([tokens]))
    assert not ok[0]


@given(st.lists(st.integers(min_value=0, max_value=CODEC.p - 1), min_size=CODEC.n, max_size=CODEC.n))
def test_random_valid_token_vectors_decode_to_the_id_that_encodes_back_to_them(tokens: list[int]) -> None:
    (decoded,) = CODEC.decode(np.array([tokens]))
    assert 0 <= decoded < CODEC.capacity
    assert CODEC.encode([decoded])[0].tolist() == tokens


@pytest.mark.parametrize("engine", ENGINES)
def test_spark_decoders_agree_with_numpy_on_random_token_vectors(spark: SparkSession, engine: str) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.integers(-2, CODEC.p + 2, size=(2_000, CODEC.n))
    vectors[:1_000] = rng.integers(0, CODEC.p, size=(1_000, CODEC.n))  # half valid
    rows = [(i, v.tolist()) for i, v in enumerate(vectors)]
    rows += [(2_000, [1] * (CODEC.n - 1)), (2_001, [1] * (CODEC.n + 1)), (2_002, None)]
    df = spark.createDataFrame(rows, "i int, t array<int>")
    got = dict(df.select("i", mlt_decode("t", CODEC, handle_invalid="null", engine=engine).alias("id")).collect())
    expected_ids, ok = CODEC.decode_masked(vectors)
    for i in range(len(vectors)):
        assert got[i] == (int(expected_ids[i]) if ok[i] else None), f"row {i}: {vectors[i].tolist()}"
    assert got[2_000] is None
    assert got[2_001] is None
    assert got[2_002] is None
    assert ok[:1_000].all()
    assert not ok[1_000:].all()


# ---------------------------------------------------------------------- skew and wide codecs
@pytest.mark.parametrize("engine", ENGINES)
def test_skewed_keys_round_trip(spark: SparkSession, engine: str) -> None:
    df = spark.range(100_000).select(F.when(F.col("id") % 10 < 3, F.lit(424_242)).otherwise(F.col("id")).alias("id"))
    tokens = df.select("id", mlt_encode("id", CODEC, engine=engine).alias("t"))
    back = tokens.select("id", mlt_decode("t", CODEC, engine=engine).alias("back"))
    stats = back.agg(
        F.count("*").alias("rows"),
        F.sum((~F.col("id").eqNullSafe(F.col("back"))).cast("int")).alias("mismatches"),  # a null counts
        F.sum((F.col("id") == 424_242).cast("int")).alias("hot"),
    ).first()
    assert stats is not None
    assert (stats["rows"], stats["mismatches"], stats["hot"]) == (100_000, 0, 30_000)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_codec_with_32_tokens_round_trips_in_spark(spark: SparkSession, engine: str) -> None:
    wide = MLTCodec.from_seed(3, 32, seed=5)
    ids = [0, 1, 2, 12_345_678_901, wide.max_id]
    df = spark.createDataFrame([(i,) for i in ids], "id bigint")
    rows = df.select(mlt_encode("id", wide, engine=engine).alias("t")).select(
        "t", mlt_decode("t", wide, engine=engine).alias("id")
    )
    collected = rows.collect()
    assert [r["id"] for r in collected] == ids
    assert [r["t"] for r in collected] == wide.encode(ids).tolist()
    assert all(len(r["t"]) == 32 for r in collected)
