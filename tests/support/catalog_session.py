"""A Spark session over a metastore on disk, run as a child process: ``create`` publishes a
table's functions and view with spark-mlt (``publish_table``), ``query`` runs SQL and prints its
rows as JSON, and is meant for a venv with PySpark alone: it imports nothing of spark-mlt and
fails if spark-mlt is importable.

Usage: python catalog_session.py create|query '<json spec>'
Spec: ``folder`` (the metastore's and warehouse's), ``jars`` (Delta's, or ""), then ``table``,
``schema``, ``functions``, ``view`` for create, ``queries`` for query.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any


def session(spec: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415 - the check that spark-mlt is absent comes first

    folder = spec["folder"]
    builder = (
        SparkSession.builder.master("local[1]")
        .enableHiveSupport()
        .config("spark.sql.warehouse.dir", f"{folder}/warehouse")
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={folder}/metastore_db;create=true"
        )
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if spec["jars"]:
        builder = (
            builder.config("spark.jars", spec["jars"])
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def create(spec: dict[str, Any]) -> None:
    from spark_mlt.batch import PublishOptions, publish_table  # noqa: PLC0415 - absent in the reader's venv

    spark = session(spec)
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {spec['schema']}")
    options = PublishOptions(schema=spec["schema"], functions=spec["functions"], view=spec["view"])
    print(json.dumps(publish_table(spark, spec["table"], options).to_dict()))


def query(spec: dict[str, Any]) -> None:
    if importlib.util.find_spec("spark_mlt") is not None:
        raise SystemExit("spark_mlt is importable here: this session must run with PySpark alone")
    spark = session(spec)
    out = {"spark": spark.version, "results": []}
    for statement in spec["queries"]:
        try:
            rows = [row.asDict() for row in spark.sql(statement).collect()]
            out["results"].append({"rows": rows})
        except Exception as exc:  # noqa: BLE001 - the error's words are what the test compares
            out["results"].append({"error": str(exc).splitlines()[0][:2000]})
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    {"create": create, "query": query}[sys.argv[1]](json.loads(sys.argv[2]))
