"""The options of the batch jobs, as frozen dataclasses checked when built.

A job takes one options object (``tokenize_table(spark, source, output, columns,
TokenizeOptions(p=13, layout="array"))``) instead of a dozen keywords, so the CLI, the
spark-submit scripts, a conf file and Python callers all build the same object, and a bad
value fails before any Spark work, naming the field (``MLTError.parameter``) — the CLI turns
that name into its flag.

The 0.1 keywords (``tokenize_movielens(..., mode="append", token_layout="array")``) still
work through :func:`options_from_keywords`: one DeprecationWarning per call, naming them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeVar

from spark_mlt.codec import DEFAULT_SEED
from spark_mlt.errors import MLTError, MLTTypeError
from spark_mlt.options import ENGINES, HANDLE_INVALID, Engine, HandleInvalid, check_choice
from spark_mlt.storage import WRITE_MODES, WriteMode

__all__ = [
    "DECODE_FORMATS",
    "INPUT_FORMATS",
    "STORAGE_LAYOUTS",
    "WRITE_MODES",
    "DecodeOptions",
    "JobOptions",
    "MovieLensOptions",
    "StorageLayout",
    "TokenizeOptions",
    "WriteMode",
    "options_from_keywords",
]

#: How the jobs store a token column: ``auto`` (an existing table's layout, else packed when
#: the tokens fit in 64 bits), ``packed`` (one bigint) or ``array`` (array<int>).
StorageLayout = Literal["auto", "packed", "array"]
STORAGE_LAYOUTS: tuple[StorageLayout, ...] = ("auto", "packed", "array")
InputFormat = Literal["parquet", "csv", "json", "orc", "delta"]
INPUT_FORMATS: tuple[InputFormat, ...] = ("parquet", "csv", "json", "orc", "delta")
DecodeFormat = Literal["delta", "parquet"]
DECODE_FORMATS: tuple[DecodeFormat, ...] = ("delta", "parquet")

#: 0.1 keyword -> options field
RENAMED_KEYWORDS = {"token_layout": "layout"}


def _check_positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise MLTError(f"{name} must be a positive whole number or None; got {value!r}", parameter=name)


def _columns(name: str, value: str | Sequence[str]) -> tuple[str, ...]:
    """A tuple of column names from a sequence, or one name."""
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise MLTTypeError(f"{name} must be column names; got {value!r}", parameter=name)
    return names


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """The options every tokenising job takes (the codec, the engine, how the table is written).

    Attributes:
        p, n: the codec's prime and token count (None: sized from the data, p^n > largest id);
            ignored for a column the existing table already has a codec for.
        seed: the seed of the codec's matrix draw.
        engine: ``auto``, ``native`` or ``udf`` (see :func:`spark_mlt.column.mlt_encode`).
        layout: how token columns are stored: ``auto``, ``packed`` or ``array``.
        mode: ``error`` (the table must not exist), ``append`` or ``overwrite``.
        partition_by: partition columns of a new table.
        run_id: idempotency key: a run id the table already holds is not written again.
        data_page_version: Parquet data page version of the written files, 1 or 2.
    """

    p: int | None = None
    n: int | None = None
    seed: int = DEFAULT_SEED
    engine: Engine = "auto"
    layout: StorageLayout = "auto"
    mode: WriteMode = "error"
    partition_by: tuple[str, ...] = ()
    run_id: str | None = None
    data_page_version: Literal[1, 2] = 2

    def __post_init__(self) -> None:
        _check_positive("p", self.p)
        _check_positive("n", self.n)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise MLTTypeError(f"seed must be a whole number; got {self.seed!r}", parameter="seed")
        check_choice("engine", self.engine, ENGINES)
        check_choice("layout", self.layout, STORAGE_LAYOUTS)
        check_choice("mode", self.mode, WRITE_MODES)
        if self.data_page_version not in (1, 2) or isinstance(self.data_page_version, bool):
            raise MLTError(
                f"data_page_version must be 1 or 2; got {self.data_page_version!r}", parameter="data_page_version"
            )
        if self.run_id is not None and not (isinstance(self.run_id, str) and self.run_id.strip()):
            raise MLTError(f"run_id must be a non-empty string or None; got {self.run_id!r}", parameter="run_id")
        object.__setattr__(self, "partition_by", _columns("partition_by", self.partition_by))


@dataclass(frozen=True, kw_only=True)
class MovieLensOptions(JobOptions):
    """Options of :func:`spark_mlt.batch.tokenize_movielens`: those of :class:`JobOptions` and

    Attributes:
        label_threshold: a rating at or above it is labelled 1 (default 4, as the paper's code
            labels MovieLens); recorded in the table property ``mlt.label.rule``.

    Example::

        MovieLensOptions(p=47, n=7, mode="overwrite", label_threshold=4.0)
    """

    label_threshold: float = 4.0  # POSITIVE_RATING of spark_mlt.batch.movielens

    def __post_init__(self) -> None:
        super().__post_init__()
        value = self.label_threshold
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise MLTTypeError(f"label_threshold must be a finite number; got {value!r}", parameter="label_threshold")

    @property
    def label_rule(self) -> str:
        """The label's definition as the table records it, e.g. ``rating >= 4``."""
        return f"rating >= {self.label_threshold:g}"


@dataclass(frozen=True, kw_only=True)
class TokenizeOptions(JobOptions):
    """Options of :func:`spark_mlt.batch.tokenize_table`: those of :class:`JobOptions` and

    Attributes:
        handle_invalid: rows with an invalid id: ``error`` fails the job, ``null`` keeps the row
            with null tokens, ``skip`` drops it (counted in ``rows_rejected``), ``quarantine``
            writes it with a ``mlt_reason`` column to the ``quarantine`` table.
        quarantine: Delta path of the rejected rows (default ``<output>_quarantine``).
        vocabulary_dir: folder of the string keys' vocabularies (default ``<output>_vocab``).
        input_format: ``parquet``, ``csv``, ``json``, ``orc``, ``delta``, or None for a catalog table.
        read_options: options of Spark's reader (csv: ``header`` and ``inferSchema`` default to true).

    Example::

        TokenizeOptions(p=13, n=3, mode="append", handle_invalid="quarantine", input_format="csv")
    """

    handle_invalid: HandleInvalid = "error"
    quarantine: str | None = None
    vocabulary_dir: str | None = None
    input_format: InputFormat | None = "parquet"
    read_options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("handle_invalid", self.handle_invalid, HANDLE_INVALID)
        if self.input_format is not None:
            check_choice("input_format", self.input_format, INPUT_FORMATS)
        if not isinstance(self.read_options, Mapping):
            raise MLTTypeError(f"read_options must be a mapping; got {self.read_options!r}", parameter="read_options")
        object.__setattr__(self, "read_options", {str(k): str(v) for k, v in self.read_options.items()})


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    """Options of :func:`spark_mlt.batch.decode_table`.

    Attributes:
        output: where to write the decoded table (needed unless ``verify``).
        output_format: ``delta`` or ``parquet``.
        mode: ``error``, ``append`` or ``overwrite`` for the output.
        verify: compare the decoded ids with the table's kept id columns instead of writing.
        engine: ``auto``, ``native`` or ``udf``.

    Example::

        DecodeOptions(verify=True)
    """

    output: str | None = None
    output_format: DecodeFormat = "delta"
    mode: WriteMode = "error"
    verify: bool = False
    engine: Engine = "auto"

    def __post_init__(self) -> None:
        check_choice("output_format", self.output_format, DECODE_FORMATS)
        check_choice("mode", self.mode, WRITE_MODES)
        check_choice("engine", self.engine, ENGINES)
        if not isinstance(self.verify, bool):
            raise MLTTypeError(f"verify must be True or False; got {self.verify!r}", parameter="verify")


Options = TypeVar("Options", MovieLensOptions, TokenizeOptions, DecodeOptions)


def options_from_keywords(
    function: str, kind: type[Options], options: Options | None, keywords: Mapping[str, Any]
) -> Options:
    """``options`` (default ``kind()``) with the 0.1 keywords of a job applied on top, with one
    DeprecationWarning naming them (pointing at the job's caller).

    Raises:
        MLTTypeError: a keyword that is no field of ``kind``, or one given under both names.
    """
    base = kind() if options is None else options
    if not isinstance(base, kind):
        raise MLTTypeError(f"options must be a {kind.__name__}; got {type(base).__name__}", parameter="options")
    if not keywords:
        return base
    values: dict[str, Any] = {}
    for name, value in keywords.items():
        target = RENAMED_KEYWORDS.get(name, name)
        if target in values:
            raise MLTTypeError(f"{target}: pass {target}= only ({name}= is its old name)", parameter=target)
        values[target] = value
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise MLTTypeError(
            f"{function}() got unexpected keyword argument(s) {unknown}; {kind.__name__} has {sorted(known)}"
        )
    given = ", ".join(f"{name}=" for name in keywords)
    warnings.warn(
        f"{function}({given}...) is deprecated; pass options={kind.__name__}(...)", DeprecationWarning, stacklevel=3
    )
    return replace(base, **values)
