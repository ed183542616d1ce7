"""The README's and the documentation's examples work as written.

- Python blocks run with pytest-examples: the blocks of one page in order, sharing their
  globals, as a reader runs them top-down (```python test="skip" marks the few that need a
  cluster or minutes).
- Shell blocks are read with markdown-it-py: each ``spark-mlt`` command (and each
  ``spark-submit jobs/<job>.py`` one) is parsed by the real parser, the cheap ones
  (``--help``, ``--version``) run, and each ``make`` target exists.
- Every ``conf/*.yaml`` builds the options of the command it names.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from pyspark.sql import SparkSession
from pytest_examples import CodeExample, EvalExample, find_examples

from spark_mlt.batch.cli import JOBS, main
from spark_mlt.batch.cli.jobs import job_values
from spark_mlt.batch.cli.main import parse_command_line
from spark_mlt.delta.features import FEATURES
from tests.support.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = ("bash", "sh", "shell", "console")
#: the command each spark-submit script runs (jobs/<script>.py -> spark-mlt <command>)
SCRIPTS = {"tokenize_movielens.py": "movielens", "tokenize_table.py": "tokenize", "decode_table.py": "decode"}
SCRIPTS["paper.py"] = "paper"


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _fences(page: Path) -> list[tuple[str, str]]:
    """The (language, text) of each fenced block of a page, as a Markdown parser reads them."""
    tokens = MarkdownIt("commonmark").parse(page.read_text())
    return [(token.info.split()[0] if token.info else "", token.content) for token in tokens if token.type == "fence"]


#: pages a new user follows top-down: their shell commands run too, after the Python blocks
#: before them, in one folder
WALKTHROUGHS = [ROOT / "docs" / "getting-started.md"]


def _python_pages() -> Iterator[Path]:
    return (page for page in PAGES if any(lang.startswith("py") for lang, _ in _fences(page)))


def _run_page(page: Path, eval_example: EvalExample, *, run_shell: bool) -> int:
    """Run a page's Python blocks in order, sharing their globals (and with ``run_shell`` its
    ``spark-mlt`` commands where they stand, each to exit 0); the number of blocks skipped.
    pytest-examples must find every Python fence a Markdown parser sees, so that no block is
    left untested by a fence spelling it misses."""
    examples: list[CodeExample] = list(find_examples(page))
    fences = _fences(page)
    assert len(examples) == sum(lang.startswith("py") for lang, _ in fences)
    pending = iter(examples)
    namespace: dict[str, object] = {}
    skipped = 0
    main_module = sys.modules["__main__"]  # pytest-examples runs each block as __main__
    try:
        for lang, text in fences:
            if lang.startswith("py"):
                example = next(pending)
                if example.prefix_settings().get("test") == "skip":
                    skipped += 1
                    continue
                namespace = eval_example.run(example, module_globals=namespace)
            elif lang in SHELLS and run_shell:
                for words in _commands(text):
                    if words[0] == "spark-mlt":
                        assert main(words[1:]) == 0, f"{_name(page)}: {' '.join(words)}"
    finally:
        sys.modules["__main__"] = main_module
    return skipped


@pytest.mark.parametrize("page", [p for p in _python_pages() if p not in WALKTHROUGHS], ids=_name)
def test_the_python_examples_of_a_page_run_in_order(
    page: Path, eval_example: EvalExample, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skipped blocks (```python test="skip") are few."""
    monkeypatch.chdir(tmp_path)  # an example's relative paths land in the test's folder
    skipped = _run_page(page, eval_example, run_shell=False)
    assert skipped <= max(1, len(list(find_examples(page))) // 3), f"{_name(page)}: most examples are skipped"


@pytest.mark.parametrize("page", WALKTHROUGHS, ids=_name)
def test_a_walkthrough_works_as_written_top_down(
    page: Path, eval_example: EvalExample, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # a reader's Python and Spark share one folder; the test's JVM started elsewhere, so its
    # local file system resolves relative paths against tmp_path for the walk-through
    local = spark._jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    before = local.getWorkingDirectory()
    local.setWorkingDirectory(spark._jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri()))
    try:
        assert _run_page(page, eval_example, run_shell=True) == 0
    finally:
        local.setWorkingDirectory(before)


def _commands(text: str) -> Iterator[list[str]]:
    """The words of each command line of a shell block: continuation lines joined, comments,
    prompts and leading VAR=value assignments dropped, ``a && b`` split."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for raw in joined.splitlines():
        line = raw.strip().removeprefix("$ ")
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s(?:&&|;|\|\|)\s", line):
            words = shlex.split(part, comments=True)
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                words.pop(0)
            if words:
                yield words


def _shell_commands() -> list[tuple[str, list[str]]]:
    return [
        (_name(page), words)
        for page in PAGES
        for lang, text in _fences(page)
        if lang in SHELLS
        for words in _commands(text)
    ]


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-zA-Z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))


def _cli_argv(words: list[str]) -> list[str] | None:
    """The ``spark-mlt`` arguments of a command line: ``spark-mlt ...``, or a spark-submit of a
    job script (``spark-submit [options] jobs/<script>.py ...``); None for other commands."""
    if words[0] == "spark-mlt":
        return words[1:]
    if words[0] == "spark-submit":
        script = next((i for i, word in enumerate(words) if word.startswith("jobs/") and word.endswith(".py")), None)
        if script is not None and Path(words[script]).name in SCRIPTS:
            assert (ROOT / words[script]).is_file(), words[script]
            return [SCRIPTS[Path(words[script]).name], *words[script + 1 :]]
    return None


def test_every_shell_command_of_the_docs_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real parser takes each documented ``spark-mlt`` command (conf files read from the
    repository, as a reader runs them from a clone); ``--help`` and ``--version`` run."""
    monkeypatch.chdir(ROOT)
    commands = _shell_commands()
    targets = _make_targets()
    parsed = 0
    for page, words in commands:
        if words[0] == "make":
            named = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
            assert set(named) <= targets, f"{page}: {' '.join(words)} names no Makefile target"
            continue
        argv = _cli_argv(words)
        if argv is None:
            continue
        if "--help" in argv or "-h" in argv or argv == ["--version"]:
            with pytest.raises(SystemExit) as exited:
                main(argv)
            assert exited.value.code == 0, f"{page}: {' '.join(words)}"
            continue
        try:
            args, config = parse_command_line(argv)
        except SystemExit:
            pytest.fail(f"{page}: the parser refuses {' '.join(words)}")
        if args.command in JOBS:
            job_values(JOBS[args.command], args, config)
        parsed += 1
    assert parsed >= 10, f"only {parsed} spark-mlt commands found in the docs"


@pytest.mark.parametrize("conf", sorted((ROOT / "conf").glob("*.yaml")), ids=lambda p: p.name)
def test_a_shipped_conf_file_builds_its_commands_options(conf: Path) -> None:
    """Each conf file names its command in its first line (``spark-mlt <command> --config ...``);
    its keys are that command's flags and its values pass the options' checks."""
    named = re.search(r"spark-mlt (\w+) --config", conf.read_text().splitlines()[0])
    assert named, f"{conf.name}: its first line names no command"
    job = JOBS[named.group(1)]
    args, config = parse_command_line([named.group(1), "--config", str(conf)])
    values = job_values(job, args, config)
    fields = {name: value for name, value in values.items() if name not in job.arguments}
    job.options(**fields)


def test_the_guarantees_feature_table_says_what_the_gate_does() -> None:
    """The table of Delta features: one row per feature the gate knows, and its read and write
    cells say what spark_mlt.delta.features.FEATURES says."""
    said = {}
    for page in PAGES:
        for cells in re.findall(r"^\| (`\w+`[^|]*) \| ([^|]+) \| ([^|]+) \|", page.read_text(), flags=re.M):
            for name in re.findall(r"`(\w+)`", cells[0]):
                said[name] = (cells[1].strip(), cells[2].strip())
    words = {True: "yes", False: "refused", "4.0": "Spark 4: yes"}
    for name, feature in FEATURES.items():
        if name.endswith("-preview"):
            continue
        read, write = said[name]
        assert read.startswith(words[feature.read]), name
        assert write.startswith(words[feature.write]), name


def test_pages_the_code_points_to_exist_with_the_sections_it_names() -> None:
    """Docstrings, comments and notebooks point readers at ``docs/<page>.md`` (and a section by
    its title in quotes right after it): a renamed page or heading fails here, not in a reader's
    hands."""
    sources = [ROOT / "Makefile", *ROOT.glob("conf/*"), *ROOT.glob("notebooks/*.ipynb")]
    for folder in ("spark_mlt", "jobs", "benchmarks"):
        sources += (ROOT / folder).rglob("*.py")
    pointers = 0
    for source in sources:
        text = source.read_text()
        for page, section in re.findall(r"(docs/[\w/-]+\.md)(?:, \"([^\"]+)\")?", text):
            pointers += 1
            assert (ROOT / page).is_file(), f"{_name(source)} points at {page}, which does not exist"
            if section:
                headings = re.findall(r"^#+ (.+)$", (ROOT / page).read_text(), flags=re.M)
                title = " ".join(section.split())  # a title a docstring wraps
                assert title in headings, f"{_name(source)}: {page} has no section {title!r}"
    assert pointers >= 5
