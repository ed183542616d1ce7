"""Codecs sized from the data: the one place that measures id columns to pick p and n."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_mlt.codec import DEFAULT_SEED, MAX_ID, MLTCodec

__all__ = ["fit_codecs"]


def fit_codecs(
    df: DataFrame,
    columns: Sequence[str],
    *,
    p: int | None = None,
    n: int | None = None,
    seed: int = DEFAULT_SEED,
    existing: Mapping[str, MLTCodec] | None = None,
) -> dict[str, MLTCodec]:
    """A codec per column: ``existing[column]`` if given, else ``MLTCodec.from_seed(p, n, seed)``
    when both p and n are given, else one sized by the paper's rule ``p**n > max id`` from the
    column's largest value (one aggregation for all the columns that need it).

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
        codecs[column] = MLTCodec.for_cardinality(min(largest, MAX_ID), p=p, n=n, seed=seed)
    return {c: codecs[c] for c in columns}
