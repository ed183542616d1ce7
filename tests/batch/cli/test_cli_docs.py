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
from tests.support.paths import ROOT

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


def _flag_rows() -> list[tuple[list[str], list[str]]]:
    """The (flags, commands) of each row of docs/cli.md's table of flags: the flags of its first
    cell, the commands its second cell lists (a remark in parentheses after one left out:
    ``tokenize (with `--mode overwrite`), sync``)."""
    rows = []
    for line in CLI_PAGE.read_text().splitlines():
        if line.startswith("| `--"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            commands = re.sub(r"\s*\([^)]*\)", "", cells[1])
            rows.append((re.findall(r"`(--[a-z-]+)", cells[0]), [name.strip() for name in commands.split(",")]))
    return rows


def _commands_with(flag: str) -> set[str]:
    return {name for name, parser in COMMANDS.items() for action in parser._actions if flag in action.option_strings}


def test_the_flag_table_names_exactly_the_commands_that_have_each_flag() -> None:
    """Each command a row lists has each of its flags, and each command that has a flag the table
    names is listed in one of its rows: the table once left out sync's ``--handle-invalid``
    (``SyncOptions`` derives from ``TokenizeOptions``)."""
    rows = _flag_rows()
    assert len(rows) >= 8
    listed: dict[str, set[str]] = {}
    for flags, commands in rows:
        for flag in flags:
            assert set(commands) <= _commands_with(flag), (
                f"docs/cli.md: {set(commands) - _commands_with(flag)} have no {flag}"
            )
            listed.setdefault(flag, set()).update(commands)
    for flag, commands in listed.items():
        assert _commands_with(flag) <= commands, (
            f"docs/cli.md: {flag} is a flag of {_commands_with(flag) - commands} too"
        )


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
