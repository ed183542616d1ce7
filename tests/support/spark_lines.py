"""What differs between the supported PySpark lines, as the tests need it."""

from __future__ import annotations

import pyspark
from py4j.protocol import Py4JJavaError
from pyspark.errors import PythonException, SparkRuntimeException

from spark_mlt.errors import MissingJarsError, OptionError
from spark_mlt.jvm import jvm_jar

VERSION = tuple(int(part) for part in pyspark.__version__.split(".")[:2])

#: A query that fails at run time: ``raise_error`` surfaces as SparkRuntimeException on
#: Spark 4 and as a plain Py4JJavaError on 3.5; a UDF's error as PythonException.
QUERY_ERRORS = (SparkRuntimeException, PythonException, Py4JJavaError)

#: SQL functions (``CREATE FUNCTION ... RETURN``) arrived in Spark 4.0.
HAS_SQL_FUNCTIONS = VERSION >= (4, 0)

#: Arrow UDFs arrived in PySpark 4.1; before, the udf engine runs pandas UDFs.
HAS_ARROW_UDFS = VERSION >= (4, 1)


def _has_jvm_jar() -> bool:
    try:
        jvm_jar()
    except (MissingJarsError, OptionError):
        return False
    return True


#: spark-mlt's jar for this line is built (``make jvm``; ``make test`` builds it), so the test
#: session loads it and the JVM engine runs beside the jar-free ones.
HAS_JVM_JAR = _has_jvm_jar()

#: every engine the test session has
ENGINES = ["native", "udf", *(["jvm"] if HAS_JVM_JAR else [])]
