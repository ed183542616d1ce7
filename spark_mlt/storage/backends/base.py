"""The one interface through which spark-mlt reads and commits Delta tables.

A [`DeltaBackend`][spark_mlt.storage.backends.base.DeltaBackend] is to tables what
[`ColumnEngine`][spark_mlt.column.engine.ColumnEngine] is to columns: each implementation is one
module (``backends.delta_rs``, jar-free; ``backends.delta_spark``, through the session's Delta
jars), chosen once per run by [`resolve_backend`][spark_mlt.storage.backends.resolve_backend],
and nothing above it asks which one it holds. What the callers check (arguments, transactions,
codecs) they check before a backend runs; a backend does the table work and answers with a
[`DeltaWriteResult`][spark_mlt.storage.backends.plan.DeltaWriteResult]. The key rows a backend
finds ([`KeyedRows`][spark_mlt.storage.backends.base.KeyedRows]) live here too: they hold the
backend that read them, which commits their replacement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_mlt.delta.stats import parse_stats

if TYPE_CHECKING:
    from spark_mlt.delta.fs import Location
    from spark_mlt.delta.read.changes import FeedRange
    from spark_mlt.storage.backends.plan import DeltaWriteResult, ReplacedFile, Vacuumed, WriteMode, WritePlan
    from spark_mlt.storage.table import TableSnapshot

__all__ = ["BackendName", "DeltaBackend", "KeyedRows"]

#: A backend's name, as reports and results give it.
BackendName = Literal["delta-rs", "delta-spark"]


@dataclass(frozen=True)
class KeyedRows:
    """The rows of a table version that can hold a set of keys.

    Attributes:
        snapshot: the version read.
        key: the key columns.
        keys: the keys (a DataFrame of the key columns, distinct).
        rows: the rows read: the candidate files' (jar-free) or, with delta-spark, the table's
            within ``ranges`` (Delta skips the files outside them).
        candidates: the files a rewrite replaces; None where the backend finds the files
            itself (delta-spark's ``MERGE``).
        backend: the backend that read them and commits the replacement.
        ranges: each integer or string key column's range over the keys, ``(column, lowest,
            highest)`` as SQL literals (delta-spark: read and merged within them).
        few: whether the keys are few enough to be broadcast to the rows' tasks (at most
            `BROADCAST_KEYS`), which then join them where they read them (no shuffle).
    """

    snapshot: TableSnapshot
    key: tuple[str, ...]
    keys: DataFrame
    rows: DataFrame
    candidates: tuple[ReplacedFile, ...] | None
    backend: DeltaBackend
    ranges: tuple[tuple[str, str, str], ...] = ()
    few: bool = False

    @property
    def candidate_rows(self) -> int | None:
        """The rows of the rewrite's files (their statistics' ``numRecords``, deleted rows
        included); None where the backend finds the files itself or a file has no statistics."""
        if self.candidates is None:
            return None
        counts = self.file_rows()
        return None if None in counts else sum(n or 0 for n in counts)

    def file_rows(self) -> list[int | None]:
        """Each candidate's rows (its statistics' ``numRecords``; None: unknown)."""
        files = self.snapshot.delta.files
        counts: list[int | None] = []
        for candidate in self.candidates or ():
            stats = parse_stats(files[candidate.path].stats)
            counts.append(None if stats is None or stats.num_records is None else int(stats.num_records))
        return counts

    @property
    def held(self) -> DataFrame:
        """The rows the version holds for the keys."""
        return self.rows.join(self._joined_keys, list(self.key), "left_semi")

    def without_keys(self, rows: DataFrame) -> DataFrame:
        """``rows`` (of the table) less those of the keys: with few keys (``few``), anti-joined
        with them broadcast, so that each task's rows stay in it."""
        return rows.join(self._joined_keys, list(self.key), "left_anti")

    @property
    def _joined_keys(self) -> DataFrame:
        return F.broadcast(self.keys) if self.few else self.keys


class DeltaBackend(Protocol):
    """Reads and commits the Delta tables of one session, one way (a module per backend)."""

    name: BackendName

    def check_writable(self, snapshot: TableSnapshot, mode: WriteMode) -> None:
        """Refuses, before anything is written, a write of ``mode`` this backend cannot keep
        the table's protocol through (the message names the feature and the way forward)."""
        ...

    def create_table(
        self,
        spark: SparkSession,
        name: str,
        schema: StructType,
        partition_by: Sequence[str],
        properties: Mapping[str, str],
    ) -> None:
        """Creates the catalog table ``name`` (version 0: schema and properties, no rows), or
        says why this backend cannot."""
        ...

    def write(self, df: DataFrame, plan: WritePlan) -> DeltaWriteResult:
        """Writes ``df`` as ``plan`` says, in one commit (or none, when the table holds its
        transaction)."""
        ...

    def read(self, spark: SparkSession, snapshot: TableSnapshot, *, files: Sequence[str] | None = None) -> DataFrame:
        """The rows of the version ``snapshot`` read; ``files``: at least the rows of those of its
        files (paths as the log has them): a backend that cannot read single files reads the
        version (callers filter the rows to what they want)."""
        ...

    def read_version(self, spark: SparkSession, location: Location, version: int | None) -> DataFrame:
        """The rows of a version of the table at ``location`` (None: the latest), without its
        codecs (a table whose stored codec is corrupt stays readable)."""
        ...

    def read_changes(self, spark: SparkSession, feed: FeedRange) -> DataFrame:
        """The change data feed of a checked range of commits: the table's columns,
        ``_change_type`` and ``_commit_version``."""
        ...

    def feed_rows(self, feed: FeedRange) -> int | None:
        """How many rows `read_changes` returns for ``feed``, where known without a Spark job."""
        ...

    def key_rows(
        self,
        spark: SparkSession,
        snapshot: TableSnapshot,
        keys: DataFrame,
        key: tuple[str, ...],
        *,
        values: Any,
        few: bool,
    ) -> KeyedRows:
        """The rows of ``snapshot`` that can hold one of ``keys`` (the key columns ``key``;
        ``values``: a single key column's values, when the caller holds them; ``few``: broadcast
        the keys)."""
        ...

    def replace_keys(
        self, rows: DataFrame, keyed: KeyedRows, plan: WritePlan, *, max_file_rows: int | None, row_count: int | None
    ) -> DeltaWriteResult:
        """Commits ``keyed``'s table with the rows of its keys replaced by ``rows`` (a key
        without one is deleted), as ``plan`` (an append to ``keyed.snapshot``) says."""
        ...

    def blank_keys(self, keyed: KeyedRows, plan: WritePlan) -> None:
        """Commits ``keyed``'s table with the key column of its keys' rows set to null (a
        vocabulary's erasure: each row keeps its id), as ``plan`` says."""
        ...

    def purge(self, spark: SparkSession | None, location: Location) -> None:
        """Rewrites the files whose deletion vectors hide rows, so that those rows' bytes leave
        the table's live files (``REORG TABLE ... APPLY (PURGE)``), or says why it cannot."""
        ...

    def vacuum(
        self,
        spark: SparkSession | None,
        location: Location,
        *,
        retention_hours: float | None,
        dry_run: bool,
        allow_short_retention: bool,
    ) -> Vacuumed:
        """Deletes (or, ``dry_run``, lists) the files of the table no version within its
        retention needs, after the short-retention check."""
        ...
