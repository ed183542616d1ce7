"""Table names vs paths, and a table name on a session without Delta's catalog (jar-free)."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from pyspark.sql import SparkSession

from spark_mlt import MLTCodec
from spark_mlt.capabilities import Capabilities
from spark_mlt.errors import TableError
from spark_mlt.storage import read_codecs, read_delta, write_delta
from spark_mlt.storage.catalog import is_table_name, local_uri

pytestmark = pytest.mark.compat


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("sales.ratings_mlt", True),
        ("main.sales.ratings_mlt", True),
        ("`my db`.`ratings-mlt`", True),
        ("ratings", False),  # one name: a relative path
        ("a.b.c.d", False),
        ("./sales.ratings", False),
        ("/data/sales.ratings", False),
        ("s3://bucket/sales.ratings", False),
        ("C:\\data\\x.y", False),
        ("2024.ratings", False),  # not an identifier: a file name
        ("sales.ratings.", False),
    ],
)
def test_one_rule_tells_table_names_from_paths(value: str, named: bool) -> None:
    assert is_table_name(value) is named


def test_a_path_like_object_is_always_a_path() -> None:
    assert not is_table_name(PurePosixPath("sales.ratings"))


def test_catalog_locations_become_what_delta_rs_takes() -> None:
    assert local_uri("file:/tmp/wh/db.db/t") == "/tmp/wh/db.db/t"
    assert local_uri("file:///tmp/wh/t") == "/tmp/wh/t"
    assert local_uri("s3://bucket/t") == "s3://bucket/t"


def test_a_table_name_without_deltas_catalog_says_what_is_needed(spark: SparkSession) -> None:
    if Capabilities.of(spark).delta_jars:
        pytest.skip("this session has Delta's catalog")
    df = spark.range(3)
    codec = MLTCodec.from_seed(7, 7, seed=42)
    for call in (
        lambda: write_delta(df, "sales.ratings_mlt", {"id": codec}),
        lambda: read_delta(spark, "sales.ratings_mlt"),
        lambda: read_codecs("sales.ratings_mlt"),
    ):
        with pytest.raises(TableError, match=r"'sales\.ratings_mlt'.*DeltaCatalog.*'\./sales\.ratings_mlt'"):
            call()
