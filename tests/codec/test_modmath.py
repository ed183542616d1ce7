from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_mlt.codec.modmath import integer_root_ceil, inverse_mod_p, is_prime, next_prime


def _sieve(limit: int) -> set[int]:
    flags = np.ones(limit, dtype=bool)
    flags[:2] = False
    for i in range(2, int(limit**0.5) + 1):
        if flags[i]:
            flags[i * i :: i] = False
    return set(np.flatnonzero(flags).tolist())


def _det(matrix: list[list[int]]) -> int:
    """Exact integer determinant (Bareiss), independent of the code under test."""
    m = [row[:] for row in matrix]
    n, sign, prev = len(m), 1, 1
    for k in range(n - 1):
        if m[k][k] == 0:
            swap = next((r for r in range(k + 1, n) if m[r][k]), None)
            if swap is None:
                return 0
            m[k], m[swap] = m[swap], m[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                m[i][j] = (m[i][j] * m[k][k] - m[i][k] * m[k][j]) // prev
        prev = m[k][k]
    return sign * m[n - 1][n - 1]


def test_is_prime_matches_a_sieve_below_100k() -> None:
    primes = _sieve(100_000)
    assert [v for v in range(100_000) if is_prime(v)] == sorted(primes)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2**31 - 1, True), (2**61 - 1, True), (2**31 + 1, False), (3215031751, False), (65521, True), (1, False)],
)
def test_is_prime_on_large_and_strong_pseudoprimes(value: int, expected: bool) -> None:
    assert is_prime(value) is expected


def test_next_prime() -> None:
    assert [next_prime(v) for v in (0, 2, 14, 65520, 65522)] == [2, 2, 17, 65521, 65537]


@given(st.integers(0, 10**30), st.integers(1, 12))
def test_integer_root_ceil_is_the_smallest_root(value: int, n: int) -> None:
    r = integer_root_ceil(value, n)
    assert r**n >= value
    assert r == 0 or (r - 1) ** n < value


@given(st.sampled_from([2, 3, 13, 251, 65521, 2**31 - 1]), st.integers(1, 8), st.integers(0, 2**32))
def test_inverse_mod_p_is_an_inverse_or_none_when_singular(p: int, n: int, seed: int) -> None:
    matrix = np.random.default_rng(seed).integers(0, p, size=(n, n)).tolist()
    inverse = inverse_mod_p(matrix, p)
    if inverse is None:
        assert _det(matrix) % p == 0
        return
    product = (np.array(matrix, dtype=object).dot(np.array(inverse, dtype=object))) % p
    assert (product == np.eye(n, dtype=np.int64).astype(object)).all()


def test_inverse_mod_p_detects_a_singular_matrix() -> None:
    assert inverse_mod_p([[1, 2], [2, 4]], 7) is None
    assert inverse_mod_p([[3, 0], [0, 7]], 7) is None  # 7 == 0 mod 7
