"""The embedded backend: Spark writes Parquet, delta-rs commits the files (no Delta jars).

1. Staging write: Spark writes Parquet in parallel with its own committer into a fresh,
   non-hidden subfolder of the table (``mlt-<time>-<write id>``). Nothing is collected to the
   driver. Spark's ``_SUCCESS`` marker proves its job commit; with Hadoop's committer
   algorithm v1 (Spark's default) only the committed attempt of each task has files there, so
   retried and speculative tasks cannot add rows twice.
2. Footers to add actions: the driver lists the committed files (skipping hidden paths, as
   Hadoop's input formats do, but not the partition folders of a column whose name starts with
   ``_``) and reads each Parquet footer for Delta's file statistics
   (`spark_mlt.delta.stats`: what delta-spark records for the file, or nothing where the
   footer cannot tell it exactly).
3. Commit: exactly those files go to the Delta log in one atomic delta-rs commit. A new table
   is created first, with its properties and no data (delta-rs takes custom properties only
   when creating a table), so no version ever holds tokens without their codec.

A failed Spark job leaves no ``_SUCCESS`` and no commit, and its staging folder is removed, so
the table is as it was. A driver that dies between Spark's job commit and the Delta commit
leaves an uncommitted staging folder that [`orphan_files`][spark_mlt.storage.maintenance.orphan_files]
lists and [`vacuum`][spark_mlt.storage.maintenance.vacuum] removes.

Pitfalls handled here: ``AddAction.path`` must be the raw relative path (delta-rs
percent-encodes it itself); ``create_write_transaction`` does not check the schema of what it
adds, so the DataFrame's schema is compared with the table's first; Spark writes an empty
partition value as ``__HIVE_DEFAULT_PARTITION__`` (a null); Spark's ``_SUCCESS`` and ``.crc``
files are removed after the commit.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import deltalake
import pyarrow as pa
from deltalake import Schema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, PostCommitHookProperties, Transaction
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampType

from spark_mlt.delta import rs
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.features import check_writable
from spark_mlt.delta.fs import Location, redact
from spark_mlt.delta.log import DeltaLog
from spark_mlt.delta.read.changes import FeedRange, feed_rows, read_feed
from spark_mlt.delta.read.scan import scan_snapshot
from spark_mlt.delta.schema import TableLayout, enforce_rules, layout_of, physical_columns
from spark_mlt.delta.snapshot import Snapshot
from spark_mlt.delta.snapshot import read_snapshot as read_delta_snapshot
from spark_mlt.delta.stats import StatsSpec, stats_spec
from spark_mlt.delta.vacuum import check_short_retention, retention_ms, vacuum_files
from spark_mlt.errors import (
    ConcurrentWriteError,
    IncompleteWriteError,
    MLTError,
    StorageError,
    TableError,
    TableFeatureError,
)
from spark_mlt.steps import reached
from spark_mlt.storage.backends.base import BackendName, KeyedRows
from spark_mlt.storage.backends.plan import (
    DeltaWriteResult,
    Vacuumed,
    WriteMode,
    WritePlan,
    check_schema,
    refuse_existing_table,
    skipped_write,
    spark_arrow_schema,
)
from spark_mlt.storage.backends.staging import (
    STAGING_PREFIX,
    PartitionValues,
    StagedFiles,
    add_actions,
    instants_staged_in_utc,
    write_staging,
)
from spark_mlt.storage.keys import candidate_files, rewrite_rows, scan_files
from spark_mlt.storage.properties import NEVER, AppTransaction, merge_codecs
from spark_mlt.storage.table import CREATE_MARKER, WRITE_ID, TableSnapshot, snapshot_of

if TYPE_CHECKING:  # newer deltalake (1.6.6) exports it; spark-mlt only names it in hints
    from deltalake import DeltaTable
    from deltalake.transaction import RemoveAction

__all__ = ["DELTA_RS", "DeltaRs", "check_jar_free_write", "write"]


def write(df: DataFrame, plan: WritePlan) -> DeltaWriteResult:
    """Writes ``df`` as the plan says: the table's rules checked, staging write, add actions,
    one Delta commit."""
    timings: dict[str, float] = {}
    if plan.resize:
        _check_resizable(plan)
    if plan.snapshot is None:  # a new table: refused up front, or created before its files
        created = spark_arrow_schema(df)
        _check_creatable(plan, created)
        if TableConfig.of(plan.properties).column_mapping != "none":
            plan = _created_first(plan, created)
    snapshot = None if plan.resize else plan.snapshot  # a re-size writes the table anew
    if snapshot is not None:
        layout = snapshot.delta.layout
        df = enforce_rules(df, layout)
    arrow_schema = spark_arrow_schema(df)
    if snapshot is not None:
        partition_by = check_schema(snapshot, arrow_schema)
        spec = _stats_spec(layout, snapshot.delta)
    else:  # the table this write creates
        partition_by = list(plan.partition_by)
        layout = layout_of(json.loads(Schema.from_arrow(arrow_schema).to_json()), dict(plan.properties), partition_by)
        spec = stats_spec(layout, TableConfig.of(plan.properties))
    # the files hold physical names under column mapping, and the log's partition values too
    stored = physical_columns(layout, df)
    names = layout.physical_names
    stored_partitions = [names.get(column, column) for column in partition_by]
    timestamps = {names.get(c, c) for c in partition_by if isinstance(layout.logical[c].dataType, TimestampType)}
    stored = instants_staged_in_utc(stored, timestamps)
    write_id = uuid.uuid4().hex
    staging = f"{STAGING_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{write_id[:12]}"
    location = plan.location
    with _timed(timings, "spark_write"):
        write_staging(stored, plan, staging, stored_partitions)
    try:
        with _timed(timings, "footers"):
            values = PartitionValues(stored_partitions, timestamps)
            files = add_actions(location, staging, values, spec, keep_empty=snapshot is None)
            files = StagedFiles([*files.actions, *_remove_actions(plan)], files.rows)
        with _timed(timings, "commit"):
            metadata = {**plan.commit_info, "spark_mlt.rows": files.rows, WRITE_ID: write_id}
            version, committed = commit(
                plan, files.actions, arrow_schema, partition_by, metadata, layout=layout, spec=spec
            )
    except BaseException:
        location.remove_folder(staging)
        raise
    if not committed:  # a concurrent run with the same run id committed first
        location.remove_folder(staging)
        return skipped_write(location.uri, version, plan.transaction)
    _remove_spark_markers(location, staging)
    return DeltaWriteResult(location.uri, version, files.rows, len(files.actions), "delta-rs", timings)


def _check_resizable(plan: WritePlan) -> None:
    """Refuses a re-size the jar-free path cannot write exactly: a table with column mapping or
    table features, whose replaced metadata delta-rs would not carry over."""
    snapshot = plan.snapshot
    if snapshot is None:
        return
    features = snapshot.delta.features
    if snapshot.delta.config.column_mapping != "none" or features.reader or features.writer:
        raise TableFeatureError(
            f"resize: the Delta table at {plan.location.uri} uses table features "
            f"({', '.join(sorted(features.reader | features.writer)) or 'column mapping'}), which the jar-free "
            "path cannot carry into a re-sized table; re-size it in a session with Delta's jars",
            feature="resize",
            parameter="resize",
        )


def _check_creatable(plan: WritePlan, arrow_schema: pa.Schema) -> None:
    """Refuses, before any data moves, a new table that deltalake 1.6 would create wrongly:

    * a TIMESTAMP_NTZ inside a map: it commits version 0 without the ``timestampNtz`` feature,
      then fails, and leaves that broken version behind;
    * column mapping with a protocol of table features (a TIMESTAMP_NTZ column, deletion
      vectors, ``delta.feature.*``): it leaves ``columnMapping`` out of the features, so the
      physical names the files carry are not the table's (measured: the table no longer opens).
    """
    location = plan.location.uri
    for field in arrow_schema:
        if _holds_ntz(field.type, in_map=False, anywhere=False):
            raise TableFeatureError(
                f"column {field.name!r} holds a TIMESTAMP_NTZ inside a map, which the jar-free writer cannot "
                f"create a table with ({location}); create the table first with Delta's jars "
                "(CREATE TABLE ... USING delta), or write it through delta-spark",
                feature="timestampNtz",
                parameter="df",
            )
    config = TableConfig.of(plan.properties)
    if config.column_mapping == "none":
        return
    properties = {k.lower(): str(v).lower() for k, v in plan.properties.items()}
    features = (
        any(_holds_ntz(field.type, in_map=False, anywhere=True) for field in arrow_schema)
        or config.deletion_vectors
        or any(key.startswith("delta.feature.") for key in properties)
        or properties.get("delta.minreaderversion", "1").strip() not in ("1", "2")
    )
    if features:
        raise TableFeatureError(
            f"a new table with column mapping and other table features (TIMESTAMP_NTZ columns, deletion "
            f"vectors) cannot be created by the jar-free writer ({location}): deltalake leaves column mapping "
            "out of its protocol; create the table first with Delta's jars (CREATE TABLE ... USING delta "
            "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')) and append to it, or leave column mapping off",
            feature="columnMapping",
            parameter="options",
        )


def _holds_ntz(kind: pa.DataType, *, in_map: bool, anywhere: bool) -> bool:
    """Whether ``kind`` holds a TIMESTAMP_NTZ (inside a map, unless ``anywhere``)."""
    if pa.types.is_timestamp(kind):
        return kind.tz is None and (in_map or anywhere)
    if pa.types.is_map(kind):
        return any(_holds_ntz(k, in_map=True, anywhere=anywhere) for k in (kind.key_type, kind.item_type))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _holds_ntz(kind.value_type, in_map=in_map, anywhere=anywhere)
    if pa.types.is_struct(kind):
        return any(_holds_ntz(kind.field(i).type, in_map=in_map, anywhere=anywhere) for i in range(kind.num_fields))
    return False


def _created_first(plan: WritePlan, arrow_schema: pa.Schema) -> WritePlan:
    """The plan of a write to a new table with column mapping, once the table exists: delta-rs
    gives its columns their physical names when it creates it, and the files must be written
    under those names, so this table is created before its files are.

    Raises:
        TableFeatureError: this deltalake cannot create column-mapped tables (1.6.3 cannot).
    """
    try:
        table, _ = _create_table(plan, arrow_schema, list(plan.partition_by))
    except DeltaError as error:
        if "column mapping is not supported" not in str(error).lower():
            raise
        raise TableFeatureError(
            f"deltalake {deltalake.__version__} cannot create a table with column mapping ({plan.location.uri}): "
            "create the table first with Delta's jars (CREATE TABLE ... USING delta TBLPROPERTIES "
            "('delta.columnMapping.mode' = 'name')) and append to it, or upgrade deltalake (1.6.6 creates one)",
            feature="columnMapping",
            parameter="options",
        ) from None
    del table
    location = plan.location
    snapshot = snapshot_of(read_delta_snapshot(location), location.uri, location.storage_options)
    return replace(plan, snapshot=snapshot)


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    timings[name] = time.perf_counter() - started


def _stats_spec(layout: TableLayout, snapshot: Snapshot) -> StatsSpec:
    """The statistics the files of ``snapshot``'s table record, for files written with ``layout``."""
    features = snapshot.features
    return stats_spec(layout, snapshot.config, tight_bounds="deletionVectors" in features.reader | features.writer)


def _remove_actions(plan: WritePlan) -> list[AddAction | RemoveAction]:
    """The remove actions of the files the plan replaces (delta-rs writes them from 1.6.6 on)."""
    if not plan.replaces:
        return []
    try:
        from deltalake.transaction import RemoveAction  # noqa: PLC0415 - deltalake 1.6.6 and newer
    except ImportError:  # deltalake 1.6.3
        raise TableFeatureError(
            f"rewriting files of the Delta table at {plan.location.uri} without Delta's jars needs deltalake 1.6.6 "
            f"or newer (it commits remove actions); this is {deltalake.__version__}: pip install 'deltalake>=1.6.6', "
            "or use a session with Delta's jars",
            feature="remove",
        ) from None
    now = int(time.time() * 1000)
    return [
        RemoveAction(
            path=file.path,
            data_change=True,
            deletion_timestamp=now,
            size=file.size,
            partition_values=dict(file.partition_values),
        )
        for file in plan.replaces
    ]


def _check_replaced(plan: WritePlan, current: Snapshot) -> None:
    """Refuses to commit when a file the write replaces is no longer in the table: another
    writer removed it (a compaction, a delete) while the write ran, and its rows may be
    elsewhere now."""
    gone = [file.path for file in plan.replaces if file.path not in current.files]
    if gone:
        raise ConcurrentWriteError(
            f"another writer removed {len(gone)} file(s) of the Delta table at {plan.location.uri} that this write "
            f"rewrites (e.g. {gone[0]}) while it ran; nothing of it was committed (its files are orphans for "
            "vacuum): run it again"
        )


#: The modes of a delta-rs commit: an overwrite of a table this write created is an append.
_CommitMode = Literal["append", "overwrite"]
#: How often a commit that lost the race for its version is tried again (each time after
#: reloading the table and checking it anew), with a growing, jittered pause between tries.
COMMIT_ATTEMPTS = 12


def commit(
    plan: WritePlan,
    actions: list[AddAction | RemoveAction],
    arrow_schema: pa.Schema,
    partition_by: list[str],
    metadata: Mapping[str, Any],
    *,
    layout: TableLayout,
    spec: StatsSpec,
) -> tuple[int, bool]:
    """Commits ``actions`` in one Delta commit; returns the table's version and True, or its
    version and False when the table already holds the plan's run id (a concurrent run with
    the same id won).

    delta-rs' own retry is off (``max_commit_retries=0``): it would rebase a commit that lost
    its version onto the winner without looking at the winner's application transactions,
    so two runs with one run id could both land. Instead each attempt reloads the table and,
    when it moved since it was last checked, checks the run id, the protocol, the table's
    rules and column names (``layout``: the table the staged files were written and checked
    against, or the table this write creates), the codecs, the schema and the columns the files
    record statistics for (``spec``) against what is there now, and writes exactly the next
    version (a conditional put: on S3 ``If-None-Match``); a lost race is tried again. An append
    then lands after whatever won (an overwrite included), and an overwrite replaces whatever
    won (an append included): both are the outcome of running the two writes one after the other.
    """
    table, checked, mode = _commit_base(plan, arrow_schema, partition_by)
    files = _Commit(actions, arrow_schema, partition_by, metadata, layout, spec, mode)
    if not (plan.resize and plan.snapshot is not None):
        return _commit_files(plan, table, files, checked=checked, txn=plan.transaction)
    reached("re-size: the table anew")
    # the table anew records no version of its writer (see _resized_empty)
    txn = None if plan.transaction is None else replace(plan.transaction, after=NEVER)
    try:
        return _commit_files(plan, table, files, checked=checked, txn=txn)
    except Exception as error:  # whatever stopped it: the first commit has landed, and the error says so
        raise IncompleteWriteError(
            f"the re-size of {plan.location.uri} committed its first step, version {checked} (the table anew "
            f"with the new codecs and no rows), but not its rows: {error} Run the re-size again to complete it "
            "(a mirror's sync refuses the table until then)"
        ) from error


@dataclass(frozen=True)
class _Commit:
    """What one commit writes: its actions, the schema and partitioning its files were written
    with, its commit info, the table's layout they were checked against, the statistics they
    record, and its mode."""

    actions: list[AddAction | RemoveAction]
    arrow_schema: pa.Schema
    partition_by: list[str]
    metadata: Mapping[str, Any]
    layout: TableLayout
    spec: StatsSpec
    mode: _CommitMode


def _commit_files(
    plan: WritePlan, table: DeltaTable, files: _Commit, *, checked: int | None, txn: AppTransaction | None
) -> tuple[int, bool]:
    """`commit`'s loop: the next version, checked anew each time another writer won the last one."""
    actions, arrow_schema, partition_by, layout = files.actions, files.arrow_schema, files.partition_by, files.layout
    transaction = [Transaction(app_id=txn.app_id, version=txn.version)] if txn is not None else None
    properties = CommitProperties(
        custom_metadata=dict(files.metadata), app_transactions=transaction, max_commit_retries=0
    )
    for attempt in range(COMMIT_ATTEMPTS):
        # Spark's job ran since the table was read, or another writer won the last attempt:
        # load the commits made meanwhile (the same handle, updated) and check them.
        table.update_incremental()
        read_version = int(table.version())
        current = _version(plan, read_version)
        if txn is not None and txn.recorded_in(current.transaction_version(txn.app_id)):
            return read_version, False
        if txn is not None:  # a write planned from a version of its writer commits only on it
            txn.check_base(current.transaction_version(txn.app_id), plan.location.uri)
        if read_version != checked:
            _check_unchanged(plan, current, arrow_schema, layout, files.spec)
            _check_replaced(plan, current)
            checked = read_version
        if _commit_once(
            table,
            actions,
            properties,
            mode=files.mode,
            partition_by=partition_by,
            current=current,
            location=plan.location,
        ):
            table.update_incremental()  # the handle does not follow its own commits
            return int(table.version()), True
        time.sleep(random.uniform(0, 0.05 * 2**attempt))
    raise ConcurrentWriteError(
        f"{COMMIT_ATTEMPTS} commits to {plan.location.uri} in a row lost to other writers' commits; "
        "nothing of this write was committed (its files are orphans for vacuum): run it again"
    )


def _version(plan: WritePlan, version: int) -> Snapshot:
    """The core's snapshot of ``version``, the one the committing handle holds: the plan's own
    when the table has not moved since it was planned (the log is not read again)."""
    if plan.snapshot is not None and plan.snapshot.version == version:
        return plan.snapshot.delta
    return read_delta_snapshot(plan.location, version)


def _commit_base(
    plan: WritePlan, arrow_schema: pa.Schema, partition_by: list[str]
) -> tuple[DeltaTable, int | None, _CommitMode]:
    """The table a commit goes to (created first when the plan found none), the version whose
    changes were already checked (None: none yet), and the commit's mode."""
    checked: int | None
    if plan.resize and plan.snapshot is not None:
        table = _resized_empty(plan, arrow_schema, partition_by)
        return table, int(table.version()), "append"
    if plan.snapshot is not None:
        table, checked, joins_table = rs.open_table(plan.location), plan.snapshot.version, True
    else:
        table, created = _create_table(plan, arrow_schema, partition_by)
        # a table another writer created meanwhile is checked like one that changed, against
        # the table this write would have created
        checked, joins_table = (int(table.version()), False) if created else (None, True)
    return table, checked, "overwrite" if plan.mode == "overwrite" and joins_table else "append"


def _resized_empty(plan: WritePlan, arrow_schema: pa.Schema, partition_by: list[str]) -> DeltaTable:
    """A re-size's first commit: the table anew, empty, with the plan's codecs and schema (its
    older versions keep theirs); its files follow in the next commit, milliseconds later.

    delta-rs takes custom properties only when it creates a table, so a re-size is two commits.
    The first records its writer's version as ``NEVER`` (the table holds no version of the
    writer until its rows land): a sync's windows refuse such a mirror, and the re-size run
    again completes it. It lands only on the version this write checked, the next one.

    Raises:
        ConcurrentWriteError: another writer moved the table, or its writer's version, since the
            write was planned; nothing was committed. Or another writer's commit landed just
            before this one: then the table is re-created and empty, and the message says so.
    """
    location = plan.location
    txn = plan.transaction
    current = read_delta_snapshot(location)
    if txn is not None:
        view = snapshot_of(current, location.uri, location.storage_options)
        txn.check_base(view.transaction_version(txn.app_id), location.uri)
    marker = [Transaction(app_id=txn.app_id, version=NEVER)] if txn is not None else None
    try:
        table = rs.create_table(
            location,
            Schema.from_arrow(arrow_schema),
            partition_by=partition_by,
            configuration=plan.properties,
            commit_properties=CommitProperties(
                custom_metadata={**plan.commit_info, "spark_mlt.operation": "resize"},
                app_transactions=marker,
                max_commit_retries=0,
            ),
            replace=True,
        )
    except DeltaError as error:  # (a CommitFailedError too)
        reason = redact(str(error), location.storage_options)
        if read_delta_snapshot(location).version == current.version:  # nobody else committed: not a race
            raise StorageError(f"the re-size's commit to {location.uri} failed: {reason}") from None
        raise ConcurrentWriteError(
            f"the re-size of {location.uri} lost its commit to another writer's ({reason}); nothing of it was "
            "committed: run it again"
        ) from None
    if int(table.version()) != current.version + 1:
        raise IncompleteWriteError(
            f"the re-size of {location.uri} committed its first step, version {table.version()} (the table anew "
            f"with the new codecs and no rows), after another writer's commit that landed since version "
            f"{current.version}, which it checked; its rows were not committed. Run the re-size again to complete "
            "it (a mirror's sync refuses the table until then)"
        )
    return table


def _commit_once(
    table: DeltaTable,
    actions: list[AddAction | RemoveAction],
    properties: CommitProperties,
    *,
    mode: _CommitMode,
    partition_by: list[str],
    current: Snapshot,
    location: Location,
) -> bool:
    """Tries to write the version after ``current`` (the version the handle holds); returns
    False when another writer took it.

    The commit carries the table's own schema (with its column mapping and generation
    metadata), so it adds files and never rewrites the table's metadata. On a table with v2
    checkpoints no checkpoint is written (delta-rs writes classic ones).

    Raises:
        StorageError: the commit failed and nobody else committed (not a race).
    """
    try:
        table.create_write_transaction(
            actions,
            mode,
            table.schema(),
            partition_by=partition_by or None,
            commit_properties=properties,
            post_commithook_properties=_post_commit(current),
        )
    except CommitFailedError as error:
        table.update_incremental()
        if int(table.version()) == current.version:
            raise StorageError(
                f"the commit to {location.uri} failed: {redact(str(error), location.storage_options)}"
            ) from None
        return False
    return True


def _check_unchanged(
    plan: WritePlan, current: Snapshot, arrow_schema: pa.Schema, layout: TableLayout, spec: StatsSpec
) -> None:
    """Refuses to commit when another writer changed what the staged files were checked
    against: the protocol (a feature this path cannot keep), the rules or column names, the
    codecs, the schema, or the columns whose statistics the files record (a statistics column
    that a file has no statistics of loses the file's rows in readers built on delta-rs)."""
    location = plan.location
    check_writable(current)
    view = snapshot_of(current, location.uri, location.storage_options)
    merge_codecs(location.uri, view.codecs, plan.codecs)
    check_schema(view, arrow_schema)
    if current.layout != layout:
        raise ConcurrentWriteError(
            f"another writer changed the rules or column names of the Delta table at {location.uri} "
            "(constraints, generated columns, column mapping) while this write ran; nothing of it was "
            "committed (its files are orphans for vacuum): run it again"
        )
    if _stats_spec(layout, current) != spec:
        raise ConcurrentWriteError(
            f"another writer changed which columns the files of the Delta table at {location.uri} record statistics "
            "for (delta.dataSkipping* properties, deletion vectors) while this write ran; nothing of it was "
            "committed (its files are orphans for vacuum): run it again"
        )


def _post_commit(current: Snapshot) -> PostCommitHookProperties | None:
    """No checkpoint (nor log cleanup) on a table with v2 checkpoints: delta-rs writes classic
    checkpoints, which such a table must not get. Checkpoints are optional; readers replay the
    commits after the last v2 checkpoint."""
    if "v2Checkpoint" in current.features.writer:
        return PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    return None


def _create_table(plan: WritePlan, arrow_schema: pa.Schema, partition_by: list[str]) -> tuple[DeltaTable, bool]:
    """Creates the table (version 0: schema and properties, no data) and returns its handle and
    True; or, when another writer created it first, a handle on that table and False."""
    location = plan.location
    try:
        table = rs.create_table(
            location,
            Schema.from_arrow(arrow_schema),
            partition_by=partition_by,
            configuration=plan.properties,
            commit_properties=CommitProperties(custom_metadata=dict([CREATE_MARKER])),
        )
    except Exception:
        if not DeltaLog(location).exists():
            raise
    else:
        return table, True
    # Another writer created the table while this write ran: open it (a new handle, as the
    # table did not exist when the write was planned) and check it as if it had existed.
    if plan.mode == "error":  # it was created while this write ran
        raise refuse_existing_table(location.uri)
    table = rs.open_table(location)
    snapshot = snapshot_of(read_delta_snapshot(location, int(table.version())), location.uri, location.storage_options)
    merge_codecs(location.uri, snapshot.codecs, plan.codecs)
    check_schema(snapshot, arrow_schema)
    return table, False


def _remove_spark_markers(location: Location, staging: str) -> None:
    """Removes Spark's ``_SUCCESS`` and ``.crc`` files from a committed staging folder: not table data."""
    for info in location.files(staging):
        name = info.path.rsplit("/", 1)[-1]
        if name == "_SUCCESS" or name.endswith(".crc"):
            location.remove_file(info.path)


def check_jar_free_write(snapshot: TableSnapshot, mode: WriteMode) -> None:
    """Refuses a jar-free write the table's protocol (or ``delta.appendOnly``) forbids.

    Raises:
        TableFeatureError: naming the feature and the way forward.
    """
    check_writable(snapshot.delta)
    if mode == "overwrite" and snapshot.delta.config.append_only:
        raise TableFeatureError(
            f"mode='overwrite' would remove rows from the Delta table at {snapshot.path}, which is append-only "
            "(delta.appendOnly = true); append instead, or turn it off: "
            "ALTER TABLE ... SET TBLPROPERTIES ('delta.appendOnly' = 'false')",
            feature="appendOnly",
            parameter="mode",
        )


class DeltaRs:
    """The jar-free [`DeltaBackend`][spark_mlt.storage.backends.base.DeltaBackend]: Spark reads and
    writes the Parquet files, spark-mlt's Delta core reads the log, delta-rs commits; a key
    replacement rewrites the candidate files the statistics name (`spark_mlt.storage.keys`)."""

    name: BackendName = "delta-rs"

    def check_writable(self, snapshot: TableSnapshot, mode: WriteMode) -> None:
        check_jar_free_write(snapshot, mode)

    def create_table(
        self,
        spark: SparkSession,
        name: str,
        schema: StructType,
        partition_by: Sequence[str],
        properties: Mapping[str, str],
    ) -> None:
        raise TableError(
            f"path {name!r}: a new catalog table is created through delta-spark (Spark SQL); "
            "backend='delta-rs' can only write to a catalog table that exists",
            parameter="path",
        )

    def write(self, df: DataFrame, plan: WritePlan) -> DeltaWriteResult:
        return write(df, plan)

    def read(self, spark: SparkSession, snapshot: TableSnapshot, *, files: Sequence[str] | None = None) -> DataFrame:
        chosen = None if files is None else [snapshot.delta.files[path] for path in files]
        return scan_snapshot(spark, snapshot.delta, files=chosen)

    def read_version(self, spark: SparkSession, location: Location, version: int | None) -> DataFrame:
        return scan_snapshot(spark, read_delta_snapshot(location, version))

    def read_changes(self, spark: SparkSession, feed: FeedRange) -> DataFrame:
        return read_feed(spark, feed)

    def feed_rows(self, feed: FeedRange) -> int | None:
        return feed_rows(feed)  # from the feed files' footers

    def key_rows(
        self,
        spark: SparkSession,
        snapshot: TableSnapshot,
        keys: DataFrame,
        key: tuple[str, ...],
        *,
        values: Any,
        few: bool,
    ) -> KeyedRows:
        candidates = candidate_files(spark, snapshot, keys, key, values)  # (a search needs no distinct keys)
        return KeyedRows(
            snapshot, key, keys.distinct(), scan_files(spark, snapshot, candidates), candidates, self, few=few
        )

    def replace_keys(
        self, rows: DataFrame, keyed: KeyedRows, plan: WritePlan, *, max_file_rows: int | None, row_count: int | None
    ) -> DeltaWriteResult:
        rewritten = rewrite_rows(rows.select(*keyed.rows.columns), keyed, max_file_rows, row_count)
        return write(rewritten, replace(plan, replaces=tuple(keyed.candidates or ())))

    def blank_keys(self, keyed: KeyedRows, plan: WritePlan) -> None:
        blanked = keyed.held.withColumn(keyed.key[0], F.lit(None).cast("string"))
        self.replace_keys(blanked, keyed, plan, max_file_rows=None, row_count=None)

    def purge(self, spark: SparkSession | None, location: Location) -> None:
        raise MLTError(
            f"{location.uri} has deleted rows in deletion vectors, whose bytes stay in its data files until a purge "
            "rewrites them, and purging needs Delta's jars: run REORG TABLE delta.`<path>` APPLY (PURGE) (or this "
            "command in a session with Delta's jars), then this command again"
        )

    def vacuum(
        self,
        spark: SparkSession | None,
        location: Location,
        *,
        retention_hours: float | None,
        dry_run: bool,
        allow_short_retention: bool,
    ) -> Vacuumed:
        snapshot = read_delta_snapshot(location)
        check_writable(snapshot, operation="vacuum")
        kept_ms = retention_ms(retention_hours, snapshot.config)
        if not dry_run:
            own = snapshot.config.deleted_file_retention_ms
            check_short_retention(location.uri, kept_ms, own, allow=allow_short_retention)
        files = vacuum_files(snapshot, retention_ms=kept_ms, now_ms=int(time.time() * 1000))
        if not dry_run:
            for name in files:
                location.remove_file(location.path(name))
        return Vacuumed(files, kept_ms)


#: The jar-free backend.
DELTA_RS = DeltaRs()
