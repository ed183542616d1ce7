"""The batch jobs' options: checked when built, naming the field, each write setting by the one
checker storage uses too; the CLI's flags and conf keys derived from the fields, and library
errors named by their flag in the CLI only."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

import pytest

from spark_mlt import MLTError, __version__
from spark_mlt.batch import DecodeOptions, MovieLensOptions, TokenizeOptions
from spark_mlt.batch.cli import (
    COMMANDS,
    ERROR_PREFIX,
    EXIT_MISMATCH,
    EXIT_USAGE,
    JOBS,
    Job,
    UsageError,
    add_flags,
    build_parser,
    command_parsers,
    flag_of,
    main,
)
from spark_mlt.batch.cli.flags import Flag
from spark_mlt.batch.cli.jobs import job_values, print_report
from spark_mlt.batch.cli.main import failure_reason, parse_command_line
from spark_mlt.batch.job.report import JobReport, RunLog
from spark_mlt.batch.job.session import is_local, spark_defaults
from spark_mlt.errors import OptionError, TableExistsError
from spark_mlt.storage import WriteOptions, token_write_options, write_delta


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        (TokenizeOptions, "layout", "diagonal"),
        (TokenizeOptions, "layout", "struct"),  # a column layout, but no storage layout of the jobs
        (TokenizeOptions, "handle_invalid", "keep"),
        (TokenizeOptions, "mode", "upsert"),
        (TokenizeOptions, "engine", "java"),
        (TokenizeOptions, "input_format", "xml"),
        (TokenizeOptions, "input_format", None),  # a catalog table is input_format="table"
        (TokenizeOptions, "data_page_version", 3),
        (TokenizeOptions, "p", 0),
        (TokenizeOptions, "n", -1),
        (TokenizeOptions, "run_id", " "),
        (TokenizeOptions, "read_options", ["header"]),
        (MovieLensOptions, "layout", "diagonal"),
        (MovieLensOptions, "seed", "42"),
        (MovieLensOptions, "partition_by", [1]),
        (DecodeOptions, "output_format", "csv"),
        (DecodeOptions, "mode", "upsert"),
        (DecodeOptions, "verify", "yes"),
        (WriteOptions, "backend", "spark"),
    ],
)
def test_a_bad_option_is_refused_naming_its_field(kind: Any, field: str, value: object) -> None:
    with pytest.raises(MLTError, match=rf"^{field} must be") as caught:
        kind(**{field: value})
    assert caught.value.parameter == field
    assert "--" not in str(caught.value)  # the library speaks Python, not flags


def test_options_are_frozen_and_normalised() -> None:
    options = TokenizeOptions(partition_by="day", read_options={"header": True})  # type: ignore[arg-type,dict-item]
    assert (options.partition_by, options.read_options) == (("day",), {"header": "True"})
    with pytest.raises(AttributeError):
        options.mode = "append"  # type: ignore[misc]
    assert MovieLensOptions(partition_by=["a", "b"]).partition_by == ("a", "b")  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value"), [("mode", "upsert"), ("run_id", " "), ("data_page_version", 3)])
def test_a_write_setting_gives_the_same_error_in_a_job_and_in_storage(field: str, value: object) -> None:
    """Pins the one checker per write setting: the jobs' options and storage used to word
    them differently. Both refuse the value before touching the DataFrame (None here)."""
    with pytest.raises(MLTError) as in_options:
        TokenizeOptions(**{field: value})

    def write() -> object:
        if field == "data_page_version":
            return token_write_options(None, [], data_page_version=value)  # type: ignore[arg-type]
        return write_delta(None, "nowhere", **{field: value})  # type: ignore[arg-type]

    with pytest.raises(MLTError) as in_storage:
        write()
    assert type(in_options.value) is type(in_storage.value)
    assert str(in_options.value) == str(in_storage.value)
    assert in_options.value.parameter == in_storage.value.parameter == field


def _parser_of(command: str) -> argparse.ArgumentParser:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = subparsers.choices[command]
    return parser


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_of_a_command_is_an_argument_or_options_field_of_its_name(command: str) -> None:
    """Every command is built alike: its flags are its arguments and its options' fields (a job's
    other form's too), with the fields' choices, beside how it runs and its verbosity."""
    spec = COMMANDS[command]
    actions = {action.dest: action for action in _parser_of(command)._actions if action.dest != "help"}
    options = [spec.options, *([spec.form.options] if isinstance(spec, Job) and spec.form else [])]
    for kind in options:
        hints = get_type_hints(kind)
        for field in dataclasses.fields(kind):
            action = actions[field.name]
            assert action.option_strings[0] == flag_of(field.name) == "--" + field.name.replace("_", "-")
            if getattr(hints[field.name], "__origin__", None) is Literal:
                assert tuple(action.choices or ()) == get_args(hints[field.name])
    derived = {flag.name for flag in spec.flags()}
    assert set(actions) - derived == {*spec.run_flags, "verbose", "quiet", *(["json"] if spec.report else [])}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_of_a_command_says_what_it_does(command: str) -> None:
    """``spark-mlt <command> --help`` describes each flag: every options field has its help."""
    for field in dataclasses.fields(COMMANDS[command].options):
        assert str(field.metadata.get("help", "")).strip(), f"{command}: {field.name} has no help"


def test_flags_parse_to_the_fields_types() -> None:
    parse = build_parser({"input": "in", "output": "out", "columns": "c"}).parse_args  # the conf file's
    args = parse(["tokenize", "--data-page-version", "1", "--partition-by", "a,b", "c", "--read-options", "sep=;"])
    assert (args.data_page_version, args.partition_by, args.read_options) == (1, ["a,b", "c"], ["sep=;"])
    assert parse(["decode", "--verify"]).verify is True
    repeated = parse(
        ["tokenize", "--columns", "a", "--columns", "b,c", "--storage-options", "A=1", "--storage-options", "B=2"]
    )
    assert (repeated.columns, repeated.storage_options) == (["a", "b,c"], ["A=1", "B=2"])  # given twice: adds up
    publish = parse(["publish", "--input", "t", "--schema", "s", "--no-view", "--print-only"])
    assert (publish.functions, publish.view, publish.print_only) == (None, False, True)  # None: the field's default
    assert parse(["paper", "--epochs", "mlt=3", "--limit", "9"]).limit == 9
    with pytest.raises(SystemExit):
        parse(["movielens", "--layout", "struct"])
    with pytest.raises(SystemExit):  # one word per concept: the old flag names are gone
        parse(["movielens", "--token-layout", "array"])


def test_storage_options_merge_from_the_conf_file_and_flags_and_hide_their_secrets(tmp_path: Path) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("storage_options:\n  AWS_REGION: eu-west-1\n  AWS_SECRET_ACCESS_KEY: conf-s3cret\n")
    argv = ["decode", "--input", "s3://b/t", "--verify", "--config", str(config)]
    args, conf = parse_command_line([*argv, "--storage-options", "AWS_REGION=us-east-1"])
    values = job_values(JOBS["decode"], args, conf)
    options = DecodeOptions(**{name: value for name, value in values.items() if name != "input"})
    assert options.storage_options == {"AWS_REGION": "us-east-1", "AWS_SECRET_ACCESS_KEY": "conf-s3cret"}
    assert "conf-s3cret" not in repr(options)


def test_a_library_error_names_the_flag_of_its_parameter_in_the_cli() -> None:
    layout = MLTError("layout='packed': column u_mlt stores 'array' (pass layout='auto')", parameter="layout")
    assert (
        failure_reason(layout, "movielens")
        == "MLTError: --layout 'packed': column u_mlt stores 'array' (pass --layout auto)"
    )
    choice = OptionError("input_format must be one of 'csv'; got 'xml'", parameter="input_format")
    assert failure_reason(choice, "tokenize") == "OptionError: --input-format must be one of 'csv'; got 'xml'"
    exists = TableExistsError("mode is 'error' but a table exists", parameter="mode")
    assert failure_reason(exists, "decode") == "TableExistsError: --mode is 'error' but a table exists"
    other = MLTError("table t already stores a codec for 'u'", parameter="codecs")  # no flag of the command
    assert failure_reason(other, "movielens") == "MLTError: table t already stores a codec for 'u'"


@pytest.mark.parametrize(
    ("command", "conf", "flag"),
    [
        (
            "movielens",
            "output: out\nlayout: diagonal",
            "--layout must be one of 'auto', 'packed', 'array'; got 'diagonal'",
        ),
        (
            "tokenize",
            "output: out\nhandle_invalid: keep\ncolumns: [a]",
            "--handle-invalid must be one of 'error', 'null'",
        ),
        ("tokenize", "output: out\ncolumns: [a]\nvocabulary-dir: v\nseed: x", "--seed must be a whole number"),
        ("tokenize", "output: out\ncolumns: [a]\np: 12", "--p must be prime; got 12 (the nearest prime above is 13)"),
        (
            "tokenize",
            "output: out\ncolumns: a\ninput_format: xml",
            "--input-format must be one of 'auto', 'parquet', 'csv'",
        ),
        ("decode", "output: out\noutput_format: csv", "--output-format must be one of 'delta', 'parquet'; got 'csv'"),
    ],
)
def test_the_cli_names_the_flag_of_a_value_only_the_library_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, conf: str, flag: str
) -> None:
    """The options are checked before any Spark session starts (no Spark needed here): a bad
    value is a usage error, named by its flag."""
    config = tmp_path / "job.yaml"
    config.write_text(f"input: in\n{conf}\n")
    assert main([command, "--config", str(config)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("spark-mlt: error: "), err
    assert flag in err, err


def test_cli_usage_problems_exit_2_before_any_work(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """argparse's usage errors (a missing required flag) and a conf file's (an unknown key, a file
    that is no mapping) both exit 2, the usage-error code, naming the problem."""
    assert issubclass(UsageError, ValueError)
    for argv in (["decode"], ["inspect"], ["vacuum", "--apply"], ["tokenize", "--input", "x", "--output", "y"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == EXIT_USAGE
        assert "the following arguments are required: " in capsys.readouterr().err
    config = tmp_path / "job.yaml"
    config.write_text("input: in\noutput: out\ntoken_layout: packed\nformat: csv\n")
    assert main(["movielens", "--config", str(config)]) == EXIT_USAGE
    assert "unknown option(s) ['format', 'token_layout']" in capsys.readouterr().err
    config.write_text("- a list\n")
    with pytest.raises(SystemExit) as exited:
        main(["movielens", "--config", str(config)])
    assert exited.value.code == EXIT_USAGE
    assert "must hold a mapping of option names to values" in capsys.readouterr().err
    assert main(["decode", "--input", str(tmp_path), "--verify", "--conf", "spark.x"]) == EXIT_USAGE
    assert "--conf takes key=value words; got 'spark.x'" in capsys.readouterr().err


def test_a_conf_file_gives_what_the_flags_require_and_help_says_what_is_required() -> None:
    """Required flags are declared (the help's "required" group); a conf file that gives one
    makes it optional on the command line."""
    parsers = command_parsers(build_parser())
    for name, parser in parsers.items():
        if name == "jar":  # prints the jar's path: reads no table
            continue
        groups = {group.title: [a.dest for a in group._group_actions] for group in parser._action_groups}
        assert "input" in groups["required"], name  # every command that reads a table takes --input
        assert {"verbose", "quiet"} <= set(groups["output"]), name
        assert "examples:\n  spark-mlt " + name in parser.format_help(), name
    required = {
        name: [a.dest for a in g._group_actions]
        for name, parser in parsers.items()
        for g in parser._action_groups
        if g.title == "required"
    }
    assert required["inspect"] == ["input"]
    assert required["find"] == ["input", "column", "value"]
    args = build_parser({"input": "in", "output": "out"}).parse_args(["movielens"])
    assert (args.input, args.output) == (None, None)  # left to the conf file's values


def test_version_and_exit_codes_are_those_documented(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"spark-mlt {__version__}"
    assert __version__ == metadata.version("spark-mlt")  # the package metadata's, from pyproject.toml
    assert re.fullmatch(r"\d+\.\d+\.\d+\.dev\d+", __version__), "a development version until the first release"
    help_text = build_parser().format_help()
    for code, meaning in [
        (0, "success"),
        (1, "failure"),
        (2, "usage error"),
        (3, "decode --verify"),
        (130, "interrupted"),
    ]:
        assert f"  {code}" in help_text
        assert meaning in help_text
    assert print_report("decode", JobReport(rows_in=5, rows_out=5, mismatches=2)) == EXIT_MISMATCH
    assert capsys.readouterr().err.strip() == "spark-mlt: error: 2 decoded ids differ from the originals"
    assert print_report("decode", JobReport(rows_in=5, rows_out=5, mismatches=0)) == 0


def test_only_a_local_master_gets_the_local_defaults() -> None:
    assert is_local(None)
    assert is_local("local[2]")
    assert is_local("local-cluster[2,1,1024]")
    assert not is_local("yarn")
    assert not is_local("spark://host:7077")
    assert not is_local("k8s://https://h:443")


def test_a_missing_local_input_fails_before_spark_starts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "nothing.parquet")
    assert main(["tokenize", "--input", missing, "--columns", "a", "--output", str(tmp_path / "o"), "-q"]) == 1
    assert capsys.readouterr().err.strip() == f"spark-mlt: error: SourceError: --input {missing!r} does not exist"
    assert logging.getLogger("spark_mlt").level == logging.WARNING  # -q


def test_every_error_line_starts_with_the_one_prefix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """argparse's errors (a bad choice, a missing flag), the conf file's and the job's all print
    ``spark-mlt: error: ...`` as their last stderr line, whatever the command."""
    for argv in (["tokenize", "--layout", "diagonal"], ["decode"], ["-x"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == EXIT_USAGE
        assert capsys.readouterr().err.splitlines()[-1].startswith(ERROR_PREFIX), argv
    config = tmp_path / "job.yaml"
    config.write_text("input: in\noutput: out\nformat: csv\n")
    assert main(["movielens", "--config", str(config)]) == EXIT_USAGE
    assert capsys.readouterr().err.strip().startswith(f"{ERROR_PREFIX}movielens: unknown option(s) ['format']")


def test_verbosity_flags_work_before_the_command_and_add_up_with_those_after(tmp_path: Path) -> None:
    missing = str(tmp_path / "nothing.parquet")
    job = ["tokenize", "--input", missing, "--columns", "a", "--output", str(tmp_path / "o")]
    assert main(["-q", *job]) == 1
    assert logging.getLogger("spark_mlt").level == logging.WARNING
    assert main(["-v", *job, "-q"]) == 1
    assert logging.getLogger("spark_mlt").level == logging.INFO
    assert main(["-qq", *job]) == 1
    assert logging.getLogger("spark_mlt").level == logging.ERROR


def test_the_spark_defaults_file_is_read_as_spark_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``key value``, ``key=value`` and ``key: value`` lines, comments left out; SPARK_CONF_DIR
    wins over SPARK_HOME/conf, and no file means no settings."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "spark-defaults.conf").write_text("spark.master yarn\n")
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert spark_defaults() == ({"spark.master": "yarn"}, home / "conf" / "spark-defaults.conf")
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    assert spark_defaults() == ({}, None)
    text = "# comment\n! also one\n\nspark.master   spark://h:7077\nspark.a=1\nspark.b : two words\n"
    (conf_dir / "spark-defaults.conf").write_text(text)
    settings, _ = spark_defaults()
    assert settings == {"spark.master": "spark://h:7077", "spark.a": "1", "spark.b": "two words"}


def test_a_help_text_with_a_percent_sign_renders() -> None:
    """argparse formats help with ``%``: an option's help saying "5%" must not break ``--help``."""
    parser = argparse.ArgumentParser(prog="x")
    add_flags(parser, [Flag("budget", int, "at most 5% of the parameters")])
    assert "at most 5% of the parameters" in parser.format_help()


def test_an_advice_in_python_words_names_the_flag_and_a_jvm_that_did_not_start_says_what_to_check() -> None:
    exists = TableExistsError(
        "mode 'error' and a table exists at t; pass mode='append' or mode='overwrite'", parameter="mode"
    )
    assert failure_reason(exists, "tokenize").endswith("pass --mode append or --mode overwrite")
    beyond = MLTError("ids beyond capacity; use handle_invalid='null' or a larger codec")
    assert (
        failure_reason(beyond, "tokenize")
        == "MLTError: ids beyond capacity; use --handle-invalid null or a larger codec"
    )
    assert (
        failure_reason(MLTError("x; pass layout='auto'"), "decode") == "MLTError: x; pass layout='auto'"
    )  # no such flag
    no_jvm = RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.")
    assert "needs Java (17+ for Spark 4) from JAVA_HOME or the PATH" in failure_reason(no_jvm, "tokenize")


def test_a_runs_report_sums_its_parts_and_keeps_the_last_ones_write() -> None:
    """A sync's report adds up its windows: rows, deleted and erased keys, Spark jobs and phase
    times summed; the codecs, the write and the source version the last window's."""
    first = JobReport(
        rows_in=3, rows_out=2, rows_rejected=1, source_version=4, erased={"email": 1}, spark_jobs={"window": 10}
    )
    later = JobReport(
        rows_in=2,
        rows_out=2,
        rows_deleted=1,
        source_version=6,
        erased={"email": 2, "sku": 1},
        seconds={"commit": 0.5},
        spark_jobs={"window": 11},
        warnings=("w",),
    )
    total = first.plus(later)
    assert (total.rows_in, total.rows_out, total.rows_rejected, total.rows_deleted) == (5, 4, 1, 1)
    assert (total.source_version, total.erased, total.spark_jobs) == (6, {"email": 3, "sku": 1}, {"window": 21})
    assert (total.seconds, total.warnings) == ({"commit": 0.5}, ("w",))
    assert (first.rows_in, first.erased, first.spark_jobs) == (3, {"email": 1}, {"window": 10})  # parts unchanged
    total = total.plus(JobReport())  # a part that did nothing keeps what is there
    assert (total.source_version, total.rows_out) == (6, 4)
    run_log = RunLog(seconds={"commit": 0.25}, warnings=["w", "v"], spark_jobs={"window": 1})
    logged = total.logged(run_log)
    assert (logged.seconds, logged.warnings, logged.spark_jobs) == ({"commit": 0.75}, ("w", "v"), {"window": 22})
