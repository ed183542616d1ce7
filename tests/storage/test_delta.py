"""Delta storage through delta-rs (the embedded default): real tables under tmp_path."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark_mlt import CodecFormatError
from spark_mlt.column import mlt_encode
from spark_mlt.delta import locate
from spark_mlt.delta.vacuum import orphan_files
from spark_mlt.errors import MLTError
from spark_mlt.storage import (
    CodecMismatchError,
    TableExistsError,
    WriteOptions,
    read_codecs,
    read_delta,
    write_delta,
)
from spark_mlt.storage.vocabulary import number_keys
from tests.support.codecs import CODEC, OTHER
from tests.support.spark_lines import QUERY_ERRORS

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)


def _ratings(spark: SparkSession, start: int = 0, rows: int = 200) -> DataFrame:
    df = spark.range(start, start + rows).select(
        F.col("id").alias("userId"),
        (F.col("id") % 3).cast("int").alias("part"),
        (F.col("id") % 5 + 0.5).alias("rating"),
    )
    return df.withColumn("userId_mlt", mlt_encode("userId", CODEC))


def test_create_stores_codecs_and_delta_rs_alone_reads_the_same_rows(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    df = _ratings(spark)
    result = write_delta(df, path, {"userId": CODEC}, options=WriteOptions(commit_info={"job": "test"}))
    assert (result.rows, result.backend, result.version) == (200, "delta-rs", 1)
    table = DeltaTable(path)
    assert table.metadata().configuration["mlt.codec.userId"] == CODEC.to_json()
    assert table.metadata().configuration["mlt.format.version"] == "1"
    assert read_codecs(path) == {"userId": CODEC}
    arrow = table.to_pyarrow_table()
    assert arrow.num_rows == 200
    assertDataFrameEqual(spark.createDataFrame(arrow.to_pandas()), df)
    history = table.history()
    assert history[0]["job"] == "test"
    assert history[0]["spark_mlt.rows"] == 200
    assert DeltaTable(path, version=0).to_pyarrow_table().num_rows == 0  # properties before any data
    assert read_codecs(path, version=0) == {"userId": CODEC}


def test_append_reuses_codecs_and_time_travel_reads_old_versions(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 100), path, {"userId": CODEC})
    write_delta(_ratings(spark, 100, 50), path, {"userId": CODEC}, mode="append")
    assert read_delta(spark, path).count() == 150
    assert read_delta(spark, path, version=1).count() == 100
    assertDataFrameEqual(read_delta(spark, path), _ratings(spark, 0, 150))


def test_overwrite_replaces_rows_and_keeps_history(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 100), path, {"userId": CODEC})
    write_delta(_ratings(spark, 500, 10), path, {"userId": CODEC}, mode="overwrite")
    assertDataFrameEqual(read_delta(spark, path), _ratings(spark, 500, 10))
    assert read_delta(spark, path, version=1).count() == 100


def test_mode_error_refuses_an_existing_table(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 10), path, {"userId": CODEC})
    with pytest.raises(TableExistsError, match=r"a Delta table already exists at .*ratings"):
        write_delta(_ratings(spark, 0, 10), path, {"userId": CODEC})


def test_a_different_codec_for_a_stored_column_is_refused_and_the_table_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 10), path, {"userId": CODEC})
    other = OTHER
    for mode in ("append", "overwrite"):
        with pytest.raises(CodecMismatchError, match=r"already stores a codec for column 'userId' .*seed=42.*seed=43"):
            write_delta(_ratings(spark, 0, 10), path, {"userId": other}, mode=mode)  # type: ignore[arg-type]
    assert DeltaTable(path).version() == 1
    assert read_codecs(path) == {"userId": CODEC}


def test_a_schema_mismatch_on_append_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 10), path, {"userId": CODEC})
    with pytest.raises(MLTError, match=r"schema does not match the table"):
        write_delta(_ratings(spark, 0, 10).drop("rating"), path, {"userId": CODEC}, mode="append")
    assert DeltaTable(path).version() == 1


def test_partitioned_tables_round_trip(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark), path, {"userId": CODEC}, options=WriteOptions(partition_by=["part"]))
    table = DeltaTable(path)
    assert table.metadata().partition_columns == ["part"]
    if int(pa.__version__.split(".")[0]) >= 21:  # delta-rs reads partitioned tables with pyarrow >= 21
        assert table.to_pyarrow_table().num_rows == 200
    assertDataFrameEqual(read_delta(spark, path), _ratings(spark))
    write_delta(_ratings(spark, 200, 30), path, {"userId": CODEC}, mode="append")
    assert read_delta(spark, path).where("part = 2").count() == _ratings(spark, 0, 230).where("part = 2").count()


@pytest.mark.parametrize("column", ["_p", "a:b"])
def test_a_partition_column_named_with_an_underscore_or_an_escaped_character_keeps_every_row(
    spark: SparkSession, tmp_path: Path, column: str
) -> None:
    """Pins the staging listing: a partition column ``_p`` has folders ``_p=0``, which are data
    (Spark and Hadoop hide names starting with ``_`` or ``.`` but not partition folders), and a
    column whose name Spark escapes in its folders (``a%3Ab=0``) keeps its values. Before, the
    first committed no file (0 of 10 rows), the second nulls for its values."""
    path = str(tmp_path / "t")
    rows = spark.range(10).select("id", (F.col("id") % 2).alias(column))
    write_delta(rows, path, options=WriteOptions(partition_by=[column]))
    assertDataFrameEqual(read_delta(spark, path), rows)
    # delta-rs reads it too (through DataFusion: deltalake 1.6.3's to_pyarrow_table fails on a
    # partitioned table with pyarrow 14, Spark 3.5's stack, whoever wrote it)
    query = f'SELECT id, "{column}" AS v FROM t'
    arrow = QueryBuilder().register("t", DeltaTable(path)).execute(query).read_all()
    assert sorted(zip(arrow.column("id").to_pylist(), arrow.column("v").to_pylist(), strict=True)) == [
        (i, i % 2) for i in range(10)
    ]
    # a file a write left in such a folder uncommitted is an orphan for vacuum, as delta-spark's takes it
    committed = next(f for f in DeltaTable(path).file_uris() if f"{_folder(column)}=1" in f)
    left = Path(committed.removeprefix("file://")).with_name("part-left-behind.parquet")
    shutil.copy(committed.removeprefix("file://"), left)
    assert [p.rsplit("/", 1)[-1] for p in orphan_files(locate(path))] == [left.name]


def _folder(column: str) -> str:
    return column.replace(":", "%3A")


def test_a_tampered_codec_property_is_refused_on_read(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 10), path, {"userId": CODEC})
    document = json.loads(CODEC.to_json())
    document["M"][0][0] = (document["M"][0][0] + 1) % 7
    DeltaTable(path).alter.set_table_properties({"mlt.codec.userId": json.dumps(document)}, raise_if_not_exists=False)
    with pytest.raises(CodecFormatError, match=r"property mlt.codec.userId: .*fingerprint .* does not match"):
        read_codecs(path)
    DeltaTable(path).alter.set_table_properties({"mlt.codec.userId": '{"trunc'}, raise_if_not_exists=False)
    with pytest.raises(CodecFormatError, match=r"not valid JSON"):
        read_codecs(path)


def test_a_failing_job_leaves_no_new_version_and_no_files(spark: SparkSession, tmp_path: Path) -> None:
    """Pins atomicity: a row that fails mlt_encode (handle_invalid=error) aborts the write."""
    path = str(tmp_path / "ratings")
    write_delta(_ratings(spark, 0, 10), path, {"userId": CODEC})
    before = sorted(os.listdir(path))
    bad = spark.range(0, 1000).select(F.when(F.col("id") == 777, -1).otherwise(F.col("id")).alias("userId"))
    bad = bad.select(
        "userId",
        (F.col("userId") % 3).cast("int").alias("part"),
        F.lit(0.5).alias("rating"),
        mlt_encode("userId", CODEC).alias("userId_mlt"),
    )
    with pytest.raises(QUERY_ERRORS, match=r"id -1 is outside"):
        write_delta(bad, path, {"userId": CODEC}, mode="append")
    assert DeltaTable(path).version() == 1
    assert sorted(os.listdir(path)) == before


def test_read_codecs_of_a_missing_table_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no Delta table at"):
        read_codecs(tmp_path / "nothing")


def test_new_vocabulary_keys_are_numbered_densely_in_parallel_and_the_same_on_a_rerun(spark: SparkSession) -> None:
    """No window over one partition: the keys are numbered per hash bucket (the plan's window
    is partitioned by the bucket), ids 7.. without gaps, the same for the same keys."""
    keys = spark.range(5000).select(F.concat(F.lit("k"), F.col("id").cast("string")).alias("key")).repartition(4)
    numbered = number_keys(spark, keys, 7)
    assert numbered is not None
    plan = numbered._jdf.queryExecution().executedPlan().toString()
    assert "Window" in plan
    assert "SinglePartition" not in plan
    rows = dict(tuple(r) for r in numbered.collect())
    assert sorted(rows.values()) == list(range(7, 5007))
    again = number_keys(spark, keys.repartition(3), 7)
    assert again is not None
    assert dict(tuple(r) for r in again.collect()) == rows
    assert number_keys(spark, keys.limit(0), 0) is None
