"""spark-submit entry point: `spark-mlt sync` (see `spark_mlt.batch.cli` for the flags).

Example::

    spark-submit jobs/sync_table.py --help
"""

from __future__ import annotations

import sys

from spark_mlt.batch.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["sync", *sys.argv[1:]]))
