"""The hashing trick of the paper's baseline, as scikit-learn's ``FeatureHasher`` computes it.

Each rating is the two strings ``user_<id>`` and ``movie_<id>``; a string's feature index is
``|h| mod width`` and its value ``+1`` where ``h >= 0``, else ``-1`` (``alternate_sign``), with
``h`` the signed 32-bit MurmurHash3 (x86, seed 0) of its UTF-8 bytes. Only the distinct ids are
hashed (a dictionary lookup per row after that), so the cost is in the number of ids.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["hashed_features", "murmur3_32"]

_C1, _C2, _MASK = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def _mix(k: int) -> int:
    return (_rotl((k * _C1) & _MASK, 15) * _C2) & _MASK


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 (x86, 32-bit) of ``data`` as a signed int32, as scikit-learn's
    ``murmurhash3_32(..., positive=False)`` gives it.

    Example::

        >>> murmur3_32(b"user_1")
        -670171451
    """
    h = seed & _MASK
    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        h ^= _mix(int.from_bytes(data[i : i + 4], "little"))
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & _MASK
    tail = data[whole:]
    if tail:
        h ^= _mix(int.from_bytes(tail, "little"))
    h ^= len(data)
    for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * factor) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def hashed_features(
    prefix: str, ids: npt.NDArray[np.int64], width: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """The feature index and sign of ``f"{prefix}{id}"`` for every id."""
    distinct, inverse = np.unique(ids, return_inverse=True)
    hashes = np.array([murmur3_32(f"{prefix}{value}".encode()) for value in distinct.tolist()], dtype=np.int64)
    index = (np.abs(hashes) % width).astype(np.int32)
    sign = np.where(hashes >= 0, 1.0, -1.0).astype(np.float32)
    return index[inverse], sign[inverse]
