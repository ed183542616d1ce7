"""Portable tables: a vocabulary beside its table is recorded relative to the table
(``mlt.vocabulary.<column> = ../<path under the table's parent folder>``), so a table copied or
moved together with its vocabularies (a clone, dev to prod, another mount point) still decodes;
a vocabulary elsewhere and a catalog name are recorded as they are."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_mlt.batch import DecodeOptions, TokenizeOptions, decode_table, tokenize_table
from spark_mlt.batch.mirror.erase import erase_physically, erased_tables
from spark_mlt.errors import MLTError
from spark_mlt.storage import (
    read_delta,
    read_snapshot,
    resolve_vocabulary_path,
    vocabulary_paths,
    vocabulary_property_value,
)

ORDERS = [(1, "SKU-3"), (2, "SKU-1"), (3, "SKU-3"), (4, None), (5, "SKU-7")]


@pytest.mark.parametrize(
    ("table", "vocabulary", "stored"),
    [
        ("/lake/customers_mlt", "/lake/customers_mlt_vocab/email", "../customers_mlt_vocab/email"),
        ("/lake/customers_mlt/", "/lake/customers_mlt_vocab/email/", "../customers_mlt_vocab/email"),
        ("/lake/customers_mlt", "/lake/vocab/customers/email", "../vocab/customers/email"),
        ("/customers_mlt", "/customers_mlt_vocab/email", "../customers_mlt_vocab/email"),
        ("file:///lake/x", "file:///lake/x_vocab/c", "../x_vocab/c"),
        ("s3://b/lake/x", "s3://b/lake/x_vocab/c", "../x_vocab/c"),
        ("s3://b/x", "s3://b/x_vocab/c", "../x_vocab/c"),
        ("abfss://c@acct.dfs.core.windows.net/lake/x", "abfss://c@acct.dfs.core.windows.net/lake/x_c", "../x_c"),
    ],
)
def test_a_vocabulary_beside_its_table_is_stored_relative_and_resolves_back(
    table: str, vocabulary: str, stored: str
) -> None:
    assert vocabulary_property_value(table, vocabulary) == stored
    assert resolve_vocabulary_path(table, stored) == vocabulary.rstrip("/")


def test_a_relative_vocabulary_resolves_against_where_the_table_is_now() -> None:
    assert resolve_vocabulary_path("/mnt/prod/customers_mlt", "../customers_mlt_vocab/email") == (
        "/mnt/prod/customers_mlt_vocab/email"
    )
    assert resolve_vocabulary_path("s3a://prod/lake/x", "../x_vocab/c") == "s3a://prod/lake/x_vocab/c"
    assert resolve_vocabulary_path("file:///mnt/x", "../x_vocab/c") == "file:///mnt/x_vocab/c"
    # a scheme's case aside, one store; the table's own spelling is the one resolved to
    assert vocabulary_property_value("S3://b/lake/x", "s3://b/lake/x_vocab/c") == "../x_vocab/c"
    assert resolve_vocabulary_path("S3://b/lake/x", "../x_vocab/c") == "S3://b/lake/x_vocab/c"


def test_plain_relative_paths_are_made_absolute_before_they_are_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert vocabulary_property_value("out/orders_mlt", "out/orders_mlt_vocab/sku") == "../orders_mlt_vocab/sku"
    assert resolve_vocabulary_path("out/orders_mlt", "../orders_mlt_vocab/sku") == str(
        tmp_path / "out" / "orders_mlt_vocab" / "sku"
    )
    assert vocabulary_property_value("out/orders_mlt", "vocab/sku") == str(tmp_path / "vocab" / "sku")


@pytest.mark.parametrize(
    ("table", "vocabulary"),
    [
        ("/lake/customers_mlt", "/vocab/customers/email"),  # not under the table's parent folder
        ("/lake/a/customers_mlt", "/lake/b/customers_mlt_vocab/email"),
        ("/lake/x", "/lakehouse/x_vocab/c"),  # a sibling whose name only starts like the parent
        ("s3://b/lake/x", "s3://other/lake/x_vocab/c"),  # another bucket
        ("s3://b/lake/x", "gs://b/lake/x_vocab/c"),  # another scheme
        ("s3://b/lake/x", "s3a://b/lake/x_vocab/c"),  # another scheme's spelling: kept as given
        ("/lake/x", "file:///lake/x_vocab/c"),  # a plain path and a URI
        ("file:///lake/x", "/lake/x_vocab/c"),
        ("s3://b/lake/x", "/lake/x_vocab/c"),
        ("s3://b", "s3://b/x_vocab/c"),  # a table at a bucket's root has no parent folder
    ],
)
def test_a_vocabulary_elsewhere_is_stored_absolute(table: str, vocabulary: str) -> None:
    assert vocabulary_property_value(table, vocabulary) == vocabulary
    assert resolve_vocabulary_path(table, vocabulary) == vocabulary


def test_catalog_names_are_stored_as_names_and_a_named_tables_vocabularies_never_relative(
    tmp_path: Path,
) -> None:
    assert vocabulary_property_value("db.orders_mlt", "db.orders_mlt_vocab_sku") == "db.orders_mlt_vocab_sku"
    assert vocabulary_property_value("/lake/orders_mlt", "db.orders_mlt_vocab_sku") == "db.orders_mlt_vocab_sku"
    vocabulary = str(tmp_path / "vocab" / "sku")
    assert vocabulary_property_value("db.orders_mlt", vocabulary) == vocabulary
    assert resolve_vocabulary_path("/lake/orders_mlt", "db.orders_mlt_vocab_sku") == "db.orders_mlt_vocab_sku"


def test_vocabulary_paths_resolve_relative_values_and_keep_old_absolute_ones() -> None:
    properties = {
        "mlt.vocabulary.email": "../customers_mlt_vocab/email",
        "mlt.vocabulary.sku": "/old/lake/customers_mlt_vocab/sku",  # a table written before relative values
        "mlt.vocabulary.city": "s3://b/vocab/city",
        "mlt.codec.email": "{}",
    }
    assert vocabulary_paths(properties, location="/mnt/prod/customers_mlt") == {
        "city": "s3://b/vocab/city",
        "email": "/mnt/prod/customers_mlt_vocab/email",
        "sku": "/old/lake/customers_mlt_vocab/sku",
    }


def test_a_relative_vocabulary_needs_the_tables_location_not_its_name() -> None:
    with pytest.raises(MLTError, match=r"location 'db.orders_mlt' is a catalog table's name") as error:
        vocabulary_paths({"mlt.vocabulary.sku": "../orders_mlt_vocab/sku"}, location="db.orders_mlt")
    assert error.value.parameter == "location"
    assert vocabulary_paths({"mlt.vocabulary.sku": "db.orders_mlt_vocab_sku"}, location="db.orders_mlt") == {
        "sku": "db.orders_mlt_vocab_sku"
    }


def test_a_table_moved_with_its_vocabularies_decodes_every_key_and_erase_finds_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Regression: the property held the vocabulary's absolute path, so a moved table failed to
    decode with ``MissingTableError: no Delta table at /old/path/..._vocab/sku``."""
    source = str(tmp_path / "orders.parquet")
    orders = spark.createDataFrame(ORDERS, "order_id bigint, sku string")
    orders.write.parquet(source)
    (tmp_path / "a").mkdir()
    tokenize_table(spark, source, str(tmp_path / "a" / "orders_mlt"), ["order_id", "sku"], TokenizeOptions(p=13, n=3))
    assert read_snapshot(str(tmp_path / "a" / "orders_mlt")).properties["mlt.vocabulary.sku"] == (
        "../orders_mlt_vocab/sku"
    )

    moved = tmp_path / "b"
    moved.mkdir()
    for name in ("orders_mlt", "orders_mlt_vocab"):
        shutil.move(tmp_path / "a" / name, moved / name)
    shutil.rmtree(tmp_path / "a")
    table = str(moved / "orders_mlt")

    assert decode_table(spark, table, DecodeOptions(verify=True)).mismatches == 0
    decode_table(spark, table, DecodeOptions(output=str(tmp_path / "decoded")))
    decoded = read_delta(spark, str(tmp_path / "decoded")).select("order_id", "sku")
    assertDataFrameEqual(decoded, orders)

    vocabulary = str(moved / "orders_mlt_vocab" / "sku")
    assert erased_tables(table) == [table, vocabulary]
    planned = erase_physically(table, apply=False)
    assert set(planned) == {table, vocabulary}
    assert all("would_delete" in entry for entry in planned.values())


def test_a_vocabulary_elsewhere_stays_absolute_and_is_found_after_the_table_alone_moved(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = str(tmp_path / "orders.parquet")
    orders = spark.createDataFrame(ORDERS, "order_id bigint, sku string")
    orders.write.parquet(source)
    (tmp_path / "a").mkdir()
    vocabularies = str(tmp_path / "shared" / "vocab")
    options = TokenizeOptions(p=13, n=3, vocabulary_dir=vocabularies)
    tokenize_table(spark, source, str(tmp_path / "a" / "lake" / "orders_mlt"), ["order_id", "sku"], options)
    (tmp_path / "b").mkdir()
    table = str(tmp_path / "b" / "orders_mlt")
    shutil.move(tmp_path / "a" / "lake" / "orders_mlt", table)
    assert read_snapshot(table).properties["mlt.vocabulary.sku"] == f"{vocabularies}/sku"
    assert decode_table(spark, table, DecodeOptions(verify=True)).mismatches == 0
