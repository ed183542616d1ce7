"""Jobs you can schedule and forget: codecs with room to grow and a way out when ids outgrow
them, thresholds that fail a run, options the tables cannot take refused before anything is
written, raw ids left out on request."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from spark_mlt import MLTCodec
from spark_mlt.batch import DecodeOptions, TokenizeOptions, decode_table
from spark_mlt.batch.cli import EXIT_REJECTED, EXIT_USAGE, main
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.batch.write.tokenize import tokenize_table
from spark_mlt.column.sizing import DEFAULT_HEADROOM, room_for
from spark_mlt.errors import (
    ChangeFeedError,
    CodecCapacityError,
    RejectedRowsError,
    TableOptionError,
    UnknownColumnError,
)
from spark_mlt.storage import read_codecs, read_snapshot

pytestmark = pytest.mark.compat  # on every supported PySpark line (make test-compat)

CDF = {"delta.enableChangeDataFeed": "true"}
#: A jar-free sync rewrites files, which needs deltalake 1.6.6 (remove actions); the 3.5 line pins 1.6.3.
rewrites = pytest.mark.skipif(
    not hasattr(deltalake.transaction, "RemoveAction"),
    reason="a jar-free sync rewrites files, which needs deltalake 1.6.6 (remove actions)",
)


def _ids(path: Path, ids: Sequence[int | None], emails: Sequence[str] | None = None) -> str:
    """A Delta input of ``customer_id`` (and ``email``) rows."""
    columns = {"customer_id": pa.array(ids, pa.int64())}
    if emails is not None:
        columns["email"] = pa.array(emails, pa.string())
    write_deltalake(str(path), pa.table(columns), configuration=CDF, mode="overwrite")
    return str(path)


def _fingerprint(*paths: Path) -> dict[str, str]:
    """Every file under ``paths`` (the tables, their logs) and a digest of its bytes."""
    found = {}
    for root in paths:
        for file in sorted(root.rglob("*")) if root.exists() else ():
            if file.is_file():
                found[str(file)] = hashlib.sha256(file.read_bytes()).hexdigest()
    return found


# -- room to grow ---------------------------------------------------------------------------------


def test_room_for_multiplies_the_ids_there_are_and_stops_at_the_largest_id() -> None:
    assert room_for(49_999, 100.0) == 4_999_999
    assert room_for(9, 1.0) == 9  # the paper's rule
    assert room_for(2**62, 100.0) == 2**63 - 1


def test_a_new_tables_codecs_hold_the_default_headroom_and_n_alone_picks_a_prime_with_room(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = _ids(tmp_path / "in", list(range(1000)), [f"u{i}@example.com" for i in range(1000)])
    out = tmp_path / "out"
    report = tokenize_table(
        spark, source, str(out), ["customer_id", "email"], TokenizeOptions(input_format="delta", n=4)
    )
    for column in ("customer_id", "email"):
        codec = report.codecs[column]
        assert codec.capacity >= DEFAULT_HEADROOM * 1000, (column, codec.p, codec.n)
        assert codec.n == 4
    assert report.codecs["customer_id"].p == 19  # the smallest prime with p^4 > 100 * 1000 (17^4 = 83521)
    assert not report.warnings


def test_a_vocabulary_that_outgrows_its_codec_is_refused_naming_the_column_and_the_way_out(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = _ids(tmp_path / "in", [1, 2, 3], ["a@x", "b@x", "c@x"])
    out = tmp_path / "out"
    tokenize_table(spark, source, str(out), ["email"], TokenizeOptions(input_format="delta", p=2, n=2))
    assert len(read_snapshot(str(out)).codecs) == 1
    _ids(tmp_path / "in", [4, 5], ["d@x", "e@x"])  # the vocabulary would hold 5 ids; the codec has 4
    before = _fingerprint(out, Path(f"{out}_vocab"))
    with pytest.raises(CodecCapacityError, match=r"column 'email': its vocabulary would hold 5 ids") as refused:
        tokenize_table(spark, source, str(out), ["email"], TokenizeOptions(input_format="delta", mode="append"))
    assert "--resize" in str(refused.value)
    assert _fingerprint(out, Path(f"{out}_vocab")) == before
    quarantine = TokenizeOptions(input_format="delta", mode="append", handle_invalid="quarantine")
    assert tokenize_table(spark, source, str(out), ["email"], quarantine).rows_rejected == 1  # ids 3 and 4: 4 is out
    reason = DeltaTable(f"{out}_quarantine").to_pyarrow_table().column("mlt_reason").to_pylist()
    assert reason == [
        "email: e@x: vocabulary id 4 is out of range [0, 4) of its codec (p=2, n=2): "
        "re-size the codec (docs: Columns, Room to grow)"
    ]


def test_a_resize_rewrites_every_row_with_a_larger_codec_and_time_travel_keeps_the_old_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = _ids(tmp_path / "in", [0, 1, 2, 3], ["a@x", "b@x", "c@x", "d@x"])
    out = str(tmp_path / "out")
    first = tokenize_table(
        spark, source, out, ["customer_id", "email"], TokenizeOptions(input_format="delta", p=2, n=3)
    )
    old_version = first.write.version if first.write else -1
    assert "holds 50% of its codec" in " ".join(first.warnings)  # 4 of 8 ids
    _ids(tmp_path / "in", list(range(20)), [f"{i}@x" for i in range(20)])
    resized = tokenize_table(
        spark,
        source,
        out,
        ["customer_id", "email"],
        TokenizeOptions(input_format="delta", mode="overwrite", resize=True),
    )
    codecs = read_codecs(out)
    assert codecs["customer_id"].capacity >= DEFAULT_HEADROOM * 20
    assert codecs == resized.codecs
    assert not resized.warnings
    decoded = decode_table(spark, out, DecodeOptions(verify=True))
    assert (decoded.mismatches, decoded.rows_out) == (0, 20)
    old = read_snapshot(out, version=old_version)
    assert old.codecs["customer_id"] == MLTCodec.from_seed(2, 3)
    rows = DeltaTable(out, version=old_version).to_pyarrow_table().to_pylist()
    codec = old.codecs["customer_id"]
    packed = [r["customer_id_mlt"] for r in rows]
    assert sorted(codec.decode(codec.unpack(packed)).tolist()) == [0, 1, 2, 3]


def test_explicit_codec_options_against_a_tables_codec_are_refused_unless_it_is_resized(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = _ids(tmp_path / "in", [1, 2, 3])
    out = tmp_path / "out"
    tokenize_table(spark, source, str(out), ["customer_id"], TokenizeOptions(input_format="delta", p=13, n=2))
    before = _fingerprint(out)
    for options, parameter in (
        (TokenizeOptions(input_format="delta", mode="append", n=3), "n"),
        (TokenizeOptions(input_format="delta", mode="append", layout="array"), "layout"),
        (TokenizeOptions(input_format="delta", mode="append", drop_ids=True), "drop_ids"),
    ):
        with pytest.raises(TableOptionError) as refused:
            tokenize_table(spark, source, str(out), ["customer_id"], options)
        assert refused.value.parameter == parameter
    with pytest.raises(UnknownColumnError, match="did you mean 'customer_id'"):
        tokenize_table(spark, source, str(out), ["customer_ids"], TokenizeOptions(input_format="delta", mode="append"))
    assert _fingerprint(out) == before


# -- thresholds -----------------------------------------------------------------------------------


def test_max_rejected_fails_a_run_past_it_after_committing_rows_and_quarantine(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _ids(tmp_path / "in", [1, 2, 400_000, -3])
    out = tmp_path / "out"
    flags = ["tokenize", "--input", source, "--input-format", "delta", "--columns", "customer_id", "--p", "13"]
    flags += ["--n", "2", "--output", str(out), "--handle-invalid", "quarantine", "--max-rejected", "1"]
    assert main(flags) == EXIT_REJECTED
    err = capsys.readouterr()
    assert "rejected 2" in err.out
    errors = [line for line in err.err.splitlines() if line.startswith("spark-mlt: error: ")]
    assert errors == [errors[0]]
    assert errors[0].startswith("spark-mlt: error: RejectedRowsError: --max-rejected: the run rejected 2 row(s)")
    assert sorted(r["customer_id"] for r in DeltaTable(str(out)).to_pyarrow_table().to_pylist()) == [1, 2]
    reasons = sorted(DeltaTable(f"{out}_quarantine").to_pyarrow_table().column("mlt_reason").to_pylist())
    assert reasons[0].startswith("customer_id: id -3 is negative")
    assert reasons[1].startswith("customer_id: id 400000 is out of range [0, 169)")
    share = TokenizeOptions(input_format="delta", mode="append", handle_invalid="skip", max_rejected="50%")
    assert tokenize_table(spark, source, str(out), ["customer_id"], share).rows_rejected == 2  # 2 of 4: not past
    with pytest.raises(RejectedRowsError, match=r"more than 25\.0000% of its 4 row"):
        tokenize_table(spark, source, str(out), ["customer_id"], dataclasses.replace(share, max_rejected="25%"))


# -- a mirror refuses what it cannot take ---------------------------------------------------------


def test_a_mirror_refuses_each_option_it_cannot_take_and_every_table_stays_unchanged(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _ids(tmp_path / "src", [1, 2, 3], ["a@x", "b@x", "c@x"])
    out = tmp_path / "mirror"
    base = ["sync", "--input", source, "--output", str(out), "--handle-invalid", "quarantine"]
    assert main([*base, "--columns", "customer_id", "email", "--key", "customer_id"]) == 0
    _ids(tmp_path / "src", [1, 2, 3, 4], ["a@x", "b@x", "c@x", "d@x"])  # a new version to sync
    tables = (out, Path(f"{out}_quarantine"), Path(f"{out}_vocab"))
    before = _fingerprint(*tables)
    capsys.readouterr()
    for change in (
        ["--columns", "customer_id", "--key", "customer_id"],  # other columns
        ["--columns", "customer_id", "email", "--key", "email"],  # another key
        ["--columns", "customer_id", "email", "--key", "customer_id", "--n", "7"],  # another codec
        ["--columns", "customer_id", "email", "--key", "customer_id", "--layout", "array"],
        ["--columns", "customer_id", "email", "--key", "customer_id", "--full-refresh", "--n", "7"],
        ["--columns", "customer_id", "email", "--key", "customer_id", "--drop-ids"],
        ["--columns", "customer_id", "emails", "--key", "customer_id"],  # a near name
    ):
        assert main([*base, *change]) == EXIT_USAGE, change
        err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("20")]  # log lines
        assert len(err) == 1, (change, err)
        assert err[0].startswith("spark-mlt: error: "), (change, err)
    assert "did you mean 'email'" in err[0]
    other = ["sync", "--input", source, "--output", str(out), "--columns", "customer_id", "email"]
    assert main([*other, "--key", "customer_id", "--handle-invalid", "skip"]) == EXIT_USAGE
    assert "has a quarantine" in capsys.readouterr().err
    assert _fingerprint(*tables) == before


def test_the_first_sync_of_a_source_without_change_data_feed_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    source = str(tmp_path / "src")
    write_deltalake(source, pa.table({"customer_id": pa.array([1, 2], pa.int64())}))
    out = tmp_path / "mirror"
    with pytest.raises(ChangeFeedError, match="has no change data feed"):
        sync_table(spark, source, str(out), ["customer_id"], SyncOptions(key=("customer_id",)))
    assert not out.exists()


@rewrites
def test_a_full_refresh_counts_the_keys_it_deletes_and_resizes_the_mirror(spark: SparkSession, tmp_path: Path) -> None:
    source = _ids(tmp_path / "src", [1, 2, 3], ["a@x", "b@x", "c@x"])
    out = str(tmp_path / "mirror")
    options = SyncOptions(key=("customer_id",), p=2, n=3)
    sync_table(spark, source, out, ["customer_id", "email"], options)
    _ids(tmp_path / "src", [1, *range(10, 30)], ["a@x", *(f"{i}@x" for i in range(10, 30))])
    refresh = SyncOptions(key=("customer_id",), full_refresh=True, resize=True)
    report = sync_table(spark, source, out, ["customer_id", "email"], refresh)
    assert report.rows_deleted == 2  # customers 2 and 3
    assert read_codecs(out)["customer_id"].capacity >= DEFAULT_HEADROOM * 30
    assert decode_table(spark, out, DecodeOptions(verify=True)).mismatches == 0
    _ids(tmp_path / "src", [1, 40], ["a@x", "z@x"])
    after = sync_table(spark, source, out, ["customer_id", "email"], SyncOptions(key=("customer_id",)))
    assert sorted(r["customer_id"] for r in DeltaTable(out).to_pyarrow_table().to_pylist()) == [1, 40]
    assert after.rows_deleted == 20


# -- raw ids left out -----------------------------------------------------------------------------


def test_drop_ids_writes_only_the_tokens_and_they_still_decode(spark: SparkSession, tmp_path: Path) -> None:
    source = _ids(tmp_path / "in", [5, 6, 7], ["a@x", "b@x", "c@x"])
    out = str(tmp_path / "out")
    tokenize_table(spark, source, out, ["customer_id", "email"], TokenizeOptions(input_format="delta", drop_ids=True))
    names = DeltaTable(out).schema().to_arrow().names
    assert not {"customer_id", "email"} & set(names)
    assert {"customer_id_mlt", "email_mlt"} <= set(names)
    decoded = str(tmp_path / "decoded")
    decode_table(spark, out, DecodeOptions(output=decoded))
    rows = DeltaTable(decoded).to_pyarrow_table().to_pylist()
    assert sorted((r["customer_id"], r["email"]) for r in rows) == [(5, "a@x"), (6, "b@x"), (7, "c@x")]


@rewrites
def test_a_mirror_without_its_raw_ids_keeps_its_key_follows_changes_and_erases_by_the_tokens(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = _ids(tmp_path / "src", [1, 2, 3], ["a@x", "b@x", "c@x"])
    out = str(tmp_path / "mirror")
    options = SyncOptions(key=("customer_id",), drop_ids=True)
    sync_table(spark, source, out, ["customer_id", "email"], options)
    names = DeltaTable(out).schema().to_arrow().names
    assert "email" not in names
    assert {"customer_id", "customer_id_mlt", "email_mlt"} <= set(names)  # the key stays: rows are found by it
    _ids(tmp_path / "src", [1, 2], ["a@x", "new@x"])  # 2 changes e-mail, 3 is deleted
    report = sync_table(spark, source, out, ["customer_id", "email"], options)
    assert report.erased == {"email": 2}  # b@x and c@x: no row holds them any more
    vocabulary = DeltaTable(f"{out}_vocab/email").to_pyarrow_table().to_pylist()
    assert sorted(r["key"] for r in vocabulary if r["key"] is not None) == ["a@x", "new@x"]
    decoded = str(tmp_path / "decoded")
    decode_table(spark, out, DecodeOptions(output=decoded))
    rows = DeltaTable(decoded).to_pyarrow_table().to_pylist()
    assert sorted((r["customer_id"], r["email"]) for r in rows) == [(1, "a@x"), (2, "new@x")]
