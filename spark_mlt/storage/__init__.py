"""Delta Lake storage of tokenized tables: each token column's codec in the table properties.

spark-mlt's own layer over the jar-free Delta core (`spark_mlt.delta`, which reads every table's
log) and over delta-spark where the session has Delta's jars. One module per role, as delta-rs'
own Python package is laid out:

* `properties`: the names spark-mlt writes into a table (codec, format version and vocabulary
  properties; run ids) and codecs <-> properties. What the layers above record (the MovieLens
  label rule) they pass as ``WriteOptions.properties``.
* `backends`: the one interface through which tables are read and committed
  ([`DeltaBackend`][spark_mlt.storage.backends.DeltaBackend]), a module per implementation
  (``delta_rs``: Spark's staging write, statistics from the footers, a delta-rs commit;
  ``delta_spark``: Delta's jars), and [`resolve_backend`][spark_mlt.storage.backends.resolve_backend],
  which picks one for a session.
* `catalog`: catalog tables' names (``db.table``) next to paths: the rule that tells them apart
  ([`is_table_name`][spark_mlt.storage.catalog.is_table_name]) and their locations.
* `table`: [`read_snapshot`][spark_mlt.storage.table.read_snapshot], a version with its codecs,
  the one reader of a table's state for the jobs.
* `writer`: [`write_delta`][spark_mlt.storage.writer.write_delta],
  [`snapshot_for_write`][spark_mlt.storage.writer.snapshot_for_write] (a job's one read of its
  output table): the write's checks and plan, handed to the session's backend.
* `reader`: [`read_delta`][spark_mlt.storage.reader.read_delta] into Spark (delta-spark, or the
  core's jar-free scan), and [`read_snapshot_rows`][spark_mlt.storage.reader.read_snapshot_rows]
  for a snapshot already read.
* `maintenance`: [`orphan_files`][spark_mlt.storage.maintenance.orphan_files],
  [`vacuum`][spark_mlt.storage.maintenance.vacuum] and
  [`pending_erasures`][spark_mlt.storage.maintenance.pending_erasures].
* `changes`: [`read_changes`][spark_mlt.storage.changes.read_changes], a table's change data
  feed (delta-spark's, or the core's), and
  [`check_feed`][spark_mlt.storage.changes.check_feed], which refuses a range it cannot cover.
* `replace`: [`key_rows`][spark_mlt.storage.replace.key_rows] and
  [`replace_keys`][spark_mlt.storage.replace.replace_keys]: the rows of some keys replaced in one
  commit (``MERGE``, or a jar-free rewrite of the files that hold them, found by `keys`).
* `vocabulary`: append-only key vocabularies.
"""

from __future__ import annotations

from spark_mlt.delta.fs import StorageOptions, redact, s3a_conf
from spark_mlt.errors import (
    ChangeFeedError,
    CodecMismatchError,
    ConcurrentWriteError,
    ConstraintViolationError,
    MissingCodecError,
    MissingTableError,
    StorageError,
    TableError,
    TableExistsError,
    TableFeatureError,
    TableSchemaError,
    VocabularyError,
)
from spark_mlt.storage.backends import BACKENDS, Backend, DeltaBackend, resolve_backend
from spark_mlt.storage.backends.base import KeyedRows
from spark_mlt.storage.backends.plan import WRITE_MODES, DeltaWriteResult, WriteMode, check_mode, nullable_type
from spark_mlt.storage.catalog import is_table_name
from spark_mlt.storage.changes import check_feed, read_changes
from spark_mlt.storage.maintenance import check_retention, orphan_files, pending_erasures, vacuum
from spark_mlt.storage.properties import (
    CODEC_PROPERTY_PREFIX,
    FORMAT_PROPERTY,
    TABLE_FORMAT_VERSION,
    VOCABULARY_PROPERTY_PREFIX,
    AppTransaction,
    check_run_id,
    resolve_vocabulary_path,
    vocabulary_paths,
    vocabulary_properties,
    vocabulary_property_value,
)
from spark_mlt.storage.reader import read_appended, read_delta, read_snapshot_rows
from spark_mlt.storage.replace import blank_keys, key_rows, replace_keys
from spark_mlt.storage.table import TableSnapshot, read_codecs, read_properties, read_snapshot, table_exists
from spark_mlt.storage.vocabulary import (
    assign_ids,
    check_vocabulary,
    erase_keys,
    keys_for_ids,
    planned_size,
    read_vocabulary,
)
from spark_mlt.storage.writer import (
    DATA_PAGE_VERSIONS,
    DataPageVersion,
    WriteOptions,
    check_data_page_version,
    snapshot_for_write,
    token_write_options,
    write_delta,
)

__all__ = [
    "BACKENDS",
    "CODEC_PROPERTY_PREFIX",
    "DATA_PAGE_VERSIONS",
    "FORMAT_PROPERTY",
    "TABLE_FORMAT_VERSION",
    "VOCABULARY_PROPERTY_PREFIX",
    "WRITE_MODES",
    "AppTransaction",
    "Backend",
    "ChangeFeedError",
    "CodecMismatchError",
    "ConcurrentWriteError",
    "ConstraintViolationError",
    "DataPageVersion",
    "DeltaBackend",
    "DeltaWriteResult",
    "KeyedRows",
    "MissingCodecError",
    "MissingTableError",
    "StorageError",
    "StorageOptions",
    "TableError",
    "TableExistsError",
    "TableFeatureError",
    "TableSchemaError",
    "TableSnapshot",
    "VocabularyError",
    "WriteMode",
    "WriteOptions",
    "assign_ids",
    "blank_keys",
    "check_data_page_version",
    "check_feed",
    "check_mode",
    "check_retention",
    "check_run_id",
    "check_vocabulary",
    "erase_keys",
    "is_table_name",
    "key_rows",
    "keys_for_ids",
    "nullable_type",
    "orphan_files",
    "pending_erasures",
    "planned_size",
    "read_appended",
    "read_changes",
    "read_codecs",
    "read_delta",
    "read_properties",
    "read_snapshot",
    "read_snapshot_rows",
    "read_vocabulary",
    "redact",
    "replace_keys",
    "resolve_backend",
    "resolve_vocabulary_path",
    "s3a_conf",
    "snapshot_for_write",
    "table_exists",
    "token_write_options",
    "vacuum",
    "vocabulary_paths",
    "vocabulary_properties",
    "vocabulary_property_value",
    "write_delta",
]
