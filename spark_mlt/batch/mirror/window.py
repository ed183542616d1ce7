"""A sync window's changes, checked against the rows the mirror holds and reduced to each key's
last row: in Spark, or for a small window on the driver (its keys, change types and versions
collected once), which spares the Spark jobs a window's fixed cost is made of.

The two checks are one rule, tested against each other on random windows
(``tests/batch/mirror/test_sync_overlap.py``): each key's rows, counted from what the mirror (and quarantine)
held, plus each version's inserted rows, less its deleted ones, must stay 0 or 1 after every
version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_mlt.column.sqltext import identifier
from spark_mlt.delta.frames import arrow_frames, local_frame, pandas_frame
from spark_mlt.errors import SourceError
from spark_mlt.storage.changes import CHANGE_TYPE, COMMIT_VERSION, FULL_REFRESH

__all__ = ["LOCAL_WINDOW_ROWS", "WindowChanges", "check_changes", "last_rows", "read_window"]

_ADDED = ("insert", "update_postimage")
_LAST = "__spark_mlt_last"
_NET = "__spark_mlt_net"
_HELD = "__spark_mlt_held"
#: A window of at most this many change rows is checked on the driver: its keys, change types
#: and versions are collected (tens of bytes a row: about 50 MB at the most), the rows
#: themselves stay in Spark. (An update is two change rows: 2M rows are 1M updated keys.)
LOCAL_WINDOW_ROWS = 2_000_000
#: Where a session builds local frames from rows (PySpark 3.5), a window of at most this many
#: collected keys makes its keys a local frame (beyond, a query of the change rows costs less than
#: sending the keys from Python as rows); through Arrow (PySpark 4) every collected window does.
LOCAL_FRAME_KEYS = 100_000
#: Key column types (Spark's ``dtypes``) whose values pandas groups and compares as Spark does.
_LOCAL_TYPES = frozenset({"tinyint", "smallint", "int", "bigint", "string"})


@dataclass(frozen=True)
class WindowChanges:
    """A window's change rows (``changes``, kept by the caller) and, when it is small and its key
    columns are of `_LOCAL_TYPES`, their keys, change types and versions on the driver."""

    changes: DataFrame
    key: tuple[str, ...]
    rows: int
    local: pd.DataFrame | None

    def keys(self) -> DataFrame:
        """The window's distinct keys: a local frame of the collected ones (none null; through
        Arrow, or up to `LOCAL_FRAME_KEYS` as rows), or a Spark query."""
        names = [identifier(c) for c in self.key]
        spark = self.changes.sparkSession
        if self.local is None or (len(self.local) > LOCAL_FRAME_KEYS and not arrow_frames(spark)):
            return self.changes.select(*names).distinct()
        unique = self.local[list(self.key)].dropna().drop_duplicates()
        return self._frame(unique, self.changes.select(*names).schema)

    def _frame(self, frame: pd.DataFrame, schema: StructType) -> DataFrame:
        """Collected key columns (and versions; no nulls) as a local frame of ``schema``."""
        spark = self.changes.sparkSession
        integral = [c == COMMIT_VERSION or self._integral(c) for c in frame.columns]
        if arrow_frames(spark):  # (pandas holds an integer column that had nulls as floats)
            whole = frame.astype({c: "int64" for c, i in zip(frame.columns, integral, strict=True) if i})
            return pandas_frame(spark, whole, schema)
        rows = [
            tuple(int(v) if i else _python(v) for v, i in zip(row, integral, strict=True))
            for row in frame.itertuples(index=False)
        ]
        return local_frame(spark, rows, schema)

    @property
    def values(self) -> list[Any] | None:
        """A single key column's distinct values (no nulls), where collected."""
        if self.local is None or len(self.key) != 1:
            return None
        unique = self.local[self.key[0]].dropna().unique()
        return [int(v) for v in unique] if self._integral(self.key[0]) else [_python(v) for v in unique]

    def _integral(self, column: str) -> bool:
        """Whether the key column is an integer one (pandas holds one with nulls as floats)."""
        return dict(self.changes.dtypes)[column] != "string"

    @cached_property
    def _last(self) -> tuple[int, pd.DataFrame] | None:
        """Of the collected changes, how many are a key's row after the window (an insert or
        update's post-image at the key's last version), and the other added ones (key and
        version); None where the window was not collected."""
        if self.local is None:
            return None
        local, k = self.local, list(self.key)
        added = local[CHANGE_TYPE].isin(_ADDED)
        at_last = local[COMMIT_VERSION] == local.groupby(k, sort=False)[COMMIT_VERSION].transform("max")
        return int((added & at_last).sum()), local.loc[added & ~at_last, [*k, COMMIT_VERSION]]

    @property
    def final_rows(self) -> int | None:
        """How many keys have a row after the window (`last_rows`' rows), where collected."""
        return None if self._last is None else self._last[0]

    @property
    def overtaken_rows(self) -> int | None:
        """How many of the window's added rows a later version of their key overtakes, where
        collected."""
        return None if self._last is None else len(self._last[1])

    def overtaken(self) -> DataFrame | None:
        """Those rows (`overtaken_rows`): their key columns and version, as a local frame; None
        where not collected."""
        if self._last is None:
            return None
        names = [identifier(c) for c in self.key]
        return self._frame(self._last[1], self.changes.select(*names, COMMIT_VERSION).schema)


def read_window(
    changes: DataFrame, key: Sequence[str], *, local_rows: int | None = None, rows: int | None = None
) -> WindowChanges:
    """``changes`` (persisted by the caller) counted (``rows``: how many there are, where the
    caller knows), and when at most ``local_rows`` (None: `LOCAL_WINDOW_ROWS`) their keys, change
    types and versions collected (a job over the kept rows, and one to count them).

    Example::

        window = read_window(changes.persist(), ["customer_id"])
    """
    if rows is None:
        rows = changes.count()
    types = dict(changes.dtypes)
    local = None
    if rows <= (LOCAL_WINDOW_ROWS if local_rows is None else local_rows) and all(types[c] in _LOCAL_TYPES for c in key):
        picked = changes.select(*(identifier(c) for c in key), CHANGE_TYPE, COMMIT_VERSION)
        local = picked.toArrow().to_pandas() if hasattr(picked, "toArrow") else picked.toPandas()
        rows = len(local)
    return WindowChanges(changes, tuple(key), rows, local)


def check_changes(
    window: WindowChanges,
    held: DataFrame | pd.DataFrame,
    source: str,
    *,
    skipped_rows: bool = False,
) -> int:
    """Refuses a window whose changes do not fit a primary key over the rows the mirror holds:
    each key's rows, counted from what the mirror (and quarantine) held, plus each version's
    inserted rows, less its deleted ones, must stay 0 or 1 after every version (a key with two
    resulting rows in one version, an insert of a key that exists, a delete of one that does not;
    with ``skipped_rows`` (``handle_invalid="skip"``: rows of invalid ids are in neither table) a
    key may be missing). Null keys are refused too. Returns how many keys the mirror (or
    quarantine) held that no row holds after the window (a key inserted and deleted within it
    was never held, so is not counted). ``held``: the mirror's (and quarantine's) rows of the
    window's keys, or, for a collected window, their key columns read already (a pandas frame:
    `spark_mlt.storage.keys.held_keys`).

    Raises:
        SourceError: naming the first broken key (null keys first, then by version) and version.
        ValueError: ``held`` is a pandas frame and the window was not collected.

    Example::

        deleted = check_changes(window, keyed.held, "/lake/customers")
    """
    if isinstance(held, pd.DataFrame):
        if window.local is None:
            raise ValueError("held keys read on the driver are checked against a collected window only")
        read = held[list(window.key)]
    else:
        held = held.select(*(identifier(c) for c in window.key))
        if window.local is None:
            return _check_in_spark(window.changes, held, window.key, source, skipped_rows=skipped_rows)
        # the held keys themselves (as many as the window's keys, once each in a valid mirror),
        # counted here: no shuffle
        read = held.toArrow().to_pandas() if hasattr(held, "toArrow") else held.toPandas()
    counts = read.groupby(list(window.key), sort=False).size().rename(_HELD).reset_index()
    return _check_on_driver(window.local, counts, window.key, source, skipped_rows)


def _check_on_driver(
    changes: pd.DataFrame, held: pd.DataFrame, key: Sequence[str], source: str, skipped_rows: bool
) -> int:
    """`check_changes` of a window's collected keys, change types and versions (``changes``)
    against each key's held rows (``held``: the key columns and `_HELD`)."""
    k = list(key)
    null = changes[k].isna().any(axis=1)
    if null.any():
        version = int(changes.loc[null, COMMIT_VERSION].min())
        _refuse({"__keyed": False, COMMIT_VERSION: version}, key, source)
    added = changes[CHANGE_TYPE].isin(_ADDED)
    steps = changes.assign(**{_NET: np.where(added, 1, -1), "__added": added.astype("int64")})
    per = steps.groupby([*k, COMMIT_VERSION], sort=True, as_index=False).agg(
        **{_NET: (_NET, "sum"), "__added": ("__added", "sum")}
    )
    by_key = per.groupby(k, sort=False)
    per["__total"] = by_key[_NET].transform("sum")
    per["__last"] = per[COMMIT_VERSION] == by_key[COMMIT_VERSION].transform("max")
    per[_NET] = by_key[_NET].cumsum()
    if held.empty:  # (an empty frame's columns may have no type to merge on)
        per[_HELD] = 0
    else:
        per = per.merge(held, on=k, how="left")
        per[_HELD] = per[_HELD].fillna(0).astype("int64")
    count = per[_HELD] + per[_NET]
    broken = (count > 1) | (per["__added"] > 1)
    if not skipped_rows:
        broken |= count < 0
    if broken.any():
        first = per[broken].sort_values([COMMIT_VERSION, *k]).iloc[0]
        _refuse({"__keyed": True, **{c: _python(first[c]) for c in first.index}}, key, source)
    gone = per["__last"] & (per[_HELD] > 0) & (per[_HELD] + per["__total"] == 0)
    return int(gone.sum())


def _refuse(bad: Mapping[str, Any], key: Sequence[str], source: str) -> None:
    """Raises the `SourceError` of the first broken change ``bad`` (``__keyed``, the version,
    the key's values, and the counts `_HELD`, `_NET`, ``__added``)."""
    if not bad["__keyed"]:
        raise SourceError(
            f"key: version {bad[COMMIT_VERSION]} of {source} has a row whose key {list(key)} is null; a mirror "
            "needs a key for every row",
            parameter="key",
        )
    what = (
        "two resulting rows"
        if bad["__added"] > 1
        else "an insert of a key the mirror holds"
        if bad[_HELD] + bad[_NET] > 1
        else "a delete of a key the mirror does not hold"
    )
    keys = ", ".join(f"{c}={bad[c]!r}" for c in key)
    raise SourceError(
        f"key: version {bad[COMMIT_VERSION]} of {source} has {what} ({keys}): {list(key)} is not "
        f"the source's primary key, or the mirror no longer matches the source; {FULL_REFRESH} once the key is "
        "unique",
        parameter="key",
    )


def _python(value: Any) -> Any:
    """A NumPy scalar as the Python value Spark's rows hold."""
    return value.item() if isinstance(value, np.generic) else value


def _check_in_spark(
    changes: DataFrame, held: DataFrame, key: Sequence[str], source: str, *, skipped_rows: bool = False
) -> int:
    """`check_changes` in one Spark job over the change rows and the held keys (``held``)."""
    k = [identifier(c) for c in key]
    held = held.groupBy(*k).agg(F.count(F.lit(1)).alias(_HELD))
    added = F.when(F.col(CHANGE_TYPE).isin(*_ADDED), 1).otherwise(-1)
    per_version = changes.groupBy(*k, COMMIT_VERSION).agg(
        F.sum(added).alias(_NET), F.sum(F.when(F.col(CHANGE_TYPE).isin(*_ADDED), 1).otherwise(0)).alias("__added")
    )
    by_key = Window.partitionBy(*k)
    running = by_key.orderBy(COMMIT_VERSION).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    walked = (
        per_version.withColumn("__total", F.sum(_NET).over(by_key))
        .withColumn("__last", F.col(COMMIT_VERSION) == F.max(COMMIT_VERSION).over(by_key))
        .withColumn(_NET, F.sum(_NET).over(running))
        .join(held, list(key), "left")
        .withColumn(_HELD, F.coalesce(F.col(_HELD), F.lit(0)))
    )
    count = F.col(_HELD) + F.col(_NET)
    null = F.lit(False)
    for c in k:
        null = null | F.col(c).isNull()
    broken = null | (count > 1) | (F.col("__added") > 1)
    if not skipped_rows:
        broken = broken | (count < 0)
    # one job: the first broken row (null keys first, then by version) and the deleted keys
    first = F.struct(
        (~null).alias("__keyed"),  # false first
        F.col(COMMIT_VERSION),
        *(F.col(c) for c in k),
        F.col(_HELD),
        F.col(_NET),
        F.col("__added"),
    )
    gone = F.col("__last") & (F.col(_HELD) > 0) & (F.col(_HELD) + F.col("__total") == 0)
    result = walked.agg(
        F.min(F.when(broken, first)).alias("bad"), F.sum(F.when(gone, 1).otherwise(0)).alias("deleted")
    ).first()
    bad = result["bad"] if result is not None else None
    if bad is not None:
        _refuse(bad.asDict(), key, source)
    return int(result["deleted"] or 0) if result is not None else 0


def last_rows(window: WindowChanges, *, names: Sequence[str]) -> DataFrame:
    """Each changed key's row after its last version in the ``window`` (none: deleted there),
    of a window that passed `check_changes` (a key adds at most one row per version). A
    collected window's are its added rows less those it knows are overtaken by a later version
    (none, or a few anti-joined as a local frame: no shuffle); else each key's last version is
    joined back to its rows.

    Example::

        final = last_rows(window, names=source.schema.names)
    """
    changes, key = window.changes, window.key
    k = [identifier(c) for c in key]
    added = F.col(CHANGE_TYPE).isin(*_ADDED)
    overtaken = window.overtaken_rows
    if overtaken is not None and (overtaken <= LOCAL_FRAME_KEYS or arrow_frames(changes.sparkSession)):
        final = changes.where(added)
        stale = window.overtaken() if overtaken else None
        if stale is not None:
            final = final.join(F.broadcast(stale), [*key, COMMIT_VERSION], "left_anti")
    else:
        latest = changes.groupBy(*k).agg(F.max(COMMIT_VERSION).alias(_LAST))
        final = changes.join(latest, list(key)).where((F.col(COMMIT_VERSION) == F.col(_LAST)) & added)
    return final.select(*(identifier(c) for c in names))
