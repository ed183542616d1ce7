"""The ratings of a tokenized MovieLens Delta table, as compact NumPy arrays for training.

The table is the one ``spark-mlt movielens`` writes: userId, movieId, rating and the token
columns ``userId_mlt``/``movieId_mlt``, with both codecs in its properties. It is read with
delta-rs in Arrow record batches (no Spark session, no copy of the whole table in Arrow), and
each batch is written into preallocated arrays: ids as int64, the 2n tokens as uint8 (or
int32 for p > 256), labels as uint8. The label is computed here from ``rating`` with the
requested threshold, so a table written with another rule still gives the paper's label; the
rule the table itself records (``mlt.label.rule``) is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spark_mlt.codec import MLTCodec
from spark_mlt.delta.rs import arrow_dataset
from spark_mlt.errors import MissingCodecError, SourceError
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import read_snapshot

__all__ = ["LABEL_RULE_PROPERTY", "Ratings", "load_ratings", "split"]

ID_COLUMNS = ("userId", "movieId")
#: The table property in which the MovieLens job
#: ([`spark_mlt.batch.write.movielens`][spark_mlt.batch.write.movielens], above this package)
#: records how it derived ``label``, e.g. ``rating >= 4``; read here, beside the reader of those
#: tables, so no import runs up from paper to batch.
LABEL_RULE_PROPERTY = "mlt.label.rule"


@dataclass(frozen=True)
class Ratings:
    """Ratings as arrays: ids, their MLT tokens (user's n, then movie's n), binary labels."""

    users: npt.NDArray[np.int64]
    movies: npt.NDArray[np.int64]
    tokens: npt.NDArray[np.integer]
    labels: npt.NDArray[np.uint8]
    codecs: tuple[MLTCodec, MLTCodec]
    label_rule: str
    table_label_rule: str

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, rows: npt.NDArray[np.int64]) -> Ratings:
        """The ratings at ``rows``."""
        return Ratings(
            self.users[rows],
            self.movies[rows],
            self.tokens[rows],
            self.labels[rows],
            self.codecs,
            self.label_rule,
            self.table_label_rule,
        )


def _tokens_of(column: pa.ChunkedArray | pa.Array, codec: MLTCodec) -> npt.NDArray[np.int32]:
    """The (rows, n) tokens of a packed (bigint) or array token column."""
    if pa.types.is_integer(column.type):
        return codec.unpack(column.to_numpy(zero_copy_only=False))
    flat = np.asarray(pc.list_flatten(column).to_numpy(zero_copy_only=False), dtype=np.int32)
    return flat.reshape(len(column), codec.n)


def load_ratings(path: str, *, label_threshold: float = 4.0, limit: int | None = None) -> Ratings:
    """The ratings of the tokenized table at ``path`` (at most ``limit`` rows).

    Raises:
        MissingTableError: no Delta table at ``path``.
        MissingCodecError: the table lacks the codec of userId or movieId.
        SourceError: the table lacks a column the reproduction needs.
    """
    snapshot = read_snapshot(path)
    missing = [c for c in ID_COLUMNS if c not in snapshot.codecs]
    if missing:
        raise MissingCodecError(f"table {path} stores no codec for {missing}: write it with spark-mlt movielens")
    columns = [*ID_COLUMNS, "rating", *(f"{c}{TOKEN_SUFFIX}" for c in ID_COLUMNS)]
    absent = [c for c in columns if c not in snapshot.schema.names]
    if absent:
        raise SourceError(f"table {path} has no column(s) {absent}; it has {snapshot.schema.names}", parameter="path")
    codecs = (snapshot.codecs["userId"], snapshot.codecs["movieId"])
    rows = snapshot.rows if limit is None else min(limit, snapshot.rows)
    arrays = _allocate(rows, codecs)
    filled = 0
    for batch in arrow_dataset(snapshot.delta).to_batches(columns=columns):
        take = min(batch.num_rows, rows - filled)
        if take <= 0:
            break
        _fill(arrays, batch.slice(0, take), filled, codecs, label_threshold)
        filled += take
    users, movies, tokens, labels = (array[:filled] for array in arrays)
    rule = f"rating >= {label_threshold:g}"
    recorded = snapshot.properties.get(LABEL_RULE_PROPERTY, "unknown (not recorded by the writer)")
    return Ratings(users, movies, tokens, labels, codecs, rule, recorded)  # type: ignore[arg-type]


def _allocate(rows: int, codecs: tuple[MLTCodec, MLTCodec]) -> list[npt.NDArray[np.generic]]:
    token_type = np.uint8 if max(c.p for c in codecs) <= 256 else np.int32
    positions = codecs[0].n + codecs[1].n
    return [
        np.empty(rows, np.int64),
        np.empty(rows, np.int64),
        np.empty((rows, positions), token_type),
        np.empty(rows, np.uint8),
    ]


def _fill(
    arrays: list[npt.NDArray[np.generic]],
    batch: pa.RecordBatch,
    at: int,
    codecs: tuple[MLTCodec, MLTCodec],
    label_threshold: float,
) -> None:
    users, movies, tokens, labels = arrays
    end = at + batch.num_rows
    users[at:end] = batch.column("userId").to_numpy(zero_copy_only=False)
    movies[at:end] = batch.column("movieId").to_numpy(zero_copy_only=False)
    n = codecs[0].n
    tokens[at:end, :n] = _tokens_of(batch.column(f"userId{TOKEN_SUFFIX}"), codecs[0])
    tokens[at:end, n:] = _tokens_of(batch.column(f"movieId{TOKEN_SUFFIX}"), codecs[1])
    labels[at:end] = batch.column("rating").to_numpy(zero_copy_only=False) >= label_threshold


def split(ratings: Ratings, *, test_fraction: float = 0.2, seed: int = 42) -> tuple[Ratings, Ratings]:
    """One random train/test split of the rows (the paper's 80/20), reproducible by ``seed``."""
    order = np.random.default_rng(seed).permutation(len(ratings))
    cut = len(ratings) - round(len(ratings) * test_fraction)
    return ratings.take(np.sort(order[:cut])), ratings.take(np.sort(order[cut:]))
