"""The packed layout in NumPy: n tokens of ``bits`` bits in one int64, token j in bits
``[j*bits, (j+1)*bits)``.

The one NumPy implementation: `MLTCodec.pack` and `MLTCodec.unpack` add the
checks, the UDF engine packs its output and unpacks packed input with these. (Spark's side,
shifts and masks in SQL expressions, is [`spark_mlt.column.layouts`][spark_mlt.column.layouts].) A loop over the n
columns measures faster than one broadcast shift of the whole (N, n) array, for both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["pack_bits", "unpack_bits"]


def pack_bits(tokens: npt.NDArray[np.integer[Any]], bits: int) -> npt.NDArray[np.int64]:
    """Rows of non-negative tokens below ``2**bits`` packed into int64 (no checks).

    Example::

        >>> pack_bits(np.array([[12, 5]]), 4).tolist()
        [92]
    """
    packed = np.zeros(tokens.shape[0], dtype=np.uint64)
    for j in range(tokens.shape[1]):
        packed |= tokens[:, j].astype(np.uint64) << np.uint64(bits * j)
    return packed.view(np.int64)


def unpack_bits(
    packed: npt.NDArray[np.integer[Any]], bits: int, n: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
    """The ``(N, n)`` tokens of int64 packed values (each in ``[0, 2**bits)``, not checked
    against p), and which values have no bit set above the n tokens.

    Example::

        >>> tokens, fits = unpack_bits(np.array([92, 1 << 8]), 4, 2)
        >>> tokens.tolist(), fits.tolist()
        ([[12, 5], [0, 0]], [True, False])
    """
    values = packed.astype(np.int64, copy=False).view(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    out = np.empty((values.shape[0], n), dtype=np.int32)  # bits <= 31: p < 2**31
    for j in range(n):
        out[:, j] = (values >> np.uint64(bits * j)) & mask
    fits = np.ones(values.shape[0], dtype=np.bool_) if bits * n >= 64 else values >> np.uint64(bits * n) == 0
    return out, fits
