"""The native engine's table encoder, evaluated on Python integers (no Spark).

The expression builders are generic over an ExpressionTarget; here a tiny target evaluates them
directly, so the lookup-table and lane-wise arithmetic can be checked on whole domains and
at the 63-bit edge in milliseconds. The Spark tests (test_functions.py) run the same
expressions in Spark.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_mlt import MLTCodec
from spark_mlt.codec.tables import TABLE_ENTRIES, encode_tables
from spark_mlt.column.builders import _encode_words

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)


class IntTarget:
    """Evaluates the operations the table encoder uses on Python ints, checking that every
    intermediate is a bigint (as Spark's ANSI mode would)."""

    @staticmethod
    def _bigint(value: int) -> int:
        assert -(2**63) <= value < 2**63, f"{value} overflows a bigint"
        return value

    def lit(self, value: int) -> int:
        return value

    def add(self, a: int, b: int) -> int:
        return self._bigint(a + b)

    def mul(self, a: int, b: int) -> int:
        return self._bigint(a * b)

    def div(self, a: int, b: int) -> int:
        return a // b  # ids are non-negative here

    def mod(self, a: int, b: int) -> int:
        return a % b

    def bit_and(self, a: int, b: int) -> int:
        return a & b

    def bit_or(self, a: int, b: int) -> int:
        return a | b

    def bit_xor(self, a: int, b: int) -> int:
        return a ^ b

    def cast(self, a: int, sql_type: str) -> int:
        assert sql_type == "INT"
        assert 0 <= a < 2**31
        return a

    def long_array(self, values: Sequence[int]) -> Sequence[int]:
        assert all(-(2**63) <= v < 2**63 for v in values[:: max(1, len(values) // 64)])
        return values

    def call(self, name: str, args: Sequence[int | Sequence[int]]) -> int:
        if name == "get":
            table, index = args
            assert isinstance(table, tuple)
            assert isinstance(index, int)
            return table[index]
        assert name == "shiftright"
        value, shift = args
        assert isinstance(value, int)
        assert isinstance(shift, int)
        assert value >= 0
        return value >> shift


@functools.cache
def _codec(p: int, n: int) -> MLTCodec:
    return MLTCodec.from_seed(p, n, seed=p * n)


def _table_tokens(codec: MLTCodec, ids: Sequence[int]) -> list[list[int]]:
    """Each id's tokens from the table encoder."""
    assert encode_tables(codec) is not None
    target = IntTarget()
    tokens = []
    for i in ids:
        words, read = _encode_words(target, i, codec)  # type: ignore[arg-type]
        tokens.append([int(t) for t in read(words)])
    return tokens


@pytest.mark.parametrize(("p", "n"), [(2, 1), (2, 16), (3, 9), (5, 6), (7, 5), (13, 4), (31, 2)])
def test_table_encoder_matches_the_codec_on_the_whole_domain(p: int, n: int) -> None:
    codec = MLTCodec.from_seed(p, n, seed=3)
    ids = np.arange(codec.capacity)
    assert _table_tokens(codec, ids.tolist()) == codec.encode(ids).tolist()


@pytest.mark.parametrize(("p", "n"), [(2, 24), (3, 14), (7, 8), (13, 6), (2, 63), (3, 39), (31, 12), (5, 10)])
@given(data=st.data())
def test_table_encoder_matches_the_codec_on_random_ids(p: int, n: int, data: st.DataObject) -> None:
    codec = _codec(p, n)
    ids = data.draw(st.lists(st.integers(0, codec.max_id), min_size=1, max_size=50))
    assert _table_tokens(codec, ids) == codec.encode(ids).tolist()


def test_table_encoder_is_exact_at_the_chunk_edges() -> None:
    codec = MLTCodec.from_seed(5, 10, seed=9)  # chunks of 4 digits (5**4 = 625 entries)
    ids = [0, 5**4 - 1, 5**4, 5**4 + 1, 5**8 - 1, 5**8, codec.max_id - 5**4, codec.max_id - 1, codec.max_id]
    assert _table_tokens(codec, ids) == codec.encode(ids).tolist()


@pytest.mark.parametrize(
    ("p", "n", "chunks"), [(13, 6, 3), (7, 7, 3), (2, 63, 7), (3, 40, 7), (31, 12, 6), (37, 4, None)]
)
def test_table_encoder_keeps_tables_small_and_chunks_few(p: int, n: int, chunks: int | None) -> None:
    spec = encode_tables(MLTCodec.from_seed(p, n))
    assert (None if spec is None else len(spec.reads)) == chunks
    if spec is not None:
        assert all(size <= TABLE_ENTRIES for _, size in spec.reads)
        assert all(len(table) <= TABLE_ENTRIES for group in spec.tables for table in group)
