"""The table commands (``inspect``, ``vacuum``, ``erase``, ``find``, ``publish``) and ``jar``:
each a [`TableCommand`][spark_mlt.batch.cli.tables.TableCommand] whose flags come from its
arguments and its options dataclass (as a job's do), and a function of the parsed command line,
its arguments and its options that returns the exit code.

Example::

    TABLE_COMMANDS["vacuum"].flags()[0].name  # 'input'
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_mlt.batch.cli.flags import (
    EXIT_OK,
    Flag,
    OptionsError,
    UsageError,
    build_options,
    given_values,
    option_flags,
    parse_pairs,
    spark_level,
)
from spark_mlt.batch.job.options import hint
from spark_mlt.batch.job.session import job_session
from spark_mlt.batch.mirror.erase import erase_physically
from spark_mlt.batch.mirror.options import EraseOptions
from spark_mlt.batch.read.find import find_value
from spark_mlt.batch.read.inspect import inspect_table
from spark_mlt.batch.read.options import FindOptions, InspectOptions, PublishOptions, VacuumOptions
from spark_mlt.batch.read.publish import catalog_objects, publish_table
from spark_mlt.errors import MLTError
from spark_mlt.jars import JVM_EXTENSION, jvm_jar
from spark_mlt.storage import orphan_files, s3a_conf, vacuum
from spark_mlt.storage.catalog import is_table_name
from spark_mlt.storage.maintenance import retention_shortfall

#: a table command's function: ``run(args, arguments, options)`` -> exit code
Runner = Callable[[argparse.Namespace, Mapping[str, Any], Any], int]


@dataclass(frozen=True)
class TableCommand:
    """A command that reads or maintains a table (or prints the jar): its function, its
    options class and the help of its arguments, as a [`Job`][spark_mlt.batch.cli.jobs.Job] has them.

    Attributes:
        run: ``run(args, arguments, options)``, the exit code.
        options: its options dataclass, whose fields are its flags.
        arguments: its required string arguments (``input``), and their help.
        help: the command's one-line help.
        examples: command lines shown in its ``--help``.
        run_flags: how it runs (the session it starts for a catalog: ``master``, ``conf``).
    """

    run: Runner
    options: type[Any]
    arguments: Mapping[str, str]
    help: str
    examples: tuple[str, ...] = ()
    run_flags: tuple[str, ...] = ()
    report: bool = field(default=False, init=False)

    def own_flags(self) -> list[Flag]:
        """Its arguments (required), then its options' fields."""
        arguments = [Flag(name, str, text, required=True) for name, text in self.arguments.items()]
        return arguments + option_flags(self.options)

    def flags(self) -> list[Flag]:
        return self.own_flags()


def run_table_command(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """Run ``args.command``: its arguments and options from the flags given (the options check
    them; a table command takes no conf file)."""
    command = TABLE_COMMANDS[args.command]
    values = given_values(command.flags(), args)
    arguments = {name: values[name] for name in command.arguments}
    return command.run(args, arguments, build_options(command.options, values))


def _catalog_session(args: argparse.Namespace, input: str, storage_options: Mapping[str, str]) -> Any:
    """A session for a catalog table's name (``db.table``), which only a catalog resolves;
    none for a path: inspecting or vacuuming a path starts no Spark (under spark-submit the
    session exists already and is used)."""
    if is_table_name(input) or "PYSPARK_GATEWAY_PORT" in os.environ:
        return job_session(f"spark-mlt {args.command}", conf=s3a_conf(storage_options), log_level=spark_level(args))
    return None


def _session(args: argparse.Namespace, storage_options: Mapping[str, str]) -> Any:
    """The session of a command that needs one whatever it reads: ``--master`` and ``--conf``."""
    conf = {**s3a_conf(storage_options), **parse_pairs("conf", args.conf or [], str)}
    master = getattr(args, "master", None)
    return job_session(f"spark-mlt {args.command}", master=master, conf=conf, log_level=spark_level(args))


def run_inspect(args: argparse.Namespace, arguments: Mapping[str, Any], options: InspectOptions) -> int:
    """The table's state; with ``--schema``, also the catalog objects published for it there."""
    input, storage = arguments["input"], options.storage_options
    # read_snapshot resolves a catalog table's name through the active session
    spark = _session(args, storage) if options.schema else _catalog_session(args, input, storage)
    found = inspect_table(input, quarantine=options.quarantine, storage_options=storage)
    if options.schema:
        found["catalog"] = {
            schema: catalog_objects(spark, input, schema, storage_options=storage) for schema in options.schema
        }
    print(json.dumps(found, indent=2, default=str))
    return EXIT_OK


def run_vacuum(args: argparse.Namespace, arguments: Mapping[str, Any], options: VacuumOptions) -> int:
    input, storage = arguments["input"], options.storage_options
    spark = _catalog_session(args, input, storage)
    if options.orphans:
        files, verb = orphan_files(input, storage_options=storage), "orphan"
    else:
        files = vacuum(
            input,
            retention_hours=options.retention_hours,
            dry_run=not options.apply,
            allow_short_retention=options.allow_short_retention,
            spark=spark,
            storage_options=storage,
        )
        verb = "deleted" if options.apply else "would delete"
    for name in files:
        print(name)
    hours = options.retention_hours
    kept = None if options.orphans else retention_shortfall(input, hours, storage_options=storage)
    note = ""
    if kept is not None and hours is not None:  # a listing may show what a short retention deletes, and says so
        note = f" (--retention-hours {hours:g} is shorter than the table's {kept:g} hours"
        note += ")" if options.apply else ": --apply refuses it without --allow-short-retention)"
    print(f"spark-mlt vacuum: {len(files)} file(s) {verb} in {input}{note}")
    return EXIT_OK


def run_erase(args: argparse.Namespace, arguments: Mapping[str, Any], options: EraseOptions) -> int:
    input = arguments["input"]
    report = erase_physically(
        input,
        quarantine=options.quarantine,
        retention_hours=options.retention_hours,
        apply=options.apply,
        allow_short_retention=options.allow_short_retention,
        spark=_catalog_session(args, input, options.storage_options),
        storage_options=options.storage_options,
    )
    print(json.dumps(report, indent=2))
    return EXIT_OK


def run_find(args: argparse.Namespace, arguments: Mapping[str, Any], options: FindOptions) -> int:
    """The answer whether the value is held or not (exit 0: it is a question); a column that is
    no id column of the table, or a value the column cannot hold, is a usage error."""
    input, storage = arguments["input"], options.storage_options
    _catalog_session(args, input, storage)
    try:
        found = find_value(
            input, arguments["column"], arguments["value"], quarantine=options.quarantine, storage_options=storage
        )
    except MLTError as exc:
        if exc.parameter in ("column", "value"):
            raise OptionsError(str(exc)) from exc
        raise
    print(json.dumps(found, indent=2, default=str))
    return EXIT_OK


def run_publish(args: argparse.Namespace, arguments: Mapping[str, Any], options: PublishOptions) -> int:
    """The DDL on stdout with ``--print-only`` (no Spark); else the objects made in the session's
    catalog, which must outlive the command (not the in-memory catalog)."""
    input = arguments["input"]
    spark = None
    if not options.print_only or is_table_name(input):
        spark = _session(args, options.storage_options)
        if not options.print_only and spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory":
            raise UsageError(
                "the session's catalog is in memory (spark.sql.catalogImplementation=in-memory): the functions and "
                "view would be gone when this command ends; run it with the cluster's metastore "
                "(--conf spark.sql.catalogImplementation=hive, or spark-defaults.conf), or --print-only the DDL"
            )
    report = publish_table(spark, input, options)
    if options.print_only:
        print("".join(f"{statement};\n" for statement in report.statements), end="")
    else:
        print(json.dumps(report.to_dict(), indent=2))
    return EXIT_OK


@dataclass(frozen=True, kw_only=True)
class JarOptions:
    """Options of ``spark-mlt jar`` ([`jvm_jar`][spark_mlt.jars.jvm_jar])."""

    spark_version: str | None = field(
        default=None, metadata=hint("the cluster's Spark version (default: the installed PySpark's)")
    )
    submit: bool = field(
        default=False,
        metadata=hint("print spark-submit arguments instead: --jars <jar> --conf spark.sql.extensions=..."),
    )


def run_jar(args: argparse.Namespace, arguments: Mapping[str, Any], options: JarOptions) -> int:
    jar = jvm_jar(options.spark_version)
    print(f"--jars {jar} --conf spark.sql.extensions={JVM_EXTENSION}" if options.submit else jar)
    return EXIT_OK


#: a table command's ``input``
_INPUT = {"input": "Delta table path, or a catalog table's name (db.table)"}

TABLE_COMMANDS: dict[str, TableCommand] = {
    "inspect": TableCommand(
        run_inspect,
        InspectOptions,
        _INPUT,
        "print a table's codecs, versions and row count (JSON)",
        (
            "spark-mlt inspect --input out/orders_mlt",
            "spark-mlt inspect --input out/orders_mlt --schema analytics --conf spark.sql.catalogImplementation=hive",
            "spark-mlt inspect --input s3://lake/orders_mlt --storage-options AWS_REGION=eu-west-1",
        ),
        ("conf",),
    ),
    "vacuum": TableCommand(
        run_vacuum,
        VacuumOptions,
        _INPUT,
        "list (default) or delete orphan and expired files of a table",
        (
            "spark-mlt vacuum --input out/orders_mlt",
            "spark-mlt vacuum --input out/orders_mlt --retention-hours 24 --apply",
        ),
    ),
    "erase": TableCommand(
        run_erase,
        EraseOptions,
        _INPUT,
        "make a mirror's erasures physical: purge deletion vectors and vacuum the mirror, its quarantine, "
        "vocabularies and value counts (JSON: what is deleted, what is pending and until when)",
        (
            "spark-mlt erase --input out/customers_mlt",
            "spark-mlt erase --input out/customers_mlt --apply",
            "spark-mlt erase --input out/customers_mlt --retention-hours 0 --apply --allow-short-retention",
        ),
    ),
    "find": TableCommand(
        run_find,
        FindOptions,
        {
            **_INPUT,
            "column": "an id column of the table (one it has a codec for)",
            "value": "the id (an integer) or, for a string key column, the key",
        },
        "where a value of an id column is held: the table's, its quarantine's and its vocabulary's current "
        "rows, and their files not yet vacuumed (JSON, with a verdict; exit 0 either way)",
        (
            "spark-mlt find --input out/customers_mlt --column customer_id --value 42",
            "spark-mlt find --input out/customers_mlt --column email --value alice@example.com",
        ),
    ),
    "publish": TableCommand(
        run_publish,
        PublishOptions,
        _INPUT,
        "create, in the session's catalog, SQL functions that decode and encode each token column of a table, "
        "and a view of it with the ids decoded: SQL any session can run with nothing of spark-mlt installed "
        "(JSON: each object and what was done)",
        (
            "spark-mlt publish --input out/orders_mlt --schema analytics",
            "spark-mlt publish --input out/orders_mlt --schema main.analytics --print-only > orders_mlt.sql",
            "spark-mlt publish --input sales.orders_mlt --schema analytics --no-view "
            "--conf spark.sql.catalogImplementation=hive",
        ),
        ("master", "conf"),
    ),
    "jar": TableCommand(
        run_jar,
        JarOptions,
        {},
        "print the path of spark-mlt's jar (the JVM engine) for a Spark version, or how to load it",
        (
            "spark-mlt jar",
            "spark-mlt jar --spark-version 3.5.1",
            "spark-submit $(spark-mlt jar --submit) jobs/tokenize_table.py --input in/orders --output out/orders_mlt "
            "--columns user_id",
        ),
    ),
}
