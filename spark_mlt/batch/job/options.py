"""The options of the batch jobs, as frozen dataclasses checked when built.

A job takes one options object (``tokenize_table(spark, input, output, columns,
TokenizeOptions(p=13, layout="array"))``) instead of a dozen keywords, so the CLI, the
spark-submit scripts, a conf file and Python callers all build the same object, and a bad
value fails before any Spark work, naming the field (``MLTError.parameter``).

Each field carries its help in ``metadata["help"]``: the ``spark-mlt`` command derives its
flags and conf keys from the fields ([`spark_mlt.batch.cli`][spark_mlt.batch.cli]: flag ``--data-page-version``
= field ``data_page_version`` = conf key ``data_page_version``), so a field is declared once.

A write setting (``mode``, ``run_id``, ``data_page_version``) is checked by storage's own
checker ([`spark_mlt.storage.check_mode`][spark_mlt.storage.check_mode], ...), the one ``write_delta`` calls: the same
bad value gives the same error, whether a job or a direct write got it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from spark_mlt.codec import DEFAULT_SEED
from spark_mlt.codec.modmath import is_prime, next_prime
from spark_mlt.column.layouts import STORAGE_LAYOUTS, StorageLayout
from spark_mlt.column.sizing import DEFAULT_HEADROOM
from spark_mlt.errors import MLTError, MLTTypeError, OptionError
from spark_mlt.options import ENGINES, HANDLE_INVALID, Engine, HandleInvalid, check_choice
from spark_mlt.storage import (
    WRITE_MODES,
    DataPageVersion,
    StorageOptions,
    WriteMode,
    check_data_page_version,
    check_mode,
    check_run_id,
)

__all__ = [
    "DECODE_FORMATS",
    "INPUT_FORMATS",
    "WRITE_MODES",
    "DecodeOptions",
    "JobOptions",
    "MovieLensOptions",
    "PublishOptions",
    "StreamOptions",
    "SyncOptions",
    "TokenizeOptions",
    "WriteMode",
    "quarantine_path",
    "rejected_limit",
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
DecodeFormat = Literal["delta", "parquet"]
DECODE_FORMATS: tuple[DecodeFormat, ...] = get_args(DecodeFormat)

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


def _help(text: str) -> dict[str, Any]:
    """A field's metadata: its help, which the CLI prints for its flag."""
    return {"help": text}


def _check_positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise MLTError(f"{name} must be a positive whole number or None; got {value!r}", parameter=name)


_STORAGE_OPTIONS_HELP = (
    "settings of the tables' object store, KEY=VALUE with delta-rs' names (AWS_ENDPOINT_URL=..., "
    "AWS_REGION=..., AWS_ALLOW_HTTP=true); the environment fills the gaps. For delta-rs and the driver's "
    "file work; a local session also gets the matching fs.s3a settings. Never written to a table or a log"
)


def _storage_field() -> Any:
    return field(default_factory=StorageOptions, metadata=_help(_STORAGE_OPTIONS_HELP))


def _columns(name: str, value: str | Sequence[str]) -> tuple[str, ...]:
    """A tuple of column names from a sequence, or one name."""
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise MLTTypeError(f"{name} must be column names; got {value!r}", parameter=name)
    return names


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """The options every tokenizing job takes: the codec, the engine, how the table is written.

    Each field's ``metadata["help"]`` says what it does (``spark-mlt <job> --help`` prints it).

    Example::

        JobOptions(p=13, n=3, mode="append", run_id="2026-11-22")
    """

    p: int | None = field(
        default=None,
        metadata=_help(
            "the codec's prime (default: sized from the data, p^n > largest id); ignored for a column "
            "the existing table already has a codec for"
        ),
    )
    n: int | None = field(default=None, metadata=_help("tokens per id (default: sized from the data)"))
    seed: int = field(default=DEFAULT_SEED, metadata=_help("seed of the codec's matrix draw"))
    engine: Engine = field(default="auto", metadata=_help(ENGINE_HELP))
    layout: StorageLayout = field(
        default="auto",
        metadata=_help(
            "how token columns are stored: packed in one bigint, or array<int> (auto: an existing "
            "table's layout, else packed when the tokens fit in 64 bits)"
        ),
    )
    mode: WriteMode = field(default="error", metadata=_help("error (the table must not exist), append or overwrite"))
    partition_by: tuple[str, ...] = field(default=(), metadata=_help("partition columns of a new table (a b, or a,b)"))
    run_id: str | None = field(
        default=None,
        metadata=_help(
            "idempotency key, e.g. the scheduler's run date: a run id the table already holds is not "
            "written again (the job reports it and succeeds)"
        ),
    )
    data_page_version: DataPageVersion = field(
        default=2,
        metadata=_help(
            "Parquet data page version of the written files (2: smaller token columns, faster writes; "
            "1 for readers without v2 page support)"
        ),
    )
    storage_options: Mapping[str, str] = _storage_field()
    dry_run: bool = field(
        default=False,
        metadata=_help(
            "size the codecs and layouts a run would write (one pass over the input), report them and "
            "stop: nothing is written, vocabularies included"
        ),
    )
    drop_ids: bool = field(
        default=False,
        metadata=_help(
            "leave the raw id columns out of the output: only their tokens are written (they still decode, "
            "with the table's properties and vocabularies; tokens are no pseudonyms). A mirror keeps its key"
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        for name in ("dry_run", "drop_ids"):
            if not isinstance(getattr(self, name), bool):
                raise MLTTypeError(f"{name} must be True or False; got {getattr(self, name)!r}", parameter=name)
        _check_positive("p", self.p)
        if self.p is not None and not is_prime(self.p):  # refused before any Spark work, as every option
            raise MLTError(
                f"p must be prime; got {self.p} (the nearest prime above is {next_prime(self.p)})", parameter="p"
            )
        _check_positive("n", self.n)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise MLTTypeError(f"seed must be a whole number; got {self.seed!r}", parameter="seed")
        check_choice("engine", self.engine, ENGINES)
        check_choice("layout", self.layout, STORAGE_LAYOUTS)
        check_mode(self.mode)
        check_data_page_version(self.data_page_version)
        check_run_id(self.run_id)
        object.__setattr__(self, "partition_by", _columns("partition_by", self.partition_by))


@dataclass(frozen=True, kw_only=True)
class MovieLensOptions(JobOptions):
    """Options of [`tokenize_movielens`][spark_mlt.batch.write.movielens.tokenize_movielens]: those
    of [`JobOptions`][spark_mlt.batch.job.options.JobOptions] and the label's threshold, recorded in the
    table property ``mlt.label.rule``.

    Example::

        MovieLensOptions(p=47, n=7, mode="overwrite", label_threshold=4.0)
    """

    label_threshold: float = field(
        default=4.0,  # POSITIVE_RATING of spark_mlt.batch.write.movielens
        metadata=_help("label = rating >= this (4: the paper's code); recorded in the table as mlt.label.rule"),
    )

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
    """Options of [`tokenize_table`][spark_mlt.batch.write.tokenize.tokenize_table]: those of
    [`JobOptions`][spark_mlt.batch.job.options.JobOptions] and how the input is read and its invalid
    rows handled.

    Example::

        TokenizeOptions(p=13, n=3, mode="append", handle_invalid="quarantine", input_format="csv")
    """

    handle_invalid: HandleInvalid = field(
        default="error",
        metadata=_help(
            "rows with an invalid id: fail (error), null tokens (null), drop and count them (skip), or "
            "write them with a mlt_reason column to the quarantine table (quarantine)"
        ),
    )
    quarantine: str | None = field(
        default=None, metadata=_help("Delta path of the rejected rows (default: <output>_quarantine)")
    )
    vocabulary_dir: str | None = field(
        default=None, metadata=_help("folder of the string keys' vocabularies (default: <output>_vocab)")
    )
    input_format: InputFormat = field(
        default="auto",
        metadata=_help(
            "the input's format: a file format, delta, table (input is a catalog table's name), or auto: delta for "
            "a Delta table's folder, else parquet. A Delta table (or a folder inside one) is never read as files: "
            "they include the ones its commits removed"
        ),
    )
    read_options: Mapping[str, str] = field(
        default_factory=dict,
        metadata=_help("options of Spark's reader, key=value (csv: header and inferSchema default to true)"),
    )
    max_rejected: int | str | None = field(
        default=None,
        metadata=_help(
            "the most rows skip or quarantine may reject in a run: a count (100) or a share of its rows (0.1%); "
            "past it the run still commits its rows and quarantine, then fails (exit 4). Default: no limit"
        ),
    )
    headroom: float = field(
        default=DEFAULT_HEADROOM,
        metadata=_help(
            "room for ids to come when a codec is sized: it holds this many times the ids there are at the first "
            "run (a string key's vocabulary, or the largest id), so that years of growth and churn fit"
        ),
    )
    resize: bool = field(
        default=False,
        metadata=_help(
            "size the codecs afresh (from --p/--n or --headroom) and re-tokenize every row: with --mode overwrite "
            "(tokenize) or --full-refresh (sync), when ids outgrow a codec; older versions keep their codec"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("handle_invalid", self.handle_invalid, HANDLE_INVALID)
        rejected_limit(self.max_rejected)
        room = self.headroom
        if isinstance(room, bool) or not isinstance(room, int | float) or not math.isfinite(room) or room < 1:
            raise MLTError(f"headroom must be a number >= 1 (1: no room); got {room!r}", parameter="headroom")
        if not isinstance(self.resize, bool):
            raise MLTTypeError(f"resize must be True or False; got {self.resize!r}", parameter="resize")
        check_choice("input_format", self.input_format, INPUT_FORMATS)
        if not isinstance(self.read_options, Mapping):
            raise MLTTypeError(f"read_options must be a mapping; got {self.read_options!r}", parameter="read_options")
        object.__setattr__(self, "read_options", {str(k): str(v) for k, v in self.read_options.items()})
        if self.resize and not self._rewrites_every_row():
            raise MLTError(
                f"resize re-tokenizes every row: pass {self._REWRITE} with it (a table's rows hold one codec)",
                parameter="resize",
            )

    #: What rewrites every row of the output, which ``resize`` needs.
    _REWRITE: ClassVar[str] = "mode='overwrite'"

    def _rewrites_every_row(self) -> bool:
        return self.mode == "overwrite"


@dataclass(frozen=True, kw_only=True)
class StreamOptions:
    """How [`spark_mlt.batch.write.stream.tokenize_stream`][spark_mlt.batch.write.stream.tokenize_stream] follows
    its input, beside the [`TokenizeOptions`][spark_mlt.batch.job.options.TokenizeOptions] each of its
    batches is tokenized with. A job picks the stream at its boundary (``spark-mlt tokenize
    --stream``), so the batch path never sees these fields.

    Example::

        StreamOptions(checkpoint="chk/orders", trigger="30 seconds", max_files_per_trigger=10)
    """

    checkpoint: str = field(metadata=_help("the stream's checkpoint folder: one per output table and stream"))
    trigger: str = field(
        default=AVAILABLE_NOW,
        metadata=_help(
            "when a stream runs its batches: available-now (everything there now, then stop: the scheduled "
            "form) or an interval such as '30 seconds' (continuous)"
        ),
    )
    schema: str | None = field(
        default=None,
        metadata=_help("the streamed files' schema, DDL ('id bigint, sku string'; default: read from the files there)"),
    )
    max_files_per_trigger: int | None = field(
        default=None, metadata=_help("most new files a stream's batch takes (default: Spark's, all)")
    )

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoint, str) or not self.checkpoint:
            raise MLTError(
                f"checkpoint: a stream needs a checkpoint folder; got {self.checkpoint!r}", parameter="checkpoint"
            )
        trigger_seconds(self.trigger)
        _check_positive("max_files_per_trigger", self.max_files_per_trigger)

    @property
    def interval(self) -> float | None:
        """The seconds between the stream's batches, or None for ``available-now``."""
        return trigger_seconds(self.trigger)


@dataclass(frozen=True, kw_only=True)
class SyncOptions(TokenizeOptions):
    """Options of [`spark_mlt.batch.mirror.sync.sync_table`][spark_mlt.batch.mirror.sync.sync_table]: those of
    [`TokenizeOptions`][spark_mlt.batch.job.options.TokenizeOptions] (the mirror is tokenized as the
    batch job tokenizes), the source's primary key, and when the sync runs. The input is a Delta
    table (a path, or a catalog table's name with ``input_format="table"``) with its change data
    feed on.

    Example::

        SyncOptions(key=("customer_id",), handle_invalid="quarantine", trigger="5 minutes")
    """

    #: The batch settings a sync refuses (each commit is idempotent by its source version): no
    #: flags of ``spark-mlt sync``.
    NOT_FLAGS: ClassVar[tuple[str, ...]] = ("mode", "run_id", "dry_run", "read_options")

    input_format: InputFormat = field(
        default="delta", metadata=_help("delta (input is a Delta table's path) or table (a catalog table's name)")
    )
    key: tuple[str, ...] = field(
        default=(),
        metadata=_help("the source's primary key column(s): one row per key, never null (a b, or a,b)"),
    )
    trigger: str = field(
        default=AVAILABLE_NOW,
        metadata=_help(
            "when the sync runs: available-now (up to the source's latest version, then stop: the scheduled "
            "form) or an interval such as '5 minutes' (continuous)"
        ),
    )
    file_rows: int = field(
        default=1_000_000,
        metadata=_help(
            "the most rows a mirror file holds (each file a range of keys): a window rewrites the files of its "
            "keys, so smaller files make a window cheaper and reads of the mirror dearer"
        ),
    )
    full_refresh: bool = field(
        default=False,
        metadata=_help(
            "rebuild the mirror (and its quarantine) from the source's latest version in one commit, "
            "instead of applying the changes since the version it holds"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "key", _columns("key", self.key))
        if not self.key:
            raise MLTError("key: a sync needs the source's primary key column(s); got none", parameter="key")
        if self.input_format not in ("delta", "table"):
            raise MLTError(
                f"input_format: a sync follows a Delta table's change data feed (delta, or table for a catalog "
                f"table); got {self.input_format!r}",
                parameter="input_format",
            )
        if not isinstance(self.full_refresh, bool):
            raise MLTTypeError(
                f"full_refresh must be True or False; got {self.full_refresh!r}", parameter="full_refresh"
            )
        trigger_seconds(self.trigger)
        rows = self.file_rows
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise MLTError(
                f"file_rows: the most rows a mirror file holds must be a positive whole number; got {rows!r}",
                parameter="file_rows",
            )
        for name, refused in (
            ("mode", self.mode != "error"),
            ("run_id", self.run_id is not None),
            ("dry_run", self.dry_run),
        ):
            if refused:
                raise MLTError(
                    f"{name}: a sync creates or updates its mirror, each commit idempotent by the source version it "
                    f"reaches; {name} is for batch runs",
                    parameter=name,
                )

    _REWRITE: ClassVar[str] = "full_refresh=True"

    def _rewrites_every_row(self) -> bool:
        return self.full_refresh

    @property
    def interval(self) -> float | None:
        """The seconds between syncs, or None for ``available-now``."""
        return trigger_seconds(self.trigger)


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    """Options of [`decode_table`][spark_mlt.batch.read.decode.decode_table].

    Example::

        DecodeOptions(verify=True)
    """

    output: str | None = field(default=None, metadata=_help("where to write the decoded table (needed unless verify)"))
    output_format: DecodeFormat = field(default="delta", metadata=_help("the decoded table's format"))
    mode: WriteMode = field(default="error", metadata=_help("error (output must not exist), append or overwrite"))
    verify: bool = field(
        default=False,
        metadata=_help("compare the decoded ids with the table's kept id columns instead of writing; 0 mismatches"),
    )
    engine: Engine = field(default="auto", metadata=_help(ENGINE_HELP))
    storage_options: Mapping[str, str] = _storage_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        check_choice("output_format", self.output_format, DECODE_FORMATS)
        check_mode(self.mode)
        check_choice("engine", self.engine, ENGINES)
        if not isinstance(self.verify, bool):
            raise MLTTypeError(f"verify must be True or False; got {self.verify!r}", parameter="verify")


#: a catalog schema's or object name's part
_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class PublishOptions:
    """What [`publish_table`][spark_mlt.batch.read.publish.publish_table] creates, and where.

    Attributes:
        schema: the catalog schema (``analytics``, or ``catalog.analytics``) the objects go in;
            it must exist.
        prefix: the objects' names start with it (default: the table's name).
        functions: create the SQL functions (Spark 4.0 and later).
        view: create the view.
        print_only: return the statements, run nothing.
        storage_options: the table's store's settings.
    """

    schema: str = field(metadata=_help("the catalog schema the functions and view go in (it must exist)"))
    prefix: str | None = field(
        default=None, metadata=_help("the start of the objects' names (default: the table's name)")
    )
    functions: bool = field(default=True, metadata=_help("create the decode and encode SQL functions"))
    view: bool = field(default=True, metadata=_help("create the decoded view"))
    print_only: bool = field(default=False, metadata=_help("print the DDL, run nothing"))
    storage_options: Mapping[str, str] = _storage_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
        parts = self.schema.split(".") if isinstance(self.schema, str) else []
        if not 1 <= len(parts) <= 2 or not all(_CATALOG_NAME.fullmatch(part) for part in parts):
            raise OptionError(
                f"schema must be a schema's name (analytics, or catalog.analytics: letters, digits, _), "
                f"got {self.schema!r}",
                parameter="schema",
            )
        if self.prefix is not None and not _CATALOG_NAME.fullmatch(self.prefix):
            raise OptionError(
                f"prefix must be a plain name (letters, digits, _; not starting with a digit), got {self.prefix!r}",
                parameter="prefix",
            )
        if not (self.functions or self.view):
            raise OptionError("nothing to create: functions and view are both off", parameter="functions")
