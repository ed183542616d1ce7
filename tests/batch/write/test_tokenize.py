"""The batch jobs end to end: MovieLens releases, warehouse tables, decode --verify, the CLI."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark_mlt import CodecParameterError, MLTCodec, MLTError
from spark_mlt.batch import (
    DecodeOptions,
    MovieLensOptions,
    TokenizeOptions,
    decode_table,
    detect_release,
    generate_synthetic,
    read_ratings,
    tokenize_movielens,
    tokenize_table,
    unpack_token_columns,
)
from spark_mlt.batch.cli import main
from spark_mlt.batch.cli.flags import names_of
from spark_mlt.batch.job.inputs import input_format_of
from spark_mlt.batch.write.pipeline import TableSink, counts_with_the_write, tokenize_frame
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_encode
from spark_mlt.errors import InputFormatError, TableSchemaError
from spark_mlt.options import HandleInvalid
from spark_mlt.storage import WriteOptions, read_codecs, read_delta, read_snapshot, snapshot_for_write, write_delta
from tests.support.delta_opens import count_delta_opens
from tests.support.paths import ROOT
from tests.support.spark_lines import QUERY_ERRORS

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)

VERIFY = DecodeOptions(verify=True)
APPEND = MovieLensOptions(mode="append")


RATINGS = [(1, 31, 2.5, 1260759144), (1, 1029, 3.0, 1260759179), (7, 1061, 4.5, 1260759182), (138493, 10, 5.0, 1)]


def _write_release(folder: Path, release: str, line_ending: str) -> Path:
    folder.mkdir(parents=True)
    if release == "ml-100k":
        text = line_ending.join(f"{u}\t{m}\t{int(r)}\t{t}" for u, m, r, t in RATINGS)
        (folder / "u.data").write_bytes((text + line_ending).encode())
    elif release == "ml-1m":
        text = line_ending.join(f"{u}::{m}::{int(r)}::{t}" for u, m, r, t in RATINGS)
        (folder / "ratings.dat").write_bytes((text + line_ending).encode())
    else:
        rows = ["userId,movieId,rating,timestamp"] + [f"{u},{m},{r},{t}" for u, m, r, t in RATINGS]
        (folder / "ratings.csv").write_bytes((line_ending.join(rows) + line_ending).encode())
    return folder


@pytest.mark.parametrize("line_ending", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("release", ["ml-100k", "ml-1m", "ml-latest"])
def test_every_movielens_release_reads_the_same_ratings(
    spark: SparkSession, tmp_path: Path, release: str, line_ending: str
) -> None:
    folder = _write_release(tmp_path / release, release, line_ending)
    rows = read_ratings(spark, folder).orderBy("userId", "movieId").collect()
    expected = [(u, m, r if release == "ml-latest" else float(int(r)), t) for u, m, r, t in RATINGS]
    assert [tuple(r) for r in rows] == sorted(expected)


def test_a_folder_without_ratings_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"not a MovieLens release folder: expected one of ratings.csv"):
        detect_release(tmp_path)


def test_movielens_job_writes_tokens_label_and_both_codecs(spark: SparkSession, tmp_path: Path) -> None:
    folder = _write_release(tmp_path / "ml", "ml-latest", "\r\n")
    output = str(tmp_path / "out")
    report = tokenize_movielens(spark, str(folder), output, MovieLensOptions(p=7))
    assert report.rows_out == 4
    codecs = read_codecs(output)
    assert set(codecs) == {"userId", "movieId"}
    assert codecs["userId"].capacity > 138_493  # sized from the largest id: p^n > V
    table = DeltaTable(output).to_pyarrow_table().to_pandas().sort_values(["userId", "movieId"])
    assert table["label"].tolist() == [0, 0, 1, 1]
    expected = codecs["userId"].encode(table["userId"].to_numpy())
    assert report.layouts == {"userId": "packed", "movieId": "packed"}  # the default: one bigint per id
    assert table["userId_mlt"].dtype == np.int64
    np.testing.assert_array_equal(codecs["userId"].unpack(table["userId_mlt"].to_numpy()), expected)
    assert decode_table(spark, output, VERIFY).mismatches == 0
    unpacked = unpack_token_columns(read_delta(spark, output), codecs).orderBy("userId", "movieId")
    assert [r.userId_mlt for r in unpacked.collect()] == expected.tolist()


def test_array_layout_on_request_and_appends_keep_the_tables_layout(spark: SparkSession, tmp_path: Path) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=200, users=20, movies=30)
    output = str(tmp_path / "out")
    first = tokenize_movielens(spark, str(folder), output, MovieLensOptions(layout="array"))
    assert first.layouts == {"userId": "array", "movieId": "array"}
    assert read_delta(spark, output).schema["userId_mlt"].dataType.simpleString() == "array<int>"
    second = tokenize_movielens(spark, str(folder), output, APPEND)  # auto: the table's layout
    assert second.layouts == first.layouts
    with pytest.raises(MLTError, match=r"stores the tokens of '(userId|movieId)' as 'array'; pass layout='auto'"):
        tokenize_movielens(spark, str(folder), output, MovieLensOptions(mode="append", layout="packed"))
    report = decode_table(spark, output, VERIFY)
    assert (report.rows_in, report.mismatches, report.layouts["userId"]) == (400, 0, "array")
    with pytest.raises(CodecParameterError, match="store these tokens as arrays"):
        tokenize_movielens(
            spark, str(folder), str(tmp_path / "wide"), MovieLensOptions(p=2_147_483_647, n=3, layout="packed")
        )
    wide = tokenize_movielens(spark, str(folder), str(tmp_path / "wide"), MovieLensOptions(p=2_147_483_647, n=3))
    assert wide.layouts == {"userId": "array", "movieId": "array"}  # auto: 93 bits do not pack


def test_append_reuses_stored_codecs_and_overwrite_replaces(spark: SparkSession, tmp_path: Path) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=500, users=50, movies=80)
    output = str(tmp_path / "out")
    first = tokenize_movielens(spark, str(folder), output, MovieLensOptions(p=13))
    second = tokenize_movielens(spark, str(folder), output, APPEND)  # no p: stored codecs win
    assert second.codecs == first.codecs
    assert read_delta(spark, output).count() == 1000
    tokenize_movielens(spark, str(folder), output, MovieLensOptions(mode="overwrite"))
    assert read_delta(spark, output).count() == 500
    assert DeltaTable(output).version() == 3


def test_warehouse_table_quarantines_bad_rows_and_loses_none(spark: SparkSession, tmp_path: Path) -> None:
    source = str(tmp_path / "orders.parquet")
    spark.createDataFrame(
        [(1, 10, "a"), (2, -5, "b"), (None, 11, "c"), (4, 10**12, "d"), (5, 12, "e")],
        "customer_id bigint, product_id bigint, note string",
    ).write.parquet(source)
    output = str(tmp_path / "orders_mlt")
    options = TokenizeOptions(p=13, n=3, handle_invalid="quarantine")
    report = tokenize_table(spark, source, output, ["customer_id", "product_id"], options)
    assert (report.rows_in, report.rows_out, report.rows_rejected) == (5, 3, 2)
    rejected = read_delta(spark, f"{output}_quarantine").orderBy("note").collect()
    assert [r.note for r in rejected] == ["b", "d"]
    assert "product_id: id -5 is negative: ids are in [0, 2197)" in rejected[0].mlt_reason
    kept = read_delta(spark, output).orderBy("note").collect()
    assert [(r.note, r.customer_id_mlt is None) for r in kept] == [("a", False), ("c", True), ("e", False)]


def test_decode_writes_ids_back_to_delta_and_parquet(spark: SparkSession, tmp_path: Path) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=300, users=30, movies=40)
    tokens = str(tmp_path / "tokens")
    tokenize_movielens(spark, str(folder), tokens)
    decode_table(spark, tokens, DecodeOptions(output=str(tmp_path / "ids")))
    decode_table(spark, tokens, DecodeOptions(output=str(tmp_path / "ids.parquet"), output_format="parquet"))
    original = read_ratings(spark, folder)
    for decoded in (read_delta(spark, str(tmp_path / "ids")), spark.read.parquet(str(tmp_path / "ids.parquet"))):
        assert "userId_mlt" not in decoded.columns
        assert decoded.select("userId", "movieId").exceptAll(original.select("userId", "movieId")).count() == 0
        assert decoded.count() == 300


#: an id column of each type a table tokenizes, a string key, and columns that are no ids
_TYPED = (
    "id int, small smallint, tiny tinyint, big decimal(20,0), key string, amount decimal(12,2), at timestamp, "
    "day date, tags array<string>"
)
_IDS = ["id", "small", "tiny", "big", "key"]


@pytest.mark.parametrize("drop_ids", [False, True], ids=["kept", "dropped"])
def test_decode_gives_every_column_back_in_its_source_type(spark: SparkSession, tmp_path: Path, drop_ids: bool) -> None:
    """Issue 71 item 10: decode wrote every id column as bigint (an int id, a smallint, a
    decimal), and a Parquet output's UTC timestamps as INT96, which pyarrow reads as timestamps
    without a zone. The table records its ids' types when it is made (``mlt.type.<column>``, the
    only record where it keeps no raw ids) and the decoded table has the source's schema: each
    id column in its type, in the place of its raw column (or of its tokens), every other as it was."""
    at = dt.datetime(2026, 11, 26, 12, tzinfo=dt.timezone.utc)
    rows = [
        (2**31 - 1, 2, 3, Decimal(10**15), "a", Decimal("1.50"), at, dt.date(2026, 11, 26), ["x"]),
        (None, None, None, None, None, None, None, None, None),
    ]
    source = tmp_path / "orders.parquet"
    spark.createDataFrame(rows, _TYPED).write.parquet(str(source))
    tokens = str(tmp_path / "orders_mlt")
    tokenize_table(spark, str(source), tokens, _IDS, TokenizeOptions(drop_ids=drop_ids))
    decode_table(spark, tokens, DecodeOptions(output=str(tmp_path / "ids")))
    decode_table(spark, tokens, DecodeOptions(output=str(tmp_path / "ids.parquet"), output_format="parquet"))
    expected = spark.read.parquet(str(source))
    kept = [c for c in expected.columns if c not in _IDS]
    order = expected.columns if not drop_ids else kept + _IDS  # the ids where the tokens were
    for decoded in (read_delta(spark, str(tmp_path / "ids")), spark.read.parquet(str(tmp_path / "ids.parquet"))):
        assert decoded.columns == order
        assert decoded.select(*expected.columns).dtypes == expected.dtypes
        assertDataFrameEqual(decoded.select(*expected.columns), expected)
    written = pq.read_schema(next((tmp_path / "ids.parquet").glob("*.parquet")))
    assert written.field("at").type == pa.timestamp("us", tz="UTC")
    assert written.field("id").type == pa.int32()
    recorded = read_snapshot(tokens).properties
    assert [recorded[f"mlt.type.{c}"] for c in _IDS] == ["int", "smallint", "tinyint", "decimal(20,0)", "string"]


def test_decode_refuses_an_id_its_type_cannot_hold_and_says_when_a_table_records_no_type(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Issue 71 item 10: decoding must refuse, not wrap, an id the recorded type cannot hold
    (a plain cast wraps it where ANSI mode is off); a table written before types were recorded
    decodes as bigint, and says so; an append of another id type than recorded is refused."""
    codec = MLTCodec.from_seed(13, 12)
    ids = spark.createDataFrame([(1,), (2**40,)], "id bigint")
    tampered = str(tmp_path / "tampered")
    tokens = ids.withColumn("id_mlt", mlt_encode("id", codec, layout="packed")).drop("id")
    write_delta(tokens, tampered, {"id": codec}, options=WriteOptions(properties={"mlt.type.id": "int"}))
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        with pytest.raises(QUERY_ERRORS, match=r"id_mlt of .*tampered decodes to the id 1099511627776, beyond 2147"):
            decode_table(spark, tampered, DecodeOptions(output=str(tmp_path / "wrapped")))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    wrapped = tmp_path / "wrapped"  # no row (delta-spark's first write created the table, empty, before failing)
    assert not (wrapped / "_delta_log").exists() or read_delta(spark, str(wrapped)).count() == 0
    older = str(tmp_path / "older")  # as spark-mlt wrote tables before it recorded the types
    write_delta(tokens, older, {"id": codec})
    report = decode_table(spark, older, DecodeOptions(output=str(tmp_path / "older_ids")))
    assert any("records no type for 'id'" in warning for warning in report.warnings)
    assert read_delta(spark, str(tmp_path / "older_ids")).dtypes == [("id", "bigint")]
    source = tmp_path / "small.parquet"
    spark.createDataFrame([(1,)], "id int").write.parquet(str(source))
    output = str(tmp_path / "small_mlt")
    tokenize_table(spark, str(source), output, ["id"], TokenizeOptions(drop_ids=True))
    ids.write.parquet(str(tmp_path / "wide.parquet"))
    append = TokenizeOptions(mode="append", drop_ids=True)
    with pytest.raises(TableSchemaError, match=r"holds the ids of 'id' as int .* this input's 'id' is bigint"):
        tokenize_table(spark, str(tmp_path / "wide.parquet"), output, ["id"], append)
    assert read_delta(spark, output).count() == 1


def test_cli_runs_jobs_with_a_config_file_and_flags_override_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=200, users=20, movies=30)
    config = tmp_path / "job.json"
    config.write_text(json.dumps({"input": str(folder), "output": str(tmp_path / "wrong"), "p": 11}))
    output = str(tmp_path / "out")
    assert main(["movielens", "--config", str(config), "--output", output]) == 0
    assert read_codecs(output)["userId"].p == 11
    assert "spark-mlt movielens: rows in 200, out 200" in capsys.readouterr().out
    assert main(["-q", "decode", "--input", output, "--verify", "--json"]) == 0  # -q before the command too
    report = json.loads(capsys.readouterr().out)  # the whole of stdout is the report
    assert (report["rows_in"], report["mismatches"], report["write"]) == (200, 0, None)
    assert report["columns"]["userId"]["p"] == 11
    assert report["columns"]["userId"]["fingerprint"] == read_codecs(output)["userId"].fingerprint
    assert main(["inspect", "--input", output]) == 0
    inspected = json.loads(capsys.readouterr().out)
    assert inspected["rows"] == 200
    assert (inspected["codecs"]["userId"]["layout"], inspected["codecs"]["userId"]["packed_bits"]) == ("packed", 4)


def test_cli_writes_v2_data_pages_by_default_and_v1_on_request(spark: SparkSession, tmp_path: Path) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=100, users=10, movies=10)

    def token_encodings(output: Path) -> set[str]:
        encodings: set[str] = set()
        for uri in DeltaTable(str(output)).file_uris():
            metadata = pq.read_metadata(uri)
            for group in range(metadata.num_row_groups):
                row_group = metadata.row_group(group)
                for i in range(row_group.num_columns):
                    if row_group.column(i).path_in_schema == "userId_mlt":
                        encodings.update(row_group.column(i).encodings)
        return encodings

    job = ["movielens", "--input", str(folder), "--output"]
    assert main([*job, str(tmp_path / "v2")]) == 0
    assert main([*job, str(tmp_path / "v1"), "--data-page-version", "1"]) == 0
    assert "DELTA_BINARY_PACKED" in token_encodings(tmp_path / "v2")
    assert "PLAIN" in token_encodings(tmp_path / "v1")
    assert "DELTA_BINARY_PACKED" not in token_encodings(tmp_path / "v1")
    assert decode_table(spark, str(tmp_path / "v2"), VERIFY).mismatches == 0
    with pytest.raises(SystemExit):  # argparse: invalid choice
        main([*job, str(tmp_path / "x"), "--data-page-version", "3"])


CONF = ROOT / "conf"


def test_the_shipped_example_configs_run(spark: SparkSession, tmp_path: Path) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=100, users=10, movies=10)
    output = tmp_path / "ratings"
    assert (
        main(["movielens", "--config", str(CONF / "movielens.yaml"), "--input", str(folder), "--output", str(output)])
        == 0
    )
    assert read_codecs(str(output))["userId"].p == 13  # the config leaves the codec to the data
    again = ["movielens", "--config", str(CONF / "movielens.yaml"), "--input", str(folder), "--output", str(output)]
    assert main(again) == 0  # the config's mode: overwrite
    orders = tmp_path / "orders.parquet"
    spark.createDataFrame(
        [(1, 10, 2.5), (2, 11, 3.0)], "customer_id long, product_id long, amount double"
    ).write.parquet(str(orders))
    config = [str(CONF / "warehouse_table.yaml"), "--input", str(orders), "--output", str(tmp_path / "orders_mlt")]
    assert main(["tokenize", "--config", *config]) == 0
    assert set(read_codecs(str(tmp_path / "orders_mlt"))) == {"customer_id", "product_id"}


def test_cli_fails_with_a_one_line_reason_exit_1_for_a_run_and_2_for_a_column_the_input_lacks(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = generate_synthetic(tmp_path / "ml", ratings=50, users=5, movies=5)
    output = str(tmp_path / "out")
    assert main(["movielens", "--input", str(folder), "--output", output]) == 0
    capsys.readouterr()
    assert main(["movielens", "--input", str(folder), "--output", output]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("spark-mlt: error: TableExistsError: --mode 'error' and a Delta table already exists at")
    assert err[-1].endswith("pass --mode append or --mode overwrite")  # the advice in the command line's words
    csv = ["tokenize", "--input", str(folder / "ratings.csv"), "--input-format", "csv", "--output", str(tmp_path / "x")]
    assert main([*csv, "--columns", "userid"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("spark-mlt: error: ")]
    assert len(err) == 1, err
    assert "--columns names column(s) ['userid'] not in the input" in err[0]
    assert "did you mean 'userId' for 'userid'?" in err[0]
    assert not (tmp_path / "x").exists()


def test_codec_sizing_from_data_matches_the_paper_rule(spark: SparkSession, tmp_path: Path) -> None:
    folder = _write_release(tmp_path / "ml", "ml-latest", "\n")
    report = tokenize_movielens(spark, str(folder), str(tmp_path / "out"), MovieLensOptions(n=7))
    assert report.codecs["userId"] == MLTCodec.for_cardinality(138_493, n=7)


def test_string_keys_go_through_a_vocabulary_that_grows_across_runs(spark: SparkSession, tmp_path: Path) -> None:
    first = str(tmp_path / "day1.parquet")
    second = str(tmp_path / "day2.parquet")
    spark.createDataFrame([("SKU-3", 1), ("SKU-1", 2), ("SKU-3", 3)], "sku string, qty int").write.parquet(first)
    spark.createDataFrame([("SKU-2", 4), ("SKU-1", 5), (None, 6)], "sku string, qty int").write.parquet(second)
    output = str(tmp_path / "orders_mlt")
    tokenize_table(spark, first, output, ["sku"], TokenizeOptions(p=13, n=3))
    vocabulary = str(tmp_path / "orders_mlt_vocab" / "sku")
    first_ids = dict(tuple(r) for r in read_delta(spark, vocabulary).collect())
    assert (sorted(first_ids), sorted(first_ids.values())) == (["SKU-1", "SKU-3"], [0, 1])  # dense
    tokenize_table(spark, second, output, ["sku"], TokenizeOptions(mode="append"))
    ids = dict(tuple(r) for r in read_delta(spark, vocabulary).collect())
    assert ids == {**first_ids, "SKU-2": 2}  # old keys keep their ids
    codec = read_codecs(output)["sku"]
    row = read_delta(spark, output).where("qty = 4").first()
    assert codec.unpack([row.sku_mlt]).tolist() == codec.encode([2]).tolist()
    assert decode_table(spark, output, VERIFY).mismatches == 0
    decode_table(spark, output, DecodeOptions(output=str(tmp_path / "decoded")))
    decoded = sorted((r.qty, r.sku) for r in read_delta(spark, str(tmp_path / "decoded")).collect())
    assert decoded == [(1, "SKU-3"), (2, "SKU-1"), (3, "SKU-3"), (4, "SKU-2"), (5, "SKU-1"), (6, None)]


def test_cli_reads_column_lists_given_with_spaces_or_commas() -> None:
    assert names_of(["userId,movieId"]) == ["userId", "movieId"]
    assert names_of(["userId", "movieId"]) == ["userId", "movieId"]
    assert names_of(["a, b", "c"]) == ["a", "b", "c"]
    assert names_of(None) is None


def test_movielens_label_is_the_papers_rating_of_4_or_more(spark: SparkSession, tmp_path: Path) -> None:
    folder = tmp_path / "ml"
    folder.mkdir()
    rows = ["userId,movieId,rating,timestamp", "1,1,3.5,1", "1,2,4.0,2", "2,1,4.5,3"]
    (folder / "ratings.csv").write_text("\n".join(rows) + "\n")
    output = str(tmp_path / "out")
    tokenize_movielens(spark, str(folder), output, MovieLensOptions(p=7))
    table = DeltaTable(output).to_pyarrow_table().to_pandas().sort_values("timestamp")
    assert table["label"].tolist() == [0, 1, 1]  # 4.0 is positive (PAPER-FACTS: rating >= 4)


def test_skip_drops_invalid_rows_and_counts_them(spark: SparkSession, tmp_path: Path) -> None:
    source = str(tmp_path / "orders.parquet")
    spark.createDataFrame(
        [(1, "a"), (-5, "b"), (None, "c"), (10**12, "d")], "customer_id bigint, note string"
    ).write.parquet(source)
    output = str(tmp_path / "orders_mlt")
    report = tokenize_table(spark, source, output, ["customer_id"], TokenizeOptions(p=13, n=3, handle_invalid="skip"))
    assert (report.rows_in, report.rows_out, report.rows_rejected) == (4, 2, 2)
    assert sorted(r.note for r in read_delta(spark, output).collect()) == ["a", "c"]  # a null id is no invalid id
    assert not Path(f"{output}_quarantine").exists()
    assert DeltaTable(output).history(1)[0]["spark_mlt.handle_invalid"] == "skip"


def test_an_invalid_id_fails_a_drop_ids_run_and_writes_nothing(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression (issue 71): with the raw ids dropped and packed tokens, an id whose tokens
    are null (-1 here) was written as a null token and counted as no rejected row."""
    source = str(tmp_path / "orders.parquet")
    spark.createDataFrame([(1,), (-1,)], "customer_id bigint").write.parquet(source)
    output = tmp_path / "orders_mlt"
    flags = ["--columns", "customer_id", "--p", "13", "--n", "6", "--drop-ids", "-q"]
    assert main(["tokenize", "--input", source, "--output", str(output), *flags]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "column 'customer_id': id -1 is outside the codec's domain [0, 4826809)" in err[-1]
    assert [path for path in output.rglob("*") if path.is_file()] == []  # no table, no data file


def test_a_skip_rerun_with_its_run_id_writes_nothing_and_counts_no_rejected_row(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``skip`` counts its rejected rows with the write's own Spark job; a re-run that the table
    already holds runs no job, so it must not wait for that count (it would wait forever)."""
    df = spark.createDataFrame([(1,), (-5,), (2,)], "customer_id bigint")
    output = str(tmp_path / "out")
    options = TokenizeOptions(p=13, n=3, handle_invalid="skip", mode="append", run_id="2026-11-27")
    first = tokenize_frame(df, ["customer_id"], TableSink(output, None, options))
    assert (first.rows_out, first.rows_rejected) == (2, 1)
    snapshot = snapshot_for_write(output, "append", spark=spark)
    again = tokenize_frame(df, ["customer_id"], TableSink(output, snapshot, options))
    assert again.write is not None
    assert again.write.skipped
    assert (again.rows_in, again.rows_out, again.rows_rejected) == (0, 0, 0)


@pytest.mark.parametrize(
    ("connect", "version", "observed"),
    [(False, "3.5.0", True), (False, "4.3.0", True), (True, "4.0.1", True), (True, "3.5.0", False)],
)
def test_skip_counts_with_the_write_where_an_observation_reports_it(
    connect: bool, version: str, observed: bool
) -> None:
    """PySpark 3.5's Connect client has no result for an ``Observation``: there ``skip`` keeps
    the tokens for a count of its own."""
    capabilities = Capabilities(
        connect=connect, spark_version=version, arrow_udfs=False, delta_jars=False, jar_version=None
    )
    assert counts_with_the_write(capabilities) is observed


@pytest.mark.parametrize("handle_invalid", ["error", "null", "skip", "quarantine"])
def test_each_handle_invalid_reads_each_input_row_once(
    spark: SparkSession, tmp_path: Path, handle_invalid: HandleInvalid
) -> None:
    """One pass: the job computes each input row once, whatever ``handle_invalid`` says, also
    where it both writes the valid rows and counts (``skip``) or quarantines the invalid ones
    (which used to compute the tokens twice). A Python UDF in the input logs each row it
    computes."""
    log = tmp_path / "computed"
    log.mkdir()

    def computed(value: int) -> int:
        (log / f"{value}-{os.getpid()}-{uuid.uuid4().hex}").touch()  # one file per computation
        return value

    logged = F.udf(computed, "bigint", useArrow=False).asNondeterministic()
    ids = [1, 2, 3, 4, 5, 6] if handle_invalid == "error" else [1, 2, 3, 4, 5, 10**12]
    df = spark.createDataFrame([(i,) for i in ids], "customer_id bigint").repartition(2)
    df = df.select(logged("customer_id").alias("customer_id"))
    options = TokenizeOptions(p=13, n=3, handle_invalid=handle_invalid)
    report = tokenize_frame(df, ["customer_id"], TableSink(str(tmp_path / "out"), None, options))
    assert report.rows_in == len(ids)
    assert sorted(int(name.name.split("-")[0]) for name in log.iterdir()) == sorted(ids)


def test_the_release_is_recorded_in_the_commit(spark: SparkSession, tmp_path: Path) -> None:
    folder = _write_release(tmp_path / "ml", "ml-1m", "\n")
    output = str(tmp_path / "out")
    tokenize_movielens(spark, str(folder), output)
    assert DeltaTable(output).history(1)[0]["spark_mlt.release"] == "ml-1m/10m"
    assert detect_release(folder).file == "ratings.dat"


def test_a_movielens_append_opens_the_output_table_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pins one snapshot per job: the label-rule check, the existing codecs and layouts, and
    the write's own checks used to open the output table three times."""
    folder = generate_synthetic(tmp_path / "ml", ratings=60, users=6, movies=8)
    output = str(tmp_path / "out")
    tokenize_movielens(spark, str(folder), output, MovieLensOptions(p=7))
    opened = count_delta_opens(monkeypatch)
    report = tokenize_movielens(spark, str(folder), output, APPEND)
    assert opened == [("log", output), ("delta-rs", output)]  # one read of the table, one commit
    assert (report.rows_out, report.write.version if report.write else None) == (60, 2)


def test_decode_opens_its_input_table_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pins the rows read through the snapshot's own handle (was a second open for the rows)."""
    folder = generate_synthetic(tmp_path / "ml", ratings=40, users=5, movies=6)
    output = str(tmp_path / "out")
    tokenize_movielens(spark, str(folder), output)
    opened = count_delta_opens(monkeypatch)
    assert decode_table(spark, output, VERIFY).mismatches == 0
    assert opened == [("log", output)]


def _overwritten_twice(folder: Path) -> str:
    """A Delta table of 1,000 rows (ids 0..999, partitioned by ``part``) overwritten twice with
    them: its folder holds 3,000 rows of Parquet files, two thirds of them removed."""
    rows = pa.table({"id": pa.array(range(1000), pa.int32()), "part": pa.array([i % 2 for i in range(1000)])})
    for _ in range(3):
        write_deltalake(str(folder), rows, mode="overwrite", partition_by=["part"])
    return str(folder)


def test_a_delta_tables_folder_is_read_as_the_table_never_as_its_files(spark: SparkSession, tmp_path: Path) -> None:
    """Issue 71 item 9: tokenize of a Delta table's folder without an input format read every
    Parquet file in it, the removed ones included (1,000 rows became 3,000, exit 0). By default
    the folder is read as the table; a file format asked for it, or a path inside it (a
    partition folder, a data file, a pattern), is refused before Spark reads anything."""
    source = _overwritten_twice(tmp_path / "orders")
    report = tokenize_table(spark, source, str(tmp_path / "orders_mlt"), ["id"])
    assert report.rows_out == 1000
    assert sorted(r.id for r in read_delta(spark, str(tmp_path / "orders_mlt")).collect()) == list(range(1000))
    partition = f"{source}/part=1"
    refused = {
        (source, "parquet"): r"^input_format='parquet': the input .*/orders is a Delta table .* input_format='delta'",
        (source, "csv"): r"^input_format='csv': .* is a Delta table",
        (partition, "auto"): rf"^input '{partition}' is inside the Delta table {source} .*: pass input='{source}'$",
        (partition, "delta"): r"is inside the Delta table",
        (f"{source}/part=*", "parquet"): r"is inside the Delta table .* and set input_format='delta'$",
        (DeltaTable(source).file_uris()[0], "parquet"): r"is inside the Delta table",
    }
    for (path, input_format), message in refused.items():
        output = tmp_path / f"refused_{input_format}"
        with pytest.raises(InputFormatError, match=message) as caught:
            tokenize_table(spark, path, str(output), ["id"], TokenizeOptions(input_format=input_format))  # type: ignore[arg-type]
        assert caught.value.parameter == ("input_format" if path == source else "input")
        assert not output.exists()
    unknown = "nowhere://bucket/orders"  # a store no filesystem here opens: nothing can tell what it holds
    assert input_format_of(unknown, "parquet") == "parquet"
    with pytest.raises(InputFormatError, match=r"^input_format='auto': nothing here can look at the store"):
        input_format_of(unknown, "auto")


def test_decode_needs_an_output_or_verify_and_says_so_in_python(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(MLTError, match=r"^output is needed .* unless verify=True") as caught:
        decode_table(spark, str(tmp_path / "nothing"))
    assert caught.value.parameter == "output"


def test_a_dry_run_sizes_what_a_run_writes_and_writes_nothing(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--dry-run`` prints the codecs and layouts the run then writes (a string key's codec
    sized from its planned vocabulary) and writes no table, vocabularies included; ``--conf``
    reaches the session the command uses."""
    orders = tmp_path / "orders.parquet"
    rows = [(1, f"sku-{i % 40}") for i in range(60)] + [(5_000, "sku-x")]
    spark.createDataFrame(rows, "customer_id long, sku string").write.parquet(str(orders))
    output = tmp_path / "orders_mlt"
    argv = ["tokenize", "--input", str(orders), "--columns", "customer_id", "sku", "--output", str(output)]
    assert main([*argv, "--dry-run"]) == 0
    planned = capsys.readouterr().out
    assert "dry run: codecs and layouts sized, nothing written" in planned
    assert sorted(path.name for path in tmp_path.iterdir()) == ["orders.parquet"]
    assert main(argv) == 0
    written = capsys.readouterr().out

    def codec_lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("codec ")]

    assert codec_lines(planned) == codec_lines(written)
    assert " p=13 n=4 " in codec_lines(written)[1]  # 41 keys, room for 100 times as many: 13**4 > 4100
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        assert main(["decode", "--input", str(output), "--verify", "--conf", "spark.sql.shuffle.partitions=7"]) == 0
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


@pytest.mark.slow  # make test-slow (CI): make test keeps to 10 minutes
def test_a_quiet_run_prints_its_report_and_no_spark_lines(tmp_path: Path) -> None:
    """``-q`` in a fresh process: the report on stdout; on stderr nothing from Spark's logging
    (no banner, no "Setting default log level", no progress bar). Only the JVM's own notice
    about an incubator module (Spark 4) may remain, which no log setting reaches."""
    orders = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"customer_id": pa.array([1, 2, 900], pa.int64())}), orders)
    argv = ["tokenize", "--input", str(orders), "--columns", "customer_id", "--output", str(tmp_path / "o"), "-q"]
    completed = subprocess.run(
        [sys.executable, "-m", "spark_mlt.batch.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    assert (
        completed.stdout.splitlines()[-1]
        == f"spark-mlt tokenize: rows in 3, out 3, rejected 0, table {tmp_path / 'o'} version 1"
    )
    noise = [line for line in completed.stderr.splitlines() if line and "incubator modules" not in line]
    assert noise == []


@pytest.mark.slow  # make test-slow (CI): make test keeps to 10 minutes
def test_the_cli_runs_on_the_master_of_the_spark_defaults_file_and_says_so(tmp_path: Path) -> None:
    """As ``pyspark`` and ``spark-sql`` do, ``spark-mlt`` without ``--master`` runs on the
    ``spark.master`` of ``$SPARK_CONF_DIR/spark-defaults.conf``, and logs the master the session
    has (a new process: the tests' session is running already)."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "# a cluster's defaults\nspark.master    local[1]\nspark.ui.enabled=false\n"
    )
    source = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"user_id": [3, 1, 2]}), source)
    env = {**os.environ, "SPARK_CONF_DIR": str(conf_dir), "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    argv = ["tokenize", "--input", str(source), "--output", str(tmp_path / "out"), "--columns", "user_id", "--json"]
    script = "import sys; from spark_mlt.batch.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"Spark master local[1] (spark.master of {conf_dir / 'spark-defaults.conf'})" in done.stderr
    assert json.loads(done.stdout)["rows_out"] == 3
