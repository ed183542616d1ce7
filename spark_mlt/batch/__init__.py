"""Batch jobs as library functions: tokenize tables and MovieLens into Delta, decode them back.

One folder per role, in the order a run goes through them:

* ``cli``: the front door, the ``spark-mlt`` command; its flags and conf keys derived from the
  options' fields; ``jobs/*.py`` are spark-submit entry points over it.
* ``job``: what every job shares: its typed options
  ([`TokenizeOptions`][spark_mlt.batch.write.options.TokenizeOptions],
  [`StreamOptions`][spark_mlt.batch.write.options.StreamOptions],
  [`SyncOptions`][spark_mlt.batch.mirror.options.SyncOptions],
  [`MovieLensOptions`][spark_mlt.batch.write.options.MovieLensOptions],
  [`DecodeOptions`][spark_mlt.batch.read.options.DecodeOptions]), checked when built, each field's
  help in its metadata; [`JobReport`][spark_mlt.batch.job.report.JobReport], what a run did, and
  its phase timings; local sessions; its input; the capacity and rejection thresholds.
* ``write``: the jobs that write tokens:
  [`tokenize_dataframe`][spark_mlt.batch.write.frames.tokenize_dataframe],
  [`tokenize_table`][spark_mlt.batch.write.tokenize.tokenize_table],
  [`tokenize_stream`][spark_mlt.batch.write.stream.tokenize_stream] (the same work on the input's
  new rows as they land; it builds on ``tokenize``, never the other way round) and
  [`tokenize_movielens`][spark_mlt.batch.write.movielens.tokenize_movielens].
* ``mirror``: [`sync_table`][spark_mlt.batch.mirror.sync.sync_table], a tokenized mirror that
  follows its Delta source's inserts, updates, deletes and erasures (it builds on ``write``),
  and the erasure of what no row holds.
* ``read``: the read-back commands:
  [`decode_table`][spark_mlt.batch.read.decode.decode_table],
  [`inspect_table`][spark_mlt.batch.read.inspect.inspect_table], ``find``,
  [`publish_table`][spark_mlt.batch.read.publish.publish_table] and
  [`reproduce_paper`][spark_mlt.batch.read.paper.reproduce_paper], the MLT paper's Table 1 from
  a table or a release.

Imports run one way, from the front door down: ``cli`` imports the others, ``read`` imports
``mirror``, ``write`` and ``job``, ``mirror`` imports ``write`` and ``job``, ``write`` imports ``job``,
and ``job`` none of them.
Every job reads its input from ``input`` and writes to ``output`` (the same words as the
CLI's ``--input``/``--output`` and a conf file's keys).

Example::

    from spark_mlt.batch import TokenizeOptions, tokenize_table
    tokenize_table(spark, "orders.parquet", "out/orders_mlt", ["sku"], TokenizeOptions(mode="append"))
"""

from __future__ import annotations

from spark_mlt.batch.job.options import JobOptions
from spark_mlt.batch.job.report import JobReport
from spark_mlt.batch.job.session import job_session, local_session, spark_defaults
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.sync import sync_table
from spark_mlt.batch.read.decode import decode_table, unpack_token_columns
from spark_mlt.batch.read.inspect import inspect_table
from spark_mlt.batch.read.options import DecodeOptions, PublishOptions
from spark_mlt.batch.read.paper import reproduce_paper
from spark_mlt.batch.read.publish import catalog_objects, publish_table
from spark_mlt.batch.write.frames import split_invalid, tokenize_dataframe
from spark_mlt.batch.write.movielens import (
    MovieLensRelease,
    detect_release,
    generate_synthetic,
    read_ratings,
    tokenize_movielens,
)
from spark_mlt.batch.write.options import MovieLensOptions, StreamOptions, TokenizeOptions
from spark_mlt.batch.write.stream import tokenize_stream
from spark_mlt.batch.write.tokenize import tokenize_table
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
