"""The names spark-mlt writes into a Delta table, and codecs <-> table properties.

Table properties (the table's metadata configuration):

* ``mlt.codec.<column>``: the codec JSON of id column ``<column>`` (its tokens are usually in
  ``<column>_mlt``). The JSON carries a fingerprint, so a corrupt or tampered codec is refused
  when it is read, never silently used.
* ``mlt.format.version``: the table layout's version,
  [`TABLE_FORMAT_VERSION`][spark_mlt.storage.properties.TABLE_FORMAT_VERSION] (an int here, the
  string ``"1"`` in the table: Delta property values are strings).
* ``mlt.vocabulary.<column>``: the path of the key vocabulary of string column ``<column>``.
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

from collections.abc import Mapping
from dataclasses import dataclass

from spark_mlt.codec import MLTCodec
from spark_mlt.errors import CodecFormatError, CodecMismatchError, MLTError

__all__ = [
    "CODEC_PROPERTY_PREFIX",
    "FORMAT_PROPERTY",
    "RUN_ID_APP_PREFIX",
    "TABLE_FORMAT_VERSION",
    "VOCABULARY_PROPERTY_PREFIX",
    "AppTransaction",
    "check_run_id",
    "codec_properties",
    "codecs_from_properties",
    "merge_codecs",
    "run_app_id",
    "run_transaction",
    "vocabulary_paths",
    "vocabulary_properties",
]

CODEC_PROPERTY_PREFIX = "mlt.codec."
FORMAT_PROPERTY = "mlt.format.version"
#: The layout version this package writes (stored as ``str(TABLE_FORMAT_VERSION)``).
TABLE_FORMAT_VERSION = 1
VOCABULARY_PROPERTY_PREFIX = "mlt.vocabulary."
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


def vocabulary_properties(paths: Mapping[str, str]) -> dict[str, str]:
    """The table properties recording each string column's vocabulary path (new names only).

    Example::

        vocabulary_properties({"sku": "/data/vocab/sku"})  # {"mlt.vocabulary.sku": "/data/vocab/sku"}
    """
    return {f"{VOCABULARY_PROPERTY_PREFIX}{column}": path for column, path in paths.items()}


def vocabulary_paths(properties: Mapping[str, str]) -> dict[str, str]:
    """The vocabulary path of each string column recorded in a table's ``properties``
    (``mlt.vocabulary.<column>``).

    Example::

        vocabulary_paths(read_snapshot("/data/orders_mlt").properties)  # {"sku": "/data/vocab/sku"}
    """
    prefix = VOCABULARY_PROPERTY_PREFIX
    return dict(sorted((k.removeprefix(prefix), v) for k, v in properties.items() if k.startswith(prefix)))


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

    def recorded_in(self, table_version: int | None) -> bool:
        """Whether a table whose transaction version for ``app_id`` is ``table_version``
        (None: never written by it) already holds this write."""
        return table_version is not None and table_version >= self.version

    def __str__(self) -> str:
        return f"{self.app_id} version {self.version}"


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
