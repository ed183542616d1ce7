"""The batch jobs' options: checked when built, naming the field; the 0.1 keywords and names
still work, with one DeprecationWarning; the CLI names its flags for library errors."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import spark_mlt.batch
import spark_mlt.batch.movielens
from spark_mlt import MLTError
from spark_mlt.batch import DecodeOptions, MovieLensOptions, MovieLensRelease, TokenizeOptions, detect_release
from spark_mlt.batch.cli import UsageError, build_parser, flag_message, main
from spark_mlt.batch.options import options_from_keywords


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        (TokenizeOptions, "layout", "diagonal"),
        (TokenizeOptions, "layout", "struct"),  # a column layout, but no storage layout of the jobs
        (TokenizeOptions, "handle_invalid", "keep"),
        (TokenizeOptions, "mode", "upsert"),
        (TokenizeOptions, "engine", "jvm"),
        (TokenizeOptions, "input_format", "xml"),
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


def test_old_keywords_map_into_the_options_with_one_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"job\(mode=, token_layout=\.\.\.\) is deprecated") as record:
        options = options_from_keywords(
            "job", TokenizeOptions, TokenizeOptions(p=13), {"mode": "append", "token_layout": "array"}
        )
    assert len([w for w in record if issubclass(w.category, DeprecationWarning)]) == 1
    assert options == TokenizeOptions(p=13, mode="append", layout="array")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert options_from_keywords("job", DecodeOptions, None, {}) == DecodeOptions()


def test_old_keywords_that_clash_or_do_not_exist_are_refused() -> None:
    with pytest.raises(MLTError, match=r"layout: pass layout= only"):
        options_from_keywords("job", MovieLensOptions, None, {"layout": "array", "token_layout": "packed"})
    with pytest.raises(TypeError, match=r"job\(\) got unexpected keyword argument\(s\) \['handle_invalid'\]"):
        options_from_keywords("job", MovieLensOptions, None, {"handle_invalid": "null"})
    with pytest.raises(TypeError, match=r"options must be a DecodeOptions; got TokenizeOptions"):
        options_from_keywords("job", DecodeOptions, TokenizeOptions(), {})  # type: ignore[type-var]
    with pytest.warns(DeprecationWarning, match="deprecated"), pytest.raises(MLTError, match=r"^mode must be one of"):
        options_from_keywords("job", DecodeOptions, None, {"mode": "upsert"})


def test_the_movielens_release_names_of_0_1_still_work_with_a_warning() -> None:
    for module in (spark_mlt.batch, spark_mlt.batch.movielens):
        with pytest.warns(DeprecationWarning, match=r"detect_layout is deprecated; use detect_release"):
            assert module.detect_layout is detect_release
        with pytest.warns(DeprecationWarning, match=r"MovieLensLayout is deprecated; use MovieLensRelease"):
            assert module.MovieLensLayout is MovieLensRelease
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        spark_mlt.batch.nothing  # noqa: B018


def test_the_layout_flag_keeps_its_old_name_as_an_alias() -> None:
    for flag in ("--layout", "--token-layout"):
        assert build_parser().parse_args(["movielens", flag, "array"]).layout == "array"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["movielens", "--layout", "struct"])


def test_library_messages_name_flags_in_the_cli() -> None:
    message = "layout='packed': column u_mlt stores 'array' (pass layout='auto' or layout='array')"
    assert (
        flag_message(message, "layout")
        == "--layout packed: column u_mlt stores 'array' (pass --layout auto or --layout array)"
    )
    assert (
        flag_message("output is needed unless verify=True", "output", ["verify"])
        == "--output is needed unless --verify"
    )
    assert flag_message("input_format must be one of 'csv'", "input_format") == "--format must be one of 'csv'"
    assert flag_message("the codec (p=13, n=3) is fine; outputs", "output") == "the codec (p=13, n=3) is fine; outputs"


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
        ("tokenize", "output: out\ncolumns: [a]\nvocabulary_dir: v\nseed: x", "--seed must be a whole number"),
        ("tokenize", "output: out\ncolumns: a\nformat: xml", "--format must be one of 'parquet', 'csv'"),
        ("decode", "output: out\noutput_format: csv", "--output-format must be one of 'delta', 'parquet'; got 'csv'"),
    ],
)
def test_the_cli_names_the_flag_of_a_value_only_the_library_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, conf: str, flag: str
) -> None:
    """The options are checked before any Spark session starts: no Spark needed here."""
    config = tmp_path / "job.yaml"
    config.write_text(f"input: in\n{conf}\n")
    assert main([command, "--config", str(config)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("spark-mlt: error: "), err
    assert flag in err, err


def test_cli_usage_problems_are_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert issubclass(UsageError, ValueError)
    assert main(["inspect"]) == 1
    assert capsys.readouterr().err.strip() == "spark-mlt: error: missing the table path (inspect PATH, or --input PATH)"
    config = tmp_path / "job.yaml"
    config.write_text("layout: array\ntoken_layout: packed\n")
    with pytest.warns(FutureWarning, match="token_layout is deprecated; write layout"):
        assert main(["movielens", "--config", str(config)]) == 1
    assert "gives both token_layout and layout" in capsys.readouterr().err
