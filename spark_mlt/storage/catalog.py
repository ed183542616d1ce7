"""Tables named in a catalog (``db.table``, ``catalog.db.table``) next to tables at a path.

Wherever a table's location is accepted (``write_delta``, ``read_delta``, ``read_snapshot``,
``vacuum``, the jobs' ``--output``, ``--input``, ``decode``, ``inspect``), a catalog table's
name works too, by one rule ([`is_table_name`][spark_mlt.storage.catalog.is_table_name]):

    A string with no ``/``, no ``\\`` and no ``:`` made of two or three dot-separated SQL
    identifiers (letters, digits and ``_``, not starting with a digit; or backquoted) is a
    table name. Anything else, and every ``os.PathLike``, is a path. ``./name.x`` (or an
    absolute path) forces a path; a single name (``ratings``) is a relative path.

A name needs a session that can hold Delta tables by name: delta-spark's jars with its
session catalog (``spark.sql.catalog.spark_catalog``, what Databricks and EMR set up), or
another catalog of Delta tables named by a three-part name. A name on a session without
Delta's jars gets a [`TableError`][spark_mlt.errors.TableError] naming the value and the settings.

A named table is created through Spark SQL (``CREATE TABLE db.t (...) USING delta
TBLPROPERTIES (...)``: its codecs are in the catalog from its first version); to read its
state, delta-rs is pointed at the location the catalog holds (``DESCRIBE DETAIL``), so
everything else works exactly as for a path.
"""

from __future__ import annotations

import os
import re

from pyspark.sql import SparkSession

from spark_mlt.capabilities import Capabilities
from spark_mlt.errors import MissingTableError, TableError

__all__ = [
    "is_table_name",
    "resolve_location",
    "table_location",
]

_PART = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)"
_NAME = re.compile(rf"{_PART}(?:\.{_PART}){{1,2}}")


def is_table_name(value: object) -> bool:
    """Whether ``value`` names a catalog table rather than a path (the rule in the module doc).

    Example::

        is_table_name("sales.ratings_mlt")    # True
        is_table_name("main.sales.ratings")   # True (three-part: catalog.schema.table)
        is_table_name("./ratings.delta")      # False: a path
        is_table_name("s3://bucket/ratings")  # False
    """
    if not isinstance(value, str) or any(c in value for c in "/\\:"):
        return False
    return _NAME.fullmatch(value) is not None


def _require_catalog(spark: SparkSession | None, name: str, parameter: str) -> SparkSession:
    if spark is not None and Capabilities.of(spark).delta_jars:
        return spark
    where = "there is no active SparkSession" if spark is None else "the session has no Delta jars"
    raise TableError(
        f"{parameter} {name!r} is a catalog table's name (two or three dotted names without '/'), "
        f"but {where}: a table name needs a session with delta-spark and its catalog "
        "(spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension, "
        "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog, Delta's jars). "
        f"For a folder of that name pass './{name}'",
        parameter=parameter,
    )


def table_location(spark: SparkSession | None, name: str, *, parameter: str = "path") -> str | None:
    """The location of the Delta table ``name`` as its catalog holds it, or None when the
    catalog has no such table.

    Raises:
        TableError: the session cannot hold Delta tables by name, or ``name`` is no Delta table.
    """
    spark = _require_catalog(spark, name, parameter)
    if not spark.catalog.tableExists(name):
        return None
    row = spark.sql(f"DESCRIBE DETAIL {name}").select("format", "location").first()
    if row is None or str(row[0]).lower() != "delta":
        kind = "no" if row is None else f"a {row[0]}"
        raise TableError(f"{parameter} {name!r} is {kind} table, not a Delta table", parameter=parameter)
    return local_uri(str(row[1]))


def local_uri(location: str) -> str:
    """A catalog's location as delta-rs and pyarrow take it: ``file:/x`` (Hadoop's form of a
    local path) becomes ``/x``; other URIs stay as they are."""
    if location.startswith("file:") and not location.startswith("file://"):
        return "/" + location.removeprefix("file:").lstrip("/")
    if location.startswith("file:///"):
        return location.removeprefix("file://")
    return location


def resolve_location(
    path: str | os.PathLike[str], *, spark: SparkSession | None = None, parameter: str = "path"
) -> str:
    """``path`` itself, or for a table name the location its catalog holds (through
    ``spark``, by default the active session).

    Raises:
        MissingTableError: the catalog has no table ``path``.
        TableError: ``path`` is a name and no session can resolve it.
    """
    if not is_table_name(path):
        return os.fspath(path)
    name = str(path)
    location = table_location(spark or SparkSession.getActiveSession(), name, parameter=parameter)
    if location is None:
        raise MissingTableError(f"no table {name} in the session's catalog", parameter=parameter)
    return location
