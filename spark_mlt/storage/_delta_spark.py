"""The delta-spark backend: for sessions with Delta's jars on the classpath.

``df.write.format("delta")`` writes and commits; a new table is created first through the
DeltaTable builder, because that is where delta-spark takes table properties (the codecs).
A run id becomes Delta's idempotent-write options (``txnAppId``/``txnVersion``): Delta itself
skips a write whose application transaction the table already holds. The ``delta`` package
(delta-spark) is optional, so it is imported here only when this backend runs.

Not exercised on machines without the io.delta jars (Maven unreachable), hence ``no cover``.
"""

from __future__ import annotations

import json
import time

from pyspark.sql import DataFrame

from spark_mlt.storage._plan import DeltaWriteResult, WritePlan
from spark_mlt.storage.properties import run_app_id

__all__ = ["write"]


def write(df: DataFrame, plan: WritePlan) -> DeltaWriteResult:  # pragma: no cover - needs the io.delta jars
    """Writes ``df`` as the plan says, with delta-spark."""
    from delta.tables import DeltaTable as SparkDeltaTable  # optional: delta-spark, where the cluster has Delta

    spark = df.sparkSession
    location = plan.location.spark_path()
    started = time.perf_counter()
    if not SparkDeltaTable.isDeltaTable(spark, location):
        builder = SparkDeltaTable.createIfNotExists(spark).location(location).addColumns(df.schema)
        for key, value in plan.properties.items():
            builder = builder.property(key, value)
        if plan.partition_by:
            builder = builder.partitionedBy(*plan.partition_by)
        builder.execute()
    writer = df.write.format("delta").mode("append" if plan.mode == "error" else plan.mode)
    if plan.run_id is not None:  # Delta's idempotent writes: skipped when the table has this txn
        writer = writer.option("txnAppId", run_app_id(plan.run_id)).option("txnVersion", 1)
    writer.option("userMetadata", json.dumps(dict(plan.commit_info), sort_keys=True)).save(location)
    table = SparkDeltaTable.forPath(spark, location)
    last = table.history(1).select("version", "operationMetrics").first()
    version = int(last[0]) if last is not None else -1
    rows = int((last[1] or {}).get("numOutputRows", "0")) if last is not None else 0
    seconds = {"total": time.perf_counter() - started}
    return DeltaWriteResult(plan.location.uri, version, rows, 0, "delta-spark", seconds)
