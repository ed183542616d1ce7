"""Where a value of an id column is held: a tokenized table (a mirror), its quarantine, its
vocabulary (and a mirror's value counts), and their files that storage still holds.

[`find_value`][spark_mlt.batch.read.find.find_value] answers a data engineer's "is customer 42
(alice@example.com) really gone?" after a sync deleted it (docs/sync.md: erasure step by step):
the rows of each table's current version that hold it, whether its vocabulary still has the key,
and the files that no current version reads but storage keeps until ``spark-mlt erase --apply``.

Design decisions, and why:

* No Spark: each table's version is read through the Delta core (`spark_mlt.delta`) and its data
  files with pyarrow, one column, file by file (in parallel), and files whose statistics exclude
  the value are not opened (`spark_mlt.delta.stats`, the bounds the sync prunes with). A question
  about one value needs no cluster, only the storage.
* A row is matched on the raw id column where the table keeps it, else on its token column: the
  id encoded with the table's codec (a string key's id from its vocabulary) and laid out as the
  column stores it (packed bigint or array<int>), so a table without raw ids is searched too.
* Deletion vectors: a row a vector deletes is not in the current version (Delta's readers leave
  it out), but its bytes stay in the data file until a purge, so it is listed as pending, like
  the files the tables' commits removed
  ([`pending_erasures`][spark_mlt.storage.maintenance.pending_erasures]) until a vacuum.
* An erased vocabulary key keeps its id with a null key: the key is ``erased`` when a file still
  in storage holds it and the current vocabulary holds its id keyless. Once those files are
  vacuumed nothing tells an erased key from one never seen: ``absent``.

What it cannot see: the source table and its change files (``_change_data``), the Delta logs'
file statistics (a column's minimum and maximum, a string's first 32 characters, until the log's
retention), and copies outside these tables.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyspark
from pyspark.sql.pandas.types import from_arrow_schema

from spark_mlt.batch.mirror.tables import Mirror
from spark_mlt.codec import MLTCodec
from spark_mlt.column.layouts import column_layout
from spark_mlt.delta.features import check_readable
from spark_mlt.delta.fs import Location
from spark_mlt.delta.read.deletion_vectors import read_deleted_rows
from spark_mlt.delta.schema import TableLayout
from spark_mlt.delta.stats import column_bounds, parse_stats
from spark_mlt.errors import InvalidIdError, MissingCodecError, MLTError, MLTTypeError, TableError, TableSchemaError
from spark_mlt.options import TOKEN_SUFFIX
from spark_mlt.storage import TableSnapshot, pending_erasures, read_snapshot, table_exists

__all__ = ["find_value"]

#: Files read at once (an object store's latency, not the CPU, is what they wait for).
_READERS = 8

Status = Literal["held", "pending", "nowhere"]


@dataclass(frozen=True)
class _Match:
    """What a row holds to match: ``value`` in the logical column ``column`` (a tuple: the
    tokens of an array<int> column), and the column whose values of the matching rows are
    collected (``collect``), if any."""

    column: str
    value: int | str | tuple[int, ...]
    collect: str | None = None


@dataclass(frozen=True)
class _Found:
    """The rows of one data file that match: how many, and their ``collect`` values."""

    path: str
    rows: int
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class _Hits:
    """One table's answer: its version, the files whose current rows match (``current``),
    those whose deletion vectors hide matching rows (``hidden``) and the removed files still in
    storage that hold some, each with when a vacuum may delete it (``removed``)."""

    path: str
    version: int
    current: tuple[_Found, ...] = ()
    hidden: tuple[_Found, ...] = ()
    removed: tuple[tuple[_Found, str], ...] = ()

    @property
    def rows(self) -> int:
        return sum(found.rows for found in self.current)

    def pending(self) -> list[dict[str, Any]]:
        """The pending entries of the JSON answer."""
        hidden = [
            {"table": self.path, "file": f.path, "rows": f.rows, "kind": "deletion_vector", "deletable_after": None}
            for f in self.hidden
        ]
        removed = [
            {"table": self.path, "file": f.path, "rows": f.rows, "kind": "removed", "deletable_after": after}
            for f, after in self.removed
        ]
        return removed + hidden


def find_value(
    path: str,
    column: str,
    value: int | str,
    *,
    quarantine: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Where ``value`` of the id column ``column`` is held, in a tokenized table (a mirror), its
    quarantine and its vocabulary: rows of their current versions, and files no current version
    reads that storage still holds (removed files not yet vacuumed, rows deletion vectors hide).
    No Spark: the tables are read with the Delta core and pyarrow.

    Args:
        path: the table: a path, a URI or a catalog table's name.
        column: an id column of the table (one it stores a codec for).
        value: an id (an integer, or its text) or, for a string key column, the key.
        quarantine: the table's quarantine (default ``<path>_quarantine``; none if it does not
            exist).
        storage_options: the store's settings.

    Returns:
        A JSON-ready dict: ``path``, ``column``, ``value``, ``id`` (the id the tokens encode:
        the value, or the key's vocabulary id; null when unknown), ``table`` (``version``,
        ``matched_on``: the raw column or the token column, ``rows``, ``files``),
        ``quarantine`` (``path``, ``version``, ``rows``, ``files``; null without one),
        ``vocabulary`` (string keys: ``path``, ``version``, ``status``: ``held``, ``erased``,
        ``absent`` or ``missing`` (no vocabulary table), ``id``; null for an integer column),
        ``pending`` (per file: ``table``, ``file``, ``rows``, ``kind``: ``removed`` or
        ``deletion_vector``, ``deletable_after``), ``status`` (``held``, ``pending`` or
        ``nowhere``) and a one-line ``verdict``.

    Raises:
        MissingCodecError: ``column`` is not an id column of the table (the message names the
            id columns and the nearest names).
        MLTError: ``value`` is no whole number for an integer id column.
        TableFeatureError: a table uses a feature the jar-free reader cannot read exactly.

    Example::

        find_value("/lake/customers_mlt", "email", "alice@example.com")["verdict"]
        # 'gone from every current version; 2 file(s) still hold it until spark-mlt erase --apply run after ...'
    """
    snapshot = read_snapshot(path, storage_options=storage_options)
    codec = _codec_of(snapshot, column)
    tables = Mirror.at(str(path), quarantine)
    vocabularies = tables.vocabularies(snapshot)
    keyed = column in vocabularies
    wanted = _checked_value(value, column, keyed=keyed)
    found: list[_Hits] = []
    vocabulary: dict[str, Any] | None = None
    ident: int | None = None if keyed else int(wanted)
    if keyed:
        vocabulary, ident, hits = _vocabulary(vocabularies[column], str(wanted), storage_options)
        found += hits
        counted = tables.counts(column)  # a mirror's value counts: their removed files
        if table_exists(counted, storage_options=storage_options):
            found.append(_search(read_snapshot(counted, storage_options=storage_options), _Match("key", str(wanted))))
    table, matched_on = _table(snapshot, column, wanted, ident, codec)
    found.append(table)
    side = tables.quarantine
    queue: dict[str, Any] | None = None
    if table_exists(side, storage_options=storage_options):
        held = _search(read_snapshot(side, storage_options=storage_options), _Match(column, wanted))
        found.append(held)
        queue = {"path": held.path, "version": held.version, "rows": held.rows, "files": _paths(held)}
    pending = [entry for hits in found for entry in hits.pending()]
    status, verdict = _verdict(table.rows, queue, vocabulary, pending)
    return {
        "path": snapshot.path,
        "column": column,
        "value": wanted,
        "id": ident,
        "table": {"version": table.version, "matched_on": matched_on, "rows": table.rows, "files": _paths(table)},
        "quarantine": queue,
        "vocabulary": vocabulary,
        "pending": pending,
        "status": status,
        "verdict": verdict,
    }


def _codec_of(snapshot: TableSnapshot, column: str) -> MLTCodec:
    """The codec of id column ``column``.

    Raises:
        MissingCodecError: the table stores none for it (naming its id columns and the nearest).
    """
    codec = snapshot.codecs.get(column)
    if codec is not None:
        return codec
    known = sorted(snapshot.codecs)
    near = difflib.get_close_matches(column, [*known, *(f"{c}{TOKEN_SUFFIX}" for c in known)], n=3)
    hint = f"; did you mean {' or '.join(repr(name.removesuffix(TOKEN_SUFFIX)) for name in near)}?" if near else ""
    raise MissingCodecError(
        f"column {column!r} is not an id column of the table at {snapshot.path} "
        f"(its id columns: {', '.join(known) or 'none'}){hint}",
        parameter="column",
    )


def _checked_value(value: object, column: str, *, keyed: bool) -> int | str:
    """``value`` as the column holds it: a key's text, or an integer id (its text parsed).

    Raises:
        MLTTypeError: ``value`` is neither an int nor a str.
        MLTError: an integer id column's value is no whole number.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MLTTypeError(f"value must be an id (int) or a key (str); got {value!r}", parameter="value")
    if keyed:
        return str(value)
    try:
        return int(value)
    except ValueError:
        raise MLTError(
            f"value must be a whole number: {column!r} is an integer id column (no key vocabulary); got {value!r}",
            parameter="value",
        ) from None


def _table(
    snapshot: TableSnapshot, column: str, value: int | str, ident: int | None, codec: MLTCodec
) -> tuple[_Hits, str]:
    """The table's hits and the column they were matched on: the raw column where the table
    keeps it, else the token column (nothing can match it when the id is unknown or outside the
    codec's domain).

    Raises:
        TableSchemaError: neither column is there, or the token column holds no stored layout.
    """
    names = snapshot.schema.names
    if column in names:
        return _search(snapshot, _Match(column, value)), column
    tokens = f"{column}{TOKEN_SUFFIX}"
    if tokens not in names:
        raise TableSchemaError(f"the table at {snapshot.path} has a codec for {column!r} but neither it nor {tokens}")
    layout = column_layout(from_arrow_schema(snapshot.schema), tokens)
    if layout not in ("packed", "array"):
        raise TableSchemaError(
            f"{tokens} of the table at {snapshot.path} holds the {layout} layout; find reads packed bigint or "
            "array<int> token columns, as the jobs store them"
        )
    try:
        encoded = None if ident is None else codec.encode([ident])
    except InvalidIdError:  # no row's tokens can encode it
        encoded = None
    if encoded is None:
        return _search(snapshot, None), tokens
    stored: int | tuple[int, ...] = (
        int(codec.pack(encoded)[0]) if layout == "packed" else tuple(int(t) for t in encoded[0])
    )
    return _search(snapshot, _Match(tokens, stored)), tokens


def _vocabulary(
    path: str, key: str, storage_options: Mapping[str, str] | None
) -> tuple[dict[str, Any], int | None, list[_Hits]]:
    """The key's entry of its vocabulary (``status`` and ``id``), the id the tokens encode
    (held or erased), and the vocabulary's hits (for its pending files)."""
    if not table_exists(path, storage_options=storage_options):
        return {"path": path, "version": None, "status": "missing", "id": None}, None, []
    snapshot = read_snapshot(path, storage_options=storage_options)
    hits = _search(snapshot, _Match("key", key, collect="id"))
    held = sorted({int(v) for found in hits.current for v in found.values if v is not None})
    entry = {"path": hits.path, "version": hits.version, "status": "absent", "id": None}
    if held:
        entry.update(status="held", id=held[0])
        return entry, held[0], [hits]
    older = list(hits.hidden) + [found for found, _ in hits.removed]
    ids = sorted({int(v) for found in older for v in found.values if v is not None})
    for ident in ids:  # an erased key: a file still holds it, the current version its id keyless
        keys = _search(snapshot, _Match("id", ident, collect="key"), pending=False)
        values = [v for found in keys.current for v in found.values]
        if values and all(v is None for v in values):
            entry.update(status="erased", id=ident)
            return entry, ident, [hits]
    return entry, None, [hits]


def _search(snapshot: TableSnapshot, match: _Match | None, *, pending: bool = True) -> _Hits:
    """The files of ``snapshot``'s table that hold ``match``: its current version's (rows its
    deletion vectors delete apart) and, with ``pending``, its removed files still in storage.
    ``match`` None (or a column the table lacks): nothing can match.

    Raises:
        TableFeatureError: the version uses a feature the jar-free reader cannot read exactly.
    """
    delta = snapshot.delta
    check_readable(delta, spark_version=pyspark.__version__)
    if match is None or match.column not in delta.layout.logical.names:
        return _Hits(snapshot.path, snapshot.version)
    layout, location = delta.layout, delta.location
    current = [add for add in delta.files.values() if _may_hold(layout, match, add.stats, add.partition_values)]
    removed: list[tuple[str, str, Mapping[str, str | None] | None]] = []
    if pending:
        tombstones = {remove.path: remove for remove in delta.tombstones.values()}
        for entry in pending_erasures(snapshot.path, storage_options=snapshot.storage_options)["removed_files"]:
            tombstone = tombstones.get(entry["path"])
            stats = None if tombstone is None else tombstone.stats
            values = None if tombstone is None else tombstone.partition_values
            if _may_hold(layout, match, stats, values, path=entry["path"]):
                removed.append((entry["path"], entry["deletable_after"], values))

    def read_current(index: int) -> tuple[_Found, _Found]:
        add = current[index]
        rows, values = _matching_rows(location, layout, match, add.path, add.partition_values)
        hidden = np.zeros(rows.size, dtype=np.bool_)
        if add.deletion_vector is not None and add.deletion_vector.cardinality and rows.size:
            hidden = np.isin(rows, read_deleted_rows(add.deletion_vector, location).astype(np.int64))
        return _found(add.path, values, ~hidden), _found(add.path, values, hidden)

    def read_removed(index: int) -> _Found:
        name, _, values = removed[index]
        rows, collected = _matching_rows(location, layout, match, name, values)
        return _found(name, collected, np.ones(rows.size, dtype=np.bool_))

    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        visible = list(pool.map(read_current, range(len(current))))
        gone = list(pool.map(read_removed, range(len(removed))))
    return _Hits(
        snapshot.path,
        snapshot.version,
        current=tuple(kept for kept, _ in visible if kept.rows),
        hidden=tuple(hidden for _, hidden in visible if hidden.rows),
        removed=tuple((found, entry[1]) for found, entry in zip(gone, removed, strict=True) if found.rows),
    )


def _found(path: str, values: Sequence[Any], chosen: npt.NDArray[np.bool_]) -> _Found:
    return _Found(path, int(chosen.sum()), tuple(v for v, keep in zip(values, chosen, strict=True) if keep))


def _paths(hits: _Hits) -> list[str]:
    return [found.path for found in hits.current]


def _may_hold(
    layout: TableLayout,
    match: _Match,
    stats: str | None,
    partition_values: Mapping[str, str | None] | None,
    *,
    path: str = "",
) -> bool:
    """Whether a file may hold ``match``: its partition value is the value's text (a partition
    column), or its statistics do not exclude the value (unknown statistics: it may)."""
    physical = layout.physical_names.get(match.column, match.column)
    if match.column in layout.partition_columns:
        return _partition_value(partition_values, physical, path) == str(match.value)
    if isinstance(match.value, tuple):
        return True
    bounds = column_bounds(parse_stats(stats), (physical,), layout.logical[match.column].dataType)
    if bounds.empty:
        return False
    try:
        return (bounds.low is None or bounds.low <= match.value) and (bounds.high is None or match.value <= bounds.high)
    except TypeError:  # a bound of another type than the value (a key column of numbers): read the file
        return True


def _partition_value(values: Mapping[str, str | None] | None, physical: str, path: str) -> str | None:
    """A file's partition value: its action's, else (a removed file whose action the log no
    longer holds) the ``name=value`` folder of its path."""
    if values is not None:
        return values.get(physical)
    for folder in path.split("/")[:-1]:
        name, sep, text = folder.partition("=")
        if sep and unquote(name) == physical:
            return None if text == "__HIVE_DEFAULT_PARTITION__" else unquote(text)
    return None


def _matching_rows(
    location: Location,
    layout: TableLayout,
    match: _Match,
    path: str,
    partition_values: Mapping[str, str | None] | None,
) -> tuple[npt.NDArray[np.int64], list[Any]]:
    """The indexes (in the file) of the rows of data file ``path`` that hold ``match``, and the
    ``collect`` column's values of those rows (None where the file lacks that column)."""
    physical = layout.physical_names
    column = physical.get(match.column, match.column)
    collect = None if match.collect is None else physical.get(match.collect, match.collect)
    with location.filesystem.open_input_file(_filesystem_path(location, path)) as source:
        parquet = pq.ParquetFile(source)
        names = set(parquet.schema_arrow.names)
        if match.column in layout.partition_columns:  # _may_hold compared the partition value
            rows = np.arange(parquet.metadata.num_rows, dtype=np.int64)
            if _partition_value(partition_values, column, path) != str(match.value):
                rows = rows[:0]
            return rows, [None] * rows.size
        if column not in names:  # a file written before the column was added
            return np.zeros(0, dtype=np.int64), []
        wanted = [column, *([collect] if collect is not None and collect in names and collect != column else [])]
        indexes: list[npt.NDArray[np.int64]] = []
        values: list[Any] = []
        offset = 0
        for group in range(parquet.num_row_groups):
            part = parquet.read_row_group(group, columns=wanted)
            hit = np.flatnonzero(_mask(part.column(column), match.value))
            indexes.append(hit + offset)
            if collect is not None and collect in part.column_names:
                values += part.column(collect).take(pa.array(hit)).to_pylist()
            else:
                values += [None] * hit.size
            offset += part.num_rows
    rows = np.concatenate(indexes).astype(np.int64) if indexes else np.zeros(0, dtype=np.int64)
    return rows, values


def _filesystem_path(location: Location, path: str) -> str:
    """The path in the table's filesystem of a file an action names (relative to the table, or
    absolute in the table's own store: see ``Location.absolute_path``).

    Raises:
        TableError: the file is in another store, which the table's filesystem cannot read.
    """
    resolved = location.data_path(path)
    if resolved is None:
        raise TableError(f"{path} is outside the store of the Delta table at {location.uri}: find cannot read it")
    return resolved


def _mask(column: pa.ChunkedArray, value: int | str | tuple[int, ...]) -> npt.NDArray[np.bool_]:
    """Which values of ``column`` are ``value`` (nulls are not): a scalar compared as the
    column's type, a key's text with a column of other values as text, tokens row by row."""
    if isinstance(value, tuple):
        return np.concatenate([_tokens_mask(chunk, value) for chunk in column.chunks] or [np.zeros(0, np.bool_)])
    if isinstance(value, str) and not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = pc.cast(column, pa.string())
    equal = pc.fill_null(pc.equal(column, pa.scalar(value)), False)
    return np.asarray(equal.to_numpy(zero_copy_only=False), dtype=np.bool_)


def _tokens_mask(chunk: pa.Array, tokens: tuple[int, ...]) -> npt.NDArray[np.bool_]:
    """Which rows of an array<int> chunk are the n ``tokens`` (a null or shorter array is not)."""
    lengths = np.asarray(pc.fill_null(pc.list_value_length(chunk), 0).to_numpy(zero_copy_only=False))
    whole = lengths == len(tokens)
    mask = np.zeros(len(chunk), dtype=np.bool_)
    if not whole.any():
        return mask
    flat = pc.list_flatten(chunk.filter(pa.array(whole))).to_numpy(zero_copy_only=False)
    rows = np.asarray(flat, dtype=np.float64).reshape(-1, len(tokens))  # a null token reads as NaN: no match
    mask[np.flatnonzero(whole)] = (rows == np.asarray(tokens, dtype=np.float64)).all(axis=1)
    return mask


def _verdict(
    rows: int, quarantine: Mapping[str, Any] | None, vocabulary: Mapping[str, Any] | None, pending: list[dict[str, Any]]
) -> tuple[Status, str]:
    """The answer in one word and one line."""
    held = [f"{rows} row(s) of the table"] if rows else []
    if quarantine is not None and quarantine["rows"]:
        held.append(f"{quarantine['rows']} row(s) of its quarantine")
    if vocabulary is not None and vocabulary["status"] == "held":
        held.append(f"its vocabulary (id {vocabulary['id']})")
    if held:
        more = f"; {len(pending)} file(s) no current version reads hold it too" if pending else ""
        return "held", f"held: {', '.join(held)}{more}"
    if pending:
        times = [entry["deletable_after"] for entry in pending if entry["deletable_after"] is not None]
        when = f" run after {max(times)}" if times else ""
        hidden = sum(1 for entry in pending if entry["kind"] == "deletion_vector")
        through = f" ({hidden} through deletion vectors, which a purge removes)" if hidden else ""
        return "pending", (
            f"gone from every current version; {len(pending)} file(s){through} still hold it until "
            f"spark-mlt erase --apply{when}"
        )
    return "nowhere", "nowhere: no current version holds it and no file still in storage does"
