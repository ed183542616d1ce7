"""The jobs that write tokens, over one pipeline: the frame steps (``frames``: vocabularies,
tokens, rejected rows) and the checks before a write (``checks``), run by the pipeline into a
sink (``pipeline``); the batch job (``tokenize``), its new rows as they land (``stream``), and
the MovieLens releases (``movielens``).

Example::

    from spark_mlt.batch.write.tokenize import tokenize_table
    tokenize_table(spark, "orders.parquet", "out/orders_mlt", ["sku"])
"""
