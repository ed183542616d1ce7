"""The jar-free Delta core: spark-mlt's one reader of Delta's transaction log.

Everything spark-mlt does with a Delta table without Delta's jars reads the table through this
package, and nothing else opens ``_delta_log`` (a test keeps it so). Its modules follow the
sections of the Delta protocol (``PROTOCOL.md`` of delta-io/delta):

| protocol section | module |
|---|---|
| Delta Log Entries, Checkpoints, Sidecar Files, Last Checkpoint File | `spark_mlt.delta.log` |
| Actions (protocol, metaData, add, remove, cdc, txn, commitInfo, domainMetadata, sidecar) | `spark_mlt.delta.actions` |
| Action Reconciliation (a version's snapshot, cached per version) | `spark_mlt.delta.snapshot` |
| Table Properties (typed, with Delta's defaults) | `spark_mlt.delta.config` |
| Table Features, Reader and Writer Version Requirements (the protocol gate) | `spark_mlt.delta.features` |
| Schema Serialization Format, Column Mapping, Invariants, Constraints, Generated Columns | `spark_mlt.delta.schema` |
| Deletion Vectors, Deletion Vector Format | `spark_mlt.delta.read.deletion_vectors` |
| Per-file Statistics (written from Parquet footers, read back as bounds) | `spark_mlt.delta.stats` |
| Partition Value Serialization, Reader Requirements (the jar-free scan into Spark) | `spark_mlt.delta.read.scan` |
| Add CDC File, Reader Requirements for AddCDCFile (the change data feed) | `spark_mlt.delta.read.changes` |
| Tombstones and VACUUM (orphans, files a vacuum deletes) | `spark_mlt.delta.vacuum` |

Beside them: `spark_mlt.delta.fs` (where a table lives, for pyarrow, Spark and delta-rs) and
`spark_mlt.delta.rs` (delta-rs, the committer: the one place that opens its handles).

spark-mlt's own layer above it, `spark_mlt.storage`, keeps what is spark-mlt's: codecs in table
properties, vocabularies, the writers' glue (Spark's staging write, delta-spark's SQL) and the
mirror's key replacement.

Example::

    from spark_mlt.delta import locate, read_snapshot

    snapshot = read_snapshot(locate("/data/ratings_mlt"))
    snapshot.version, snapshot.config.column_mapping, len(snapshot.files)
"""

from __future__ import annotations

from spark_mlt.delta.actions import AddCDCFile, AddFile, CommitInfo, DomainMetadata, Metadata, Protocol, RemoveFile, Txn
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.fs import Location, StorageOptions, locate
from spark_mlt.delta.log import Commit, DeltaLog, clear_cache
from spark_mlt.delta.read.deletion_vectors import DeletionVector, read_deleted_rows
from spark_mlt.delta.snapshot import Snapshot, read_snapshot

__all__ = [
    "AddCDCFile",
    "AddFile",
    "Commit",
    "CommitInfo",
    "DeletionVector",
    "DeltaLog",
    "DomainMetadata",
    "Location",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "Snapshot",
    "StorageOptions",
    "TableConfig",
    "Txn",
    "clear_cache",
    "locate",
    "read_deleted_rows",
    "read_snapshot",
]
