"""The jar-free backend's staging write: Spark writes a write's Parquet files into a fresh
folder of the table, and the driver turns the committed ones into Delta add actions.

Spark writes in parallel with its own committer into a non-hidden subfolder of the table
(``mlt-<time>-<write id>``); nothing is collected to the driver. Spark's ``_SUCCESS`` marker
proves its job commit; with Hadoop's committer algorithm v1 (Spark's default) only the
committed attempt of each task has files there, so retried and speculative tasks cannot add
rows twice. The driver then lists the committed files (skipping hidden paths, as Hadoop's
input formats do, but not the partition folders of a column whose name starts with ``_``) and
reads each Parquet footer for Delta's file statistics (`spark_mlt.delta.stats`).

Example::

    write_staging(rows, plan, "mlt-20260101T000000-0123456789ab", [])
    files = add_actions(plan.location, "mlt-20260101T000000-0123456789ab", PartitionValues([], set()), spec)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow.parquet as pq
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_mlt.column.sqltext import identifier
from spark_mlt.delta.fs import Location
from spark_mlt.delta.partitions import utc_timestamp
from spark_mlt.delta.schema import RULE_MARKER
from spark_mlt.delta.stats import StatsSpec, file_stats
from spark_mlt.errors import ConstraintViolationError, MLTError
from spark_mlt.storage.backends.plan import WritePlan
from spark_mlt.storage.spark_sql import TIMESTAMP_TYPE, session_conf

if TYPE_CHECKING:  # newer deltalake (1.6.6) exports it; spark-mlt only names it in hints
    from deltalake.transaction import RemoveAction

__all__ = [
    "HIVE_NULL",
    "STAGING_PREFIX",
    "PartitionValues",
    "StagedFiles",
    "add_actions",
    "instants_staged_in_utc",
    "write_staging",
]


STAGING_PREFIX = "mlt-"


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class StagedFiles:
    """The committed files of one staging write, as Delta add actions."""

    actions: list[AddAction | RemoveAction]
    rows: int


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


def _hidden(relative: str, partitions: PartitionValues) -> bool:
    """Whether a staged path is not table data: a name starting with ``_`` or ``.`` (Spark's
    ``_temporary`` and ``_SUCCESS``, ``.crc`` files) other than a partition folder, which is named
    ``<column>=<value>`` whatever its column's name starts with (a column ``_p`` has folders ``_p=0``)."""
    *folders, name = relative.split("/")
    return name.startswith(("_", ".")) or any(
        folder.startswith(("_", ".")) and partitions.key(folder) is None for folder in folders
    )


def add_actions(
    location: Location, staging: str, partitions: PartitionValues, spec: StatsSpec, *, keep_empty: bool = True
) -> StagedFiles:
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
    return StagedFiles(actions, rows)


def instants_staged_in_utc(df: DataFrame, timestamps: set[str]) -> DataFrame:
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
class PartitionValues:
    """How a file's partition values are read from its folders (Spark's ``key=value``, both
    escaped; ``__HIVE_DEFAULT_PARTITION__`` for null) and serialised for the log: by physical
    name, a timestamp staged as its UTC wall clock (see ``instants_staged_in_utc``) in the
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
            if value == HIVE_NULL:
                values[key] = None
            else:
                values[key] = utc_timestamp(value) if key in self.timestamps else value
        return values
