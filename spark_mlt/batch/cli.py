"""The ``spark-mlt`` command: the jobs ``movielens``, ``tokenize``, ``sync``, ``decode`` and
``paper``, the table commands ``inspect``, ``vacuum`` and ``erase``, and ``jar``
([`JOBS`][spark_mlt.batch.cli.JOBS] and [`build_parser`][spark_mlt.batch.cli.build_parser] list
them; the CLI reference page is generated from the parser).

The same flags work as ``spark-submit jobs/<job>.py ...``. Exit codes:
[`EXIT_OK`][spark_mlt.batch.cli.EXIT_OK] (0), [`EXIT_FAILURE`][spark_mlt.batch.cli.EXIT_FAILURE] (1,
with a one-line reason on stderr), [`EXIT_USAGE`][spark_mlt.batch.cli.EXIT_USAGE] (2: a bad flag or
option value, a missing required flag, a bad conf file),
[`EXIT_MISMATCH`][spark_mlt.batch.cli.EXIT_MISMATCH] (3: ``decode --verify`` found decoded ids that
differ from the originals), [`EXIT_REJECTED`][spark_mlt.batch.cli.EXIT_REJECTED] (4: more rows rejected
than ``--max-rejected`` allows; the rows and quarantine are committed) and
[`EXIT_INTERRUPTED`][spark_mlt.batch.cli.EXIT_INTERRUPTED] (130). An option the job's tables cannot
take (other columns, key, codec or layout than they hold; a column the input lacks) is a usage
error too: exit 2, before anything is written.

One vocabulary, derived: a job command's flags come from its job function's arguments (``input``,
``output``, ``columns``) and its options dataclass's fields
([`spark_mlt.batch.options`][spark_mlt.batch.options], `spark_mlt.paper.PaperOptions`), walked by
[`add_flags`][spark_mlt.batch.cli.add_flags]: the flag of ``data_page_version`` is
``--data-page-version``, its conf-file key ``data_page_version`` (dashes accepted too), its type and
choices those of the field's annotation (a ``Literal``'s values become the choices), its help the
field's ``metadata["help"]``. Options can come from a YAML or JSON file (``--config
conf/movielens.yaml``); flags given on the command line win; a key that is no flag of the command is
refused by name. A job argument is a required flag unless the conf file gives it.

How to run, beside what to run: ``--master`` (default: the ``spark.master`` of the
``spark-defaults.conf`` that ``pyspark`` reads, else ``local[2]``; a local master also gets
[`spark_mlt.batch.session.LOCAL_CONF`][spark_mlt.batch.session.LOCAL_CONF] where the defaults file
does not set a key), ``--conf KEY=VALUE`` for the session the command starts, ``-v``/``-q``
(before or after the command) for the ``spark_mlt`` logger (Spark's log level follows), and
``--json`` for a job's report as one JSON document. Every error line on stderr starts with
[`ERROR_PREFIX`][spark_mlt.batch.cli.ERROR_PREFIX], ``spark-mlt: error: ``.

Library errors name the Python parameter (``MLTError.parameter``); only this module speaks of
flags, and it maps a parameter to its flag by the same rule (``layout`` -> ``--layout``).

Example::

    spark-mlt movielens --input data/ml-25m --output out/ratings_mlt --mode overwrite
    spark-mlt decode --input out/ratings_mlt --verify
    spark-mlt inspect --input out/ratings_mlt
    spark-mlt paper --input out/ratings_mlt --output out/paper
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import inspect
import json
import logging
import os
import re
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn, Union, get_args, get_origin, get_type_hints

import yaml

from spark_mlt import __version__
from spark_mlt.batch.capacity import RESIZE_FLAGS
from spark_mlt.batch.decode import decode_table
from spark_mlt.batch.erase import erase_physically
from spark_mlt.batch.find import find_value
from spark_mlt.batch.inspect import inspect_table
from spark_mlt.batch.movielens import tokenize_movielens
from spark_mlt.batch.options import (
    DecodeOptions,
    MovieLensOptions,
    PublishOptions,
    StreamOptions,
    SyncOptions,
    TokenizeOptions,
)
from spark_mlt.batch.paper import reproduce_paper
from spark_mlt.batch.publish import catalog_objects, publish_table
from spark_mlt.batch.report import JobReport
from spark_mlt.batch.session import job_session
from spark_mlt.batch.stream import check_stream_job, tokenize_stream
from spark_mlt.batch.sync import sync_table
from spark_mlt.batch.tokenize import check_names, tokenize_table
from spark_mlt.errors import MLTError, OptionError, RejectedRowsError, SourceError
from spark_mlt.jars import JVM_EXTENSION, jvm_jar
from spark_mlt.paper import PaperOptions, PaperReport
from spark_mlt.storage import StorageOptions, orphan_files, read_snapshot, redact, s3a_conf, vacuum
from spark_mlt.storage.catalog import is_table_name

__all__ = [
    "ERROR_PREFIX",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_MISMATCH",
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_USAGE",
    "JOBS",
    "Job",
    "JobForm",
    "OptionsError",
    "UsageError",
    "add_flags",
    "build_parser",
    "command_parsers",
    "configure_logging",
    "flag_of",
    "main",
    "run",
]


class UsageError(ValueError):
    """A problem with the command line or conf file itself: a missing flag, an unknown key."""


class OptionsError(UsageError):
    """An option value its options class refused (its ``__cause__``, an ``MLTError`` naming
    the parameter): a usage error too, found before any Spark work."""


def flag_of(name: str) -> str:
    """The flag of a Python name (a job's argument or an options field): ``--`` and the name
    with dashes (``data_page_version`` -> ``--data-page-version``)."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Flag:
    """One flag of a job command, derived from a job argument or an options field."""

    name: str
    hint: Any
    help: str
    required: bool = False


def _unwrap_optional(hint: Any) -> Any:
    if get_origin(hint) in (Union, types.UnionType):
        args = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _is_sequence(hint: Any) -> bool:
    return get_origin(hint) in (tuple, list, Sequence)


def _is_mapping(hint: Any) -> bool:
    return get_origin(hint) in (dict, Mapping)


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flags: Iterable[Flag],
    *,
    required: argparse._ArgumentGroup | None = None,
    given: Iterable[str] = (),
) -> None:
    """Add one ``--flag`` per [`Flag`][spark_mlt.batch.cli.Flag], typed by its annotation: a ``Literal`` gives the
    choices, ``bool`` ``--x/--no-x``, a sequence ``x [x ...]`` (or ``a,b``), a mapping
    ``key=value`` words. Every default is None, so an absent flag leaves the conf file's
    value (or the dataclass default) in place. A required flag goes to the ``required``
    group, and is required unless its name is in ``given`` (the conf file's keys)."""
    for flag in flags:
        hint = _unwrap_optional(flag.hint)
        kwargs: dict[str, Any] = {
            "dest": flag.name,
            "default": None,
            "help": flag.help.replace("%", "%%"),
        }  # argparse formats help with %
        if get_origin(hint) is Literal:
            choices = get_args(hint)
            kwargs.update(type=type(choices[0]), choices=choices)
        elif hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif _is_mapping(hint):
            kwargs.update(nargs="+", metavar="KEY=VALUE")
        elif _is_sequence(hint):
            kwargs.update(nargs="+")
        elif hint in (int, float, str):
            kwargs["type"] = hint
        elif get_origin(hint) in (Union, types.UnionType) and set(get_args(hint)) - {type(None)} <= {int, float, str}:
            kwargs["type"] = str  # a count or a share: the options parse it
        else:  # pragma: no cover - a field type the generator does not know yet
            raise TypeError(f"no flag type for {flag.name}: {flag.hint!r}")
        group = required if flag.required and required is not None else parser
        if flag.required:
            kwargs["required"] = flag.name not in set(given)
        group.add_argument(flag_of(flag.name), **kwargs)


def _default_text(field: dataclasses.Field[Any]) -> str:
    default = field.default
    if default is dataclasses.MISSING or default in (None, (), False):
        return ""
    return f" (default: {' '.join(map(str, default)) if isinstance(default, tuple) else default})"


def option_flags(options: type[Any]) -> list[Flag]:
    """The flags of an options dataclass: one per field, help from ``metadata["help"]``, but the
    fields the class says its job never takes (``NOT_FLAGS``)."""
    hints = get_type_hints(options)
    hidden = set(getattr(options, "NOT_FLAGS", ()))
    return [
        Flag(f.name, hints[f.name], str(f.metadata.get("help", "")) + _default_text(f))
        for f in dataclasses.fields(options)
        if f.name not in hidden
    ]


#: Exit codes of ``spark-mlt``.
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_MISMATCH, EXIT_REJECTED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


@dataclass(frozen=True)
class JobForm:
    """Another form of a job that one flag picks at the job's boundary: ``spark-mlt tokenize
    --stream`` runs ``run(spark, <arguments>, options, <name>=<its options>)`` instead of the
    job's function, so the job's own path never sees these options.

    Attributes:
        name: the flag that picks the form (``stream``), and the keyword of its options.
        run: the form's function.
        options: the form's own options dataclass, whose fields are flags of the command too.
        help: the flag's help.
        check: refuses job options the form cannot take, before Spark starts.
    """

    name: str
    run: Callable[..., Any]
    options: type[Any]
    help: str
    check: Callable[[Any], None] | None = None

    def flags(self) -> list[Flag]:
        """Its flags: the one that picks it, then its options' (valid with that flag only)."""
        return [Flag(self.name, bool, self.help), *option_flags(self.options)]


@dataclass(frozen=True)
class Job:
    """A job command: its function, options class, and the help of the function's arguments.

    Attributes:
        run: the job function, ``run(spark, <arguments>, options)`` or, with ``spark=False``,
            ``run(<arguments>, options, session=...)``.
        options: its options dataclass.
        arguments: the function's arguments that become required flags, and their help.
        help: the command's one-line help.
        examples: command lines shown in its ``--help``.
        spark: whether ``run`` takes the Spark session first.
        form: another form of the job that a flag picks, if it has one.
    """

    run: Callable[..., Any]
    options: type[Any]
    arguments: Mapping[str, str]
    help: str
    examples: tuple[str, ...] = ()
    spark: bool = True
    form: JobForm | None = None

    def own_flags(self) -> list[Flag]:
        """The flags of its own form: the job function's arguments (typed by its signature),
        then the options."""
        signature = inspect.signature(self.run, eval_str=True)
        arguments = [
            Flag(name, signature.parameters[name].annotation, text, required=True)
            for name, text in self.arguments.items()
        ]
        return arguments + option_flags(self.options)

    def flags(self) -> list[Flag]:
        """All its flags: its own form's, then the other form's."""
        return self.own_flags() + (self.form.flags() if self.form is not None else [])


JOBS: dict[str, Job] = {
    "movielens": Job(
        tokenize_movielens,
        MovieLensOptions,
        {"input": "MovieLens release folder (u.data, ratings.dat or ratings.csv)", "output": "Delta table path"},
        "tokenize a MovieLens release into Delta",
        (
            "spark-mlt movielens --input data/ml-latest-small --output out/ratings_mlt --mode overwrite",
            "spark-mlt movielens --input data/ml-latest-small --output out/ratings_mlt --p 47 --n 7 --dry-run",
            "spark-mlt movielens --config conf/movielens.yaml --mode append --run-id 2026-11-26",
        ),
    ),
    "tokenize": Job(
        tokenize_table,
        TokenizeOptions,
        {
            "input": "input path (read as --input-format), or a catalog table's name (--input-format table)",
            "output": "Delta table path",
            "columns": "id columns to tokenize (a b, or a,b)",
        },
        "tokenize id columns of any table into Delta",
        (
            "spark-mlt tokenize --input orders.parquet --columns customer_id sku --output out/orders_mlt",
            "spark-mlt tokenize --input sales.orders --input-format table --columns customer_id "
            "--output out/orders_mlt --mode append --run-id 2026-11-26 --handle-invalid quarantine",
            "spark-mlt tokenize --config conf/warehouse_table.yaml --dry-run",
            "spark-mlt tokenize --input landing/orders --columns customer_id --output out/orders_mlt "
            "--stream --checkpoint chk/orders --trigger '30 seconds'",
        ),
        form=JobForm(
            "stream",
            tokenize_stream,
            StreamOptions,
            "tokenize the input's new files (or a Delta table's new commits) as they land, each row exactly "
            "once (Structured Streaming; needs --checkpoint; appends)",
            check_stream_job,
        ),
    ),
    "sync": Job(
        sync_table,
        SyncOptions,
        {
            "input": "the source Delta table's path (change data feed on), or a catalog table's name "
            "(--input-format table)",
            "output": "the mirror: a Delta table path",
            "columns": "id columns to tokenize (a b, or a,b)",
        },
        "keep a tokenized mirror of a Delta table: its inserts, updates, deletes and erasures, each version once",
        (
            "spark-mlt sync --input lake/customers --output out/customers_mlt --columns customer_id email "
            "--key customer_id",
            "spark-mlt sync --input lake/customers --output out/customers_mlt --columns customer_id "
            "--key customer_id --trigger '5 minutes'",
            "spark-mlt sync --input lake/customers --output out/customers_mlt --columns customer_id "
            "--key customer_id --full-refresh",
        ),
    ),
    "decode": Job(
        decode_table,
        DecodeOptions,
        {"input": "tokenized Delta table path"},
        "decode a tokenized Delta table to ids",
        (
            "spark-mlt decode --input out/orders_mlt --verify",
            "spark-mlt decode --input out/orders_mlt --output out/orders_ids --output-format parquet",
        ),
    ),
    "paper": Job(
        reproduce_paper,
        PaperOptions,
        {
            "input": "a table written by 'spark-mlt movielens', or a MovieLens release folder",
            "output": "folder for report.json, report.md and report.png",
        },
        "reproduce the MLT paper's Table 1 (needs spark-mlt[paper])",
        (
            "spark-mlt paper --input out/ratings_mlt --output out/paper",
            "spark-mlt paper --input data/ml-latest-small --output out/paper --methods mlt embeddings",
        ),
        spark=False,
    ),
}

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
    "spark-mlt erase --input out/customers_mlt --retention-hours 0 --apply",
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


#: What starts every error line the command prints on stderr.
ERROR_PREFIX = "spark-mlt: error: "


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
        command = _add_command(sub, name, help_, examples)
        required = command.add_argument_group("required")
        required.add_argument("--input", required=True, help="Delta table path, or a catalog table's name (db.table)")
        if name == "find":
            required.add_argument("--column", required=True, help="an id column of the table (one it has a codec for)")
            required.add_argument(
                "--value", required=True, help="the id (an integer) or, for a string key column, the key"
            )
        if name in ("vacuum", "erase"):
            command.add_argument(
                "--retention-hours",
                type=float,
                default=None,
                help="keep files younger than this (default: the table's delta.deletedFileRetentionDuration, "
                "168 hours unless it sets one)",
            )
            command.add_argument("--apply", action="store_true", help="delete the files (default: only list them)")
        if name == "vacuum":
            command.add_argument(
                "--orphans", action="store_true", help="list the files no table version references, now"
            )
        if name in ("erase", "find"):
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
        add_flags(command, [_STORAGE_FLAG])
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
    add_flags(command, [_STORAGE_FLAG])
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


#: ``--storage-options`` of ``inspect`` and ``vacuum``: the jobs' field, the same flag
_STORAGE_FLAG = next(flag for flag in option_flags(DecodeOptions) if flag.name == "storage_options")

#: flags of every job command that are no job argument or option: how to run, not what
_RUN_FLAGS = ("config", "master", "conf")


def _load_config(path: str | None) -> dict[str, Any]:
    """The options of a YAML or JSON conf file, keys with underscores."""
    if not path:
        return {}
    text = Path(path).read_text()
    loaded = (yaml.safe_load(text) or {}) if path.endswith((".yaml", ".yml")) else json.loads(text)
    if not isinstance(loaded, dict):
        raise UsageError(f"{path} must hold a mapping of option names to values")
    return {str(key).replace("-", "_"): value for key, value in loaded.items()}


def _names(values: str | Sequence[str] | None) -> list[str] | None:
    """Names given as separate words, comma-separated, or both (``a b``, ``a,b``)."""
    if values is None:
        return None
    words = [values] if isinstance(values, str) else values
    return [name.strip() for word in words for name in str(word).split(",") if name.strip()]


def _pairs(name: str, values: Mapping[str, Any] | Sequence[str], kind: Any) -> dict[str, Any]:
    """``key=value`` words (or a conf file's mapping) as a dict, values of type ``kind``."""
    if isinstance(values, Mapping):
        return dict(values)
    pairs = {}
    for word in [values] if isinstance(values, str) else values:
        key, sep, value = word.partition("=")
        if not sep:
            raise UsageError(f"{flag_of(name)} takes key=value words; got {word!r}")
        try:
            pairs[key] = kind(value) if kind in (int, float) else value
        except ValueError:
            raise UsageError(f"{flag_of(name)}: {key} takes a {kind.__name__}; got {value!r}") from None
    return pairs


def _value(flag: Flag, value: Any) -> Any:
    """A flag's or conf key's value as its field takes it (sequences and mappings parsed)."""
    hint = _unwrap_optional(flag.hint)
    if _is_mapping(hint):
        return _pairs(flag.name, value, (get_args(hint) or (str, str))[1])
    if _is_sequence(hint):
        return tuple(_names(value) or ())
    return value


def _values(job: Job, args: argparse.Namespace, config: Mapping[str, Any]) -> dict[str, Any]:
    """The conf file's values overridden by the flags given, each parsed as its field takes it.

    Raises:
        UsageError: a conf key that is no flag of the command, or a missing job argument.
    """
    flags = {flag.name: flag for flag in job.flags()}
    unknown = sorted(set(config) - set(flags) - set(_RUN_FLAGS))
    if unknown:
        known = sorted({*flags, "master", "conf"})
        raise UsageError(f"unknown option(s) {unknown} in {args.config} for {args.command!r}; expected some of {known}")
    given = {name: value for name, value in vars(args).items() if value is not None and name in flags}
    merged = {**config, **given}
    missing = [flag_of(flag.name) for flag in flags.values() if flag.required and not merged.get(flag.name)]
    if missing:
        raise UsageError(f"missing required option(s) {', '.join(missing)}")
    values = {name: _value(flag, merged[name]) for name, flag in flags.items() if name in merged}
    for name, flag in flags.items():  # a mapping's keys merge: the flag's win over the conf file's
        if name in config and name in given and _is_mapping(_unwrap_optional(flag.hint)):
            values[name] = {**_value(flag, config[name]), **_value(flag, given[name])}
    return values


def _print_report(command: str, report: JobReport, *, as_json: bool = False) -> int:
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    for column, codec in report.codecs.items() if not as_json else ():
        layout = report.layouts.get(column)
        print(
            f"codec {column}: p={codec.p} n={codec.n} seed={codec.seed} capacity={codec.capacity} "
            f"fingerprint={codec.fingerprint[:16]}" + (f" layout={layout}" if layout else "")
        )
    if not as_json:
        print(f"spark-mlt {command}: {report.summary()}")
    if report.mismatches:
        print(f"{ERROR_PREFIX}{report.mismatches} decoded ids differ from the originals", file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def _print_paper(report: PaperReport) -> int:
    print(report.files["markdown"].read_text())
    print(f"spark-mlt paper: report in {', '.join(str(path) for path in report.files.values())}")
    return EXIT_OK


def _check_input(job: Job, values: Mapping[str, Any]) -> None:
    """Before Spark starts: a local input path (no scheme, no catalog name) must exist."""
    path = values.get("input")
    if not isinstance(path, str) or "://" in path or values.get("input_format") == "table":
        return
    if not glob.glob(path) and not (job.run is not tokenize_table and is_table_name(path)):
        raise SourceError(f"input {path!r} does not exist", parameter="input")


def _check_names(values: Mapping[str, Any], options: Any) -> None:
    """Before Spark starts: the columns and key a job names must be in a Delta input (read
    jar-free; other inputs are checked once Spark has read them), naming the near ones."""
    path, format = values.get("input"), getattr(options, "input_format", None)
    if not isinstance(path, str) or format != "delta" or is_table_name(path):
        return
    try:
        names = read_snapshot(path, storage_options=getattr(options, "storage_options", None)).schema.names
    except MLTError:
        return  # the job says what is wrong with its input
    where = f"the input {path}"
    check_names(values.get("columns") or (), names, "columns", where)
    check_names(getattr(options, "key", ()), names, "key", where)


def _build_options(options: type[Any], values: Mapping[str, Any]) -> Any:
    """An options dataclass from the values of its fields (the options check them).

    Raises:
        UsageError: a field without a default is missing.
        OptionsError: the options refused a value.
    """
    fields = dataclasses.fields(options)
    missing = [
        flag_of(f.name)
        for f in fields
        if f.name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise UsageError(f"missing required option(s) {', '.join(missing)}")
    try:
        return options(**{f.name: values[f.name] for f in fields if f.name in values})
    except MLTError as exc:
        raise OptionsError(str(exc)) from exc


def _job_call(job: Job, values: Mapping[str, Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The function that runs the job as the values ask, and its keyword arguments: the job's
    function, or its other form's when the form's flag is given (the form's options are refused
    without it)."""
    arguments = {name: values[name] for name in job.arguments}
    call = {**arguments, "options": _build_options(job.options, values)}
    form = job.form
    if form is None:
        return job.run, call
    if not values.get(form.name):
        given = [f.name for f in dataclasses.fields(form.options) if f.name in values]
        if given:
            raise UsageError(f"{flag_of(given[0])} is an option of {flag_of(form.name)}: pass {flag_of(form.name)} too")
        return job.run, call
    if form.check is not None:
        try:
            form.check(call["options"])
        except MLTError as exc:
            raise OptionsError(str(exc)) from exc
    return form.run, {**call, form.name: _build_options(form.options, values)}


def _run_job(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """Build the job's options from the flags and conf file (the options check them), check a
    local input exists, then start Spark and run the job."""
    job = JOBS[args.command]
    values = _values(job, args, config)
    run, call = _job_call(job, values)
    _check_input(job, values)
    _check_names(values, call["options"])
    master = args.master or config.get("master")
    conf = {**_pairs("conf", config.get("conf") or {}, str), **_pairs("conf", args.conf or [], str)}

    def session() -> Any:  # a local session also gets the s3a settings of the storage options
        settings = {**s3a_conf(getattr(call["options"], "storage_options", None)), **conf}
        return job_session(f"spark-mlt {args.command}", master=master, conf=settings, log_level=_spark_level(args))

    if not job.spark:
        return _print_paper(run(**call, session=session))
    return _print_report(args.command, run(session(), **call), as_json=args.json)


def _catalog_session(args: argparse.Namespace, storage_options: Mapping[str, str]) -> Any:
    """A session for a catalog table's name (``db.table``), which only a catalog resolves;
    none for a path: inspecting or vacuuming a path starts no Spark (under spark-submit the
    session exists already and is used)."""
    if is_table_name(args.input) or "PYSPARK_GATEWAY_PORT" in os.environ:
        return job_session(f"spark-mlt {args.command}", conf=s3a_conf(storage_options), log_level=_spark_level(args))
    return None


def _storage_options(args: argparse.Namespace) -> StorageOptions:
    return StorageOptions(_pairs("storage_options", args.storage_options or [], str))


def _run_inspect(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """The table's state; with ``--schema``, also the catalog objects published for it there."""
    options = _storage_options(args)
    if args.schema:
        conf = {**s3a_conf(options), **_pairs("conf", args.conf or [], str)}
        spark = job_session("spark-mlt inspect", conf=conf, log_level=_spark_level(args))
    else:
        spark = _catalog_session(args, options)  # read_snapshot resolves a name through the active session
    found = inspect_table(args.input, storage_options=options)
    if args.schema:
        found["catalog"] = {
            schema: catalog_objects(spark, args.input, schema, storage_options=options) for schema in args.schema
        }
    print(json.dumps(found, indent=2, default=str))
    return EXIT_OK


def _run_vacuum(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    options = _storage_options(args)
    spark = _catalog_session(args, options)
    if args.orphans:
        files, verb = orphan_files(args.input, storage_options=options), "orphan"
    else:
        files = vacuum(
            args.input,
            retention_hours=args.retention_hours,
            dry_run=not args.apply,
            spark=spark,
            storage_options=options,
        )
        verb = "deleted" if args.apply else "would delete"
    for name in files:
        print(name)
    print(f"spark-mlt vacuum: {len(files)} file(s) {verb} in {args.input}")
    return EXIT_OK


def _run_erase(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    options = _storage_options(args)
    spark = _catalog_session(args, options)
    report = erase_physically(
        args.input,
        quarantine=args.quarantine,
        retention_hours=args.retention_hours,
        apply=args.apply,
        spark=spark,
        storage_options=options,
    )
    print(json.dumps(report, indent=2))
    return EXIT_OK


def _run_find(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """The answer whether the value is held or not (exit 0: it is a question); a column that is
    no id column of the table, or a value the column cannot hold, is a usage error."""
    options = _storage_options(args)
    _catalog_session(args, options)
    try:
        found = find_value(args.input, args.column, args.value, quarantine=args.quarantine, storage_options=options)
    except MLTError as exc:
        if exc.parameter in ("column", "value"):
            raise OptionsError(str(exc)) from exc
        raise
    print(json.dumps(found, indent=2, default=str))
    return EXIT_OK


def _run_publish(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """The DDL on stdout with ``--print`` (no Spark); else the objects made in the session's
    catalog, which must outlive the command (not the in-memory catalog)."""
    storage = _storage_options(args)
    try:
        options = PublishOptions(
            schema=args.schema,
            prefix=args.prefix,
            functions=not args.no_functions,
            view=not args.no_view,
            print_only=args.print,
            storage_options=storage,
        )
    except MLTError as exc:
        raise OptionsError(str(exc)) from exc
    spark = None
    if not args.print or is_table_name(args.input):
        conf = {**s3a_conf(storage), **_pairs("conf", args.conf or [], str)}
        spark = job_session("spark-mlt publish", master=args.master, conf=conf, log_level=_spark_level(args))
        if not args.print and spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory":
            raise UsageError(
                "the session's catalog is in memory (spark.sql.catalogImplementation=in-memory): the functions and "
                "view would be gone when this command ends; run it with the cluster's metastore "
                "(--conf spark.sql.catalogImplementation=hive, or spark-defaults.conf), or --print the DDL"
            )
    report = publish_table(spark, args.input, options)
    if args.print:
        print("".join(f"{statement};\n" for statement in report.statements), end="")
    else:
        print(json.dumps(report.to_dict(), indent=2))
    return EXIT_OK


def _run_jar(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    jar = jvm_jar(args.spark_version)
    print(f"--jars {jar} --conf spark.sql.extensions={JVM_EXTENSION}" if args.submit else jar)
    return EXIT_OK


def _handler(command: str) -> Callable[[argparse.Namespace, Mapping[str, Any]], int]:
    handlers = {
        "inspect": _run_inspect,
        "vacuum": _run_vacuum,
        "erase": _run_erase,
        "find": _run_find,
        "publish": _run_publish,
        "jar": _run_jar,
    }
    return handlers.get(command, _run_job)


def _parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The command line and its conf file's options: the conf file is read first, so that a
    job argument it gives is not required as a flag. Exits 2 on a usage error, as argparse does."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    try:
        config = _load_config(known.config)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        build_parser().error(f"--config {known.config}: {str(exc).splitlines()[0] if str(exc) else exc}")
    return build_parser(config).parse_args(argv), config


def run(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the command, print its report. Raises on failure."""
    args, config = _parse(argv)
    return _handler(args.command)(args, config)


#: The ``spark_mlt`` logger's level per verbosity (``-v`` minus ``-q``), and Spark's.
_LEVELS = {
    -2: (logging.ERROR, "ERROR"),
    -1: (logging.WARNING, "ERROR"),
    0: (logging.INFO, "WARN"),
    1: (logging.DEBUG, "INFO"),
}


def _verbosity_of(args: argparse.Namespace) -> int:
    """``-v`` minus ``-q``, given before the command and after it, within the levels."""
    counts = {name: getattr(args, name, 0) + getattr(args, f"global_{name}", 0) for name in ("verbose", "quiet")}
    return max(-2, min(1, counts["verbose"] - counts["quiet"]))


def _spark_level(args: argparse.Namespace) -> str:
    return _LEVELS[_verbosity_of(args)][1]


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the current ``sys.stderr`` (which tests and notebooks swap), not the one at start."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(verbosity: int = 0) -> None:
    """Log lines of the ``spark_mlt`` logger to stderr, at INFO (``verbosity`` 0), DEBUG (1),
    WARNING (-1) or ERROR (-2); other libraries' loggers are left as they are."""
    logger = logging.getLogger("spark_mlt")
    logger.setLevel(_LEVELS[max(-2, min(1, verbosity))][0])
    if not any(isinstance(handler, _StderrHandler) for handler in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False


def _command_names(command: str) -> set[str]:
    """The Python names that are flags of ``command``."""
    if command in JOBS:
        return {flag.name for flag in JOBS[command].flags()}
    if command == "find":
        return {"input", "column", "value", "quarantine", "storage_options"}
    return {"input", "retention_hours", "storage_options"}


#: What Spark's launcher raises when its JVM does not start (no Java, a Java it cannot run).
_NO_JVM = "JAVA_GATEWAY_EXITED"


def _reason(exc: BaseException, command: str) -> str:
    """The first line of an error, in the command line's words: a message about a parameter that
    is a flag of the command starts with that flag instead (``layout='x': ...`` -> ``--layout
    'x': ...``), and an advice in Python's words names the flag (``pass mode='append'`` ->
    ``pass --mode append``)."""
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, UsageError):
        return reason
    if _NO_JVM in text:
        return (
            f"{type(exc).__name__}: Spark's JVM did not start ({_NO_JVM}): spark-mlt needs Java (17+ for Spark 4) "
            "from JAVA_HOME or the PATH; Spark's own lines above say why, and `make check-java` checks"
        )
    names = _command_names(command)
    parameter = exc.parameter if isinstance(exc, MLTError) else None
    if parameter and parameter in names:
        flag = flag_of(parameter)
        if reason.startswith(f"{parameter}="):
            reason = f"{flag} {reason.removeprefix(f'{parameter}=')}"
        elif reason.startswith(parameter):
            reason = flag + reason.removeprefix(parameter)
        else:
            reason = f"{flag}: {reason}"
    if "outside the codec's domain" in reason and command in ("tokenize", "sync"):
        reason += f"; if ids outgrew the table's codec, re-size it: {RESIZE_FLAGS[command]}"
    switch = re.compile(r"\b([a-z_]+)=True\b")  # a boolean option in Python's words: its flag
    reason = switch.sub(lambda m: flag_of(m[1]) if m[1] in names else m[0], reason)
    advice = re.compile(r"\b(pass|use|or|set) ([a-z_]+)='([^' ]*)'")
    reason = advice.sub(lambda m: f"{m[1]} {flag_of(m[2])} {m[3]}" if m[2] in names else m[0], reason)
    return f"{type(exc).__name__}: {reason}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the exit code ([`EXIT_OK`][spark_mlt.batch.cli.EXIT_OK], ...), a one-line reason
    on stderr on failure."""
    args, config = _parse(argv)  # exits 2 with argparse's usage message
    configure_logging(_verbosity_of(args))
    try:
        return _handler(args.command)(args, config)
    except (OptionsError, UsageError, RejectedRowsError, OptionError) as exc:
        return _refused(exc, args)
    except KeyboardInterrupt:
        print(f"{ERROR_PREFIX}interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a job reports any failure as one line and exit 1
        reason = redact(_reason(exc, args.command), _given_storage_options(args))
        print(f"{ERROR_PREFIX}{reason}", file=sys.stderr)
        return EXIT_FAILURE


def _refused(exc: Exception, args: argparse.Namespace) -> int:
    """The exit code and error line of a run refused for its options (exit 2: a bad option, or
    one the job's tables or input cannot take, found before anything was written) or past its
    ``--max-rejected`` (exit 4, after its report: its rows and quarantine are committed)."""
    if isinstance(exc, UsageError) and not isinstance(exc, OptionsError):
        print(f"{ERROR_PREFIX}{args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, RejectedRowsError):
        if isinstance(exc.report, JobReport):
            _print_report(args.command, exc.report, as_json=getattr(args, "json", False))
        print(f"{ERROR_PREFIX}{_reason(exc, args.command)}", file=sys.stderr)
        return EXIT_REJECTED
    cause = exc.__cause__ if isinstance(exc, OptionsError) and exc.__cause__ is not None else exc
    print(f"{ERROR_PREFIX}{redact(_reason(cause, args.command), _given_storage_options(args))}", file=sys.stderr)
    return EXIT_USAGE


def _given_storage_options(args: argparse.Namespace) -> dict[str, str]:
    """The storage options given on the command line and in the conf file, as far as they
    parse: their secrets are hidden in any message printed."""
    given: dict[str, str] = {}
    try:
        config = _load_config(getattr(args, "config", None)).get("storage_options")
        given.update(_pairs("storage_options", config or {}, str))
        given.update(_pairs("storage_options", getattr(args, "storage_options", None) or [], str))
    except (OSError, ValueError, yaml.YAMLError):
        pass
    return given


if __name__ == "__main__":
    raise SystemExit(main())
