"""The SQL function reference (``docs/sql-functions.md``) is true to the code.

The page runs top-down in the test session, as a reader runs it: its Python blocks in one
namespace, its SQL blocks through ``spark.sql``. A ```sql block followed at once by a ```text
block is an example, whose text is Spark's ``show(truncate=False)`` of the result. Each row of
an errors table (``| Cause | Call | Message |``) runs its call (SQL as ``SELECT <call> FROM
users``, ``register_mlt_functions(...)`` in the page's namespace), which must fail with that
message, at the moment the cause says (``(run time)``: while the query runs, else when Spark
analyses it). Every function that the jar's extension registers, and each name
``register_mlt_functions`` creates, has an entry with the reference's parts.

A section that works on a tokenized table of its own (`ELSEWHERE`) is run by its own test, on
such a table, and left out here.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token
from pyspark.sql import SparkSession

from spark_mlt import MLTCodec
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import register_mlt_functions
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "sql-functions.md"
ERRORS_HEADER = ["Cause", "Call", "Message"]
#: the sections that read a tokenized table, and the test that runs each on one
ELSEWHERE = {"String keys: back to their values": "tests/column/test_sql_string_keys.py"}
#: what every function's entry holds, as Spark's and Sedona's function references do
PARTS = ("**Signature**", "**Arguments**", "**Returns**", "**Errors**", "**Example**")


@dataclass(frozen=True)
class Example:
    section: str
    sql: str
    shown: str


@dataclass(frozen=True)
class ErrorRow:
    section: str
    cause: str
    call: str
    message: str


@dataclass(frozen=True)
class Page:
    setup: list[tuple[str, str]]  # (language, text) of the blocks that are no example, in order
    examples: list[Example]
    errors: list[ErrorRow]
    sections: dict[str, str]  # ## heading (code marks dropped) -> its Markdown


def _cells(tokens: list[Token], start: int) -> Iterator[list[Token]]:
    """The inline token of each cell, row by row, of the table that opens at ``start``."""
    row: list[Token] = []
    for token in tokens[start:]:
        if token.type == "table_close":
            return
        if token.type == "inline":
            row.append(token)
        elif token.type == "tr_close":
            yield row
            row = []


def _code(cell: Token) -> str:
    return "".join(child.content for child in cell.children or [] if child.type == "code_inline")


def _read(text: str) -> Page:
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    lines = text.splitlines()
    setup: list[tuple[str, str]] = []
    examples: list[Example] = []
    errors: list[ErrorRow] = []
    section = ""
    starts: list[tuple[str, int]] = []
    pending: Token | None = None  # a sql fence that an output block may follow
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h2":
            section = tokens[i + 1].content.replace("`", "")
            starts.append((section, token.map[0] if token.map else 0))
        elif section in ELSEWHERE:
            continue
        elif token.type == "fence":
            lang = token.info.split()[0] if token.info else ""
            if pending is not None:
                between = lines[pending.map[1] : token.map[0]] if pending.map and token.map else ["?"]
                if lang == "text" and not any(line.strip() for line in between):
                    examples.append(Example(section, pending.content.strip(), token.content.rstrip("\n")))
                    pending = None
                    continue
                setup.append(("sql", pending.content))
                pending = None
            if lang == "sql":
                pending = token
            elif lang == "python":
                setup.append((lang, token.content))
        elif token.type == "table_open":
            rows = list(_cells(tokens, i))
            if [cell.content for cell in rows[0]] == ERRORS_HEADER:
                errors += [ErrorRow(section, row[0].content, _code(row[1]), _code(row[2])) for row in rows[1:]]
    if pending is not None:
        setup.append(("sql", pending.content))
    bounds = [*(line for _, line in starts[1:]), len(lines)]
    sections = {name: "\n".join(lines[line : bounds[k]]) for k, (name, line) in enumerate(starts)}
    return Page(setup, examples, errors, sections)


PAGE_READ = _read(PAGE.read_text())


def _jar_or_skip(spark: SparkSession) -> Capabilities:
    caps = Capabilities.of(spark)
    if not caps.jvm_engine:
        pytest.skip(
            "the test session has no spark-mlt jar, whose extension registers mlt_encode, mlt_decode and "
            "mlt_unpack: `make jvm` builds it (SPARK_MLT_JVM=0 leaves it out)"
        )
    return caps


@pytest.fixture(scope="module")
def page_namespace(spark: SparkSession) -> Iterator[dict[str, object]]:
    """The page's setup run in the test session: its Python blocks in one namespace and its SQL
    statements; what it declared, created and registered is dropped afterwards."""
    caps = _jar_or_skip(spark)
    if not caps.sql_functions:
        pytest.skip(
            f"the page's examples declare session variables, which Spark 4.0 added (this is {caps.spark_version})"
        )
    before = {row[0] for row in spark.sql("SHOW USER FUNCTIONS").collect()}
    namespace: dict[str, object] = {"__name__": "sql_functions_page"}
    statements = []
    for lang, text in PAGE_READ.setup:
        if lang == "python":
            exec(compile(text, str(PAGE), "exec"), namespace)  # the page's own example code
        else:
            spark.sql(text)
            statements.append(text)
    yield namespace
    for name in {row[0] for row in spark.sql("SHOW USER FUNCTIONS").collect()} - before:
        spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {name}")
    for text in statements:
        if declared := re.match(r"\s*DECLARE OR REPLACE VARIABLE (\w+)", text):
            spark.sql(f"DROP TEMPORARY VARIABLE IF EXISTS {declared.group(1)}")
        if view := re.match(r"\s*CREATE OR REPLACE TEMPORARY VIEW (\w+)", text):
            spark.catalog.dropTempView(view.group(1))


def _shown(spark: SparkSession, sql: str) -> str:
    printed = io.StringIO()
    with redirect_stdout(printed):
        spark.sql(sql).show(truncate=False)
    return printed.getvalue().rstrip("\n")


@pytest.mark.parametrize(
    "example", PAGE_READ.examples, ids=[f"{e.section}-{i}" for i, e in enumerate(PAGE_READ.examples)]
)
def test_an_example_shows_what_spark_returns(
    example: Example, spark: SparkSession, page_namespace: dict[str, object]
) -> None:
    assert _shown(spark, example.sql) == example.shown


def _raised(spark: SparkSession, call: str) -> tuple[str, BaseException]:
    """When ``SELECT <call> FROM users`` fails (``analysis`` or ``run time``), and with what."""
    try:
        frame = spark.sql(f"SELECT {call} FROM users")
    except Exception as error:  # noqa: BLE001 - whatever Spark raises is compared below
        return "analysis", error
    try:
        frame.collect()
    except Exception as error:  # noqa: BLE001
        return "run time", error
    pytest.fail(f"SELECT {call} FROM users raised nothing")


@pytest.mark.parametrize("row", PAGE_READ.errors, ids=[f"{r.section}-{r.call}" for r in PAGE_READ.errors])
def test_an_error_is_the_message_its_call_raises(
    row: ErrorRow, spark: SparkSession, page_namespace: dict[str, object]
) -> None:
    """SQL messages end where Spark's text goes on (``. SQLSTATE`` after an analysis message,
    `` SQLSTATE`` after a run-time one): a message cut short on the page fails too."""
    if row.call.startswith("register_mlt_functions("):
        with pytest.raises(Exception) as raised:  # noqa: PT011 - the class is checked below
            eval(row.call, page_namespace)  # a call the page documents
        named = re.search(r"\(`?(\w+Error)`?\)", row.cause)
        assert named, f"{row.cause!r} names no exception class"
        assert type(raised.value).__name__ == named.group(1)
        assert str(raised.value) == row.message
        return
    moment, error = _raised(spark, row.call)
    assert moment == ("run time" if "(run time)" in row.cause else "analysis"), str(error)
    assert re.search(re.escape(row.message) + r"\.? SQLSTATE", str(error)), str(error)


def _entries() -> dict[str, str]:
    return {name: text for name, text in PAGE_READ.sections.items() if name.startswith("mlt_")}


def test_every_function_the_jars_extension_registers_has_an_entry(spark: SparkSession) -> None:
    """The names come from the list the extension injects (``MltFunctions.functions``)."""
    _jar_or_skip(spark)
    injected = spark._jvm.io.sparkmlt.MltFunctions.functions()  # type: ignore[union-attr]
    names = {injected.apply(i)._1().funcName() for i in range(injected.size())}
    assert names, "the extension registers no function"
    assert names <= set(_entries()), f"no entry for {sorted(names - set(_entries()))}"


def test_each_function_register_mlt_functions_creates_has_an_entry(spark: SparkSession) -> None:
    probe = "reference_probe"
    names = register_mlt_functions(spark, MLTCodec.from_seed(13, 3), probe)
    try:
        documented = {name.replace(probe, "<name>") for name in names}
        assert documented <= set(_entries()), f"no entry for {sorted(documented - set(_entries()))}"
    finally:
        for name in names:
            spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {name}")


def test_every_entry_has_a_signature_arguments_returns_errors_and_a_checked_example() -> None:
    entries = _entries()
    assert len(entries) >= 5
    for name, text in entries.items():
        missing = [part for part in PARTS if part not in text]
        assert not missing, f"{name}: no {', '.join(missing)}"
        assert any(example.section == name for example in PAGE_READ.examples), f"{name}: no example with output"
        assert any(row.section == name for row in PAGE_READ.errors), f"{name}: no error with its message"
