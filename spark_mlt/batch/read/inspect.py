"""What a tokenized Delta table holds: its codecs and token layouts, how much of each codec's
capacity its ids take, version, rows, history, and for a mirror its sync's state.

Everything comes from one [`spark_mlt.storage.read_snapshot`][spark_mlt.storage.read_snapshot] (and,
for a mirror, the log of its source and quarantine); no Spark session is needed, and none is
started: a mirror of a catalog table's source says its next window cannot be read without one.

The commits are read once (the last ``STREAM_HISTORY``, or ``history`` if more): the history
shown, the streaming writers and the mirror's sync state all come from that one read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt.batch.job.capacity import capacity_usage
from spark_mlt.batch.job.report import codec_summary
from spark_mlt.batch.mirror.tables import Mirror
from spark_mlt.column import token_layouts
from spark_mlt.delta.actions import Txn
from spark_mlt.delta.log import Commit
from spark_mlt.errors import ChangeFeedError, MissingTableError, MLTError
from spark_mlt.storage import (
    TableSnapshot,
    check_feed,
    is_table_name,
    read_snapshot,
    table_exists,
)
from spark_mlt.storage.changes import FULL_REFRESH
from spark_mlt.storage.erasure import pending_files
from spark_mlt.storage.maintenance import pending_erasures
from spark_mlt.storage.properties import NEVER

__all__ = ["inspect_table"]

HISTORY_KEYS = ("version", "timestamp", "operation", "spark_mlt.job", "spark_mlt.rows")


def inspect_table(
    path: str,
    *,
    history: int = 10,
    quarantine: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A table's codecs (p, n, seed, capacity, fingerprint, token layout, packed bits), how much
    of each codec's capacity its ids take (``capacity``), its version, row count, the streaming
    writers that committed to it (their ids and last batch), the erasures pending a vacuum
    (files its commits removed that storage still holds, and rows hidden by deletion vectors:
    see ``pending_erasures``), its last ``history`` commits and, for a mirror that
    ``spark-mlt sync`` writes, its sync's state (``sync``; None for any other table), as a
    JSON-ready dict. ``quarantine``: a mirror's quarantine table, when its sync was given one
    (by default ``<path>_quarantine``).

    ``capacity`` holds per codec column ``used`` (the largest id held + 1, None when the log
    cannot tell), ``capacity``, ``share`` (``used / capacity``, 4 decimals), ``source`` (where
    ``used`` came from, or why it is unknown) and, from a share of ``CAPACITY_WARNING`` (50%)
    on, a ``warning`` that says how to re-size.

    ``sync`` holds ``source`` (the input as the sync was given it), ``source_table_id``,
    ``source_version`` (the version the mirror holds), ``synced_at`` (ISO-8601 UTC time of the
    mirror's commit that reached it), ``mirror_version`` (that commit's version),
    ``last_full_refresh`` (``version``, ``timestamp``, ``source_version`` of the newest full
    refresh in the commits read, or None), ``next_window`` (``"up to date"``, ``{"from", "to"}``
    with ``blocked`` when the source's change data feed cannot cover it, or a sentence: the
    source was replaced, or cannot be read here), ``quarantine`` (``path`` and the
    ``source_version`` it holds) and ``value_counts`` (per string column, the ``path`` and the
    ``source_version`` of its value counts, with a ``note`` when they are not the mirror's).

    Raises:
        MissingTableError: no Delta table at ``path`` (a FileNotFoundError).

    Example::

        info = inspect_table("out/ratings_mlt")
        info["codecs"]["userId"]["layout"]  # 'packed'
        info["capacity"]["userId"]["share"]  # 0.0412
    """
    snapshot = read_snapshot(path, storage_options=storage_options)
    layouts = token_layouts(from_arrow_schema(snapshot.schema), snapshot.codecs)
    read = snapshot.commits(max(history, STREAM_HISTORY))  # once, newest first
    commits = [{key: commit.entries().get(key) for key in HISTORY_KEYS} for commit in read[: max(history, 0)]]
    codecs = {column: codec_summary(codec, layouts.get(column)) for column, codec in snapshot.codecs.items()}
    sync = _sync_state(snapshot, Mirror.at(path, quarantine), read, storage_options)
    return {
        "path": snapshot.path,
        "version": snapshot.version,
        "rows": snapshot.rows,
        "codecs": codecs,
        "capacity": _capacity(snapshot, mirror=sync is not None),
        "streams": _streams(snapshot, read),
        "erasures": pending_erasures(path, storage_options=storage_options),
        "history": commits,
        "sync": sync,
    }


#: How far back ``inspect`` looks for streaming writers' and syncs' commits.
STREAM_HISTORY = 10_000


def _streams(snapshot: TableSnapshot, commits: Sequence[Commit]) -> list[dict[str, Any]]:
    """The streaming writers that committed to the table (in its last ``STREAM_HISTORY``
    commits): each writer's id and the last batch the table holds (its transaction version)."""
    found = (commit.metadata.get("spark_mlt.writer") for commit in commits)
    writers = {str(writer) for writer in found if writer}
    return [{"writer": writer, "last_batch": snapshot.transaction_version(writer)} for writer in sorted(writers)]


def _capacity(snapshot: TableSnapshot, *, mirror: bool) -> dict[str, dict[str, Any]]:
    """Each codec column's usage as JSON, with a warning from ``CAPACITY_WARNING`` on."""
    shown = {}
    for column, usage in capacity_usage(snapshot).items():
        share = usage.share
        entry: dict[str, Any] = {
            "used": usage.used,
            "capacity": usage.capacity,
            "share": None if share is None else round(share, 4),
            "source": usage.source,
        }
        warning = usage.warning("sync" if mirror else "tokenize")
        if warning is not None:
            entry["warning"] = warning
        shown[column] = entry
    return shown


def _sync_state(
    snapshot: TableSnapshot, mirror: Mirror, commits: Sequence[Commit], storage_options: Mapping[str, str] | None
) -> dict[str, Any] | None:
    """A mirror's sync state (see ``inspect_table``), None when no sync wrote the table."""
    transactions = snapshot.delta.transactions
    apps = Mirror.sync_apps(transactions)
    if not apps:
        return None
    # the source followed now: the newest commit's (a replaced source's transaction stays in the log)
    reached = next((c for c in commits if any(a.app_id in apps for a in _transactions(c))), None)
    if reached is not None:
        app = next(a.app_id for a in _transactions(reached) if a.app_id in apps)
    else:  # the commits read are older than it: the latest written, where the writers record when
        app = max(sorted(apps), key=lambda a: transactions[a].last_updated or -1)
    held = transactions[app].version
    source = _sync_input(reached, commits)
    refresh = next(
        (c for c in commits if Mirror.is_full_refresh(c.metadata)),
        None,
    )
    source_id = Mirror.source_of(app)
    mirror = dataclasses.replace(mirror, source_id=source_id)
    return {
        "source": source,
        "source_table_id": source_id,
        "source_version": held,
        "synced_at": None if reached is None else _instant(reached.timestamp),
        "mirror_version": None if reached is None else reached.version,
        "last_full_refresh": None if refresh is None else _refresh_entry(refresh),
        "next_window": _next_window(source, source_id, held, storage_options),
        "quarantine": _quarantine(mirror, held, storage_options),
        "value_counts": {
            column: _value_counts(mirror, column, held, storage_options) for column in mirror.vocabularies(snapshot)
        },
    }


def _transactions(commit: Commit) -> list[Txn]:
    return [action for action in commit.actions if isinstance(action, Txn)]


def _sync_input(reached: Commit | None, commits: Sequence[Commit]) -> str | None:
    """The source as the sync was given it: the reaching commit's, else the newest sync's."""
    found = [reached] if reached is not None else [c for c in commits if c.metadata.get("spark_mlt.job") == "sync"]
    value = found[0].metadata.get("spark_mlt.input") if found else None
    return None if value is None else str(value)


def _refresh_entry(commit: Commit) -> dict[str, Any]:
    version = commit.metadata.get("spark_mlt.source_version")
    return {
        "version": commit.version,
        "timestamp": _instant(commit.timestamp),
        "source_version": None if version is None else int(version),
    }


def _instant(milliseconds: int) -> str:
    """A commit timestamp (milliseconds since the epoch) in ISO-8601, UTC."""
    moment = dt.datetime.fromtimestamp(milliseconds / 1000, tz=dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _next_window(
    source: str | None, table_id: str, held: int, storage_options: Mapping[str, str] | None
) -> dict[str, Any] | str:
    """The source versions the next sync applies, read from the source's log (jar-free)."""
    latest = _source_snapshot(source, storage_options)
    if isinstance(latest, str):
        return latest
    if latest.table_id != table_id:
        return (
            f"the source {source} is another table now (table id {latest.table_id}; the mirror holds table "
            f"{table_id}): the source was replaced; {FULL_REFRESH}"
        )
    if held == NEVER:
        return (
            "none: a re-size of the mirror stopped between its two commits and left it empty, with its new codecs; "
            "windows refuse it until the re-size, run again, completes it (spark-mlt sync ... --full-refresh --resize)"
        )
    if latest.version <= held:
        return "up to date"
    window: dict[str, Any] = {"from": held + 1, "to": latest.version}
    try:
        check_feed(latest.path, held, latest.version, storage_options=storage_options)
    except ChangeFeedError as error:
        window["blocked"] = str(error)
    return window


def _source_snapshot(source: str | None, storage_options: Mapping[str, str] | None) -> TableSnapshot | str:
    """The source's latest version, or why it cannot be read here (no Spark is started)."""
    if source is None:
        return "unknown: the commits read name no source"
    if is_table_name(source) and SparkSession.getActiveSession() is None:
        return f"unknown: the source {source} is a catalog table, which cannot be read without Spark"
    try:
        return read_snapshot(source, storage_options=storage_options)
    except MissingTableError:
        return f"unknown: no Delta table at the source {source} (a relative path is relative to where the sync ran)"
    except MLTError as error:  # a name the session cannot resolve, a store that refuses
        return f"unknown: the source {source} cannot be read without Spark (inspect starts none): {error}"


def _value_counts(mirror: Mirror, column: str, held: int, storage_options: Mapping[str, str] | None) -> dict[str, Any]:
    """A string column's value counts (``spark_mlt.storage.counts``) and the source version they
    count (their ``...:counts`` transaction)."""
    path = mirror.counts(column)
    missing = "no table here: the next window counts the values anew"
    state = _follower(path, mirror.counts_app, storage_options, missing)
    version = state["source_version"]
    if "note" in state:
        return state
    pending = pending_files(read_snapshot(path, storage_options=storage_options))
    if pending:  # values of count 0 (spark_mlt.storage.erasure), which the next sync erases
        state["erasure_pending"] = (
            f"{len(pending)} file(s) of the counts hold values no row holds any more, which the next sync erases "
            "from the vocabulary before it reads it"
        )
    if version is None or version < held:
        state["note"] = "behind the mirror: the next window counts the values anew"
    elif version > held:
        state["note"] = (
            "ahead of the mirror: a sync stopped between the counts' commit and the mirror's; the next sync "
            "finishes that window first"
        )
    return state


def _quarantine(mirror: Mirror, held: int, storage_options: Mapping[str, str] | None) -> dict[str, Any]:
    """The mirror's quarantine (by default ``<output>_quarantine``) and the source version it
    holds (its ``...:quarantine`` transaction)."""
    missing = "no table here: nothing quarantined yet, or the sync was given another quarantine (--quarantine)"
    state = _follower(mirror.quarantine, mirror.quarantine_app, storage_options, missing)
    version = state["source_version"]
    if "note" in state:
        return state
    if version is None:
        state["note"] = "it holds no sync of this source: the sync was given another quarantine"
    elif version > held:
        state["note"] = (
            "ahead of the mirror: a sync stopped between the quarantine's commit and the mirror's; the next "
            "sync finishes the window"
        )
    return state


def _follower(path: str, app_id: str, storage_options: Mapping[str, str] | None, missing: str) -> dict[str, Any]:
    """A table a mirror's sync keeps beside it: its ``path`` and the source version it holds
    (its ``app_id`` transaction), or with a ``note`` why it has none (``missing``: no table)."""
    state: dict[str, Any] = {"path": path, "source_version": None}
    try:
        found = table_exists(path, storage_options=storage_options)
        table = read_snapshot(path, storage_options=storage_options) if found else None
    except MLTError as error:
        return {**state, "note": f"cannot be read: {error}"}
    if table is None:
        return {**state, "note": missing}
    return {"path": table.path, "source_version": table.transaction_version(app_id)}
