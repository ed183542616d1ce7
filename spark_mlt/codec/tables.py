"""Lookup tables for the native engine's table encoder and decoder (NumPy only).

A chunk of base-p digits (or of tokens) indexes a table that holds its share of the matrix
product mod p, for a group of outputs side by side in "lanes" of one int64. Spark adds one
entry per chunk and reads each output from its lane ([`spark_mlt.column.lanes`][spark_mlt.column.lanes]), so an
output's expression holds one lookup per chunk whatever n is. The tables are computed here,
once per codec, with no Spark import: they are plain integers that become array literals.

For p = 2 the sum mod 2 is an exclusive or, with no carry at all, so the tables hold whole
results instead of lanes ([`XorTables`][spark_mlt.codec.tables.XorTables]): the packed tokens of ten bits of the id, or
the id bits of ten tokens, and Spark XORs one entry per chunk.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from spark_mlt.codec.codec import MAX_ID, MLTCodec
from spark_mlt.codec.lookup import contribution_table, xor_table

__all__ = [
    "TABLE_ENTRIES",
    "Tables",
    "XorTables",
    "decode_tables",
    "encode_tables",
    "lane_groups",
    "xor_decode_tables",
    "xor_encode_tables",
]

TABLE_ENTRIES = 1024  # largest lookup table (entries) of the table encoder and decoder


@dataclass(frozen=True)
class Tables:
    """Lookup tables that multiply chunks of base-p digits by a matrix mod p, lane-packed.

    The digits are split into chunks (most significant first); chunk c's value ``v_c`` is
    read from the input by `reads` (a divisor and a modulus for an id, a shift and a
    mask for packed tokens); chunk c holds the digits or tokens ``spans[c]`` (first, count).
    ``tables[g][c][v]`` holds, for output group g, chunk c's share
    ``digits(v) @ matrix[rows of c] mod p`` of each output in the group, one ``lane``-bit
    lane per output. Adding one entry per chunk sums every output of the group in its lane
    (no carries: each lane's sum is below ``chunks * p <= 2**lane``); a shift, a mask and
    a ``% p`` then read each output. Each output's expression holds one lookup per chunk,
    so its size does not grow with n.
    """

    reads: tuple[tuple[int, int], ...]
    spans: tuple[tuple[int, int], ...]
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
    per_chunk = 2  # the most digits whose table fits: p**per_chunk <= TABLE_ENTRIES
    while p ** (per_chunk + 1) <= TABLE_ENTRIES:
        per_chunk += 1
    first = next(i for i in range(n) if p ** (n - 1 - i) <= MAX_ID)  # higher digits are 0 for any bigint
    reads: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    shares: list[npt.NDArray[np.int64]] = []
    start = first
    for size in _chunk_sizes(n - first, per_chunk):
        stop = start + size
        shares.append(contribution_table(codec.M[start:stop], p).astype(np.int64))
        reads.append((p ** (n - stop), p**size))
        spans.append((start, size))
        start = stop
    lane, groups, tables = _lane_tables(shares, p, n)
    return Tables(tuple(reads), tuple(spans), lane, groups, tables)


@functools.lru_cache(maxsize=128)
def decode_tables(codec: MLTCodec) -> Tables | None:
    """The decoder's tables: chunks of k tokens of ``bits`` bits (2**(k*bits) <=
    TABLE_ENTRIES, k >= 2), read packed side by side, map to their share of the digits
    ``tokens @ M_inv mod p``. Entries of token values >= p are 0: such rows are rejected by
    the validity check. None where two tokens do not fit in one index."""
    p, n = codec.p, codec.n
    bits = codec.token_bits
    if 2 ** (2 * bits) > TABLE_ENTRIES:
        return None
    per_chunk = max(2, (TABLE_ENTRIES.bit_length() - 1) // bits)
    reads: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    shares: list[npt.NDArray[np.int64]] = []
    start = 0
    for size in _chunk_sizes(n, per_chunk):
        values = np.arange(2 ** (size * bits), dtype=np.int64)
        tokens = np.stack([(values >> (bits * i)) & ((1 << bits) - 1) for i in range(size)], axis=1)
        share = tokens @ codec.M_inv[start : start + size] % p
        share[(tokens >= p).any(axis=1)] = 0
        shares.append(share)
        reads.append((bits * start, (1 << (bits * size)) - 1))
        spans.append((start, size))
        start += size
    lane, groups, tables = _lane_tables(shares, p, n)
    return Tables(tuple(reads), tuple(spans), lane, groups, tables)


XOR_CHUNK = 10  # bits (of the id, or tokens) per XOR table: 1,024 entries


@dataclass(frozen=True)
class XorTables:
    """p = 2: ``tables[c][v]`` is the result's share of chunk c's ``spans[c]`` = (first,
    count) bits (of the id, or tokens) holding v; the result is the XOR of one entry per
    chunk. Entries are int64 bit patterns (bit 63 set reads as negative)."""

    spans: tuple[tuple[int, int], ...]
    tables: tuple[tuple[int, ...], ...]


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _xor_tables(rows: list[int], spans: list[tuple[int, int]]) -> XorTables:
    """Tables of the XOR of ``rows[first + i]`` over the set bits i of each chunk value."""
    tables = [tuple(_signed(v) for v in xor_table(rows[first : first + count], count)) for first, count in spans]
    return XorTables(tuple(spans), tuple(tables))


def _xor_spans(count: int) -> list[tuple[int, int]]:
    return [(first, min(XOR_CHUNK, count - first)) for first in range(0, count, XOR_CHUNK)]


@functools.lru_cache(maxsize=128)
def xor_encode_tables(codec: MLTCodec) -> XorTables | None:
    """p = 2, n <= 64: the packed tokens (token j in bit j) of each chunk of the id's bits
    (bit b of the id is digit n - 1 - b); None for other codecs."""
    p, n = codec.p, codec.n
    if p != 2 or n > 64:
        return None
    matrix = codec.M.tolist()
    rows = [sum(matrix[n - 1 - bit][j] << j for j in range(n)) for bit in range(min(n, 63))]
    return _xor_tables(rows, _xor_spans(len(rows)))


@functools.lru_cache(maxsize=128)
def xor_decode_tables(codec: MLTCodec) -> XorTables | None:
    """p = 2, n <= 64: the id bits (digit i is bit n - 1 - i; bit 63 set means an id of
    2**63 or more) of each chunk of the tokens (token j is bit j); None for other codecs."""
    p, n = codec.p, codec.n
    if p != 2 or n > 64:
        return None
    inverse = codec.M_inv.tolist()
    rows = [sum(inverse[j][i] << (n - 1 - i) for i in range(n)) for j in range(n)]
    return _xor_tables(rows, _xor_spans(n))
