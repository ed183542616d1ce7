"""The options of the mirror's commands: how a sync follows its source, and what an erasure deletes.

Composed of the job framework's parts ([`spark_mlt.batch.job.options`][spark_mlt.batch.job.options])
and the sync's own fields; ``spark-mlt sync`` derives its flags from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_mlt.batch.job.options import (
    AVAILABLE_NOW,
    InputFormat,
    RetentionOptions,
    TokenizingOptions,
    check_flag,
    column_names,
    hint,
    quarantine_field,
    storage_field,
    trigger_seconds,
)
from spark_mlt.errors import MLTError
from spark_mlt.storage import StorageOptions

__all__ = ["EraseOptions", "SyncOptions"]


@dataclass(frozen=True, kw_only=True)
class SyncOptions(TokenizingOptions):
    """Options of [`spark_mlt.batch.mirror.sync.sync_table`][spark_mlt.batch.mirror.sync.sync_table]: what
    tokenizing rows takes ([`TokenizingOptions`][spark_mlt.batch.job.options.TokenizingOptions],
    as the batch job has it: the mirror is tokenized as the batch job tokenizes), the source's
    primary key, and when the sync runs; no batch run's ``mode``, ``run_id`` or
    ``dry_run`` (each commit is idempotent by the source version it reaches). The input is a Delta
    table (a path, or a catalog table's name with ``input_format="table"``) with its change data
    feed on.

    Example::

        SyncOptions(key=("customer_id",), handle_invalid="quarantine", trigger="5 minutes")
    """

    input_format: InputFormat = field(
        default="delta", metadata=hint("delta (input is a Delta table's path) or table (a catalog table's name)")
    )
    key: tuple[str, ...] = field(
        default=(),
        metadata=hint("the source's primary key column(s): one row per key, never null (a b, or a,b)"),
    )
    trigger: str = field(
        default=AVAILABLE_NOW,
        metadata=hint(
            "when the sync runs: available-now (up to the source's latest version, then stop: the scheduled "
            "form) or an interval such as '5 minutes' (continuous)"
        ),
    )
    file_rows: int = field(
        default=1_000_000,
        metadata=hint(
            "the most rows a mirror file holds (each file a range of keys): a window rewrites the files of its "
            "keys, so smaller files make a window cheaper and reads of the mirror dearer"
        ),
    )
    full_refresh: bool = field(
        default=False,
        metadata=hint(
            "rebuild the mirror (and its quarantine) from the source's latest version in one commit, "
            "instead of applying the changes since the version it holds"
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "key", column_names("key", self.key))
        if not self.key:
            raise MLTError("key: a sync needs the source's primary key column(s); got none", parameter="key")
        if self.input_format not in ("delta", "table"):
            raise MLTError(
                f"input_format: a sync follows a Delta table's change data feed (delta, or table for a catalog "
                f"table); got {self.input_format!r}",
                parameter="input_format",
            )
        check_flag("full_refresh", self.full_refresh)
        trigger_seconds(self.trigger)
        if self.resize and not self.full_refresh:
            raise MLTError(
                "resize re-tokenizes every row: pass full_refresh=True with it (a table's rows hold one codec)",
                parameter="resize",
            )
        rows = self.file_rows
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise MLTError(
                f"file_rows: the most rows a mirror file holds must be a positive whole number; got {rows!r}",
                parameter="file_rows",
            )

    @property
    def interval(self) -> float | None:
        """The seconds between syncs, or None for ``available-now``."""
        return trigger_seconds(self.trigger)


@dataclass(frozen=True, kw_only=True)
class EraseOptions(RetentionOptions):
    """Options of ``spark-mlt erase``
    ([`erase_physically`][spark_mlt.batch.mirror.erase.erase_physically]): the mirror's
    quarantine, and which files the vacuum of each of its tables deletes.

    Example::

        EraseOptions(retention_hours=0, apply=True, allow_short_retention=True)
    """

    quarantine: str | None = quarantine_field()
    storage_options: Mapping[str, str] = storage_field()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "storage_options", StorageOptions(self.storage_options))
