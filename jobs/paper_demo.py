"""`make paper`: the MLT paper's Table 1 reproduced end to end on this machine, as a user runs it.

Finds a MovieLens release as `make demo` does (``SPARK_MLT_ML_DIR=...``, else the first ``data/ml-*``,
else a seeded synthetic release), tokenizes it into a Delta table
with the MovieLens job's defaults (``spark-mlt movielens``: p = 13, n sized per column; the
paper's p = 47, n = 7 with ``SPARK_MLT_PAPER_P=47 SPARK_MLT_PAPER_N=7``), trains every method from that table
(``spark-mlt paper``; epochs chosen on a validation split unless ``SPARK_MLT_PAPER_EPOCHS=fixed``, the
paper's own counts) and writes ``output/paper/report.{json,md,png}``. Needs the ``paper``
extra (installed by ``make``).
"""

from __future__ import annotations

import os
import sys
import time

from demo import find_release

from spark_mlt.batch import MovieLensOptions, local_session, reproduce_paper
from spark_mlt.errors import MissingExtraError
from spark_mlt.paper import PaperOptions


def _int(name: str) -> int | None:
    return int(os.environ[name]) if os.environ.get(name) else None


def main() -> int:
    folder, synthetic = find_release()
    output = os.path.abspath(os.environ.get("SPARK_MLT_PAPER_OUTPUT", "output/paper"))
    options = PaperOptions(epoch_selection=os.environ.get("SPARK_MLT_PAPER_EPOCHS", "validation"))  # type: ignore[arg-type]
    tokenize = MovieLensOptions(p=_int("SPARK_MLT_PAPER_P"), n=_int("SPARK_MLT_PAPER_N"), mode="overwrite")
    started = time.perf_counter()
    try:
        report = reproduce_paper(
            str(folder), output, options, session=lambda: local_session("spark-mlt paper"), tokenize=tokenize
        )
    except MissingExtraError as exc:
        print(f"spark-mlt paper: {exc}", file=sys.stderr)
        return 1
    print(report.files["markdown"].read_text())
    kind = "synthetic ratings (no real release found)" if synthetic else f"MovieLens from {folder}"
    print(f"{kind}; report in {output} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
