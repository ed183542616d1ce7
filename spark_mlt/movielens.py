"""MovieLens ratings in any of their release layouts, read with Spark.

| release | file | separator | header |
|---|---|---|---|
| ml-100k | ``u.data`` | tab | no |
| ml-1m, ml-10m | ``ratings.dat`` | ``::`` | no |
| ml-20m, ml-25m, ml-32m, ml-latest(-small) | ``ratings.csv`` | ``,`` | yes |

Files are read as text and split by hand, so CRLF line endings (a trailing ``\\r``) and the
three separators are handled the same way. Also: a seeded synthetic generator that writes the
ml-latest layout, for demos and tests where no real release is at hand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from spark_mlt.errors import MLTError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MovieLensLayout", "detect_layout", "generate_synthetic", "read_ratings"]


@dataclass(frozen=True)
class MovieLensLayout:
    """Where the ratings are and how they are written."""

    name: str
    file: str
    separator: str
    header: bool


_LAYOUTS = (
    MovieLensLayout("ml-20m/25m/32m/latest", "ratings.csv", ",", True),
    MovieLensLayout("ml-1m/10m", "ratings.dat", "::", False),
    MovieLensLayout("ml-100k", "u.data", "\t", False),
)


def detect_layout(folder: str | os.PathLike[str]) -> MovieLensLayout:
    """The layout of a MovieLens release folder, from the ratings file it holds.

    Raises:
        MLTError: none of ratings.csv, ratings.dat or u.data is in the folder.
    """
    for layout in _LAYOUTS:
        if (Path(folder) / layout.file).is_file():
            return layout
    raise MLTError(
        f"{folder} is not a MovieLens release folder: expected one of ratings.csv (ml-20m and later), "
        "ratings.dat (ml-1m, ml-10m) or u.data (ml-100k)"
    )


def read_ratings(spark: SparkSession, folder: str | os.PathLike[str]) -> DataFrame:
    """Ratings as ``userId bigint, movieId bigint, rating double, timestamp bigint``.

    Example::

        ratings = read_ratings(spark, "data/ml-25m")
    """
    from pyspark.sql import functions as F

    layout = detect_layout(folder)
    lines = spark.read.text(str(Path(folder) / layout.file))
    line = F.regexp_replace(F.col("value"), r"\r$", "")
    parts = F.split(line, {"\t": r"\t", "::": "::", ",": ","}[layout.separator])
    df = lines.select(line.alias("line"), parts.alias("parts")).where(F.length("line") > 0)
    if layout.header:
        df = df.where(~F.col("line").startswith("userId"))
    return df.select(
        F.col("parts")[0].cast("bigint").alias("userId"),
        F.col("parts")[1].cast("bigint").alias("movieId"),
        F.col("parts")[2].cast("double").alias("rating"),
        F.col("parts")[3].cast("bigint").alias("timestamp"),
    )


def generate_synthetic(
    folder: str | os.PathLike[str],
    *,
    ratings: int = 100_000,
    users: int = 2_000,
    movies: int = 5_000,
    seed: int = 7,
    line_ending: str = "\n",
) -> Path:
    """Write a seeded synthetic MovieLens release (the ml-latest layout) into ``folder``.

    Movie popularity is Zipf-like (a few movies get most ratings), ratings are half stars
    from 0.5 to 5 with a per-user bias. Returns the folder.

    Example::

        generate_synthetic("data/synthetic", ratings=1_000_000)
    """
    rng = np.random.default_rng(seed)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    popularity = 1.0 / np.arange(1, movies + 1) ** 1.1
    user_ids = rng.integers(1, users + 1, size=ratings)
    movie_ids = rng.choice(np.arange(1, movies + 1), size=ratings, p=popularity / popularity.sum())
    bias = rng.normal(0, 0.7, size=users + 1)
    stars = np.clip(np.round((3.5 + bias[user_ids] + rng.normal(0, 1, size=ratings)) * 2) / 2, 0.5, 5.0)
    timestamps = rng.integers(1_000_000_000, 1_700_000_000, size=ratings)
    with open(out / "ratings.csv", "w", newline="") as handle:
        handle.write(f"userId,movieId,rating,timestamp{line_ending}")
        for start in range(0, ratings, 100_000):
            block = slice(start, start + 100_000)
            rows = zip(user_ids[block], movie_ids[block], stars[block], timestamps[block], strict=True)
            handle.write("".join(f"{u},{m},{r:.1f},{t}{line_ending}" for u, m, r, t in rows))
    return out
