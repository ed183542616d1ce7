"""`make paper`: the MLT paper's Table 1 reproduced end to end on this machine.

Finds a MovieLens release as `make demo` does (``ML_DIR=...``, the first ``data/ml-*``, else a
seeded synthetic release), tokenises it into a Delta table with the MovieLens job (p = 47,
n = 7), trains every method from that table and writes ``output/paper/report.{json,md,png}``.
Needs the ``paper`` extra (installed by ``make``).
"""

from __future__ import annotations

import os
import sys
import time

from demo import find_release

from spark_mlt.batch import local_session, reproduce_paper
from spark_mlt.errors import MissingExtraError


def main() -> int:
    folder, synthetic = find_release()
    output = os.path.abspath(os.environ.get("PAPER_OUTPUT", "output/paper"))
    started = time.perf_counter()
    try:
        report = reproduce_paper(str(folder), output, session=lambda: local_session("spark-mlt paper"))
    except MissingExtraError as exc:
        print(f"spark-mlt paper: {exc}", file=sys.stderr)
        return 1
    print(report.files["markdown"].read_text())
    kind = "synthetic ratings (no real release found)" if synthetic else f"MovieLens from {folder}"
    print(f"{kind}; report in {output} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
