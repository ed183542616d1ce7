"""What every job shares: its typed options, its report, its session, its input, and the
thresholds and capacity checks it runs before and after its write.

Example::

    from spark_mlt.batch.job.options import TokenizeOptions
    TokenizeOptions(mode="append", handle_invalid="quarantine")
"""
