#!/usr/bin/env bash
# The compatibility suite on one PySpark line: builds (or reuses) its venv with
# tests/compat/venv.sh (that pyspark and stack first, then spark-mlt, which must replace
# none of them), runs the tests marked compat (the jobs on a local S3 server among
# them), then on a line Delta publishes jars for
# the delta-spark tests (local disk, catalog tables, S3). The jars come from `make jars`
# (make test-compat runs it first). Usage: tests/compat/run-line.sh 3.5.0 [pytest args...]
set -euo pipefail
version=$1
shift
venv=$(tests/compat/venv.sh "$version")
"$venv/bin/python" -c "import pyspark, pandas, numpy, pyarrow, deltalake; print(f'== pyspark {pyspark.__version__}, pandas {pandas.__version__}, numpy {numpy.__version__}, pyarrow {pyarrow.__version__}, deltalake {deltalake.__version__}')"
line=$("$venv/bin/python" -c 'from spark_mlt.batch.jars import jar_line; print(jar_line())')
# the table zoo (tests/support/zoo.py) of this line's Delta, for the jar-free tests; a line
# without Delta reads the zoo `make zoo` built, if any
if [[ -f .jars/spark-$line/delta/.complete ]]; then
    zoo=.zoo/pyspark-$version
    if [[ ! -f $zoo/manifest.json || tests/support/zoo.py -nt $zoo/manifest.json || tests/support/stats_cases.py -nt $zoo/manifest.json ]]; then
        PYSPARK_PYTHON="$venv/bin/python" "$venv/bin/python" -m tests.support.zoo "$zoo"
    fi
    export SPARK_MLT_TEST_ZOO=$zoo
fi
# the generated statistics tables (tests/test_stats.py): more examples than make test's 8
PYSPARK_PYTHON="$venv/bin/python" PYARROW_IGNORE_TIMEZONE=1 SPARK_MLT_STATS_EXAMPLES=${SPARK_MLT_STATS_EXAMPLES:-16} \
    "$venv/bin/python" -m pytest -m compat -p no:cacheprovider -q "$@" tests/test_*.py
# delta-spark on the lines Delta publishes it for, with the jars `make jars` copied
if [[ -f .jars/spark-$line/delta/.complete ]]; then
    echo "== delta-spark on Spark $line"
    started=$SECONDS
    SPARK_MLT_TEST_DELTA_SPARK=1 PYSPARK_PYTHON="$venv/bin/python" PYARROW_IGNORE_TIMEZONE=1 \
        SPARK_MLT_STATS_EXAMPLES=${SPARK_MLT_STATS_EXAMPLES_DELTA_SPARK:-6} \
        "$venv/bin/python" -m pytest -m delta_spark -p no:cacheprovider -q "$@" tests/test_delta_spark.py tests/test_stats.py
    echo "== delta-spark on Spark $line: $((SECONDS - started)) s"
else
    echo "== no delta-spark for Spark $line (no .jars/spark-$line/delta: make jars JARS_GROUPS=delta)"
fi
