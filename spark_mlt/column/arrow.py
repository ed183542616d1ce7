"""Arrow <-> NumPy glue for the UDF engine (private; runs inside Python workers).

Each layout's Arrow form, beside its Spark form in [`spark_mlt.column.layouts`][spark_mlt.column.layouts] (which
imports PySpark, and so cannot be imported here): array as list<int32>, struct as a struct
of int32 fields t0..t{n-1}, packed as int64, a vector's values as list<double>.

No per-row Python objects: ids come in as an Arrow int64 buffer, tokens go out as one flat
int32 buffer wrapped in a list (or struct) array, nulls as a validity bitmap.

Packed output: when the n tokens fit in 64 bits (``n * bits(p - 1) <= 64``: p = 13 up to
n = 16, p = 251 up to n = 8), the UDF returns them packed into one int64 per row, token j in
bits ``[j * b, (j + 1) * b)``, and Spark unpacks them with shifts and masks. Moving one
int64 instead of a list of n int32 through Arrow and into Spark's rows is what makes the
UDF engine as cheap as an identity UDF.
"""

from __future__ import annotations

import decimal
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd  # pandas UDFs read their type hints (PySpark's worker imports pandas anyway)
import pyarrow as pa
import pyarrow.compute as pc

from spark_mlt.codec import MLTCodec, pack_bits, unpack_bits
from spark_mlt.errors import MLTError

__all__ = ["NULL_ID", "codec_from_json", "decode_arrow", "encode_arrow", "encode_packed_arrow", "pandas_batch"]

NULL_ID = -1  # a null id, as the pandas UDF path passes it (every id it sees is checked and >= 0)


@functools.lru_cache(maxsize=64)
def codec_from_json(document: str) -> MLTCodec:
    """The codec of a JSON document, parsed and validated once per worker process."""
    return MLTCodec.from_json(document)


def _mask(invalid: npt.NDArray[np.bool_]) -> pa.Array | None:
    return pa.array(invalid) if invalid.any() else None


def _encode(
    codec: MLTCodec, ids: pa.Array, *, handle_invalid: str, name: str
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
    """(rows, n) tokens and the mask of rows that are null in the output."""
    present = ids.is_valid().to_numpy(zero_copy_only=False)
    values = pc.fill_null(ids, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if handle_invalid == "error":
        try:
            tokens = codec.encode(values)
        except MLTError as exc:
            raise type(exc)(
                f"spark-mlt: {name}: {exc}; use handle_invalid='null' to turn such ids into nulls"
            ) from None
        null = ~present
    else:
        tokens, ok = codec.encode_masked(values)
        null = ~(present & ok)
    return tokens, null


def encode_packed_arrow(codec: MLTCodec, ids: pa.Array, *, handle_invalid: str, name: str) -> pa.Array:
    """Tokens of an int64 Arrow array packed into one int64 per row (see the module docs)."""
    bits = codec.require_packed_bits()
    tokens, null = _encode(codec, ids, handle_invalid=handle_invalid, name=name)
    return pa.array(pack_bits(tokens, bits), mask=null if null.any() else None)


def encode_arrow(codec: MLTCodec, ids: pa.Array, *, layout: str, handle_invalid: str, name: str) -> pa.Array:
    """Tokens of an int64 Arrow array as list<int32>, struct t0..t{n-1} or (``layout="vector"``)
    the vector's values, list<double> of token / (p - 1); null in, null out."""
    tokens, null = _encode(codec, ids, handle_invalid=handle_invalid, name=name)
    values_count = len(tokens)
    mask = _mask(null)
    if layout == "vector":
        offsets = pa.array(np.arange(0, (values_count + 1) * codec.n, codec.n, dtype=np.int32))
        values = tokens.reshape(-1) / float(max(codec.p - 1, 1))
        return pa.ListArray.from_arrays(offsets, pa.array(values), mask=mask)
    if layout == "struct":
        fields = [pa.array(np.ascontiguousarray(tokens[:, j])) for j in range(codec.n)]
        return pa.StructArray.from_arrays(fields, names=[f"t{j}" for j in range(codec.n)], mask=mask)
    offsets = pa.array(np.arange(0, (values_count + 1) * codec.n, codec.n, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(tokens.reshape(-1)), mask=mask)


def _token_matrix(
    codec: MLTCodec, tokens: pa.Array, layout: str
) -> tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.bool_]]:
    """(rows, n) token matrix and a mask of rows with the right shape and no null token."""
    rows, n = len(tokens), codec.n
    present = tokens.is_valid().to_numpy(zero_copy_only=False)
    if layout == "packed":
        packed = pc.fill_null(tokens, 0).to_numpy(zero_copy_only=False)
        matrix, fits = unpack_bits(packed, codec.require_packed_bits(), n)
        return matrix, present & fits
    if layout == "struct":
        # by name: t0 .. t{n-1} may come in any order, among other fields
        columns = [tokens.field(f"t{j}") for j in range(n)]
        shaped = present.copy()
        matrix = np.empty((rows, n), dtype=np.int64)
        for j, column in enumerate(columns):
            shaped &= column.is_valid().to_numpy(zero_copy_only=False)
            matrix[:, j] = pc.fill_null(column, 0).to_numpy(zero_copy_only=False)
        return matrix, shaped
    offsets = tokens.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.diff(offsets)
    child = tokens.values
    child_ok = child.is_valid().to_numpy(zero_copy_only=False)
    child_values = pc.fill_null(child, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    shaped = present & (lengths == n)
    if shaped.all() and rows and np.array_equal(offsets, offsets[0] + n * np.arange(rows + 1)):
        window = slice(int(offsets[0]), int(offsets[0]) + rows * n)
        shaped &= child_ok[window].reshape(rows, n).all(axis=1)
        return child_values[window].reshape(rows, n), shaped
    # Irregular batch (nulls or wrong lengths): gather the well-shaped rows only.
    index = np.where(shaped, offsets[:-1], 0)[:, None] + np.arange(n)
    index = np.minimum(index, max(len(child_values) - 1, 0))
    if len(child_values):
        matrix = child_values[index]
        shaped &= child_ok[index].all(axis=1)
    else:
        matrix = np.zeros((rows, n), dtype=np.int64)
    return matrix, shaped


def _round_half_away(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each value rounded to the nearest integer, halves away from zero: as Spark's ``round``
    (the native and JVM engines), where ``np.rint`` rounds halves to even. ``values - trunc``
    is exact for every double, so a half is exactly 0.5 and nothing else is."""
    whole = np.trunc(values)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, which stays invalid
        return np.where(np.abs(values - whole) >= 0.5, whole + np.sign(values), whole)


def _vector_tokens(codec: MLTCodec, values: pa.Array) -> pa.Array:
    """The tokens (list<int64>) of a list<double> of vector values: each scaled by p - 1 and
    rounded half away from zero; NaN, infinities and values beyond +-2**53 become 2**53 (an
    invalid token)."""
    child = values.values
    scaled = _round_half_away(child.to_numpy(zero_copy_only=False).astype(np.float64) * float(max(codec.p - 1, 1)))
    limit = float(2**53)
    tokens = np.where(np.isfinite(scaled), np.clip(scaled, -limit, limit), limit).astype(np.int64)
    child_null = ~child.is_valid().to_numpy(zero_copy_only=False)
    return pa.ListArray.from_arrays(
        values.offsets,
        pa.array(tokens, mask=child_null if child_null.any() else None),
        mask=_mask(~values.is_valid().to_numpy(zero_copy_only=False)),
    )


def decode_arrow(codec: MLTCodec, tokens: pa.Array, *, layout: str, handle_invalid: str, name: str) -> pa.Array:
    """Ids (int64) of an Arrow list<int>, struct, int64 (packed) or list<double> (a vector's
    values) token array; null in, null out."""
    if layout == "vector":
        tokens, layout = _vector_tokens(codec, tokens), "array"
    matrix, shaped = _token_matrix(codec, tokens, layout)
    present = tokens.is_valid().to_numpy(zero_copy_only=False)
    ids, ok = codec.decode_masked(np.where(shaped[:, None], matrix, 0))
    null = ~(shaped & ok)
    if handle_invalid == "error":
        invalid = present & null
        if invalid.any():
            raise MLTError(_invalid_tokens(codec, tokens[int(np.flatnonzero(invalid)[0])], layout, name))
        null = ~present
    return pa.array(ids, mask=null if null.any() else None)


def _invalid_tokens(codec: MLTCodec, value: pa.Scalar, layout: str, name: str) -> str:
    """The message of invalid tokens, in the other engines' words: the value as Spark prints it
    (an array ``[1, null, 13]``, a struct's tokens ``{1, 9, 13}``, packed tokens as a number)."""
    p, n = codec.p, codec.n
    width = ""
    if layout == "packed":
        what, shown, width = "packed tokens", str(value.as_py()), f"of {codec.token_bits} bits each "
    elif layout == "struct":
        fields = value.as_py()
        what, shown = "token vector", _spark_text([fields.get(f"t{j}") for j in range(n)], "{", "}")
    else:
        what, shown = "token vector", _spark_text(value.as_py(), "[", "]")
    return (
        f"spark-mlt: {name}: {what} {shown} is not a valid MLT code: expected {n} tokens in [0, {p}) {width}"
        f"that decode to an id below 2^63 (p={p}, n={n}); use handle_invalid='null' to turn such rows into nulls"
    )


def _spark_text(items: list[Any], open_: str, close: str) -> str:
    return open_ + ", ".join("null" if item is None else str(item) for item in items) + close


# --- pandas UDFs (PySpark < 4.1): the same Arrow batches, converted at the boundary ---------


def _arrow_to_pandas(result: pa.Array) -> pd.Series:
    """A UDF result for pandas UDFs: bigint as the nullable Int64 (exact; float64 is not)."""
    return result.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def _not_whole(name: str, value: Any) -> MLTError:
    return MLTError(
        f"spark-mlt: {name}: id {value} is not a whole number of the bigint range; ids must be whole "
        "numbers (cast the column to bigint, or use the column functions mlt_encode/mlt_decode)"
    )


def _exact_ids(values: pd.Series, name: str, null_invalid: bool) -> pa.Array:
    """The int64 Arrow array of decimals (or text) that a function registered on Spark 3.5
    gets as they are: each a whole number of the bigint range, else null (``null_invalid``)
    or the error naming it."""
    ids: list[int | None] = []
    for value in values:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            ids.append(None)
            continue
        try:
            number = decimal.Decimal(str(value))
        except decimal.InvalidOperation:
            number = decimal.Decimal("NaN")
        if not number.is_finite() or number != number.to_integral_value() or not -(2**63) <= number < 2**63:
            if not null_invalid:
                raise _not_whole(name, value)
            ids.append(None)
            continue
        ids.append(int(number))
    return pa.array(ids, type=pa.int64())


def _bigint_from_pandas(values: pd.Series, name: str, null_invalid: bool = False) -> pa.Array:
    """The int64 Arrow array of a bigint pandas UDF argument. PySpark < 4.1 hands a batch
    holding nulls to pandas as float64, exact only below 2**53; a function registered on
    Spark 3.5 gets its argument as it comes: a double must be whole, decimals are read exactly
    (what is no whole id is null with ``null_invalid``, else the error naming it)."""
    if values.dtype.kind in "iu":  # numpy int64, or pandas Int64 from a chained pandas UDF
        return pa.array(values, type=pa.int64(), from_pandas=True)
    if values.dtype.kind == "O":  # decimals or text
        return _exact_ids(values, name, null_invalid)
    floats = values.to_numpy(np.float64)
    present = ~np.isnan(floats)
    fraction = present & (np.isinf(floats) | (floats != np.floor(floats)))
    if fraction.any() and not null_invalid:
        raise _not_whole(name, floats[fraction][0])
    present &= ~fraction
    if (np.abs(floats[present]) >= 2.0**53).any():
        import pyspark  # noqa: PLC0415 - for the message only

        raise MLTError(
            f"spark-mlt: {name}: PySpark {pyspark.__version__} passes a batch of bigint values that "
            "holds nulls to pandas as float64, which cannot represent values of 2^53 or more "
            "exactly; filter the nulls out first, use the column functions mlt_encode/mlt_decode "
            "(exact on every PySpark), or PySpark >= 4.1"
        )
    return pa.array(np.where(present, floats, 0).astype(np.int64), mask=~present)


def pandas_batch(
    batch: Callable[[pa.Array], pa.Array], *, takes: str, name: str, null_invalid: bool = False
) -> Callable[[pd.Series], pd.Series]:
    """``batch`` (Arrow array in, Arrow array out) as a pandas UDF's function; ``takes`` is
    the input's Spark type: "bigint", "array" (array<int>) or "id" (a checked id, null
    passed as [`NULL_ID`][spark_mlt.column.arrow.NULL_ID]). Bigint results travel as pandas' nullable Int64."""
    if takes == "id":

        def pandas_id_batch(values: pd.Series) -> pd.Series:
            ids = values.to_numpy(np.int64)
            return _arrow_to_pandas(batch(pa.array(ids, mask=ids == NULL_ID)))

        return pandas_id_batch

    if takes == "bigint":

        def pandas_bigint_batch(values: pd.Series) -> pd.Series:
            return _arrow_to_pandas(batch(_bigint_from_pandas(values, name, null_invalid)))

        return pandas_bigint_batch

    element = pa.float64() if takes == "vector" else pa.int64()

    def pandas_array_batch(values: pd.Series) -> pd.Series:
        return _arrow_to_pandas(batch(pa.array(values, type=pa.list_(element), from_pandas=True)))

    return pandas_array_batch
