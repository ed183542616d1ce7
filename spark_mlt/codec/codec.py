"""The Modular Linear Tokenization codec: pure NumPy, no Spark.

An id ``x`` in ``[0, p**n)`` is written as n base-p digits, most significant first (``d = (d_0, ...,
d_{n-1})``), and its tokens are ``t = d @ M mod p`` for an invertible n x n matrix ``M`` over Z_p.
Decoding reads ``d = t @ M_inv mod p`` back into ``x``. This is light-mlt's convention, and
[`MLTCodec.from_seed`][spark_mlt.codec.codec.MLTCodec.from_seed] draws ``M`` exactly as light-mlt
does, so tokens are bit-identical to light-mlt's for the same (p, n, seed). The paper writes the
same map as ``t = M' v`` with column vectors; its ``M'`` is our ``M`` transposed.

Design decisions:

* Speed comes from tables and BLAS, not from an integer matrix product: see
  [`spark_mlt.codec._kernels`][spark_mlt.codec._kernels] for the three exact kernels and when each is used.
* Work is chunked (``_CHUNK_ROWS`` rows at a time), so the extra memory beyond the output is
  a few chunk-sized buffers whatever the input size.
* The domain is ``[0, min(p**n, 2**63))``: ids are Spark bigints. Token vectors that decode
  to an id of 2**63 or more (possible when p**n > 2**63) are invalid.
* The codec is immutable. It pickles as its JSON document (see ``__reduce__``), so the copy
  Spark ships to executors inside a UDF is validated again when it arrives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from spark_mlt.codec._kernels import MAX_ID, Kernel, make_kernel
from spark_mlt.codec.modmath import integer_root_ceil, inverse_mod_p, is_prime, next_prime
from spark_mlt.codec.packing import pack_bits, unpack_bits
from spark_mlt.errors import (
    CodecFormatError,
    CodecParameterError,
    InvalidIdError,
    InvalidTokenError,
    MLTTypeError,
)

__all__ = [
    "DEFAULT_P",
    "DEFAULT_SEED",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_ID",
    "MAX_N",
    "MAX_P",
    "MLTCodec",
]

FORMAT_NAME: Final = "spark-mlt/codec"
FORMAT_VERSION: Final = 1
DIGIT_ORDER: Final = "msd-first"
DEFAULT_P: Final = 13  # light-mlt's default prime
DEFAULT_SEED: Final = 42  # light-mlt's default seed
MAX_P: Final = 2**31 - 1  # tokens are int32
MAX_N: Final = 1024

_CHUNK_ROWS: Final = 1 << 15

IdArray = npt.NDArray[np.int64]
TokenArray = npt.NDArray[np.int32]
Mask = npt.NDArray[np.bool_]


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise CodecParameterError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    return int(value)


def _check_p(p: object) -> int:
    value = _check_int("p", p)
    if not 2 <= value <= MAX_P:
        raise CodecParameterError(f"p must be a prime in [2, 2^31 - 1] (tokens are int32), got p={value}")
    if not is_prime(value):
        raise CodecParameterError(f"p must be prime, got p={value} (the nearest prime above is {next_prime(value)})")
    return value


def _check_n(n: object) -> int:
    value = _check_int("n", n)
    if not 1 <= value <= MAX_N:
        raise CodecParameterError(f"n must be in [1, {MAX_N}], got n={value}")
    return value


def _canonical(document: Mapping[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


class MLTCodec:
    """An immutable MLT codec: prime p, width n, matrix M and its inverse mod p.

    Build one with `from_seed` (light-mlt compatible), `for_cardinality` (the
    paper's sizing rule p**n > V), `from_json`, or directly from a matrix.

    Args:
        p: a prime below 2**31.
        matrix: an n x n matrix, invertible mod p; entries are reduced mod p.
        seed: the seed ``M`` was drawn from, when known (kept as provenance).

    Raises:
        CodecParameterError: p is not a prime below 2**31, or the matrix is not square
            or not invertible mod p.

    Example::

        >>> codec = MLTCodec.from_seed(13, 6, seed=42)
        >>> tokens = codec.encode([0, 1, 4826808])
        >>> codec.decode(tokens).tolist()
        [0, 1, 4826808]
    """

    __slots__ = ("_fingerprint", "_kernel_cache", "_m", "_m_inv", "_n", "_p", "_seed")

    def __init__(self, p: int, matrix: npt.ArrayLike, *, seed: int | None = None) -> None:
        self._p = _check_p(p)
        try:
            rows = [[_matrix_entry(v) for v in row] for row in np.asarray(matrix, dtype=object).tolist()]
        except (TypeError, ValueError) as exc:
            raise CodecParameterError(f"matrix must be an n x n array of integers: {exc}") from None
        n = len(rows)
        if n == 0 or any(len(row) != n for row in rows):
            shape = np.shape(np.asarray(matrix, dtype=object))
            raise CodecParameterError(f"matrix must be square n x n with n >= 1, got shape {shape}")
        self._n = _check_n(n)
        inverse = inverse_mod_p(rows, self._p)
        if inverse is None:
            raise CodecParameterError(f"matrix is singular mod p={self._p} (its determinant is 0 mod p)")
        self._m = _frozen(np.array([[v % self._p for v in row] for row in rows], dtype=np.int64))
        self._m_inv = _frozen(np.array(inverse, dtype=np.int64))
        self._seed = None if seed is None else _check_int("seed", seed)
        self._fingerprint = hashlib.sha256(_canonical(self._identity()).encode()).hexdigest()
        self._kernel_cache: Kernel | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_seed(cls, p: int, n: int, seed: int = DEFAULT_SEED) -> MLTCodec:
        """Draw M exactly as light-mlt does: uniform in [0, p) from
        ``numpy.random.default_rng(seed)``, redrawn until invertible mod p.

        Example::

            >>> MLTCodec.from_seed(7, 7, seed=0).capacity
            823543
        """
        p, n = _check_p(p), _check_n(n)
        seed = _check_int("seed", seed)
        if seed < 0:
            raise CodecParameterError(f"seed must be >= 0 (numpy.random.default_rng), got seed={seed}")
        rng = np.random.default_rng(seed)
        while True:
            matrix = rng.integers(0, p, size=(n, n), dtype=np.int64)
            if inverse_mod_p(matrix.tolist(), p) is not None:
                return cls(p, matrix, seed=seed)

    @classmethod
    def for_cardinality(
        cls, cardinality: int, *, p: int | None = None, n: int | None = None, seed: int = DEFAULT_SEED
    ) -> MLTCodec:
        """Size a codec by the paper's rule ``p**n > V`` and draw it with `from_seed`.

        Every id in ``[0, V]`` fits, so this covers 0-based ids below V and 1-based ids up
        to V alike. Given p, n is the smallest that fits; given n, p is the smallest prime
        that fits; given neither, p = 13 (light-mlt's default) and the smallest n.

        Raises:
            CodecParameterError: V is negative or above 2**63 - 1, or the given (p, n) do
                not fit (the message says which would).

        Example::

            >>> codec = MLTCodec.for_cardinality(138_493, n=7)
            >>> (codec.p, codec.n)
            (7, 7)
        """
        cardinality = _check_int("cardinality", cardinality)
        if not 0 <= cardinality <= MAX_ID:
            raise CodecParameterError(f"cardinality must be in [0, 2^63 - 1], got {cardinality}")
        if p is not None and n is not None:
            p, n = _check_p(p), _check_n(n)
            if p**n <= cardinality:
                raise CodecParameterError(
                    f"p={p}, n={n} gives capacity p^n={p**n}, which does not exceed V={cardinality}; "
                    f"n={_smallest_n(cardinality, p)} would fit with p={p}" + _prime_hint(cardinality, n)
                )
        elif n is not None:
            n = _check_n(n)
            p = _smallest_prime(cardinality, n)
        else:
            p = _check_p(DEFAULT_P if p is None else p)
            n = _smallest_n(cardinality, p)
        return cls.from_seed(p, n, seed)

    # ------------------------------------------------------------------ properties
    @property
    def p(self) -> int:
        """The prime modulus; tokens lie in ``[0, p)``."""
        return self._p

    @property
    def n(self) -> int:
        """The number of tokens per id."""
        return self._n

    @property
    def M(self) -> npt.NDArray[np.int64]:  # noqa: N802 - the paper's name
        """The encoding matrix (read-only), entries in ``[0, p)``."""
        return self._m

    @property
    def M_inv(self) -> npt.NDArray[np.int64]:  # noqa: N802 - the paper's name
        """The decoding matrix M^-1 mod p (read-only)."""
        return self._m_inv

    @property
    def seed(self) -> int | None:
        """The seed M was drawn from, or None when built from an explicit matrix."""
        return self._seed

    @property
    def capacity(self) -> int:
        """p**n, the number of distinct token vectors (a Python int, may exceed 2**63)."""
        capacity: int = self._p**self._n
        return capacity

    @property
    def max_id(self) -> int:
        """The largest id the codec accepts: ``min(p**n, 2**63) - 1``."""
        return min(self.capacity - 1, MAX_ID)

    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical parameters: format version, p, n, seed, digit order, M."""
        return self._fingerprint

    def __repr__(self) -> str:
        return f"MLTCodec(p={self._p}, n={self._n}, seed={self._seed}, fingerprint={self._fingerprint[:12]}...)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MLTCodec) and other._fingerprint == self._fingerprint

    def __hash__(self) -> int:
        return hash(self._fingerprint)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (MLTCodec.from_json, (self.to_json(),))

    @property
    def _kernel(self) -> Kernel:
        if self._kernel_cache is None:
            self._kernel_cache = make_kernel(self._p, self._m, self._m_inv)
        return self._kernel_cache

    # ------------------------------------------------------------------ encode
    def encode(self, ids: npt.ArrayLike) -> TokenArray:
        """Tokens of each id: an ``(N, n)`` int32 array.

        Raises:
            MLTTypeError: ids are not integers (floats, strings, booleans) or not 1-D.
            InvalidIdError: an id is negative or above `max_id`; the message names
                the first such id and its row.

        Example::

            >>> MLTCodec.from_seed(13, 6, seed=42).encode([0, 1]).shape
            (2, 6)
        """
        tokens, _valid = self._encode(ids, raise_invalid=True)
        return tokens

    def encode_masked(self, ids: npt.ArrayLike) -> tuple[TokenArray, Mask]:
        """Like `encode`, but returns ``(tokens, valid)`` instead of raising on bad ids.

        Rows where ``valid`` is False hold zeros; callers turn them into nulls or quarantine.
        Wrong dtypes still raise [`MLTTypeError`][spark_mlt.errors.MLTTypeError].

        Example::

            >>> tokens, valid = MLTCodec.from_seed(13, 2).encode_masked([5, -1, 169])
            >>> valid.tolist()
            [True, False, False]
        """
        return self._encode(ids, raise_invalid=False)

    def _encode(self, ids: npt.ArrayLike, *, raise_invalid: bool) -> tuple[TokenArray, Mask]:
        values = _as_integer_array(ids, "ids", ndim=1)
        count = values.shape[0]
        out = np.empty((count, self._n), dtype=np.int32)
        valid = np.ones(count, dtype=np.bool_)
        for start in range(0, count, _CHUNK_ROWS):
            chunk = values[start : start + _CHUNK_ROWS]
            if _outside(chunk, self.max_id):
                bad = (chunk < 0) | (chunk > self.max_id)
                if raise_invalid:
                    row = int(np.flatnonzero(bad)[0])
                    raise InvalidIdError(
                        f"id {int(chunk[row])} at row {start + row} is outside the codec's domain "
                        f"[0, {self.max_id + 1}) (p={self._p}, n={self._n})"
                    )
                valid[start : start + chunk.size] = ~bad
                chunk = np.where(bad, 0, chunk)
            self._kernel.encode_into(chunk.astype(np.int64, copy=False), out[start : start + chunk.size])
        if not raise_invalid and not valid.all():
            out[~valid] = 0
        return out, valid

    # ------------------------------------------------------------------ decode
    def decode(self, tokens: npt.ArrayLike) -> IdArray:
        """Ids of an ``(N, n)`` array of token vectors: an ``(N,)`` int64 array.

        Raises:
            MLTTypeError: tokens are not an integer array.
            InvalidTokenError: the width is not n, a token lies outside ``[0, p)``, or a
                vector decodes to an id of 2**63 or more; the message names the first one.

        Example::

            >>> codec = MLTCodec.from_seed(251, 8)
            >>> codec.decode(codec.encode([2**62])).tolist()
            [4611686018427387904]
        """
        ids, _valid = self._decode(tokens, raise_invalid=True)
        return ids

    def decode_masked(self, tokens: npt.ArrayLike) -> tuple[IdArray, Mask]:
        """Like `decode`, but returns ``(ids, valid)`` instead of raising on bad rows.

        Rows where ``valid`` is False hold 0. A wrong width or dtype still raises.

        Example::

            >>> ids, valid = MLTCodec.from_seed(13, 2).decode_masked([[0, 0], [13, 0]])
            >>> valid.tolist()
            [True, False]
        """
        return self._decode(tokens, raise_invalid=False)

    def _decode(self, tokens: npt.ArrayLike, *, raise_invalid: bool) -> tuple[IdArray, Mask]:
        values = _as_integer_array(tokens, "tokens", ndim=2)
        if values.size == 0 and values.shape[0] == 0:
            values = values.reshape(0, self._n)
        if values.shape[1] != self._n:
            raise InvalidTokenError(
                f"token arrays must have width n={self._n}, got shape {values.shape} (p={self._p}, n={self._n})"
            )
        count = values.shape[0]
        out = np.empty(count, dtype=np.int64)
        valid = np.ones(count, dtype=np.bool_)
        for start in range(0, count, _CHUNK_ROWS):
            chunk = values[start : start + _CHUNK_ROWS]
            bad: Mask | None = None
            if _outside(chunk, self._p - 1):
                bad = np.asarray(((chunk < 0) | (chunk >= self._p)).any(axis=1))
                if raise_invalid:
                    row = int(np.flatnonzero(bad)[0])
                    col = int(np.flatnonzero((chunk[row] < 0) | (chunk[row] >= self._p))[0])
                    raise InvalidTokenError(
                        f"token {int(chunk[row, col])} at row {start + row}, position {col} is outside "
                        f"[0, {self._p}) (p={self._p}, n={self._n})"
                    )
                chunk = np.where(bad[:, None], 0, chunk)
            overflow = self._kernel.decode_into(chunk, out[start : start + chunk.shape[0]])
            if overflow is not None:
                if raise_invalid:
                    row = int(np.flatnonzero(overflow)[0])
                    raise InvalidTokenError(
                        f"token vector {chunk[row].tolist()} at row {start + row} decodes to an id "
                        f">= 2^63, outside the codec's domain [0, 2^63) (p={self._p}, n={self._n})"
                    )
                bad = overflow if bad is None else bad | overflow
            if bad is not None:
                valid[start : start + chunk.shape[0]] = ~bad
        if not raise_invalid and not valid.all():
            out[~valid] = 0
        return out, valid

    # ------------------------------------------------------------------ packed layout
    @property
    def token_bits(self) -> int:
        """Bits that hold any token: ``bit_length(p - 1)`` (at least 1).

        Example::

            >>> MLTCodec.from_seed(13, 6).token_bits
            4
        """
        return max(1, (self._p - 1).bit_length())

    @property
    def packed_bits(self) -> int | None:
        """Bits per token in the packed layout (``bit_length(p - 1)``), or None when the n
        tokens do not fit in 64 bits.

        The packed layout stores a token vector in one int64: token j in bits
        ``[j * b, (j + 1) * b)``. It is how the Delta jobs store tokens by default (one
        column value instead of n), and how the UDF engine returns them to Spark.

        Example::

            >>> MLTCodec.from_seed(13, 6).packed_bits
            4
        """
        bits = self.token_bits
        return bits if bits * self._n <= 64 else None

    def require_packed_bits(self) -> int:
        """`packed_bits`, or CodecParameterError when the tokens do not fit in 64 bits."""
        bits = self.packed_bits
        if bits is None:
            needed = self.token_bits * self._n
            raise CodecParameterError(
                f"the packed layout needs n * bit_length(p - 1) <= 64 bits; p={self._p}, n={self._n} "
                f"needs {needed}: store these tokens as arrays"
            )
        return bits

    def pack(self, tokens: npt.ArrayLike) -> IdArray:
        """Pack an ``(N, n)`` token array into ``(N,)`` int64 values (see `packed_bits`).

        Raises:
            CodecParameterError: the tokens do not fit in 64 bits.
            InvalidTokenError: the width is not n, or a token lies outside ``[0, p)``.

        Example::

            >>> codec = MLTCodec.from_seed(13, 6)
            >>> codec.unpack(codec.pack(codec.encode([7]))).tolist() == codec.encode([7]).tolist()
            True
        """
        bits = self.require_packed_bits()
        values = _as_integer_array(tokens, "tokens", ndim=2)
        if values.shape[0] == 0:
            values = values.reshape(0, self._n)
        if values.shape[1] != self._n:
            raise InvalidTokenError(
                f"token arrays must have width n={self._n}, got shape {values.shape} (p={self._p}, n={self._n})"
            )
        bad = (values < 0) | (values >= self._p)
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            raise InvalidTokenError(
                f"token {int(values[row, col])} at row {row}, position {col} is outside "
                f"[0, {self._p}) (p={self._p}, n={self._n})"
            )
        return pack_bits(values, bits)

    def unpack(self, packed: npt.ArrayLike) -> TokenArray:
        """The ``(N, n)`` int32 tokens of ``(N,)`` packed int64 values (see `packed_bits`).

        Raises:
            CodecParameterError: the tokens do not fit in 64 bits.
            InvalidTokenError: a value has bits set above the n tokens, or a token >= p.

        Example::

            >>> MLTCodec.from_seed(13, 2).unpack([0x5C]).tolist()
            [[12, 5]]
        """
        bits = self.require_packed_bits()
        values = _as_integer_array(packed, "packed tokens", ndim=1).astype(np.int64, copy=False)
        out, fits = unpack_bits(values, bits, self._n)
        bad = (out >= self._p).any(axis=1) | ~fits
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InvalidTokenError(
                f"packed value {int(values[row])} at row {row} is not {self._n} tokens of "
                f"{bits} bits in [0, {self._p}) (p={self._p}, n={self._n})"
            )
        return out

    # ------------------------------------------------------------------ serialisation
    def _identity(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "p": self._p,
            "n": self._n,
            "seed": self._seed,
            "digit_order": DIGIT_ORDER,
            "M": self._m.tolist(),
        }

    def to_dict(self) -> dict[str, Any]:
        """The codec as a JSON-ready dict (see `to_json`)."""
        document = self._identity()
        document["M_inv"] = self._m_inv.tolist()
        document["fingerprint"] = self._fingerprint
        return document

    def to_json(self) -> str:
        """A canonical JSON document (sorted keys, no spaces) with every parameter.

        Keys: ``format``, ``version``, ``p``, ``n``, ``seed`` (null when unknown),
        ``digit_order`` (``"msd-first"``), ``M``, ``M_inv`` and ``fingerprint``.

        Example::

            >>> codec = MLTCodec.from_seed(13, 6)
            >>> MLTCodec.from_json(codec.to_json()) == codec
            True
        """
        return _canonical(self.to_dict())

    @classmethod
    def from_json(cls, document: str | bytes | Mapping[str, Any]) -> MLTCodec:
        """Load a codec written by `to_json` (a string, bytes or parsed dict).

        Raises:
            CodecFormatError: not valid JSON, an unknown format or version, a missing or
                mistyped field, a fingerprint that does not match the parameters, or
                ``M @ M_inv`` not the identity mod p.
        """
        parsed = _parsed_document(document)
        try:
            codec = cls(parsed["p"], parsed["M"], seed=parsed["seed"])
        except CodecParameterError as exc:
            raise CodecFormatError(f"codec JSON holds invalid parameters: {exc}") from None
        if parsed["n"] != codec.n:
            raise CodecFormatError(f"codec JSON says n={parsed['n']!r} but M is {codec.n} x {codec.n}")
        if parsed["fingerprint"] != codec.fingerprint:
            raise CodecFormatError(
                f"codec JSON fingerprint {str(parsed['fingerprint'])[:16]}... does not match its parameters "
                f"({codec.fingerprint[:16]}...): the document was altered"
            )
        m_inv = np.array(parsed["M_inv"], dtype=object)
        if m_inv.shape != (codec.n, codec.n) or not _is_identity_mod_p(codec.M, m_inv, codec.p):
            raise CodecFormatError(f"codec JSON M_inv is not the inverse of M mod p={codec.p}")
        return codec

    @classmethod
    def from_light_mlt_params(cls, params: Mapping[str, Any], *, seed: int | None = None) -> MLTCodec:
        """A codec from one column's light-mlt parameters ``{"p", "n", "M", "Minv"}``.

        Raises:
            CodecFormatError: a key is missing, n does not match M, or Minv is not M's inverse.

        Example::

            >>> import numpy as np
            >>> c = MLTCodec.from_light_mlt_params({"p": 7, "n": 1, "M": np.array([[3]]), "Minv": np.array([[5]])})
            >>> c.encode([2]).tolist()
            [[6]]
        """
        missing = sorted({"p", "n", "M", "Minv"} - set(params))
        if missing:
            raise CodecFormatError(f"light-mlt params are missing key(s) {missing}; expected p, n, M, Minv")
        try:
            codec = cls(params["p"], params["M"], seed=seed)
        except CodecParameterError as exc:
            raise CodecFormatError(f"light-mlt params are invalid: {exc}") from None
        if int(params["n"]) != codec.n:
            raise CodecFormatError(f"light-mlt params say n={params['n']} but M is {codec.n} x {codec.n}")
        m_inv = np.asarray(params["Minv"], dtype=object)
        if m_inv.shape != (codec.n, codec.n) or not _is_identity_mod_p(codec.M, m_inv, codec.p):
            raise CodecFormatError(f"light-mlt params: Minv is not the inverse of M mod p={codec.p}")
        return codec


# ---------------------------------------------------------------------- helpers
def _parsed_document(document: str | bytes | Mapping[str, Any]) -> Mapping[str, Any]:
    """The codec document as a mapping whose header, fields and matrices are well formed."""
    if isinstance(document, str | bytes):
        try:
            parsed = json.loads(document)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            preview = document[:60]
            raise CodecFormatError(f"codec JSON is not valid JSON ({exc}); starts with {preview!r}") from None
    else:
        parsed = document
    if not isinstance(parsed, Mapping):
        raise CodecFormatError(f"codec JSON must be an object, got {type(parsed).__name__}")
    if parsed.get("format") != FORMAT_NAME or parsed.get("version") != FORMAT_VERSION:
        raise CodecFormatError(
            f"codec JSON has format={parsed.get('format')!r}, version={parsed.get('version')!r}; "
            f"expected format={FORMAT_NAME!r}, version={FORMAT_VERSION}"
        )
    missing = sorted({"p", "n", "seed", "digit_order", "M", "M_inv", "fingerprint"} - set(parsed))
    if missing:
        raise CodecFormatError(f"codec JSON is missing field(s) {missing}")
    if parsed["digit_order"] != DIGIT_ORDER:
        raise CodecFormatError(f"codec JSON has digit_order={parsed['digit_order']!r}, expected {DIGIT_ORDER!r}")
    for key in ("M", "M_inv"):
        if not _is_int_matrix(parsed[key]):
            raise CodecFormatError(f"codec JSON field {key!r} must be a square matrix of integers")
    return parsed


def _matrix_entry(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"entry {value!r} is a {type(value).__name__}, not an integer")
    return int(value)


def _frozen(array: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    array.setflags(write=False)
    return array


def _smallest_n(cardinality: int, p: int) -> int:
    n = 1
    while p**n <= cardinality:
        n += 1
    return n


def _smallest_prime(cardinality: int, n: int) -> int:
    p = next_prime(max(2, integer_root_ceil(cardinality + 1, n)))
    if p > MAX_P:
        raise CodecParameterError(
            f"no prime below 2^31 gives p^{n} > V={cardinality}; "
            f"use n >= {_smallest_n(cardinality, next_prime(2**16))} or a larger n"
        )
    return p


def _prime_hint(cardinality: int, n: int) -> str:
    try:
        return f", or p={_smallest_prime(cardinality, n)} with n={n}"
    except CodecParameterError:
        return ""


def _as_integer_array(values: npt.ArrayLike, what: str, *, ndim: int) -> npt.NDArray[np.integer[Any]]:
    array = values if isinstance(values, np.ndarray) else np.asarray(values)
    if array.dtype.kind not in "iu":
        if array.size == 0 and array.dtype.kind == "f" and not isinstance(values, np.ndarray):
            array = array.astype(np.int64)  # an empty Python list
        else:
            raise MLTTypeError(
                f"{what} must be integers, got dtype {array.dtype}"
                + (f" (first value {array.flat[0]!r})" if array.size else "")
            )
    if array.ndim != ndim:
        if ndim == 2 and array.ndim == 1 and array.size == 0:
            return array.reshape(0, 0)
        expected = "a 1-D array of ids" if ndim == 1 else "a 2-D (rows, n) array of tokens"
        raise MLTTypeError(f"{what} must be {expected}, got shape {array.shape}")
    return array


def _outside(values: npt.NDArray[np.integer[Any]], limit: int) -> bool:
    """Whether any value is negative or above ``limit``: one pass (the max of the values read
    as unsigned, where negatives become too large) when the dtype's range allows it."""
    if not values.size:
        return False
    bits = values.dtype.itemsize * 8
    if values.dtype.kind == "u":
        return int(values.max()) > limit
    if limit < 2 ** (bits - 1):  # every negative, read as unsigned, is >= 2**(bits-1) > limit
        return int(values.view(values.dtype.str.replace("i", "u")).max()) > limit
    return int(values.min()) < 0 or int(values.max()) > limit


def _is_int_matrix(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(row, list) and len(row) == len(value) for row in value)
        and all(isinstance(v, int) and not isinstance(v, bool) for row in value for v in row)
    )


def _is_identity_mod_p(m: npt.NDArray[np.int64], m_inv: npt.NDArray[Any], p: int) -> bool:
    n = m.shape[0]
    left = m.astype(object)
    product = left.dot(m_inv.astype(object)) % p  # Python ints: exact for any p
    return bool((product == np.eye(n, dtype=np.int64).astype(object)).all())
