"""Append-only vocabularies: string keys ("SKU-000123", UUIDs) -> dense integer ids.

MLT needs integer ids. A vocabulary is a Delta table ``(key string, id bigint)``: keys seen
before keep their id forever; new keys get the next ids. Ids start at 0 and have no gaps, so a
codec sized for the vocabulary wastes no capacity.

New keys are numbered in parallel, never through one task: each key falls into one of
[`BUCKETS`][spark_mlt.storage.vocabulary.BUCKETS] buckets by a hash of the key (``xxhash64``), the
driver collects how many new keys each bucket has (at most
[`BUCKETS`][spark_mlt.storage.vocabulary.BUCKETS] numbers) and gives each bucket its first id, and
each bucket numbers its keys in key order. So the ids follow (bucket, key) order, which depends on
the keys alone: a rerun on the same input assigns the same ids.

Erasure ([`erase_keys`][spark_mlt.storage.vocabulary.erase_keys]): a key that no row holds any
more (a customer who asked to be forgotten) leaves its vocabulary, and its id stays, keyless, so
no other key is ever given it: the next new key gets an id after every id ever given.

Concurrent runs: each change (an append or an erasure) is the next version of the vocabulary's
application transaction ``spark-mlt-vocabulary``, planned from the version it read; an append that
loses to another run's commits nothing and is planned again from the winner's largest id, so two
runs never give one id to two keys ([`check_vocabulary`][spark_mlt.storage.vocabulary.check_vocabulary]
checks a vocabulary for that), and an erasure that loses erases nothing.

A tokenized table records the vocabulary path of each string column in its table property
``mlt.vocabulary.<column>`` ([`vocabulary_properties`][spark_mlt.storage.properties.vocabulary_properties];
[`vocabulary_paths`][spark_mlt.storage.properties.vocabulary_paths] reads it).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from spark_mlt.delta.frames import local_frame
from spark_mlt.delta.stats import column_bounds, parse_stats
from spark_mlt.errors import CodecCapacityError, ConcurrentWriteError, VocabularyError
from spark_mlt.storage.backends import Backend, DeltaBackend
from spark_mlt.storage.properties import NEVER, AppTransaction
from spark_mlt.storage.reader import read_delta
from spark_mlt.storage.replace import blank_keys, key_rows
from spark_mlt.storage.table import TableSnapshot, read_snapshot, table_exists
from spark_mlt.storage.writer import WriteOptions, write_delta

__all__ = [
    "BUCKETS",
    "VocabularyError",
    "assign_ids",
    "check_vocabulary",
    "erase_keys",
    "keys_for_ids",
    "next_change",
    "next_id",
    "number_keys",
    "planned_size",
    "read_vocabulary",
]

#: The buckets new keys are numbered in (in parallel, one window partition each); fixed, so
#: that the ids depend on the keys alone.
BUCKETS = 1024


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
    capacity: int | None = None,
) -> DataFrame:
    """``df`` with ``id_column``: each key's id from the vocabulary at ``path``, extended first
    with the keys it has not seen (appended in one Delta commit). Null keys get null ids.
    ``storage_options`` configure the vocabulary's store (see [`write_delta`][spark_mlt.storage.writer.write_delta]).

    Raises:
        CodecCapacityError: the vocabulary would hold more than ``capacity`` ids (its column's
            codec's); checked before anything is appended.

    Example::

        orders = assign_ids(spark, orders, "sku", "/data/vocab/sku", id_column="sku_id")
    """
    keys = df.select(F.col(column).cast("string").alias("key")).where(F.col("key").isNotNull()).distinct()
    for _ in range(APPEND_ATTEMPTS):
        if _append_new_keys(spark, keys, column, path, storage_options=storage_options, capacity=capacity):
            break
    else:
        raise ConcurrentWriteError(
            f"vocabulary {path}: {APPEND_ATTEMPTS} appends in a row lost to other writers' appends; nothing of "
            "this run's was committed: run it again"
        )
    vocabulary = read_delta(spark, path, storage_options=storage_options)
    lookup = vocabulary.select(F.col("key").alias(f"__{column}_key"), F.col("id").alias(id_column))
    return df.join(lookup, F.col(column).cast("string") == F.col(f"__{column}_key"), "left").drop(f"__{column}_key")


#: How often a vocabulary append that lost to another writer's is planned again.
APPEND_ATTEMPTS = 5
#: The application transaction that numbers a vocabulary's changes, appends and erasures: each
#: is the next version of it, planned from the one the vocabulary held, so that of two changes
#: planned from one version (two runs numbering new keys from one largest id, or an erasure
#: planned before a value came back and got an id) the second commits nothing.
VOCABULARY_APP = "spark-mlt-vocabulary"


def _append_new_keys(
    spark: SparkSession,
    keys: DataFrame,
    column: str,
    path: str,
    *,
    storage_options: Mapping[str, str] | None,
    capacity: int | None,
) -> bool:
    """Append the ``keys`` the vocabulary at ``path`` lacks, numbered after its largest id, in a
    commit that lands only on the version planned from; False when another writer's append
    landed first (nothing of this one was committed)."""
    snapshot = (
        read_snapshot(path, storage_options=storage_options)
        if table_exists(path, storage_options=storage_options)
        else None
    )
    if snapshot is None:
        new, start = keys, 0
    else:
        known = read_delta(spark, path, storage_options=storage_options, version=snapshot.version)
        new = keys.join(known.select("key"), "key", "left_anti")
        start = next_id(snapshot, known)
    numbered, size = numbered_keys(spark, new, start)
    if capacity is not None and size > capacity:
        raise CodecCapacityError(
            f"column {column!r}: its vocabulary would hold {size} ids (ids 0 to {size - 1}), more than its codec's "
            f"capacity {capacity}; nothing was written. Re-size the codec: spark-mlt tokenize ... --mode overwrite "
            "--resize, or spark-mlt sync ... --full-refresh --resize (docs: Columns, Room to grow)",
            column=column,
            capacity=capacity,
        )
    if snapshot is not None and numbered is None:
        return True  # every key known
    if numbered is None:  # a new vocabulary with no key yet: the table, empty
        numbered = spark.createDataFrame([], "key string, id bigint")
    transaction = next_change(snapshot)
    options = WriteOptions(commit_info={"spark_mlt.vocabulary_of": column})
    try:
        result = write_delta(
            numbered, path, {}, mode="append", run_id=transaction, options=options, storage_options=storage_options
        )
    except ConcurrentWriteError:
        return False
    return not result.skipped


def planned_size(
    spark: SparkSession,
    df: DataFrame,
    column: str,
    path: str,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """How many ids the vocabulary at ``path`` would hold after
    [`assign_ids`][spark_mlt.storage.vocabulary.assign_ids] took the keys of ``df[column]``, writing
    nothing (a job's dry run sizes its codec from it).

    Example::

        planned_size(spark, orders, "sku", "/data/vocab/sku")  # known ids + new distinct keys
    """
    keys = df.select(F.col(column).cast("string").alias("key")).where(F.col("key").isNotNull()).distinct()
    known = read_vocabulary(spark, path, storage_options=storage_options)
    if known is None:
        return keys.count()
    start = next_id(read_snapshot(path, storage_options=storage_options), known)
    return start + keys.join(known.select("key"), "key", "left_anti").count()


def next_id(snapshot: TableSnapshot, rows: DataFrame) -> int:
    """The id after the largest one the vocabulary version ``snapshot`` (read as ``rows``) holds:
    from its files' statistics (``maxValues.id``), reading no row, or, when a file has none,
    from its rows. Erasure keeps every id, so the largest one stays in the files.

    Example::

        next_id(read_snapshot("/data/vocab/sku"), read_delta(spark, "/data/vocab/sku"))  # 1204
    """
    highest = -1
    for add in snapshot.delta.files.values():
        bounds = column_bounds(parse_stats(add.stats), ("id",), LongType())
        if bounds.empty:
            continue
        if bounds.high is None:
            row = rows.agg(F.max("id")).first()
            return 0 if row is None or row[0] is None else int(row[0]) + 1
        highest = max(highest, int(bounds.high))
    return highest + 1


def number_keys(spark: SparkSession, keys: DataFrame, start: int) -> DataFrame | None:
    """``keys`` (a distinct ``key`` column) numbered ``start``, ``start + 1``, ... in (bucket,
    key) order, in parallel (see the module's note); None when there are no keys. Runs one
    small job: the keys per bucket.

    Example::

        number_keys(spark, spark.createDataFrame([("a",), ("b",)], "key string"), 0)  # ids 0 and 1
    """
    return numbered_keys(spark, keys, start)[0]


def numbered_keys(spark: SparkSession, keys: DataFrame, start: int) -> tuple[DataFrame | None, int]:
    """[`number_keys`][spark_mlt.storage.vocabulary.number_keys], and the id after the last one."""
    keys = keys.select("key", F.pmod(F.xxhash64("key"), F.lit(BUCKETS)).alias("bucket"))
    sizes = sorted((int(r[0]), int(r[1])) for r in keys.groupBy("bucket").count().collect())
    if not sizes:
        return None, start
    firsts, first = [], start
    for bucket, size in sizes:
        firsts.append((bucket, first))
        first += size
    offsets = local_frame(
        spark, firsts, StructType([StructField("bucket", LongType()), StructField("first", LongType())])
    )
    within = F.row_number().over(Window.partitionBy("bucket").orderBy("key")) - F.lit(1)
    numbered = keys.join(F.broadcast(offsets), "bucket")
    return numbered.select("key", (F.col("first") + within).cast("bigint").alias("id")), first


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
    """Raise [`VocabularyError`][spark_mlt.errors.VocabularyError] if an id maps to two keys or a key to two ids."""
    vocabulary = read_delta(spark, path, storage_options=storage_options)
    vocabulary = vocabulary.where(F.col("key").isNotNull())  # erased keys keep their ids, keyless
    for by, other in (("id", "key"), ("key", "id")):
        clash = vocabulary.groupBy(by).agg(F.countDistinct(other).alias("n")).where("n > 1").first()
        if clash is not None:
            raise VocabularyError(f"vocabulary {path}: {by} {clash[0]!r} has {clash['n']} different {other}s")


def erase_keys(
    spark: SparkSession,
    path: str,
    keys: DataFrame,
    *,
    storage_options: Mapping[str, str] | None = None,
    backend: Backend | DeltaBackend = "auto",
    snapshot: TableSnapshot | None = None,
) -> int:
    """Erase ``keys`` (a ``key`` column) from the vocabulary at ``path``: each one's row keeps
    its id and loses its key, in one commit (none when no key is there); returns how many keys
    were erased. Decoding an erased key's id gives null, and the id is never given again.

    The erasure is planned from the vocabulary's version ``snapshot`` (by default the latest,
    read here): like an append, it is the next version of the vocabulary's writer
    (``VOCABULARY_APP``), and commits only while the vocabulary still records the version it read,
    so a key another run gave an id meanwhile (a value that came back) is never erased by a
    plan made before it.

    The erased keys stay in the table's older versions and files until they are vacuumed (see
    docs/sync.md: erasure step by step).

    Raises:
        ConcurrentWriteError: another run changed the vocabulary since ``snapshot``; nothing
            was erased.

    Example::

        erase_keys(spark, "/data/orders_mlt_vocab/email", gone_emails)
    """
    if snapshot is None:
        snapshot = read_snapshot(path, storage_options=storage_options)
    keyed = key_rows(spark, snapshot, keys.select(F.col("key").cast("string").alias("key")), ["key"], backend=backend)
    held = keyed.held.persist()
    try:
        erased = held.count()
        if not erased:
            return 0
        info = {"spark_mlt.vocabulary_of": path, "spark_mlt.operation": "erase", "spark_mlt.erased": erased}
        blank_keys(keyed, transaction=next_change(snapshot), commit_info=info)
        return int(erased)
    finally:
        held.unpersist()


def next_change(snapshot: TableSnapshot | None) -> AppTransaction:
    """The application transaction of the next change (an append or an erasure) of the
    vocabulary version ``snapshot`` (None: no vocabulary yet): the next version of its writer
    ``VOCABULARY_APP``, committed only while the vocabulary records the one it read."""
    held = None if snapshot is None else snapshot.transaction_version(VOCABULARY_APP)
    # not skippable: a vocabulary at that version took another run's change, not this one
    return AppTransaction(VOCABULARY_APP, (held or 0) + 1, after=NEVER if held is None else held, skippable=False)
