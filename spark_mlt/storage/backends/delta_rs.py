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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import Schema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, PostCommitHookProperties, Transaction
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from spark_mlt.column.sqltext import identifier
from spark_mlt.delta import rs
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.features import check_writable
from spark_mlt.delta.fs import Location, redact
from spark_mlt.delta.log import DeltaLog
from spark_mlt.delta.partitions import utc_timestamp
from spark_mlt.delta.schema import RULE_MARKER, TableLayout, enforce_rules, layout_of, physical_columns
from spark_mlt.delta.snapshot import Snapshot
from spark_mlt.delta.snapshot import read_snapshot as read_delta_snapshot
from spark_mlt.delta.stats import StatsSpec, file_stats, stats_spec
from spark_mlt.errors import (
    ConcurrentWriteError,
    ConstraintViolationError,
    IncompleteWriteError,
    MLTError,
    StorageError,
    TableFeatureError,
)
from spark_mlt.steps import reached
from spark_mlt.storage.backends.plan import (
    DeltaWriteResult,
    WritePlan,
    check_schema,
    refuse_existing_table,
    skipped_write,
    spark_arrow_schema,
)
from spark_mlt.storage.properties import NEVER, AppTransaction, merge_codecs
from spark_mlt.storage.spark_sql import TIMESTAMP_TYPE, session_conf
from spark_mlt.storage.table import CREATE_MARKER, WRITE_ID, snapshot_of

if TYPE_CHECKING:  # newer deltalake (1.6.6) exports it; spark-mlt only names it in hints
    from deltalake import DeltaTable
    from deltalake.transaction import RemoveAction

__all__ = ["STAGING_PREFIX", "write"]

STAGING_PREFIX = "mlt-"
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class _Files:
    """The committed files of one staging write, as Delta add actions."""

    actions: list[AddAction | RemoveAction]
    rows: int


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
    stored = _instants_staged_in_utc(stored, timestamps)
    write_id = uuid.uuid4().hex
    staging = f"{STAGING_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{write_id[:12]}"
    location = plan.location
    with _timed(timings, "spark_write"):
        write_staging(stored, plan, staging, stored_partitions)
    try:
        with _timed(timings, "footers"):
            values = _PartitionValues(stored_partitions, timestamps)
            files = add_actions(location, staging, values, spec, keep_empty=snapshot is None)
            files = _Files([*files.actions, *_remove_actions(plan)], files.rows)
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


def write_staging(df: DataFrame, plan: WritePlan, staging: str, partition_by: list[str]) -> None:
    """Spark writes ``df`` as Parquet into the staging folder; removed again if the job fails.

    Timestamps are written as Parquet's ``TIMESTAMP(MICROS)`` (INT64, the protocol's type) unless
    the session sets ``spark.sql.parquet.outputTimestampType``: Spark's default, INT96, keeps no
    minimum or maximum in a footer, so a file with a timestamp would get no bounds in the log, of
    any column (see `spark_mlt.delta.stats.footer`), and every filter would scan it."""
    location = plan.location
    spark = df.sparkSession
    key, value = TIMESTAMP_TYPE
    conf = {} if spark.conf.get(key, None) is not None else {key: value}
    try:
        writer = df.write.mode("errorifexists").options(**plan.parquet_options)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        with session_conf(spark, conf):
            writer.parquet(location.spark_path(staging))
    except BaseException as error:
        location.remove_folder(staging)
        broken = _broken_rule(error)
        if broken is not None:
            raise ConstraintViolationError(f"{broken}; nothing was written to {location.uri}") from None
        raise
    if not location.exists(f"{staging}/_SUCCESS"):
        location.remove_folder(staging)
        raise MLTError(
            f"Spark did not commit the write to {location.spark_path(staging)} (no _SUCCESS marker); "
            "nothing was committed"
        )


def _broken_rule(error: BaseException) -> str | None:
    """The broken rule's message in a failed write job's error (see ``enforce_rules``), or None."""
    text = str(error)
    start = text.find(RULE_MARKER)
    if start < 0:
        return None
    line = text[start + len(RULE_MARKER) :].split("\n", 1)[0]
    return line.split(" SQLSTATE:", 1)[0].strip()


def _hidden(relative: str, partitions: _PartitionValues) -> bool:
    """Whether a staged path is not table data: a name starting with ``_`` or ``.`` (Spark's
    ``_temporary`` and ``_SUCCESS``, ``.crc`` files) other than a partition folder, which is named
    ``<column>=<value>`` whatever its column's name starts with (a column ``_p`` has folders ``_p=0``)."""
    *folders, name = relative.split("/")
    return name.startswith(("_", ".")) or any(
        folder.startswith(("_", ".")) and partitions.key(folder) is None for folder in folders
    )


def add_actions(
    location: Location, staging: str, partitions: _PartitionValues, spec: StatsSpec, *, keep_empty: bool = True
) -> _Files:
    """Add actions for the data files of Spark's committed job, with the statistics ``spec``
    names read from their footers; a file of no rows is removed instead unless ``keep_empty``
    (Spark writes one for a job without rows; a table that exists needs none).

    Hidden paths (``_temporary`` of a straggling task attempt, ``.crc`` files) are skipped, as
    Hadoop's input formats skip them.
    """
    actions: list[AddAction | RemoveAction] = []
    rows = 0
    for info in location.files(staging):
        relative = location.relative(info.path)
        if not relative.endswith(".parquet") or _hidden(relative, partitions):
            continue
        with location.filesystem.open_input_file(info.path) as source:
            metadata = pq.read_metadata(source)
        if not metadata.num_rows and not keep_empty:
            location.remove_file(info.path)
            continue
        rows += metadata.num_rows
        actions.append(
            AddAction(
                path=relative,  # raw: delta-rs percent-encodes it itself
                size=info.size,
                partition_values=partitions.of(relative),
                modification_time=info.mtime_ns // 1_000_000,
                data_change=True,
                stats=file_stats(metadata, spec),
            )
        )
    return _Files(actions, rows)


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


def _instants_staged_in_utc(df: DataFrame, timestamps: set[str]) -> DataFrame:
    """``df`` with each timestamp partition column as its UTC wall clock (a TIMESTAMP_NTZ).

    Spark names a partition folder after the value as its session shows it, a timestamp in the
    session's time zone, where the hour a fall-back to standard time repeats names two instants
    alike (01:30 in New York is 05:30Z and 06:30Z on 2024-11-03): no parser can tell them apart.
    The UTC wall clock names each instant once, in any session (and is what readers that take
    partition values from folder names, as Polars does, read as the instant); it is computed
    from the instant's microseconds, so the session's time zone is not touched (the user's own
    expressions in ``df`` compute as they did). The files do not hold partition columns. The
    microseconds are added as a day-time interval: Spark 3.5's ``timestampadd`` takes an INT
    count, and wrapped them (2024-01-01 became 1970-01-01T00:04:30)."""
    if not timestamps:
        return df
    micros = "CAST(unix_micros({}) AS DECIMAL(38, 0)) / 1000000"
    utc = f"TIMESTAMP_NTZ'1970-01-01 00:00:00' + make_dt_interval(0, 0, 0, {micros})"
    return df.select(
        *(
            F.expr(utc.format(identifier(name))).alias(name) if name in timestamps else F.col(identifier(name))
            for name in df.columns
        )
    )


@dataclass(frozen=True)
class _PartitionValues:
    """How a file's partition values are read from its folders (Spark's ``key=value``, both
    escaped; ``__HIVE_DEFAULT_PARTITION__`` for null) and serialised for the log: by physical
    name, a timestamp staged as its UTC wall clock (see ``_instants_staged_in_utc``) in the
    protocol's UTC form (see `spark_mlt.delta.partitions`)."""

    columns: list[str]
    timestamps: set[str]

    def key(self, folder: str) -> str | None:
        """The partition column a folder is named after (``<column>=<value>``), or None."""
        key = unquote(folder.split("=", 1)[0]) if "=" in folder else None
        return key if key in self.columns else None

    def of(self, relative: str) -> dict[str, str | None]:
        values: dict[str, str | None] = {}
        for folder in relative.split("/")[:-1]:
            key = self.key(folder)
            if key is None:
                continue
            value = unquote(folder.split("=", 1)[1])
            if value == _HIVE_NULL:
                values[key] = None
            else:
                values[key] = utc_timestamp(value) if key in self.timestamps else value
        return values


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
