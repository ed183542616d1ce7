"""One picture of a session: what `Capabilities.of` reads, and that everything that picks a path
reads it and nothing else (no registration, no cache, the engine saying itself what it cannot do)."""

from __future__ import annotations

import dataclasses

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_mlt import MLTCodec, OptionError, __version__
from spark_mlt.capabilities import Capabilities, foreign_jar
from spark_mlt.column import mlt_decode, mlt_encode, register_mlt_functions
from spark_mlt.column.engine import POLICY, Situation
from spark_mlt.column.layouts import LAYOUT
from spark_mlt.errors import JarLineError, JarVersionError
from spark_mlt.storage import resolve_backend
from tests.support.backends import delta_spark_requested
from tests.support.spark_lines import HAS_ARROW_UDFS, HAS_JVM_JAR, capabilities

pytestmark = pytest.mark.compat

CODEC = MLTCodec.from_seed(13, 6)


def test_a_session_says_its_line_its_udfs_and_its_jars(spark: SparkSession) -> None:
    caps = Capabilities.of(spark)
    assert caps == Capabilities(
        connect=False,
        spark_version=spark.version,
        arrow_udfs=HAS_ARROW_UDFS,
        delta_jars=delta_spark_requested(),
        jar_version=__version__ if HAS_JVM_JAR else None,
    )
    assert caps.jvm_engine is HAS_JVM_JAR
    assert resolve_backend(caps).name == ("delta-spark" if delta_spark_requested() else "delta-rs")
    assert resolve_backend(caps, "delta-rs").name == "delta-rs"


def test_without_a_session_only_the_jar_free_engines_run() -> None:
    caps = Capabilities.without_session()
    assert (caps.jvm_engine, caps.delta_jars, caps.connect) == (False, False, False)
    assert resolve_backend(None).name == "delta-rs"


def test_a_jar_of_another_version_is_refused_naming_both_versions(spark: SparkSession) -> None:
    stale = dataclasses.replace(capabilities(jvm=True), jar_version="0.0.9")
    message = rf"jar version 0\.0\.9, but this spark-mlt is {__version__}"
    with pytest.raises(JarVersionError, match=message):
        mlt_encode("id", CODEC, capabilities=stale)
    with pytest.raises(JarVersionError, match=message):
        mlt_decode("t", CODEC, engine="jvm", capabilities=stale)
    # an engine named outright never asks for the jar
    rows = spark.range(3).select(mlt_encode("id", CODEC, engine="native", capabilities=stale).alias("t")).collect()
    assert [r.t for r in rows] == CODEC.encode([0, 1, 2]).tolist()


def test_a_jar_of_another_spark_line_is_refused_naming_it_and_the_right_one() -> None:
    """Spark cannot load the 3.5 jar's functions on Spark 4 (nor the other way round): it only
    logs a warning, and the jar's SQL functions are missing. Where the JVM engine would run,
    spark-mlt says which jar to load instead."""
    jars = "/opt/a.jar,/opt/spark-mlt-jvm_3.5_2.12-0.1.0.dev0.jar"
    assert foreign_jar(jars, "4.3.0") == "spark-mlt-jvm_3.5_2.12-0.1.0.dev0.jar"
    assert foreign_jar(jars, "3.5.1") is None
    assert foreign_jar("/x/spark-mlt-jvm_4_2.13-0.1.0.jar", "3.5.0") == "spark-mlt-jvm_4_2.13-0.1.0.jar"
    assert foreign_jar("", "4.0.0") is None
    misfit = dataclasses.replace(
        capabilities(jvm=False, spark_version="4.3.0"), foreign_jar="spark-mlt-jvm_3.5_2.12-1.jar"
    )
    with pytest.raises(JarLineError, match=r"names spark-mlt-jvm_3\.5_2\.12-1\.jar, .*load spark-mlt-jvm_4_2\.13-"):
        mlt_encode("id", CODEC, capabilities=misfit)
    assert mlt_encode("id", CODEC, engine="native", capabilities=misfit) is not None  # named outright: runs


def test_an_engine_named_where_it_cannot_run_says_why_and_what_to_do() -> None:
    with pytest.raises(
        OptionError, match=r"engine='jvm' needs spark-mlt's jar in the session to encode.*engine='auto'"
    ):
        mlt_encode("id", CODEC, engine="jvm", capabilities=capabilities(jvm=False))
    spark_35 = Situation("register", CODEC, LAYOUT["array"], capabilities(spark_version="3.5.0"))
    with pytest.raises(OptionError, match=r"engine='native' registers SQL functions, which Spark 3\.5\.0 lacks"):
        POLICY.engine("native", spark_35)
    over_connect = Situation(
        "register", CODEC, LAYOUT["array"], capabilities(jvm=True, spark_version="3.5.0", connect=True)
    )
    with pytest.raises(OptionError, match=r"over Spark Connect only from Spark 4\.0 \(this is 3\.5\.0\)"):
        POLICY.engine("jvm", over_connect)
    assert POLICY.engine("auto", over_connect).name == "udf"


def _functions(spark: SparkSession) -> set[str]:
    return {f.name for f in spark.catalog.listFunctions()}


def test_building_and_running_columns_registers_nothing_in_the_session(spark: SparkSession) -> None:
    before = _functions(spark)
    df = spark.range(5)
    for engine in ("auto", "native", "udf", *(["jvm"] if HAS_JVM_JAR else [])):
        for layout in ("array", "struct", "vector", "packed"):
            tokens = mlt_encode("id", CODEC, layout=layout, engine=engine)  # type: ignore[arg-type]
            back = df.select(tokens.alias("t")).select(mlt_decode("t", CODEC, layout=layout, engine=engine))  # type: ignore[arg-type]
            assert [r[0] for r in back.collect()] == [0, 1, 2, 3, 4], (engine, layout)
    assert _functions(spark) == before
    names = register_mlt_functions(spark, CODEC, "caps_user")  # the one call that registers, by its name
    assert _functions(spark) - before == set(names)


def test_the_udf_engine_runs_one_udf_call_per_row_however_often_its_layout_reads_it(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    """A column by name: the UDF packs the tokens and Spark lays them out, reading its one
    result n + 1 times; Spark evaluates the call once (one Python UDF in the plan)."""
    for layout in ("array", "struct", "vector"):
        df = spark.range(4).select(mlt_encode("id", CODEC, layout=layout, engine="udf").alias("t"))  # type: ignore[arg-type]
        df.explain()
        plan = capsys.readouterr().out
        evaluations = [line for line in plan.splitlines() if "EvalPython" in line]
        assert len(evaluations) == 1, plan
        assert evaluations[0].count("pythonUDF") == 1, plan
        decoded = df.select(mlt_decode("t", CODEC, layout=layout, engine="native")).collect()  # type: ignore[arg-type]
        assert [r[0] for r in decoded] == [0, 1, 2, 3]


def test_a_capability_is_read_when_the_column_is_built_not_when_it_runs(spark: SparkSession) -> None:
    """Columns built for a session without the jar run jar-free in one that has it: what runs is
    decided once, where the Column is built, from the capabilities given."""
    column = mlt_encode(F.col("id") + 0, CODEC, capabilities=capabilities(jvm=False))
    df = spark.range(2).select(column.alias("t"))
    assert [r.t for r in df.collect()] == CODEC.encode([0, 1]).tolist()
