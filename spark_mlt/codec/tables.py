"""Lookup tables for the native engine's table encoder and packed-token decoder (NumPy only).

A chunk of base-p digits (or of packed tokens) indexes a table that holds its share of the
matrix product mod p, for a group of outputs side by side in "lanes" of one int64. Spark adds
one entry per chunk and reads each output from its lane (:mod:`spark_mlt.column.lanes`), so an
output's expression holds one lookup per chunk whatever n is. The tables are computed here,
once per codec, with no Spark import: they are plain integers that become array literals.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from spark_mlt.codec.codec import MAX_ID, MLTCodec

__all__ = ["TABLE_ENTRIES", "Tables", "decode_tables", "encode_tables", "lane_groups"]

TABLE_ENTRIES = 1024  # largest lookup table (entries) of the table encoder and decoder


@dataclass(frozen=True)
class Tables:
    """Lookup tables that multiply chunks of base-p digits by a matrix mod p, lane-packed.

    The digits are split into chunks (most significant first); chunk c's value ``v_c`` is
    read from the input by :attr:`reads` (a divisor and a modulus for an id, a shift and a
    mask for packed tokens). ``tables[g][c][v]`` holds, for output group g, chunk c's share
    ``digits(v) @ matrix[rows of c] mod p`` of each output in the group, one ``lane``-bit
    lane per output. Adding one entry per chunk sums every output of the group in its lane
    (no carries: each lane's sum is below ``chunks * p <= 2**lane``); a shift, a mask and
    a ``% p`` then read each output. Each output's expression holds one lookup per chunk,
    so its size does not grow with n.
    """

    reads: tuple[tuple[int, int], ...]
    lane: int
    groups: tuple[tuple[int, ...], ...]
    tables: tuple[tuple[tuple[int, ...], ...], ...]


def lane_groups(outputs: int, lane: int) -> list[tuple[int, ...]]:
    """Outputs packed side by side, ``62 // lane`` per int64 word (at least one).

    Example::

        >>> lane_groups(5, 20)
        [(0, 1, 2), (3, 4)]
    """
    per_word = max(1, 62 // lane)
    return [tuple(range(start, min(outputs, start + per_word))) for start in range(0, outputs, per_word)]


def _chunk_sizes(count: int, per_chunk: int) -> list[int]:
    chunks = -(-count // per_chunk)
    return [count // chunks + (1 if i < count % chunks else 0) for i in range(chunks)]


def _lane_tables(
    shares: list[npt.NDArray[np.int64]], p: int, outputs: int
) -> tuple[int, tuple[tuple[int, ...], ...], tuple[tuple[tuple[int, ...], ...], ...]]:
    """Lane-packed tables for chunk shares ``shares[c]`` ((entries, outputs) arrays in [0, p))."""
    lane = max(1, len(shares) * (p - 1)).bit_length()
    groups = tuple(lane_groups(outputs, lane))
    tables = []
    for group in groups:
        shifts = np.array([lane * (j - group[0]) for j in group], dtype=np.int64)
        tables.append(tuple(tuple(int(v) for v in (share[:, group] << shifts).sum(axis=1)) for share in shares))
    return lane, groups, tuple(tables)


@functools.lru_cache(maxsize=128)
def encode_tables(codec: MLTCodec) -> Tables | None:
    """The table encoder's tables for ``codec``, or None where a chunk would hold fewer than
    two digits (p**2 > TABLE_ENTRIES): there, digit-by-digit arithmetic is as small."""
    p, n = codec.p, codec.n
    if p * p > TABLE_ENTRIES:
        return None
    per_chunk = int(np.floor(np.log(TABLE_ENTRIES) / np.log(p) + 1e-9))
    while p**per_chunk > TABLE_ENTRIES:
        per_chunk -= 1
    first = next(i for i in range(n) if p ** (n - 1 - i) <= MAX_ID)  # higher digits are 0 for any bigint
    reads: list[tuple[int, int]] = []
    shares: list[npt.NDArray[np.int64]] = []
    start = first
    for size in _chunk_sizes(n - first, per_chunk):
        stop = start + size
        values = np.arange(p**size, dtype=np.int64)
        digits = np.stack([(values // p ** (size - 1 - i)) % p for i in range(size)], axis=1)
        shares.append(digits @ codec.M[start:stop] % p)
        reads.append((p ** (n - stop), p**size))
        start = stop
    lane, groups, tables = _lane_tables(shares, p, n)
    return Tables(tuple(reads), lane, groups, tables)


@functools.lru_cache(maxsize=128)
def decode_tables(codec: MLTCodec) -> Tables | None:
    """The packed-token decoder's tables: chunks of k tokens of ``bits`` bits (2**(k*bits)
    <= TABLE_ENTRIES) map to their share of the digits ``tokens @ M_inv mod p``. Entries of
    token values >= p are 0: such rows are rejected by the validity check."""
    p, n, bits = codec.p, codec.n, codec.packed_bits
    if bits is None or 2 ** (2 * bits) > TABLE_ENTRIES:
        return None
    per_chunk = max(2, int(np.log2(TABLE_ENTRIES)) // bits)
    reads: list[tuple[int, int]] = []
    shares: list[npt.NDArray[np.int64]] = []
    start = 0
    for size in _chunk_sizes(n, per_chunk):
        values = np.arange(2 ** (size * bits), dtype=np.int64)
        tokens = np.stack([(values >> (bits * i)) & ((1 << bits) - 1) for i in range(size)], axis=1)
        share = tokens @ codec.M_inv[start : start + size] % p
        share[(tokens >= p).any(axis=1)] = 0
        shares.append(share)
        reads.append((bits * start, (1 << (bits * size)) - 1))
        start += size
    lane, groups, tables = _lane_tables(shares, p, n)
    return Tables(tuple(reads), lane, groups, tables)
