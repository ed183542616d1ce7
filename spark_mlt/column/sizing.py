"""Codecs sized from the data: the one place that measures id columns to pick p and n."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_mlt.codec import DEFAULT_SEED, MAX_ID, MLTCodec

__all__ = ["DEFAULT_HEADROOM", "fit_codecs", "room_for"]

#: The jobs' default room for growth: a codec holds 100 times the ids a table has at its first
#: run. Chosen so that years of ordinary growth fit: ids of a table that grows by half every
#: year reach it after 11 years, a vocabulary whose every value changes once a year after 99;
#: jobs warn at half of it (``spark_mlt.batch.job.capacity``). Packed tokens are one bigint whatever
#: n is, so the room costs no storage until the tokens outgrow 64 bits.
DEFAULT_HEADROOM = 100.0


def room_for(largest: int, headroom: float = 1.0) -> int:
    """The largest id a codec must hold so that ``headroom`` times the ids ``0..largest`` fit
    (``V`` of ``MLTCodec.for_cardinality``), at most 2^63 - 1.

    Example::

        >>> room_for(49_999, 100.0)
        4999999
    """
    if not headroom >= 1:  # NaN too
        raise ValueError(f"headroom must be a number >= 1; got {headroom!r}")
    if float(headroom).is_integer():  # exact for ids near 2^63
        wanted = (largest + 1) * int(headroom) - 1
    else:
        wanted = math.ceil((largest + 1) * headroom) - 1
    return min(max(wanted, largest), MAX_ID)


def fit_codecs(
    df: DataFrame,
    columns: Sequence[str],
    *,
    p: int | None = None,
    n: int | None = None,
    seed: int = DEFAULT_SEED,
    existing: Mapping[str, MLTCodec] | None = None,
    headroom: float = 1.0,
) -> dict[str, MLTCodec]:
    """A codec per column: ``existing[column]`` if given, else ``MLTCodec.from_seed(p, n, seed)``
    when both p and n are given, else one sized by the paper's rule ``p**n > max id`` from the
    column's largest value (one aggregation for all the columns that need it).

    ``headroom``: room for ids to come, as a multiple of the ids there now: the codec holds at
    least ``headroom * (max id + 1)`` ids (capped at 2^63). 1 is the paper's rule; the jobs use
    [`DEFAULT_HEADROOM`][spark_mlt.column.sizing.DEFAULT_HEADROOM] for tables that grow.

    Example::

        codecs = fit_codecs(ratings, ["userId", "movieId"], p=13)
    """
    codecs = {c: existing[c] for c in columns if existing and c in existing}
    missing = [c for c in columns if c not in codecs]
    if not missing:
        return codecs
    if p is not None and n is not None:
        return {**codecs, **{c: MLTCodec.from_seed(p, n, seed) for c in missing}}
    # decimal(38,0): the largest value of any integral or decimal column, without overflow
    row = df.agg(*[F.max(F.col(c)).cast("decimal(38,0)").alias(f"max{i}") for i, c in enumerate(missing)]).first()
    for i, column in enumerate(missing):
        largest = 0 if row is None or row[i] is None else max(0, int(row[i]))
        codecs[column] = MLTCodec.for_cardinality(room_for(largest, headroom), p=p, n=n, seed=seed)
    return {c: codecs[c] for c in columns}
