"""delta-rs (the ``deltalake`` package) as the jar-free path's committer: the one place that
opens its ``DeltaTable`` handles.

spark-mlt reads a table's log itself (`spark_mlt.delta.log`, `spark_mlt.delta.snapshot`) and
hands delta-rs only what delta-rs does better: creating a table and committing actions (its
conditional writes on every store, its checkpoints), and reading a table into Arrow for Python
code that has no Spark (the paper's models). A handle is opened where one of those starts, never
to read a table's state: the checks before a commit read the core's snapshot of the version the
handle holds.

Example::

    table = open_table(locate("/data/ratings_mlt"))
    table.create_write_transaction(actions, "append", table.schema())
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deltalake import DeltaTable, Schema
from deltalake.exceptions import DeltaError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from spark_mlt.delta.features import FEATURES
from spark_mlt.delta.fs import Location, redact
from spark_mlt.errors import MissingTableError, StorageError, TableFeatureError

if TYPE_CHECKING:
    import pyarrow.dataset as pads
    from deltalake.transaction import CommitProperties

    from spark_mlt.delta.snapshot import Snapshot

__all__ = ["arrow_dataset", "create_table", "open_table"]


def open_table(location: Location, *, version: int | None = None) -> DeltaTable:
    """A delta-rs handle on the table at ``location`` (``version``: that version, else the latest).

    Raises:
        MissingTableError: there is no Delta table at ``location``.
        StorageError: the store refused the request (the message holds no secret).
        TableFeatureError: delta-rs refuses to open the table: a reader feature it does not
            know, or commits its catalog owns.
    """
    try:
        return DeltaTable(location.uri, version=version, storage_options=location.delta_options)
    except DeltaTableNotFoundError:
        raise MissingTableError(f"no Delta table at {location.uri}", parameter="path") from None
    except (OSError, DeltaError) as error:
        raise _refusal(location, error) from None


def create_table(
    location: Location,
    schema: Schema,
    *,
    partition_by: list[str],
    configuration: Mapping[str, str],
    commit_properties: CommitProperties,
    replace: bool = False,
) -> DeltaTable:
    """Creates the table at ``location`` (version 0: schema and properties, no data) with delta-rs;
    with ``replace``, replaces the table there by such an empty one in one commit (delta-rs'
    ``CREATE OR REPLACE``: its files are removed, its history and application transactions stay).

    Raises:
        DeltaError: delta-rs refused (among others: a table exists there already).
    """
    return DeltaTable.create(
        location.uri,
        schema,
        mode="overwrite" if replace else "error",
        partition_by=partition_by or None,
        configuration=dict(configuration),
        raise_if_key_not_exists=False,
        commit_properties=commit_properties,
        storage_options=location.delta_options,
    )


def arrow_dataset(snapshot: Snapshot) -> pads.Dataset:
    """The version ``snapshot`` holds as a pyarrow dataset, read by delta-rs (which refuses
    tables with column mapping or deletion vectors).

    Raises:
        TableFeatureError, StorageError: as for `open_table`.
    """
    table = open_table(snapshot.location, version=snapshot.version)
    try:
        return table.to_pyarrow_dataset()
    except (OSError, DeltaError) as error:
        raise _refusal(snapshot.location, error) from None


def _refusal(location: Location, error: Any) -> MissingTableError | StorageError | TableFeatureError:
    reason = redact(str(error), location.storage_options)
    refused = _refused_feature(reason)
    if refused is None:
        return StorageError(f"cannot open the Delta table at {location.uri}: {reason}")
    known = FEATURES.get(refused)
    why = f"which delta-rs cannot open ({known.how if known else 'a feature spark-mlt does not know'})"
    forward = known.forward if known else "use a session with Delta's jars (spark-mlt then goes through delta-spark)"
    return TableFeatureError(
        f"the Delta table at {location.uri} uses the reader feature {refused!r}, {why}; {forward}", feature=refused
    )


def _refused_feature(reason: str) -> str | None:
    """The feature for which delta-rs (its kernel) refused to open a table, or None. Its
    errors carry no class of their own for this, so the messages it gives are matched: an
    unknown reader feature, a catalog-managed table, a pyarrow dataset's refusals."""
    if "catalog-managed" in reason:
        return "catalogManaged"
    match = re.search(r"Feature '([^']+)' is not supported|requires reader feature '([^']+)'", reason)
    if match is None:
        return None
    return match[1] or match[2]
