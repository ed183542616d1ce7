"""What every job shares: its typed options, its report, its session, its input, and the
thresholds and capacity checks it runs before and after its write.

Example::

    from spark_mlt.batch.job.options import RunOptions
    RunOptions(mode="append", run_id="2026-11-22")
"""
