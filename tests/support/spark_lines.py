"""What differs between the supported PySpark lines, as the tests need it."""

from __future__ import annotations

import pyspark
from py4j.protocol import Py4JJavaError
from pyspark.errors import PythonException, SparkRuntimeException

from spark_mlt import __version__
from spark_mlt.capabilities import Capabilities
from spark_mlt.errors import MissingJarsError, OptionError
from spark_mlt.jars import jvm_jar

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


def capabilities(*, jvm: bool = False, spark_version: str = pyspark.__version__, connect: bool = False) -> Capabilities:
    """Capabilities of a session of ``spark_version`` (default: this line), with spark-mlt's jar
    of this version or none, and no Delta jars: what the policy sees, without a session."""
    return Capabilities(
        connect=connect,
        spark_version=spark_version,
        arrow_udfs=HAS_ARROW_UDFS and tuple(map(int, spark_version.split(".")[:2])) >= (4, 1),
        delta_jars=False,
        jar_version=__version__ if jvm else None,
    )
