"""The NumPy codec: algebra, light-mlt parity, validation and serialisation."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("light_mlt", reason="light-mlt is a dev dependency; the compatibility venvs do not install it")
from light_mlt.light_mlt import gauss_jordan_inv_mod_p, random_invertible_matrix_mod_p, to_base_p_matrix

from spark_mlt import (
    CodecFormatError,
    CodecParameterError,
    InvalidIdError,
    InvalidTokenError,
    MLTCodec,
    MLTError,
    MLTTypeError,
    errors,
)
from spark_mlt.codec import MAX_ID

SMALL_PRIMES = [2, 3, 5, 7, 11, 13, 31, 127, 131, 251, 257, 65521, 65537]
LARGE_PRIMES = [1_000_003, 2_147_483_629, 2**31 - 1]


@st.composite
def codec_and_ids(draw: st.DrawFn, primes: list[int] = SMALL_PRIMES) -> tuple[MLTCodec, np.ndarray]:
    p = draw(st.sampled_from(primes))
    n = draw(st.integers(1, 16 if p < 300 else 5))
    codec = MLTCodec.from_seed(p, n, seed=draw(st.integers(0, 2**32)))
    ids = draw(st.lists(st.integers(0, codec.max_id), min_size=0, max_size=300))
    edges = [0, codec.max_id, codec.max_id // 2]
    return codec, np.array(ids + edges, dtype=np.int64)


def _light_mlt_fits(p: int, n: int) -> bool:
    """light-mlt multiplies in int64 without reducing: exact only while n*(p-1)^2 < 2^63."""
    return n * (p - 1) ** 2 < 2**63


# ---------------------------------------------------------------- algebra and parity
@given(codec_and_ids())
def test_decode_inverts_encode(case: tuple[MLTCodec, np.ndarray]) -> None:
    codec, ids = case
    tokens = codec.encode(ids)
    assert tokens.dtype == np.int32
    assert tokens.shape == (ids.size, codec.n)
    assert ((tokens >= 0) & (tokens < codec.p)).all()
    np.testing.assert_array_equal(codec.decode(tokens), ids)


@given(codec_and_ids(LARGE_PRIMES))
def test_round_trip_is_exact_for_primes_near_2_to_31(case: tuple[MLTCodec, np.ndarray]) -> None:
    codec, ids = case
    np.testing.assert_array_equal(codec.decode(codec.encode(ids)), ids)


@given(st.sampled_from(SMALL_PRIMES + LARGE_PRIMES), st.integers(1, 16), st.integers(0, 2**32))
def test_tokens_match_light_mlt_bit_for_bit(p: int, n: int, seed: int) -> None:
    codec = MLTCodec.from_seed(p, n, seed=seed)
    reference_m = random_invertible_matrix_mod_p(n, p, np.random.default_rng(seed))
    np.testing.assert_array_equal(codec.M, reference_m)
    if not _light_mlt_fits(p, n):
        return  # light-mlt itself overflows here; our round trip is covered above
    ids = np.random.default_rng(seed).integers(0, codec.max_id, size=500, endpoint=True)
    ids[:2] = [0, codec.max_id]
    expected = to_base_p_matrix(ids, p, n) @ reference_m % p
    np.testing.assert_array_equal(codec.encode(ids), expected)
    np.testing.assert_array_equal(codec.M_inv, gauss_jordan_inv_mod_p(reference_m, p))


@pytest.mark.parametrize(("p", "n"), [(2, 1), (2, 16), (3, 5), (5, 4), (7, 3), (13, 2), (251, 2), (65521, 1)])
def test_encode_is_a_bijection_on_the_whole_domain(p: int, n: int) -> None:
    codec = MLTCodec.from_seed(p, n, seed=7)
    ids = np.arange(codec.capacity, dtype=np.int64)
    tokens = codec.encode(ids)
    assert np.unique(tokens, axis=0).shape[0] == codec.capacity
    np.testing.assert_array_equal(codec.decode(tokens), ids)


@given(st.sampled_from(SMALL_PRIMES + LARGE_PRIMES), st.integers(1, 12), st.integers(0, 2**32))
def test_matrix_times_inverse_is_the_identity_mod_p(p: int, n: int, seed: int) -> None:
    codec = MLTCodec.from_seed(p, n, seed=seed)
    product = codec.M.astype(object).dot(codec.M_inv.astype(object)) % p
    assert (product == np.eye(n, dtype=np.int64).astype(object)).all()


def test_neighbouring_ids_differ_in_most_token_positions() -> None:
    """id -> id + 1 adds M's last row to the tokens (mod p) unless the last base-p digit wraps,
    so neighbours differ wherever that row is non-zero: 5 of 6 positions here, not all."""
    codec = MLTCodec.from_seed(13, 6, seed=42)
    tokens = codec.encode(np.arange(1000))
    steps = (tokens[1:] - tokens[:-1]) % 13
    no_wrap = np.arange(999) % 13 != 12
    assert (steps[no_wrap] == codec.M[-1]).all()
    changed = (tokens[1:] != tokens[:-1]).sum(axis=1)
    assert changed.mean() > codec.n / 2


def test_encode_and_decode_accept_every_integer_dtype_and_empty_input() -> None:
    codec = MLTCodec.from_seed(251, 8)
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        ids = np.array([0, 1, 100], dtype=dtype)
        np.testing.assert_array_equal(codec.decode(codec.encode(ids)), [0, 1, 100])
        np.testing.assert_array_equal(codec.decode(codec.encode(ids).astype(np.int64)), [0, 1, 100])
    assert codec.encode([]).shape == (0, 8)
    assert codec.decode(np.empty((0, 8), dtype=np.int32)).shape == (0,)
    assert codec.decode([]).shape == (0,)


def test_ids_up_to_2_to_63_minus_1_round_trip_when_capacity_exceeds_it() -> None:
    codec = MLTCodec.from_seed(251, 8)
    assert codec.capacity > 2**63
    ids = np.array([MAX_ID, MAX_ID - 1, 2**62, 2**62 + 12345], dtype=np.int64)
    np.testing.assert_array_equal(codec.decode(codec.encode(ids)), ids)


def test_encoding_is_chunk_independent() -> None:
    """Pins the chunked loop: rows on either side of a chunk boundary encode as alone."""
    codec = MLTCodec.from_seed(7, 7)
    ids = np.random.default_rng(3).integers(0, codec.max_id + 1, size=100_003)
    tokens = codec.encode(ids)
    for row in (0, 32767, 32768, 65536, 100_002):
        np.testing.assert_array_equal(tokens[row], codec.encode(ids[row : row + 1])[0])


# ---------------------------------------------------------------- construction
def test_for_cardinality_picks_the_smallest_n_for_a_given_p() -> None:
    codec = MLTCodec.for_cardinality(138_493, p=7)
    assert (codec.p, codec.n) == (7, 7)
    assert 7**6 <= 138_493 < codec.capacity


def test_for_cardinality_picks_the_smallest_prime_for_a_given_n() -> None:
    codec = MLTCodec.for_cardinality(1_000_000, n=2)
    assert codec.p == 1009  # 1000^2 = 1e6 is not > 1e6; 1009 is the next prime
    assert codec.p**2 > 1_000_000


def test_for_cardinality_default_policy_is_p_13_and_the_smallest_n() -> None:
    codec = MLTCodec.for_cardinality(164_320)
    assert (codec.p, codec.n, codec.seed) == (13, 5, 42)


def test_for_cardinality_follows_the_strict_rule_p_to_the_n_greater_than_v() -> None:
    assert MLTCodec.for_cardinality(13**3, p=13).n == 4
    assert MLTCodec.for_cardinality(13**3 - 1, p=13).n == 3


def test_for_cardinality_says_which_parameters_would_fit() -> None:
    with pytest.raises(
        CodecParameterError, match=r"p=13, n=4 .*28561.* V=100000; n=5 would fit with p=13, or p=19 with n=4"
    ):
        MLTCodec.for_cardinality(100_000, p=13, n=4)
    with pytest.raises(CodecParameterError, match=r"no prime below 2\^31 gives p\^1 > V=9223372036854775807"):
        MLTCodec.for_cardinality(MAX_ID, n=1)


def test_same_seed_gives_the_same_codec_and_another_seed_another() -> None:
    assert MLTCodec.from_seed(13, 6, 1) == MLTCodec.from_seed(13, 6, 1)
    assert MLTCodec.from_seed(13, 6, 1) != MLTCodec.from_seed(13, 6, 2)
    assert hash(MLTCodec.from_seed(13, 6, 1)) == hash(MLTCodec.from_seed(13, 6, 1))


def test_codec_is_immutable() -> None:
    codec = MLTCodec.from_seed(13, 3)
    with pytest.raises(ValueError, match="read-only"):
        codec.M[0, 0] = 1
    with pytest.raises(AttributeError):
        codec.p = 7  # type: ignore[misc]


def test_codec_from_an_explicit_matrix_reduces_entries_mod_p() -> None:
    codec = MLTCodec(7, [[8, 0], [0, -6]])
    assert codec.M.tolist() == [[1, 0], [0, 1]]
    assert codec.seed is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"p": 12, "matrix": [[1]]}, r"p must be prime, got p=12 \(the nearest prime above is 13\)"),
        (
            {"p": 2**31, "matrix": [[1]]},
            r"p must be a prime in \[2, 2\^31 - 1\] \(tokens are int32\), got p=2147483648",
        ),
        ({"p": 1, "matrix": [[1]]}, r"got p=1"),
        ({"p": 7.0, "matrix": [[1]]}, r"p must be an integer, got 7.0 \(float\)"),
        ({"p": True, "matrix": [[1]]}, r"p must be an integer, got True"),
        ({"p": 7, "matrix": [[1, 2, 3], [4, 5, 6]]}, r"matrix must be square n x n with n >= 1, got shape \(2, 3\)"),
        ({"p": 7, "matrix": []}, r"matrix must be square"),
        ({"p": 7, "matrix": [[1, 2], [2, 4]]}, r"matrix is singular mod p=7"),
        ({"p": 7, "matrix": [[1.5, 0], [0, 1]]}, r"matrix must be an n x n array of integers: entry 1.5 is a float"),
    ],
)
def test_bad_parameters_are_refused_with_a_message_naming_them(kwargs: dict, message: str) -> None:
    with pytest.raises(CodecParameterError, match=message):
        MLTCodec(**kwargs)


def test_bad_n_and_seed_are_refused() -> None:
    with pytest.raises(CodecParameterError, match=r"n must be in \[1, 1024\], got n=0"):
        MLTCodec.from_seed(13, 0)
    with pytest.raises(CodecParameterError, match=r"seed must be >= 0 .* got seed=-1"):
        MLTCodec.from_seed(13, 2, seed=-1)
    with pytest.raises(CodecParameterError, match=r"cardinality must be in \[0, 2\^63 - 1\], got -5"):
        MLTCodec.for_cardinality(-5)


# ---------------------------------------------------------------- input validation
def test_a_negative_id_is_named_with_its_row() -> None:
    codec = MLTCodec.from_seed(13, 6)
    with pytest.raises(
        InvalidIdError, match=r"id -5 at row 2 is outside the codec's domain \[0, 4826809\) \(p=13, n=6\)"
    ):
        codec.encode([0, 1, -5, -7])


def test_an_id_at_capacity_is_refused() -> None:
    codec = MLTCodec.from_seed(13, 6)
    with pytest.raises(InvalidIdError, match=r"id 4826809 at row 40000 "):
        codec.encode(np.r_[np.zeros(40_000, dtype=np.int64), 4_826_809])


def test_uint64_ids_at_or_above_2_to_63_are_refused() -> None:
    codec = MLTCodec.from_seed(251, 8)
    with pytest.raises(InvalidIdError, match=r"id 9223372036854775808 at row 1"):
        codec.encode(np.array([1, 2**63], dtype=np.uint64))


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (np.array([1.0, 2.0]), r"ids must be integers, got dtype float64 \(first value np.float64\(1.0\)\)"),
        (np.array(["a"]), r"ids must be integers, got dtype <U1"),
        (np.array([True]), r"ids must be integers, got dtype bool"),
        (np.array([[1, 2]]), r"ids must be a 1-D array of ids, got shape \(1, 2\)"),
        ([1, None], r"ids must be integers, got dtype object"),
    ],
)
def test_non_integer_ids_raise_a_type_error(ids: object, message: str) -> None:
    codec = MLTCodec.from_seed(13, 2)
    with pytest.raises(MLTTypeError, match=message) as info:
        codec.encode(ids)  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, ValueError)


def test_tokens_of_the_wrong_width_are_refused() -> None:
    codec = MLTCodec.from_seed(13, 6)
    with pytest.raises(InvalidTokenError, match=r"token arrays must have width n=6, got shape \(2, 5\)"):
        codec.decode(np.zeros((2, 5), dtype=np.int32))


@pytest.mark.parametrize("bad", [13, -1, 2**40])
def test_a_token_outside_0_p_is_named_with_row_and_position(bad: int) -> None:
    codec = MLTCodec.from_seed(13, 3)
    tokens = np.zeros((5, 3), dtype=np.int64)
    tokens[3, 2] = bad
    with pytest.raises(InvalidTokenError, match=rf"token {bad} at row 3, position 2 is outside \[0, 13\)"):
        codec.decode(tokens)


@pytest.mark.parametrize("n", [17, 24, 39, 40, 63, 64])
def test_binary_codecs_of_every_width_match_light_mlt_and_refuse_ids_beyond_2_to_63(n: int) -> None:
    codec = MLTCodec.from_seed(2, n, seed=n)
    rng = np.random.default_rng(n)
    ids = rng.integers(0, codec.max_id, size=3000, endpoint=True)
    ids[:2] = [0, codec.max_id]
    tokens = codec.encode(ids)
    np.testing.assert_array_equal(tokens, to_base_p_matrix(ids, 2, n) @ codec.M % 2)
    np.testing.assert_array_equal(codec.decode(tokens), ids)
    vectors = rng.integers(0, 2, size=(3000, n)).astype(np.int32)
    digits = vectors.astype(object).dot(codec.M_inv.astype(object)) % 2
    expected = [int("".join(map(str, row)), 2) for row in digits]
    decoded, valid = codec.decode_masked(vectors)
    assert valid.tolist() == [e < 2**63 for e in expected]
    assert decoded.tolist() == [e if e < 2**63 else 0 for e in expected]
    assert (not valid.all()) == (n == 64)


def test_a_token_vector_beyond_2_to_63_is_refused() -> None:
    codec = MLTCodec.from_seed(251, 8)
    largest = codec.encode([MAX_ID])
    digits = []  # the base-251 digits of 2^63, mapped to tokens by hand
    value = 2**63
    for _ in range(8):
        value, digit = divmod(value, 251)
        digits.append(digit)
    tokens = np.array(digits[::-1], dtype=object).dot(codec.M.astype(object)) % 251
    vectors = np.vstack([largest, tokens.astype(np.int64)])
    with pytest.raises(InvalidTokenError, match=r"at row 1 decodes to an id >= 2\^63"):
        codec.decode(vectors)
    ids, valid = codec.decode_masked(vectors)
    assert valid.tolist() == [True, False]
    assert ids.tolist() == [MAX_ID, 0]


def test_masked_modes_flag_bad_rows_instead_of_raising() -> None:
    codec = MLTCodec.from_seed(13, 2)
    tokens, valid = codec.encode_masked([5, -1, 169, 168])
    assert valid.tolist() == [True, False, False, True]
    assert tokens[1].tolist() == [0, 0]
    assert tokens[2].tolist() == [0, 0]
    np.testing.assert_array_equal(tokens[[0, 3]], codec.encode([5, 168]))
    ids, valid = codec.decode_masked(np.array([[0, 0], [13, 0], [1, -2], tokens[3]]))
    assert valid.tolist() == [True, False, False, True]
    assert ids.tolist() == [codec.decode([[0, 0]])[0], 0, 0, 168]


def test_every_error_is_an_mlt_error_and_a_value_error() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    assert len(classes) == 31  # spark_mlt.errors' hierarchy; update with it
    for cls in classes:
        assert issubclass(cls, MLTError), cls
        assert issubclass(cls, ValueError), cls


# ---------------------------------------------------------------- serialisation
@given(st.sampled_from(SMALL_PRIMES + LARGE_PRIMES), st.integers(1, 10), st.integers(0, 2**32))
def test_json_round_trip_preserves_the_codec(p: int, n: int, seed: int) -> None:
    codec = MLTCodec.from_seed(p, n, seed)
    text = codec.to_json()
    loaded = MLTCodec.from_json(text)
    assert loaded == codec
    assert loaded.to_json() == text
    assert MLTCodec.from_json(text.encode()) == codec
    assert MLTCodec.from_json(json.loads(text)) == codec


def test_json_document_is_canonical_and_versioned() -> None:
    document = json.loads(MLTCodec.from_seed(13, 2, seed=42).to_json())
    assert sorted(document) == ["M", "M_inv", "digit_order", "fingerprint", "format", "n", "p", "seed", "version"]
    assert document["format"] == "spark-mlt/codec"
    assert document["version"] == 1
    assert document["digit_order"] == "msd-first"
    assert len(document["fingerprint"]) == 64


def _tampered(change: str) -> str:
    document = json.loads(MLTCodec.from_seed(13, 3, seed=42).to_json())
    if change == "M":
        document["M"][0][0] = (document["M"][0][0] + 1) % 13
    elif change == "M_inv":
        document["M_inv"][0][0] = (document["M_inv"][0][0] + 1) % 13
    elif change == "seed":
        document["seed"] = 43
    elif change == "n":
        document["n"] = 4
    elif change == "p":
        document["p"] = 12
    elif change == "version":
        document["version"] = 2
    elif change == "missing":
        del document["M_inv"]
    elif change == "matrix-type":
        document["M"] = "[[1]]"
    return json.dumps(document)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("M", r"fingerprint .* does not match its parameters"),
        ("seed", r"fingerprint .* does not match its parameters"),
        ("M_inv", r"M_inv is not the inverse of M mod p=13"),
        ("n", r"says n=4 but M is 3 x 3"),
        ("p", r"invalid parameters: p must be prime, got p=12"),
        ("version", r"version=2; expected format='spark-mlt/codec', version=1"),
        ("missing", r"missing field\(s\) \['M_inv'\]"),
        ("matrix-type", r"field 'M' must be a square matrix of integers"),
    ],
)
def test_tampered_json_is_refused(change: str, message: str) -> None:
    with pytest.raises(CodecFormatError, match=message):
        MLTCodec.from_json(_tampered(change))


def test_truncated_json_is_refused_with_its_start_quoted() -> None:
    text = MLTCodec.from_seed(13, 3).to_json()
    with pytest.raises(CodecFormatError, match=r"codec JSON is not valid JSON .*starts with '\{\"M\":"):
        MLTCodec.from_json(text[: len(text) // 2])
    with pytest.raises(CodecFormatError, match=r"must be an object, got list"):
        MLTCodec.from_json("[1, 2]")


def test_pickling_goes_through_the_validated_json_document() -> None:
    codec = MLTCodec.from_seed(65521, 4)
    payload = pickle.dumps(codec)
    assert b"spark-mlt/codec" in payload
    assert pickle.loads(payload) == codec


def test_repr_names_the_parameters() -> None:
    assert repr(MLTCodec.from_seed(13, 6, seed=42)).startswith("MLTCodec(p=13, n=6, seed=42, fingerprint=")


@pytest.mark.parametrize(("p", "n", "bits"), [(13, 6, 4), (2, 64, 1), (251, 8, 8), (65521, 4, 16), (3, 33, None)])
def test_pack_and_unpack_invert_each_other_when_tokens_fit_in_64_bits(p: int, n: int, bits: int | None) -> None:
    codec = MLTCodec.from_seed(p, n)
    assert codec.packed_bits == bits
    if bits is None:
        with pytest.raises(CodecParameterError, match="store these tokens as arrays"):
            codec.pack(np.zeros((1, n), dtype=np.int32))
        return
    tokens = codec.encode(np.random.default_rng(0).integers(0, codec.max_id, 1000, endpoint=True))
    packed = codec.pack(tokens)
    assert packed.dtype == np.int64
    np.testing.assert_array_equal(codec.unpack(packed), tokens)
    first = sum(int(t) << (bits * j) for j, t in enumerate(tokens[0]))
    assert int(packed[0]) == (first - 2**64 if first >= 2**63 else first)


def test_pack_refuses_out_of_range_tokens_and_unpack_refuses_stray_bits() -> None:
    codec = MLTCodec.from_seed(13, 2)
    with pytest.raises(InvalidTokenError, match=r"token 13 at row 1, position 0 is outside \[0, 13\)"):
        codec.pack([[0, 0], [13, 0]])
    with pytest.raises(InvalidTokenError, match=r"packed value 256 at row 0 is not 2 tokens of 4 bits"):
        codec.unpack([256])
    with pytest.raises(InvalidTokenError, match=r"packed value 14 at row 0"):
        codec.unpack([14])
