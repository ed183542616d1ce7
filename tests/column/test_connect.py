"""Every engine over Spark Connect (a local Connect server, in a separate process).

Spark Connect has no SparkContext: this proves the codec travels inside the UDF closure,
the native engine needs only the Column API, and the JVM engine's functions, called by name,
run where the server has spark-mlt's jar. A separate process keeps its JVM apart
from the test session's. PySpark 4 ships the Connect server; for 3.5 its jar comes from
``make jars`` (``.jars/spark-3.5/connect/``), so nothing downloads at test time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from spark_mlt import MLTCodec
from tests.support.spark_lines import HAS_JVM_JAR, VERSION

pytestmark = pytest.mark.compat  # runs on every supported PySpark line (make test-compat)

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from spark_mlt import MLTCodec
    from spark_mlt.jars import spark_jars
    from spark_mlt.column import mlt_decode, mlt_encode
    from spark_mlt.capabilities import Capabilities
    from spark_mlt.jars import jvm_session_conf, merge_conf

    conf = {"spark.ui.enabled": "false", "spark.pyspark.python": sys.executable}
    if sys.argv[1] == "3.5":  # the line whose pip package has no Connect server
        conf["spark.jars"] = spark_jars("connect")
    engines = ["native", "udf"]
    if sys.argv[2] == "jvm":  # the server loads spark-mlt's jar and its extension
        for key, value in jvm_session_conf().items():
            merge_conf(conf, key, value)
        engines.append("jvm")
    builder = SparkSession.builder.remote("local[2]")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    codec = MLTCodec.from_seed(13, 6, seed=42)
    df = spark.createDataFrame([(0,), (12345,), (None,), (4826808,)], "id bigint")
    caps = Capabilities.of(spark)
    out = {"capabilities": [caps.connect, caps.jvm_engine, caps.delta_jars]}
    for engine in [*engines, "auto"]:
        tokens = df.select("id", mlt_encode("id", codec, engine=engine).alias("t"))
        rows = tokens.select("t", mlt_decode("t", codec, engine=engine).alias("back")).collect()
        out[engine] = [[r.t, r.back] for r in rows]
    print("RESULT " + json.dumps(out))
    spark.stop()
    """
)


@pytest.mark.slow
def test_every_engine_works_over_spark_connect() -> None:
    line = f"{VERSION[0]}.{VERSION[1]}"
    jvm = "jvm" if HAS_JVM_JAR else "no-jvm"
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT, line, jvm], capture_output=True, text=True, timeout=600, check=False
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert lines, completed.stdout[-3000:]
    result = json.loads(lines[0].removeprefix("RESULT "))
    codec = MLTCodec.from_seed(13, 6, seed=42)
    ids = [0, 12345, None, 4826808]
    expected = [[None if i is None else codec.encode([i])[0].tolist(), i] for i in ids]
    engines = {"native": expected, "udf": expected, "auto": expected}
    if HAS_JVM_JAR:  # the server has the jar: the JVM functions, called by name, and auto picks them
        engines["jvm"] = expected
    assert result == {"capabilities": [True, HAS_JVM_JAR, False], **engines}
