"""The ``spark-mlt`` command: ``movielens``, ``tokenize``, ``decode`` and ``inspect``.

The same flags work as ``spark-submit jobs/<job>.py ...``. Options can also come from a
YAML or JSON file (``--config conf/movielens.yaml``: keys are the long flag names, with
dashes or underscores); flags given on the command line win. Exit code 0 on success, 1 with
a one-line reason on stderr on failure.

Example::

    spark-mlt movielens --input data/ml-25m --output out/ratings_mlt --mode overwrite
    spark-mlt decode --input out/ratings_mlt --verify
    spark-mlt inspect out/ratings_mlt
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main"]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML or JSON file of options (flags override it)")
    parser.add_argument("--mode", choices=["error", "append", "overwrite"], default=None, help="default: error")
    parser.add_argument("--p", type=int, default=None, help="prime modulus (default: sized from the data)")
    parser.add_argument("--n", type=int, default=None, help="tokens per id (default: sized from the data)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the matrix draw (default: 42)")
    parser.add_argument("--engine", choices=["auto", "native", "udf"], default=None)
    parser.add_argument(
        "--partition-by", nargs="*", default=None, help="partition columns of a new table (a b, or a,b)"
    )
    parser.add_argument(
        "--token-layout",
        choices=["auto", "packed", "array"],
        default=None,
        help="how token columns are stored: packed in one bigint, or array<int> (default auto: an existing "
        "table's layout, else packed when the tokens fit in 64 bits)",
    )
    parser.add_argument("--master", default=None, help="Spark master for local runs (default: local[2])")


def _page_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-page-version",
        type=int,
        choices=[1, 2],
        default=None,
        help="Parquet data page version of the written files (default 2: smaller token columns, faster "
        "writes; 1 for readers without v2 page support)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``spark-mlt`` command."""
    parser = argparse.ArgumentParser(prog="spark-mlt", description="Modular Linear Tokenization jobs for Spark + Delta")
    sub = parser.add_subparsers(dest="command", required=True)

    movielens = sub.add_parser("movielens", help="tokenise a MovieLens release into Delta")
    movielens.add_argument("--input", help="MovieLens release folder (u.data, ratings.dat or ratings.csv)")
    movielens.add_argument("--output", help="Delta table path")
    movielens.add_argument("--run-id", default=None, help=_RUN_ID_HELP)
    _common(movielens)
    _page_version(movielens)

    tokenize = sub.add_parser("tokenize", help="tokenise id columns of any table into Delta")
    tokenize.add_argument("--input", help="input path (with --format) or catalog table name (--format table)")
    tokenize.add_argument("--format", choices=["parquet", "csv", "json", "orc", "delta", "table"], default=None)
    tokenize.add_argument("--columns", nargs="+", default=None, help="id columns to tokenise (a b, or a,b)")
    tokenize.add_argument("--output", help="Delta table path")
    tokenize.add_argument("--handle-invalid", choices=["error", "null", "quarantine"], default=None)
    tokenize.add_argument(
        "--quarantine", default=None, help="Delta path for rejected rows (default: <output>_quarantine)"
    )
    tokenize.add_argument("--run-id", default=None, help=_RUN_ID_HELP)
    _common(tokenize)
    _page_version(tokenize)

    decode = sub.add_parser("decode", help="decode a tokenised Delta table back to ids")
    decode.add_argument("--input", help="tokenised Delta table path")
    decode.add_argument("--output", default=None, help="where to write the decoded table")
    decode.add_argument("--output-format", choices=["delta", "parquet"], default=None)
    decode.add_argument("--verify", action="store_true", default=None, help="compare with the kept ids; 0 mismatches")
    _common(decode)

    inspect = sub.add_parser("inspect", help="print a table's codecs, versions and row count")
    inspect.add_argument("path", nargs="?", help="Delta table path")
    inspect.add_argument("--input", dest="input", default=None, help="the same as the positional path")
    inspect.add_argument("--config", help="YAML or JSON file of options")

    vacuum = sub.add_parser("vacuum", help="list (default) or delete orphan and expired files of a table")
    vacuum.add_argument("path", help="Delta table path")
    vacuum.add_argument(
        "--retention-hours", type=int, default=168, help="keep files younger than this (default: 168, 7 days)"
    )
    vacuum.add_argument("--apply", action="store_true", help="delete the files (default: only list them)")
    vacuum.add_argument("--orphans", action="store_true", help="list the files no table version references, now")
    return parser


_RUN_ID_HELP = (
    "idempotency key, e.g. the scheduler's run date: a run id the table already holds is not "
    "written again (the job reports it and exits 0)"
)


def _load_config(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    text = Path(path).read_text()
    if path.endswith((".yaml", ".yml")):
        import yaml

        loaded = yaml.safe_load(text) or {}
    else:
        loaded = json.loads(text)
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} must hold a mapping of option names to values")
    return {str(k).replace("-", "_"): v for k, v in loaded.items()}


CONFIG_ONLY = {"tokenize": {"read_options", "vocabulary_dir"}}  # options with no flag


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """Config file values, overridden by every flag given on the command line."""
    options = _load_config(getattr(args, "config", None))
    known = (set(vars(args)) | CONFIG_ONLY.get(args.command, set())) - {"config", "command"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown} in {args.config} for {args.command!r}; expected some of {sorted(known)}"
        )
    for key, value in vars(args).items():
        if value is not None and key not in ("config", "command"):
            options[key] = value
    defaults = {
        "mode": "error",
        "seed": 42,
        "engine": "auto",
        "partition_by": [],
        "handle_invalid": "error",
        "token_layout": "auto",
        "data_page_version": 2,
    }
    return {**defaults, **options}


def _require(options: dict[str, Any], *names: str) -> None:
    missing = [f"--{name.replace('_', '-')}" for name in names if not options.get(name)]
    if missing:
        raise ValueError(f"missing required option(s) {', '.join(missing)}")


def run(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the job, print its report. Raises on failure."""
    args = build_parser().parse_args(argv)
    options = _options(args)
    from spark_mlt import pipeline

    if args.command == "inspect":
        path = options.get("path") or options.get("input")
        if not path:
            raise ValueError("missing the table path")
        print(json.dumps(pipeline.inspect_table(path), indent=2, default=str))
        return 0
    if args.command == "vacuum":
        from spark_mlt.delta import orphan_files, vacuum

        if args.orphans:
            files = orphan_files(args.path)
            verb = "orphan"
        else:
            files = vacuum(args.path, retention_hours=args.retention_hours, dry_run=not args.apply)
            verb = "deleted" if args.apply else "would delete"
        for name in files:
            print(name)
        print(f"spark-mlt vacuum: {len(files)} file(s) {verb} in {args.path}")
        return 0

    from spark_mlt.session import job_session

    spark = job_session(f"spark-mlt {args.command}", master=options.get("master"))
    common = {"mode": options["mode"], "engine": options["engine"]}
    if args.command == "movielens":
        _require(options, "input", "output")
        report = pipeline.tokenize_movielens(
            spark,
            options["input"],
            options["output"],
            p=options.get("p"),
            n=options.get("n"),
            seed=options["seed"],
            partition_by=_names(options["partition_by"]) or (),
            run_id=options.get("run_id"),
            token_layout=options["token_layout"],
            data_page_version=options["data_page_version"],
            **common,
        )
    elif args.command == "tokenize":
        _require(options, "input", "output", "columns")
        fmt = options.get("format", "parquet")
        report = pipeline.tokenize_table(
            spark,
            options["input"],
            options["output"],
            _names(options["columns"]) or [],
            input_format=None if fmt == "table" else fmt,
            read_options=options.get("read_options", {}),
            p=options.get("p"),
            n=options.get("n"),
            seed=options["seed"],
            handle_invalid=options["handle_invalid"],
            quarantine=options.get("quarantine"),
            vocabulary_dir=options.get("vocabulary_dir"),
            partition_by=_names(options["partition_by"]) or (),
            run_id=options.get("run_id"),
            token_layout=options["token_layout"],
            data_page_version=options["data_page_version"],
            **common,
        )
    else:
        _require(options, "input")
        report = pipeline.decode_table(
            spark,
            options["input"],
            output=options.get("output"),
            output_format=options.get("output_format", "delta"),
            verify=bool(options.get("verify")),
            **common,
        )
    for column, codec in report.codecs.items():
        layout = report.layouts.get(column)
        print(
            f"codec {column}: p={codec.p} n={codec.n} seed={codec.seed} capacity={codec.capacity} "
            f"fingerprint={codec.fingerprint[:16]}" + (f" layout={layout}" if layout else "")
        )
    print(f"spark-mlt {args.command}: {report.summary()}")
    if report.mismatches:
        raise ValueError(f"{report.mismatches} decoded ids differ from the originals")
    return 0


def _names(values: str | Sequence[str] | None) -> list[str] | None:
    """Column names given as separate words, comma-separated, or both (``a b``, ``a,b``)."""
    if values is None:
        return None
    words = [values] if isinstance(values, str) else values
    return [name.strip() for word in words for name in word.split(",") if name.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: exit code 0 on success, 1 with a one-line reason on failure."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return run(argv)
    except KeyboardInterrupt:
        print("spark-mlt: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a job reports any failure as one line and exit 1
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"spark-mlt: error: {type(exc).__name__}: {reason}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
