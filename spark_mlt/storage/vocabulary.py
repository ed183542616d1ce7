"""Append-only vocabularies: string keys ("SKU-000123", UUIDs) -> dense integer ids.

MLT needs integer ids. A vocabulary is a Delta table ``(key string, id bigint)``: keys seen
before keep their id forever; new keys get the next ids, in sorted key order so a rerun on the
same input assigns the same ids. Ids start at 0 and have no gaps, so a codec sized for the
vocabulary wastes no capacity.

Assumption: one writer per vocabulary at a time (a scheduled job). Two concurrent runs could
hand the same id to different keys; :func:`check_vocabulary` detects that.

A tokenised table records the vocabulary path of each string column in its table property
``mlt.vocabulary.<column>`` (:func:`~spark_mlt.storage.properties.vocabulary_properties`;
:func:`~spark_mlt.storage.properties.vocabulary_paths` reads it).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spark_mlt.errors import VocabularyError
from spark_mlt.storage.reader import read_delta
from spark_mlt.storage.table import table_exists
from spark_mlt.storage.writer import WriteOptions, write_delta

__all__ = ["VocabularyError", "assign_ids", "check_vocabulary", "keys_for_ids", "read_vocabulary"]


def read_vocabulary(
    spark: SparkSession, path: str, *, storage_options: Mapping[str, str] | None = None
) -> DataFrame | None:
    """The vocabulary at ``path`` as ``key, id``, or None when it does not exist yet."""
    if not table_exists(path, storage_options=storage_options):
        return None
    return read_delta(spark, path, storage_options=storage_options)


def assign_ids(
    spark: SparkSession,
    df: DataFrame,
    column: str,
    path: str,
    *,
    id_column: str,
    storage_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """``df`` with ``id_column``: each key's id from the vocabulary at ``path``, extended first
    with the keys it has not seen (appended in one Delta commit). Null keys get null ids.
    ``storage_options`` configure the vocabulary's store (see :func:`write_delta`).

    Example::

        orders = assign_ids(spark, orders, "sku", "/data/vocab/sku", id_column="sku_id")
    """
    keys = df.select(F.col(column).cast("string").alias("key")).where(F.col("key").isNotNull()).distinct()
    known = read_vocabulary(spark, path, storage_options=storage_options)
    if known is None:
        new, start = keys, 0
    else:
        new = keys.join(known.select("key"), "key", "left_anti")
        row = known.agg(F.max("id")).first()
        start = 0 if row is None or row[0] is None else int(row[0]) + 1
    # One ordered pass over the new keys only: ids follow key order, so reruns are stable.
    numbered = new.select("key", (F.row_number().over(Window.orderBy("key")) - 1 + F.lit(start)).alias("id"))
    numbered = numbered.select("key", F.col("id").cast("bigint").alias("id"))
    if known is None or numbered.limit(1).count():
        options = WriteOptions(commit_info={"spark_mlt.vocabulary_of": column})
        write_delta(numbered, path, {}, mode="append", options=options, storage_options=storage_options)
    vocabulary = read_delta(spark, path, storage_options=storage_options)
    lookup = vocabulary.select(F.col("key").alias(f"__{column}_key"), F.col("id").alias(id_column))
    return df.join(lookup, F.col(column).cast("string") == F.col(f"__{column}_key"), "left").drop(f"__{column}_key")


def keys_for_ids(
    spark: SparkSession,
    df: DataFrame,
    id_column: str,
    path: str,
    *,
    key_column: str,
    storage_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """``df`` with ``key_column``: the key of each id in ``id_column`` (null where unknown)."""
    vocabulary = read_delta(spark, path, storage_options=storage_options)
    lookup = vocabulary.select(F.col("id").alias(f"__{id_column}_vid"), F.col("key").alias(key_column))
    joined = df.join(lookup, F.col(id_column) == F.col(f"__{id_column}_vid"), "left")
    return joined.drop(f"__{id_column}_vid")


def check_vocabulary(spark: SparkSession, path: str, *, storage_options: Mapping[str, str] | None = None) -> None:
    """Raise :class:`VocabularyError` if an id maps to two keys or a key to two ids."""
    vocabulary = read_delta(spark, path, storage_options=storage_options)
    for by, other in (("id", "key"), ("key", "id")):
        clash = vocabulary.groupBy(by).agg(F.countDistinct(other).alias("n")).where("n > 1").first()
        if clash is not None:
            raise VocabularyError(f"vocabulary {path}: {by} {clash[0]!r} has {clash['n']} different {other}s")
