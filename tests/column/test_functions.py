"""mlt_encode / mlt_decode on a real local SparkSession, both engines, both ANSI modes."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pyspark.errors import AnalysisException
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType
from pyspark.testing import assertDataFrameEqual

from spark_mlt import CodecParameterError, MLTCodec, MLTTypeError, OptionError
from spark_mlt.codec import MAX_ID
from spark_mlt.column import layout_of, mlt_decode, mlt_encode, mlt_unpack, register_mlt_functions
from spark_mlt.column import sqltext as sql
from spark_mlt.column.engine import POLICY, Situation
from spark_mlt.column.layouts import LAYOUT
from spark_mlt.column.udf import decode_udf, encode_udf
from tests.support.spark_lines import ENGINES, HAS_ARROW_UDFS, HAS_SQL_FUNCTIONS, QUERY_ERRORS, capabilities

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)


CODECS = [(13, 6), (7, 7), (2, 16), (251, 8), (65521, 4), (2_147_483_647, 3)]


@pytest.fixture(params=["true", "false"], ids=["ansi", "legacy"])
def ansi(spark: SparkSession, request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test with ANSI mode on and off; restores the session's setting."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", request.param)
    yield request.param
    spark.conf.set("spark.sql.ansi.enabled", before)


def _ids(codec: MLTCodec) -> list[int | None]:
    rng = np.random.default_rng(codec.p)
    edge = [0, 1, codec.p - 1, codec.p, codec.max_id, codec.max_id - 1, None]
    near_2_62 = [2**62, 2**62 + 7] if codec.max_id >= 2**62 + 7 else []
    return edge + near_2_62 + rng.integers(0, codec.max_id, size=40, endpoint=True).tolist()


def _expected(codec: MLTCodec, ids: list[int | None]) -> list[list[int] | None]:
    return [None if i is None else codec.encode([i])[0].tolist() for i in ids]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("p", "n"), CODECS)
def test_encode_matches_the_numpy_codec_and_decode_inverts_it(
    spark: SparkSession, ansi: str, engine: str, p: int, n: int
) -> None:
    codec = MLTCodec.from_seed(p, n, seed=11)
    ids = _ids(codec)
    df = spark.createDataFrame([(i,) for i in ids], "id bigint")
    tokens = df.select("id", mlt_encode("id", codec, engine=engine).alias("t"))
    rows = tokens.select("t", mlt_decode("t", codec, engine=engine).alias("back")).collect()
    assert [r.t for r in rows] == _expected(codec, ids)
    assert [r.back for r in rows] == ids


def _tokens_of(value: Any, layout: str, codec: MLTCodec) -> list[int] | None:
    """The tokens a value of ``layout`` holds: a vector's values are token / (p - 1)."""
    if value is None:
        return None
    if layout == "packed":
        return [int(t) for t in codec.unpack([value])[0]]
    if layout == "vector":
        scaled = value.toArray() * (codec.p - 1)
        np.testing.assert_allclose(scaled, np.rint(scaled), rtol=0, atol=1e-6)
        return [int(t) for t in np.rint(scaled)]
    return list(value)


LAYOUT_CASES = [("array", 13, 6), ("struct", 13, 6), ("vector", 13, 6), ("vector", 2_147_483_647, 3), ("packed", 13, 6)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("layout", "p", "n"), LAYOUT_CASES)
def test_every_layout_decodes_what_it_encodes(spark: SparkSession, engine: str, layout: str, p: int, n: int) -> None:
    codec = MLTCodec.from_seed(p, n)
    ids = [5, None, 0, codec.max_id]
    df = spark.createDataFrame([(i,) for i in ids], "id bigint")
    out = df.select("id", mlt_encode("id", codec, layout=layout, engine=engine).alias("t"))  # type: ignore[arg-type]
    assert layout_of(out.schema["t"].dataType) == layout
    rows = out.select("t", mlt_decode("t", codec, layout=layout, engine=engine).alias("back")).collect()  # type: ignore[arg-type]
    assert [_tokens_of(r.t, layout, codec) for r in rows] == _expected(codec, ids)
    assert [r.back for r in rows] == ids


def test_struct_layout_has_one_int_field_per_token(spark: SparkSession) -> None:
    codec = MLTCodec.from_seed(13, 6)
    out = spark.range(1).select(mlt_encode("id", codec, layout="struct").alias("s"))
    assert out.schema["s"].dataType.simpleString() == "struct<t0:int,t1:int,t2:int,t3:int,t4:int,t5:int>"


def test_engines_are_bit_identical_on_many_ids(spark: SparkSession) -> None:
    codec = MLTCodec.from_seed(251, 8, seed=3)
    df = spark.range(0, 20_000).select((F.col("id") * 461_168_601_842_738 + 17).alias("id"))
    both = df.select(
        mlt_encode("id", codec, engine="native").alias("native"), mlt_encode("id", codec, engine="udf").alias("udf")
    )
    assert both.where("NOT (native <=> udf)").count() == 0  # null-safe: a null on one side counts
    assert both.where("native IS NULL").count() == 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["tinyint", "smallint", "int", "bigint", "decimal(18,0)", "decimal(10,2)"])
def test_every_integral_and_decimal_input_type_is_accepted(spark: SparkSession, engine: str, dtype: str) -> None:
    codec = MLTCodec.from_seed(13, 6)
    df = spark.createDataFrame([(7,), (None,)], "v int").select(F.col("v").cast(dtype).alias("v"))
    rows = df.select(mlt_encode("v", codec, engine=engine).alias("t")).collect()
    assert [r.t for r in rows] == _expected(codec, [7, None])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("dtype", "shown"), [("string", "STRING"), ("double", "DOUBLE"), ("boolean", "BOOLEAN")])
def test_non_integer_input_fails_at_analysis_naming_column_and_type(
    spark: SparkSession, ansi: str, engine: str, dtype: str, shown: str
) -> None:
    codec = MLTCodec.from_seed(13, 6)
    df = spark.createDataFrame([("1",)], "user_key string").select(F.col("user_key").cast(dtype).alias("user_key"))
    with pytest.raises(AnalysisException, match=rf"(?s)DATATYPE_MISMATCH.*user_key.*{shown}"):
        df.select(mlt_encode("user_key", codec, engine=engine))  # analysis happens here, before any job


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bad", [-5, 4_826_809, MAX_ID])
def test_an_invalid_id_fails_the_query_naming_value_and_range(spark: SparkSession, engine: str, bad: int) -> None:
    codec = MLTCodec.from_seed(13, 6)
    df = spark.createDataFrame([(1,), (bad,)], "user_id bigint")
    with pytest.raises(QUERY_ERRORS, match=rf"(?s)column 'user_id'.*id {bad} .*\[0, 4826809\)"):
        df.select(mlt_encode("user_id", codec, engine=engine)).collect()


@pytest.mark.parametrize("engine", ENGINES)
def test_an_error_names_a_column_by_name_and_describes_a_column_expression(spark: SparkSession, engine: str) -> None:
    codec = MLTCodec.from_seed(13, 6)
    df = spark.createDataFrame([(1,), (-5,)], "user_id bigint")
    with pytest.raises(QUERY_ERRORS, match=r"(?s)column 'user_id': id -5 "):
        df.select(mlt_encode("user_id", codec, engine=engine)).collect()
    with pytest.raises(QUERY_ERRORS, match=r"(?s)a column expression: id -4 "):
        df.select(mlt_encode(F.col("user_id") + 1, codec, engine=engine)).collect()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("dtype", "whole", "fraction"),
    [
        ("decimal(10,2)", "7.00", "7.50"),
        ("decimal(38,37)", "7." + "0" * 37, "7." + "0" * 36 + "1"),
        ("decimal(38,37)", "7." + "0" * 37, "-0." + "0" * 36 + "1"),  # named as Spark prints it, not -1E-37
    ],
)
def test_a_decimal_with_a_fraction_is_an_invalid_id(
    spark: SparkSession, engine: str, dtype: str, whole: str, fraction: str
) -> None:
    """Pins the whole-number check at every scale: ``value <> CAST(value AS BIGINT)`` compares in
    a decimal type Spark narrows to 18 digits of fraction, so in the native and udf engines
    7.000...01 (decimal(38,37)) gave the tokens of 7, and -1E-37 those of 0; the jvm engine named
    that one ``-1E-37``, where the others print it as Spark casts it to a string."""
    codec = MLTCodec.from_seed(13, 6)
    df = spark.createDataFrame([(whole,), (fraction,)], "v string").select(F.col("v").cast(dtype).alias("v"))
    rows = df.select(mlt_encode("v", codec, engine=engine, handle_invalid="null").alias("t")).collect()
    assert [r.t for r in rows] == [codec.encode([7])[0].tolist(), None]
    # the value as written, or as the line's Spark casts it to a string (3.5: -1E-37)
    cast = df.filter(F.col("v") != 7).select(F.col("v").cast("string").alias("s")).first()
    names = {fraction, cast.s if cast is not None else fraction}
    with pytest.raises(QUERY_ERRORS, match="id (" + "|".join(map(re.escape, sorted(names))) + ") "):
        df.filter(F.col("v") != 7).select(mlt_encode("v", codec, engine=engine)).collect()


@pytest.mark.parametrize("engine", ENGINES)
def test_handle_invalid_null_turns_bad_ids_into_nulls(spark: SparkSession, ansi: str, engine: str) -> None:
    codec = MLTCodec.from_seed(13, 6)
    df = spark.createDataFrame([(1,), (-1,), (4_826_809,), (None,)], "id bigint")
    rows = df.select(mlt_encode("id", codec, engine=engine, handle_invalid="null").alias("t")).collect()
    assert [r.t for r in rows] == [codec.encode([1])[0].tolist(), None, None, None]


#: one codec of each packed encode path: parity tables (p = 2), lookup tables, lane-wise
#: multiply-adds, and a capacity beyond 2**63
PACKED_PATHS = [(2, 16), (13, 6), (65521, 3), (251, 8)]


def _ids_of_type(spark: SparkSession, ids: list[int]) -> DataFrame:
    """A frame of ``ids`` in column ``v``: bigint, or decimal(38,0) where one is beyond the bigint range."""
    dtype = "bigint" if all(-MAX_ID <= i <= MAX_ID for i in ids) else "decimal(38,0)"
    return spark.createDataFrame([(str(i),) for i in ids], "v string").select(F.col("v").cast(dtype).alias("v"))


@pytest.mark.parametrize(("p", "n"), PACKED_PATHS, ids=["parity", "tables", "lanes", "beyond-2-63"])
def test_an_invalid_id_fails_the_packed_encoder_and_its_sql_function(
    spark: SparkSession, ansi: str, p: int, n: int
) -> None:
    """Regression (issue 71): the packed encoder added its check after the tokens, and Spark's
    `+` skips its right operand where the left is null (and folds `+` of a null constant to
    null), so an id whose tokens are null (a table read at a negative index, a decimal beyond
    the bigint range) got null tokens. The SQL functions' half where Spark has them (4.0 on)."""
    codec = MLTCodec.from_seed(p, n)
    name = f"invalid_packed_{p}"
    if HAS_SQL_FUNCTIONS:
        register_mlt_functions(spark, codec, name, engine="native", layout="packed")
    bad = [-1, codec.max_id + 1, 2**63 + 5]
    nulls = _ids_of_type(spark, bad).select(mlt_encode("v", codec, layout="packed", handle_invalid="null").alias("t"))
    assert [r.t for r in nulls.collect()] == [None, None, None]
    for value in bad:
        df = _ids_of_type(spark, [value])
        with pytest.raises(QUERY_ERRORS, match=rf"column 'v': id {value} is outside"):
            df.select(mlt_encode("v", codec, layout="packed", engine="native")).collect()
        if value <= MAX_ID and HAS_SQL_FUNCTIONS:
            with pytest.raises(QUERY_ERRORS, match=rf"mlt_encode_{name}: id {value} is outside"):
                df.select(F.expr(f"mlt_encode_{name}(v)")).collect()
            with pytest.raises(QUERY_ERRORS, match=rf"mlt_encode_{name}: id {value} is outside"):
                spark.sql(f"SELECT mlt_encode_{name}({value})").collect()  # a constant, which the optimizer folds


def _bad_token_rows(codec: MLTCodec) -> list[tuple[list[int | None] | None]]:
    good = codec.encode([12345])[0].tolist()
    return [
        (good,),
        (good[:-1],),  # too short
        ([*good, 0],),  # too long
        ([codec.p, *good[1:]],),  # a token equal to p
        ([-1, *good[1:]],),  # a negative token
        ([None, *good[1:]],),  # a null token
        (None,),  # a null array: null out, not invalid
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_invalid_token_vectors_become_null_on_request(spark: SparkSession, ansi: str, engine: str) -> None:
    codec = MLTCodec.from_seed(13, 6)
    df = spark.createDataFrame(_bad_token_rows(codec), "t array<int>")
    rows = df.select(mlt_decode("t", codec, engine=engine, handle_invalid="null").alias("id")).collect()
    assert [r.id for r in rows] == [12345, None, None, None, None, None, None]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("row", [1, 2, 3, 4, 5])
def test_an_invalid_token_vector_fails_the_query_naming_it(spark: SparkSession, engine: str, row: int) -> None:
    """Every engine names the whole vector as Spark prints an array (``null`` for a null token)
    in the same words; the udf engine named a token out of range alone, by its position, and
    printed a null token as Python's ``None``."""
    codec = MLTCodec.from_seed(13, 6)
    bad = _bad_token_rows(codec)[row]
    df = spark.createDataFrame([bad], "t array<int>")
    tokens = bad[0] or []
    shown = "[" + ", ".join("null" if t is None else str(t) for t in tokens) + "]"
    words = rf"column 't': token vector {re.escape(shown)} is not a valid MLT code: expected 6 tokens in \[0, 13\)"
    with pytest.raises(QUERY_ERRORS, match=rf"(?s){words}"):
        df.select(mlt_decode("t", codec, engine=engine)).collect()


def test_invalid_tokens_of_a_large_p_are_null_or_the_error_never_an_overflow(spark: SparkSession, ansi: str) -> None:
    """Regression (issue 71): with p = 2**30 + 3 and n = 8 the decoder summed masked tokens
    (up to 2**31 - 1) in groups sized for tokens below p: ANSI mode failed with
    ARITHMETIC_OVERFLOW where the row was invalid."""
    codec = MLTCodec.from_seed(1_073_741_827, 8)
    top = 2**codec.token_bits - 1
    good = codec.encode([12345])[0].tolist()
    # the first vector's digits give an id below 2**63, so Spark goes on to its checks, which overflowed
    rows = [([0, *[top] * 6, 583_032_106],), ([top] * 8,), ([top, *good[1:]],), ([-1, *good[1:]],)]
    rows += [([-(2**31)] * 8,), ([codec.p, *good[1:]],)]
    df = spark.createDataFrame(rows, "t array<int>")
    nulls = df.select(mlt_decode("t", codec, engine="native", handle_invalid="null").alias("id")).collect()
    assert [r.id for r in nulls] == [None] * len(rows)
    for row in rows[::3]:
        with pytest.raises(QUERY_ERRORS, match=r"column 't': token vector .* is not a valid MLT code"):
            spark.createDataFrame([row], "t array<int>").select(mlt_decode("t", codec, engine="native")).collect()


WRONG_SHAPES = [
    ("st", "array", r"array<int>", "STRUCT<t0: INT"),
    ("vec", "array", r"array<int>", "STRUCT<type: TINYINT"),
    ("arr", "vector", r"vector", "ARRAY<INT>"),
    ("k", "vector", r"vector", "BIGINT"),
    ("k", "array", r"array<int>", "BIGINT"),
    ("s", "array", r"array<int>", "STRING"),
    ("doubles", "array", r"array<int>", "DOUBLE"),
    ("arr", "struct", r"struct<t0:int, \.\.\., t3:int>", '"t0"'),  # Spark reads t0 as an index there
    ("k", "struct", r"struct<t0:int, \.\.\., t3:int>", "BIGINT"),
    ("arr", "packed", r"bigint", "ARRAY<INT>"),
    ("st", "packed", r"bigint", "STRUCT<t0: INT"),
    ("s", "packed", r"bigint", "STRING"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", WRONG_SHAPES, ids=[f"{c}-as-{f}" for c, f, _, _ in WRONG_SHAPES])
def test_decoding_the_wrong_layout_fails_at_analysis_naming_column_type_layout_and_fix(
    spark: SparkSession, engine: str, case: tuple[str, str, str, str]
) -> None:
    column, layout, expected, found = case
    if engine == "jvm" and found == '"t0"':
        found = "ARRAY<INT>"  # the JVM function names the column's type; Spark's own check, the field
    codec = MLTCodec.from_seed(13, 4)
    tokens = spark.createDataFrame([(1,)], "id bigint").select(
        mlt_encode("id", codec).alias("arr"),
        mlt_encode("id", codec, layout="struct").alias("st"),
        mlt_encode("id", codec, layout="packed").alias("k"),
        mlt_encode("id", codec, layout="vector").alias("vec"),
        F.lit("x").alias("s"),
        F.array(F.lit(1.5)).alias("doubles"),
    )
    pattern = rf"(?s)column '{column}' must hold {expected} tokens \(layout='{layout}'.*pass the layout.*{found}"
    with pytest.raises(AnalysisException, match=pattern):
        tokens.select(mlt_decode(column, codec, layout=layout, engine=engine))  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ENGINES)
def test_bigint_tokens_decode_like_int_tokens(spark: SparkSession, engine: str) -> None:
    codec = MLTCodec.from_seed(13, 4)
    tokens = [int(t) for t in codec.encode([777])[0]]
    df = spark.createDataFrame([(tokens,), (None,)], "t array<bigint>")
    assert [r.id for r in df.select(mlt_decode("t", codec, engine=engine).alias("id")).collect()] == [777, None]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("p", "n"), [(251, 8), (2, 64)])  # (2, 64): a digit weighs 2**63 itself
def test_a_token_vector_decoding_beyond_2_to_63_is_invalid(
    spark: SparkSession, ansi: str, engine: str, p: int, n: int
) -> None:
    codec = MLTCodec.from_seed(p, n)

    def code_of(value: int) -> list[int]:  # exact tokens of any value below p**n, in Python ints
        digits = []
        for _ in range(n):
            value, digit = divmod(value, p)
            digits.append(digit)
        return (np.array(digits[::-1], dtype=object).dot(codec.M.astype(object)) % p).tolist()  # type: ignore[no-any-return]

    values = [MAX_ID, 2**63, codec.capacity - 1]
    df = spark.createDataFrame([(code_of(v),) for v in values], "t array<int>")
    rows = df.select(mlt_decode("t", codec, engine=engine, handle_invalid="null").alias("id")).collect()
    assert [r.id for r in rows] == [MAX_ID, None, None]


@pytest.mark.parametrize("engine", ENGINES)
def test_sql_functions_encode_and_decode(spark: SparkSession, engine: str) -> None:
    codec = MLTCodec.from_seed(7, 7)
    if engine == "native" and not HAS_SQL_FUNCTIONS:
        with pytest.raises(OptionError, match=r"engine='native' registers SQL functions.*use engine='auto'"):
            register_mlt_functions(spark, codec, "user_native", engine=engine)
        engine = "auto"  # picks the udf engine here
    names = register_mlt_functions(spark, codec, f"user_{engine}", engine=engine)
    assert names == (f"mlt_encode_user_{engine}", f"mlt_decode_user_{engine}")
    spark.createDataFrame([(3,), (None,), (823_542,)], "user_id int").createOrReplaceTempView("users_sql")
    result = spark.sql(
        f"SELECT user_id, mlt_encode_user_{engine}(user_id) AS t, "
        f"mlt_decode_user_{engine}(mlt_encode_user_{engine}(user_id)) AS back FROM users_sql"
    )
    expected = spark.createDataFrame(
        [(i, t, i) for i, t in zip([3, None, 823_542], _expected(codec, [3, None, 823_542]), strict=True)],
        "user_id int, t array<int>, back bigint",
    )
    assertDataFrameEqual(result, expected)


#: arguments of a registered encoder (SQL) and the id each one is; None: an invalid id
SQL_FUNCTION_ARGUMENTS = [
    ("CAST(7 AS TINYINT)", 7),
    ("CAST(7 AS SMALLINT)", 7),
    ("7", 7),
    ("4826808L", 4_826_808),
    ("CAST(7 AS DECIMAL(38,0))", 7),
    ("CAST('7.00' AS DECIMAL(10,2))", 7),  # a decimal with a zero fraction
    ("CAST(0 AS DECIMAL(38,37))", 0),  # '0E-37' as text with ANSI off
    ("'7'", 7),
    ("CAST(NULL AS DOUBLE)", None),  # null in, null out
    ("2.5", None),
    ("-2.5", None),
    ("2.9D", None),
    ("CAST('NaN' AS DOUBLE)", None),
    ("1e10D", None),
    ("'2.5'", None),
    ("'abc'", None),
    ("CAST('9223372036854775813' AS DECIMAL(38,0))", None),
    ("CAST('4826809.0' AS DECIMAL(20,1))", None),
    ("-1", None),
]


@pytest.mark.skipif(not HAS_SQL_FUNCTIONS, reason="SQL functions need Spark 4.0")
@pytest.mark.parametrize("engine", ENGINES)
def test_a_registered_encoder_refuses_what_is_no_whole_id_and_encodes_every_whole_one(
    spark: SparkSession, ansi: str, engine: str
) -> None:
    """Regression (issue 71): the encoder's ``id BIGINT`` parameter cast 2.5 and 2.9D to 2 (and
    a decimal beyond the bigint range to an overflow error or null) before the body's checks,
    where the column functions refuse them; the JVM engine's SQL functions too, and a UDF took
    its argument as it came (2.5BD as 2); zero of a large scale, '0E-37' as text, was refused."""
    codec = MLTCodec.from_seed(13, 6)
    register_mlt_functions(spark, codec, f"whole_{engine}", engine=engine)
    register_mlt_functions(spark, codec, f"whole_or_null_{engine}", engine=engine, handle_invalid="null")
    arguments = [argument for argument, _ in SQL_FUNCTION_ARGUMENTS]
    row = spark.sql("SELECT " + ", ".join(f"mlt_encode_whole_or_null_{engine}({a})" for a in arguments)).collect()[0]
    expected = [None if i is None else codec.encode([i])[0].tolist() for _, i in SQL_FUNCTION_ARGUMENTS]
    assert dict(zip(arguments, row, strict=True)) == dict(zip(arguments, expected, strict=True))
    valid = [a for a, i in SQL_FUNCTION_ARGUMENTS if i is not None or a.startswith("CAST(NULL")]
    whole = f"mlt_encode_whole_{engine}"
    assert spark.sql("SELECT " + ", ".join(f"{whole}({a})" for a in valid)).collect()[0] == row[: len(valid)]
    for argument in arguments[len(valid) :]:
        with pytest.raises(QUERY_ERRORS, match=rf"{whole}: id \S+ is outside the codec's domain"):
            spark.sql(f"SELECT {whole}({argument})").collect()


@pytest.mark.skipif(HAS_SQL_FUNCTIONS, reason="Spark 3.5 registers the UDF itself (4.0 on: the test above)")
def test_a_udf_registered_without_sql_functions_refuses_what_is_no_whole_id(spark: SparkSession) -> None:
    """Regression (issue 71): on Spark 3.5 the registered UDF gets its argument as it comes and
    cast a decimal 2.5 or a double 2.9 to 2; now it reads decimals exactly and refuses any
    fraction, naming it."""
    codec = MLTCodec.from_seed(13, 6)
    register_mlt_functions(spark, codec, "whole_35", engine="udf")
    whole = ["CAST(7 AS DECIMAL(38,0))", "CAST('7.00' AS DECIMAL(10,2))", "7.0D", "CAST(NULL AS DECIMAL(10,1))"]
    row = spark.sql("SELECT " + ", ".join(f"mlt_encode_whole_35({a})" for a in whole)).collect()[0]
    assert list(row) == [codec.encode([7])[0].tolist()] * 3 + [None]
    refused = ["2.5", "2.9D", "CAST('9223372036854775813' AS DECIMAL(38,0))"]
    for argument in refused:
        with pytest.raises(QUERY_ERRORS, match=r"mlt_encode_whole_35: id \S+ is not a whole number of the bigint"):
            spark.sql(f"SELECT mlt_encode_whole_35({argument})").collect()
    register_mlt_functions(spark, codec, "whole_or_null_35", engine="udf", handle_invalid="null")
    row = spark.sql("SELECT " + ", ".join(f"mlt_encode_whole_or_null_35({a})" for a in refused)).collect()[0]
    assert list(row) == [None] * len(refused)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("p", "n"), [(7, 7), (251, 8)], ids=["table-encoder", "64-bit"])
def test_sql_functions_in_packed_form_match_the_codec(spark: SparkSession, engine: str, p: int, n: int) -> None:
    codec = MLTCodec.from_seed(p, n)
    engine = engine if HAS_SQL_FUNCTIONS else "udf"
    name = f"packed_{engine}_{p}"
    register_mlt_functions(spark, codec, name, engine=engine, layout="packed")
    ids = [0, 3, None, codec.max_id]
    valid = [i for i in ids if i is not None]
    packed = dict(zip(valid, codec.pack(codec.encode(valid)).tolist(), strict=True))
    query = f"SELECT user_id, mlt_encode_{name}(user_id) AS k, mlt_decode_{name}(mlt_encode_{name}(user_id)) AS back "
    spark.createDataFrame([(i,) for i in ids], "user_id bigint").createOrReplaceTempView("users_packed_sql")
    if engine == "udf" and not HAS_ARROW_UDFS and max(packed.values()) >= 2**53:
        # pandas UDFs get a batch with nulls as float64: the registered decode must refuse it
        with pytest.raises(QUERY_ERRORS, match=r"float64, which cannot represent values of 2\^53"):
            spark.sql(query + "FROM users_packed_sql").collect()
        ids = valid
        spark.createDataFrame([(i,) for i in ids], "user_id bigint").createOrReplaceTempView("users_packed_sql")
    rows = spark.sql(query + "FROM users_packed_sql").collect()
    nulls = {None: (None, None)} if None in ids else {}
    assert {r.user_id: (r.k, r.back) for r in rows} == {**{i: (packed[i], i) for i in valid}, **nulls}
    assert (
        spark.sql(f"SELECT mlt_encode_{name}(user_id) AS k FROM users_packed_sql").schema["k"].dataType.typeName()
        == "long"
    )


def test_bad_options_are_refused_before_spark_sees_them() -> None:
    codec = MLTCodec.from_seed(13, 6)
    with pytest.raises(OptionError, match=r"layout must be one of 'array', 'struct', 'vector', 'packed'; got 'list'"):
        mlt_encode("id", codec, layout="list")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"engine must be one of 'auto', 'jvm', 'native', 'udf'; got 'java'"):
        mlt_decode("t", codec, engine="java")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"layout must be one of 'array', 'struct'; got 'vector'"):
        mlt_unpack("k", codec, layout="vector")
    with pytest.raises(OptionError, match=r"handle_invalid must be one of 'error', 'null'; got 'skip'"):
        mlt_encode("id", codec, handle_invalid="skip")  # type: ignore[arg-type]
    with pytest.raises(MLTTypeError, match=r"codec must be an MLTCodec, got dict"):
        mlt_encode("id", {"p": 13})  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"name must be a plain identifier"):
        register_mlt_functions(None, codec, "user; DROP TABLE x")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"layout must be one of 'array', 'packed'; got 'struct'"):
        register_mlt_functions(None, codec, "user", layout="struct")  # type: ignore[arg-type]
    with pytest.raises(CodecParameterError, match=r"64 bits"):
        register_mlt_functions(None, MLTCodec.from_seed(65537, 4), "user", layout="packed")  # type: ignore[arg-type]


PACKED_CODECS = [(13, 6), (7, 7), (251, 8), (65521, 4)]  # 24, 21, 64 and 64 bits


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("p", "n"), PACKED_CODECS)
def test_packed_output_is_the_codecs_packing_and_decodes_back(
    spark: SparkSession, ansi: str, engine: str, p: int, n: int
) -> None:
    codec = MLTCodec.from_seed(p, n, seed=5)
    ids = _ids(codec)
    df = spark.createDataFrame([(i,) for i in ids], "id bigint")
    packed = df.select("id", mlt_encode("id", codec, layout="packed", engine=engine).alias("k"))
    assert packed.schema["k"].dataType.simpleString() == "bigint"
    rows = packed.select(
        "k",
        mlt_decode("k", codec, layout="packed", engine=engine).alias("back"),
        mlt_unpack("k", codec).alias("tokens"),
    ).collect()
    expected = [None if i is None else int(codec.pack(codec.encode([i]))[0]) for i in ids]
    assert [r.k for r in rows] == expected
    assert [r.back for r in rows] == ids
    assert [r.tokens for r in rows] == _expected(codec, ids)


def test_the_lookup_table_literal_keeps_every_bigint_in_order(spark: SparkSession) -> None:
    values = [0, 1, -1, 2**63 - 1, -(2**63), 123_456_789_012_345, *range(1000, 5000)]
    row = spark.range(1).select(F.expr(sql.long_array(values)).alias("table")).first()
    assert row is not None
    assert row.table == values


def test_native_table_encoder_matches_the_codec_on_a_whole_domain(spark: SparkSession, ansi: str) -> None:
    codec = MLTCodec.from_seed(5, 6, seed=2)  # 15,625 ids: two lookup tables of 125 entries
    ids = spark.range(-3, codec.capacity + 3).select(F.col("id"))
    rows = (
        ids.select(
            "id",
            mlt_encode("id", codec, layout="packed", handle_invalid="null", engine="native").alias("k"),
            mlt_encode("id", codec, handle_invalid="null", engine="native").alias("t"),
        )
        .orderBy("id")
        .toPandas()
    )
    inside = rows["id"].between(0, codec.max_id).to_numpy()
    expected = codec.encode(rows["id"].to_numpy()[inside])
    assert rows["k"][~inside].isna().all()
    assert rows["t"][~inside].isna().all()
    assert (rows["k"][inside].to_numpy(dtype=np.int64) == codec.pack(expected)).all()
    assert (np.stack(rows["t"][inside].to_numpy()) == expected).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_invalid_packed_values_fail_naming_them_or_become_null(spark: SparkSession, ansi: str, engine: str) -> None:
    codec = MLTCodec.from_seed(13, 6)  # 6 tokens of 4 bits: 24 bits
    good = int(codec.pack(codec.encode([12345]))[0])
    bad = [0xD, 1 << 24, -1]  # a token 13 >= p; a bit above the 24; every bit set
    df = spark.createDataFrame([(v,) for v in [good, None, *bad]], "k bigint")
    rows = df.select(
        mlt_decode("k", codec, layout="packed", engine=engine, handle_invalid="null").alias("id"),
        mlt_unpack("k", codec, handle_invalid="null").alias("t"),
    ).collect()
    assert [r.id for r in rows] == [12345, None, None, None, None]
    assert [r.t for r in rows] == [codec.encode([12345])[0].tolist(), None, None, None, None]
    one = spark.createDataFrame([(1 << 24,)], "k bigint")
    with pytest.raises(QUERY_ERRORS, match=r"(?s)column 'k'.*16777216"):
        one.select(mlt_decode("k", codec, layout="packed", engine=engine)).collect()
    with pytest.raises(QUERY_ERRORS, match=r"(?s)column 'k': packed tokens 16777216 are not 6 tokens"):
        one.select(mlt_unpack("k", codec)).collect()


@pytest.mark.parametrize("engine", ENGINES)
def test_invalid_vectors_fail_naming_them_or_become_null(spark: SparkSession, ansi: str, engine: str) -> None:
    codec = MLTCodec.from_seed(13, 4)
    good = codec.encode([777])[0] / 12
    bad = [
        [1.5, *good[1:]],  # rounds to token 18 >= p
        [-0.5, *good[1:]],  # a negative token
        [float("nan"), *good[1:]],
        [1e300, *good[1:]],  # far beyond any token: still no overflow
        good[:-1],  # too short
    ]
    schema = StructType([StructField("v", VectorUDT())])
    rows = [(Vectors.dense(good),), (Vectors.sparse(4, dict(enumerate(good))),), (None,)]
    df = spark.createDataFrame(rows + [(Vectors.dense(v),) for v in bad], schema)
    decoded = df.select(mlt_decode("v", codec, layout="vector", engine=engine, handle_invalid="null").alias("id"))
    assert [r.id for r in decoded.collect()] == [777, 777, None] + [None] * len(bad)
    one = spark.createDataFrame([(Vectors.dense(bad[0]),)], schema)
    with pytest.raises(QUERY_ERRORS, match=r"(?s)column 'v'.*token.*18"):
        one.select(mlt_decode("v", codec, layout="vector", engine=engine)).collect()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_struct_is_decoded_by_its_field_names_in_any_order_among_other_fields(
    spark: SparkSession, engine: str
) -> None:
    """Pins the struct layout's documented reading (fields t0 .. t{n-1} in any order among other
    fields) in every engine: the udf engine read the struct's fields by position, so a struct
    ``(t1, x, t0)`` decoded to another id or failed."""
    codec = MLTCodec.from_seed(251, 2)
    t0, t1 = codec.encode([4242])[0].tolist()
    df = spark.createDataFrame([((t1, "x", t0),), ((None, "y", t0),)], "s struct<t1:bigint, x:string, t0:bigint>")
    decoded = df.select(mlt_decode("s", codec, layout="struct", engine=engine, handle_invalid="null").alias("id"))
    assert [r.id for r in decoded.collect()] == [4242, None]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_vector_value_half_way_between_two_tokens_rounds_away_from_zero(spark: SparkSession, engine: str) -> None:
    """Pins the documented rounding of a vector's values (half away from zero, Spark's
    ``round``) in every engine: the udf engine rounded halves to even (``np.rint``), so
    ``0.25 * (3 - 1)`` read as token 0 there and token 1 in the others, another id."""
    codec = MLTCodec.from_seed(3, 2)
    halves = [[0.25, 0.0], [0.75, 0.0], [0.0, 0.25]]  # 0.5, 1.5, 0.5 once scaled by p - 1 = 2
    df = spark.createDataFrame([(Vectors.dense(v),) for v in halves], StructType([StructField("v", VectorUDT())]))
    decoded = df.select(mlt_decode("v", codec, layout="vector", engine=engine, handle_invalid="null").alias("id"))
    expected = [int(codec.decode([tokens])[0]) for tokens in ([1, 0], [2, 0], [0, 1])]
    assert [r.id for r in decoded.collect()] == expected


def test_packed_layout_is_refused_when_tokens_need_more_than_64_bits() -> None:
    codec = MLTCodec.from_seed(2_147_483_647, 3)  # 3 tokens of 31 bits
    assert codec.packed_bits is None
    for make in (
        lambda: mlt_encode("id", codec, layout="packed"),
        lambda: mlt_decode("k", codec, layout="packed"),
        lambda: mlt_unpack("k", codec),
    ):
        with pytest.raises(CodecParameterError, match=r"p=2147483647, n=3 needs 93: store these tokens as arrays"):
            make()


@pytest.mark.parametrize(("p", "n"), [(3, 39), (13, 6), (1009, 5), (251, 8), (65521, 4), (2, 40)])
def test_auto_runs_native_on_a_column_by_name_and_udf_on_a_bound_input_it_runs_slowly(p: int, n: int) -> None:
    """The policy of ``engine="auto"`` where the session has no jar (with one, the JVM engine
    runs everything, test_jvm): native for a column by name; for a bound input (a
    Column, which a lambda binds) the udf engine on PySpark >= 4.1, except the packed layout
    of codecs with a small lambda (lookup tables, p = 2, or at most 6 tokens); before 4.1
    (pandas UDFs) only non-packed layouts, p > 2. Every choice says why."""
    codec = MLTCodec.from_seed(p, n)
    layouts = ["array", "struct", "vector"] + (["packed"] if codec.packed_bits else [])
    for name in layouts:
        layout = LAYOUT[name]  # type: ignore[index]
        assert POLICY.choose(Situation("encode", codec, layout, capabilities())).engine == "native"
        bound = POLICY.choose(Situation("decode", codec, layout, capabilities(), bound=True))
        arrow = name == "packed" and (p <= 32 or n <= 6)  # Arrow UDFs (PySpark >= 4.1)
        pandas = name == "packed" or (p == 2 and name != "vector")  # a UDF reads a vector's values directly
        assert bound.engine == ("native" if (arrow if HAS_ARROW_UDFS else pandas) else "udf"), name
        assert bound.reason


def test_policy_registers_sql_functions_natively_from_spark_4() -> None:
    codec = MLTCodec.from_seed(13, 6)
    spark_35, spark_40 = capabilities(spark_version="3.5.0"), capabilities(spark_version="4.0.0")
    assert POLICY.choose(Situation("register", codec, LAYOUT["array"], spark_35)).engine == "udf"
    assert POLICY.choose(Situation("register", codec, LAYOUT["array"], spark_40)).engine == "native"
    assert POLICY.choose(Situation("unpack", codec, LAYOUT["array"], capabilities(), bound=True)).engine == "native"


def test_udf_workers_import_the_codec_not_pyspark_ml(spark: SparkSession) -> None:
    """What a Python worker loads to run the UDFs: unpickled in a fresh interpreter, they
    import spark_mlt.column.arrow and the codec, not PySpark's ML modules and SciPy (with them,
    every worker's start took about 0.4 s longer)."""
    from pyspark import cloudpickle  # noqa: PLC0415 - the pickler Spark ships UDFs with

    codec = MLTCodec.from_seed(13, 6)
    options = {"handle_invalid": "error", "name": "column 'id'", "arrow": HAS_ARROW_UDFS}
    udfs = [
        encode_udf(codec, layout=LAYOUT[layout], takes=takes, **options)  # type: ignore[arg-type]
        for layout, takes in [("array", "id"), ("packed", "bigint")]
    ]
    udfs += [decode_udf(codec, layout=LAYOUT[layout], **options) for layout in ("array", "packed")]  # type: ignore[arg-type]
    script = (
        "import pickle, sys\n"
        "for h in sys.argv[1:]: pickle.loads(bytes.fromhex(h))\n"
        "heavy = ('pyspark.ml', 'scipy', 'spark_mlt.column')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    shipped = [cloudpickle.dumps(udf.func).hex() for udf in udfs]
    loaded = subprocess.run([sys.executable, "-c", script, *shipped], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "['spark_mlt.column', 'spark_mlt.column.arrow']"
