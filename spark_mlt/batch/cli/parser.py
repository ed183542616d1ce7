"""The ``spark-mlt`` argument parser: one sub-command per job and table command, with their help
and examples (the CLI reference page is generated from it).

Example::

    build_parser().parse_args(["decode", "--input", "out/orders_mlt", "--verify"])
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from spark_mlt import __version__
from spark_mlt.batch.cli.flags import ERROR_PREFIX, EXIT_USAGE, STORAGE_FLAG, add_flags, flag_of
from spark_mlt.batch.cli.jobs import JOBS, Job

_DESCRIPTION = """Modular Linear Tokenization jobs for Spark + Delta Lake.

exit codes:
  0    success
  1    failure (one line 'spark-mlt: error: ...' on stderr, the prefix of every error)
  2    usage error: a bad flag or option value, a missing flag, a bad conf file
  3    decode --verify: decoded ids differ from the originals
  4    more rows rejected than --max-rejected allows (rows and quarantine committed)
  130  interrupted (Ctrl-C)
"""

_INSPECT_EXAMPLES = (
    "spark-mlt inspect --input out/orders_mlt",
    "spark-mlt inspect --input out/orders_mlt --schema analytics --conf spark.sql.catalogImplementation=hive",
    "spark-mlt inspect --input s3://lake/orders_mlt --storage-options AWS_REGION=eu-west-1",
)
_PUBLISH_EXAMPLES = (
    "spark-mlt publish --input out/orders_mlt --schema analytics",
    "spark-mlt publish --input out/orders_mlt --schema main.analytics --print > orders_mlt.sql",
    "spark-mlt publish --input sales.orders_mlt --schema analytics --no-view "
    "--conf spark.sql.catalogImplementation=hive",
)
_VACUUM_EXAMPLES = (
    "spark-mlt vacuum --input out/orders_mlt",
    "spark-mlt vacuum --input out/orders_mlt --retention-hours 24 --apply",
)


_ERASE_EXAMPLES = (
    "spark-mlt erase --input out/customers_mlt",
    "spark-mlt erase --input out/customers_mlt --apply",
    "spark-mlt erase --input out/customers_mlt --retention-hours 0 --apply --allow-short-retention",
)
_FIND_EXAMPLES = (
    "spark-mlt find --input out/customers_mlt --column customer_id --value 42",
    "spark-mlt find --input out/customers_mlt --column email --value alice@example.com",
)

_JAR_EXAMPLES = (
    "spark-mlt jar",
    "spark-mlt jar --spark-version 3.5.1",
    "spark-submit $(spark-mlt jar --submit) jobs/tokenize_table.py --input in/orders --output out/orders_mlt "
    "--columns user_id",
)


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
    for name, job in JOBS.items():
        _add_job_command(sub, name, job, set(config or {}))
    _add_table_commands(sub)
    _add_publish_command(sub)
    _add_jar_command(sub)
    return parser


def _add_command(sub: Any, name: str, help_: str, examples: Iterable[str]) -> argparse.ArgumentParser:
    command: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help_,
        description=help_,
        epilog=_epilog(examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return command


def _add_job_command(sub: Any, name: str, job: Job, given: set[str]) -> None:
    """A job's command: its arguments and options as flags, its other form's in their own group,
    and how to run it."""
    command = _add_command(sub, name, job.help, job.examples)
    required = command.add_argument_group("required")
    add_flags(command, job.own_flags(), required=required, given=given)
    if job.form is not None:
        form = job.form
        add_flags(command.add_argument_group(f"{form.name} (with {flag_of(form.name)})"), form.flags())
    run_group = command.add_argument_group("how to run")
    run_group.add_argument("--config", help="YAML or JSON file of options, keys as the flags (flags override it)")
    run_group.add_argument(
        "--master",
        default=None,
        help="Spark master (default: spark.master of spark-defaults.conf under SPARK_CONF_DIR or SPARK_HOME/conf, "
        "else local[2]; a local master gets local defaults)",
    )
    run_group.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting for the session this command starts (repeatable); wins over the defaults",
    )
    _add_verbosity(command, report=job.spark)


def _add_table_commands(sub: Any) -> None:
    """``inspect``, ``vacuum``, ``erase`` and ``find``: a table's path or name, and its store's settings."""
    for name, help_, examples in (
        ("inspect", "print a table's codecs, versions and row count (JSON)", _INSPECT_EXAMPLES),
        ("vacuum", "list (default) or delete orphan and expired files of a table", _VACUUM_EXAMPLES),
        (
            "erase",
            "make a mirror's erasures physical: purge deletion vectors and vacuum the mirror, its quarantine, "
            "vocabularies and value counts (JSON: what is deleted, what is pending and until when)",
            _ERASE_EXAMPLES,
        ),
        (
            "find",
            "where a value of an id column is held: the table's, its quarantine's and its vocabulary's current "
            "rows, and their files not yet vacuumed (JSON, with a verdict; exit 0 either way)",
            _FIND_EXAMPLES,
        ),
    ):
        _add_table_flags(_add_command(sub, name, help_, examples), name)


def _add_table_flags(command: argparse.ArgumentParser, name: str) -> None:
    """The flags of table command ``name``."""
    required = command.add_argument_group("required")
    required.add_argument("--input", required=True, help="Delta table path, or a catalog table's name (db.table)")
    if name == "find":
        required.add_argument("--column", required=True, help="an id column of the table (one it has a codec for)")
        required.add_argument("--value", required=True, help="the id (an integer) or, for a string key column, the key")
    if name in ("vacuum", "erase"):
        command.add_argument(
            "--retention-hours",
            type=float,
            default=None,
            help="keep files younger than this (default: the table's delta.deletedFileRetentionDuration, "
            "168 hours unless it sets one)",
        )
        command.add_argument("--apply", action="store_true", help="delete the files (default: only list them)")
        command.add_argument(
            "--allow-short-retention",
            action="store_true",
            help="let --apply delete with a --retention-hours shorter than a table's own, files that time travel "
            "and running readers still need included (Delta's retentionDurationCheck off; refused without it)",
        )
    if name == "vacuum":
        command.add_argument("--orphans", action="store_true", help="list the files no table version references, now")
    if name in ("inspect", "erase", "find"):
        command.add_argument(
            "--quarantine", default=None, help="the mirror's quarantine table (default: <input>_quarantine)"
        )
    if name == "inspect":
        command.add_argument(
            "--schema",
            action="append",
            default=None,
            help="also list the functions and views spark-mlt published for the table in this catalog schema "
            "(repeatable; starts Spark: the session's catalog, --conf for its settings)",
        )
        command.add_argument(
            "--conf",
            action="append",
            metavar="KEY=VALUE",
            help="a Spark setting for the session --schema starts (the catalog's, e.g. "
            "spark.sql.catalogImplementation=hive)",
        )
    add_flags(command, [STORAGE_FLAG])
    _add_verbosity(command)


def _add_publish_command(sub: Any) -> None:
    help_ = (
        "create, in the session's catalog, SQL functions that decode and encode each token column of a table, "
        "and a view of it with the ids decoded: SQL any session can run with nothing of spark-mlt installed "
        "(JSON: each object and what was done)"
    )
    command = _add_command(sub, "publish", help_, _PUBLISH_EXAMPLES)
    required = command.add_argument_group("required")
    required.add_argument("--input", required=True, help="Delta table path, or a catalog table's name (db.table)")
    required.add_argument(
        "--schema", required=True, help="the catalog schema the objects go in (analytics, or catalog.analytics)"
    )
    command.add_argument("--prefix", default=None, help="the start of the objects' names (default: the table's name)")
    command.add_argument("--no-functions", action="store_true", help="leave the SQL functions out (Spark 3.5 has none)")
    command.add_argument("--no-view", action="store_true", help="leave the view out")
    command.add_argument(
        "--print",
        action="store_true",
        help="print the DDL (the statements a run executes) instead of running it (no Spark for a table at a path)",
    )
    add_flags(command, [STORAGE_FLAG])
    run_group = command.add_argument_group("how to run")
    run_group.add_argument("--master", default=None, help="Spark master (as for the jobs)")
    run_group.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting for the session (repeatable): the catalog's, e.g. spark.sql.catalogImplementation=hive",
    )
    _add_verbosity(command)


def _add_jar_command(sub: Any) -> None:
    help_ = "print the path of spark-mlt's jar (the JVM engine) for a Spark version, or how to load it"
    command = _add_command(sub, "jar", help_, _JAR_EXAMPLES)
    command.add_argument(
        "--spark-version", default=None, help="the cluster's Spark version (default: the installed PySpark's)"
    )
    command.add_argument(
        "--submit",
        action="store_true",
        help="print spark-submit arguments instead: --jars <jar> --conf spark.sql.extensions=...",
    )
    _add_verbosity(command)


def command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each command of ``parser`` (from
    [`build_parser`][spark_mlt.batch.cli.build_parser]), by name: what the documentation's CLI
    reference prints."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)
