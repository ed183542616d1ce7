"""What the running PySpark supports, read in one place."""

from __future__ import annotations

import pyspark
from pyspark.sql import functions as F

__all__ = ["PYSPARK_LINE", "has_arrow_udfs"]

#: (major, minor) of the PySpark running this driver.
PYSPARK_LINE: tuple[int, int] = tuple(int(part) for part in pyspark.__version__.split(".")[:2])  # type: ignore[assignment]


def has_arrow_udfs() -> bool:
    """Arrow UDFs (``pyspark.sql.functions.arrow_udf``) arrived in PySpark 4.1."""
    return hasattr(F, "arrow_udf")
