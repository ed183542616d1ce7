"""spark-submit entry point: `spark-mlt erase` (see `spark_mlt.batch.cli` for the flags).

Example::

    spark-submit jobs/erase_mirror.py --help
"""

from __future__ import annotations

import sys

from spark_mlt.batch.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["erase", *sys.argv[1:]]))
