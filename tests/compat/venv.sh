#!/usr/bin/env bash
# Builds (or reuses) the venv of one PySpark line the way a user's cluster has it: that
# pyspark and its stack first, then spark-mlt, which must not replace any of them. Prints the
# venv's folder on the last line. Usage: tests/compat/venv.sh 3.5.0
#
# A line's stack (pandas, numpy, pyarrow) is pinned by tests/compat/pyspark-<version>.txt
# when that file exists (3.5.0: the Databricks 15.4 LTS stack, our lower bounds), else by
# tests/compat/newest.txt: the newest releases within spark-mlt's ranges. Downloads go to
# pip's cache. Used by run-line.sh (the compatibility suite), the benchmarks' BENCH_LINE and
# `DELTA=spark make demo` on a line without Delta.
set -euo pipefail
version=$1
python=${PYTHON:-python3}
venv=${COMPAT_DIR:-.compat}/pyspark-$version
constraints=tests/compat/pyspark-$version.txt
[[ -f $constraints ]] || constraints=tests/compat/newest.txt
stamp=$venv/.installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp || $constraints -nt $stamp ]]; then
    echo "== building $venv" >&2
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    # pyspark first, as on a cluster; spark-mlt must then install without replacing it
    "$venv/bin/python" -m pip install --quiet "pyspark[connect]==$version" -r "$constraints" >&2
    before=$("$venv/bin/python" -m pip freeze)
    "$venv/bin/python" -m pip install --quiet -e . >&2
    replaced=$(comm -23 <(sort <<<"$before") <("$venv/bin/python" -m pip freeze | sort))
    if [[ -n $replaced ]]; then
        echo "installing spark-mlt replaced what the line had installed:" >&2
        echo "$replaced" >&2
        exit 1
    fi
    # then the test tools (not spark-mlt's: the local S3 server's botocore wants an older
    # python-dateutil than the newest pandas brings, which is the tools' business, not ours)
    "$venv/bin/python" -m pip install --quiet -e ".[test]" >&2
    touch "$stamp"
fi
echo "$venv"
