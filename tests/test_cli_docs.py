"""The CLI pages say what the parser accepts: its commands, each flag's values, its errors.

The reference section of docs/cli.md is generated from the parser (docs/hooks.py); these tests
keep the hand-written text around it from contradicting it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from spark_mlt.batch.cli import ERROR_PREFIX, build_parser, command_parsers, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CLI_PAGE = ROOT / "docs" / "cli.md"
COMMANDS = command_parsers(build_parser())
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


def _choices() -> dict[str, set[str]]:
    """Each flag's values, over every command that has it."""
    choices: dict[str, set[str]] = {}
    for parser in COMMANDS.values():
        for action in parser._actions:
            if action.choices is not None:
                for option in action.option_strings:
                    choices.setdefault(option, set()).update(str(choice) for choice in action.choices)
    return choices


def test_every_command_is_named_on_the_cli_page_and_no_page_miscounts_them() -> None:
    intro = CLI_PAGE.read_text().split("\n\n")[1]
    assert {name for name in COMMANDS if f"`{name}`" not in intro} == set()
    for page in PAGES:
        for word in re.findall(rf"\b({'|'.join(NUMBERS)}) commands\b", page.read_text()):
            count = NUMBERS.index(word) + 2
            assert count < 5 or count == len(COMMANDS), (
                f"{page.name}: '{word} commands', the parser has {len(COMMANDS)}"
            )


def test_a_flags_values_quoted_in_the_docs_are_the_parsers() -> None:
    """``--engine auto|jvm|native|udf`` (or ``\\|`` in a table) lists exactly the values the flag takes."""
    choices = _choices()
    quoted = 0
    for page in PAGES:
        for flag, values in re.findall(r"`(--[a-z-]+) ((?:[\w.-]+\\?\|)+[\w.-]+)`", page.read_text()):
            given = set(values.replace("\\|", "|").split("|"))
            assert flag in choices, f"{page.name}: {flag} takes no fixed values"
            assert given == choices[flag], (
                f"{page.name}: {flag} {sorted(given)}, the parser has {sorted(choices[flag])}"
            )
            quoted += 1
    assert quoted >= 5  # the table of docs/cli.md at least


def test_the_flag_table_names_commands_that_have_the_flag() -> None:
    rows = re.findall(
        r"^\| `(--[a-z-]+)[^`]*`(?:, `(--[a-z-]+)[^`]*`)* \| ([a-z, ]+)(?: \(|\s\|)", CLI_PAGE.read_text(), re.M
    )
    assert len(rows) >= 8
    for flag, _, commands in rows:
        for command in (name.strip() for name in commands.split(",")):
            options = {option for action in COMMANDS[command]._actions for option in action.option_strings}
            assert flag in options, f"docs/cli.md: {command} has no {flag}"


def _error_examples() -> list[tuple[list[str], list[str]]]:
    """The ``$ spark-mlt ...`` blocks of docs/cli.md whose output is an error, as (argv, lines)."""
    examples = []
    for token in MarkdownIt("commonmark").parse(CLI_PAGE.read_text()):
        lines = token.content.strip().splitlines() if token.type == "fence" else []
        if lines and lines[0].startswith("$ spark-mlt ") and lines[-1].startswith(ERROR_PREFIX):
            examples.append((shlex.split(lines[0])[2:], lines[1:]))
    return examples


@pytest.mark.parametrize(("argv", "printed"), _error_examples(), ids=lambda value: " ".join(value)[:40])
def test_an_error_the_cli_page_shows_is_what_the_command_prints(
    argv: list[str],
    printed: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    for word in argv:  # the example's input files exist, as the reader's would
        if word.endswith(".parquet"):
            (tmp_path / word).write_bytes(b"")
    try:
        code = main(argv)
    except SystemExit as exited:  # the parser's own errors
        code = exited.code
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-len(printed) :] == printed
