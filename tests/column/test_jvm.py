"""The JVM engine (spark-mlt's jar) against the NumPy codec, compiled and interpreted.

``make test`` and ``make test-compat`` build the jar first (``make jvm``), and the test session
loads it (``local_session`` adds the jar of its line), so these run on every line. The column
functions' behaviour (errors, nulls, layouts, input types) is tested once for every engine in
``test_functions``; this module covers what only the JVM engine has: the SQL functions by
name, whole-stage code generation on and off, codecs of every family against the NumPy
codec at the bigint limits, the plan of a composition, and how a session gets the jar.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_mlt import MLTCodec
from spark_mlt.capabilities import Capabilities
from spark_mlt.column import mlt_decode, mlt_encode, mlt_unpack, register_mlt_functions
from spark_mlt.column.engine import POLICY, Situation
from spark_mlt.column.layouts import LAYOUT
from spark_mlt.jars import JVM_EXTENSION, jvm_jar, jvm_jar_name
from tests.support.spark_lines import HAS_JVM_JAR, QUERY_ERRORS, capabilities

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not HAS_JVM_JAR, reason="no spark-mlt jar for this line: make jvm"),
]

MAX_ID = 2**63 - 1
#: one codec of each family and kernel: p = 2 (wide and narrow), small p with many tokens
#: (p^n > 2^63), bytes, 16-bit, the largest p (a Mersenne prime: its own reduction), the
#: README's matrix, and kernels that loop (n = 63) or run the call path (n = 65)
FAMILIES = [
    (2, 16), (2, 64), (3, 39), (3, 40), (7, 7), (13, 6), (251, 8), (65521, 4), (65521, 5), (2_147_483_647, 3),
    (2_147_483_647, 17), (251, 63), (5, 65),
]  # fmt: skip

#: the optimizer evaluates a projection of local rows itself (interpreted) unless told not to
LOCAL = "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"
CODEGEN = {
    "compiled": {
        "spark.sql.codegen.wholeStage": "true",
        "spark.sql.codegen.factoryMode": "CODEGEN_ONLY",
        "spark.sql.optimizer.excludedRules": LOCAL,
    },
    "interpreted": {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.sql.optimizer.excludedRules": LOCAL,
    },
}


@pytest.fixture(params=list(CODEGEN))
def codegen(spark: SparkSession, request: pytest.FixtureRequest) -> Iterator[str]:
    """Whole-stage code generation on (each codec's generated kernel; a failure to compile
    fails the query) and off with interpreted expressions (``eval``): both must give the
    same rows."""
    before = {key: spark.conf.get(key, None) for key in CODEGEN[request.param]}
    for key, value in CODEGEN[request.param].items():
        spark.conf.set(key, value)
    yield request.param
    for key, value in before.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def _ids(codec: MLTCodec) -> list[int | None]:
    rng = np.random.default_rng(codec.p * 1000 + codec.n)
    edge = [0, 1, codec.p - 1, codec.p, codec.max_id, codec.max_id - 1, None, 2**31, 2**32 + 1]
    wide = [MAX_ID, 2**62, 2**63 - 2] if codec.max_id == MAX_ID else []
    random = rng.integers(0, codec.max_id, size=60, endpoint=True).tolist()
    return [i for i in edge + wide + random if i is None or 0 <= i <= codec.max_id]


def test_the_session_has_the_jar_and_its_functions(spark: SparkSession) -> None:
    assert jvm_jar().name in spark.conf.get("spark.jars")
    assert JVM_EXTENSION in spark.conf.get("spark.sql.extensions")
    assert Capabilities.of(spark).jvm_engine
    found = {f.name for f in spark.catalog.listFunctions() if f.name.startswith("mlt_")}
    assert {"mlt_encode", "mlt_decode", "mlt_unpack"} <= found


@pytest.mark.parametrize(("p", "n"), FAMILIES, ids=[f"{p}^{n}" for p, n in FAMILIES])
def test_every_layout_matches_the_numpy_codec_and_round_trips(
    spark: SparkSession, codegen: str, p: int, n: int
) -> None:
    codec = MLTCodec.from_seed(p, n, seed=7)
    ids = _ids(codec)
    df = spark.createDataFrame([(i,) for i in ids], "id bigint")
    packed = codec.packed_bits is not None
    columns = [
        mlt_encode("id", codec, engine="jvm").alias("array"),
        mlt_encode("id", codec, layout="struct", engine="jvm").alias("struct"),
        mlt_encode("id", codec, layout="vector", engine="jvm").alias("vector"),
    ]
    if packed:
        columns.append(mlt_encode("id", codec, layout="packed", engine="jvm").alias("packed"))
    tokens = df.select("id", *columns)
    layouts = ["array", "struct", "vector", *(["packed"] if packed else [])]
    back = tokens.select(
        "*",
        *[mlt_decode(name, codec, layout=name, engine="jvm").alias(f"{name}_id") for name in layouts],  # type: ignore[arg-type]
        # one expression: a composition of the functions (a Column input, no lambda)
        mlt_decode(mlt_encode(F.col("id") + 0, codec, engine="jvm"), codec, engine="jvm").alias("composed"),
    ).collect()
    assert [r.id for r in back] == ids
    for row in back:
        if row.id is None:
            assert all(row[name] is None for name in layouts + [f"{n}_id" for n in layouts] + ["composed"])
            continue
        expected = codec.encode([row.id])[0].tolist()
        assert row.array == expected, row.id
        assert list(row.struct) == expected, row.id
        assert [round(v * max(p - 1, 1)) for v in row.vector.toArray()] == expected, row.id
        if packed:
            assert row.packed == int(codec.pack(np.array([expected]))[0]), row.id
        assert [row[f"{name}_id"] for name in layouts] == [row.id] * len(layouts)
        assert row.composed == row.id


@pytest.mark.parametrize(("p", "n"), [(3, 40), (65521, 5), (2, 64), (13, 6)], ids=["3^40", "65521^5", "2^64", "13^6"])
def test_random_token_vectors_decode_exactly_where_the_numpy_codec_does(
    spark: SparkSession, codegen: str, p: int, n: int
) -> None:
    """Uniform token vectors: for codecs with p^n > 2^63 most are ids of 2^63 or more, which
    must be null (not a wrapped bigint); plus tokens out of range, short vectors and nulls."""
    codec = MLTCodec.from_seed(p, n, seed=3)
    rng = np.random.default_rng(p + n)
    vectors: list[list[int | None] | None] = rng.integers(0, p, size=(80, n)).tolist()
    vectors += [[p - 1] * n, [0] * n, [p, *[0] * (n - 1)], [-1, *[0] * (n - 1)], [0] * (n - 1), [None, *[0] * (n - 1)]]
    vectors += [None, codec.encode([codec.max_id])[0].tolist()]
    df = spark.createDataFrame([(v,) for v in vectors], "t array<int>")
    rows = df.select(mlt_decode("t", codec, handle_invalid="null", engine="jvm").alias("id")).collect()
    expected: list[int | None] = []
    for vector in vectors:
        if vector is None or len(vector) != n or any(t is None or not 0 <= t < p for t in vector):
            expected.append(None)
            continue
        ids, valid = codec.decode_masked(np.array([vector], dtype=np.int64))
        expected.append(int(ids[0]) if bool(valid[0]) else None)
    assert [r.id for r in rows] == expected
    assert any(e is None for e in expected[:80]) == (codec.capacity > 2**63)


def test_invalid_rows_fail_with_the_other_engines_messages_in_both_codegen_modes(
    spark: SparkSession, codegen: str
) -> None:
    codec = MLTCodec.from_seed(13, 6)
    ids = spark.createDataFrame([(1,), (-9_223_372_036_854_775_808,)], "user_id bigint")
    with pytest.raises(QUERY_ERRORS, match=r"column 'user_id': id -9223372036854775808 is outside the codec's domain"):
        ids.select(mlt_encode("user_id", codec, engine="jvm")).collect()
    packed = spark.createDataFrame([(2**62,)], "k bigint")
    with pytest.raises(QUERY_ERRORS, match=r"column 'k': packed tokens 4611686018427387904 are not 6 tokens of 4 bits"):
        packed.select(mlt_unpack("k", codec)).collect()
    with pytest.raises(QUERY_ERRORS, match=r"column 'k': packed tokens 4611686018427387904 is not a valid MLT code"):
        packed.select(mlt_decode("k", codec, layout="packed", engine="jvm")).collect()


def test_the_sql_functions_take_the_codec_json_and_check_their_arguments(spark: SparkSession) -> None:
    codec = MLTCodec.from_seed(13, 6)
    spark.createDataFrame([(5,), (None,)], "id bigint").createOrReplaceTempView("mlt_jvm_ids")
    text = codec.to_json()
    rows = spark.sql(
        f"SELECT id, mlt_encode(id, '{text}') AS t, mlt_decode(mlt_encode(id, '{text}', 'packed'), '{text}') AS back "
        "FROM mlt_jvm_ids ORDER BY id"
    ).collect()
    assert [(r.id, r.t, r.back) for r in rows] == [(None, None, None), (5, codec.encode([5])[0].tolist(), 5)]
    assert spark.sql(f"SELECT mlt_unpack(mlt_encode(5, '{text}', 'packed'), '{text}') AS t").first().t == rows[1].t
    bad = [
        (f"mlt_encode(id, '{text[:-5]}')", r"codec JSON is not valid JSON"),
        ("mlt_encode(id, '{}')", r"codec JSON: format must be 'spark-mlt/codec'"),
        (
            f"mlt_encode(id, '{text}', 'list')",
            r"layout must be one of 'array', 'struct', 'packed', 'vector'; got 'list'",
        ),
        (f"mlt_encode(id, '{text}', 'array', 'skip')", r"handle_invalid must be one of 'error', 'null'; got 'skip'"),
        ("mlt_encode(id, string(id))", r"the codec \(its JSON, MLTCodec.to_json\(\)\) must be a constant string"),
        ("mlt_encode(id)", r"mlt_encode takes 2 to 5 arguments"),
        (f"mlt_decode('x', '{text}')", r"must hold array<int> tokens \(layout='array', n=6\).*the column is STRING"),
        (
            f"mlt_encode(id, '{MLTCodec.from_seed(3, 40).to_json()}', 'packed')",
            r"needs 80: store these tokens as arrays",
        ),
    ]
    for call, message in bad:
        with pytest.raises(AnalysisException, match=rf"(?s)DATATYPE_MISMATCH.*{message}"):
            spark.sql(f"SELECT {call} FROM mlt_jvm_ids")


def test_a_composition_plans_one_nested_call_without_a_lambda(spark: SparkSession) -> None:
    codec = MLTCodec.from_seed(13, 6)
    df = spark.range(3).select(mlt_decode(mlt_encode(F.col("id") * 2, codec), codec).alias("back"))
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "lambda" not in plan
    assert plan.count("mlt_decode_ints(mlt_encode_array(") == 1, plan
    assert [r.back for r in df.collect()] == [0, 2, 4]


#: the largest n of each kernel strategy (64 tokens at most; 65 runs the call path)
LARGEST = [(2, 64), (3, 64), (13, 17), (251, 63), (65521, 17), (65521, 64), (2_147_483_647, 17), (2_147_483_647, 64)]


@pytest.mark.parametrize(("p", "n"), [*LARGEST, (3, 65)], ids=[f"{p}^{n}" for p, n in [*LARGEST, (3, 65)]])
def test_each_kernel_stays_whole_stage_with_every_method_under_hotspots_8000_bytes(
    spark: SparkSession, p: int, n: int
) -> None:
    """HotSpot compiles no method above 8,000 bytes of bytecode (``-XX:-DontCompileHugeMethods``
    is off by default): a kernel past it would run interpreted, far slower than the call path."""
    codec = MLTCodec.from_seed(p, n, seed=1)
    ids = spark.range(4).select((F.col("id") * (codec.max_id // 3)).alias("id"))
    tokens = [mlt_encode("id", codec, engine="jvm").alias("array")]
    if codec.packed_bits is not None:
        tokens.append(mlt_encode("id", codec, layout="packed", engine="jvm").alias("packed"))
    encoded = ids.select("id", *tokens)
    df = encoded.select(
        "id",
        *[mlt_decode(c, codec, layout=c, engine="jvm").alias(f"{c}_id") for c in encoded.columns[1:]],  # type: ignore[arg-type]
    )
    plan = df._jdf.queryExecution().executedPlan()
    assert plan.nodeName().startswith("WholeStageCodegen"), plan.toString()
    source = plan.doCodeGen()._2()
    assert ("mltKernel" in source.body()) == (n <= 64)
    codegen = spark._jvm.org.apache.spark.sql.catalyst.expressions.codegen  # type: ignore[union-attr]
    stats = codegen.CodeGenerator.compile(source)._2()
    assert 0 < stats.maxMethodCodeSize() < 8000
    for row in df.collect():
        assert all(row[c] == row.id for c in df.columns[1:]), row


def test_auto_picks_the_jvm_engine_where_the_session_has_it() -> None:
    codec = MLTCodec.from_seed(13, 6)
    for operation, bound in (("encode", True), ("decode", False), ("unpack", False)):
        situation = Situation(operation, codec, LAYOUT["array"], capabilities(jvm=True), bound=bound)
        assert POLICY.choose(situation).engine == "jvm"
    arrow_udfs = capabilities(jvm=False, spark_version="4.1.0")
    assert POLICY.choose(Situation("encode", codec, LAYOUT["array"], arrow_udfs, bound=True)).engine == "udf"
    # a packed column by name too: each codec's generated kernel measured as fast or faster
    assert POLICY.choose(Situation("encode", codec, LAYOUT["packed"], capabilities(jvm=True))).engine == "jvm"
    packed = Situation("decode", codec, LAYOUT["packed"], capabilities(jvm=True), bound=True)
    assert POLICY.choose(packed).engine == "jvm"
    register = Situation("register", codec, LAYOUT["array"], capabilities(jvm=True, spark_version="3.5.0"))
    assert POLICY.choose(register).engine == "jvm"  # Spark 3.5: the jar registers them itself
    over_connect = capabilities(jvm=True, spark_version="3.5.0", connect=True)
    assert POLICY.choose(Situation("register", codec, LAYOUT["array"], over_connect)).engine == "udf"


def test_registered_sql_functions_call_the_jvm_functions(spark: SparkSession) -> None:
    """Spark 4: SQL functions over one call; Spark 3.5: the jar's own registration."""
    codec = MLTCodec.from_seed(13, 6)
    names = register_mlt_functions(spark, codec, "jvm_user", layout="packed", engine="jvm")
    row = spark.sql(f"SELECT {names[1]}({names[0]}(123456)) AS back, {names[0]}(123456) AS k").first()
    assert row.back == 123456
    assert row.k == int(codec.pack(codec.encode([123456]))[0])


def test_the_jar_command_prints_the_jar_or_the_spark_submit_arguments() -> None:
    def jar_command(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "spark_mlt.batch.cli", "jar", *args]
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)

    assert jar_command().stdout.strip() == str(jvm_jar())
    submit = jar_command("--submit", "--spark-version", "4.1.2").stdout.split()
    assert submit == ["--jars", str(jvm_jar("4.1.2")), "--conf", f"spark.sql.extensions={JVM_EXTENSION}"]
    refused = jar_command("--spark-version", "3.4.1")
    assert refused.returncode != 0
    assert "needs Spark 3.5 or 4.x, got '3.4.1'" in refused.stderr
    assert jvm_jar_name("3.5.7", "9.9") == "spark-mlt-jvm_3.5_2.12-9.9.jar"
