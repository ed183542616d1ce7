"""The ``spark-mlt`` command: ``movielens``, ``tokenize``, ``decode``, ``inspect``, ``vacuum``
and ``paper``.

The same flags work as ``spark-submit jobs/<job>.py ...``. Options can also come from a
YAML or JSON file (``--config conf/movielens.yaml``: keys are the long flag names, with
dashes or underscores; ``token_layout`` is the old name of ``layout``); flags given on the
command line win. Exit code 0 on success, 1 with a one-line reason on stderr on failure.

The command only parses: each subcommand's handler (``COMMANDS``) builds the job's options
object (:mod:`spark_mlt.batch.options`, which checks the values) and calls the job. Library
errors name the Python parameter (``MLTError.parameter``); :func:`flag_message` rewrites
such a message to name the flag (``layout`` -> ``--layout``), so a bad value reads the same
whether it came from a flag or a conf file.

Example::

    spark-mlt movielens --input data/ml-25m --output out/ratings_mlt --mode overwrite
    spark-mlt decode --input out/ratings_mlt --verify
    spark-mlt inspect out/ratings_mlt
    spark-mlt paper --input out/ratings_mlt --output out/paper
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml

from spark_mlt.batch.decode import decode_table
from spark_mlt.batch.inspect import inspect_table
from spark_mlt.batch.movielens import tokenize_movielens
from spark_mlt.batch.options import (
    DECODE_FORMATS,
    INPUT_FORMATS,
    STORAGE_LAYOUTS,
    WRITE_MODES,
    DecodeOptions,
    MovieLensOptions,
    TokenizeOptions,
)
from spark_mlt.batch.paper import reproduce_paper
from spark_mlt.batch.report import JobReport
from spark_mlt.batch.session import job_session
from spark_mlt.batch.tokenize import tokenize_table
from spark_mlt.errors import MLTError
from spark_mlt.options import ENGINES, HANDLE_INVALID
from spark_mlt.paper import METHODS, PaperOptions
from spark_mlt.storage import orphan_files, vacuum

__all__ = ["COMMANDS", "UsageError", "build_parser", "flag_message", "main", "run"]


class UsageError(ValueError):
    """A problem with the command line or conf file itself: a missing flag, an unknown key."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML or JSON file of options (flags override it)")
    parser.add_argument("--mode", choices=WRITE_MODES, default=None, help="default: error")
    parser.add_argument("--p", type=int, default=None, help="prime modulus (default: sized from the data)")
    parser.add_argument("--n", type=int, default=None, help="tokens per id (default: sized from the data)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the matrix draw (default: 42)")
    parser.add_argument("--engine", choices=ENGINES, default=None)
    parser.add_argument("--master", default=None, help="Spark master for local runs (default: local[2])")


def _writing(parser: argparse.ArgumentParser) -> None:
    """The flags of the jobs that write token columns."""
    parser.add_argument("--output", help="Delta table path")
    parser.add_argument(
        "--partition-by", nargs="*", default=None, help="partition columns of a new table (a b, or a,b)"
    )
    parser.add_argument(
        "--layout",
        "--token-layout",
        dest="layout",
        choices=STORAGE_LAYOUTS,
        default=None,
        help="how token columns are stored: packed in one bigint, or array<int> (default auto: an existing "
        "table's layout, else packed when the tokens fit in 64 bits); --token-layout is its old name",
    )
    parser.add_argument("--run-id", default=None, help=_RUN_ID_HELP)
    parser.add_argument(
        "--data-page-version",
        type=int,
        choices=[1, 2],
        default=None,
        help="Parquet data page version of the written files (default 2: smaller token columns, faster "
        "writes; 1 for readers without v2 page support)",
    )


_RUN_ID_HELP = (
    "idempotency key, e.g. the scheduler's run date: a run id the table already holds is not "
    "written again (the job reports it and exits 0)"
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``spark-mlt`` command."""
    parser = argparse.ArgumentParser(prog="spark-mlt", description="Modular Linear Tokenization jobs for Spark + Delta")
    sub = parser.add_subparsers(dest="command", required=True)

    movielens = sub.add_parser("movielens", help="tokenise a MovieLens release into Delta")
    movielens.add_argument("--input", help="MovieLens release folder (u.data, ratings.dat or ratings.csv)")
    movielens.add_argument(
        "--label-threshold", type=float, default=None, help="label = rating >= this (default 4, as the paper's code)"
    )
    _writing(movielens)
    _common(movielens)

    paper = sub.add_parser("paper", help="reproduce the MLT paper's Table 1 (needs spark-mlt[paper])")
    paper.add_argument("--input", help="a table written by 'spark-mlt movielens', or a MovieLens release folder")
    paper.add_argument("--output", help="folder for report.json, report.md and report.png")
    paper.add_argument("--methods", nargs="+", default=None, help=f"some of {', '.join(METHODS)} (default: all)")
    paper.add_argument("--epochs", nargs="+", default=None, help="epochs per method, e.g. mlt=20 one_hot=1")
    paper.add_argument("--seed", type=int, default=None, help="the split's and the models' seed (default 42)")
    paper.add_argument("--limit", type=int, default=None, help="read at most this many ratings (smoke runs)")
    paper.add_argument("--label-threshold", type=float, default=None, help="label = rating >= this (default 4)")
    paper.add_argument("--config", help="YAML or JSON file of options (flags override it)")
    paper.add_argument("--master", default=None, help="Spark master, to tokenise a release folder (default: local[2])")

    tokenize = sub.add_parser("tokenize", help="tokenise id columns of any table into Delta")
    tokenize.add_argument("--input", help="input path (with --format) or catalog table name (--format table)")
    tokenize.add_argument("--format", choices=[*INPUT_FORMATS, "table"], default=None, help="default: parquet")
    tokenize.add_argument("--columns", nargs="+", default=None, help="id columns to tokenise (a b, or a,b)")
    tokenize.add_argument(
        "--handle-invalid",
        choices=HANDLE_INVALID,
        default=None,
        help="rows with an invalid id: fail (error, default), null tokens, drop them (skip), or write them "
        "with a reason to the quarantine table (quarantine)",
    )
    tokenize.add_argument(
        "--quarantine", default=None, help="Delta path for rejected rows (default: <output>_quarantine)"
    )
    _writing(tokenize)
    _common(tokenize)

    decode = sub.add_parser("decode", help="decode a tokenised Delta table back to ids")
    decode.add_argument("--input", help="tokenised Delta table path")
    decode.add_argument("--output", default=None, help="where to write the decoded table")
    decode.add_argument("--output-format", choices=DECODE_FORMATS, default=None)
    decode.add_argument("--verify", action="store_true", default=None, help="compare with the kept ids; 0 mismatches")
    _common(decode)

    inspect = sub.add_parser("inspect", help="print a table's codecs, versions and row count")
    inspect.add_argument("path", nargs="?", help="Delta table path")
    inspect.add_argument("--input", dest="input", default=None, help="the same as the positional path")
    inspect.add_argument("--config", help="YAML or JSON file of options")

    vacuum_ = sub.add_parser("vacuum", help="list (default) or delete orphan and expired files of a table")
    vacuum_.add_argument("path", help="Delta table path")
    vacuum_.add_argument(
        "--retention-hours", type=int, default=168, help="keep files younger than this (default: 168, 7 days)"
    )
    vacuum_.add_argument("--apply", action="store_true", help="delete the files (default: only list them)")
    vacuum_.add_argument("--orphans", action="store_true", help="list the files no table version references, now")
    return parser


#: conf-file keys without a flag, by command
CONFIG_ONLY = {"tokenize": {"read_options", "vocabulary_dir"}}
#: old conf-file key -> its name now (accepted with a FutureWarning)
CONFIG_ALIASES = {"token_layout": "layout"}
_NOT_OPTIONS = {"config", "command"}


def _load_config(path: str | None) -> dict[str, Any]:
    """The options of a YAML or JSON conf file, keys with underscores, old names renamed."""
    if not path:
        return {}
    text = Path(path).read_text()
    loaded = (yaml.safe_load(text) or {}) if path.endswith((".yaml", ".yml")) else json.loads(text)
    if not isinstance(loaded, dict):
        raise UsageError(f"{path} must hold a mapping of option names to values")
    options: dict[str, Any] = {}
    for key, value in loaded.items():
        name = str(key).replace("-", "_")
        if name in CONFIG_ALIASES:
            new = CONFIG_ALIASES[name]
            # A FutureWarning, not a DeprecationWarning: Python shows it to the command's users.
            warnings.warn(f"{path}: {name} is deprecated; write {new}", FutureWarning, stacklevel=2)
            if new in loaded:
                raise UsageError(f"{path} gives both {name} and {new}; keep {new}")
            name = new
        options[name] = value
    return options


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """Conf file values, overridden by every flag given on the command line."""
    options = _load_config(getattr(args, "config", None))
    known = (set(vars(args)) | CONFIG_ONLY.get(args.command, set())) - _NOT_OPTIONS
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(
            f"unknown option(s) {unknown} in {args.config} for {args.command!r}; expected some of {sorted(known)}"
        )
    flags = {key: value for key, value in vars(args).items() if value is not None and key not in _NOT_OPTIONS}
    return {**options, **flags}


def _require(options: Mapping[str, Any], *names: str) -> None:
    missing = [f"--{name.replace('_', '-')}" for name in names if not options.get(name)]
    if missing:
        raise UsageError(f"missing required option(s) {', '.join(missing)}")


def _names(values: str | Sequence[str] | None) -> list[str] | None:
    """Column names given as separate words, comma-separated, or both (``a b``, ``a,b``)."""
    if values is None:
        return None
    words = [values] if isinstance(values, str) else values
    return [name.strip() for word in words for name in word.split(",") if name.strip()]


Options = TypeVar("Options", MovieLensOptions, TokenizeOptions, DecodeOptions)


def _build(kind: type[Options], options: Mapping[str, Any]) -> Options:
    """The job's options object from the given options that are its fields (it checks them)."""
    values = {**options, "partition_by": _names(options.get("partition_by"))}
    names = {f.name for f in fields(kind)}
    return kind(**{key: value for key, value in values.items() if key in names and value is not None})


def _session_for(command: str, options: Mapping[str, Any]) -> Any:
    return job_session(f"spark-mlt {command}", master=options.get("master"))


def _print_report(command: str, report: JobReport) -> int:
    for column, codec in report.codecs.items():
        layout = report.layouts.get(column)
        print(
            f"codec {column}: p={codec.p} n={codec.n} seed={codec.seed} capacity={codec.capacity} "
            f"fingerprint={codec.fingerprint[:16]}" + (f" layout={layout}" if layout else "")
        )
    print(f"spark-mlt {command}: {report.summary()}")
    if report.mismatches:
        raise MLTError(f"{report.mismatches} decoded ids differ from the originals")
    return 0


def _run_movielens(args: argparse.Namespace, options: Mapping[str, Any]) -> int:
    _require(options, "input", "output")
    job = _build(MovieLensOptions, options)
    report = tokenize_movielens(_session_for(args.command, options), options["input"], options["output"], job)
    return _print_report(args.command, report)


def _run_tokenize(args: argparse.Namespace, options: Mapping[str, Any]) -> int:
    _require(options, "input", "output", "columns")
    fmt = options.get("format")
    job = _build(TokenizeOptions, {**options, "input_format": None if fmt == "table" else fmt})
    if fmt == "table":  # a catalog table
        job = replace(job, input_format=None)
    spark = _session_for(args.command, options)
    report = tokenize_table(spark, options["input"], options["output"], _names(options["columns"]) or [], job)
    return _print_report(args.command, report)


def _run_decode(args: argparse.Namespace, options: Mapping[str, Any]) -> int:
    _require(options, "input")
    job = _build(DecodeOptions, options)
    report = decode_table(_session_for(args.command, options), options["input"], job)
    return _print_report(args.command, report)


def _epochs(values: Sequence[str] | Mapping[str, int] | None) -> dict[str, int]:
    """``method=N`` words (or a conf file's mapping) as a dict."""
    if isinstance(values, Mapping):
        return dict(values)
    epochs = {}
    for word in values or []:
        method, _, count = word.partition("=")
        if not count.isdigit():
            raise UsageError(f"--epochs takes method=N words, got {word!r}")
        epochs[method] = int(count)
    return epochs


def _run_paper(args: argparse.Namespace, options: Mapping[str, Any]) -> int:
    _require(options, "input", "output")
    chosen: dict[str, Any] = {
        "methods": tuple(_names(options.get("methods")) or METHODS),
        "epochs": _epochs(options.get("epochs")),
    }
    for name in ("seed", "limit", "label_threshold"):
        if options.get(name) is not None:
            chosen[name] = options[name]
    report = reproduce_paper(
        options["input"], options["output"], PaperOptions(**chosen), session=lambda: _session_for(args.command, options)
    )
    print((report.files["markdown"]).read_text())
    print(f"spark-mlt paper: report in {', '.join(str(path) for path in report.files.values())}")
    return 0


def _run_inspect(args: argparse.Namespace, options: Mapping[str, Any]) -> int:
    path = options.get("path") or options.get("input")
    if not path:
        raise UsageError("missing the table path (inspect PATH, or --input PATH)")
    print(json.dumps(inspect_table(path), indent=2, default=str))
    return 0


def _run_vacuum(args: argparse.Namespace, options: Mapping[str, Any]) -> int:
    if args.orphans:
        files, verb = orphan_files(args.path), "orphan"
    else:
        files = vacuum(args.path, retention_hours=args.retention_hours, dry_run=not args.apply)
        verb = "deleted" if args.apply else "would delete"
    for name in files:
        print(name)
    print(f"spark-mlt vacuum: {len(files)} file(s) {verb} in {args.path}")
    return 0


#: subcommand -> its handler
COMMANDS: dict[str, Callable[[argparse.Namespace, Mapping[str, Any]], int]] = {
    "movielens": _run_movielens,
    "tokenize": _run_tokenize,
    "decode": _run_decode,
    "paper": _run_paper,
    "inspect": _run_inspect,
    "vacuum": _run_vacuum,
}


def run(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the command, print its report. Raises on failure."""
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command](args, _options(args))


#: Python parameters whose flag is not ``--<name with dashes>``
PARAMETER_FLAGS = {"input_folder": "--input", "source": "--input", "path": "--input", "input_format": "--format"}
#: words of codec messages (``p=13, n=3``) that are no flag there
_CODEC_WORDS = {"p", "n", "seed"}


def _flag(name: str) -> str:
    return PARAMETER_FLAGS.get(name, f"--{name.replace('_', '-')}")


def _flag_value(flag: str) -> Callable[[re.Match[str]], str]:
    def replace_match(match: re.Match[str]) -> str:
        return flag if match.group(2) == "True" else f"{flag} {match.group(2)}"

    return replace_match


def flag_message(message: str, parameter: str, names: Sequence[str] = ()) -> str:
    """A library error message in the command's words: ``parameter`` at its start and every
    ``name=value`` of ``parameter`` or ``names`` become ``--flag value`` (``--flag`` for True).

    Example::

        >>> flag_message("layout must be one of 'auto'; got 'x'", "layout")
        "--layout must be one of 'auto'; got 'x'"
    """
    for name in sorted({parameter, *names}):
        pattern = rf"(?<![\w.-]){re.escape(name)}=(['\"]?)([^\s'\",;)]*)\1"
        message = re.sub(pattern, _flag_value(_flag(name)), message)
    return re.sub(rf"^{re.escape(parameter)}\b", _flag(parameter), message)


def _reason(exc: BaseException, argv: Sequence[str] | None) -> str:
    """The first line of an error, in the command's words when it names a parameter."""
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, UsageError):
        return reason
    if isinstance(exc, MLTError) and exc.parameter:
        names = [name for name in _option_names(argv) if name not in _CODEC_WORDS]
        reason = flag_message(reason, exc.parameter, names)
    return f"{type(exc).__name__}: {reason}"


def _option_names(argv: Sequence[str] | None) -> list[str]:
    """The option names of the command being run (for :func:`flag_message`)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:  # pragma: no cover - the arguments parsed before the job ran
        return []
    return sorted((set(vars(args)) | CONFIG_ONLY.get(args.command, set())) - _NOT_OPTIONS)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: exit code 0 on success, 1 with a one-line reason on failure."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return run(argv)
    except KeyboardInterrupt:
        print("spark-mlt: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a job reports any failure as one line and exit 1
        print(f"spark-mlt: error: {_reason(exc, argv)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
