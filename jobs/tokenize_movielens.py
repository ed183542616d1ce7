"""spark-submit entry point: `spark-mlt movielens` (see `spark_mlt.batch.cli` for the flags).

Example::

    spark-submit jobs/tokenize_movielens.py --help
"""

from __future__ import annotations

import sys

from spark_mlt.batch.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["movielens", *sys.argv[1:]]))
