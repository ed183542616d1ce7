"""``find_value`` and ``spark-mlt find``: where a value of an id column is held, in real tables
(a tokenized table, its quarantine and vocabulary; a mirror before and after its erasure), by
the raw column or by the tokens alone, with rows that deletion vectors hide counted as pending."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from spark_mlt.batch import SyncOptions, TokenizeOptions, sync_table, tokenize_table
from spark_mlt.batch.cli import main
from spark_mlt.batch.mirror.erase import erase_physically
from spark_mlt.batch.read.find import find_value
from spark_mlt.errors import MissingCodecError, MLTError
from spark_mlt.storage import read_snapshot, vocabulary_paths
from tests.support.vectors import serialize, z85_encode

KEPT = "kept@example.com"
ERASED = "forget.me@example.com"
#: beyond the capacity of the codec p=13, n=3 (2197 ids): quarantined
TOO_LARGE = 5_000


@pytest.fixture(scope="module")
def orders(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tokenized table of an integer id and a string key, an id beyond the codec in its quarantine."""
    root = tmp_path_factory.mktemp("find")
    source = str(root / "orders.parquet")
    spark.createDataFrame(
        [(1, KEPT), (2, "other@example.com"), (3, "third@example.com"), (TOO_LARGE, "big@example.com")],
        "customer_id bigint, email string",
    ).write.parquet(source)
    output = str(root / "orders_mlt")
    options = TokenizeOptions(p=13, n=3, handle_invalid="quarantine")
    tokenize_table(spark, source, output, ["customer_id", "email"], options)
    return output


def _vocabulary_id(table: str, key: str) -> int:
    path = vocabulary_paths(read_snapshot(table).properties, location=table)["email"]
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return next(int(row["id"]) for row in rows if row["key"] == key)


def test_a_held_id_and_key_are_found_in_the_table_and_the_vocabulary(orders: str) -> None:
    found = find_value(orders, "customer_id", 1)
    assert (found["status"], found["table"]["rows"], found["table"]["matched_on"]) == ("held", 1, "customer_id")
    assert found["vocabulary"] is None
    assert found["pending"] == []
    assert found["verdict"] == "held: 1 row(s) of the table"
    key = find_value(orders, "email", KEPT)
    ident = _vocabulary_id(orders, KEPT)
    assert key["vocabulary"]["status"] == "held"
    assert key["vocabulary"]["id"] == key["id"] == ident
    assert key["table"]["rows"] == 1
    assert key["quarantine"]["rows"] == 0


def test_an_id_beyond_the_codec_is_found_in_the_quarantine(orders: str) -> None:
    found = find_value(orders, "customer_id", str(TOO_LARGE))  # the command line's text, parsed
    assert (found["value"], found["table"]["rows"], found["quarantine"]["rows"]) == (TOO_LARGE, 0, 1)
    assert found["verdict"] == "held: 1 row(s) of its quarantine"


def test_a_value_no_table_holds_is_nowhere(orders: str) -> None:
    for column, value in (("customer_id", 77), ("email", "nobody@example.com")):
        found = find_value(orders, column, value)
        assert (found["status"], found["table"]["rows"], found["pending"]) == ("nowhere", 0, [])
        assert found["verdict"].startswith("nowhere")
    assert find_value(orders, "email", "nobody@example.com")["vocabulary"]["status"] == "absent"


def test_a_column_that_is_no_id_column_is_refused_with_the_nearest_names(orders: str) -> None:
    with pytest.raises(MissingCodecError, match=r"'emial' is not an id column .*did you mean 'email'") as error:
        find_value(orders, "emial", KEPT)
    assert error.value.parameter == "column"
    with pytest.raises(MLTError, match="value must be a whole number") as wrong:
        find_value(orders, "customer_id", "forty-two")
    assert wrong.value.parameter == "value"


@pytest.mark.parametrize("layout", ["packed", "array"])
def test_a_table_without_raw_ids_is_searched_by_its_tokens(
    spark: SparkSession, orders: str, tmp_path: Path, layout: str
) -> None:
    """``drop_ids``: the table holds tokens only, packed or as array<int>; the quarantine keeps
    the raw ids of the rows it holds."""
    tokens_only = str(tmp_path / f"orders_{layout}")
    options = TokenizeOptions(p=13, n=3, layout=layout, drop_ids=True, handle_invalid="quarantine")
    tokenize_table(spark, str(Path(orders).parent / "orders.parquet"), tokens_only, ["customer_id", "email"], options)
    assert "customer_id" not in read_snapshot(tokens_only).schema.names
    found = find_value(tokens_only, "customer_id", 2)
    assert (found["table"]["matched_on"], found["table"]["rows"], found["status"]) == ("customer_id_mlt", 1, "held")
    key = find_value(tokens_only, "email", KEPT)  # its vocabulary id, then its tokens
    assert (key["table"]["matched_on"], key["table"]["rows"], key["vocabulary"]["status"]) == ("email_mlt", 1, "held")
    assert find_value(tokens_only, "customer_id", 77)["table"]["rows"] == 0
    beyond = find_value(tokens_only, "customer_id", TOO_LARGE)  # no tokens encode it; its quarantined row
    assert (beyond["table"]["rows"], beyond["quarantine"]["rows"]) == (0, 1)


def _delete_by_deletion_vector(table: Path, customer_id: int) -> None:
    """Commit a deletion vector (inline) that deletes ``customer_id``'s row from the data file
    that holds it, as delta-spark's DELETE does on a table with deletion vectors."""
    snapshot = read_snapshot(str(table))
    ids = {
        path: pq.read_table(table / path, columns=["customer_id"]).column(0).to_pylist()
        for path in snapshot.delta.files
    }
    (add,) = (a for a in snapshot.delta.files.values() if customer_id in ids[a.path])
    data = serialize(np.array([ids[add.path].index(customer_id)], dtype=np.uint64), run_optimize=False)
    vector = {"storageType": "i", "pathOrInlineDv": z85_encode(data), "sizeInBytes": len(data), "cardinality": 1}
    file: dict[str, Any] = {
        "path": add.path,
        "partitionValues": {},
        "size": add.size,
        "modificationTime": add.modification_time,
        "dataChange": True,
        "stats": add.stats,
    }
    actions = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["appendOnly", "invariants", "deletionVectors"],
            }
        },
        {"remove": {**file, "deletionTimestamp": add.modification_time + 1, "extendedFileMetadata": True}},
        {"add": {**file, "deletionVector": vector}},
    ]
    commit = table / "_delta_log" / f"{snapshot.version + 1:020d}.json"
    commit.write_text("".join(json.dumps(action) + "\n" for action in actions))


def test_a_row_a_deletion_vector_deletes_is_pending_not_held(orders: str, tmp_path: Path) -> None:
    copy = tmp_path / "orders_mlt"
    shutil.copytree(orders, copy)
    _delete_by_deletion_vector(copy, 3)
    gone = find_value(str(copy), "customer_id", 3, quarantine=f"{orders}_quarantine")
    assert (gone["status"], gone["table"]["rows"]) == ("pending", 0)
    assert [(p["kind"], p["rows"]) for p in gone["pending"]] == [("deletion_vector", 1)]
    assert "1 through deletion vectors" in gone["verdict"]
    assert find_value(str(copy), "customer_id", 1)["table"]["rows"] == 1  # the file's other rows are held


@pytest.fixture
def mirror(spark: SparkSession, tmp_path: Path) -> str:
    """A mirror synced after its source deleted the rows holding ``ERASED`` (one of them
    quarantined: its id is beyond the codec)."""
    source = str(tmp_path / "customers")
    rows = pa.table(
        {
            "customer_id": pa.array([1, 2, 3, TOO_LARGE], pa.int64()),
            "email": [KEPT, "other@example.com", ERASED, ERASED],
        }
    )
    write_deltalake(source, rows, configuration={"delta.enableChangeDataFeed": "true"})
    options = SyncOptions(key=("customer_id",), p=13, n=3, handle_invalid="quarantine")
    output = str(tmp_path / "customers_mlt")
    sync_table(spark, source, output, ["customer_id", "email"], options)
    assert find_value(output, "email", ERASED)["status"] == "held"
    DeltaTable(source).delete(f"email = '{ERASED}'")
    sync_table(spark, source, output, ["customer_id", "email"], options)
    return output


def test_a_synced_delete_is_pending_in_removed_files_until_erase_then_nowhere(mirror: str) -> None:
    found = find_value(mirror, "email", ERASED)
    assert (found["status"], found["table"]["rows"], found["quarantine"]["rows"]) == ("pending", 0, 0)
    assert found["vocabulary"]["status"] == "erased"
    assert found["vocabulary"]["id"] == found["id"]
    tables = {entry["table"] for entry in found["pending"]}
    # the mirror's value counts counted it too: their file that did is removed, not yet vacuumed
    assert tables == {mirror, f"{mirror}_quarantine", found["vocabulary"]["path"], f"{mirror}_counts/email"}
    assert all(entry["kind"] == "removed" and entry["deletable_after"] for entry in found["pending"])
    assert found["verdict"].startswith(f"gone from every current version; {len(found['pending'])} file(s) still hold")
    assert find_value(mirror, "customer_id", 3)["status"] == "pending"
    assert find_value(mirror, "customer_id", 1)["status"] == "held"

    erase_physically(mirror, retention_hours=0, apply=True, allow_short_retention=True)
    after = find_value(mirror, "email", ERASED)
    assert (after["status"], after["pending"], after["vocabulary"]["status"]) == ("nowhere", [], "absent")
    assert find_value(mirror, "customer_id", 3)["status"] == "nowhere"
    assert find_value(mirror, "email", KEPT)["status"] == "held"


def test_the_cli_prints_the_answer_as_json_and_refuses_a_column_that_is_no_id_column(
    orders: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["find", "--input", orders, "--column", "email", "--value", "nobody@example.com"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["status"], printed["vocabulary"]["status"]) == ("nowhere", "absent")
    assert main(["find", "--input", orders, "--column", "emial", "--value", KEPT]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("spark-mlt: error: MissingCodecError: --column 'emial' is not an id column")
    assert "did you mean 'email'?" in error
