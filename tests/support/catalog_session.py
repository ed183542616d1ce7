"""A Spark session over a metastore on disk, run as a child process: ``create`` publishes a
table's functions and view with spark-mlt (``publish_table``), ``query`` runs SQL and prints its
rows as JSON, and is meant for a venv with PySpark alone: it imports nothing of spark-mlt and
fails if spark-mlt is importable.

Usage: python catalog_session.py create|query '<json spec>'
Spec: ``folder`` (the metastore's and warehouse's), ``jars`` (Delta's, or ""), then ``table``,
``schema``, ``functions``, ``view`` for create, ``queries`` for query, and ``connect``: run them
also through a local Spark Connect server (a SQL endpoint in its own process), over its protocol.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any


def session(spec: dict[str, Any], *, connect: bool = False) -> Any:
    """A session over the metastore in ``spec["folder"]``: in this process, or (``connect``) a
    client of a local Spark Connect server that this call starts, queried over Connect's protocol."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - the check that spark-mlt is absent comes first

    folder = spec["folder"]
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": f"{folder}/warehouse",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder}/metastore_db;create=true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    if spec["jars"]:
        conf.update(
            {
                "spark.jars": spec["jars"],
                "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            }
        )
    builder = SparkSession.builder.remote("local[1]") if connect else SparkSession.builder.master("local[1]")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not connect:
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
    out: dict[str, Any] = {}
    for mode in ("classic", "connect") if spec.get("connect") else ("classic",):
        spark = session(spec, connect=mode == "connect")
        results: list[dict[str, Any]] = []
        for statement in spec["queries"]:
            try:
                results.append({"rows": [row.asDict() for row in spark.sql(statement).collect()]})
            except Exception as exc:  # noqa: BLE001 - the error's words are what the test compares
                results.append({"error": str(exc).splitlines()[0][:2000]})
        out[mode] = {"spark": spark.version, "results": results}
        spark.stop()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    {"create": create, "query": query}[sys.argv[1]](json.loads(sys.argv[2]))
