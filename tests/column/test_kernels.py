"""Every codec kernel against exact integer arithmetic, on the NumPy of every PySpark line.

The kernels lean on NumPy details (``np.take`` index casting, unsigned views, BLAS
products), which differ between NumPy 1.x (the 3.5 line's stack) and 2.x, so these run in
the compatibility suite too. The reference is Python integers, not light-mlt, which the
compatibility venvs do not install.
"""

from __future__ import annotations

import numpy as np
import pytest

from spark_mlt import MLTCodec
from tests.support import jvm_vectors

pytestmark = pytest.mark.compat

# (p, n) per kernel: GF(2) bits (whole and partial bytes, the 2**63 boundary at n = 64),
# byte lanes (short vectors by token pairs, long ones by BLAS indices), float64 BLAS, uint64.
CASES = [
    (2, 40), (2, 21), (2, 64), (13, 6), (251, 8), (3, 39), (3, 41), (5, 16), (251, 9),
    (1009, 5), (65521, 4), (2**31 - 1, 3),
]  # fmt: skip


def _encode_exactly(codec: MLTCodec, ids: np.ndarray) -> np.ndarray:
    p, n = codec.p, codec.n
    digits = [[(int(i) // p ** (n - 1 - j)) % p for j in range(n)] for i in ids]
    return (np.array(digits, dtype=object).dot(codec.M.astype(object)) % p).astype(np.int64)


def _decode_exactly(codec: MLTCodec, tokens: np.ndarray) -> list[int]:
    digits = tokens.astype(object).dot(codec.M_inv.astype(object)) % codec.p
    return [sum(int(d) * codec.p ** (codec.n - 1 - j) for j, d in enumerate(row)) for row in digits]


@pytest.mark.parametrize(("p", "n"), CASES)
def test_every_kernel_agrees_with_integer_arithmetic_including_ids_beyond_2_to_63(p: int, n: int) -> None:
    codec = MLTCodec.from_seed(p, n, seed=p + n)
    rng = np.random.default_rng(n)
    ids = rng.integers(0, codec.max_id, size=400, endpoint=True)
    ids[:2] = [0, codec.max_id]
    tokens = codec.encode(ids)
    np.testing.assert_array_equal(tokens, _encode_exactly(codec, ids))
    np.testing.assert_array_equal(codec.decode(tokens), ids)
    np.testing.assert_array_equal(codec.encode(ids[::3]), tokens[::3])  # strided input
    np.testing.assert_array_equal(codec.decode(np.asfortranarray(tokens)[::3]), ids[::3])
    vectors = rng.integers(0, p, size=(400, n)).astype(np.int32)  # arbitrary vectors, some >= 2**63
    expected = _decode_exactly(codec, vectors)
    decoded, valid = codec.decode_masked(vectors)
    assert valid.tolist() == [e < 2**63 for e in expected]
    assert decoded.tolist() == [e if e < 2**63 else 0 for e in expected]


def test_the_jvm_kernels_vectors_are_what_the_numpy_codec_writes() -> None:
    """Maven's unit tests check the JVM engine's kernels against this file: it must not drift
    from the codec (``python -m tests.support.jvm_vectors`` rewrites it)."""
    assert jvm_vectors.PATH.read_text() == jvm_vectors.vectors()
