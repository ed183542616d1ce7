"""The job commands (``movielens``, ``tokenize``, ``sync``, ``decode``, ``paper``): each a
[`Job`][spark_mlt.batch.cli.jobs.Job] whose flags come from its function's arguments and its
options dataclass, and how a parsed command line becomes that function's call.

Example::

    JOBS["tokenize"].flags()[0].name  # 'input'
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import inspect
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_mlt.batch.cli.flags import (
    ERROR_PREFIX,
    EXIT_MISMATCH,
    EXIT_OK,
    RUN_FLAGS,
    Flag,
    OptionsError,
    UsageError,
    build_options,
    flag_of,
    flag_value,
    is_mapping,
    option_flags,
    parse_pairs,
    spark_level,
    unwrap_optional,
)
from spark_mlt.batch.job.report import JobReport
from spark_mlt.batch.job.session import job_session
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.batch.read.decode import decode_table
from spark_mlt.batch.read.options import DecodeOptions
from spark_mlt.batch.read.paper import reproduce_paper
from spark_mlt.batch.write.checks import check_names
from spark_mlt.batch.write.movielens import tokenize_movielens
from spark_mlt.batch.write.options import MovieLensOptions, StreamOptions, TokenizeOptions, resolve_input
from spark_mlt.batch.write.stream import check_stream_job, tokenize_stream
from spark_mlt.batch.write.tokenize import tokenize_table
from spark_mlt.errors import MLTError, SourceError
from spark_mlt.paper import PaperOptions, PaperReport
from spark_mlt.storage import read_snapshot, s3a_conf
from spark_mlt.storage.catalog import is_table_name


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
        """Its flags: the one that picks it, then its options' (valid with that flag only, so
        none is required of the command: its options say what is missing with the flag)."""
        options = [dataclasses.replace(flag, required=False) for flag in option_flags(self.options)]
        return [Flag(self.name, bool, self.help), *options]


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
        spark: whether ``run`` takes the Spark session first (and returns a report).
        form: another form of the job that a flag picks, if it has one.
        run_flags: how it runs: a conf file, the Spark master and settings.
    """

    run: Callable[..., Any]
    options: type[Any]
    arguments: Mapping[str, str]
    help: str
    examples: tuple[str, ...] = ()
    spark: bool = True
    form: JobForm | None = None
    run_flags: tuple[str, ...] = ("config", "master", "conf")

    @property
    def report(self) -> bool:
        """Whether it prints a job's report (``--json``)."""
        return self.spark

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
            "input": "input path (read as --input-format: a Delta table's folder as Delta by default), or a "
            "catalog table's name (--input-format table)",
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


def job_values(job: Job, args: argparse.Namespace, config: Mapping[str, Any]) -> dict[str, Any]:
    """The conf file's values overridden by the flags given, each parsed as its field takes it.

    Raises:
        UsageError: a conf key that is no flag of the command, or a missing job argument.
    """
    flags = {flag.name: flag for flag in job.flags()}
    unknown = sorted(set(config) - set(flags) - set(RUN_FLAGS))
    if unknown:
        known = sorted({*flags, "master", "conf"})
        raise UsageError(f"unknown option(s) {unknown} in {args.config} for {args.command!r}; expected some of {known}")
    given = {name: value for name, value in vars(args).items() if value is not None and name in flags}
    merged = {**config, **given}
    missing = [flag_of(flag.name) for flag in flags.values() if flag.required and not merged.get(flag.name)]
    if missing:
        raise UsageError(f"missing required option(s) {', '.join(missing)}")
    values = {name: flag_value(flag, merged[name]) for name, flag in flags.items() if name in merged}
    for name, flag in flags.items():  # a mapping's keys merge: the flag's win over the conf file's
        if name in config and name in given and is_mapping(unwrap_optional(flag.hint)):
            values[name] = {**flag_value(flag, config[name]), **flag_value(flag, given[name])}
    return values


def print_report(command: str, report: JobReport, *, as_json: bool = False) -> int:
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


def _check_input(job: Job, values: Mapping[str, Any], options: Any) -> Any:
    """Before Spark starts: a local input path (no scheme, no catalog name) must exist, and a
    tokenize input that is a Delta table is read as one or refused (`spark_mlt.batch.job.inputs`).
    Returns the options, the input's format resolved."""
    path = values.get("input")
    if not isinstance(path, str) or getattr(options, "input_format", None) == "table":
        return options
    if "://" not in path and not glob.glob(path) and not (job.run is not tokenize_table and is_table_name(path)):
        raise SourceError(f"input {path!r} does not exist", parameter="input")
    return resolve_input(path, options) if job.run is tokenize_table else options


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


def job_call(job: Job, values: Mapping[str, Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The function that runs the job as the values ask, and its keyword arguments: the job's
    function, or its other form's when the form's flag is given (the form's options are refused
    without it)."""
    arguments = {name: values[name] for name in job.arguments}
    call = {**arguments, "options": build_options(job.options, values)}
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
    return form.run, {**call, form.name: build_options(form.options, values)}


def run_job(args: argparse.Namespace, config: Mapping[str, Any]) -> int:
    """Build the job's options from the flags and conf file (the options check them), check a
    local input exists, then start Spark and run the job."""
    job = JOBS[args.command]
    values = job_values(job, args, config)
    run, call = job_call(job, values)
    call["options"] = _check_input(job, values, call["options"])
    _check_names(values, call["options"])
    master = args.master or config.get("master")
    conf = {**parse_pairs("conf", config.get("conf") or {}, str), **parse_pairs("conf", args.conf or [], str)}

    def session() -> Any:  # a local session also gets the s3a settings of the storage options
        settings = {**s3a_conf(getattr(call["options"], "storage_options", None)), **conf}
        return job_session(f"spark-mlt {args.command}", master=master, conf=settings, log_level=spark_level(args))

    if not job.spark:
        return _print_paper(run(**call, session=session))
    return print_report(args.command, run(session(), **call), as_json=args.json)
