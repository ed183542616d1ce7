"""The public pages say what the code does: the kinds of statement that went stale before.

Each test reads the pages as text and the code as the source of truth, and pins one kind of
defect a reader met:

- an engine named in a page (``engine="..."``, ``--engine ...``, the engine option's table row,
  `` `x` engine``) that is no value of `spark_mlt.options.Engine`, or an incomplete list of them;
- an engine policy the code does not follow: Spark 3.5's SQL functions "on the udf engine", or
  ``auto`` "runs" the native or udf engine, where the policy picks spark-mlt's jar first
  (`spark_mlt.column.engine.RULES`): such a statement must say it holds without the jar;
- a ``SPARK_MLT_*`` variable that the package or its scripts read, missing from the
  environment-variable table;
- a path of this project's machines (``../shared``) or an issue number in a public page;
- a page under docs/ that mkdocs.yml's nav leaves out, or a nav page that the home page
  (docs/index.md) does not lead to.
"""

from __future__ import annotations

import ast
import inspect
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_mlt.column.functions import mlt_encode
from spark_mlt.options import Engine, EngineName
from tests.support.paths import ROOT

DOCS = ROOT / "docs"
#: what a reader of the project sees: the README, the changelog and the site's pages
PUBLIC = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]
#: the pages that describe the code as it is now (the changelog records how it was)
CURRENT = [page for page in PUBLIC if page.name != "CHANGELOG.md"]
#: where the package and its scripts read environment variables
SOURCES = [ROOT / "spark_mlt", ROOT / "jobs"]

ENGINES: tuple[str, ...] = typing.get_args(Engine)
ENGINE_NAMES: tuple[str, ...] = typing.get_args(EngineName)

#: a statement that holds only without spark-mlt's jar says so
WITHOUT_JAR = re.compile(
    r"without (?:the |a |spark-mlt's |its )?jar|no (?:spark-mlt )?jar|jar-free|without spark-mlt's jar", re.I
)


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` inside a cell is no separator)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _is_row(line: str) -> bool:
    return line.lstrip().startswith("|") and not re.fullmatch(r"\s*\|[\s:|-]*\|?\s*", line)


def _paragraphs(text: str) -> Iterator[str]:
    """Blocks of prose between blank lines, joined into one line each (table rows left out)."""
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip() and not _is_row(line):
            block.append(line.strip())
        elif block:
            yield " ".join(block)
            block = []


def _sentences(paragraph: str) -> list[str]:
    # a full stop followed by a space ends a sentence ("3.5" does not); a semicolon does not
    return re.split(r"(?<=[.!?])\s+", paragraph)


def _table_rows(text: str) -> Iterator[list[str]]:
    return (_cells(line) for line in text.splitlines() if _is_row(line))


# --- engine names --------------------------------------------------------------------------

#: words that read as an engine's name before "engine" but are none of the code's
NOT_ENGINES = ("arrow", "pandas", "sql", "numpy", "python", "scala", "java", "expression", "jar", "spark")


def _quoted_engines(line: str) -> Iterator[tuple[str, list[str], tuple[str, ...]]]:
    """(form, names, what they may be) of each engine a line names in code form: an option's
    value may be ``auto``, "the `x` engine" only an engine."""
    for found in re.finditer(r"\bengine\s*=\s*[\"']([^\"']*)[\"']", line):
        yield found[0], [found[1]], ENGINES
    for found in re.finditer(r"setEngine\(\s*[\"']([^\"']*)[\"']", line):
        yield found[0], [found[1]], ENGINES
    for found in re.finditer(r"--engine[ =]\{([^}]*)\}", line):
        yield found[0], [name.strip() for name in found[1].split(",")], ENGINES
    for found in re.finditer(r"--engine[ =]([A-Za-z_]+(?:\s*\\?\|\s*[A-Za-z_]+)*)", line):
        yield found[0], [name.strip() for name in re.split(r"\\?\|", found[1])], ENGINES
    for found in re.finditer(r"`([A-Za-z_]+)` engine\b", line):
        yield found[0], [found[1]], ENGINE_NAMES
    for found in re.finditer(r"\b([a-z]+) engine\b", line):
        if found[1] in NOT_ENGINES:
            yield found[0], [found[1]], ENGINE_NAMES


def test_engine_names_quoted_in_the_pages_are_the_codes() -> None:
    """Every engine a page names in code form is a value of `spark_mlt.options.Engine`, and a
    list of alternatives (``--engine auto|jvm|native|udf``) names all of them. A line that shows
    a rejected value (its ``OptionError``, "must be one of") is an example of the error."""
    wrong = []
    for page in CURRENT:
        for number, line in enumerate(_text(page).splitlines(), 1):
            if "OptionError" in line or "must be one of" in line:
                continue
            for form, names, allowed in _quoted_engines(line):
                if any(name not in allowed for name in names):
                    wrong.append(f"{_name(page)}:{number}: {form!r} is not one of {allowed}")
                elif len(names) > 1 and set(names) != set(ENGINES):
                    wrong.append(f"{_name(page)}:{number}: {form!r} lists {names}, the engines are {ENGINES}")
    assert not wrong, "\n".join(wrong)


def test_the_engine_options_table_rows_list_every_engine_and_the_default() -> None:
    """A table row about the engine option (its first cell ``engine`` or ``--engine``) lists
    every engine in its last cell, and the value it marks "(default" is the code's default."""
    default = inspect.signature(mlt_encode).parameters["engine"].default
    rows = 0
    wrong = []
    for page in CURRENT:
        for cells in _table_rows(_text(page)):
            if cells[0].strip("`") not in ("engine", "--engine"):
                continue
            rows += 1
            values = cells[-1]
            listed = set(re.findall(r"`([a-z]+)`", values))
            if listed != set(ENGINES):
                wrong.append(f"{_name(page)}: {cells[0]} row lists {sorted(listed)}, the engines are {ENGINES}")
            for marked in re.findall(r"`([a-z]+)` \(default", values):
                if marked != default:
                    wrong.append(
                        f"{_name(page)}: {cells[0]} row marks {marked!r} as the default, the code's is {default!r}"
                    )
    assert rows, "no table row documents the engine option"
    assert not wrong, "\n".join(wrong)


# --- the engine policy ---------------------------------------------------------------------


def _statements(text: str) -> Iterator[tuple[str, str]]:
    """(statement, its context): each sentence of the prose, with its paragraph, and each
    table cell, with its row."""
    for paragraph in _paragraphs(text):
        for sentence in _sentences(paragraph):
            yield sentence, paragraph
    for cells in _table_rows(text):
        for cell in cells:
            yield cell, " | ".join(cells)


SQL_FUNCTIONS = re.compile(r"SQL functions?|register_mlt_functions", re.I)
UDF_ENGINE = re.compile(r"\budf\b|UDF engine")
ON_3_5 = re.compile(r"\b3\.5\b")
#: a statement that names the jar's place in the policy (the jar first, the udf engine without it)
JAR_FIRST = re.compile(
    WITHOUT_JAR.pattern + r"|where (?:the|a) (?:session has|jar is)|jvm where|with (?:the|spark-mlt's) jar", re.I
)


def test_no_page_says_spark_3_5_sql_functions_run_on_the_udf_engine_without_the_jar() -> None:
    """Regression: compatibility.md, columns.md and the README said Spark 3.5's SQL functions run
    on the udf engine; where the session has spark-mlt's jar the policy registers the jar's
    functions (`RULES`: the jvm rule is first). A sentence or table cell that puts 3.5's SQL
    functions on the udf engine says where the jar stands."""
    wrong = []
    for page in CURRENT:
        for statement, context in _statements(_text(page)):
            if not (SQL_FUNCTIONS.search(statement) and UDF_ENGINE.search(statement)):
                continue
            on_3_5 = ON_3_5.search(statement) or (" | " in context and ON_3_5.search(context.split(" | ")[0]))
            if on_3_5 and not JAR_FIRST.search(statement):
                wrong.append(f"{_name(page)}: {statement!r}")
    assert not wrong, "3.5's SQL functions on the udf engine, with no word of the jar:\n" + "\n".join(wrong)


AUTO_RUNS = re.compile(r"\bauto\b\W{0,3}\s+(?:runs|picks|chooses|uses|selects)\s+(?:the\s+)?(?:native|udf)\b")


def test_no_page_says_auto_runs_a_jar_free_engine_without_saying_without_the_jar() -> None:
    """Regression: performance.md's "auto runs the native engine" and concepts.md's "auto runs
    the udf engine for bound inputs" hold only in a session without spark-mlt's jar, where the
    policy's first rule (the jvm engine) is passed over: their paragraph says so."""
    assert _rules()[0].engine == "jvm"  # what makes the qualifier necessary
    wrong = []
    for page in CURRENT:
        for paragraph in _paragraphs(_text(page)):
            for found in AUTO_RUNS.finditer(paragraph):
                if not WITHOUT_JAR.search(paragraph):
                    wrong.append(f"{_name(page)}: {found[0]!r} in {paragraph[:160]!r}...")
    assert not wrong, "\n".join(wrong)


def _rules() -> tuple[Any, ...]:
    from spark_mlt.column.engine import RULES  # noqa: PLC0415 - only this test needs the policy

    return RULES


# --- environment variables -----------------------------------------------------------------


def _environment_reads(path: Path) -> Iterator[ast.expr]:
    """The key expressions of each environment read in a module: ``os.environ.get(k)``,
    ``os.getenv(k)``, ``os.environ[k]``, ``k in os.environ``, ``.pop``/``.setdefault``."""

    def is_environ(node: ast.expr) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ"
        )

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            on_environ = isinstance(func, ast.Attribute) and is_environ(func.value)
            if called == "getenv" or (called in ("get", "pop", "setdefault") and on_environ):
                yield node.args[0]
        elif isinstance(node, ast.Subscript) and is_environ(node.value):
            yield node.slice
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In) and is_environ(node.comparators[0]):
            yield node.left


def _variables_read() -> dict[str, str]:
    """Each ``SPARK_MLT_*`` variable read by the package or its scripts, and a file reading it;
    a key held in a module constant (``JVM_OFF_ENV = "SPARK_MLT_JVM"``) counts where it is read."""
    modules = [path for source in SOURCES for path in sorted(source.rglob("*.py"))]
    constants: dict[str, str] = {}
    for path in modules:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                constants[target.id] = value.value
    read: dict[str, str] = {}
    for path in modules:
        for key in _environment_reads(path):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                name = key.value
            elif isinstance(key, ast.Name | ast.Attribute):
                name = constants.get(key.id if isinstance(key, ast.Name) else key.attr, "")
            else:
                continue
            if name.startswith("SPARK_MLT_"):
                read.setdefault(name, _name(path))
    return read


def _environment_table() -> tuple[Path, set[str]]:
    """The page with the "Environment variables" section, and the variables its table lists."""
    found = []
    for page in CURRENT:
        lines = _text(page).splitlines()
        for start, line in enumerate(lines):
            if re.fullmatch(r"#+\s+Environment variables\s*", line):
                section = []
                for following in lines[start + 1 :]:
                    if following.startswith("#"):
                        break
                    section.append(following)
                names = {
                    name
                    for cells in _table_rows("\n".join(section))
                    for name in re.findall(r"`(SPARK_MLT_\w+)`", cells[0])
                }
                found.append((page, names))
    assert len(found) == 1, f"one page has the environment-variable table, found {[_name(p) for p, _ in found]}"
    return found[0]


def test_every_variable_the_package_reads_is_in_the_environment_table() -> None:
    """Regression: SPARK_MLT_JVM (sessions spark-mlt starts load no jar) was read but listed nowhere."""
    read = _variables_read()
    assert {"SPARK_MLT_JVM", "SPARK_MLT_DELTA", "SPARK_MLT_JARS_DIR"} <= set(read)  # the scan sees constants
    page, listed = _environment_table()
    missing = {name: where for name, where in read.items() if name not in listed}
    assert not missing, f"read but not in {_name(page)}'s table: {missing}"


# --- what a public page must not say -------------------------------------------------------

ISSUE_NUMBER = re.compile(r"\b(?:issues?|tickets?|pull requests?|PRs?)\s*(?:no\.?\s*)?#?\d+\b|(?<![\w&/#])#\d+\b", re.I)


@pytest.mark.parametrize("page", PUBLIC, ids=_name)
def test_a_public_page_names_no_path_of_our_machines_and_no_issue_number(page: Path) -> None:
    """Regression: ``../shared/movielens`` (a folder of the machines this project is built on) and
    "the targets of issue 42" reached the public pages; a reader has neither. A MovieLens
    release is "a release folder, e.g. data/ml-latest-small"."""
    text = _text(page)
    assert "../shared" not in text
    assert ISSUE_NUMBER.findall(text) == [], [line for line in text.splitlines() if ISSUE_NUMBER.search(line)]


# --- the site's navigation -----------------------------------------------------------------


#: mkdocs.yml as data: tags such as ``!!python/name:`` (Markdown extensions) read as null
_Loader: Any = type("_Loader", (yaml.SafeLoader,), {})
_Loader.add_multi_constructor("", lambda loader, suffix, node: None)


def _mkdocs() -> dict[str, Any]:
    config: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    return config


def _nav_pages(entries: Any) -> Iterator[str]:
    if isinstance(entries, str):
        if not re.match(r"[a-z]+://", entries):
            yield entries
    elif isinstance(entries, list):
        for entry in entries:
            yield from _nav_pages(entry)
    elif isinstance(entries, dict):
        for value in entries.values():
            yield from _nav_pages(value)


def _links(page: Path) -> set[str]:
    """The docs-relative paths of the pages a page links to (inline links, anchors dropped)."""
    targets = set()
    for href in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", _text(page)):
        if re.match(r"[a-z]+:", href) or not href.endswith(".md"):
            continue
        targets.add((page.parent / href).resolve().relative_to(DOCS.resolve()).as_posix())
    return targets


def test_every_page_under_docs_is_in_the_nav() -> None:
    """A page the nav leaves out is built but found by no reader browsing the site."""
    config = _mkdocs()
    nav = set(_nav_pages(config["nav"]))
    left_out_on_purpose = {line.strip() for line in str(config.get("not_in_nav") or "").splitlines() if line.strip()}
    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}
    missing = sorted(pages - nav - left_out_on_purpose)
    assert not missing, f"pages under docs/ that mkdocs.yml's nav leaves out: {missing}"
    assert not nav - pages, f"nav entries with no page: {sorted(nav - pages)}"


def test_every_nav_page_is_linked_from_the_home_page() -> None:
    """The home page (docs/index.md) leads to every page of the nav: it links the page, or the
    index page of the page's folder, which links it (the API reference's pages)."""
    home = DOCS / "index.md"
    linked = _links(home)
    missing = []
    for page in _nav_pages(_mkdocs()["nav"]):
        if page == "index.md" or page in linked:
            continue
        folder_index = (Path(page).parent / "index.md").as_posix()
        if folder_index != "index.md" and folder_index in linked and page in _links(DOCS / folder_index):
            continue
        missing.append(page)
    assert not missing, f"nav pages docs/index.md does not lead to: {missing}"
