"""The codec of the scenario tests, one for every test module (fault_jobs.py and
speculation_job.py, which run as scripts, use the same p, n and seed), and OTHER: the same
shape with another matrix, for the tests that need a codec the table does not hold."""

from __future__ import annotations

from spark_mlt import MLTCodec

__all__ = ["CODEC", "OTHER"]

CODEC = MLTCodec.from_seed(13, 6, seed=42)
OTHER = MLTCodec.from_seed(13, 6, seed=43)
