"""Deletion vectors: which rows of a table version's files are deleted.

A ``DELETE``, ``UPDATE`` or ``MERGE`` of delta-spark (Databricks turns deletion vectors on for
new tables) marks rows as deleted in a deletion vector beside the file instead of rewriting the
file; a reader must leave those rows out. delta-rs reads the vectors (inline in the log or in
``deletion_vector_*.bin`` files) and gives each file's keep mask (`DeltaTable.deletion_vectors`);
here each mask becomes the runs of deleted row indexes (``start``, ``length``), which the
reader turns into rows in Spark and leaves out by each row's index in its file
(``_metadata.row_index``, the index Delta's own reader uses).

The masks pass through the driver (delta-rs materialises them: one bit per row of each file
that has a vector); the runs go into the query plan, so a table whose vectors hold more than
[`MAX_DELETED_RUNS`][spark_mlt.storage.deletions.MAX_DELETED_RUNS] runs is refused rather than put in a plan: purge them
(``REORG TABLE ... APPLY (PURGE)``) or read with Delta's jars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from spark_mlt.errors import TableError, TableFeatureError

__all__ = ["MAX_DELETED_RUNS", "DeletedRuns", "deleted_row_count", "deleted_runs", "keep_masks"]

#: The most runs of deleted rows a jar-free read puts into its query plan.
MAX_DELETED_RUNS = 5_000_000


@dataclass(frozen=True)
class DeletedRuns:
    """The deleted rows of a table version, as runs per file.

    Attributes:
        files: for each file with deleted rows, its id (the caller's numbering), the first row
            index of each run and each run's length.
        rows: the deleted rows in all.
    """

    files: list[tuple[int, list[int], list[int]]]
    rows: int


def _masks(table: DeltaTable, location: str) -> pa.Table:
    try:
        return pa.table(table.deletion_vectors())
    except DeltaError as error:  # e.g. a feature delta-rs' reader does not implement
        raise TableFeatureError(
            f"delta-rs cannot read the deletion vectors of the Delta table at {location}: {error}; "
            "use a session with Delta's jars (spark-mlt then goes through delta-spark)",
            feature="deletionVectors",
        ) from None


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs of False in a keep mask: their first indexes and their lengths."""
    deleted = np.flatnonzero(~mask)
    if not deleted.size:
        return deleted, deleted
    breaks = np.flatnonzero(np.diff(deleted) != 1) + 1
    starts = deleted[np.concatenate(([0], breaks))]
    ends = deleted[np.concatenate((breaks - 1, [deleted.size - 1]))]
    return starts, ends - starts + 1


def deleted_runs(table: DeltaTable, file_ids: Mapping[str, int], location: str) -> DeletedRuns:
    """The deleted rows of the version ``table`` holds, per file of ``file_ids`` (paths relative
    to the table, percent-decoded, as the reader numbered them).

    Raises:
        TableError: a vector names a file the version does not list (the table changed under
            the handle, or paths disagree): rather than guess, nothing is read.
        TableFeatureError: delta-rs cannot read the vectors, or they hold more than
            [`MAX_DELETED_RUNS`][spark_mlt.storage.deletions.MAX_DELETED_RUNS] runs.
    """
    files: list[tuple[int, list[int], list[int]]] = []
    rows = runs = 0
    for relative, mask in keep_masks(table, location).items():
        if relative not in file_ids:
            raise TableError(
                f"the Delta table at {location} has a deletion vector for {relative}, which its version "
                f"{table.version()} does not list; nothing was read"
            )
        starts, lengths = _runs(mask)
        if starts.size:
            files.append((file_ids[relative], starts.tolist(), lengths.tolist()))
            rows += int(lengths.sum())
            runs += int(starts.size)
        if runs > MAX_DELETED_RUNS:
            raise TableFeatureError(
                f"the deletion vectors of the Delta table at {location} mark more than {MAX_DELETED_RUNS:,} runs "
                "of deleted rows, more than a jar-free read puts into a query plan; purge them "
                "(REORG TABLE ... APPLY (PURGE)) or use a session with Delta's jars",
                feature="deletionVectors",
            )
    return DeletedRuns(files, rows)


def keep_masks(table: DeltaTable, location: str) -> dict[str, np.ndarray]:
    """The keep mask of each file of the version ``table`` holds that has a deletion vector, by
    path relative to the table (decoded; an absolute path stays absolute)."""
    masks = _masks(table, location)
    root = unquote(table.table_uri).rstrip("/") + "/"
    selection = masks.column("selection_vector")
    found: dict[str, np.ndarray] = {}
    for index, uri in enumerate(masks.column("filepath").to_pylist()):
        path = unquote(str(uri))
        relative = path[len(root) :] if path.startswith(root) else path
        found[relative] = selection[index].values.to_numpy(zero_copy_only=False).astype(bool, copy=False)
    return found


def deleted_row_count(table: DeltaTable, location: str) -> int:
    """How many rows of the version ``table`` holds its deletion vectors delete."""
    flat = pc.list_flatten(_masks(table, location).column("selection_vector"))
    return len(flat) - int(pc.sum(flat).as_py() or 0)
