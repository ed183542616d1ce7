"""One sync run as every step reads it: its session, arguments, options, log, capabilities and
mirror's tables; and what steps share: the version a table records, the quarantine as the window finds
it, the steps left to the next run.

Example::

    run = SyncRun.start(spark, input="lake/customers", output="lake/customers_mlt", columns=["email"],
                        options=options)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from spark_mlt.batch.job.report import RunLog
from spark_mlt.batch.mirror.options import SyncOptions
from spark_mlt.batch.mirror.tables import Mirror
from spark_mlt.batch.write.pipeline import job_backend
from spark_mlt.capabilities import Capabilities
from spark_mlt.errors import ConcurrentWriteError
from spark_mlt.storage import TableSnapshot, read_snapshot, table_exists
from spark_mlt.storage.backends import DeltaBackend
from spark_mlt.storage.properties import NEVER

log = logging.getLogger("spark_mlt")


#: Where a window's tokenized rows are kept between its commits.
KEEP_LEVEL = StorageLevel.MEMORY_AND_DISK


@dataclasses.dataclass(frozen=True)
class SyncRun:
    """One sync's arguments, as every step reads them."""

    spark: SparkSession
    input: str
    output: str
    columns: list[str]
    options: SyncOptions
    #: what the run's steps record as they go (phases, warnings, Spark jobs): its report takes them
    run_log: RunLog
    #: what the session has, resolved once when the run starts
    capabilities: Capabilities
    #: the mirror's tables and names, bound to the source once a run has read it
    tables: Mirror
    #: the Delta backend every step reads and writes with, resolved once per run
    backend: DeltaBackend

    @classmethod
    def start(
        cls,
        spark: SparkSession,
        *,
        input: str,
        output: str,
        columns: list[str],
        options: SyncOptions,
    ) -> SyncRun:
        """A run of the session's capabilities and backend (resolved here, once) and the mirror
        at ``output``."""
        capabilities = Capabilities.of(spark)
        tables = Mirror.at(output, options.quarantine)
        return cls(spark, input, output, columns, options, RunLog(), capabilities, tables, job_backend(capabilities))


def held_version(table: TableSnapshot, app: str) -> int:
    """The version of ``app`` that ``table`` records, ``NEVER`` when none."""
    version = table.transaction_version(app)
    return NEVER if version is None else version


def left_to_next_run(run_log: RunLog, step: Callable[[], object]) -> None:
    """Runs ``step``, a step after the mirror's commit (its value counts, its erasure): when another
    run changed their table meanwhile, the step commits nothing and the next sync finishes it (it
    counts anew what is behind the mirror, and erases what no row holds before it reads a
    vocabulary): a warning, not a failure, for the mirror's commit has landed."""
    try:
        step()
    except ConcurrentWriteError as error:
        run_log.warn(f"left to the next sync: {error}")


def quarantine_table(run: SyncRun) -> TableSnapshot | None:
    """The mirror's quarantine, when the sync quarantines and it exists."""
    options = run.options
    path = run.tables.quarantine
    if options.handle_invalid != "quarantine" or not table_exists(path, storage_options=options.storage_options):
        return None
    return read_snapshot(path, storage_options=options.storage_options)


def quarantine_at(run: SyncRun, quarantine: TableSnapshot, *, after: int) -> TableSnapshot | None:
    """The quarantine's version that goes with the mirror's source version ``after``:
    ``quarantine`` itself, unless a sync stopped between the quarantine's commit of a window and
    the mirror's left it ahead; then its version before the first such commit (None: that
    commit created it)."""
    reached = quarantine.transaction_version(run.tables.quarantine_app)
    if reached is None or reached <= after:
        return quarantine
    first = quarantine.version
    for commit in quarantine.commits():  # newest first: the commits ahead of the mirror, then older ones
        version = commit.metadata.get("spark_mlt.source_version")
        if commit.metadata.get("spark_mlt.quarantine_of") is None or version is None or int(version) <= after:
            break
        first = commit.version
    if first == 0:
        return None
    return read_snapshot(quarantine.path, version=first - 1, storage_options=run.options.storage_options)
