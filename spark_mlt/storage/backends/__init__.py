"""The two ways spark-mlt commits to a Delta table, over one write plan (``plan``):
``delta_rs``, jar-free (Spark writes the Parquet files, delta-rs commits them), and
``delta_spark``, through the session's Delta jars. Chosen in
[`write_delta`][spark_mlt.storage.writer.write_delta]; nothing above ``storage`` imports them.

Example::

    from spark_mlt.storage.backends.plan import DeltaWriteResult
"""
