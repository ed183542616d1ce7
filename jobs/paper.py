"""spark-submit entry point: `spark-mlt paper` (see `spark_mlt.batch.cli` for the flags).

Example::

    spark-submit jobs/paper.py --input out/ratings_mlt --output out/paper
"""

from __future__ import annotations

import sys

from spark_mlt.batch.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["paper", *sys.argv[1:]]))
