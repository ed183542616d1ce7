"""What the running PySpark supports, read in one place."""

from __future__ import annotations

import re

import pyspark
from pyspark.sql import functions as F

__all__ = ["PYSPARK_LINE", "has_arrow_udfs", "spark_line"]


def spark_line(version: str) -> tuple[int, int]:
    """(major, minor) of a Spark or PySpark version string.

    Example::

        >>> spark_line("4.0.0-preview2")
        (4, 0)
    """
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a Spark version: {version!r}")
    return int(found[1]), int(found[2])


#: (major, minor) of the PySpark running this driver. The Spark a session runs can differ
#: (Spark Connect): ask ``spark_line(spark.version)`` where that is what matters.
PYSPARK_LINE: tuple[int, int] = spark_line(pyspark.__version__)


def has_arrow_udfs() -> bool:
    """Arrow UDFs (``pyspark.sql.functions.arrow_udf``) arrived in PySpark 4.1."""
    return hasattr(F, "arrow_udf")
