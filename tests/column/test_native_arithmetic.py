"""The native engine's arithmetic, evaluated on Python integers (no Spark).

The builders write SQL text; a tiny evaluator (tests.support.sqleval) runs that text with
Spark's semantics, so every path (GF(2) parities and XOR tables for p = 2, lookup tables for
small p, lane-wise multiply-adds for large p) can be checked on whole domains and at the
63-bit edge in milliseconds. The Spark tests (test_functions.py) run the same text in Spark.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_mlt import MLTCodec
from spark_mlt.codec import MAX_ID
from spark_mlt.codec.tables import TABLE_ENTRIES, decode_tables, encode_tables, xor_decode_tables, xor_encode_tables
from spark_mlt.column import sqltext as sql
from spark_mlt.column.builders import decoded_sql, encode_tokens, packed_parity
from spark_mlt.column.layouts import LAYOUT
from tests.support.marks import exhaustive_beyond
from tests.support.sqleval import Node, Overflow, compile_sql

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)


@functools.cache
def _codec(p: int, n: int) -> MLTCodec:
    return MLTCodec.from_seed(p, n, seed=p * n)


def _int(value: object) -> int | None:
    assert not isinstance(value, Overflow), "a bigint overflowed"
    return value if value is None else int(value)  # type: ignore[call-overload]


@functools.cache
def _encoder(codec: MLTCodec) -> Node:
    return compile_sql(sql.call("array", encode_tokens("x", codec)))  # one text: shared words are evaluated once


def _encoded(codec: MLTCodec, ids: Sequence[int]) -> list[list[int | None]]:
    encoder = _encoder(codec)
    return [[_int(token) for token in encoder({"x": i})] for i in ids]


@functools.cache
def _decoder(codec: MLTCodec, layout: str) -> tuple[Node, Node]:
    names = [f"i{j}" for j in range(codec.n)]
    value, checks = decoded_sql("packed", names, codec, LAYOUT[layout])  # type: ignore[index]
    return compile_sql(value), compile_sql(sql.and_(checks) if checks else "true")


def _decoded_ids(codec: MLTCodec, codes: Sequence[Sequence[int]], layout: str) -> list[int | None]:
    """Each code's id by the native decoder (null where invalid), from its tokens or packed."""
    run_value, run_checks = _decoder(codec, layout)
    out = []
    for code in codes:
        env: dict[str, int | None] = {f"i{j}": int(token) for j, token in enumerate(code)}
        env["packed"] = int(codec.pack([code])[0]) if layout == "packed" else None
        if layout == "packed":
            bits = codec.require_packed_bits()
            env.update({f"i{j}": (env["packed"] % 2**64) >> (bits * j) & (2**bits - 1) for j in range(codec.n)})  # type: ignore[operator]
        out.append(_int(run_value(env)) if run_checks(env) is not False else None)
    return out


# Codecs of every path: p = 2 (parities, XOR tables), tables (p * p <= TABLE_ENTRIES), lanes
# of multiply-adds (large p), one token per word (p = 65521), and capacities beyond 2**63.
# The older lines (their numpy) check one table path and one lane path (tests.support.marks).
WHOLE_DOMAINS = exhaustive_beyond(
    [(2, 1), (2, 12), (3, 7), (5, 5), (7, 4), (13, 3), (31, 2), (37, 2), (1009, 1), (65521, 1)], kept={(3, 7), (13, 3)}
)
RANDOM_CODECS = [(2, 40), (2, 63), (3, 39), (7, 8), (13, 6), (31, 12), (1009, 5), (251, 8), (65521, 4)]
RANDOM_IDS = exhaustive_beyond(RANDOM_CODECS, kept={(2, 40), (65521, 4)})


@pytest.mark.parametrize(("p", "n"), WHOLE_DOMAINS)
def test_native_arithmetic_matches_the_codec_on_the_whole_domain(p: int, n: int) -> None:
    codec = MLTCodec.from_seed(p, n, seed=3)
    ids = np.arange(codec.capacity)
    tokens = codec.encode(ids).tolist()
    assert _encoded(codec, ids.tolist()) == tokens
    for layout in ["array"] + (["packed"] if codec.packed_bits else []):
        assert _decoded_ids(codec, tokens, layout) == ids.tolist(), layout


@pytest.mark.parametrize(("p", "n"), RANDOM_IDS)
@given(data=st.data())
def test_native_arithmetic_matches_the_codec_on_random_ids(p: int, n: int, data: st.DataObject) -> None:
    codec = _codec(p, n)
    ids = [*data.draw(st.lists(st.integers(0, codec.max_id), min_size=1, max_size=20)), 0, codec.max_id]
    tokens = codec.encode(ids).tolist()
    assert _encoded(codec, ids) == tokens
    for layout in ["array"] + (["packed"] if codec.packed_bits else []):
        assert _decoded_ids(codec, tokens, layout) == ids, layout


def _code_of(codec: MLTCodec, value: int) -> list[int]:
    """The exact tokens of any value below p**n, in Python ints."""
    digits = []
    for _ in range(codec.n):
        value, digit = divmod(value, codec.p)
        digits.append(digit)
    return [sum(d * m for d, m in zip(digits[::-1], column, strict=True)) % codec.p for column in codec.M.T.tolist()]


@pytest.mark.parametrize(("p", "n"), [(2, 64), (251, 8), (65521, 4), (3, 41), (2, 70)])
def test_codes_of_2_to_63_or_more_decode_to_null(p: int, n: int) -> None:
    codec = _codec(p, n)
    values = [MAX_ID, 2**63, 2**63 + 1, codec.capacity - 1]
    layouts = ["array"] + (["packed"] if codec.packed_bits else [])
    for layout in layouts:
        assert _decoded_ids(codec, [_code_of(codec, v) for v in values], layout) == [MAX_ID, None, None, None]


@pytest.mark.parametrize(("p", "n"), [(1_073_741_827, 8), (2_147_483_647, 3), (65521, 4), (1009, 5), (251, 8)])
def test_invalid_tokens_never_overflow_the_decoders_arithmetic(p: int, n: int) -> None:
    """Regression (issue 71): sum_mod sized its groups for terms below p, but the decoder feeds
    it masked tokens, up to 2**token_bits - 1 (p = 2**30 + 3, n = 8: ANSI mode's
    ARITHMETIC_OVERFLOW instead of the invalid row's null or error). Spark computes the id and
    the checks of every row with an id before it picks the result, so no token may overflow
    either."""
    codec = _codec(p, n)
    top = 2**codec.token_bits - 1
    good = [int(t) for t in codec.encode([12345])[0]]
    codes = [[top] * n, [-1] * n, [-(2**31)] * n, [p] * n, [top, *good[1:]], [*good[:-1], -1]]
    names = [f"i{j}" for j in range(n)]
    value, checks = decoded_sql("packed", names, codec, LAYOUT["array"])
    parts = [compile_sql(part) for part in [value, *checks]]
    for code in codes:
        env = dict(zip(names, code, strict=True))
        assert not any(isinstance(part(env), Overflow) for part in parts), code


@pytest.mark.parametrize("n", [1, 9, 10, 11, 40, 63])
def test_p2_packed_tokens_are_the_xor_of_one_entry_per_ten_bits(n: int) -> None:
    codec = _codec(2, n)
    spec = xor_encode_tables(codec)
    assert spec is not None
    assert xor_decode_tables(codec) is not None
    assert all(len(table) <= 1024 for table in spec.tables)
    ids = sorted({i for i in (0, 1, codec.max_id, codec.max_id // 3, 1023, 1024) if i <= codec.max_id})
    run = compile_sql(packed_parity("x", spec))
    packed = [int(run({"x": i})) for i in ids]
    assert packed == codec.pack(codec.encode(ids)).tolist()


def test_lookup_tables_hold_bigints() -> None:
    for codec in (_codec(p, n) for p, n in RANDOM_CODECS):
        tables = [encode_tables(codec), decode_tables(codec)]
        values = [v for spec in tables if spec for group in spec.tables for table in group for v in table]
        values += [
            v for spec in (xor_encode_tables(codec), xor_decode_tables(codec)) if spec for t in spec.tables for v in t
        ]
        assert all(-(2**63) <= v < 2**63 for v in values)


@pytest.mark.parametrize(
    ("p", "n", "chunks"), [(13, 6, 3), (7, 7, 3), (2, 63, 7), (3, 40, 7), (31, 12, 6), (37, 4, None)]
)
def test_table_encoder_keeps_tables_small_and_chunks_few(p: int, n: int, chunks: int | None) -> None:
    spec = encode_tables(MLTCodec.from_seed(p, n))
    assert (None if spec is None else len(spec.reads)) == chunks
    if spec is not None:
        assert all(size <= TABLE_ENTRIES for _, size in spec.reads)
        assert all(len(table) <= TABLE_ENTRIES for group in spec.tables for table in group)
