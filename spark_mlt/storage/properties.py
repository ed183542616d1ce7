"""The names spark-mlt writes into a Delta table, and codecs <-> table properties.

Table properties (the table's metadata configuration):

* ``mlt.codec.<column>``: the codec JSON of id column ``<column>`` (its tokens are usually in
  ``<column>_mlt``). The JSON carries a fingerprint, so a corrupt or tampered codec is refused
  when it is read, never silently used.
* ``mlt.format.version``: the table layout's version,
  [`TABLE_FORMAT_VERSION`][spark_mlt.storage.properties.TABLE_FORMAT_VERSION] (an int here, the
  string ``"1"`` in the table: Delta property values are strings).
* ``mlt.vocabulary.<column>``: where the key vocabulary of string column ``<column>`` is. A
  vocabulary beside the table (same scheme and bucket, under the table's parent folder, as the
  default ``<table>_vocab/<column>`` is) is recorded relative to the table's parent folder, as
  ``../<path under that folder>`` with ``/`` separators (``../orders_mlt_vocab/sku`` for the table
  ``/lake/orders_mlt``), so a table copied or moved together with its vocabularies still decodes;
  any other vocabulary by its absolute path, URI or catalog name. A value is relative exactly
  when it starts with ``../`` (absolute paths start with ``/``, URIs hold ``://``, names hold no
  ``/``); readers resolve it against the table's location when they read it
  ([`vocabulary_paths`][spark_mlt.storage.properties.vocabulary_paths]).
* ``mlt.type.<column>``: the Spark SQL type (``int``, ``bigint``, ``decimal(20,0)``, ``string``
  for a key) that id column ``<column>`` had in the rows it was tokenized from, so that decoding
  gives the ids back in it even where the table keeps no raw ids
  ([`id_type_properties`][spark_mlt.storage.properties.id_type_properties]). Tables written
  before it was recorded have none.
* anything else a caller passes (``WriteOptions.properties``), e.g. the MovieLens job's label
  rule: storage knows codecs and table properties, not what the layers above record.

Commit metadata (``commitInfo``) holds each write's ``spark_mlt.*`` entries (mode, run id, rows,
write id). A run id is recorded as a Delta application transaction with app id
``spark-mlt:<run id>``, which is what makes a re-run of the same job idempotent.

Properties are written once, when the table is created (delta-rs takes custom properties only in
``DeltaTable.create``): a codec is never added to an existing table's properties by a data write, so
appends and overwrites must reuse the stored codecs
([`merge_codecs`][spark_mlt.storage.properties.merge_codecs]).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from spark_mlt.codec import MLTCodec
from spark_mlt.errors import CodecFormatError, CodecMismatchError, ConcurrentWriteError, MLTError
from spark_mlt.storage.catalog import is_table_name

__all__ = [
    "CODEC_PROPERTY_PREFIX",
    "FORMAT_PROPERTY",
    "ID_TYPE_PROPERTY_PREFIX",
    "NEVER",
    "RUN_ID_APP_PREFIX",
    "TABLE_FORMAT_VERSION",
    "VOCABULARY_PROPERTY_PREFIX",
    "AppTransaction",
    "check_run_id",
    "codec_properties",
    "codecs_from_properties",
    "id_type_properties",
    "id_types",
    "merge_codecs",
    "resolve_vocabulary_path",
    "run_app_id",
    "run_transaction",
    "vocabulary_paths",
    "vocabulary_properties",
    "vocabulary_property_value",
]

CODEC_PROPERTY_PREFIX = "mlt.codec."
FORMAT_PROPERTY = "mlt.format.version"
#: The layout version this package writes (stored as ``str(TABLE_FORMAT_VERSION)``).
TABLE_FORMAT_VERSION = 1
VOCABULARY_PROPERTY_PREFIX = "mlt.vocabulary."
ID_TYPE_PROPERTY_PREFIX = "mlt.type."
RUN_ID_APP_PREFIX = "spark-mlt:"


def codec_properties(codecs: Mapping[str, MLTCodec]) -> dict[str, str]:
    """The table properties that store ``codecs`` (by id column), with the format version.

    Example::

        codec_properties({"userId": codec})  # {"mlt.codec.userId": "{...}", "mlt.format.version": "1"}
    """
    properties = {f"{CODEC_PROPERTY_PREFIX}{column}": codec.to_json() for column, codec in codecs.items()}
    properties[FORMAT_PROPERTY] = str(TABLE_FORMAT_VERSION)
    return properties


def codecs_from_properties(properties: Mapping[str, str], *, location: str) -> dict[str, MLTCodec]:
    """The codecs stored in ``properties``, by id column, each validated (JSON and fingerprint).

    Raises:
        CodecFormatError: a stored codec is corrupt or tampered with; the message names the
            table at ``location`` and the property.
    """
    codecs = {}
    for key, value in sorted(properties.items()):
        if key.startswith(CODEC_PROPERTY_PREFIX):
            try:
                codecs[key.removeprefix(CODEC_PROPERTY_PREFIX)] = MLTCodec.from_json(value or "")
            except CodecFormatError as exc:
                raise CodecFormatError(f"table {location}, property {key}: {exc}") from None
    return codecs


def merge_codecs(location: str, stored: Mapping[str, MLTCodec], wanted: Mapping[str, MLTCodec]) -> dict[str, MLTCodec]:
    """The codecs a table holds after a write: the ``stored`` ones plus new ``wanted`` ones.

    Raises:
        CodecMismatchError: ``wanted`` has a different codec for a column the table already
            stores one for (tokens of two codecs in one column could not be decoded).
    """
    for column, codec in wanted.items():
        old = stored.get(column)
        if old is not None and old != codec:
            raise CodecMismatchError(
                f"table {location} already stores a codec for column {column!r} "
                f"(p={old.p}, n={old.n}, seed={old.seed}, fingerprint {old.fingerprint[:12]}); "
                f"refusing a different one (p={codec.p}, n={codec.n}, seed={codec.seed}, "
                f"fingerprint {codec.fingerprint[:12]}). Reuse the stored codec (read_codecs) or write a new table.",
                parameter="codecs",
            )
    return {**stored, **wanted}


def id_type_properties(types: Mapping[str, str]) -> dict[str, str]:
    """The table properties recording each id column's type (Spark's ``simpleString``), from
    the rows it was tokenized from.

    Example::

        id_type_properties({"userId": "int"})  # {"mlt.type.userId": "int"}
    """
    return {f"{ID_TYPE_PROPERTY_PREFIX}{column}": kind for column, kind in types.items()}


def id_types(properties: Mapping[str, str]) -> dict[str, str]:
    """The type of each id column recorded in a table's ``properties`` (``mlt.type.<column>``).

    Example::

        id_types(read_snapshot("/data/ratings_mlt").properties)  # {"movieId": "bigint", "userId": "int"}
    """
    prefix = ID_TYPE_PROPERTY_PREFIX
    return {key.removeprefix(prefix): value for key, value in sorted(properties.items()) if key.startswith(prefix)}


def vocabulary_properties(paths: Mapping[str, str]) -> dict[str, str]:
    """The table properties recording each string column's vocabulary (new names only), from the
    values [`vocabulary_property_value`][spark_mlt.storage.properties.vocabulary_property_value] gives.

    Example::

        vocabulary_properties({"sku": "../orders_mlt_vocab/sku"})  # {"mlt.vocabulary.sku": "../orders_mlt_vocab/sku"}
    """
    return {f"{VOCABULARY_PROPERTY_PREFIX}{column}": path for column, path in paths.items()}


#: How a vocabulary value relative to its table begins (the rest is the path under the table's parent folder).
_RELATIVE = "../"


def vocabulary_property_value(table: str, vocabulary: str) -> str:
    """What ``mlt.vocabulary.<column>`` records for the vocabulary at ``vocabulary`` of the table
    at ``table``: ``../`` and the vocabulary's path under the table's parent folder when it is
    there on the table's store (same scheme, case aside, and same bucket or host); otherwise the
    vocabulary's absolute path, its URI or its catalog name, as given. A catalog table's
    vocabularies are never relative (its location is the catalog's to move).

    Example::

        vocabulary_property_value("/lake/orders_mlt", "/lake/orders_mlt_vocab/sku")  # "../orders_mlt_vocab/sku"
        vocabulary_property_value("s3://b/lake/x", "s3://b/lake/vocab/x/sku")         # "../vocab/x/sku"
        vocabulary_property_value("s3://b/lake/x", "s3://other/x_vocab/sku")          # "s3://other/x_vocab/sku"
        vocabulary_property_value("db.orders_mlt", "db.orders_mlt_vocab_sku")          # "db.orders_mlt_vocab_sku"
    """
    if is_table_name(vocabulary):
        return vocabulary
    absolute = vocabulary if "://" in vocabulary else os.path.abspath(vocabulary)
    if is_table_name(table):
        return absolute
    (table_store, table_path), (store, path) = _split_location(table), _split_location(vocabulary)
    parent = posixpath.dirname(table_path)
    if table_path == "/" or not _same_store(table_store, store) or not path.startswith(parent.rstrip("/") + "/"):
        return absolute
    return _RELATIVE + posixpath.relpath(path, parent)


def resolve_vocabulary_path(location: str, value: str) -> str:
    """The vocabulary that the value ``value`` of ``mlt.vocabulary.<column>`` names, for the table
    at ``location`` (e.g. [`TableSnapshot.path`][spark_mlt.storage.table.TableSnapshot]):
    a relative value (``../...``) resolved against the table's parent folder, on the table's store
    and in its form (an absolute path for a plain path); any other value as it is.

    Raises:
        MLTError: ``value`` is relative and ``location`` is a catalog name, not a location.

    Example::

        resolve_vocabulary_path("/mnt/prod/orders_mlt", "../orders_mlt_vocab/sku")  # "/mnt/prod/orders_mlt_vocab/sku"
        resolve_vocabulary_path("s3://b/lake/x", "../x_vocab/sku")                   # "s3://b/lake/x_vocab/sku"
        resolve_vocabulary_path("/mnt/prod/orders_mlt", "/old/vocab/sku")            # "/old/vocab/sku"
    """
    if not value.startswith(_RELATIVE):
        return value
    if is_table_name(location):
        raise MLTError(
            f"location {location!r} is a catalog table's name, and the vocabulary {value!r} is relative to "
            "the table's location: pass the location (read_snapshot(...).path)",
            parameter="location",
        )
    store, path = _split_location(location)
    return store + posixpath.normpath(posixpath.join(posixpath.dirname(path), value.removeprefix(_RELATIVE)))


def vocabulary_paths(properties: Mapping[str, str], *, location: str) -> dict[str, str]:
    """The vocabulary of each string column recorded in the ``properties`` of the table at
    ``location`` (``mlt.vocabulary.<column>``), relative values resolved against ``location``
    ([`resolve_vocabulary_path`][spark_mlt.storage.properties.resolve_vocabulary_path]).

    Raises:
        MLTError: a value is relative and ``location`` is a catalog name.

    Example::

        snapshot = read_snapshot("/data/orders_mlt")
        vocabulary_paths(snapshot.properties, location=snapshot.path)  # {"sku": "/data/orders_mlt_vocab/sku"}
    """
    prefix = VOCABULARY_PROPERTY_PREFIX
    return dict(
        sorted(
            (key.removeprefix(prefix), resolve_vocabulary_path(location, value))
            for key, value in properties.items()
            if key.startswith(prefix)
        )
    )


def _split_location(location: str) -> tuple[str, str]:
    """``location`` as its store (scheme and authority, empty for a plain path) and its absolute
    POSIX path on that store: ``s3://b/x`` gives ``("s3://b", "/x")``, ``file:///x`` gives
    ``("file://", "/x")``, a plain path ``("", its absolute path)``."""
    if "://" not in location:
        return "", os.path.abspath(location).replace(os.sep, "/")
    scheme, rest = location.split("://", 1)
    authority, _, path = rest.partition("/")
    return f"{scheme}://{authority}", posixpath.normpath("/" + path)


def _same_store(one: str, other: str) -> bool:
    """Whether two stores of ``_split_location`` are one: the same scheme (case aside) and the same authority."""
    scheme, _, authority = one.partition("://")
    other_scheme, _, other_authority = other.partition("://")
    return (scheme.lower(), authority) == (other_scheme.lower(), other_authority)


def check_run_id(run_id: object) -> str | None:
    """``run_id`` if it is a run id (a non-empty string) or None.

    Raises:
        MLTError: any other value, naming ``run_id``.
    """
    if run_id is None or (isinstance(run_id, str) and run_id.strip()):
        return run_id
    raise MLTError(f"run_id must be a non-empty string or None; got {run_id!r}", parameter="run_id")


@dataclass(frozen=True)
class AppTransaction:
    """A Delta application transaction (a ``txn`` action): the write is the ``version``-th of
    the writer ``app_id``, and a table that records ``version`` or a later one for that writer
    already holds it, so it is skipped. A run id is ``("spark-mlt:<run id>", 1)``; a streaming
    query is one writer whose versions are its batch ids, as Delta's own streaming sink does.

    Example::

        >>> AppTransaction("spark-mlt:2026-11-26", 1).recorded_in(1)
        True
    """

    app_id: str
    version: int
    #: The version of ``app_id`` the write was planned from (a sync's window: the source version
    #: the mirror held; ``NEVER``: none yet): it commits only while the table still records it.
    #: None: no such check.
    after: int | None = None
    #: Whether only this very version holds the write, not a later one: a write that adds to
    #: the table (a window's change of its value counts) rather than sets it; a table at a later
    #: version of the writer took another window's change instead, and the write is refused.
    exact: bool = False
    #: Whether a table that records ``version`` (or, unless ``exact``, a later one) holds this
    #: write already, so that it is skipped: a run id, a streaming batch, a window's source
    #: version. False for a write whose version does not tell what it holds: one that sets the
    #: table anew (a full refresh of a mirror that may be damaged, a re-size, a clean-up of value
    #: counts) or whose versions number a writer's changes (a vocabulary's appends and erasures).
    #: Such a write is never skipped, and with ``after`` commits only while the table records it.
    skippable: bool = True

    def recorded_in(self, table_version: int | None) -> bool:
        """Whether a table whose transaction version for ``app_id`` is ``table_version``
        (None: never written by it) already holds this write (never, unless ``skippable``)."""
        if table_version is None or not self.skippable:
            return False
        return table_version == self.version if self.exact else table_version >= self.version

    def check_base(self, table_version: int | None, location: str) -> None:
        """Refuses a write planned from version ``after`` of ``app_id`` when the table records
        another one now (``table_version``; a write the table holds already is skipped before).

        Raises:
            ConcurrentWriteError: another writer of ``app_id`` moved the table meanwhile;
                nothing of this write is committed, and a new run carries on from there.
        """
        held = NEVER if table_version is None else table_version
        if self.after is None or held == self.after or self.recorded_in(table_version):
            return
        raise ConcurrentWriteError(
            f"another writer moved {self.app_id} in the Delta table at {location} from version "
            f"{'none' if self.after == NEVER else self.after} to {'none' if held == NEVER else held} while this "
            f"write (version {self.version}) was planned from the first; nothing of it was committed: run it again, "
            "it carries on from there"
        )

    def __str__(self) -> str:
        return f"{self.app_id} version {self.version}"


#: ``AppTransaction.after`` of a write planned from a table with no version of its writer yet.
NEVER = -1


def run_transaction(run_id: str) -> AppTransaction:
    """The application transaction that records ``run_id`` in a table: writer
    ``spark-mlt:<run id>``, version 1.

    Raises:
        MLTError: ``run_id`` is not a non-empty string.
    """
    return AppTransaction(run_app_id(run_id), 1)


def run_app_id(run_id: str) -> str:
    """The Delta application-transaction id that records ``run_id`` in a table.

    Raises:
        MLTError: ``run_id`` is not a non-empty string.
    """
    check_run_id(run_id)
    return RUN_ID_APP_PREFIX + run_id
