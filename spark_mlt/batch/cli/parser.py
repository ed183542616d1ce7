"""The ``spark-mlt`` argument parser: one sub-command per job and table command, each built
the same way from its flags, with their help and examples (the CLI reference page is generated
from it).

Example::

    build_parser().parse_args(["decode", "--input", "out/orders_mlt", "--verify"])
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from spark_mlt import __version__
from spark_mlt.batch.cli.flags import ERROR_PREFIX, EXIT_USAGE, RUN_FLAGS, Command, add_flags, flag_of
from spark_mlt.batch.cli.jobs import JOBS, Job
from spark_mlt.batch.cli.tables import TABLE_COMMANDS

_DESCRIPTION = """Modular Linear Tokenization jobs for Spark + Delta Lake.

exit codes:
  0    success
  1    failure (one line 'spark-mlt: error: ...' on stderr, the prefix of every error)
  2    usage error: a bad flag or option value, a missing flag, a bad conf file
  3    decode --verify: decoded ids differ from the originals
  4    more rows rejected than --max-rejected allows (rows and quarantine committed)
  130  interrupted (Ctrl-C)
"""


class _Parser(argparse.ArgumentParser):
    """argparse with spark-mlt's one error prefix: a usage error of a command prints the
    command's usage, then ``spark-mlt: error: ...`` (argparse's own says ``spark-mlt <command>:
    error: ...``), and exits 2. Its commands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{ERROR_PREFIX}{message}\n")


def _epilog(examples: Iterable[str]) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in examples)


def _add_verbosity(command: argparse.ArgumentParser, *, report: bool = False, before: bool = False) -> None:
    """``-v``/``-q``, which every command takes, before it (``before``: ``spark-mlt -v tokenize``)
    as well as after it; and ``--json`` where a command prints a job's report (``report``).
    Given before and after the command, the counts add up."""
    group = command.add_argument_group("output")
    prefix = "global_" if before else ""  # a command's defaults would overwrite the top level's values
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        dest=f"{prefix}verbose",
        help="more log lines (-v: debug; Spark: INFO)",
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=0,
        dest=f"{prefix}quiet",
        help="fewer log lines (-q: warnings only; -qq: errors only)",
    )
    if report:
        group.add_argument(
            "--json",
            action="store_true",
            help="print the job's report as one JSON document on stdout instead of its summary lines",
        )


def build_parser(config: Mapping[str, Any] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``spark-mlt`` command. A job argument that ``config`` (a conf
    file's options) gives is not required on the command line."""
    parser = _Parser(
        prog="spark-mlt",
        description=_DESCRIPTION,
        epilog="Run 'spark-mlt <command> --help' for a command's flags and examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser, before=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    for name, command in COMMANDS.items():
        _add_command(sub, name, command, set(config or {}) if "config" in command.run_flags else set())
    return parser


def _add_command(sub: Any, name: str, command: Command, given: set[str]) -> None:
    """A command, every one alike: its arguments and options as flags (a job's other form's in
    their own group), how to run it, and its output's verbosity."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=command.help,
        description=command.help,
        epilog=_epilog(command.examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    required = parser.add_argument_group("required")
    add_flags(parser, command.own_flags(), required=required, given=given)
    form = command.form if isinstance(command, Job) else None
    if form is not None:
        add_flags(parser.add_argument_group(f"{form.name} (with {flag_of(form.name)})"), form.flags())
    if command.run_flags:
        run_group = parser.add_argument_group("how to run")
        for flag in command.run_flags:
            kwargs: dict[str, Any] = {"action": "append", "metavar": "KEY=VALUE"} if flag == "conf" else {}
            run_group.add_argument(flag_of(flag), default=None, help=RUN_FLAGS[flag], **kwargs)
    _add_verbosity(parser, report=command.report)


#: Every command, by name: the jobs, then the table commands.
COMMANDS: dict[str, Command] = {**JOBS, **TABLE_COMMANDS}


def command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each command of ``parser`` (from
    [`build_parser`][spark_mlt.batch.cli.build_parser]), by name: what the documentation's CLI
    reference prints."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)
