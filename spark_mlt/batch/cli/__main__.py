"""``python -m spark_mlt.batch.cli ...``: the ``spark-mlt`` command."""

from __future__ import annotations

from spark_mlt.batch.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
