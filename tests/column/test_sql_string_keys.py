"""The SQL that gives a string key column's values back from its tokens, as
docs/sql-functions.md, "String keys: back to their values" shows it, on a real table.

The section's Python block and SQL run as written (read from the page, not copied here) in a
folder that holds what they name: a table that ``tokenize_table`` wrote from orders with an
e-mail column (``out/orders_mlt``) and its vocabulary (``out/orders_mlt_vocab/email``), one
e-mail of which was erased. The reference test of the page (tests/column/test_sql_reference.py) leaves
the section to this one (its ``ELSEWHERE``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_mlt.batch import tokenize_table
from spark_mlt.storage import erase_keys
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "sql-functions.md"
SECTION = "String keys: back to their values"
#: the orders the table is tokenized from: two orders of one e-mail, one without an e-mail
ORDERS = [(1, "ana@example.com"), (2, "bo@example.org"), (3, "ana@example.com"), (4, None), (5, "cy@example.net")]
#: the e-mail erased from the vocabulary (a sync's erasure): its row keeps its id, without a key
ERASED = "cy@example.net"


def _section_blocks() -> list[tuple[str, str]]:
    """The (language, text) of each fenced block of the page's section."""
    tokens = MarkdownIt("commonmark").parse(PAGE.read_text())
    blocks: list[tuple[str, str]] = []
    inside = False
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h2":
            inside = tokens[i + 1].content == SECTION
        elif inside and token.type == "fence":
            blocks.append((token.info.split()[0] if token.info else "", token.content))
    return blocks


@pytest.fixture
def workspace(spark: SparkSession, tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` as the working folder of Python and of the session's local file system (the
    page's paths are relative), with the tokenized orders in ``out/orders_mlt``; the views and
    functions the page creates are dropped afterwards."""
    jvm = spark._jvm
    assert jvm is not None
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    before, cwd = local.getWorkingDirectory(), Path.cwd()
    local.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri()))
    os.chdir(tmp_path)
    try:
        orders = spark.createDataFrame(ORDERS, "order_id bigint, email string")
        orders.write.parquet(str(tmp_path / "orders.parquet"))
        tokenize_table(spark, str(tmp_path / "orders.parquet"), str(tmp_path / "out" / "orders_mlt"), ["email"])
        yield tmp_path
    finally:
        os.chdir(cwd)
        local.setWorkingDirectory(before)
        for view in ("orders_mlt", "email_vocabulary"):
            spark.catalog.dropTempView(view)
        for function in ("mlt_encode_email", "mlt_decode_email"):
            spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {function}")


def test_the_section_is_one_python_block_then_one_sql_query() -> None:
    """Every block of the section runs below: a block added to it must be run here too."""
    assert [lang for lang, _ in _section_blocks()] == ["python", "sql"]


def test_the_documented_sql_gives_every_email_back_and_null_for_an_erased_one(
    spark: SparkSession, workspace: Path
) -> None:
    vocabulary = str(workspace / "out" / "orders_mlt_vocab" / "email")
    assert erase_keys(spark, vocabulary, spark.createDataFrame([(ERASED,)], "key string")) == 1
    (_, python), (_, sql) = _section_blocks()
    exec(compile(python, str(PAGE), "exec"), {"spark": spark})  # the page's own example code
    expected = [(order, None if email == ERASED else email) for order, email in ORDERS]
    assertDataFrameEqual(spark.sql(sql), spark.createDataFrame(expected, "order_id bigint, email string"))
