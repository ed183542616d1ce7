"""The commands that read a tokenized table back: decode it (``decode``), say what it holds
(``inspect``), find a key's rows (``find``), publish catalog functions and views over it
(``publish``), and the paper's Table 1 from it (``paper``).

Example::

    from spark_mlt.batch.read.decode import decode_table
    decode_table(spark, "out/orders_mlt", "out/orders_decoded")
"""
