"""Tables on S3 (a local moto server, started by the tests): the jobs end to end, storage
options as a first-class argument, secrets kept out of everything, and the writers' races
(the races run on local disk too).

The jar-free backend is what runs here: Spark writes the files through ``s3a``, the driver
commits with delta-rs through S3's conditional writes. ``tests/storage/test_delta_spark.py`` runs the
same on delta-spark.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch import (
    DecodeOptions,
    MovieLensOptions,
    TokenizeOptions,
    decode_table,
    generate_synthetic,
    tokenize_movielens,
    tokenize_table,
)
from spark_mlt.batch.cli import main as cli_main
from spark_mlt.batch.job.inputs import input_format_of
from spark_mlt.batch.read.inspect import inspect_table
from spark_mlt.column import mlt_encode
from spark_mlt.delta.fs import locate, redact
from spark_mlt.errors import InputFormatError
from spark_mlt.storage import (
    CodecMismatchError,
    StorageOptions,
    orphan_files,
    read_delta,
    read_snapshot,
    s3a_conf,
    vacuum,
    vocabulary_paths,
    write_delta,
)
from tests.support import s3 as local_s3
from tests.support.codecs import CODEC, OTHER
from tests.support.paths import SUPPORT

FAULT_JOBS = SUPPORT / "fault_jobs.py"


def _ids(spark: SparkSession, start: int, rows: int) -> DataFrame:
    ids = spark.range(start, start + rows, numPartitions=2).withColumnRenamed("id", "userId")
    return ids.withColumn("userId_mlt", mlt_encode("userId", CODEC)).withColumn("batch", F.lit(start))


def _user_ids(path: str, options: StorageOptions | None = None) -> list[int]:
    table = DeltaTable(path, storage_options=dict(options or {}) or None).to_pyarrow_table()
    return sorted(table.column("userId").to_pylist())


# ---------------------------------------------------------------------- the jobs on S3
@pytest.mark.slow
@pytest.mark.compat
def test_movielens_and_tokenize_into_s3_then_decode_append_inspect_vacuum_and_read_with_delta_rs(
    spark: SparkSession, s3: local_s3.MotoServer, tmp_path: Path
) -> None:
    bucket, options = s3.bucket(), local_s3.storage_options()
    release = tmp_path / "ml"
    generate_synthetic(release, ratings=600, users=40, movies=30)
    ratings = f"s3a://{bucket}/ratings_mlt"  # Spark's scheme; delta-rs and pyarrow are handed s3://
    first = tokenize_movielens(spark, str(release), ratings, MovieLensOptions(storage_options=options))
    assert first.write is not None
    assert (first.write.backend, first.write.version, first.rows_out) == ("delta-rs", 1, 600)
    assert decode_table(spark, ratings, DecodeOptions(verify=True, storage_options=options)).mismatches == 0

    # the same table named with s3:// appends, the codec check included
    same = f"s3://{bucket}/ratings_mlt"
    again = tokenize_movielens(spark, str(release), same, MovieLensOptions(mode="append", storage_options=options))
    assert again.write is not None
    assert again.write.version == 2
    other = read_delta(spark, same, storage_options=options).limit(5)
    with pytest.raises(CodecMismatchError, match="userId"):
        write_delta(other, same, {"userId": OTHER}, mode="append", storage_options=options)
    info = inspect_table(ratings, storage_options=options)
    assert (info["version"], info["rows"]) == (2, 1200)
    plain = DeltaTable(same, storage_options=dict(options))  # plain delta-rs reads it back
    assert plain.to_pyarrow_table().num_rows == 1200
    assert plain.metadata().configuration["mlt.codec.userId"] == first.codecs["userId"].to_json()

    # any table, with a string key's vocabulary and a quarantine, all on S3
    source = tmp_path / "orders.parquet"
    spark.createDataFrame(
        [(1, "SKU-3", "a"), (2, "SKU-1", "b"), (-5, "SKU-3", "c")], "customer_id bigint, sku string, note string"
    ).write.parquet(str(source))
    orders = f"s3://{bucket}/orders_mlt"
    job = TokenizeOptions(p=13, n=3, handle_invalid="quarantine", storage_options=options)
    report = tokenize_table(spark, str(source), orders, ["customer_id", "sku"], job)
    assert (report.rows_out, report.rows_rejected) == (2, 1)
    assert [r.note for r in read_delta(spark, f"{orders}_quarantine", storage_options=options).collect()] == ["c"]
    stored = read_snapshot(orders, storage_options=options)
    assert stored.properties["mlt.vocabulary.sku"] == "../orders_mlt_vocab/sku"  # beside the table: relative
    assert vocabulary_paths(stored.properties, location=stored.path) == {"sku": f"{orders}_vocab/sku"}
    decoded = decode_table(spark, orders, DecodeOptions(output=f"{orders}_ids", storage_options=options))
    assert decoded.rows_out == 2
    keys = read_delta(spark, f"{orders}_ids", storage_options=options).select("note", "sku").collect()
    assert sorted((r.note, r.sku) for r in keys) == [("a", "SKU-3"), ("b", "SKU-1")]

    # maintenance: an overwrite leaves the old files to vacuum; nothing is an orphan
    tokenize_table(spark, str(source), orders, ["customer_id", "sku"], dataclasses.replace(job, mode="overwrite"))
    assert orphan_files(orders, storage_options=options) == []
    expired = vacuum(orders, retention_hours=0, storage_options=options)
    assert expired
    assert (
        vacuum(orders, retention_hours=0, dry_run=False, allow_short_retention=True, storage_options=options) == expired
    )
    assert vacuum(orders, retention_hours=0, storage_options=options) == []
    assert decode_table(spark, orders, DecodeOptions(verify=True, storage_options=options)).mismatches == 0


def _s3(options: TokenizeOptions) -> dict[str, Any]:
    return {
        "p": options.p,
        "n": options.n,
        "handle_invalid": options.handle_invalid,
        "storage_options": options.storage_options,
    }


def test_files_larger_than_a_part_go_up_in_parts_and_commit(spark: SparkSession, s3: local_s3.MotoServer) -> None:
    """s3a uploads a file above its part size in parts (the AWS Java SDK's multipart upload,
    which the local server must accept as S3 does); the commit and the reads see every row."""
    bucket, options = s3.bucket("parts"), local_s3.storage_options()
    for key, value in {"multipart.size": "5M", "multipart.threshold": "5M", "fast.upload.active.blocks": "2"}.items():
        spark.conf.set(f"fs.s3a.bucket.{bucket}.{key}", value)  # this bucket only: a new s3a instance
    rows = 1_500_000  # about 12 MB of incompressible longs in one file
    df = spark.range(rows, numPartitions=1).select(F.col("id").alias("userId"), F.rand(7).alias("noise"))
    result = write_delta(df, f"s3://{bucket}/parts", storage_options=options)
    assert result.rows == rows
    (size,) = [len(body) for key, body in s3.objects(bucket).items() if key.endswith(".parquet")]
    assert size > 10 * 2**20
    assert read_delta(spark, f"s3://{bucket}/parts", storage_options=options).count() == rows


def test_a_delta_table_on_s3_is_read_as_one_and_a_folder_inside_it_refused(
    s3: local_s3.MotoServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 71 item 9 on S3: a Delta table's folder (``s3://`` or ``s3a://``) is read as Delta
    by default and refused as Parquet files, a partition folder in it is refused naming the
    table as the caller spelled it, and a plain Parquet folder stays Parquet; the CLI refuses
    before it reads anything."""
    rows = pa.table({"id": pa.array([1, 2, 3]), "part": pa.array([0, 1, 1])})
    write_deltalake(str(tmp_path / "orders"), rows, partition_by=["part"])
    table = s3.upload(str(tmp_path / "orders"))  # s3a://<bucket>/table
    bucket = table.removeprefix("s3a://").split("/")[0]
    pq.write_table(rows, tmp_path / "plain.parquet")
    with s3.filesystem.open_output_stream(f"{bucket}/plain/part-0.parquet") as stream:
        stream.write((tmp_path / "plain.parquet").read_bytes())
    options = local_s3.storage_options()
    for scheme in ("s3", "s3a"):
        located = f"{scheme}://{bucket}/table"
        assert input_format_of(located, "auto", storage_options=options) == "delta"
        with pytest.raises(InputFormatError, match=rf"^input_format='parquet': the input {located} is a Delta"):
            input_format_of(located, "parquet", storage_options=options)
        with pytest.raises(InputFormatError, match=rf"is inside the Delta table {located} .*: pass input='{located}'$"):
            input_format_of(f"{located}/part=1", "auto", storage_options=options)
        assert input_format_of(f"{scheme}://{bucket}/plain", "auto", storage_options=options) == "parquet"
    flags = ["--columns", "id", "--output", str(tmp_path / "out"), "--storage-options"]
    flags += [f"{key}={value}" for key, value in options.items()]
    assert cli_main(["tokenize", "--input", f"s3://{bucket}/table/part=1", *flags]) == 2
    assert f"--input 's3://{bucket}/table/part=1' is inside the Delta table" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- storage options and secrets
def test_storage_options_configure_pyarrow_and_spark_and_hide_their_secrets() -> None:
    options = local_s3.storage_options(AWS_SESSION_TOKEN="mlt-test-session-token")
    assert local_s3.SECRET_KEY not in repr(options)
    assert "mlt-test-session-token" not in repr(TokenizeOptions(storage_options=options))
    assert redact(f"failed with {local_s3.SECRET_KEY}", options) == "failed with ***"
    location = locate("s3://bucket/t", options)
    assert (location.root, location.spark_path("x"), location.delta_options) == (
        "bucket/t",
        "s3a://bucket/t/x",
        dict(options),
    )
    assert location.filesystem.region == local_s3.REGION
    conf = s3a_conf(options)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == local_s3.ENDPOINT
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.session.token"] == "mlt-test-session-token"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    with pytest.raises(TypeError, match="storage_options must be a mapping"):
        StorageOptions(["AWS_REGION=x"])  # type: ignore[arg-type]


@pytest.mark.slow
def test_secrets_never_reach_the_table_its_log_the_output_or_an_error(
    spark: SparkSession,
    s3: local_s3.MotoServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The CLI gets the secret as a flag; nothing it writes, prints or logs (at INFO, the
    CLI's level: py4j's DEBUG log echoes every call into the JVM, settings included) holds it."""
    caplog.set_level(logging.INFO)
    bucket = s3.bucket()
    source = tmp_path / "in.parquet"
    spark.range(20).withColumnRenamed("id", "sku").write.parquet(str(source))
    flags = ["--storage-options", *(f"{key}={value}" for key, value in local_s3.storage_options().items())]
    output = f"s3://{bucket}/skus_mlt"
    assert cli_main(["tokenize", "--input", str(source), "--columns", "sku", "--output", output, *flags]) == 0
    assert cli_main(["inspect", "--input", output, *flags]) == 0
    assert cli_main(["vacuum", "--input", output, *flags]) == 0
    assert cli_main(["decode", "--input", output, "--verify", *flags]) == 0
    missing = f"s3://{bucket}-missing/skus_mlt"
    assert cli_main(["decode", "--input", missing, "--verify", *flags]) == 1
    printed = capsys.readouterr()
    assert "spark-mlt: error:" in printed.err
    stored = b"".join(s3.objects(bucket).values())
    for text in (printed.out, printed.err, caplog.text, stored.decode("latin-1")):
        assert local_s3.SECRET_KEY not in text
    assert local_s3.ACCESS_KEY not in json.dumps(
        read_snapshot(output, storage_options=local_s3.storage_options()).properties
    )


# ---------------------------------------------------------------------- writers at once, on S3
def _launch(scenario: str, output: str, start: int, rows: int) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        **local_s3.storage_options(),
        "SPARK_MLT_TEST_FAULT_S3_CONF": json.dumps(local_s3.spark_conf()),
    }
    return subprocess.Popen(
        [sys.executable, str(FAULT_JOBS), scenario, output, str(start), str(rows)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, dict[str, Any], str]:
    out, err = process.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return process.returncode, json.loads(lines[-1]) if lines else {}, err[-3000:]


@pytest.mark.slow
def test_two_processes_appending_to_an_s3_table_at_once_both_land_without_loss_or_duplicates(
    s3: local_s3.MotoServer,
) -> None:
    table = f"s3a://{s3.bucket()}/race"  # does not exist yet: both also race to create it
    first, second = _launch("append", table, 0, 3_000), _launch("append", table, 3_000, 3_000)
    for code, _, err in (_finish(first), _finish(second)):
        assert code == 0, err
    assert _user_ids(table, local_s3.storage_options()) == list(range(6_000))


@pytest.mark.slow
def test_a_writer_killed_before_its_commit_leaves_the_s3_table_unchanged_and_its_files_orphans(
    spark: SparkSession, s3: local_s3.MotoServer
) -> None:
    options = local_s3.storage_options()
    table = f"s3://{s3.bucket()}/crash"
    write_delta(_ids(spark, 0, 500), table, {"userId": CODEC}, storage_options=options)
    code, result, err = _finish(_launch("crash", table, 500, 500))
    assert code == 3, err  # died between Spark's job commit and the Delta commit
    assert read_snapshot(table, storage_options=options).version == 1
    assert _user_ids(table, options) == list(range(500))
    orphans = orphan_files(table, storage_options=options)
    staging = str(result["staging"]).rsplit("/", 1)[-1]
    assert orphans
    assert all(name.startswith(staging + "/") for name in orphans)
    assert (
        sorted(vacuum(table, retention_hours=0, dry_run=False, allow_short_retention=True, storage_options=options))
        == orphans
    )
    assert orphan_files(table, storage_options=options) == []
    write_delta(_ids(spark, 500, 500), table, mode="append", storage_options=options)  # the re-run
    assert _user_ids(table, options) == list(range(1_000))


# ---------------------------------------------------------------------- races at one instant
@pytest.fixture
def commit_race(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Arms a race between the threads ``first`` and ``second`` (see :func:`_in_threads`): each
    reads and checks the table, and only when both are about to commit does ``first`` commit;
    ``second`` then commits what it prepared against the table as it was before ``first``'s
    commit, so it loses the version and must reload, check again and retry."""
    second_ready, first_done = threading.Event(), threading.Event()
    armed: list[bool] = []
    waited = threading.local()
    original = DeltaTable.create_write_transaction

    def racing(self: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        if not armed or getattr(waited, "done", False):
            return original(self, *args, **kwargs)
        waited.done = True
        if threading.current_thread().name == "second":
            second_ready.set()
            first_done.wait(timeout=120)
            return original(self, *args, **kwargs)
        second_ready.wait(timeout=120)
        try:
            return original(self, *args, **kwargs)
        finally:
            first_done.set()

    monkeypatch.setattr(DeltaTable, "create_write_transaction", racing)
    return lambda: armed.append(True)


def _in_threads(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """Runs two writes in threads named ``first`` and ``second``; their results or errors."""
    results: dict[str, Any] = {}

    def run(name: str, write: Callable[[], Any]) -> None:
        try:
            results[name] = write()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            results[name] = error

    threads = [threading.Thread(target=run, args=(n, w), name=n) for n, w in (("first", first), ("second", second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for result in results.values():
        if isinstance(result, BaseException):
            raise result
    return results["first"], results["second"]


def test_two_writers_with_the_same_run_id_at_the_same_instant_commit_once(
    spark: SparkSession, commit_race: Callable[[], None], where: tuple[str, StorageOptions | None]
) -> None:
    """Both have checked that the table lacks the run id when they commit; the first lands,
    the second finds the run id when it retries and writes nothing. (With delta-rs' own retry
    both would land: it rebases a commit without looking at application transactions.)"""
    table, options = where
    write_delta(_ids(spark, 0, 10), table, {"userId": CODEC}, storage_options=options)
    commit_race()
    first, second = _in_threads(
        lambda: write_delta(_ids(spark, 100, 10), table, mode="append", run_id="day-1", storage_options=options),
        lambda: write_delta(_ids(spark, 200, 10), table, mode="append", run_id="day-1", storage_options=options),
    )
    assert (first.skipped, second.skipped) == (False, True)
    assert read_snapshot(table, storage_options=options).version == first.version == 2  # 0: create, 1: first rows
    assert _user_ids(table, options) == [*range(10), *range(100, 110)]


@pytest.mark.parametrize("winner", ["overwrite", "append"])
def test_an_overwrite_racing_an_append_lands_as_if_one_ran_after_the_other(
    spark: SparkSession, commit_race: Callable[[], None], where: tuple[str, StorageOptions | None], winner: str
) -> None:
    """The loser of the commit race checks the table again and commits after the winner: an
    append after an overwrite adds its rows to the overwrite's; an overwrite after an append
    replaces both. Never a half state, nothing to retry by hand."""
    table, options = where
    write_delta(_ids(spark, 0, 10), table, {"userId": CODEC}, storage_options=options)
    commit_race()
    writes = {
        "overwrite": lambda: write_delta(_ids(spark, 100, 10), table, mode="overwrite", storage_options=options),
        "append": lambda: write_delta(_ids(spark, 200, 10), table, mode="append", storage_options=options),
    }
    loser = "append" if winner == "overwrite" else "overwrite"
    first, second = _in_threads(writes[winner], writes[loser])
    assert (first.version, second.version) == (2, 3)  # 0: create, 1: first rows
    expected = [*range(100, 110), *range(200, 210)] if winner == "overwrite" else list(range(100, 110))
    assert _user_ids(table, options) == expected
