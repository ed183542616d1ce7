"""The ``spark-mlt`` entry point: parse, run the command, print its report; map every failure
to its exit code and one error line.

Example::

    main(["inspect", "--input", "out/orders_mlt"])  # 0
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from spark_mlt.batch.cli.flags import (
    ERROR_PREFIX,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_REJECTED,
    EXIT_USAGE,
    OptionsError,
    UsageError,
    configure_logging,
    flag_of,
    load_config,
    parse_pairs,
    verbosity_of,
)
from spark_mlt.batch.cli.jobs import JOBS, print_report, run_job
from spark_mlt.batch.cli.parser import COMMANDS, build_parser
from spark_mlt.batch.cli.tables import run_table_command
from spark_mlt.batch.job.capacity import RESIZE_FLAGS
from spark_mlt.batch.job.report import JobReport
from spark_mlt.errors import MLTError, OptionError, RejectedRowsError
from spark_mlt.storage import redact


def _handler(command: str) -> Callable[[argparse.Namespace, Mapping[str, Any]], int]:
    return run_job if command in JOBS else run_table_command


def parse_command_line(argv: Sequence[str] | None) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The command line and its conf file's options: the conf file is read first, so that a
    job argument it gives is not required as a flag. Exits 2 on a usage error, as argparse does."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    try:
        config = load_config(known.config)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        build_parser().error(f"--config {known.config}: {str(exc).splitlines()[0] if str(exc) else exc}")
    return build_parser(config).parse_args(argv), config


def run(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the command, print its report. Raises on failure."""
    args, config = parse_command_line(argv)
    return _handler(args.command)(args, config)


def _command_names(command: str) -> set[str]:
    """The Python names that are flags of ``command``."""
    return {flag.name for flag in COMMANDS[command].flags()}


#: What Spark's launcher raises when its JVM does not start (no Java, a Java it cannot run).
_NO_JVM = "JAVA_GATEWAY_EXITED"


#: What starts the errors spark-mlt's own expressions raise in a query (``raise_error``).
_OWN_ERROR = re.compile(r"spark-mlt: (.+)")


def failure_reason(exc: BaseException, command: str) -> str:
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
    own = _OWN_ERROR.search(text)
    if own is not None and "spark-mlt: " not in reason:  # a query's error of ours beneath Spark's first line
        reason = own.group(1).strip()  # (Spark 3.5: "Py4JJavaError: An error occurred while calling o1.parquet.")
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
    switch = re.compile(r"\b([a-z_]+)=(True|False)\b")  # a boolean option in Python's words: its flag
    reason = switch.sub(lambda m: _switch(m[1], m[2] == "True") if m[1] in names else m[0], reason)
    advice = re.compile(r"\b(pass|use|or|set) ([a-z_]+)='([^' ]*)'")
    reason = advice.sub(lambda m: f"{m[1]} {flag_of(m[2])} {m[3]}" if m[2] in names else m[0], reason)
    return f"{type(exc).__name__}: {reason}"


def _switch(name: str, on: bool) -> str:
    """A boolean option's flag: ``--view``, or ``--no-view`` for ``view=False``."""
    return flag_of(name) if on else flag_of(f"no_{name}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the exit code ([`EXIT_OK`][spark_mlt.batch.cli.EXIT_OK], ...), a one-line reason
    on stderr on failure."""
    args, config = parse_command_line(argv)  # exits 2 with argparse's usage message
    configure_logging(verbosity_of(args))
    try:
        return _handler(args.command)(args, config)
    except (OptionsError, UsageError, RejectedRowsError, OptionError) as exc:
        return _refused(exc, args)
    except KeyboardInterrupt:
        print(f"{ERROR_PREFIX}interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a job reports any failure as one line and exit 1
        reason = redact(failure_reason(exc, args.command), _given_storage_options(args))
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
            print_report(args.command, exc.report, as_json=getattr(args, "json", False))
        print(f"{ERROR_PREFIX}{failure_reason(exc, args.command)}", file=sys.stderr)
        return EXIT_REJECTED
    cause = exc.__cause__ if isinstance(exc, OptionsError) and exc.__cause__ is not None else exc
    print(f"{ERROR_PREFIX}{redact(failure_reason(cause, args.command), _given_storage_options(args))}", file=sys.stderr)
    return EXIT_USAGE


def _given_storage_options(args: argparse.Namespace) -> dict[str, str]:
    """The storage options given on the command line and in the conf file, as far as they
    parse: their secrets are hidden in any message printed."""
    given: dict[str, str] = {}
    try:
        config = load_config(getattr(args, "config", None)).get("storage_options")
        given.update(parse_pairs("storage_options", config or {}, str))
        given.update(parse_pairs("storage_options", getattr(args, "storage_options", None) or [], str))
    except (OSError, ValueError, yaml.YAMLError):
        pass
    return given
