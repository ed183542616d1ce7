"""Per-file statistics (the protocol's "Per-file Statistics"): the one place that writes them and
reads them back.

* `spark_mlt.delta.stats.columns`: which columns a table's files record statistics for.
* `spark_mlt.delta.stats.footer`: the statistics the jar-free writer commits, read from each
  file's Parquet footer: every bound a true bound for every reader, or none.
* `spark_mlt.delta.stats.bounds`: statistics read back as bounds, by delta-spark's reading rules,
  for whatever prunes files (the sync's search for the files that hold its keys).

Example::

    spec = stats_spec(snapshot.layout, snapshot.config)
    stats = file_stats(pq.read_metadata(path), spec)
    column_bounds(parse_stats(stats), ("id",), LongType())
"""

from __future__ import annotations

from spark_mlt.delta.stats.bounds import Bounds, FileStats, column_bounds, parse_stats
from spark_mlt.delta.stats.columns import StatsColumn, StatsSpec, stats_spec
from spark_mlt.delta.stats.footer import file_stats, stats_json, truncate_max_string, truncate_min_string

__all__ = [
    "Bounds",
    "FileStats",
    "StatsColumn",
    "StatsSpec",
    "column_bounds",
    "file_stats",
    "parse_stats",
    "stats_json",
    "stats_spec",
    "truncate_max_string",
    "truncate_min_string",
]
