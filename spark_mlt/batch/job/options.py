"""The job framework's options: the parts every job's options are composed of, and their checks.

A job takes one options object (``tokenize_table(spark, input, output, columns,
TokenizeOptions(p=13, layout="array"))``) instead of a dozen keywords, so the CLI, the
spark-submit scripts, a conf file and Python callers all build the same object, and a bad
value fails before any Spark work, naming the field (``MLTError.parameter``). Each verb's
options live beside it (``write.options``, ``mirror.options``, ``read.options``), composed of
the parts here, each part a group of fields and their checks:

* [`CodecOptions`][spark_mlt.batch.job.options.CodecOptions]: the codec asked for (``p``, ``n``, ``seed``);
* [`OutputOptions`][spark_mlt.batch.job.options.OutputOptions]: the engine and how the table is written;
* [`JobOptions`][spark_mlt.batch.job.options.JobOptions]: both, what every tokenizing job takes;
* [`RunOptions`][spark_mlt.batch.job.options.RunOptions]: a batch run's ``mode``, ``run_id`` and ``dry_run``;
* [`InvalidRowOptions`][spark_mlt.batch.job.options.InvalidRowOptions]: what becomes of invalid rows;
* [`SizingOptions`][spark_mlt.batch.job.options.SizingOptions]: the codecs' room to grow and re-sizing;
* [`TokenizingOptions`][spark_mlt.batch.job.options.TokenizingOptions]: the last three and the first
  two, what tokenizing rows takes (the batch job's and the sync's);
* [`RetentionOptions`][spark_mlt.batch.job.options.RetentionOptions]: which files a vacuum or an
  erasure deletes, and whether it does.

A verb takes the parts it has and no other (a sync has no ``mode``: nothing is refused), and
its own fields. Each field carries its help in ``metadata["help"]``: the ``spark-mlt``
command derives its flags and conf keys from the fields
(`spark_mlt.batch.cli`: flag ``--data-page-version`` = field
``data_page_version`` = conf key ``data_page_version``), so a field is declared once.

A write setting (``mode``, ``run_id``, ``data_page_version``) is checked by storage's own
checker ([`spark_mlt.storage.check_mode`][spark_mlt.storage.check_mode], ...), the one ``write_delta`` calls: the same
bad value gives the same error, whether a job or a direct write got it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from spark_mlt.codec import DEFAULT_SEED
from spark_mlt.codec.modmath import is_prime, next_prime
from spark_mlt.column.layouts import STORAGE_LAYOUTS, StorageLayout
from spark_mlt.column.sizing import DEFAULT_HEADROOM
from spark_mlt.errors import MLTError, MLTTypeError
from spark_mlt.options import ENGINES, HANDLE_INVALID, Engine, HandleInvalid, check_choice
from spark_mlt.storage import (
    WRITE_MODES,
    DataPageVersion,
    StorageOptions,
    WriteMode,
    check_data_page_version,
    check_mode,
    check_retention,
    check_run_id,
)

__all__ = [
    "AVAILABLE_NOW",
    "ENGINE_HELP",
    "INPUT_FORMATS",
    "NO_ROOM",
    "WRITE_MODES",
    "CodecOptions",
    "InputFormat",
    "InvalidRowOptions",
    "JobOptions",
    "OutputOptions",
    "RetentionOptions",
    "RunOptions",
    "SizingOptions",
    "TokenizingOptions",
    "WriteMode",
    "check_flag",
    "check_positive",
    "column_names",
    "hint",
    "part_values",
    "quarantine_field",
    "quarantine_path",
    "rejected_limit",
    "sizing_of",
    "storage_field",
    "trigger_seconds",
]

#: The help of every job's ``engine`` option (``--engine``).
ENGINE_HELP = (
    "the column engine: jvm (spark-mlt's jar), native (Spark SQL expressions), udf (vectorised Python UDFs), "
    "or auto: the jar where the session has it, else native or udf by the query's shape (docs: Concepts, Engines)"
)

#: How the tokenize job reads its input: a file format, ``table`` (a catalog table's name), or
#: ``auto``: ``delta`` for a Delta table's folder, else ``parquet`` (`spark_mlt.batch.job.inputs`).
InputFormat = Literal["auto", "parquet", "csv", "json", "orc", "delta", "table"]
INPUT_FORMATS: tuple[InputFormat, ...] = get_args(InputFormat)

#: The trigger of a stream that takes what is there now, then stops.
AVAILABLE_NOW = "available-now"
#: A processing-time interval: a number and its unit.
_INTERVAL = re.compile(r"(\d+(?:\.\d+)?) *(ms|milliseconds?|s|seconds?|min|minutes?|h|hours?)")
#: Seconds per interval unit, by the unit's first letters (``ms`` before ``m``).
_UNIT_SECONDS = (("ms", 0.001), ("milli", 0.001), ("min", 60.0), ("h", 3600.0), ("s", 1.0))


def quarantine_path(output: str, quarantine: str | None = None) -> str:
    """Where a job puts the rows it rejects: ``quarantine``, or by default beside ``output``.

    Example::

        >>> quarantine_path("/lake/orders_mlt/")
        '/lake/orders_mlt_quarantine'
    """
    return quarantine or f"{output.rstrip('/')}_quarantine"


def trigger_seconds(trigger: str) -> float | None:
    """The interval of a stream's trigger in seconds (``30 seconds``, ``2 min``, ``500 ms``), or
    None for ``available-now``.

    Raises:
        MLTError: ``trigger`` is neither, naming ``trigger``.

    Example::

        >>> trigger_seconds("2 min"), trigger_seconds("available-now")
        (120.0, None)
    """
    if trigger == AVAILABLE_NOW:
        return None
    found = _INTERVAL.fullmatch(trigger.strip()) if isinstance(trigger, str) else None
    if found is None:
        raise MLTError(
            f"trigger must be {AVAILABLE_NOW!r} or an interval such as '30 seconds'; got {trigger!r}",
            parameter="trigger",
        )
    number, unit = float(found.group(1)), found.group(2)
    return number * next(seconds for prefix, seconds in _UNIT_SECONDS if unit.startswith(prefix))


def rejected_limit(value: int | str | None) -> tuple[int | None, float | None]:
    """The most rejected rows of ``max_rejected``: a count (``100``, ``"100"``) or a share of the
    run's rows (``"0.1%"``), as ``(count, None)`` or ``(None, share)``; ``(None, None)`` for no limit.

    Raises:
        MLTError: naming ``max_rejected``, for anything else.

    Example::

        >>> rejected_limit("0.5%"), rejected_limit(10)
        ((None, 0.005), (10, None))
    """
    if value is None:
        return None, None
    text = str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else None
    if text is not None and re.fullmatch(r"\d+", text):
        return int(text), None
    if text is not None and re.fullmatch(r"\d+(\.\d+)?%", text) and float(text[:-1]) <= 100:
        return None, float(text[:-1]) / 100
    raise MLTError(
        f"max_rejected must be a count of rows (100) or a share of the run's rows (0.1%); got {value!r}",
        parameter="max_rejected",
    )


def hint(text: str) -> dict[str, Any]:
    """A field's metadata: its help, which the CLI prints for its flag."""
    return {"help": text}


def check_positive(name: str, value: int | None) -> None:
    """Refuses ``value`` unless it is None or a positive whole number, naming ``name``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise MLTError(f"{name} must be a positive whole number or None; got {value!r}", parameter=name)


def check_flag(name: str, value: Any) -> None:
    """Refuses ``value`` unless it is True or False, naming ``name``."""
    if not isinstance(value, bool):
        raise MLTTypeError(f"{name} must be True or False; got {value!r}", parameter=name)


_STORAGE_OPTIONS_HELP = (
    "settings of the tables' object store, KEY=VALUE with delta-rs' names (AWS_ENDPOINT_URL=..., "
    "AWS_REGION=..., AWS_ALLOW_HTTP=true); the environment fills the gaps. For delta-rs and the driver's "
    "file work; a local session also gets the matching fs.s3a settings. Never written to a table or a log"
)


def storage_field() -> Any:
    """The ``storage_options`` field of a job's options (a mapping, checked as `StorageOptions`)."""
    return field(default_factory=StorageOptions, metadata=hint(_STORAGE_OPTIONS_HELP))


def quarantine_field() -> Any:
    """The ``quarantine`` field of a command that reads a mirror's quarantine (None: beside it)."""
    return field(default=None, metadata=hint("the mirror's quarantine table (default: <input>_quarantine)"))


def column_names(name: str, value: str | Sequence[str]) -> tuple[str, ...]:
    """A tuple of column names from a sequence, or one name."""
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise MLTTypeError(f"{name} must be column names; got {value!r}", parameter=name)
    return names


class _Part:
    """The root of the option parts: each part's ``__post_init__`` checks its own fields, then
    hands on to the next part of the options (cooperatively, in the class's order)."""

    def __post_init__(self) -> None:
        """Nothing is left to check at the root."""


@dataclass(frozen=True, kw_only=True)
class CodecOptions(_Part):
    """The codec a job is asked for; unset fields are sized from the data.

    Example::

        CodecOptions(p=13, n=3)
    """

    p: int | None = field(
        default=None,
        metadata=hint(
            "the codec's prime (default: sized from the data, p^n > largest id); ignored for a column "
            "the existing table already has a codec for"
        ),
    )
    n: int | None = field(default=None, metadata=hint("tokens per id (default: sized from the data)"))
    seed: int = field(default=DEFAULT_SEED, metadata=hint("seed of the codec's matrix draw"))

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("p", self.p)
        if self.p is not None and not is_prime(self.p):  # refused before any Spark work, as every option
            raise MLTError(
                f"p must be prime; got {self.p} (the nearest prime above is {next_prime(self.p)})", parameter="p"
            )
        check_positive("n", self.n)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise MLTTypeError(f"seed must be a whole number; got {self.seed!r}", parameter="seed")


@dataclass(frozen=True, kw_only=True)
class OutputOptions(_Part):
    """The column engine and how a job's table is written.

    Example::

        OutputOptions(layout="array", partition_by=("day",))
    """

    engine: Engine = field(default="auto", metadata=hint(ENGINE_HELP))
    layout: StorageLayout = field(
        default="auto",
        metadata=hint(
            "how token columns are stored: packed in one bigint, or array<int> (auto: an existing "
            "table's layout, else packed when the tokens fit in 64 bits)"
        ),
    )
    partition_by: tuple[str, ...] = field(default=(), metadata=hint("partition columns of a new table (a b, or a,b)"))
    data_page_version: DataPageVersion = field(
        default=2,
        metadata=hint(
            "Parquet data page version of the written files (2: smaller token columns, faster writes; "
            "1 for readers without v2 page support)"
        ),
    )
    storage_options: Mapping[str, str] = storage_field()
    drop_ids: bool = field(
        default=False,
        metadata=hint(
            "leave the raw id columns out of the output: only their tokens are written (they still decode, "
            "with the table's properties and vocabularies; tokens are no pseudonyms). A mirror keeps its key"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        check_flag("drop_ids", self.drop_ids)
        check_choice("engine", self.engine, ENGINES)
        check_choice("layout", self.layout, STORAGE_LAYOUTS)
        check_data_page_version(self.data_page_version)
        object.__setattr__(self, "partition_by", column_names("partition_by", self.partition_by))


@dataclass(frozen=True, kw_only=True)
class JobOptions(OutputOptions, CodecOptions):
    """The options every tokenizing job takes: the codec, the engine, how the table is written.

    Each field's ``metadata["help"]`` says what it does (``spark-mlt <job> --help`` prints it).

    Example::

        JobOptions(p=13, n=3, layout="packed")
    """


@dataclass(frozen=True, kw_only=True)
class RunOptions(_Part):
    """How a batch run writes: into a new table, appending or overwriting; once per run id; or
    not at all (a dry run).

    Example::

        RunOptions(mode="append", run_id="2026-11-22")
    """

    mode: WriteMode = field(default="error", metadata=hint("error (the table must not exist), append or overwrite"))
    run_id: str | None = field(
        default=None,
        metadata=hint(
            "idempotency key, e.g. the scheduler's run date: a run id the table already holds is not "
            "written again (the job reports it and succeeds)"
        ),
    )
    dry_run: bool = field(
        default=False,
        metadata=hint(
            "size the codecs and layouts a run would write (one pass over the input), report them and "
            "stop: nothing is written, vocabularies included"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_flag("dry_run", self.dry_run)
        check_mode(self.mode)
        check_run_id(self.run_id)


@dataclass(frozen=True, kw_only=True)
class InvalidRowOptions(_Part):
    """What becomes of the rows whose id a codec cannot take, and where a job keeps the string
    keys' vocabularies.

    Example::

        InvalidRowOptions(handle_invalid="quarantine", max_rejected="0.1%")
    """

    handle_invalid: HandleInvalid = field(
        default="error",
        metadata=hint(
            "rows with an invalid id: fail (error), null tokens (null), drop and count them (skip), or "
            "write them with a mlt_reason column to the quarantine table (quarantine)"
        ),
    )
    quarantine: str | None = field(
        default=None, metadata=hint("Delta path of the rejected rows (default: <output>_quarantine)")
    )
    vocabulary_dir: str | None = field(
        default=None, metadata=hint("folder of the string keys' vocabularies (default: <output>_vocab)")
    )
    max_rejected: int | str | None = field(
        default=None,
        metadata=hint(
            "the most rows skip or quarantine may reject in a run: a count (100) or a share of its rows (0.1%); "
            "past it the run still commits its rows and quarantine, then fails (exit 4). Default: no limit"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("handle_invalid", self.handle_invalid, HANDLE_INVALID)
        rejected_limit(self.max_rejected)


@dataclass(frozen=True, kw_only=True)
class SizingOptions(_Part):
    """The room a codec is sized with, and whether a run sizes its codecs afresh (which the
    verb allows only where it rewrites every row).

    Example::

        SizingOptions(headroom=4.0)
    """

    headroom: float = field(
        default=DEFAULT_HEADROOM,
        metadata=hint(
            "room for ids to come when a codec is sized: it holds this many times the ids there are at the first "
            "run (a string key's vocabulary, or the largest id), so that years of growth and churn fit"
        ),
    )
    resize: bool = field(
        default=False,
        metadata=hint(
            "size the codecs afresh (from --p/--n or --headroom) and re-tokenize every row: with --mode overwrite "
            "(tokenize) or --full-refresh (sync), when ids outgrow a codec; older versions keep their codec"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        room = self.headroom
        if isinstance(room, bool) or not isinstance(room, int | float) or not math.isfinite(room) or room < 1:
            raise MLTError(f"headroom must be a number >= 1 (1: no room); got {room!r}", parameter="headroom")
        check_flag("resize", self.resize)


@dataclass(frozen=True, kw_only=True)
class TokenizingOptions(SizingOptions, InvalidRowOptions, JobOptions):
    """What tokenizing a table's rows takes, whether in a batch run or in a mirror's sync: the
    codec and table ([`JobOptions`][spark_mlt.batch.job.options.JobOptions]), the invalid rows
    ([`InvalidRowOptions`][spark_mlt.batch.job.options.InvalidRowOptions]) and the codecs' sizing
    ([`SizingOptions`][spark_mlt.batch.job.options.SizingOptions]).

    Example::

        TokenizingOptions(handle_invalid="quarantine", headroom=4.0)
    """


@dataclass(frozen=True, kw_only=True)
class RetentionOptions(_Part):
    """Which of a table's files a vacuum or an erasure deletes: those no version younger than
    ``retention_hours`` needs; and whether it deletes them (``apply``) or only lists them.

    Example::

        RetentionOptions(retention_hours=24, apply=True)
    """

    retention_hours: float | None = field(
        default=None,
        metadata=hint(
            "keep files younger than this (default: the table's delta.deletedFileRetentionDuration, "
            "168 hours unless it sets one)"
        ),
    )
    apply: bool = field(default=False, metadata=hint("delete the files (default: only list them)"))
    allow_short_retention: bool = field(
        default=False,
        metadata=hint(
            "let --apply delete with a --retention-hours shorter than a table's own, files that time travel and "
            "running readers still need included (Delta's retentionDurationCheck off; refused without it)"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_retention(self.retention_hours)
        check_flag("apply", self.apply)
        check_flag("allow_short_retention", self.allow_short_retention)


#: The sizing of a job without a sizing of its own (the MovieLens job): no room, no re-size.
NO_ROOM = SizingOptions(headroom=1.0)


def sizing_of(options: JobOptions) -> SizingOptions:
    """How ``options`` size their codecs: their own sizing where they have one, else `NO_ROOM`.

    Example::

        >>> sizing_of(JobOptions()).headroom
        1.0
    """
    return options if isinstance(options, SizingOptions) else NO_ROOM


def part_values(options: Any, *parts: type[_Part]) -> dict[str, Any]:
    """The values of ``options``' fields that ``parts`` declare, by name: what one verb's
    options hand to another's that share those parts.

    Example::

        >>> part_values(JobOptions(p=13), CodecOptions)
        {'p': 13, 'n': None, 'seed': 42}
    """
    return {f.name: getattr(options, f.name) for part in parts for f in dataclasses.fields(part)}  # type: ignore[arg-type]
