"""What a tokenized Delta table holds: its codecs and token layouts, version, rows, history.

Everything comes from one [`spark_mlt.storage.read_snapshot`][spark_mlt.storage.read_snapshot]; no
Spark session is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt.batch.report import codec_summary
from spark_mlt.column import token_layouts
from spark_mlt.storage import TableSnapshot, read_snapshot
from spark_mlt.storage.maintenance import pending_erasures

__all__ = ["inspect_table"]

HISTORY_KEYS = ("version", "timestamp", "operation", "spark_mlt.job", "spark_mlt.rows")


def inspect_table(path: str, *, history: int = 10, storage_options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A table's codecs (p, n, seed, capacity, fingerprint, token layout, packed bits), its
    version, row count, the streaming writers that committed to it (their ids and last batch),
    the erasures pending a vacuum (files its commits removed that storage still holds, and
    rows hidden by deletion vectors: see ``pending_erasures``) and its last ``history``
    commits, as a JSON-ready dict.

    Raises:
        MissingTableError: no Delta table at ``path`` (a FileNotFoundError).

    Example::

        inspect_table("out/ratings_mlt")["codecs"]["userId"]["layout"]  # 'packed'
    """
    snapshot = read_snapshot(path, storage_options=storage_options)
    layouts = token_layouts(from_arrow_schema(snapshot.schema), snapshot.codecs)
    commits = [{key: entry.get(key) for key in HISTORY_KEYS} for entry in snapshot.history(history)]
    codecs = {column: codec_summary(codec, layouts.get(column)) for column, codec in snapshot.codecs.items()}
    return {
        "path": snapshot.path,
        "version": snapshot.version,
        "rows": snapshot.rows,
        "codecs": codecs,
        "streams": _streams(snapshot),
        "erasures": pending_erasures(path, storage_options=storage_options),
        "history": commits,
    }


#: How far back ``inspect`` looks for streaming writers' commits.
STREAM_HISTORY = 10_000


def _streams(snapshot: TableSnapshot) -> list[dict[str, Any]]:
    """The streaming writers that committed to the table (in its last ``STREAM_HISTORY``
    commits): each writer's id and the last batch the table holds (its transaction version)."""
    found = (commit.metadata.get("spark_mlt.writer") for commit in snapshot.commits(STREAM_HISTORY))
    writers = {str(writer) for writer in found if writer}
    return [{"writer": writer, "last_batch": snapshot.transaction_version(writer)} for writer in sorted(writers)]
