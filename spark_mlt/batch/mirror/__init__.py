"""A tokenized mirror that follows its Delta source's change data feed (``sync``), the windows
of changes it applies (``window``), and the erasure and vacuum of what no row holds any more
(``erase``).

Example::

    from spark_mlt.batch.mirror.sync import sync_table
    sync_table(spark, "lake/customers", "lake/customers_mlt", ["customer_id"], SyncOptions(key=("k",)))
"""
