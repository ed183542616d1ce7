"""How much of each codec's id domain a tokenized table has taken, read from the log alone.

A codec maps the ids ``0 .. capacity - 1`` (``capacity`` = ``min(p**n, 2**63)``); an id past
them is invalid, so a table whose ids grow (new customers, new SKUs) must be re-sized before
they run out. [`capacity_usage`][spark_mlt.batch.job.capacity.capacity_usage] says how far each
column has come, without reading a row and without Spark: ``used`` is the largest id held + 1,
taken from Delta file statistics, which the log carries:

* a string key column: its vocabulary ``(key string, id bigint)`` (table property
  ``mlt.vocabulary.<column>``) hands out dense ids from 0 and never gives one twice; an erased
  key keeps its row and its id, keyless. So the largest ``id`` in the vocabulary's statistics,
  + 1, is how many ids were ever given, kept or erased.
* an integer id column the table keeps beside its tokens: the largest value in its files'
  statistics (or partition values), + 1.

Statistics are read as delta-spark reads them (`spark_mlt.delta.stats.bounds`): a file without
the column's ``nullCount`` and ``numRecords`` has no bound, and then ``used`` is unknown rather
than a guess. An integer maximum is exact for the file's rows; a file with a deletion vector may
still count a deleted row's id (a bound, so ``used`` errs high, never low).

A table written with ``handle_invalid="null"`` keeps rows whose id is past the capacity (with
null tokens), and a vocabulary gives ids to keys of quarantined rows too: then ``used`` exceeds
``capacity`` and ``share`` is above 1, which is what it is: the codec is too small already.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_mlt.delta.stats import column_bounds, parse_stats
from spark_mlt.delta.stats.columns import INTEGERS
from spark_mlt.errors import MissingTableError, TableError
from spark_mlt.storage import TableSnapshot, read_snapshot, vocabulary_paths

__all__ = ["CAPACITY_WARNING", "RESIZE_FLAGS", "Usage", "capacity_usage"]

CAPACITY_WARNING: float = 0.5
"""The share of a codec's capacity (50%) from which the jobs warn after their commit and
``spark-mlt inspect`` says to re-size: ``spark-mlt tokenize ... --mode overwrite --resize``, or
``spark-mlt sync ... --full-refresh --resize`` for a mirror."""

#: How each job re-sizes a table's codecs (see docs: Columns, Room to grow).
RESIZE_FLAGS = {"tokenize": "--mode overwrite --resize", "sync": "--full-refresh --resize"}

#: The id column of a vocabulary table.
_VOCABULARY_ID = "id"


@dataclass(frozen=True)
class Usage:
    """How much of one codec's id domain a table has taken.

    Attributes:
        column: the id column (its tokens are ``<column>_mlt``).
        capacity: how many ids the codec maps: ``min(p**n, 2**63)``.
        used: how many ids of that domain are taken: the largest id held + 1 (0 for no id);
            None when unknown.
        source: where ``used`` came from (``"vocabulary"``, ``"statistics"``), or why it is
            unknown (``"unknown: ..."``).

    Example::

        >>> Usage("sku", capacity=8, used=7, source="vocabulary").full
        True
    """

    column: str
    capacity: int
    used: int | None
    source: str

    @property
    def share(self) -> float | None:
        """``used / capacity``, None when ``used`` is unknown."""
        return None if self.used is None else self.used / self.capacity

    @property
    def full(self) -> bool:
        """Whether ``share`` has reached [`CAPACITY_WARNING`][spark_mlt.batch.job.capacity.CAPACITY_WARNING]."""
        share = self.share
        return share is not None and share >= CAPACITY_WARNING

    def warning(self, job: str) -> str | None:
        """What to do about this codec once it is ``full`` (None before), in the words of
        ``job`` (``"tokenize"`` or ``"sync"``: the command that re-sizes the table).

        Example::

            >>> Usage("sku", capacity=8, used=4, source="vocabulary").warning("tokenize").split(";")[0]
            "column 'sku' holds 50% of its codec's capacity (4 of 8 ids, the warning starts at 50%)"
        """
        if not self.full or self.used is None:
            return None
        last = self.capacity - 1
        state = (
            f"ids past {last} are held already: the codec is too small"
            if self.used > self.capacity
            else f"new ids past {last} will be invalid"
        )
        return (
            f"column {self.column!r} holds {self.used / self.capacity:.0%} of its codec's capacity ({self.used} of "
            f"{self.capacity} ids, the warning starts at {CAPACITY_WARNING:.0%}); {state}. Re-size the codec: "
            f"rewrite the table with a larger one (spark-mlt {job} ... {RESIZE_FLAGS[job]})"
        )


def capacity_usage(snapshot: TableSnapshot) -> dict[str, Usage]:
    """The usage of each codec column of a tokenized table (see the module's notes): from its
    vocabulary for a string key column, from the table's own file statistics for an integer id
    column, unknown otherwise. Reads the log of the table (and of each vocabulary, with the
    table's storage options), never its data; starts no Spark.

    Example::

        usage = capacity_usage(read_snapshot("out/orders_mlt"))
        usage["sku"].used, usage["sku"].capacity, usage["sku"].full  # (7, 8, True)
    """
    vocabularies = vocabulary_paths(snapshot.properties, location=snapshot.path)
    layout = snapshot.delta.layout
    usage = {}
    for column, codec in snapshot.codecs.items():
        capacity = codec.max_id + 1
        if column in vocabularies:
            used, source = _vocabulary_used(vocabularies[column], snapshot)
        elif column not in layout.logical.names:
            used, source = None, "unknown: the id column is not kept"
        elif not isinstance(layout.logical[column].dataType, INTEGERS):
            kind = layout.logical[column].dataType.simpleString()
            used, source = None, f"unknown: the id column is {kind}, with no vocabulary recorded"
        else:
            used, source = _largest_id(snapshot, column)
        usage[column] = Usage(column, capacity, used, source)
    return usage


def _vocabulary_used(path: str, table: TableSnapshot) -> tuple[int | None, str]:
    """How many ids the vocabulary at ``path`` has given (its largest ``id`` + 1)."""
    try:
        vocabulary = read_snapshot(path, storage_options=table.storage_options)
    except MissingTableError:
        return None, f"unknown: no vocabulary table at {path}"
    except TableError as error:  # a catalog name without a session, a store that refuses
        return None, f"unknown: the vocabulary {path} cannot be read: {error}"
    used, reason = _largest_id(vocabulary, _VOCABULARY_ID)
    return used, "vocabulary" if used is not None else f"{reason} (vocabulary {path})"


def _largest_id(snapshot: TableSnapshot, column: str) -> tuple[int | None, str]:
    """The largest value of the integer ``column`` in the table's live files, + 1 (0 when no
    file holds a value), from their statistics or partition values; None, with the reason,
    when a file records no bound."""
    layout = snapshot.delta.layout
    physical = layout.physical_names[column]
    kind = layout.logical[column].dataType
    partitioned = column in layout.partition_columns
    largest = -1
    for add in snapshot.delta.files.values():
        if partitioned:
            value = add.partition_values.get(physical)
            if value is None:
                continue  # a null id takes no id
            high: int | None = int(value) if value.lstrip("-").isdigit() else None
        else:
            bounds = column_bounds(parse_stats(add.stats), (physical,), kind)
            if bounds.empty:
                continue
            high = bounds.high
        if high is None:
            where = "partition value" if partitioned else "statistics"
            return None, f"unknown: the file {add.path} records no maximum of {column} in its {where}"
        largest = max(largest, high)
    return largest + 1, "statistics"
