"""The table commands (``inspect``, ``vacuum``, ``erase``, ``find``, ``publish``) and ``jar``:
each a function of the parsed command line and its conf file's options that returns the exit code.

Example::

    run_inspect(build_parser().parse_args(["inspect", "--input", "out/orders_mlt"]), {})
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from typing import Any

from spark_mlt.batch.cli.flags import EXIT_OK, OptionsError, UsageError, parse_pairs, spark_level
from spark_mlt.batch.job.session import job_session
from spark_mlt.batch.mirror.erase import erase_physically
from spark_mlt.batch.read.find import find_value
from spark_mlt.batch.read.inspect import inspect_table
from spark_mlt.batch.read.options import PublishOptions
from spark_mlt.batch.read.publish import catalog_objects, publish_table
from spark_mlt.errors import MLTError
from spark_mlt.jars import JVM_EXTENSION, jvm_jar
from spark_mlt.storage import StorageOptions, orphan_files, s3a_conf, vacuum
from spark_mlt.storage.catalog import is_table_name
from spark_mlt.storage.maintenance import retention_shortfall


def _catalog_session(args: argparse.Namespace, storage_options: Mapping[str, str]) -> Any:
    """A session for a catalog table's name (``db.table``), which only a catalog resolves;
    none for a path: inspecting or vacuuming a path starts no Spark (under spark-submit the
    session exists already and is used)."""
    if is_table_name(args.input) or "PYSPARK_GATEWAY_PORT" in os.environ:
        return job_session(f"spark-mlt {args.command}", conf=s3a_conf(storage_options), log_level=spark_level(args))
    return None


def _storage_options(args: argparse.Namespace) -> StorageOptions:
    return StorageOptions(parse_pairs("storage_options", args.storage_options or [], str))


def run_inspect(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """The table's state; with ``--schema``, also the catalog objects published for it there."""
    options = _storage_options(args)
    if args.schema:
        conf = {**s3a_conf(options), **parse_pairs("conf", args.conf or [], str)}
        spark = job_session("spark-mlt inspect", conf=conf, log_level=spark_level(args))
    else:
        spark = _catalog_session(args, options)  # read_snapshot resolves a name through the active session
    found = inspect_table(args.input, quarantine=args.quarantine, storage_options=options)
    if args.schema:
        found["catalog"] = {
            schema: catalog_objects(spark, args.input, schema, storage_options=options) for schema in args.schema
        }
    print(json.dumps(found, indent=2, default=str))
    return EXIT_OK


def run_vacuum(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    options = _storage_options(args)
    spark = _catalog_session(args, options)
    if args.orphans:
        files, verb = orphan_files(args.input, storage_options=options), "orphan"
    else:
        files = vacuum(
            args.input,
            retention_hours=args.retention_hours,
            dry_run=not args.apply,
            allow_short_retention=args.allow_short_retention,
            spark=spark,
            storage_options=options,
        )
        verb = "deleted" if args.apply else "would delete"
    for name in files:
        print(name)
    kept = None if args.orphans else retention_shortfall(args.input, args.retention_hours, storage_options=options)
    note = ""
    if kept is not None:  # a listing may show what a short retention deletes, and says so
        note = f" (--retention-hours {args.retention_hours:g} is shorter than the table's {kept:g} hours"
        note += ")" if args.apply else ": --apply refuses it without --allow-short-retention)"
    print(f"spark-mlt vacuum: {len(files)} file(s) {verb} in {args.input}{note}")
    return EXIT_OK


def run_erase(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    options = _storage_options(args)
    spark = _catalog_session(args, options)
    report = erase_physically(
        args.input,
        quarantine=args.quarantine,
        retention_hours=args.retention_hours,
        apply=args.apply,
        allow_short_retention=args.allow_short_retention,
        spark=spark,
        storage_options=options,
    )
    print(json.dumps(report, indent=2))
    return EXIT_OK


def run_find(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
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


def run_publish(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
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
        conf = {**s3a_conf(storage), **parse_pairs("conf", args.conf or [], str)}
        spark = job_session("spark-mlt publish", master=args.master, conf=conf, log_level=spark_level(args))
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


def run_jar(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    jar = jvm_jar(args.spark_version)
    print(f"--jars {jar} --conf spark.sql.extensions={JVM_EXTENSION}" if args.submit else jar)
    return EXIT_OK
