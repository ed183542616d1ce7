"""MovieLens ratings in any of their releases, read with Spark, and the MovieLens job.

| release | file | separator | header |
|---|---|---|---|
| ml-100k | ``u.data`` | tab | no |
| ml-1m, ml-10m | ``ratings.dat`` | ``::`` | no |
| ml-20m, ml-25m, ml-32m, ml-latest(-small) | ``ratings.csv`` | ``,`` | yes |

Files are read as text and split by hand, so CRLF line endings (a trailing ``\\r``) and the
three separators are handled the same way. Also: a seeded synthetic generator that writes the
ml-latest files, for demos and tests where no real release is at hand.

The file formats are called *releases*
([`MovieLensRelease`][spark_mlt.batch.write.movielens.MovieLensRelease],
[`detect_release`][spark_mlt.batch.write.movielens.detect_release]); "layout" means the storage layout of
token columns everywhere in spark-mlt.

The job records its label's rule in the table property ``mlt.label.rule``
([`spark_mlt.paper.data.LABEL_RULE_PROPERTY`][spark_mlt.paper.data.LABEL_RULE_PROPERTY]: the paper
layer, below this one, reads it), passed to storage as one more table property: storage knows no
labels.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_mlt.batch.job.report import JobReport, phase
from spark_mlt.batch.write.checks import check_output
from spark_mlt.batch.write.frames import tokenize_dataframe
from spark_mlt.batch.write.options import MovieLensOptions
from spark_mlt.batch.write.pipeline import fit_job_codecs, write_tokens
from spark_mlt.errors import MLTError, SourceError
from spark_mlt.paper.data import LABEL_RULE_PROPERTY
from spark_mlt.storage import TableSnapshot, WriteOptions, snapshot_for_write

__all__ = ["MovieLensRelease", "detect_release", "generate_synthetic", "read_ratings", "tokenize_movielens"]

#: The paper's label: a rating of 4 or more is positive (as the paper's code labels it);
#: ``MovieLensOptions.label_threshold`` defaults to it.
POSITIVE_RATING = 4.0


@dataclass(frozen=True)
class MovieLensRelease:
    """Where a release keeps its ratings and how they are written."""

    name: str
    file: str
    separator: str
    header: bool


_RELEASES = (
    MovieLensRelease("ml-20m/25m/32m/latest", "ratings.csv", ",", True),
    MovieLensRelease("ml-1m/10m", "ratings.dat", "::", False),
    MovieLensRelease("ml-100k", "u.data", "\t", False),
)


def detect_release(folder: str | os.PathLike[str]) -> MovieLensRelease:
    """The release of a MovieLens folder, from the ratings file it holds.

    Raises:
        SourceError: none of ratings.csv, ratings.dat or u.data is in the folder.
    """
    for release in _RELEASES:
        if (Path(folder) / release.file).is_file():
            return release
    raise SourceError(
        f"input {folder} is not a MovieLens release folder: expected one of ratings.csv (ml-20m and "
        "later), ratings.dat (ml-1m, ml-10m) or u.data (ml-100k)",
        parameter="input",
    )


def read_ratings(spark: SparkSession, folder: str | os.PathLike[str]) -> DataFrame:
    """Ratings as ``userId bigint, movieId bigint, rating double, timestamp bigint``.

    Example::

        ratings = read_ratings(spark, "data/ml-25m")
    """
    release = detect_release(folder)
    lines = spark.read.text(str(Path(folder) / release.file))
    line = F.regexp_replace(F.col("value"), r"\r$", "")
    parts = F.split(line, {"\t": r"\t", "::": "::", ",": ","}[release.separator])
    df = lines.select(line.alias("line"), parts.alias("parts")).where(F.length("line") > 0)
    if release.header:
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
    """Write a seeded synthetic MovieLens release (the ml-latest files) into ``folder``.

    Movie popularity is Zipf-like (a few movies get most ratings); ratings are half stars from
    0.5 to 5: 3.5 plus a planted per-user bias (sd 0.7) and per-movie bias (sd 0.6) plus noise
    (sd 0.7), so a model that learns who rates and what is rated beats the majority class, as on
    real MovieLens. Returns the folder.

    Example::

        generate_synthetic("data/synthetic", ratings=1_000_000)
    """
    rng = np.random.default_rng(seed)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    popularity = 1.0 / np.arange(1, movies + 1) ** 1.1
    user_ids = rng.integers(1, users + 1, size=ratings)
    movie_ids = rng.choice(np.arange(1, movies + 1), size=ratings, p=popularity / popularity.sum())
    user_bias = rng.normal(0, 0.7, size=users + 1)
    noise = rng.normal(0, 0.7, size=ratings)
    timestamps = rng.integers(1_000_000_000, 1_700_000_000, size=ratings)
    movie_bias = rng.normal(0, 0.6, size=movies + 1)
    raw = 3.5 + user_bias[user_ids] + movie_bias[movie_ids] + noise
    stars = np.clip(np.round(raw * 2) / 2, 0.5, 5.0)
    with open(out / "ratings.csv", "w", newline="") as handle:
        handle.write(f"userId,movieId,rating,timestamp{line_ending}")
        for start in range(0, ratings, 100_000):
            block = slice(start, start + 100_000)
            rows = zip(user_ids[block], movie_ids[block], stars[block], timestamps[block], strict=True)
            handle.write("".join(f"{u},{m},{r:.1f},{t}{line_ending}" for u, m, r, t in rows))
    return out


def tokenize_movielens(
    spark: SparkSession, input: str, output: str, options: MovieLensOptions | None = None
) -> JobReport:
    """Tokenize a MovieLens release's ratings (userId, movieId) into a Delta table.

    The table holds userId, movieId, rating, timestamp, the label (0/1: ``rating >=
    label_threshold``, 4 by default as the paper's code labels it) and ``userId_mlt`` /
    ``movieId_mlt``; both codecs and the label's rule (``mlt.label.rule``) are stored in its
    properties, the release in the commit info (``spark_mlt.release``). Options as
    [`MovieLensOptions`][spark_mlt.batch.write.options.MovieLensOptions]. The output table is opened once,
    before any Spark work.

    Raises:
        SourceError: ``input`` holds no MovieLens ratings file.
        TableExistsError: ``mode="error"`` and ``output`` exists.
        MLTError: appending to a table whose label rule differs from this run's.

    Example::

        tokenize_movielens(spark, "data/ml-25m", "out/ratings_mlt", MovieLensOptions(mode="overwrite"))
    """
    opts = options or MovieLensOptions()
    seconds: dict[str, float] = {}
    release = detect_release(input)
    snapshot = snapshot_for_write(output, opts.mode, storage_options=opts.storage_options, spark=spark)
    _check_label_rule(output, snapshot, opts)
    with phase(seconds, "read"):
        ratings = read_ratings(spark, input)
        ratings = ratings.withColumn("label", (F.col("rating") >= opts.label_threshold).cast("int"))
    check_output(snapshot, ratings.columns, ["userId", "movieId"], opts)
    sized = fit_job_codecs(ratings, ["userId", "movieId"], opts, snapshot, seconds=seconds)
    if opts.dry_run:
        return JobReport(codecs=sized.codecs, layouts=sized.layouts, seconds=seconds, dry_run=True)
    with phase(seconds, "tokenize and write"):
        tokens = tokenize_dataframe(ratings, sized.codecs, engine=opts.engine, layouts=sized.layouts)
        info = {"spark_mlt.job": "movielens", "spark_mlt.input": input, "spark_mlt.release": release.name}
        info["spark_mlt.label_rule"] = opts.label_rule
        write = WriteOptions(commit_info=info, properties={LABEL_RULE_PROPERTY: opts.label_rule})
        written = write_tokens(tokens, output, sized.codecs, opts, snapshot=snapshot, write=write)
    rows = written.rows
    return JobReport(
        rows_in=rows, rows_out=rows, write=written, codecs=sized.codecs, layouts=sized.layouts, seconds=seconds
    )


def _check_label_rule(output: str, snapshot: TableSnapshot | None, options: MovieLensOptions) -> None:
    """Refuses to write labels of another rule into a table that records its rule (its
    properties are set when it is created, so an overwrite would leave the old rule there;
    a table that records none takes any)."""
    recorded = snapshot.properties.get(LABEL_RULE_PROPERTY) if snapshot is not None else None
    if recorded is not None and recorded != options.label_rule:
        raise MLTError(
            f"label_threshold: the table at {output} labels {recorded!r}; this run writes "
            f"{options.label_rule!r}; write a new table",
            parameter="label_threshold",
        )
