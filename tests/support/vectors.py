"""An independent writer of Delta's deletion-vector formats (z85, the portable 64-bit Roaring
serialisation through pyroaring, vector files and descriptors): what the decoder's tests and the
readers' tests build vectors with, never spark-mlt's own code.

Example::

    descriptor = inline_vector(serialize(deleted([1, 5]), run_optimize=False), 2)
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyroaring

from spark_mlt.delta.read.deletion_vectors import MAGIC, DeletionVector

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_encode(data: bytes) -> str:
    """Z85 as Delta writes inline vectors: zero-padded to whole 4-byte blocks."""
    padded = data + b"\0" * (-len(data) % 4)
    chars: list[str] = []
    for start in range(0, len(padded), 4):
        value = int.from_bytes(padded[start : start + 4], "big")
        chars.extend(_Z85[value // 85**power % 85] for power in range(4, -1, -1))
    return "".join(chars)


def serialize(rows: npt.NDArray[np.uint64], *, run_optimize: bool) -> bytes:
    """A Delta vector of ``rows``: the magic number, then pyroaring's portable 64-bit bitmap."""
    bitmap = pyroaring.BitMap64(rows.tolist())
    if run_optimize:
        bitmap.run_optimize()
    return MAGIC.to_bytes(4, "little") + bitmap.serialize()


def record(data: bytes) -> bytes:
    """One vector of a vector file: its size, its bytes, their CRC-32 (big-endian numbers)."""
    return len(data).to_bytes(4, "big") + data + zlib.crc32(data).to_bytes(4, "big")


def write_vector_file(file: Path, vectors: list[bytes]) -> list[int]:
    """Writes a vector file of ``vectors`` (after the version byte); their offsets."""
    offsets, blob = [], bytearray(b"\x01")
    for data in vectors:
        offsets.append(len(blob))
        blob += record(data)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(bytes(blob))
    return offsets


#: The protocol's example UUID (d2c639aa-8816-431a-aaf6-d3fe2512ff61) in Z85.
UUID_Z85 = "^-aqEH.-t@S}K{vb[*k^"


def uuid_file_vector(
    table: Path, data: bytes, cardinality: int, *, prefix: str = "", before: bytes | None = None
) -> DeletionVector:
    """A ``u`` vector in its file under ``table``; ``before`` is another vector stored ahead of
    it in the same file (so that its offset is not 1)."""
    relative = DeletionVector("u", prefix + UUID_Z85, 1, len(data), cardinality).relative_path
    offsets = write_vector_file(table / str(relative), [data] if before is None else [before, data])
    return DeletionVector("u", prefix + UUID_Z85, offsets[-1], len(data), cardinality)


def inline_vector(data: bytes, cardinality: int) -> DeletionVector:
    return DeletionVector("i", z85_encode(data), None, len(data), cardinality)


def deleted(rows: Iterable[int] | npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.uint64]:
    return np.unique(np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.uint64))
