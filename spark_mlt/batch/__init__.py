"""Batch jobs as library functions: tokenize tables and MovieLens into Delta, decode them back.

One module per role:

* ``options``: the jobs' typed options
  ([`TokenizeOptions`][spark_mlt.batch.options.TokenizeOptions],
  [`StreamOptions`][spark_mlt.batch.options.StreamOptions],
  [`SyncOptions`][spark_mlt.batch.options.SyncOptions],
  [`MovieLensOptions`][spark_mlt.batch.options.MovieLensOptions],
  [`DecodeOptions`][spark_mlt.batch.options.DecodeOptions]), checked when built; each field's help
  is in its metadata.
* ``report``: [`JobReport`][spark_mlt.batch.report.JobReport], what a run did, and its phase timings.
* ``tokenize``: [`tokenize_dataframe`][spark_mlt.batch.tokenize.tokenize_dataframe],
  [`tokenize_table`][spark_mlt.batch.tokenize.tokenize_table] and the token layouts.
* ``stream``: [`tokenize_stream`][spark_mlt.batch.stream.tokenize_stream], the same work on the
  input's new rows as they land; it builds on ``tokenize`` (never the other way round).
* ``sync``: [`sync_table`][spark_mlt.batch.sync.sync_table], a tokenized mirror that follows its
  Delta source's inserts, updates, deletes and erasures; it builds on ``tokenize``.
* ``movielens``: the MovieLens releases, the synthetic generator,
  [`tokenize_movielens`][spark_mlt.batch.movielens.tokenize_movielens].
* ``decode``: [`decode_table`][spark_mlt.batch.decode.decode_table],
  [`unpack_token_columns`][spark_mlt.batch.decode.unpack_token_columns].
* ``inspect``: [`inspect_table`][spark_mlt.batch.inspect.inspect_table].
* ``paper``: [`reproduce_paper`][spark_mlt.batch.paper.reproduce_paper], the MLT paper's Table 1
  from a table or a release.
* ``cli``: the ``spark-mlt`` command, its flags and conf keys derived from the options'
  fields; ``jobs/*.py`` are spark-submit entry points over it.

Every job reads its input from ``input`` and writes to ``output`` (the same words as the
CLI's ``--input``/``--output`` and a conf file's keys).
* ``session``: local SparkSession helpers.
* ``jars``: where ``make jars`` put each Spark line's Delta, Connect and s3a jars (a
  development and test aid; users get jars from their platform or ``--packages``).

Example::

    from spark_mlt.batch import TokenizeOptions, tokenize_table
    tokenize_table(spark, "orders.parquet", "out/orders_mlt", ["sku"], TokenizeOptions(mode="append"))
"""

from __future__ import annotations

from spark_mlt.batch.decode import decode_table, unpack_token_columns
from spark_mlt.batch.inspect import inspect_table
from spark_mlt.batch.movielens import (
    MovieLensRelease,
    detect_release,
    generate_synthetic,
    read_ratings,
    tokenize_movielens,
)
from spark_mlt.batch.options import (
    DecodeOptions,
    JobOptions,
    MovieLensOptions,
    PublishOptions,
    StreamOptions,
    SyncOptions,
    TokenizeOptions,
)
from spark_mlt.batch.paper import reproduce_paper
from spark_mlt.batch.publish import catalog_objects, publish_table
from spark_mlt.batch.report import JobReport
from spark_mlt.batch.session import job_session, local_session, spark_defaults
from spark_mlt.batch.stream import tokenize_stream
from spark_mlt.batch.sync import sync_table
from spark_mlt.batch.tokenize import split_invalid, tokenize_dataframe, tokenize_table
from spark_mlt.options import TOKEN_SUFFIX

__all__ = [
    "TOKEN_SUFFIX",
    "DecodeOptions",
    "JobOptions",
    "JobReport",
    "MovieLensOptions",
    "MovieLensRelease",
    "PublishOptions",
    "StreamOptions",
    "SyncOptions",
    "TokenizeOptions",
    "catalog_objects",
    "decode_table",
    "detect_release",
    "generate_synthetic",
    "inspect_table",
    "job_session",
    "local_session",
    "publish_table",
    "read_ratings",
    "reproduce_paper",
    "spark_defaults",
    "split_invalid",
    "sync_table",
    "tokenize_dataframe",
    "tokenize_movielens",
    "tokenize_stream",
    "tokenize_table",
    "unpack_token_columns",
]
