"""The ``paper`` job: the MLT paper's Table 1 from a tokenized MovieLens table or a release.

Given a MovieLens release folder, the job first tokenizes it with the MovieLens job (Spark, with
that job's defaults: p = 13, n sized per column, as ``spark-mlt movielens`` writes a table) into
``<output>/ratings_mlt``, so the reproduction always reads the codecs and tokens from a Delta table,
as a warehouse user would. The paper's codec ([`PAPER_P`][spark_mlt.batch.read.paper.PAPER_P],
[`PAPER_N`][spark_mlt.batch.read.paper.PAPER_N]: its 14 dimensions and its autoencoder's prime) is one
``tokenize`` option away; on ml-latest-small's validation splits, compositional embeddings of the
same size learned no better with it than with the default (docs/paper.md, "Choosing p and n for
learning"). Training then runs on this machine ([`spark_mlt.paper`][spark_mlt.paper]).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pyspark.sql import SparkSession

from spark_mlt.batch.write.movielens import detect_release, tokenize_movielens
from spark_mlt.batch.write.options import MovieLensOptions
from spark_mlt.errors import MissingTableError
from spark_mlt.paper import PaperOptions, PaperReport, reproduce
from spark_mlt.paper.models import keras_module
from spark_mlt.storage import table_exists

__all__ = ["PAPER_N", "PAPER_P", "reproduce_paper"]

PAPER_P, PAPER_N = 47, 7  # the paper's autoencoder cell: p = 47; 14 dimensions = 7 tokens per id


def reproduce_paper(
    input: str,
    output: str,
    options: PaperOptions | None = None,
    *,
    session: Callable[[], SparkSession] | None = None,
    tokenize: MovieLensOptions | None = None,
) -> PaperReport:
    """Reproduce Table 1 from ``input`` (a tokenized Delta table, or a MovieLens release
    folder tokenized first into ``<output>/ratings_mlt`` with ``tokenize``, default the
    MovieLens job's defaults) into the folder ``output``.

    Args:
        input: a table written by the MovieLens job, or a MovieLens release folder.
        output: the report's folder.
        options: what to train (`spark_mlt.paper.PaperOptions`).
        session: makes the Spark session, needed only to tokenize a release folder.
        tokenize: the MovieLens job's options for a release folder.

    Example::

        reproduce_paper("data/ml-latest-small", "out/paper", session=lambda: local_session("paper"))
        paper_codec = MovieLensOptions(p=PAPER_P, n=PAPER_N, mode="overwrite")
        reproduce_paper("data/ml-latest-small", "out/paper47", session=..., tokenize=paper_codec)
    """
    options = options or PaperOptions()
    keras_module()  # without the paper extra, say what to install before any Spark work
    table = input
    if not table_exists(input):
        detect_release(input)  # a clear SourceError when the folder holds no ratings either
        if session is None:
            raise MissingTableError(
                f"input {input} is no Delta table; tokenizing a release needs a Spark session", parameter="input"
            )
        table = os.path.join(output, "ratings_mlt")
        job = tokenize or MovieLensOptions(mode="overwrite", label_threshold=options.label_threshold)
        tokenize_movielens(session(), input, table, job)
    return reproduce(table, output, options)
