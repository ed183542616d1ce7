"""The jobs that write tokens: a table or a frame (``tokenize``), its new rows as they land
(``stream``, built on ``tokenize``), and the MovieLens releases (``movielens``).

Example::

    from spark_mlt.batch.write.tokenize import tokenize_table
    tokenize_table(spark, "orders.parquet", "out/orders_mlt", ["sku"])
"""
