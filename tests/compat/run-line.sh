#!/usr/bin/env bash
# The compatibility suite on one PySpark line: builds (or reuses) a venv with that pyspark,
# installs spark-mlt into it the way a user would (its pyspark kept), runs the tests that
# every line must pass. Usage: tests/compat/run-line.sh 3.5.0 [pytest args...]
#
# A line's stack (pandas, numpy, pyarrow) is pinned by tests/compat/pyspark-<version>.txt
# when that file exists (3.5.0: the Databricks 15.4 LTS stack, our lower bounds), else by
# tests/compat/newest.txt: the newest releases within spark-mlt's ranges. Downloads go to
# pip's cache.
set -euo pipefail
version=$1
shift
python=${PYTHON:-python3}
venv=${COMPAT_DIR:-.compat}/pyspark-$version
constraints=tests/compat/pyspark-$version.txt
[[ -f $constraints ]] || constraints=tests/compat/newest.txt
stamp=$venv/.installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp || $constraints -nt $stamp ]]; then
    echo "== building $venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    # pyspark first, as on a cluster; spark-mlt must then install without replacing it
    "$venv/bin/python" -m pip install --quiet "pyspark[connect]==$version" -r "$constraints"
    before=$("$venv/bin/python" -m pip freeze)
    "$venv/bin/python" -m pip install --quiet -e . "pytest>=8" "hypothesis>=6.100"
    replaced=$(comm -23 <(sort <<<"$before") <("$venv/bin/python" -m pip freeze | sort))
    if [[ -n $replaced ]]; then
        echo "installing spark-mlt replaced what the line had installed:" >&2
        echo "$replaced" >&2
        exit 1
    fi
    touch "$stamp"
fi
"$venv/bin/python" -c "import pyspark, pandas, numpy, pyarrow; print(f'== pyspark {pyspark.__version__}, pandas {pandas.__version__}, numpy {numpy.__version__}, pyarrow {pyarrow.__version__}')"
PYSPARK_PYTHON="$venv/bin/python" PYARROW_IGNORE_TIMEZONE=1 \
    "$venv/bin/python" -m pytest -m compat -p no:cacheprovider -q "$@" \
    tests/test_functions.py tests/test_ml.py tests/test_jobs.py tests/test_delta.py tests/test_sqlgen.py \
    tests/test_connect.py tests/test_compositions.py
# delta-spark on the lines Delta publishes it for, with the jars `make jars` copied
line=$("$venv/bin/python" -c 'from spark_mlt.batch.jars import spark_line; print(spark_line())')
if [[ -f .jars/spark-$line/delta/.complete ]]; then
    echo "== delta-spark on Spark $line"
    started=$SECONDS
    MLT_TEST_DELTA_SPARK=1 PYSPARK_PYTHON="$venv/bin/python" PYARROW_IGNORE_TIMEZONE=1 \
        "$venv/bin/python" -m pytest -m delta_spark -p no:cacheprovider -q "$@" tests/test_delta_spark.py
    echo "== delta-spark on Spark $line: $((SECONDS - started)) s"
else
    echo "== no delta-spark for Spark $line (no .jars/spark-$line/delta: make jars JARS_GROUPS=delta)"
fi
