#!/usr/bin/env bash
# The compatibility suite on one PySpark line: builds (or reuses) its venv with
# tests/compat/venv.sh (that pyspark and stack first, then spark-mlt, which must replace
# none of them), runs the tests marked compat (the jobs on a local S3 server among them) on its
# release's table zoo, the differential statistics harness (30 cases written on a full line, 10
# on a smoke line, read by every reader the line has: SPARK_MLT_DIFF_EXAMPLES), the
# engine-differential harness (60 cases, 20 on a smoke line: SPARK_MLT_ENGINE_EXAMPLES), and on
# DELTA_SPARK_LINES (this line when unset) the delta-spark tests (local disk, catalog tables, S3)
# with delta-spark reading the differential harness's cases. Two test runs, one per kind of
# session: jar-free, then with Delta's jars. The jars come from `make jars` (make test-compat
# runs it first). Usage: tests/compat/run-line.sh 3.5.0 [pytest args...]
#
# COMPAT_DEPTH=full (the default) runs every compat test but the exhaustive ones
# (tests/support/marks.py); COMPAT_DEPTH=smoke the JVM engine, every engine over Connect, the
# Delta round trips, the stream, the file statistics and the catalog functions. DELTA_SPARK_DEPTH=full (the default)
# runs every delta_spark test (the sync's runs interleaved and stopped at each step point among
# them) but the whole-sync cases of tests/batch/mirror/test_sync.py; smoke, delta-spark writing, reading our
# tables of each feature, and those sync cases (CATALOG=full adds the catalog functions and
# views of tests/batch/read/test_publish.py).
# PYTEST_WORKERS (default 2) test processes (pytest-xdist) share each run, whole modules each.
set -euo pipefail
version=$1
shift
workers=${PYTEST_WORKERS:-2}
xdist=()
if ((workers > 1)); then xdist=(-n "$workers" --dist loadfile); fi
venv=$(tests/compat/venv.sh "$version")
"$venv/bin/python" -c "import pyspark, pandas, numpy, pyarrow, deltalake; print(f'== pyspark {pyspark.__version__}, pandas {pandas.__version__}, numpy {numpy.__version__}, pyarrow {pyarrow.__version__}, deltalake {deltalake.__version__}')"
line=$("$venv/bin/python" -c 'from spark_mlt.jars import jar_line; print(jar_line())')
# a line Delta publishes delta-spark for must have its jars: a missing or broken jar setup fails
# here instead of leaving the zoo, the delta-spark reader and the MERGE tests out green
if "$venv/bin/python" -c "import sys; from spark_mlt.jars import LINE_GROUPS; sys.exit('delta' not in LINE_GROUPS['$line'])" &&
    [[ ! -f .jars/spark-$line/delta/.complete ]]; then
    echo "run-line.sh: Spark $line has delta-spark jars but .jars/spark-$line/delta is not complete (make jars JARS_LINE=$line JARS_GROUPS=delta)" >&2
    exit 1
fi
# the table zoo (tests/support/zoo.py) of this line's Delta: the line's jar-free tests read
# tables as the Delta of the line's users writes them, and delta-spark's own statistics of its
# files (tests/delta/test_stats.py), which differ by Delta release. Each release our lines run has a
# committed zoo (tests/data/zoo*, `make zoo`), read as it is when its manifest names the current
# builder (make test fails otherwise); only a release without one gets a fresh zoo built into
# .zoo/ (git-ignored), checked against the committed one (tests/compat/test_zoo.py). A line
# without Delta reads the newest committed zoo (tests/data/zoo).
depth=${COMPAT_DEPTH:-full}
if [[ -f .jars/spark-$line/delta/.complete ]]; then
    delta=$(basename .jars/spark-$line/delta/delta-storage-*.jar .jar); delta=${delta#delta-storage-}
    zoo=$("$venv/bin/python" -m tests.support.zoo --committed-for "$delta")
    if [[ -n $zoo ]]; then
        echo "== zoo: the committed $zoo (Delta $delta, built from the current builder)"
    else
        zoo=.zoo/pyspark-$version
        started=$SECONDS
        PYSPARK_PYTHON="$venv/bin/python" "$venv/bin/python" -m tests.support.zoo "$zoo"
        echo "== zoo: $zoo (Delta $delta) against the committed one"
        SPARK_MLT_TEST_ZOO=$zoo "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@" tests/compat/test_zoo.py
        echo "== zoo on Spark $line: $((SECONDS - started)) s"
    fi
    export SPARK_MLT_TEST_ZOO=$zoo
fi
if [[ $depth == smoke ]]; then
    tests=(tests/column/test_jvm.py tests/column/test_connect.py tests/storage/test_delta.py tests/batch/write/test_stream.py tests/delta/test_stats.py tests/batch/read/test_publish.py)
else
    # every folder of tests but the compatibility suite's own, the helpers (their modules import
    # what a line may lack: pytest would collect them for their doctests) and the data
    tests=()
    for folder in tests/*/; do
        case $folder in tests/compat/ | tests/support/ | tests/data/ | tests/__pycache__/) ;; *) tests+=("${folder%/}") ;; esac
    done
fi
# the differential harness (tests/delta/test_differential.py): SPARK_MLT_DIFF_EXAMPLES cases written
# on this line, each read by every reader the line has: the cheap ones every case, the others in
# turn (10 on a smoke line: the newest line writes 60 on CI, and the full line 30)
cases=30
[[ $depth == smoke ]] && cases=10
differential=(SPARK_MLT_DIFF_EXAMPLES="${SPARK_MLT_DIFF_EXAMPLES:-$cases}" SPARK_MLT_DIFF_SHARDS=2 SPARK_MLT_DIFF_ROTATE=1
    SPARK_MLT_DIFF_PREDICATES="${SPARK_MLT_DIFF_PREDICATES:-16}" SPARK_MLT_DIFF_SPARK_PREDICATES="${SPARK_MLT_DIFF_SPARK_PREDICATES:-4}"
    SPARK_MLT_DIFF_REPORT=".differential/pyspark-$version.txt")
# the engine-differential harness (tests/column/test_engine_differential.py): SPARK_MLT_ENGINE_EXAMPLES
# generated cases (60 on a full line, 20 on a smoke line; the newest line runs 120 on CI, 500
# in make test-engines), every engine the line has (no SQL functions before 4.0) against the
# NumPy codec
engine_cases=60
[[ $depth == smoke ]] && engine_cases=20
engines=(SPARK_MLT_ENGINE_EXAMPLES="${SPARK_MLT_ENGINE_EXAMPLES:-$engine_cases}" SPARK_MLT_ENGINE_SHARDS=2
    SPARK_MLT_ENGINE_REPORT=".differential/engines-pyspark-$version.txt")
mkdir -p .differential && rm -f ".differential/pyspark-$version.txt".* ".differential/engines-pyspark-$version.txt".*
# delta-spark on DELTA_SPARK_LINES (this line when unset; make test-compat names one line of
# each Delta release: the lines of one release run the same Delta code), with the jars `make
# jars` copied; its run also has delta-spark read the differential harness's cases (its
# skipping is that release's code on each line of it, and its five jobs a case cost more than
# the writer and the other readers together)
delta_spark_here=0
[[ -f .jars/spark-$line/delta/.complete && " ${DELTA_SPARK_LINES:-$version} " == *" $version "* ]] && delta_spark_here=1
# One test run per session kind: the jar-free one (the compat tests, the engine harness and,
# on a line without delta-spark, the differential harness), then the one with Delta's jars
# (the delta-spark tests and the differential harness). Each run's processes start Spark once
# for all of its suites.
jar_free=(tests/column/test_engine_differential.py)
((delta_spark_here)) || jar_free+=(tests/delta/test_differential.py)
[[ $depth == smoke ]] || jar_free=()  # tests/ has them
ignored=()
((delta_spark_here)) && ignored=(--ignore=tests/delta/test_differential.py)

# the summary lines of the harnesses' reports (their prefixes: differential, engines-)
harness_lines() {
    local prefix
    for prefix in "$@"; do
        grep -h "^differential:\|^by cause:\|^skipped:\|^seconds per case:\|^engines:" \
            ".differential/${prefix}pyspark-$version.txt".* 2>/dev/null || true
    done
}

echo "== compat tests ($depth) and the jar-free harnesses"
started=$SECONDS
status=0
# the generated statistics tables (tests/delta/test_stats.py): SPARK_MLT_STATS_EXAMPLES
env "${differential[@]}" "${engines[@]}" PYSPARK_PYTHON="$venv/bin/python" PYARROW_IGNORE_TIMEZONE=1 \
    SPARK_MLT_STATS_EXAMPLES=${SPARK_MLT_STATS_EXAMPLES:-4} \
    "$venv/bin/python" -m pytest -m "compat and not exhaustive" -p no:cacheprovider -q "${xdist[@]}" "$@" \
    "${ignored[@]}" "${tests[@]}" "${jar_free[@]}" || status=$?
if ((delta_spark_here)); then harness_lines engines-; else harness_lines "" engines-; fi
echo "== compat tests on Spark $line: $((SECONDS - started)) s"
((status == 0)) || exit "$status"

delta_spark_depth=${DELTA_SPARK_DEPTH:-full}
if [[ $delta_spark_depth == smoke ]]; then
    # delta-spark writing and reading our tables of each feature, and the sync's cases
    # (tests/batch/mirror/test_sync.py: a whole sync through delta-spark's MERGE)
    picked="both_backends or reads_what_the_jar_free_writer_appended or test_sync.py or test_differential"
    delta_spark=(-k "$picked" tests/storage/test_delta_spark.py tests/batch/mirror/test_sync.py)
    # CATALOG=full: also what a catalog's metastore holds of a table (functions and view), read
    # back by another line's plain PySpark and through a Spark Connect server (tests/batch/read/test_publish.py)
    [[ ${CATALOG:-smoke} == full ]] && delta_spark=(-k "$picked or publish" tests/storage/test_delta_spark.py tests/batch/mirror/test_sync.py tests/batch/read/test_publish.py)
else
    # every delta_spark test but the sync's whole-sync cases (tests/batch/mirror/test_sync.py), which the
    # smoke run has: here the sync through MERGE is test_sync_delta_spark.py's history
    delta_spark=(tests/storage/test_delta_spark.py tests/delta/test_stats.py tests/delta/test_stats_bounds.py tests/batch/mirror/test_sync_delta_spark.py
        tests/batch/read/test_publish.py tests/batch/mirror/test_sync_overlap.py tests/batch/mirror/test_sync_recovery.py)
fi
if ((delta_spark_here)); then
    echo "== delta-spark on Spark $line ($delta_spark_depth) and the differential harness read by it"
    started=$SECONDS
    status=0
    # the sync's interleavings and stops (step_points tests): one of the 12 pairs, at one step
    # point each, drawn afresh each run (a delta-spark run of a point costs a minute or more)
    env "${differential[@]}" SPARK_MLT_TEST_DELTA_SPARK=1 PYSPARK_PYTHON="$venv/bin/python" PYARROW_IGNORE_TIMEZONE=1 \
        SPARK_MLT_STATS_EXAMPLES=${SPARK_MLT_STATS_EXAMPLES_DELTA_SPARK:-2} SPARK_MLT_STEP_TESTS=${SPARK_MLT_STEP_TESTS:-1} \
        SPARK_MLT_STEP_POINTS=${SPARK_MLT_STEP_POINTS:-1} SPARK_MLT_STEP_SEED=${SPARK_MLT_STEP_SEED:-$RANDOM} \
        "$venv/bin/python" -m pytest -m "delta_spark or differential" -p no:cacheprovider -q "${xdist[@]}" "$@" \
        "${delta_spark[@]}" tests/delta/test_differential.py || status=$?
    harness_lines ""
    echo "== delta-spark on Spark $line: $((SECONDS - started)) s"
    ((status == 0)) || exit "$status"
elif [[ -f .jars/spark-$line/delta/.complete ]]; then
    echo "== delta-spark on Spark $line: Delta $delta's delta-spark tests run on one line of its release (DELTA_SPARK_LINES=${DELTA_SPARK_LINES})"
else
    echo "== no delta-spark for Spark $line: Delta publishes none for it (spark_mlt.jars.LINE_GROUPS)"
fi
