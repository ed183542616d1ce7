"""Vectorised encode/decode kernels behind [`spark_mlt.MLTCodec`][spark_mlt.MLTCodec] (private).

A kernel works on one chunk of already-validated input: ids in ``[0, max_id]`` or tokens
in ``[0, p)``. Four kernels cover every allowed (p, n); the codec picks one by p and n:

* ``_BitKernel`` (p = 2, n <= 64): over GF(2) the map is XOR-linear and base-2 digits are
  the id's bits, so a token vector is a bit string. Encode XORs, per byte of the id, a
  256-entry table of packed token bits, then expands each byte of those bits into 8 int32
  tokens through a (256, 8) table (one ``np.take`` writes the output rows). Decode gathers
  each 8 tokens' bits into a byte with one multiply and XORs, per byte, a table of id
  contributions.
* ``_LaneKernel`` (p <= 256, n >= 2): the map is linear, so an id's tokens are the sum
  mod p of the contributions of its digit groups. Ids are split into limbs of k base-p
  digits (``p**k <= 2**16``); each limb indexes a precomputed table of contributions, and
  the rows are summed and reduced with a branch-free ``min(s, s - m*p)`` on unsigned lanes
  (where ``s < m*p`` the subtraction wraps around to a huge value). Lanes are uint8 when the
  sum fits, else uint16, and rows are padded to a power-of-two byte width so that
  ``np.take`` copies a row in one move. Decoding does the same with token groups and
  ``M_inv``, then reads the id from pairs of digits through 65,536-entry tables; long
  vectors of a small p (many token pairs per digit group, as (3, 39)) instead form the
  group indices and the id's limbs with exact float32 BLAS products.
* ``_FloatKernel`` (``n * p**2 < 2**50``): digits as float64 rows, one BLAS product, and a
  reduction ``v - floor(v/p + 1/(2p)) * p``. Every value is an integer below 2**50, so the
  float arithmetic is exact, and the 1/(2p) offset absorbs the rounding of ``v * (1/p)``
  (its error is far below 1/(2p) there), so the floor is exact too.
* ``_WideKernel`` (anything larger, up to p < 2**31): uint64 products (< 2**62), reduced
  mod p after every multiply-add. Slow but exact.

Ids are rebuilt from digits in uint64 with an explicit check for values reaching 2**63
(possible only when p**n > 2**63), since uint64 arithmetic wraps silently.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from spark_mlt.codec.lookup import contribution_table, xor_table

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Tokens = npt.NDArray[np.integer[Any]]

MAX_ID: Final = 2**63 - 1  # the largest id (ids are int64 / Spark bigint); spark_mlt.codec.MAX_ID
TABLE_ROWS: Final = 1 << 16
FLOAT_LIMIT: Final = 2**50


class Kernel:
    """Encode/decode one validated chunk."""

    def encode_into(self, x: I64, out: npt.NDArray[np.int32]) -> None:
        raise NotImplementedError

    def decode_into(self, tokens: Tokens, out: I64) -> Mask | None:
        """Decode into ``out``; return a mask of rows that decode to 2**63 or more, if any."""
        raise NotImplementedError


def make_kernel(p: int, matrix: I64, inverse: I64) -> Kernel:
    """The fastest exact kernel for this (p, n)."""
    n = matrix.shape[0]
    if p == 2 and n <= 64 and sys.byteorder == "little":  # it reads words as bytes
        return _BitKernel(matrix, inverse)
    if n > 1 and p * p <= TABLE_ROWS:
        return _LaneKernel(p, matrix, inverse)
    if n * p * p < FLOAT_LIMIT:
        return _FloatKernel(p, matrix, inverse)
    return _WideKernel(p, matrix, inverse)


def digit_groups(n: int, k: int) -> list[tuple[int, int]]:
    """(first digit, digits) of each group of k digits, least significant group first."""
    return [(max(0, end - k), min(k, end)) for end in range(n, 0, -k)]


def group_size(p: int, n: int, bound: int) -> int:
    """The largest k <= n (at least 1) with ``p**k <= bound``: digits per group."""
    k = 1
    while k < n and p ** (k + 1) <= bound:
        k += 1
    return k


def place_weights(n: int, groups: Sequence[tuple[int, int]], p: int, dtype: type) -> npt.NDArray[Any]:
    """(n, len(groups)) matrix: a digit row times it gives each group's value (msd first)."""
    weights: npt.NDArray[Any] = np.zeros((n, len(groups)), dtype=dtype)
    for g, (a, size) in enumerate(groups):
        weights[a : a + size, g] = [p ** (size - 1 - i) for i in range(size)]
    return weights


def combine_limbs(limbs: Sequence[npt.NDArray[Any]], radices: Sequence[int], out: I64) -> Mask | None:
    """out = the number whose mixed-radix digits are ``limbs`` (most significant first).

    ``radices[i]`` is the radix of ``limbs[i]`` (every limb is below its radix). Computed in
    uint64, checking for values that reach 2**63 once the running bound allows it (uint64
    arithmetic wraps silently). Returns a mask of such rows, or None when there are none.
    """
    acc = out.view(np.uint64)
    acc[:] = limbs[0]
    overflow: Mask | None = None
    bound = radices[0]  # every value of acc is below bound
    for limb, radix in zip(limbs[1:], radices[1:], strict=True):
        term = limb.astype(np.uint64)
        # No row can reach 2**63 while acc <= (2**63 - radix) // radix (one cheap max).
        if bound * radix > 2**63 and acc.size and int(acc.max()) > (2**63 - radix) // radix:
            # acc * radix + term >= 2**63  <=>  acc > (2**63 - 1 - term) // radix.
            over = acc > (np.uint64(MAX_ID) - term) // np.uint64(radix)
            if over.any():
                overflow = over if overflow is None else overflow | over
                acc[over] = 0
                term[over] = 0
        acc *= np.uint64(radix)
        acc += term
        bound *= radix
    return overflow


def combine_digits(rows: Sequence[npt.NDArray[Any]], p: int, out: I64) -> Mask | None:
    """out = sum of rows[i] * p**(n-1-i), digit rows most significant first.

    Digits are first combined in float64 within groups of k (``p**k <= 2**52``: exact),
    then the groups by [`combine_limbs`][spark_mlt.codec._kernels.combine_limbs].
    """
    n = len(rows)
    k = group_size(p, n, 2**52)
    limbs, radices = [], []
    for a, size in digit_groups(n, k)[::-1]:
        limb = rows[a].astype(np.float64)
        for i in range(1, size):
            limb *= p
            limb += rows[a + i]
        limbs.append(limb)
        radices.append(p**size)
    return combine_limbs(limbs, radices, out)


def _reduce_lanes(acc: npt.NDArray[Any], scratch: npt.NDArray[Any], p: int, bound: int) -> None:
    """acc = acc mod p in place, for unsigned lanes holding values below ``bound``."""
    multiple = 1
    while multiple * 2 * p < bound:
        multiple *= 2
    while multiple:
        np.subtract(acc, multiple * p, out=scratch)  # wraps around where acc < multiple * p
        np.minimum(acc, scratch, out=acc)
        multiple //= 2


def _xor_table(rows: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Entry v (0..255) is the XOR of ``rows[j]`` over the bits j of v, bit 0 = the MSB."""
    padded = [int(row) for row in rows] + [0] * (8 - len(rows))
    return np.array(xor_table(padded[::-1], 8), dtype=np.uint64)


class _BitKernel(Kernel):
    ROWS: Final = 1 << 13  # sub-chunk: keeps every buffer in L2

    def __init__(self, matrix: I64, inverse: I64) -> None:
        self.n = n = matrix.shape[0]
        self.nbytes = nb = (n + 7) // 8
        weights = np.uint64(1) << np.arange(63, -1, -1, dtype=np.uint64)  # bit of position i: 2**(63-i)
        # Token j is bit 63 - j of the packed token word (so byte b, big-endian, holds tokens 8b..8b+7).
        # Encode: id bit 8c + (7 - j) (byte c of the little-endian id, bit 7 - j) is digit n-1-(8c+7-j).
        enc_rows = np.zeros((8, 8), dtype=np.uint64)  # [byte c of the id][bit j from the MSB]
        for c in range(8):
            for j in range(8):
                digit = n - 1 - (8 * c + 7 - j)
                if digit >= 0:
                    enc_rows[c, j] = np.bitwise_or.reduce(weights[:n][matrix[digit] % 2 == 1], initial=np.uint64(0))
        self.enc_tables = [_xor_table(enc_rows[c]) for c in range(nb)]
        # Decode: token j contributes row j of M_inv: digit i is id bit n-1-i.
        id_weights = np.uint64(1) << np.arange(n - 1, -1, -1, dtype=np.uint64)
        token_rows = np.array(
            [np.bitwise_or.reduce(id_weights[inverse[j] % 2 == 1], initial=np.uint64(0)) for j in range(n)]
            + [np.uint64(0)] * (8 * nb - n),
            dtype=np.uint64,
        )
        self.dec_tables = [_xor_table(token_rows[8 * b : 8 * b + 8]) for b in range(nb)]
        # Byte v -> its 8 bits as int32 tokens, MSB first.
        self.expand = ((np.arange(256)[:, None] >> np.arange(7, -1, -1)) & 1).astype(np.int32)

    def encode_into(self, x: I64, out: npt.NDArray[np.int32]) -> None:
        n, nb = self.n, self.nbytes
        step = self.ROWS
        rows = min(step, x.shape[0])
        word = np.empty(rows, dtype=np.uint64)
        term = np.empty(rows, dtype=np.uint64)
        index = np.empty((rows, nb), dtype=np.intp)  # np.take is fastest with intp indices
        padded = None if n % 8 == 0 else np.empty((rows, nb, 8), dtype=np.int32)
        x = np.ascontiguousarray(x)  # its bytes are read through a view
        for start in range(0, x.shape[0], step):
            c = min(step, x.shape[0] - start)
            id_bytes = x[start : start + c].view(np.uint8).reshape(c, 8)  # little-endian bytes
            w, t = word[:c], term[:c]
            np.take(self.enc_tables[0], id_bytes[:, 0], out=w, mode="clip")
            for b in range(1, nb):
                np.take(self.enc_tables[b], id_bytes[:, b], out=t, mode="clip")
                w ^= t
            # Token byte b is byte 7 - b of the (little-endian) word.
            index[:c] = w.view(np.uint8).reshape(c, 8)[:, ::-1][:, :nb]
            if padded is None:
                np.take(self.expand, index[:c], axis=0, out=out[start : start + c].reshape(c, nb, 8), mode="clip")
            else:
                np.take(self.expand, index[:c], axis=0, out=padded[:c], mode="clip")
                out[start : start + c] = padded[:c].reshape(c, 8 * nb)[:, :n]

    def decode_into(self, tokens: Tokens, out: I64) -> Mask | None:
        n, nb = self.n, self.nbytes
        step = self.ROWS
        total = tokens.shape[0]
        rows = min(step, total)
        acc = out.view(np.uint64)
        raw = np.zeros((rows, 8 * nb), dtype=np.uint8)  # tokens as bytes, 0-padded to whole words
        words = np.empty((rows, nb), dtype=np.uint64)
        term = np.empty(rows, dtype=np.uint64)
        for start in range(0, total, step):
            c = min(step, total - start)
            np.copyto(raw[:c, :n], tokens[start : start + c], casting="unsafe")  # tokens are 0 or 1
            # Gather the low bit of each of a word's 8 bytes into its top byte, byte 0 as the MSB.
            packed = words[:c]
            np.multiply(raw[:c].view(np.uint64), np.uint64(_GATHER_BITS), out=packed)
            np.right_shift(packed, np.uint64(56), out=packed)
            packed = packed.view(np.int64)  # bytes: NumPy 1.x takes no uint64 indices
            a, t = acc[start : start + c], term[:c]
            np.take(self.dec_tables[0], packed[:, 0], out=a, mode="clip")
            for b in range(1, nb):
                np.take(self.dec_tables[b], packed[:, b], out=t, mode="clip")
                a ^= t
        if n < 64:
            return None
        overflow = acc >= np.uint64(2**63)
        if not overflow.any():
            return None
        acc[overflow] = 0
        return overflow


# x * _GATHER_BITS >> 56, for a little-endian word x of eight 0/1 bytes, is the byte whose bit
# 7 - i is byte i of x: the product's bit 63 - i comes from byte i alone (no carries).
_GATHER_BITS: Final = 0x8040201008040201


class _LaneKernel(Kernel):
    ROWS: Final = 1 << 13  # sub-chunk of the wide decode: keeps every buffer in L2

    def __init__(self, p: int, matrix: I64, inverse: I64) -> None:
        self.p, self.n = p, matrix.shape[0]
        self.groups = digit_groups(self.n, group_size(p, self.n, TABLE_ROWS))
        # Tables hold contributions < p <= 251 as bytes; the sum of all group terms is
        # accumulated in uint8 lanes when it fits there, else in uint16 lanes.
        self.lane = np.dtype(np.uint8 if len(self.groups) * (p - 1) < 256 else np.uint16)
        # Pad rows to a power-of-two byte width (up to 32): np.take copies those in one move.
        self.width = 1 << (self.n - 1).bit_length() if self.n <= 32 else self.n
        self.enc_tables = [self._table(matrix[a : a + size]) for a, size in self.groups]
        self.compact = self.width != self.n
        # BLAS indices pay for themselves once token pairs outnumber digit groups 3 to 1
        # (measured: (3, 39) decodes 1.9x faster, (13, 6) and (251, 8) 1.5x slower).
        self.wide = (self.n + 1) // 2 > 3 * len(self.groups)
        if self.wide:
            # Long vectors: group indices and ids are formed by float32 BLAS products (every
            # value and partial sum is an integer below 2**24, so they are exact).
            self.dec_tables = [self._table(inverse[a : a + size]) for a, size in self.groups]
            self.index_weights = place_weights(self.n, self.groups, p, np.float32)
            id_groups = digit_groups(self.n, group_size(p, self.n, 2**24))[::-1]  # most significant first
            self.id_weights = place_weights(self.n, id_groups, p, np.float32)
            self.id_radices = [p**size for _, size in id_groups]
        else:
            # Decoding indexes tables by the raw bytes of two tokens (t[a] + 256 * t[a+1]).
            self.dec_tables = [self._byte_pair_table(inverse[a : a + 2]) for a in range(0, self.n, 2)]
            # Ids from digits: tables indexed by two digits' bytes, valid while p**n <= 2**63.
            self.pair_tables, self.pair_radices = self._pair_tables()

    def _table(self, rows: I64) -> npt.NDArray[Any]:
        table = np.zeros((self.p ** rows.shape[0], self.width), dtype=np.uint8)
        table[:, : self.n] = contribution_table(rows, self.p)
        return table

    def _byte_pair_table(self, rows: I64) -> npt.NDArray[np.uint8]:
        """Contributions of one or two tokens, indexed by their bytes read as a uint16."""
        table = np.zeros((TABLE_ROWS if rows.shape[0] == 2 else 256, self.width), dtype=np.uint8)
        values = contribution_table(rows, self.p)  # indexed by t[a] * p + t[a+1]
        if rows.shape[0] == 2:
            first, second = np.divmod(np.arange(self.p * self.p), self.p)
            table[first + 256 * second, : self.n] = values
        else:
            table[: self.p, : self.n] = values
        return table

    def _pair_tables(self) -> tuple[list[npt.NDArray[np.uint16]], list[int]]:
        """Tables mapping the bytes of digits (2j, 2j+1), read as one uint16, to the
        two-digit limb ``d[2j] * p + d[2j+1]`` (or ``d[2j]`` alone for a last odd digit)."""
        high, low = np.divmod(np.arange(TABLE_ROWS, dtype=np.int64), 256)
        tables, radices = [], []
        for j in range(0, self.n, 2):
            if j + 1 < self.n:
                value, radix = np.where((low < self.p) & (high < self.p), low * self.p + high, 0), self.p**2
            else:
                value, radix = np.where(low < self.p, low, 0), self.p
            tables.append(value.astype(np.uint16))
            radices.append(radix)
        return tables, radices

    def _sum(self, tables: list[npt.NDArray[Any]], indices: Sequence[npt.NDArray[Any]]) -> npt.NDArray[Any]:
        """Sum of the indexed table rows mod p, as (rows, width) lanes (padding lanes are 0)."""
        acc = np.empty((indices[0].shape[0], self.width), dtype=self.lane)
        term = np.empty_like(acc, dtype=np.uint8)
        lane_values = 1 << (8 * self.lane.itemsize)
        bound = 1  # every lane of acc is below bound
        for j, (table, index) in enumerate(zip(tables, indices, strict=True)):
            direct = j == 0 and acc.dtype == np.uint8
            np.take(table, index, axis=0, out=acc if direct else term, mode="clip")
            if j == 0:
                if not direct:
                    acc[:] = term
            else:
                if bound + self.p - 1 > lane_values:  # only for very wide codecs
                    _reduce_lanes(acc, np.empty_like(acc), self.p, bound)
                    bound = self.p
                np.add(acc, term, out=acc)
            bound += self.p - 1
        _reduce_lanes(acc, np.empty_like(acc), self.p, bound)
        return acc

    def encode_into(self, x: I64, out: npt.NDArray[np.int32]) -> None:
        rest = x.view(np.uint64)
        limbs = []
        for j, (_, size) in enumerate(self.groups):
            if j == len(self.groups) - 1:
                limbs.append(rest.view(np.int64))
                break
            radix = np.uint64(self.p**size)
            quotient = rest // radix  # division by a scalar constant: fast in NumPy
            limbs.append((rest - quotient * radix).view(np.int64))
            rest = quotient
        lanes = self._sum(self.enc_tables, limbs)
        if self.width == self.n:
            out[:] = lanes
        elif self.compact:
            out.reshape(-1)[:] = _drop_padding(lanes, self.n)
        else:
            out[:] = lanes[:, : self.n]  # a strided copy: correct, several times slower

    def decode_into(self, tokens: Tokens, out: I64) -> Mask | None:
        if self.wide:
            return self._decode_wide(tokens, out)
        rows = tokens.shape[0]
        raw = np.ascontiguousarray(tokens, dtype=np.uint8)  # tokens < p <= 251 fit a byte
        pairs = np.ndarray((rows, self.n // 2), dtype="<u2", buffer=raw, strides=(self.n, 2))
        indices: list[npt.NDArray[Any]] = [pairs[:, j] for j in range(self.n // 2)]
        if self.n % 2:
            indices.append(raw[:, self.n - 1])
        digits = self._sum(self.dec_tables, indices)
        # Digits are < p <= 251, so each fits a byte, and two bytes index a pair table.
        pairs = digits if digits.dtype == np.uint8 else digits.astype(np.uint8)
        if pairs.shape[1] % 2:
            pairs = np.pad(pairs, ((0, 0), (0, 1)))
        pair_index = pairs.view("<u2")  # explicit little-endian: byte 2j + 256 * byte 2j+1
        limbs = [table.take(pair_index[:, j], mode="clip") for j, table in enumerate(self.pair_tables)]
        return combine_limbs(limbs, self.pair_radices, out)

    def _decode_wide(self, tokens: Tokens, out: I64) -> Mask | None:
        step = self.ROWS
        total = tokens.shape[0]
        rows = min(step, total)
        floats = np.empty((rows, self.n), dtype=np.float32)
        index = np.empty((rows, len(self.groups)), dtype=np.float32)
        columns = np.empty((len(self.groups), rows), dtype=np.intp)
        limbs = np.empty((rows, len(self.id_radices)), dtype=np.float32)
        ilimbs = np.empty((len(self.id_radices), rows), dtype=np.int64)
        overflow: Mask | None = None
        for start in range(0, total, step):
            c = min(step, total - start)
            np.copyto(floats[:c], tokens[start : start + c], casting="unsafe")
            np.matmul(floats[:c], self.index_weights, out=index[:c])
            np.copyto(columns[:, :c], index[:c].T, casting="unsafe")
            digits = self._sum(self.dec_tables, list(columns[:, :c]))
            np.copyto(floats[:c], digits[:, : self.n], casting="unsafe")
            np.matmul(floats[:c], self.id_weights, out=limbs[:c])
            np.copyto(ilimbs[:, :c], limbs[:c].T, casting="unsafe")
            over = combine_limbs(list(ilimbs[:, :c]), self.id_radices, out[start : start + c])
            overflow = _mark_rows(overflow, over, start, total)
        return overflow


def _mark_rows(mask: Mask | None, rows: Mask | None, start: int, total: int) -> Mask | None:
    """``mask`` (of ``total`` rows, created on first use) with ``rows`` set from ``start``."""
    if rows is None:
        return mask
    if mask is None:
        mask = np.zeros(total, dtype=np.bool_)
    mask[start : start + rows.shape[0]] = rows
    return mask


def _drop_padding(lanes: npt.NDArray[Any], n: int) -> npt.NDArray[Any]:
    """The first n lanes of every row, packed contiguously.

    Each row's first n lanes are read as one opaque field of a structured view (offset 0,
    itemsize the padded row), so the copy moves one fixed-size item per row: 2x faster than a
    strided copy of rows this short, and only what NumPy documents.
    """
    rows, width = lanes.shape
    item = lanes.dtype.itemsize
    row = np.dtype({"names": ["head"], "formats": [f"V{n * item}"], "offsets": [0], "itemsize": width * item})
    heads = np.empty(rows, dtype=f"V{n * item}")
    heads[...] = lanes.view(row).reshape(rows)["head"]
    return heads.view(lanes.dtype)


def _floor_reciprocal(divisor: int, vmax: int) -> float | None:
    """A float64 m with ``floor(fl(v * m)) == v // divisor`` for every integer 0 <= v <= vmax.

    With u = 2**-53 and m = 1/divisor + delta: fl(v*m) >= v*m*(1-u) >= v/divisor as long as
    delta >= m*u, and fl(v*m) <= v*m*(1+u) < v//divisor + 1 as long as
    vmax*(delta + m*u) < 1/divisor. Both are checked exactly (Fractions); None if they fail.
    """
    u = Fraction(1, 2**53)
    m = 1.0 / divisor
    for _ in range(16):
        m = float(np.nextafter(m, np.inf))
        delta = Fraction(m) - Fraction(1, divisor)
        if delta >= Fraction(m) * u:
            break
    else:  # pragma: no cover - two or three steps always suffice
        return None
    if vmax * (delta + Fraction(m) * u) >= Fraction(1, divisor):
        return None
    return m


def _exact(reciprocal: float | None, p: int, n: int) -> float:
    if reciprocal is None:  # pragma: no cover - make_kernel only picks this kernel when it exists
        raise RuntimeError(f"no exact float64 reduction for p={p}, n={n}; please report this")
    return reciprocal


class _FloatKernel(Kernel):
    """float64 + BLAS kernel for ``n * p**2 < 2**50``.

    Encode: ids are split (uint64 division by a constant) into limbs of k digits below 2**32. Within
    a limb l, digit i (counted from the limb's least significant end) is congruent mod p to the
    partial quotient ``floor(l / p**i)``, so the BLAS operand rows are those quotients (one multiply
    + floor each, exact by [`_floor_reciprocal`][spark_mlt.codec._kernels._floor_reciprocal]) and no
    remainders are formed. V = rows @ M is exact (integers below 2**51) and is reduced as ``V - p *
    floor(V * m)``. Decode: V = tokens @ M_inv, reduced the same way, digits are combined into limbs
    below 2**52 by a second (exact) BLAS product, then in int64.
    """

    ROWS: Final = 8192  # sub-chunk: keeps every buffer in L2

    def __init__(self, p: int, matrix: I64, inverse: I64) -> None:
        self.p, self.n = p, matrix.shape[0]
        n = self.n
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float64)
        self.inverse = np.ascontiguousarray(inverse, dtype=np.float64)
        # Encode limbs: the largest k with p**k < 2**32 whose V bound still reduces exactly.
        for k in range(n, 0, -1):
            if p**k > 2**32:
                continue
            groups = digit_groups(n, k)
            vmax = sum((p**size - 1) // p**j * (p - 1) for _, size in groups for j in range(size))
            m = _floor_reciprocal(p, vmax)
            recips = [_floor_reciprocal(p**j, p**size - 1) for _, size in groups for j in range(1, size)]
            if m is not None and all(r is not None for r in recips):
                break
        self.enc_groups = groups
        recips_by_power = {j: _floor_reciprocal(p**j, 2**32) for j in range(1, k)}
        # Decode: digits < p, V < n * p**2; digits combined in limbs below 2**52.
        dec_m = _floor_reciprocal(p, n * (p - 1) ** 2)
        self.enc_m: float = _exact(m, p, n)
        self.recips: dict[int, float] = {j: _exact(r, p, n) for j, r in recips_by_power.items()}
        self.dec_m: float = _exact(dec_m, p, n)
        self.dec_groups = digit_groups(n, group_size(p, n, 2**52))[::-1]  # most significant first
        self.limb_weights = place_weights(n, self.dec_groups, p, np.float64)
        self.radices = [p**size for _, size in self.dec_groups]

    def _reduce_into(self, v: F64, scratch: F64, m: float) -> None:
        """v = v mod p in place (v holds integers with floor(v*m) == v // p)."""
        np.multiply(v, m, out=scratch)
        np.floor(scratch, out=scratch)
        scratch *= self.p
        v -= scratch

    def encode_into(self, x: I64, out: npt.NDArray[np.int32]) -> None:
        step = self.ROWS
        rows = min(step, x.shape[0])
        n, p = self.n, self.p
        limbs = np.empty((len(self.enc_groups), rows), dtype=np.uint64)
        tmp = np.empty(rows, dtype=np.uint64)
        d = np.empty((n, rows), dtype=np.float64)  # row i: a value congruent to digit i
        v = np.empty((rows, n), dtype=np.float64)
        s = np.empty((rows, n), dtype=np.float64)
        last = len(self.enc_groups) - 1
        for start in range(0, x.shape[0], step):
            c = min(step, x.shape[0] - start)
            rest = x[start : start + c].view(np.uint64)
            for g, (a, size) in enumerate(self.enc_groups):
                if g == last:
                    limb = rest
                else:
                    radix = np.uint64(p**size)
                    q = limbs[g + 1, :c]
                    np.floor_divide(rest, radix, out=q)
                    np.multiply(q, radix, out=tmp[:c])
                    limb = limbs[g, :c]
                    np.subtract(rest, tmp[:c], out=limb)
                    rest = q
                top = d[a + size - 1, :c]
                np.copyto(top, limb.view(np.int64), casting="unsafe")  # exact: < 2**32
                for j in range(1, size):
                    row = d[a + size - 1 - j, :c]
                    np.multiply(top, self.recips[j], out=row)
                    np.floor(row, out=row)
            vc, sc = v[:c], s[:c]
            np.matmul(d[:, :c].T, self.matrix, out=vc)
            self._reduce_into(vc, sc, self.enc_m)
            np.copyto(out[start : start + c], vc, casting="unsafe")

    def decode_into(self, tokens: Tokens, out: I64) -> Mask | None:
        step = self.ROWS
        total = tokens.shape[0]
        rows = min(step, total)
        n = self.n
        t = np.empty((rows, n), dtype=np.float64)
        v = np.empty((rows, n), dtype=np.float64)
        s = np.empty((rows, n), dtype=np.float64)
        nl = len(self.dec_groups)
        limbs = np.empty((rows, nl), dtype=np.float64)
        ilimbs = np.empty((rows, nl), dtype=np.int64)
        overflow: Mask | None = None
        for start in range(0, total, step):
            c = min(step, total - start)
            np.copyto(t[:c], tokens[start : start + c], casting="unsafe")
            vc, sc = v[:c], s[:c]
            np.matmul(t[:c], self.inverse, out=vc)
            self._reduce_into(vc, sc, self.dec_m)
            if nl == 1:
                np.matmul(vc, self.limb_weights[:, 0], out=limbs[:c, 0])
                np.copyto(out[start : start + c], limbs[:c, 0], casting="unsafe")
                continue
            np.matmul(vc, self.limb_weights, out=limbs[:c])
            np.copyto(ilimbs[:c], limbs[:c], casting="unsafe")
            if nl == 2 and int(ilimbs[:c, 0].max()) <= (2**63 - self.radices[1]) // self.radices[1]:
                # Fast path: no row can reach 2**63; out = hi * radix + lo, directly in int64.
                o = out[start : start + c]
                np.multiply(ilimbs[:c, 0], self.radices[1], out=o)
                o += ilimbs[:c, 1]
                continue
            cols = [ilimbs[:c, g] for g in range(nl)]
            over = combine_limbs(cols, self.radices, out[start : start + c])
            overflow = _mark_rows(overflow, over, start, total)
        return overflow


class _WideKernel(Kernel):
    def __init__(self, p: int, matrix: I64, inverse: I64) -> None:
        self.p, self.n = p, matrix.shape[0]
        self.matrix, self.inverse = matrix.astype(np.uint64), inverse.astype(np.uint64)

    def _multiply(self, digits: U64, weights: U64) -> U64:
        """digits @ weights mod p, reducing after every product (< 2**62 + p: no overflow)."""
        p = np.uint64(self.p)
        result = np.zeros(digits.shape, dtype=np.uint64)
        for j in range(self.n):
            column = result[:, j]
            for i in range(self.n):
                column += digits[:, i] * weights[i, j]
                column %= p
        return result

    def encode_into(self, x: I64, out: npt.NDArray[np.int32]) -> None:
        digits = np.empty((x.shape[0], self.n), dtype=np.uint64)
        rest = x.astype(np.uint64)
        for i in range(self.n - 1, -1, -1):
            rest, digits[:, i] = np.divmod(rest, np.uint64(self.p))
        out[:] = self._multiply(digits, self.matrix)

    def decode_into(self, tokens: Tokens, out: I64) -> Mask | None:
        digits = self._multiply(tokens.astype(np.uint64), self.inverse)
        return combine_digits([digits[:, i] for i in range(self.n)], self.p, out)
