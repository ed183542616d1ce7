"""A version's rows as the protocol defines them: its files scanned into Spark (``scan``), the
rows deletion vectors hide (``deletion_vectors``) and the change data feed between two versions
(``changes``); all over the log that ``spark_mlt.delta.snapshot`` replays.

Example::

    from spark_mlt.delta.read.deletion_vectors import read_deleted_rows
"""
