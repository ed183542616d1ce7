"""Exact modular arithmetic for the codec: primality, matrix inversion over Z_p.

Everything here works on Python integers, so nothing overflows whatever p is; the
matrices are at most a few dozen rows, so speed does not matter. The hot paths (encoding
and decoding millions of ids) live in [`spark_mlt.codec`][spark_mlt.codec] and use NumPy.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["integer_root_ceil", "inverse_mod_p", "is_prime", "next_prime"]

# Deterministic Miller-Rabin witnesses: correct for every n < 3.3e24.
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def is_prime(value: int) -> bool:
    """True when ``value`` is a prime (deterministic for every value below 3.3e24).

    Example::

        >>> is_prime(65521), is_prime(65535)
        (True, False)
    """
    if value < 2:
        return False
    for q in _MR_BASES:
        if value % q == 0:
            return value == q
    d, s = value - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, value)
        if x in (1, value - 1):
            continue
        for _ in range(s - 1):
            x = x * x % value
            if x == value - 1:
                break
        else:
            return False
    return True


def next_prime(value: int) -> int:
    """The smallest prime >= ``value``.

    Example::

        >>> next_prime(14)
        17
    """
    candidate = max(2, value)
    while not is_prime(candidate):
        candidate += 1
    return candidate


def integer_root_ceil(value: int, n: int) -> int:
    """The smallest integer r >= 0 with r**n >= value (exact binary search, no floats).

    Example::

        >>> integer_root_ceil(1_000_001, 2)
        1001
    """
    low, high = 0, 1 << (value.bit_length() // n + 1)  # high**n > value
    while low < high:
        middle = (low + high) // 2
        if middle**n >= value:
            high = middle
        else:
            low = middle + 1
    return low


def inverse_mod_p(matrix: Sequence[Sequence[int]], p: int) -> list[list[int]] | None:
    """The inverse of a square matrix over Z_p by Gauss-Jordan elimination.

    Returns ``None`` when the matrix is singular mod p (its determinant is 0 mod p).

    Example::

        >>> inverse_mod_p([[1, 1], [0, 1]], 7)
        [[1, 6], [0, 1]]
    """
    n = len(matrix)
    rows = [[int(v) % p for v in row] + [int(i == j) for j in range(n)] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col]), None)
        if pivot is None:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        inv = pow(rows[col][col], -1, p)
        rows[col] = [v * inv % p for v in rows[col]]
        for r in range(n):
            factor = rows[r][col]
            if r != col and factor:
                rows[r] = [(a - factor * b) % p for a, b in zip(rows[r], rows[col], strict=True)]
    return [row[n:] for row in rows]
