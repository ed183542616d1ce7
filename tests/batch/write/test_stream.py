"""Incremental tokenization: new files tokenized as they land, each row exactly once."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_mlt import MLTError, SourceError
from spark_mlt.batch import StreamOptions, TokenizeOptions, inspect_table
from spark_mlt.batch.cli import main
from spark_mlt.batch.job.options import trigger_seconds
from spark_mlt.batch.write.pipeline import TableSink, Tokenized, tokenize_frame
from spark_mlt.batch.write.stream import (
    CHECKPOINT_MARKER,
    StreamTotals,
    check_checkpoint,
    start_stream,
    tokenize_stream,
)
from spark_mlt.capabilities import Capabilities
from spark_mlt.errors import InputFormatError
from spark_mlt.storage import AppTransaction, read_codecs, read_delta, read_snapshot, write_delta
from tests.support import s3 as local_s3
from tests.support.codecs import OTHER
from tests.support.paths import ROOT, SUPPORT


def _land(folder: Path, name: str, ids: list[int | None], skus: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"customer_id": pa.array(ids, pa.int64()), "sku": pa.array(skus, pa.string())})
    pq.write_table(table, folder / f"{name}.parquet")


#: how each batch of the tests' streams is tokenized
BATCH = TokenizeOptions(p=13, n=3, handle_invalid="quarantine")


def _stream(tmp_path: Path, **kwargs: object) -> StreamOptions:
    return StreamOptions(checkpoint=str(tmp_path / "checkpoint"), **kwargs)  # type: ignore[arg-type]


def _ids(spark: SparkSession, path: Path, column: str = "customer_id") -> list[int]:
    return sorted(row[0] for row in read_delta(spark, str(path)).select(column).collect())


@pytest.mark.compat  # the streaming API and foreachBatch differ between lines
def test_available_now_tokenizes_each_new_file_once_across_runs(spark: SparkSession, tmp_path: Path) -> None:
    """Run, land more files, run again: every row once; ids beyond the codec's capacity (13**3)
    in the quarantine once; string keys keep their ids across batches."""
    landing, output = tmp_path / "landing", tmp_path / "orders_mlt"
    _land(landing, "a", [1, 2, 3], ["x", "y", "x"])
    first = tokenize_stream(spark, str(landing), str(output), ["customer_id", "sku"], BATCH, stream=_stream(tmp_path))
    assert (first.rows_out, first.rows_rejected) == (3, 0)
    again = tokenize_stream(spark, str(landing), str(output), ["customer_id", "sku"], BATCH, stream=_stream(tmp_path))
    assert again.rows_in == 0  # nothing new: no batch
    _land(landing, "b", [4, 5_000, None], ["z", "x", "y"])
    _land(landing, "c", [6], ["y"])
    second = tokenize_stream(spark, str(landing), str(output), ["customer_id", "sku"], BATCH, stream=_stream(tmp_path))
    assert (second.rows_out, second.rows_rejected) == (3, 1)
    decoded = read_delta(spark, str(output)).select("customer_id").collect()
    assert sorted(r[0] for r in decoded if r[0] is not None) == [1, 2, 3, 4, 6]
    assert _ids(spark, tmp_path / "orders_mlt_quarantine") == [5_000]
    assert read_codecs(str(output))["customer_id"].capacity == 13**3
    vocabulary = read_delta(spark, str(tmp_path / "orders_mlt_vocab" / "sku")).collect()
    assert sorted(row["key"] for row in vocabulary) == ["x", "y", "z"]
    assert sorted(row["id"] for row in vocabulary) == [0, 1, 2]
    streams = inspect_table(str(output))["streams"]
    assert len(streams) == 1
    assert streams[0]["writer"].startswith("spark-mlt-stream:")
    assert streams[0]["last_batch"] == 1  # two batches: 0 and 1


@pytest.mark.compat  # the streaming API and foreachBatch differ between lines
def test_a_replayed_batch_is_recognised_and_not_written_again(spark: SparkSession, tmp_path: Path) -> None:
    """A batch the table already holds (committed, then the driver died before the checkpoint
    recorded it) is skipped, quarantine included; the next batch id writes."""
    output = tmp_path / "t"
    df = spark.createDataFrame([(1, "a"), (9_999, "b")], "customer_id bigint, sku string")
    options = TokenizeOptions(p=13, n=3, handle_invalid="quarantine", mode="append")

    def batch(batch_id: int) -> Tokenized:
        snapshot = read_snapshot(str(output)) if output.exists() else None
        transaction = AppTransaction("spark-mlt-stream:w", batch_id)
        return tokenize_frame(df, ["customer_id"], TableSink(str(output), snapshot, options, transaction=transaction))

    first = batch(0)
    assert (first.rows_out, first.rows_rejected) == (1, 1)
    replay = batch(0)
    assert replay.write is not None
    assert replay.write.skipped
    assert _ids(spark, output) == [1]
    assert _ids(spark, tmp_path / "t_quarantine") == [9_999]
    after = batch(1)
    assert after.write is not None
    assert not after.write.skipped
    assert _ids(spark, output) == [1, 1]


def test_a_checkpoint_of_another_table_or_columns_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    _land(landing, "a", [1], ["x"])
    tokenize_stream(spark, str(landing), str(tmp_path / "one"), ["customer_id"], BATCH, stream=_stream(tmp_path))
    assert (tmp_path / "checkpoint" / CHECKPOINT_MARKER).is_file()
    with pytest.raises(MLTError, match=r"belongs to the stream into .*one"):
        tokenize_stream(spark, str(landing), str(tmp_path / "two"), ["customer_id"], BATCH, stream=_stream(tmp_path))
    shutil.rmtree(tmp_path / "one")  # the table replaced, with another codec
    other = spark.createDataFrame([(1,)], "customer_id bigint")
    write_delta(other.withColumn("customer_id_mlt", F.lit(0)), str(tmp_path / "one"), {"customer_id": OTHER})
    with pytest.raises(MLTError, match=r"other codecs for \['customer_id'\]"):
        tokenize_stream(spark, str(landing), str(tmp_path / "one"), ["customer_id"], BATCH, stream=_stream(tmp_path))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"checkpoint": ""}, "a stream needs a checkpoint folder"),
        ({"checkpoint": "c", "trigger": "soon"}, "trigger must be 'available-now' or an interval"),
        ({"checkpoint": "c", "max_files_per_trigger": 0}, "max_files_per_trigger must be a positive"),
    ],
)
def test_stream_options_are_checked_when_built(options: dict[str, object], message: str) -> None:
    with pytest.raises(MLTError, match=message):
        StreamOptions(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"run_id": "r"}, "run_id: a stream's batches are idempotent"),
        ({"dry_run": True}, "dry_run: a stream's batches are idempotent"),
        ({"mode": "overwrite"}, "a stream appends"),
    ],
)
def test_a_stream_refuses_batch_settings_before_it_starts(
    spark: SparkSession, tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(MLTError, match=message):
        tokenize_stream(
            spark,
            str(tmp_path / "landing"),
            str(tmp_path / "out"),
            ["customer_id"],
            TokenizeOptions(**options),  # type: ignore[arg-type]
            stream=_stream(tmp_path),
        )
    assert not (tmp_path / "checkpoint").exists()


def test_a_trigger_is_parsed_in_one_place() -> None:
    """Every unit the options accept has its seconds; available-now has none."""
    assert trigger_seconds("available-now") is None
    assert StreamOptions(checkpoint="c").interval is None
    cases = {"500 ms": 0.5, "2 milliseconds": 0.002, "30 seconds": 30, "1 s": 1, "2 min": 120, "1.5 hours": 5400}
    for trigger, seconds in cases.items():
        assert trigger_seconds(trigger) == pytest.approx(seconds)
        assert StreamOptions(checkpoint="c", trigger=trigger).interval == pytest.approx(seconds)


STREAM_JOBS = SUPPORT / "stream_jobs.py"
CAPACITY = 13**3  # the stream's codec (p = 13, n = 3): larger ids go to the quarantine


def _land_rows(folder: Path, name: str, start: int, rows: int) -> list[int]:
    rid = list(range(start, start + rows))
    table = pa.table(
        {
            "rid": pa.array(rid, pa.int64()),
            "customer_id": pa.array([(r * 7919) % 3_000 for r in rid], pa.int64()),
            "sku": pa.array([f"sku-{r % 17}" for r in rid], pa.string()),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / f"{name}.parquet")
    return rid


def _run_stream(landing: Path, output: Path, checkpoint: Path, kill_at: str | None) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        str(STREAM_JOBS),
        str(landing),
        str(output),
        str(checkpoint),
        *([kill_at] if kill_at else []),
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, env=env)


def _rids(path: Path) -> list[int]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table(columns=["rid"]).column("rid").to_pylist())


@pytest.mark.slow
def test_a_stream_killed_at_each_point_and_restarted_holds_every_row_exactly_once(tmp_path: Path) -> None:
    """The driver is killed (SIGKILL) after a vocabulary commit, before a data commit and
    between a data commit and the checkpoint, restarted from the same checkpoint each time
    (three restarts in a row, new files landing while it is down), then runs to the end: every
    landed row is in the table or the quarantine, exactly once, and the quarantine holds exactly
    the ids beyond the codec's capacity."""
    landing, output, checkpoint = tmp_path / "landing", tmp_path / "orders_mlt", tmp_path / "checkpoint"
    landed = _land_rows(landing, "f0", 0, 400) + _land_rows(landing, "f1", 400, 400)
    for n, kill_at in enumerate(("vocabulary", "before-commit", "after-commit"), start=2):
        killed = _run_stream(landing, output, checkpoint, kill_at)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        landed += _land_rows(landing, f"f{n}", n * 400, 400)  # arrives while the stream is down
    finished = _run_stream(landing, output, checkpoint, None)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "is already committed to" in finished.stderr  # the batch the checkpoint missed was replayed, not rewritten
    written, quarantined = _rids(output), _rids(tmp_path / "orders_mlt_quarantine")
    assert sorted(written + quarantined) == sorted(landed)  # each row once: none lost, none twice
    beyond = {r for r in landed if (r * 7919) % 3_000 >= CAPACITY}
    assert set(quarantined) == beyond
    keys = DeltaTable(str(tmp_path / "orders_mlt_vocab" / "sku")).to_pyarrow_table().to_pydict()
    assert sorted(keys["key"]) == sorted(f"sku-{i}" for i in range(17))  # each key once
    assert sorted(keys["id"]) == list(range(17))


def _append_source(spark: SparkSession, source: Path, ids: list[int]) -> None:
    rows = spark.createDataFrame([(i, f"k{i % 3}") for i in ids], "customer_id bigint, sku string")
    write_delta(rows, str(source), {}, mode="append")


@pytest.mark.compat  # the streaming API and foreachBatch differ between lines
def test_without_delta_jars_a_stream_follows_a_delta_table_version_by_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The jar-free source: the table as it is first, then each new version once; a batch the
    checkpoint lost is recognised by the output and not written again; a version that deletes
    rows is refused, as Delta's streaming source refuses it."""
    source, output = tmp_path / "orders", tmp_path / "orders_mlt"
    _append_source(spark, source, [1, 2])
    _append_source(spark, source, [3])
    options, stream = dataclasses.replace(BATCH, input_format="delta"), _stream(tmp_path)
    first = tokenize_stream(spark, str(source), str(output), ["customer_id"], options, stream=stream)
    assert first.rows_out == 3
    _append_source(spark, source, [4, 5])
    _append_source(spark, source, [6])
    second = tokenize_stream(spark, str(source), str(output), ["customer_id"], options, stream=stream)
    assert second.rows_out == 3
    assert _ids(spark, output) == [1, 2, 3, 4, 5, 6]
    marker = tmp_path / "checkpoint" / CHECKPOINT_MARKER
    state = json.loads(marker.read_text())
    marker.write_text(json.dumps({**state, "source_version": state["source_version"] - 1}))  # as if it died
    replay = tokenize_stream(spark, str(source), str(output), ["customer_id"], options, stream=stream)
    assert replay.write is not None
    assert replay.write.skipped
    assert _ids(spark, output) == [1, 2, 3, 4, 5, 6]
    DeltaTable(str(source)).delete("customer_id = 1")
    with pytest.raises(SourceError, match="changes or removes existing rows"):
        tokenize_stream(spark, str(source), str(output), ["customer_id"], options, stream=stream)


@pytest.mark.compat  # the streaming API and foreachBatch differ between lines
def test_a_stream_of_a_delta_tables_folder_follows_the_table_never_its_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Issue 71 item 9: a stream of a Delta table's folder without an input format was a file
    stream, which took every Parquet file in it as new, the removed ones too. By default it
    follows the table; a file format asked for it is refused before the query starts."""
    source, output = tmp_path / "orders", tmp_path / "orders_mlt"
    for ids in ([1, 2], [3, 4]):  # the overwrite removes the first two rows' file
        rows = pa.table({"customer_id": pa.array(ids, pa.int64()), "sku": ["k0", "k1"]})
        write_deltalake(str(source), rows, mode="overwrite")
    report = tokenize_stream(spark, str(source), str(output), ["customer_id"], BATCH, stream=_stream(tmp_path))
    assert (report.rows_out, _ids(spark, output)) == (2, [3, 4])
    files = dataclasses.replace(BATCH, input_format="parquet")
    checkpoint = _stream(tmp_path / "other")
    with pytest.raises(InputFormatError, match=r"^input_format='parquet': the input .* is a Delta table"):
        tokenize_stream(spark, str(source), str(tmp_path / "other_mlt"), ["customer_id"], files, stream=checkpoint)
    with pytest.raises(InputFormatError, match=r"^input_format='parquet'"):
        start_stream(spark, str(source), str(tmp_path / "other_mlt"), ["customer_id"], files, stream=checkpoint)
    assert not (tmp_path / "other").exists()


def test_a_checkpoint_refuses_the_loop_that_did_not_write_it(spark: SparkSession, tmp_path: Path) -> None:
    """A Delta source followed without Delta's jars numbers its batches by source versions, Spark's
    query (with the jars) by batch ids: a checkpoint records its loop, and the other one is
    refused, whichever came first, naming the way forward."""
    source, output = tmp_path / "orders", tmp_path / "orders_mlt"
    _append_source(spark, source, [1, 2])
    options = dataclasses.replace(BATCH, input_format="delta")
    tokenize_stream(spark, str(source), str(output), ["customer_id"], options, stream=_stream(tmp_path))
    marker = json.loads((tmp_path / "checkpoint" / CHECKPOINT_MARKER).read_text())
    assert marker["loop"] == "delta-versions"
    with pytest.raises(
        MLTError, match=r"written by the source table's versions .* Run the stream without Delta's jars"
    ):
        check_checkpoint(str(tmp_path / "checkpoint"), str(output), ["customer_id"], options, loop="spark")
    other = str(tmp_path / "other")
    check_checkpoint(other, str(output), ["customer_id"], options, loop="spark")
    with pytest.raises(
        MLTError, match=r"written by Spark's streaming query.* Run the stream with Delta's jars"
    ) as raised:
        tokenize_stream(
            spark, str(source), str(output), ["customer_id"], options, stream=StreamOptions(checkpoint=other)
        )
    assert raised.value.parameter == "checkpoint"
    assert _ids(spark, output) == [1, 2]  # nothing written by the refused run


@pytest.mark.compat  # the streaming API and foreachBatch differ between lines
def test_a_continuous_stream_tokenizes_files_as_they_land_until_stopped(spark: SparkSession, tmp_path: Path) -> None:
    landing, output = tmp_path / "landing", tmp_path / "orders_mlt"
    _land(landing, "a", [1, 2], ["x", "y"])
    stream = _stream(tmp_path, trigger="1 second")
    query = start_stream(spark, str(landing), str(output), ["customer_id"], BATCH, stream=stream)
    try:
        query.processAllAvailable()
        assert _ids(spark, output) == [1, 2]
        _land(landing, "b", [3], ["z"])
        query.processAllAvailable()
        assert _ids(spark, output) == [1, 2, 3]
    finally:
        query.stop()
    assert not query.isActive


def test_the_cli_streams_with_a_checkpoint(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landing, output = tmp_path / "landing", tmp_path / "orders_mlt"
    _land(landing, "a", [1, 2], ["x", "y"])
    argv = ["tokenize", "--stream", "--checkpoint", str(tmp_path / "chk"), "--input", str(landing)]
    argv += ["--columns", "customer_id", "sku", "--output", str(output)]
    assert main(argv) == 0
    assert "spark-mlt tokenize: rows in 2, out 2, rejected 0" in capsys.readouterr().out
    _land(landing, "b", [3], ["z"])
    assert main(argv) == 0
    assert "spark-mlt tokenize: rows in 1, out 1, rejected 0" in capsys.readouterr().out
    assert main([*argv, "--run-id", "x"]) == 2  # a usage error: the stream's batches are its idempotency keys
    capsys.readouterr()
    assert main(["tokenize", *argv[2:]]) == 2  # a stream's option without --stream
    assert "--checkpoint is an option of --stream: pass --stream too" in capsys.readouterr().err
    assert main(["tokenize", *argv[4:], "--mode", "append", "--run-id", "x"]) == 0  # without them: a batch run
    assert "spark-mlt tokenize: rows in 3, out 3, rejected 0" in capsys.readouterr().out


@pytest.mark.slow  # make test-slow (CI): make test keeps to 10 minutes
@pytest.mark.compat  # the streaming API and foreachBatch differ between lines
def test_a_stream_writes_its_table_and_checkpoint_on_s3(
    spark: SparkSession, s3: local_s3.MotoServer, tmp_path: Path
) -> None:
    bucket, storage = s3.bucket("stream"), local_s3.storage_options()
    landing, output = tmp_path / "landing", f"s3://{bucket}/orders_mlt"
    _land(landing, "a", [1, 2, 9_999], ["x", "y", "x"])
    options = dataclasses.replace(BATCH, storage_options=storage)
    stream = StreamOptions(checkpoint=f"s3://{bucket}/chk")
    first = tokenize_stream(spark, str(landing), output, ["customer_id", "sku"], options, stream=stream)
    assert (first.rows_out, first.rows_rejected) == (2, 1)
    _land(landing, "b", [3], ["z"])
    second = tokenize_stream(spark, str(landing), output, ["customer_id", "sku"], options, stream=stream)
    assert (second.rows_out, second.rows_rejected) == (1, 0)
    rows = read_delta(spark, output, storage_options=storage).select("customer_id").collect()
    assert sorted(r[0] for r in rows) == [1, 2, 3]
    assert inspect_table(output, storage_options=storage)["streams"][0]["last_batch"] == 1


@pytest.mark.compat  # foreachBatch's callback thread differs between lines
def test_every_batch_runs_with_the_capabilities_its_stream_resolved(spark: SparkSession, tmp_path: Path) -> None:
    """The stream resolves its session's capabilities once and hands them to every batch: a
    stream given ones that name a jar of another version fails in its first batch with that
    error, where a batch that asked a session itself (the callback thread's, or none) would not."""
    landing, output = tmp_path / "landing", tmp_path / "orders_mlt"
    _land(landing, "a", [1, 2], ["x", "y"])
    stale = dataclasses.replace(Capabilities.of(spark), jar_version="0.0.9")
    totals = StreamTotals()
    query = start_stream(
        spark,
        str(landing),
        str(output),
        ["customer_id"],
        BATCH,
        stream=_stream(tmp_path),
        capabilities=stale,
        totals=totals,
    )
    with pytest.raises(Exception, match=r"jar version 0\.0\.9") as raised:
        query.awaitTermination(120)
    assert "JarVersionError" in str(raised.value)
    assert not (output / "_delta_log").exists() or _ids(spark, output) == []
    assert totals.report.rows_out == 0
