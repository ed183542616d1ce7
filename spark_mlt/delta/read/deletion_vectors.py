"""Deletion vectors: the rows of a data file that a Delta table version deletes, decoded jar-free.

A ``DELETE``, ``UPDATE`` or ``MERGE`` of delta-spark (Databricks turns deletion vectors on for
new tables) marks rows as deleted in a deletion vector instead of rewriting the file. The
``add`` action names the vector with a descriptor
([`DeletionVector`][spark_mlt.delta.read.deletion_vectors.DeletionVector]), and a reader must leave
its rows out. A vector is a set of row indexes (0-based positions of rows in the Parquet file)
in Delta's format: a magic number, then a 64-bit Roaring bitmap in the portable serialization,
stored inline in the log (as Z85 text) or in a ``deletion_vector_<uuid>.bin`` file in the table
folder (a format version byte, then per vector its size, its bitmap and a CRC-32).

Design decisions, and why:

* Decoded here, one vector at a time, only for the files a scan or a change feed needs, rather
  than with delta-rs' ``DeltaTable.deletion_vectors()``, which materialises a keep mask (one
  value per row) for every vector of a version at once. A vector in a file costs one ranged
  read of its own bytes (two when it sits far into a file that many vectors share), so a scan
  that prunes a partition never touches that partition's vectors.
* No Roaring library: the format is small and fixed, and NumPy decodes it one container kind
  at a time (every array container of a bucket in one gather, every run container in one
  expansion, a bitmap container with ``unpackbits``): never a Python loop per row index.
* Strict: a wrong magic number, format version, size, checksum, container layout or
  cardinality is refused with a [`TableError`][spark_mlt.errors.TableError] that names the
  vector and what was expected, never decoded into a guess: a wrong vector silently hides or
  resurrects rows.
* A vector in a file whose descriptor has no ``offset`` starts right after the version byte
  (offset 1), as delta-kernel-rs reads it: the protocol's "interpret as 0" would point at the
  version byte itself.
* An absolute-path (``p``) vector is read only through the table's own store (an absolute
  local path for a local table, any bucket of an S3 location's endpoint, else a file under the
  table's URI): this module holds no credentials for any other store.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

import numpy as np
import numpy.typing as npt

from spark_mlt.errors import MLTError, MLTTypeError, TableError, TableFeatureError

if TYPE_CHECKING:
    from spark_mlt.delta.fs import Location

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "STORAGE_TYPES",
    "DeletionVector",
    "deleted_runs",
    "read_deleted_rows",
    "z85_decode",
]

#: The storage types of the protocol: a relative path from a UUID, inline, an absolute path.
STORAGE_TYPES: Final = ("u", "i", "p")
#: The first 4 bytes (little-endian) of a serialized vector.
MAGIC: Final = 1681511377
#: The first byte of a vector file.
FORMAT_VERSION: Final = 1

_FEATURE = "deletionVectors"
_NATIVE_MAGIC = 1681511376  # delta-spark's other layout: bitmaps by index, each with its size
_NATIVE_MAGIC_SWAPPED = int.from_bytes(_NATIVE_MAGIC.to_bytes(4, "big"), "little")
_UUID_CHARS = 20  # a UUID's 16 bytes in Z85
_NO_RUNS_COOKIE = 12346  # followed by a 32-bit container count; no run containers
_RUNS_COOKIE = 12347  # in the low 16 bits; the high 16 bits hold the container count - 1
_NO_OFFSET_THRESHOLD = 4  # a bitmap with run containers has an offset header from 4 containers on
_ARRAY_MAX = 4096  # a container without runs of at most this many values is an array
_BITMAP_BYTES = 8192  # a bitmap container: 1024 little-endian 64-bit words
_MAX_CONTAINERS = 1 << 16
_DELTA_MAX_KEY = (1 << 31) - 1  # Delta: a bucket key's top bit is 0 (Java reads keys signed)
_ONE_READ_GAP = 1 << 16  # a vector this close to the file's start is read with its version byte

_Z85_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INVALID = 255
_Z85_DIGITS = np.full(256, _Z85_INVALID, dtype=np.uint8)
_Z85_DIGITS[np.frombuffer(_Z85_ALPHABET, dtype=np.uint8)] = np.arange(85, dtype=np.uint8)
_Z85_WEIGHTS = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)

Int64Array = npt.NDArray[np.int64]
ByteArray = npt.NDArray[np.uint8]


def z85_decode(text: str) -> bytes:
    """The bytes that Z85 text (ZeroMQ RFC 32, Delta's encoding of inline vectors and UUIDs) encodes.

    Args:
        text: Z85 characters, five for each four bytes.

    Raises:
        TableError: the text's length is no multiple of 5, a character is not of Z85's
            alphabet, or a block of five encodes more than 32 bits.

    Example::

        z85_decode("HelloWorld")  # b"\\x86O\\xd2o\\xb5Y\\xf7["
    """
    raw = text.encode("utf-8")
    if len(raw) % 5:
        raise TableError(f"Z85 text {_clip(text)!r} has {len(raw)} bytes; expected a multiple of 5")
    digits = _Z85_DIGITS[np.frombuffer(raw, dtype=np.uint8)]
    bad = np.flatnonzero(digits == _Z85_INVALID)
    if bad.size:
        char = raw[int(bad[0]) :].decode("utf-8", errors="replace")[:1]
        raise TableError(f"Z85 text {_clip(text)!r} holds {char!r} at byte {int(bad[0])}, not a Z85 character")
    # 85**5 - 1 < 2**33: a block fits uint64 easily, but may exceed the 32 bits it must encode
    words = digits.reshape(-1, 5).astype(np.uint64) @ _Z85_WEIGHTS
    over = np.flatnonzero(words > 0xFFFFFFFF)
    if over.size:
        block = text[5 * int(over[0]) : 5 * int(over[0]) + 5]
        raise TableError(f"Z85 text {_clip(text)!r} has the block {block!r}, which exceeds 32 bits")
    return words.astype(">u4").tobytes()


def _clip(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else f"{text[:keep]}..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class DeletionVector:
    """The descriptor of a deletion vector, as an ``add`` or ``remove`` action holds it.

    Attributes:
        storage_type: ``"u"`` (a file in the table folder named by a UUID), ``"i"`` (inline in
            the log) or ``"p"`` (a file at an absolute path).
        path_or_inline_dv: the random prefix and Z85 UUID (``u``), the Z85 vector (``i``) or
            the percent-encoded absolute path (``p``).
        offset: where the vector starts in its file (at its size field); None for inline ones.
        size_in_bytes: the serialized vector's size (before Z85 encoding).
        cardinality: how many rows the vector deletes.

    Raises:
        TableFeatureError: a storage type the protocol does not define (a newer writer).
        TableError: a field of the wrong type or range.

    Example::

        dv = DeletionVector.from_json(add["deletionVector"])
        rows = read_deleted_rows(dv, location)
    """

    storage_type: str
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    def __post_init__(self) -> None:
        if self.storage_type not in STORAGE_TYPES:
            raise TableFeatureError(
                f"deletion vector storage type {self.storage_type!r} is not one of the protocol's "
                f"{', '.join(map(repr, STORAGE_TYPES))}: the table was written by a newer Delta writer; "
                "read it with a session with Delta's jars",
                feature=_FEATURE,
            )
        if not isinstance(self.path_or_inline_dv, str) or not self.path_or_inline_dv:
            raise TableError(
                f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} of storage type "
                f"{self.storage_type!r}; expected a non-empty string"
            )
        if self.storage_type == "u" and len(self.path_or_inline_dv) < _UUID_CHARS:
            raise TableError(
                f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} of storage type 'u' has "
                f"{len(self.path_or_inline_dv)} characters; expected at least {_UUID_CHARS} (a Z85 UUID)"
            )
        if self.offset is not None and not (_is_int(self.offset) and self.offset >= 0):
            raise TableError(f"deletion vector offset {self.offset!r}; expected a non-negative integer or none")
        for field, value in (("sizeInBytes", self.size_in_bytes), ("cardinality", self.cardinality)):
            if not (_is_int(value) and value >= 0):
                raise TableError(f"deletion vector {field} {value!r}; expected a non-negative integer")

    @classmethod
    def from_json(cls, descriptor: Mapping[str, Any]) -> DeletionVector:
        """The vector an action's ``deletionVector`` object describes.

        Args:
            descriptor: the JSON object (``storageType``, ``pathOrInlineDv``, ``offset``,
                ``sizeInBytes``, ``cardinality``); ``offset`` may be absent or null.

        Raises:
            TableFeatureError: a storage type the protocol does not define.
            TableError: a field is missing or of the wrong type.

        Example::

            DeletionVector.from_json({"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                                      "offset": 4, "sizeInBytes": 40, "cardinality": 6})
        """
        if not isinstance(descriptor, Mapping):
            raise TableError(f"deletion vector descriptor {descriptor!r}; expected a JSON object")
        fields = ("storageType", "pathOrInlineDv", "sizeInBytes", "cardinality")
        missing = [name for name in fields if name not in descriptor]
        if missing:
            raise TableError(
                f"deletion vector descriptor {dict(descriptor)!r} lacks {', '.join(missing)}; "
                f"expected the fields {', '.join(fields)} and, for a file, offset"
            )
        return cls(
            storage_type=descriptor["storageType"],
            path_or_inline_dv=descriptor["pathOrInlineDv"],
            offset=descriptor.get("offset"),
            size_in_bytes=descriptor["sizeInBytes"],
            cardinality=descriptor["cardinality"],
        )

    @property
    def unique_id(self) -> str:
        """The protocol's ``uniqueId``: ``<storageType><pathOrInlineDv>``, then ``@<offset>`` when
        there is an offset. It tells one file's successive vectors apart."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def relative_path(self) -> str | None:
        """The vector file's path relative to the table (``u`` only, else None):
        ``<random prefix>/deletion_vector_<uuid>.bin``, the UUID in its canonical textual form
        (decoded from the last 20 characters); without a prefix the file is in the table folder.

        Example::

            DeletionVector("u", "ab^-aqEH.-t@S}K{vb[*k^", 4, 40, 6).relative_path
            # "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
        """
        if self.storage_type != "u":
            return None
        prefix, encoded = self.path_or_inline_dv[:-_UUID_CHARS], self.path_or_inline_dv[-_UUID_CHARS:]
        try:
            name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        except TableError as error:
            raise TableError(f"deletion vector {self.unique_id} names no UUID: {error}") from None
        return f"{prefix}/{name}" if prefix else name

    def file_path(self, location: Location) -> str | None:
        """The vector file's path inside ``location.filesystem``; None for an inline vector.

        A ``u`` file is under the table folder. A ``p`` path is a URI like an ``add`` action's
        path (percent-decoded here) and must be in the table's own store: an absolute local
        path (``file:`` or plain) for a local table, ``s3://`` or ``s3a://`` for an S3
        location, else a file under the table's URI.

        Raises:
            TableFeatureError: a ``p`` path in another store.

        Example::

            dv.file_path(locate("s3://bucket/table"))  # "bucket/table/ab/deletion_vector_<uuid>.bin"
        """
        relative = self.relative_path
        if relative is not None:
            return location.path(relative)
        if self.storage_type == "i":
            return None
        return self._resolve_absolute(location)

    def _resolve_absolute(self, location: Location) -> str:
        text = self.path_or_inline_dv
        resolved = location.absolute_path(text)
        if resolved is not None:
            return resolved
        raise TableFeatureError(
            f"deletion vector {self.unique_id} is stored at {unquote(text)}, outside the store of the Delta table at "
            f"{location.uri}: the jar-free path reads vectors only from the table's own store; read it with a "
            "session with Delta's jars",
            feature=_FEATURE,
        )

    def _name(self) -> str:
        """The vector as messages name it (a long inline vector cut short)."""
        if self.storage_type == "i":
            return f"inline deletion vector {_clip(self.unique_id)} ({self.size_in_bytes} bytes)"
        return f"deletion vector {self.unique_id}"


def read_deleted_rows(dv: DeletionVector, location: Location | None) -> npt.NDArray[np.uint64]:
    """The row indexes (0-based positions in its data file) that a deletion vector deletes.

    An inline vector is decoded from its descriptor; a vector in a file is read with a ranged
    read of its own bytes (the file's version byte, its size, bitmap and checksum), and every
    part is checked against the descriptor.

    Args:
        dv: the vector's descriptor.
        location: the table's location; None will do for an inline vector.

    Returns:
        The row indexes, ascending and unique (``uint64``), as many as ``dv.cardinality``.

    Raises:
        TableError: the vector is corrupt (wrong magic number or format version, a size or
            checksum that disagrees with the descriptor, truncated, an inconsistent Roaring
            layout, a cardinality other than the descriptor's) or its file is missing.
        TableFeatureError: an absolute-path vector outside the table's store.

    Example::

        dv = DeletionVector.from_json(add["deletionVector"])
        keep = np.ones(num_rows, dtype=bool)
        keep[read_deleted_rows(dv, location)] = False
    """
    if dv.storage_type == "i":
        data = _inline_data(dv)
    elif location is None:
        raise MLTError(
            f"location is None, but {dv._name()} is stored in a file; expected the table's Location",
            parameter="location",
        )
    else:
        data = _stored_data(dv, location)
    rows = _decode_bitmap(data, dv._name())
    if rows.size != dv.cardinality:
        raise TableError(f"{dv._name()} holds {rows.size} row indexes; its descriptor says {dv.cardinality}")
    return rows


def _inline_data(dv: DeletionVector) -> bytes:
    """The serialized vector of an inline descriptor: Delta pads the bytes to whole 4-byte Z85
    blocks, and ``sizeInBytes`` is the size before padding."""
    try:
        padded = z85_decode(dv.path_or_inline_dv)
    except TableError as error:
        raise TableError(f"{dv._name()} is not Z85 text: {error}") from None
    expected = dv.size_in_bytes + (-dv.size_in_bytes % 4)
    if len(padded) != expected:
        raise TableError(
            f"{dv._name()} decodes to {len(padded)} bytes; expected {expected} "
            f"(sizeInBytes {dv.size_in_bytes} padded to whole 4-byte blocks)"
        )
    return padded[: dv.size_in_bytes]


def _stored_data(dv: DeletionVector, location: Location) -> bytes:
    """The serialized vector in a vector file, checked: version byte, size field, CRC-32."""
    path = dv.file_path(location)
    if path is None:  # pragma: no cover - only inline vectors have no path
        raise TableError(f"{dv._name()} has no file")
    name = f"{dv._name()} (file {path})"
    offset = 1 if dv.offset is None else dv.offset
    size = dv.size_in_bytes
    record_bytes = 4 + size + 4  # size field, bitmap, checksum
    try:
        with location.filesystem.open_input_file(path) as file:
            if offset <= _ONE_READ_GAP:  # one request: the version byte and the vector
                blob = file.read_at(offset + record_bytes, 0)
                head, record = blob[:1], blob[offset:]
            else:
                head, record = file.read_at(1, 0), file.read_at(record_bytes, offset)
    except FileNotFoundError:
        raise TableError(f"{name} is missing: the table's log names a vector file that is not there") from None
    if not head:
        raise TableError(f"{name} is truncated: the file is empty; expected format version {FORMAT_VERSION}")
    if head[0] != FORMAT_VERSION:
        raise TableError(f"{name} has format version {head[0]}; expected {FORMAT_VERSION}")
    if len(record) < 4:
        raise TableError(f"{name} is truncated: the file ends before the vector's size field at byte {offset}")
    stored_size = int.from_bytes(record[:4], "big")
    if stored_size != size:
        raise TableError(f"{name} has a size field of {stored_size} bytes at byte {offset}; sizeInBytes is {size}")
    if len(record) < record_bytes:
        raise TableError(
            f"{name} is truncated: the file ends at byte {offset + len(record)}; the vector with its "
            f"checksum ends at byte {offset + record_bytes}"
        )
    data = record[4 : 4 + size]
    stored_crc, crc = int.from_bytes(record[4 + size : record_bytes], "big"), zlib.crc32(data)
    if stored_crc != crc:
        raise TableError(
            f"{name} fails its checksum: the file says CRC-32 {stored_crc:#010x}, the data has {crc:#010x}"
        )
    return bytes(data)


# --- Roaring bitmaps ------------------------------------------------------------------------


def _take(buf: ByteArray, start: int, count: int, name: str, what: str) -> ByteArray:
    """``count`` bytes of ``buf`` from ``start``, or a truncation error naming ``what``."""
    if start + count > buf.size:
        raise TableError(
            f"{name} is truncated: {what} needs bytes {start} to {start + count} of a {buf.size}-byte bitmap"
        )
    return buf[start : start + count]


def _uint(buf: ByteArray, start: int, width: int, name: str, what: str) -> int:
    return int.from_bytes(_take(buf, start, width, name, what).tobytes(), "little")


def _spread(bases: Int64Array, counts: Int64Array, step: int = 1) -> Int64Array:
    """For each group, ``base, base + step, ..., base + (count - 1) * step``, concatenated."""
    firsts = np.cumsum(counts) - counts
    return np.repeat(bases - step * firsts, counts) + step * np.arange(int(counts.sum()), dtype=np.int64)


def _uint16_at(buf: ByteArray, positions: Int64Array) -> Int64Array:
    """The little-endian 16-bit values at byte ``positions`` (which may be odd: a bucket's run
    flags have any number of bytes, so containers need not be 2-byte aligned)."""
    return buf[positions].astype(np.int64) | (buf[positions + 1].astype(np.int64) << 8)


def _decode_bitmap(data: bytes, name: str) -> npt.NDArray[np.uint64]:
    """The values of a serialized Delta vector: the magic number, then a portable 64-bit
    Roaring bitmap (a bucket count, then per bucket its key and a 32-bit Roaring bitmap). Bytes
    after the last bucket are ignored, as delta-spark and delta-rs ignore them."""
    buf = np.frombuffer(data, dtype=np.uint8)
    magic = _uint(buf, 0, 4, name, "the magic number")
    if magic == _NATIVE_MAGIC:
        raise TableFeatureError(
            f"{name} is in Delta's native RoaringBitmapArray layout (magic number {magic}), which delta-spark "
            f"reads but does not write and delta-rs refuses; the jar-free path reads the portable layout (magic "
            f"number {MAGIC}): read it with a session with Delta's jars",
            feature=_FEATURE,
        )
    if magic == _NATIVE_MAGIC_SWAPPED:
        raise TableError(
            f"{name} starts with magic number {magic}: Delta's native layout written big-endian (as the protocol's "
            f"own inline example is), which delta-spark and delta-rs refuse too; expected {MAGIC}"
        )
    if magic != MAGIC:
        raise TableError(f"{name} starts with magic number {magic}; expected {MAGIC}")
    buckets = _uint(buf, 4, 8, name, "the bucket count")
    if buckets > (buf.size - 12) // 12:  # each bucket takes at least its key and an 8-byte header
        raise TableError(f"{name} is truncated: it counts {buckets} buckets, more than its {buf.size} bytes hold")
    pieces: list[npt.NDArray[np.uint64]] = []
    position, previous = 12, -1
    for _ in range(buckets):
        key = _uint(buf, position, 4, name, "a bucket key")
        if key <= previous:
            raise TableError(f"{name} has bucket key {key} after {previous}; expected ascending keys")
        if key > _DELTA_MAX_KEY:
            raise TableError(f"{name} has bucket key {key}; expected at most {_DELTA_MAX_KEY} (a top bit of 0)")
        low, position = _decode_bucket(buf, position + 4, f"{name} (bucket {key})")
        pieces.append(low.astype(np.uint64) | np.uint64(key << 32))
        previous = key
    return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint64)


def _decode_bucket(buf: ByteArray, start: int, name: str) -> tuple[npt.NDArray[np.uint32], int]:
    """The values of the 32-bit Roaring bitmap serialized at ``start`` and the position after it."""
    cookie = _uint(buf, start, 4, name, "the cookie")
    position = start + 4
    has_offsets = True
    if cookie == _NO_RUNS_COOKIE:
        count = _uint(buf, position, 4, name, "the container count")
        position += 4
        if count > _MAX_CONTAINERS:
            raise TableError(f"{name} counts {count} containers; expected at most {_MAX_CONTAINERS}")
        runs = np.zeros(count, dtype=bool)
    elif cookie & 0xFFFF == _RUNS_COOKIE:
        count = (cookie >> 16) + 1
        flags = _take(buf, position, (count + 7) // 8, name, "the run container flags")
        runs = np.unpackbits(flags, bitorder="little")[:count].astype(bool)
        position += flags.size
        has_offsets = count >= _NO_OFFSET_THRESHOLD
    else:
        raise TableError(
            f"{name} starts with cookie {cookie}; expected {_NO_RUNS_COOKIE}, or {_RUNS_COOKIE} in the low 16 bits"
        )
    header = _take(buf, position, 4 * count, name, "the container header").view("<u2").reshape(count, 2)
    position += 4 * count
    # int64 from here on: uint16 arithmetic (key << 16, cardinality - 1 + 1) would wrap
    keys, cards = header[:, 0].astype(np.int64), header[:, 1].astype(np.int64) + 1
    if count > 1 and (np.diff(keys) <= 0).any():
        raise TableError(f"{name} has container keys {keys.tolist()}; expected them ascending")
    sizes = np.where(cards > _ARRAY_MAX, _BITMAP_BYTES, 2 * cards)
    run_containers = np.flatnonzero(runs)
    if has_offsets:
        stored = _take(buf, position, 4 * count, name, "the offset header").view("<u4").astype(np.int64) + start
        position += 4 * count
        if run_containers.size:
            if (stored[run_containers] + 2 > buf.size).any():
                raise TableError(f"{name} is truncated: a run container's offset points past its end")
            sizes[run_containers] = 2 + 4 * _uint16_at(buf, stored[run_containers])
        starts = position + np.cumsum(sizes) - sizes
        if (starts != stored).any():
            raise TableError(
                f"{name} has container offsets {(stored - start).tolist()}; its containers' sizes put them at "
                f"{(starts - start).tolist()}"
            )
    else:  # run containers and fewer than 4 containers: walk them
        starts = np.empty(count, dtype=np.int64)
        for index in range(count):
            starts[index] = position
            if runs[index]:
                sizes[index] = 2 + 4 * _uint(buf, position, 2, name, "a run container's run count")
            position += int(sizes[index])
    end = int(starts[-1] + sizes[-1]) if count else position
    _take(buf, start, end - start, name, "the container data")
    containers = _Containers(keys=keys, cards=cards, runs=runs, starts=starts, name=name)
    return _decode_containers(buf, containers), end


@dataclass(frozen=True, slots=True)
class _Containers:
    """A bucket's containers: their keys (high 16 bits), cardinalities, whether each is a run
    container, where each starts in the vector's bytes, and the bucket as messages name it."""

    keys: Int64Array
    cards: Int64Array
    runs: npt.NDArray[np.bool_]
    starts: Int64Array
    name: str


def _decode_containers(buf: ByteArray, containers: _Containers) -> npt.NDArray[np.uint32]:
    """The values of a bucket's containers, in order: each container's values go to their own
    slice of the output (its first index is the sum of the cardinalities before it)."""
    keys, cards, runs, starts, name = (
        containers.keys,
        containers.cards,
        containers.runs,
        containers.starts,
        containers.name,
    )
    total = int(cards.sum())
    out = np.empty(total, dtype=np.uint32)
    firsts = np.cumsum(cards) - cards
    highs = keys << 16

    def place(chosen: Int64Array, values: Int64Array) -> None:
        if chosen.size == keys.size:  # one kind of container throughout: no scatter needed
            out[:] = values
        else:
            out[_spread(firsts[chosen], cards[chosen])] = values

    arrays = np.flatnonzero(~runs & (cards <= _ARRAY_MAX))
    if arrays.size:
        positions = _spread(starts[arrays], cards[arrays], step=2)
        place(arrays, np.repeat(highs[arrays], cards[arrays]) | _uint16_at(buf, positions))

    run_containers = np.flatnonzero(runs)
    if run_containers.size:
        place(run_containers, _expand_runs(buf, containers, run_containers))

    for index in np.flatnonzero(~runs & (cards > _ARRAY_MAX)).tolist():
        first = int(starts[index])
        lows = np.flatnonzero(np.unpackbits(buf[first : first + _BITMAP_BYTES], bitorder="little"))
        if lows.size != cards[index]:
            raise TableError(
                f"{name} has a bitmap container (key {int(keys[index])}) of {lows.size} values; "
                f"its header says {int(cards[index])}"
            )
        out[int(firsts[index]) : int(firsts[index]) + lows.size] = highs[index] | lows

    if total > 1 and not (out[1:] > out[:-1]).all():
        at = int(np.flatnonzero(out[1:] <= out[:-1])[0])
        raise TableError(f"{name} has value {int(out[at + 1])} after {int(out[at])}; expected ascending values")
    return out


def _expand_runs(buf: ByteArray, containers: _Containers, chosen: Int64Array) -> Int64Array:
    """The values of the run containers ``chosen``: each is a run count, then per run its start
    and its length - 1 (16 bits each)."""
    starts, cards = containers.starts[chosen], containers.cards[chosen]
    counts = _uint16_at(buf, starts)
    fields = _uint16_at(buf, _spread(starts + 2, 2 * counts, step=2))
    run_starts, lengths = fields[0::2], fields[1::2] + 1
    if (run_starts + lengths > 1 << 16).any():
        raise TableError(f"{containers.name} has a run that passes the end of its 16-bit container")
    # each container's value count: the cumulative run lengths at its last run minus at its first
    through = np.concatenate(([0], np.cumsum(lengths)))
    bounds = np.cumsum(counts)
    values = through[bounds] - through[bounds - counts]
    if (values != cards).any():
        bad = int(np.flatnonzero(values != cards)[0])
        raise TableError(
            f"{containers.name} has a run container (key {int(containers.keys[chosen][bad])}) of "
            f"{int(values[bad])} values; its header says {int(cards[bad])}"
        )
    highs = np.repeat(containers.keys[chosen] << 16, counts)
    return _spread(highs + run_starts, lengths)


# --- runs of rows ---------------------------------------------------------------------------


def deleted_runs(rows: npt.ArrayLike) -> tuple[npt.NDArray[np.uint64], Int64Array]:
    """The runs of consecutive row indexes in ``rows``: each run's first index and its length.

    Args:
        rows: ascending, unique row indexes, as
            [`read_deleted_rows`][spark_mlt.delta.read.deletion_vectors.read_deleted_rows] returns them.

    Returns:
        The runs' first indexes (``uint64``) and lengths (``int64``), in order.

    Raises:
        MLTTypeError: ``rows`` is not a one-dimensional array of integers.
        MLTError: ``rows`` is not ascending and unique, or holds a negative value.

    Example::

        deleted_runs(np.array([3, 4, 7, 11, 12, 13], dtype=np.uint64))  # ([3, 7, 11], [2, 1, 3])
    """
    array = np.asarray(rows)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise MLTTypeError(
            f"rows is an array of shape {array.shape} and dtype {array.dtype}; expected one dimension of integers",
            parameter="rows",
        )
    if array.size == 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    if np.issubdtype(array.dtype, np.signedinteger) and int(array.min()) < 0:
        raise MLTError(f"rows holds the negative value {int(array.min())}; expected row indexes", parameter="rows")
    values = array.astype(np.uint64, copy=False)
    steps = values[1:] - values[:-1]  # uint64: wraps where rows descend, caught just below
    disorder = np.flatnonzero(values[1:] <= values[:-1])
    if disorder.size:
        at = int(disorder[0])
        raise MLTError(
            f"rows has {int(values[at + 1])} after {int(values[at])} at index {at + 1}; expected ascending, "
            "unique row indexes",
            parameter="rows",
        )
    breaks = np.flatnonzero(steps != 1) + 1
    firsts = np.concatenate(([0], breaks))
    lasts = np.concatenate((breaks, [values.size]))
    return values[firsts], (lasts - firsts).astype(np.int64)
