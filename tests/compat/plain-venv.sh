#!/usr/bin/env bash
# Builds (or reuses) a venv with one PySpark line and nothing else (its py4j and its Connect
# client's packages): an analyst's session, for the tests that read what spark-mlt published
# into a catalog without spark-mlt. Downloads come from pip's cache (the line's compat venv
# fetched them). Prints the venv's
# folder on the last line. Usage: tests/compat/plain-venv.sh 4.1.0
set -euo pipefail
version=$1
python=${PYTHON:-python3}
venv=${COMPAT_DIR:-.compat}/plain-$version
if [[ ! -f $venv/.installed ]]; then
    echo "== building $venv" >&2
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet "pyspark[connect]==$version" >&2
    touch "$venv/.installed"
fi
echo "$venv"
