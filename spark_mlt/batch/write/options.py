"""The options of the writing jobs: the MovieLens job, the tokenize job and its stream.

Each is composed of the job framework's parts ([`spark_mlt.batch.job.options`][spark_mlt.batch.job.options])
and its own fields; ``spark-mlt`` derives the command's flags from them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_mlt.batch.job.inputs import input_format_of
from spark_mlt.batch.job.options import (
    AVAILABLE_NOW,
    INPUT_FORMATS,
    InputFormat,
    JobOptions,
    RunOptions,
    TokenizingOptions,
    check_positive,
    hint,
    trigger_seconds,
)
from spark_mlt.errors import MLTError, MLTTypeError
from spark_mlt.options import check_choice

__all__ = ["BatchOptions", "MovieLensOptions", "StreamOptions", "TokenizeOptions", "resolve_input"]


@dataclass(frozen=True, kw_only=True)
class MovieLensOptions(RunOptions, JobOptions):
    """Options of [`tokenize_movielens`][spark_mlt.batch.write.movielens.tokenize_movielens]: the
    codec and table of [`JobOptions`][spark_mlt.batch.job.options.JobOptions], a batch run's
    [`RunOptions`][spark_mlt.batch.job.options.RunOptions] and the label's threshold, recorded in the
    table property ``mlt.label.rule``.

    Example::

        MovieLensOptions(p=47, n=7, mode="overwrite", label_threshold=4.0)
    """

    label_threshold: float = field(
        default=4.0,  # POSITIVE_RATING of spark_mlt.batch.write.movielens
        metadata=hint("label = rating >= this (4: the paper's code); recorded in the table as mlt.label.rule"),
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
class TokenizeOptions(RunOptions, TokenizingOptions):
    """Options of [`tokenize_table`][spark_mlt.batch.write.tokenize.tokenize_table]: what
    tokenizing rows takes ([`TokenizingOptions`][spark_mlt.batch.job.options.TokenizingOptions]:
    the codec, the table, invalid rows, the codecs' sizing), a batch run's
    [`RunOptions`][spark_mlt.batch.job.options.RunOptions] and how the input is read.

    Example::

        TokenizeOptions(p=13, n=3, mode="append", handle_invalid="quarantine", input_format="csv")
    """

    input_format: InputFormat = field(
        default="auto",
        metadata=hint(
            "the input's format: a file format, delta, table (input is a catalog table's name), or auto: delta for "
            "a Delta table's folder, else parquet. A Delta table (or a folder inside one) is never read as files: "
            "they include the ones its commits removed"
        ),
    )
    read_options: Mapping[str, str] = field(
        default_factory=dict,
        metadata=hint("options of Spark's reader, key=value (csv: header and inferSchema default to true)"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("input_format", self.input_format, INPUT_FORMATS)
        if not isinstance(self.read_options, Mapping):
            raise MLTTypeError(f"read_options must be a mapping; got {self.read_options!r}", parameter="read_options")
        object.__setattr__(self, "read_options", {str(k): str(v) for k, v in self.read_options.items()})
        if self.resize and self.mode != "overwrite":
            raise MLTError(
                "resize re-tokenizes every row: pass mode='overwrite' with it (a table's rows hold one codec)",
                parameter="resize",
            )


def resolve_input(input: str, options: TokenizeOptions) -> TokenizeOptions:
    """``options`` with the format ``input`` is read with
    ([`input_format_of`][spark_mlt.batch.job.inputs.input_format_of]): a job resolves it once, at its
    start, and every step after it reads a concrete format.

    Raises:
        InputFormatError: as ``input_format_of``.

    Example::

        options = resolve_input("/lake/orders", TokenizeOptions())  # input_format="delta"
    """
    found = input_format_of(input, options.input_format, storage_options=options.storage_options)
    return options if found == options.input_format else dataclasses.replace(options, input_format=found)


@dataclass(frozen=True, kw_only=True)
class StreamOptions:
    """How [`spark_mlt.batch.write.stream.tokenize_stream`][spark_mlt.batch.write.stream.tokenize_stream] follows
    its input, beside the [`TokenizeOptions`][spark_mlt.batch.write.options.TokenizeOptions] each of its
    batches is tokenized with. A job picks the stream at its boundary (``spark-mlt tokenize
    --stream``), so the batch path never sees these fields.

    Example::

        StreamOptions(checkpoint="chk/orders", trigger="30 seconds", max_files_per_trigger=10)
    """

    checkpoint: str = field(metadata=hint("the stream's checkpoint folder: one per output table and stream"))
    trigger: str = field(
        default=AVAILABLE_NOW,
        metadata=hint(
            "when a stream runs its batches: available-now (everything there now, then stop: the scheduled "
            "form) or an interval such as '30 seconds' (continuous)"
        ),
    )
    schema: str | None = field(
        default=None,
        metadata=hint("the streamed files' schema, DDL ('id bigint, sku string'; default: read from the files there)"),
    )
    max_files_per_trigger: int | None = field(
        default=None, metadata=hint("most new files a stream's batch takes (default: Spark's, all)")
    )

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoint, str) or not self.checkpoint:
            raise MLTError(
                f"checkpoint: a stream needs a checkpoint folder; got {self.checkpoint!r}", parameter="checkpoint"
            )
        trigger_seconds(self.trigger)
        check_positive("max_files_per_trigger", self.max_files_per_trigger)

    @property
    def interval(self) -> float | None:
        """The seconds between the stream's batches, or None for ``available-now``."""
        return trigger_seconds(self.trigger)


#: The options of a batch run that writes a tokenized table (a mode, a run id).
BatchOptions = TokenizeOptions | MovieLensOptions
