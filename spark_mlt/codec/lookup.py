"""Lookup tables of a matrix, built once for both users: the NumPy kernels
([`spark_mlt.codec._kernels`][spark_mlt.codec._kernels]) and the native engine's SQL tables
([`spark_mlt.codec.tables`][spark_mlt.codec.tables]).

* [`contribution_table`][spark_mlt.codec.lookup.contribution_table]: entry v is ``digits(v) @ rows
  mod p`` (v's base-p digits);
* [`xor_table`][spark_mlt.codec.lookup.xor_table]: entry v is the XOR of the rows picked by v's set bits (p = 2).

Example::

    >>> xor_table([1, 2, 4], 3)
    [0, 1, 2, 3, 4, 5, 6, 7]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["contribution_table", "xor_table"]


def contribution_table(rows: npt.NDArray[np.int64], p: int) -> npt.NDArray[np.uint16]:
    """Row v of the result is ``digits(v) @ rows mod p``, v's k base-p digits most significant
    first (``rows`` is k x n, p < 2**15).

    Built a digit at a time: the table of the first j + 1 digits is that of the first j
    (index v) beside each multiple of row j (index v * p + d), so the work is about
    ``p**k * n`` additions in all (a few ms for (3, 39)'s 59,049-row tables).
    """
    k, n = rows.shape
    table = np.zeros((1, n), dtype=np.uint16)  # sums below 2 * p
    for i in range(k):
        step = (np.arange(p, dtype=np.int64)[:, None] * rows[i][None, :] % p).astype(np.uint16)
        table = (table[:, None, :] + step[None, :, :]).reshape(-1, n)
        np.minimum(table, table - np.uint16(p), out=table)  # s - p wraps around where s < p
    return table


def xor_table(rows: Sequence[int], bits: int) -> list[int]:
    """Entry v (0 .. 2**bits - 1) is the XOR of ``rows[j]`` over the set bits j of v (bit 0 the
    lowest; missing rows are 0)."""
    table = [0] * (1 << bits)
    for value in range(1, 1 << bits):
        low = value & -value
        index = low.bit_length() - 1
        table[value] = table[value ^ low] ^ (rows[index] if index < len(rows) else 0)
    return table
