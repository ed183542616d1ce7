"""Delta table features, and the protocol gate of the jar-free path.

Without Delta's jars, delta-rs reads the log and Spark reads and writes the Parquet files. That is
exact only for the table features this path implements, so every jar-free read
([`check_readable`][spark_mlt.delta.features.check_readable]), write and vacuum
([`check_writable`][spark_mlt.delta.features.check_writable]) first reads the table's protocol and
refuses, with [`TableFeatureError`][spark_mlt.errors.TableFeatureError], a table that uses anything
else: a wrong row costs more than a refusal. The error names the table, the feature and the way
forward: a session with Delta's jars (spark-mlt then reads and writes through delta-spark, which
implements every feature), or the table property or command that turns the feature off.

Which features a table uses: a protocol with table features (reader version 3, writer
version 7) lists them; an older protocol implies those of its versions (writer 2: appendOnly
and invariants, 3: checkConstraints, 4: changeDataFeed and generatedColumns, 5: columnMapping,
6: identityColumns; reader 2: columnMapping), and of those only the ones the table's metadata
turns on count (a writer-6 table without an identity column has none to keep).

`FEATURES` is the one list of what the jar-free path does
with each feature; the feature table of docs/storage.md (Guarantees) is checked against it by the
tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from spark_mlt.capabilities import spark_line
from spark_mlt.delta import actions
from spark_mlt.delta.config import TableConfig
from spark_mlt.delta.fs import Location
from spark_mlt.delta.schema import schema_fields, unenforceable_rules
from spark_mlt.errors import TableFeatureError

__all__ = [
    "FEATURES",
    "Feature",
    "TableOperation",
    "TableProtocol",
    "check_readable",
    "check_writable",
    "protocol_of",
]

#: What the jar-free path does with a table, for the protocol gate of
#: [`check_writable`][spark_mlt.delta.features.check_writable].
TableOperation = Literal["write", "vacuum"]

_JARS = "use a session with Delta's jars (spark-mlt then goes through delta-spark)"


@dataclass(frozen=True)
class Feature:
    """What the jar-free path does with one Delta table feature.

    Attributes:
        name: the feature's name as the protocol spells it.
        read: jar-free reads return exactly Delta's rows (``"4.0"``: on Spark 4.0 and later).
        write: jar-free writes keep the feature's rules.
        how: how (or why not), in one line.
        forward: the way forward when the jar-free path refuses the table.
        vacuum: a jar-free vacuum keeps every file the table's versions need (vacuum deletes
            files no version references; only features that hide references from the log in
            storage break that).
    """

    name: str
    read: bool | Literal["4.0"]
    write: bool
    how: str
    forward: str = _JARS
    vacuum: bool = True


def _drop(feature: str, off: str = "") -> str:
    turn_off = f"turn it off ({off}) and " if off else ""
    return f"{_JARS}, or {turn_off}remove it: ALTER TABLE ... DROP FEATURE {feature}"


#: Every table feature spark-mlt knows, and what its jar-free path does with it.
FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("appendOnly", True, True, "an overwrite of a delta.appendOnly table is refused"),
        Feature("invariants", True, True, "column invariants are checked in Spark before the commit"),
        Feature("checkConstraints", True, True, "CHECK constraints are checked in Spark before the commit"),
        Feature(
            "changeDataFeed",
            True,
            True,
            "appends and overwrites commit add and remove actions only, from which Delta derives the change feed",
        ),
        Feature(
            "generatedColumns",
            True,
            True,
            "a missing generated column is computed; a given one must equal its expression",
        ),
        Feature(
            "columnMapping",
            True,
            True,
            "files are read and written under physical names (and field ids in id mode)",
        ),
        Feature(
            "deletionVectors",
            True,
            True,
            "deleted rows are left out by their row index; a jar-free vacuum keeps every deletion vector file",
        ),
        Feature("timestampNtz", True, True, "read and written as Spark's TIMESTAMP_NTZ"),
        Feature(
            "v2Checkpoint",
            True,
            True,
            "delta-rs reads v2 checkpoints and sidecars; jar-free commits write no checkpoint",
        ),
        Feature("vacuumProtocolCheck", True, True, "a jar-free vacuum checks the protocol first"),
        Feature(
            "typeWidening",
            "4.0",
            False,
            "Spark 4 reads a file written before a widening as the wider type, every widening the protocol "
            "allows (Spark 3.5 cannot); a recorded type change it does not allow is refused; delta-rs does "
            "not commit to such tables",
            _drop("typeWidening", "'delta.enableTypeWidening' = 'false'"),
        ),
        Feature(
            "identityColumns", True, False, "values are allocated by Delta's writer only", f"{_JARS} to write the table"
        ),
        Feature(
            "rowTracking",
            True,
            False,
            "row ids are assigned by Delta's writer only",
            _drop("rowTracking", "'delta.enableRowTracking' = 'false'"),
        ),
        Feature(
            "domainMetadata", True, False, "delta-rs does not commit to such tables", f"{_JARS} to write the table"
        ),
        Feature(
            "clustering", True, False, "liquid clustering is kept by Delta's writer only", f"{_JARS} to write the table"
        ),
        Feature(
            "inCommitTimestamp",
            True,
            False,
            "commit timestamps are written by Delta's writer only",
            _drop("inCommitTimestamp", "'delta.enableInCommitTimestamps' = 'false'"),
        ),
        Feature("icebergCompatV1", True, False, "Iceberg metadata is kept by Delta's writer only", f"{_JARS} to write"),
        Feature("icebergCompatV2", True, False, "Iceberg metadata is kept by Delta's writer only", f"{_JARS} to write"),
        Feature(
            "checkpointProtection",
            True,
            False,
            "log cleanup rules are kept by Delta's writer only",
            f"{_JARS} to write",
        ),
        Feature(
            "allowColumnDefaults", True, False, "column defaults are filled by Delta's writer only", f"{_JARS} to write"
        ),
        Feature("variantType", False, False, "Spark 3.5 has no VARIANT; not read or written without Delta's jars"),
        Feature(
            "catalogManaged",
            False,
            False,
            "the table's catalog owns its commits: the log in storage alone may be stale, never read it directly",
            "read and write the table through its catalog, with Delta's jars",
            vacuum=False,
        ),
    )
}
# Preview spellings mean the same features.
for _preview, _name in (
    ("typeWidening-preview", "typeWidening"),
    ("variantType-preview", "variantType"),
    ("catalogOwned-preview", "catalogManaged"),
):
    FEATURES[_preview] = FEATURES[_name]

#: The highest protocol versions the jar-free path understands.
_READER_VERSION = 3
_WRITER_VERSION = 7


@dataclass(frozen=True)
class TableProtocol:
    """The features a table version uses (listed, or implied by an older protocol and turned on).

    Attributes:
        reader_version: ``minReaderVersion``.
        writer_version: ``minWriterVersion``.
        reader: the features a reader must implement.
        writer: the features a writer must implement.
    """

    reader_version: int
    writer_version: int
    reader: frozenset[str]
    writer: frozenset[str]


class Version(Protocol):
    """What the gate reads of a table version (a [`Snapshot`][spark_mlt.delta.snapshot.Snapshot])."""

    @property
    def location(self) -> Location: ...

    @property
    def metadata(self) -> actions.Metadata: ...

    @property
    def features(self) -> TableProtocol: ...


def protocol_of(protocol: actions.Protocol, metadata: actions.Metadata) -> TableProtocol:
    """The features of a table version with this ``protocol`` and ``metadata``, an older
    protocol's features resolved (`Snapshot.features` holds them)."""
    reader_version, writer_version = protocol.min_reader_version, protocol.min_writer_version
    config = TableConfig.of(metadata.configuration)
    mapped = config.column_mapping != "none"
    if reader_version >= 3:
        reader = frozenset(protocol.reader_features or ())
    else:
        reader = frozenset({"columnMapping"} if reader_version == 2 and mapped else ())
    if writer_version >= 7:
        writer = frozenset(protocol.writer_features or ())
    else:
        writer = frozenset(_legacy_writer_features(metadata, config, writer_version, mapped))
    return TableProtocol(reader_version, writer_version, reader, writer)


def _legacy_writer_features(metadata: actions.Metadata, config: TableConfig, version: int, mapped: bool) -> set[str]:
    """The features a writer-version-2..6 table turns on (its version allows them all), read
    from its fields at every depth."""
    keys = {key for node in schema_fields(metadata.schema()) for key in node.metadata}
    constraints = any(key.lower().startswith("delta.constraints.") for key in config.properties)
    on = {
        "appendOnly": (2, config.append_only),
        "invariants": (2, "delta.invariants" in keys),
        "checkConstraints": (3, constraints),
        "changeDataFeed": (4, config.change_data_feed),
        "generatedColumns": (4, "delta.generationExpression" in keys),
        "columnMapping": (5, mapped),
        "identityColumns": (6, any(key.startswith("delta.identity.") for key in keys)),
    }
    return {name for name, (since, active) in on.items() if version >= since and active}


def _refuse(location: str, feature: str, kind: str, why: str, forward: str) -> TableFeatureError:
    return TableFeatureError(
        f"the Delta table at {location} uses the {kind} feature {feature!r}, which {why}; {forward}",
        feature=feature,
    )


def check_readable(snapshot: Version, *, spark_version: str) -> TableProtocol:
    """Refuses a table version the jar-free reader cannot read exactly; returns its protocol.

    Args:
        snapshot: the version to read.
        spark_version: the session's Spark version (some features need Spark 4).

    Raises:
        TableFeatureError: the version needs a reader feature (or a reader version) that the
            jar-free path does not implement on this Spark.
    """
    protocol, location = snapshot.features, snapshot.location.uri
    if protocol.reader_version > _READER_VERSION:
        raise _refuse(
            location,
            f"minReaderVersion={protocol.reader_version}",
            "protocol",
            f"is newer than the reader versions spark-mlt knows (up to {_READER_VERSION})",
            _JARS,
        )
    spark4 = spark_line(spark_version) >= (4, 0)
    for name in _ordered(protocol.reader):
        feature = FEATURES.get(name)
        if feature is None:
            raise _refuse(location, name, "reader", "spark-mlt does not know", _JARS)
        if feature.read is False or (feature.read == "4.0" and not spark4):
            why = f"the jar-free reader cannot read exactly on Spark {spark_version} ({feature.how})"
            raise _refuse(location, name, "reader", why, feature.forward)
        if FEATURES[name] is FEATURES["typeWidening"]:
            _check_type_changes(snapshot, name)
    return protocol


#: Delta's integer types by width, and the decimal each one fits into (a widening's narrowest).
_INTEGRAL = {"byte": 1, "short": 2, "integer": 4, "long": 8}
_INTEGRAL_DECIMALS = {"byte": (10, 0), "short": (10, 0), "integer": (10, 0), "long": (20, 0)}
#: The other widenings between two types that are not both integers or decimals.
_WIDENINGS = {("float", "double"), ("date", "timestamp_ntz"), *((i, "double") for i in ("byte", "short", "integer"))}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_TEXT = re.compile(r"string|(?:var)?char\(\s*\d+\s*\)")


def _widens(source: object, target: object) -> bool:
    """Whether a recorded type change is one type widening allows (the protocol's list, as
    delta-spark's ``TypeWidening.isTypeChangeSupported`` has it), or one between string types,
    which delta-spark reads whatever is recorded. A struct, array or map is no such change (the
    protocol records the changes of their leaves)."""
    if not isinstance(source, str) or not isinstance(target, str):
        return False
    if source in _INTEGRAL and target in _INTEGRAL:
        return _INTEGRAL[source] <= _INTEGRAL[target]
    texts = _TEXT.fullmatch(source) is not None and _TEXT.fullmatch(target) is not None
    return source == target or texts or (source, target) in _WIDENINGS or _wider_decimal(source, target)


def _wider_decimal(source: str, target: str) -> bool:
    """Whether ``target`` is a decimal that holds every value of ``source`` (a decimal or an
    integer type) exactly: as many digits before the point, and after it."""
    wide, narrow = _DECIMAL.fullmatch(target), _DECIMAL.fullmatch(source)
    low = (int(narrow[1]), int(narrow[2])) if narrow else _INTEGRAL_DECIMALS.get(source)
    if wide is None or low is None:
        return False
    precision, scale = int(wide[1]), int(wide[2])
    return precision - scale >= low[0] - low[1] and scale >= low[1]


def _check_type_changes(snapshot: Version, feature: str) -> None:
    """Refuses a table whose schema records a type change (``delta.typeChanges``) that type
    widening does not allow: Spark cannot read the files written before it as the table's type
    (it fails inside the read), and delta-spark refuses such a table too (the protocol asks
    readers to). Every change it allows Spark 4 reads exactly, file by file (measured for each
    one, at the top level and in structs, arrays and maps, on Spark 4.0 and 4.3)."""
    for node in schema_fields(snapshot.metadata.schema()):
        for change in node.metadata.get("delta.typeChanges") or ():
            source, target = change.get("fromType"), change.get("toType")
            if _widens(source, target):
                continue
            column = ".".join((*node.path, *filter(None, str(change.get("fieldPath") or "").split("."))))
            raise TableFeatureError(
                f"the Delta table at {snapshot.location.uri} records a change of column {column!r} from {source} "
                f"to {target} (table feature {feature!r}), which type widening does not allow: its files written "
                "before the change cannot be read as the new type, and delta-spark refuses the table too; rewrite "
                "the column's data in its new type (CREATE OR REPLACE TABLE ... AS SELECT with Delta's jars)",
                feature=feature,
            )


def check_writable(snapshot: Version, *, operation: TableOperation = "write") -> TableProtocol:
    """Refuses a table the jar-free writer (``operation="write"``) or vacuum (``"vacuum"``)
    cannot keep exactly; returns its protocol.

    Raises:
        TableFeatureError: the table needs a writer (or reader) feature, or a protocol version,
            that the jar-free path does not implement.
    """
    protocol, location = snapshot.features, snapshot.location.uri
    if protocol.writer_version > _WRITER_VERSION or protocol.reader_version > _READER_VERSION:
        raise _refuse(
            location,
            f"minWriterVersion={protocol.writer_version}",
            "protocol",
            f"is newer than the protocol versions spark-mlt knows (writer up to {_WRITER_VERSION})",
            _JARS,
        )
    for name in _ordered(protocol.reader, protocol.writer):
        feature = FEATURES.get(name)
        if feature is None:
            raise _refuse(location, name, "table", "spark-mlt does not know", _JARS)
        if operation == "vacuum" and not feature.vacuum:
            raise _refuse(location, name, "table", f"a jar-free vacuum cannot keep ({feature.how})", feature.forward)
        if operation == "write" and not feature.write:
            why = f"the jar-free writer cannot keep ({feature.how})"
            raise _refuse(location, name, "writer", why, feature.forward)
    rules = unenforceable_rules(snapshot.metadata.schema()) if operation == "write" else []
    if rules:
        raise TableFeatureError(
            f"the Delta table at {location} has {'; '.join(rules)}, which the jar-free writer cannot check; {_JARS}",
            feature="generatedColumns" if "generated" in rules[0] else "invariants",
        )
    return protocol


#: Features that other features bring along (rowTracking and clustering need domainMetadata):
#: checked last, so that a refusal names the feature the table's owner turned on.
_SUPPORTING = ("domainMetadata",)


def _ordered(*sets: Iterable[str]) -> list[str]:
    return sorted({name for names in sets for name in names}, key=lambda name: (name in _SUPPORTING, name))
