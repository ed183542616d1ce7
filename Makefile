# spark-mlt developer commands. `make` alone lists them.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
PYTEST_ARGS ?=
# test processes (pytest-xdist), each given whole modules so that a module's fixtures are built
# once; each starts its own Spark session. 1: one process, as plain pytest runs
PYTEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile)

help: ## List the commands
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

# `make demo` installs only what the demo runs: spark-mlt with its `spark` extra (PySpark)
DEMO_STAMP := $(VENV)/.installed-demo
$(DEMO_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[spark]"
	@touch $(DEMO_STAMP)

check-java: ## Check that Java 17+ is available (Spark needs it, a JRE is enough); says how to install it if not
	@sh jobs/check_java.sh

check-jdk: ## Check that a JDK 17+ (javac) and Maven are available (make jvm builds spark-mlt's jars with them)
	@sh jobs/check_java.sh --jdk

# the python of a PySpark line's compatibility venv (tests/compat/venv.sh builds it once), or
# .venv's when no line is given
line_python = $(if $(1),"$$(PYTHON=$(PYTHON) tests/compat/venv.sh $(1))/bin/python",$(BIN)/python)
# the newest PySpark line that Delta publishes jars for (none for 4.3 yet)
DELTA_LINE ?= 4.2.1
# $(call line_jars,PY,GROUPS): make jars of GROUPS for the Spark line of the python PY
line_jars = $(MAKE) --no-print-directory jars JARS_GROUPS="$(2)" \
    JARS_LINE=$$($(1) -c 'from spark_mlt.jars import jar_line; print(jar_line())')

DELTA ?=
demo: check-java $(DEMO_STAMP) jvm ## Run the main job: tokenize MovieLens (SPARK_MLT_ML_DIR, else data/ml-*, else synthetic) into Delta, decode-check it (DELTA=spark: through delta-spark)
	@py=$(BIN)/python; \
	if [[ "$(DELTA)" == spark ]]; then \
	    if ! $$py -c 'from spark_mlt.jars import LINE_GROUPS, jar_line; raise SystemExit("delta" not in LINE_GROUPS[jar_line()])'; then \
	        echo "== Delta has no build for the PySpark in $(VENV): the demo runs on PySpark $(DELTA_LINE) (.compat/)"; \
	        py=$(call line_python,$(DELTA_LINE)) || exit 1; \
	    fi; \
	    $(call line_jars,$$py,delta) || exit 1; \
	fi; \
	echo "SPARK_MLT_DELTA=$(DELTA) $$py jobs/demo.py"; \
	SPARK_MLT_DELTA=$(DELTA) PYSPARK_PYTHON=$$py $$py jobs/demo.py

venv: $(STAMP) ## Create or refresh the virtualenv (.venv) with the dev extra

# The JVM engine's jars (jvm/pom.xml), one per Spark binary line, into spark_mlt/jars/ (git-ignored):
# the wheel carries them and sessions spark-mlt starts load the one of their line. Maven fetches
# Spark's API jars (provided) and the Scala compiler once into its repository.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
JVM_DIR := spark_mlt/jars
JVM_JARS := $(JVM_DIR)/spark-mlt-jvm_3.5_2.12-$(VERSION).jar $(JVM_DIR)/spark-mlt-jvm_4_2.13-$(VERSION).jar
JVM_SOURCES := jvm/pom.xml $(shell find jvm/src -type f 2>/dev/null)
$(JVM_DIR)/spark-mlt-jvm_3.5_2.12-$(VERSION).jar: $(JVM_SOURCES)
	@sh jobs/check_java.sh --jdk
	$(MVN) -f jvm/pom.xml -P spark-3.5 package -Drevision=$(VERSION) -Djar.dir=$(abspath $(JVM_DIR))
$(JVM_DIR)/spark-mlt-jvm_4_2.13-$(VERSION).jar: $(JVM_SOURCES)
	@sh jobs/check_java.sh --jdk
	$(MVN) -f jvm/pom.xml -P spark-4 package -Drevision=$(VERSION) -Djar.dir=$(abspath $(JVM_DIR))

jvm: $(JVM_JARS) ## Build spark-mlt's jars (the JVM engine: Spark 3.5 and 4.x) into spark_mlt/jars/ with Maven, after the kernels' unit tests
	@find $(JVM_DIR) -name 'spark-mlt-jvm_*.jar' ! -name '*-$(VERSION).jar' -delete

# The table zoo (tests/support/zoo.py): Delta tables as delta-spark writes them, one per feature,
# with what delta-spark reads from each version. It is committed test data, one zoo per Delta
# release our lines run (tests/data/zoo: the newest, 4.x; tests/data/zoo-delta-<release>: the
# older ones), which the jar-free tests read: `make test` needs no Delta jars and no second
# PySpark. `make zoo` rebuilds them, each with the first line of its release (its venv, .compat/);
# each manifest records a digest of the builder (tests/support/zoo.py, stats_cases.py), so that
# a change to the builder fails make test until the zoos are rebuilt, and a compat line reads its
# release's committed zoo (tests/compat/run-line.sh builds one into .zoo/ only when none is current).
ZOO := tests/data/zoo
ZOO_DIR := .zoo
# the first line of each older Delta release: its zoo goes to tests/data/zoo-delta-<release>
ZOO_OLDER_LINES ?= 3.5.0
zoo: check-java ## Rebuild the committed table zoos (tests/data/zoo*) with PySpark $(DELTA_LINE) and $(ZOO_OLDER_LINES), each with its Delta
	@py=$(call line_python,$(DELTA_LINE)); $(call line_jars,$$py,delta) && \
	    PYSPARK_PYTHON=$$py $$py -m tests.support.zoo $(ZOO)
	@for line in $(ZOO_OLDER_LINES); do \
	    py=$(call line_python,$$line) && $(call line_jars,$$py,delta) && \
	    PYSPARK_PYTHON=$$py $$py -m tests.support.zoo $(ZOO_DIR)/committing-$$line && \
	    release=$$($$py -c "import json; print(json.load(open('$(ZOO_DIR)/committing-$$line/manifest.json'))['delta'])") && \
	    rm -rf $(ZOO)-delta-$$release && mv $(ZOO_DIR)/committing-$$line $(ZOO)-delta-$$release || exit 1; \
	done

# `make test` runs every behaviour once but the long-running ones (`slow`: processes killed and
# restarted, two processes racing, spark-submit on a cluster, notebooks, model training) and the
# exhaustive cases (more codecs of a path the kept cases cover, tests/support/marks.py); CI runs
# those next (.ci/run: make test-slow), on the same line
#
# SUITE=all (CI, .ci/run) runs every test of the newest line in that one run instead: make test's,
# the slow and exhaustive ones (STEP_TESTS of the sync's interleavings, at STEP_POINTS each), the
# differential statistics harness at DIFF_EXAMPLES cases and the engine-differential one at
# ENGINE_EXAMPLES: one Spark session per test process for all of them, each module's fixtures
# built once, and no test process idle while another finishes a step's last module
SUITE ?= default
suite_env = $(if $(filter all,$(SUITE)),SPARK_MLT_STEP_TESTS=$(STEP_TESTS) SPARK_MLT_STEP_POINTS=$(STEP_POINTS) \
    SPARK_MLT_STEP_SEED=$${SPARK_MLT_STEP_SEED:-$$RANDOM} SPARK_MLT_DIFF_EXAMPLES=$(DIFF_EXAMPLES) SPARK_MLT_DIFF_ROTATE=1 \
    SPARK_MLT_DIFF_PREDICATES=16 SPARK_MLT_DIFF_REPORT=.differential/newest.txt \
    SPARK_MLT_ENGINE_EXAMPLES=$(ENGINE_EXAMPLES) SPARK_MLT_ENGINE_REPORT=.differential/engines.txt PYSPARK_PYTHON=$(abspath $(BIN)/python))
suite_marks = $(if $(filter all,$(SUITE)),,-m "not slow and not exhaustive")
test: check-java $(STAMP) jvm ## Run the test suite but the slow and exhaustive tests, which CI runs (fetches the line's s3a jars first; SUITE=all: every test of the line, as CI)
	@$(call line_jars,$(BIN)/python,s3)
	@$(if $(filter all,$(SUITE)),mkdir -p .differential && rm -f .differential/newest.txt* .differential/engines.txt*)
	$(suite_env) $(BIN)/python -m pytest $(suite_marks) $(XDIST) $(PYTEST_ARGS); \
	    status=$$?; $(if $(filter all,$(SUITE)),grep -h "^differential:\|^by cause:\|^skipped:\|^seconds per case:\|^engines:" .differential/newest.txt* .differential/engines.txt* 2>/dev/null;) exit $$status

# the sync's interleavings and stops (the step_points tests of tests/batch/mirror/test_sync_overlap.py and
# tests/batch/mirror/test_sync_recovery.py): STEP_TESTS of their 15 pairs of runs, at STEP_POINTS of each
# pair's step points, drawn afresh each run (all: every one); the
# header and a failure name the SPARK_MLT_STEP_SEED that draws the same again
STEP_TESTS ?= 4
STEP_POINTS ?= 2
test-slow: check-java $(STAMP) jvm ## Run the slow and exhaustive tests make test leaves out (CI runs them after make test; STEP_TESTS=all STEP_POINTS=all every interleaving)
	@$(call line_jars,$(BIN)/python,s3)
	SPARK_MLT_STEP_TESTS=$(STEP_TESTS) SPARK_MLT_STEP_POINTS=$(STEP_POINTS) SPARK_MLT_STEP_SEED=$${SPARK_MLT_STEP_SEED:-$$RANDOM} \
	    $(BIN)/python -m pytest -m "slow or exhaustive" $(XDIST) $(PYTEST_ARGS)

# The differential statistics harness (tests/delta/test_differential.py) on the newest line (CI: 100 cases)
# (make test runs 4 cases; each older line runs it in tests/compat/run-line.sh): every case written
# jar-free, its statistics checked against its files, and read by every reader with and without
# their statistics-based skipping; two shards side by side
DIFF_EXAMPLES ?= 200
test-differential: check-java $(STAMP) ## Run the differential statistics harness on DIFF_EXAMPLES generated tables (200; SPARK_MLT_DIFF_SEED=... the first seed) and print what it compared
	@mkdir -p .differential && rm -f .differential/newest.txt*
	SPARK_MLT_DIFF_EXAMPLES=$(DIFF_EXAMPLES) SPARK_MLT_DIFF_SHARDS=2 SPARK_MLT_DIFF_ROTATE=1 SPARK_MLT_DIFF_PREDICATES=16 \
	    SPARK_MLT_DIFF_REPORT=.differential/newest.txt PYSPARK_PYTHON=$(BIN)/python \
	    $(BIN)/python -m pytest -n 2 --dist load $(PYTEST_ARGS) tests/delta/test_differential.py; \
	    status=$$?; grep -h "^differential:\|^by cause:\|^skipped:\|^seconds per case:" .differential/newest.txt.* 2>/dev/null; exit $$status

# The engine-differential harness (tests/column/test_engine_differential.py) on the newest (CI: 200 cases)
# line (make test runs its handful; each older line runs it in tests/compat/run-line.sh): every
# engine's tokens, ids, NULLs and errors for generated values against the NumPy codec's, and the
# round trips; two shards side by side
ENGINE_EXAMPLES ?= 500
test-engines: check-java $(STAMP) jvm ## Run the engine-differential harness on ENGINE_EXAMPLES generated cases (500; SPARK_MLT_ENGINE_SEED=... the first seed) and print what it compared
	@mkdir -p .differential && rm -f .differential/engines.txt*
	SPARK_MLT_ENGINE_EXAMPLES=$(ENGINE_EXAMPLES) SPARK_MLT_ENGINE_SHARDS=2 SPARK_MLT_ENGINE_REPORT=.differential/engines.txt \
	    PYSPARK_PYTHON=$(BIN)/python $(BIN)/python -m pytest -n 2 --dist load $(PYTEST_ARGS) tests/column/test_engine_differential.py; \
	    status=$$?; grep -h "^engines:\|^skipped:\|^seconds per case:" .differential/engines.txt.* 2>/dev/null; exit $$status

# CI's time goes to the lines that differ most from the newest (make test): 3.5, with its own
# jar, stack and Delta 3.2, gets every compat and delta_spark test; every other line a smoke run
# (tests/compat/run-line.sh says what it holds). Delta's code runs once per release: delta-spark's
# tests and its reading of the differential harness's tables on 3.5.0 (Delta 3.2) and 4.0.0
# (Delta 4.4, which 4.1 and 4.2 run too), each line's jar-free tests on its release's committed
# zoo. Figures per step: docs/contributing.md#ci.
COMPAT_LINES ?= 3.5.0 4.0.0 4.1.0 4.2.1
FULL_LINES ?= 3.5.0
DELTA_SPARK_FULL_LINES ?= 3.5.0
DELTA_SPARK_LINES ?= 3.5.0 4.0.0
# the lines that also publish catalog functions and views and read them from another line (3.5.0 has
# no SQL functions: a line of Spark 4 publishes them)
CATALOG_LINES ?= 4.0.0
depth = $$(case " $(1) " in *" $$line "*) echo full;; *) echo smoke;; esac)
test-compat: check-java jvm ## Run the compatibility tests on older PySpark lines (COMPAT_LINES=...; FULL_LINES=..., DELTA_SPARK_FULL_LINES=... get every test, the others a smoke run; DELTA_SPARK_LINES=... run delta-spark), one venv each, with their jars
	@$(MAKE) --no-print-directory jars JARS_LINE="$(foreach line,$(COMPAT_LINES),$(basename $(line)))"
	@for line in $(COMPAT_LINES); do \
	    started=$$SECONDS; \
	    COMPAT_DEPTH=$(call depth,$(FULL_LINES)) DELTA_SPARK_DEPTH=$(call depth,$(DELTA_SPARK_FULL_LINES)) CATALOG=$(call depth,$(CATALOG_LINES)) \
	        DELTA_SPARK_LINES="$(DELTA_SPARK_LINES)" \
	        PYTHON=$(PYTHON) PYTEST_WORKERS=$(PYTEST_WORKERS) tests/compat/run-line.sh $$line $(PYTEST_ARGS) || exit 1; \
	    echo "== pyspark $$line: $$((SECONDS - started)) s"; \
	done

lint: $(STAMP) ## Lint (ruff), check formatting and type-check (mypy --strict)
	$(BIN)/ruff check spark_mlt jobs benchmarks tests docs/hooks.py
	$(BIN)/ruff format --check spark_mlt jobs benchmarks tests docs/hooks.py
	$(BIN)/mypy

format: $(STAMP) ## Format and auto-fix the code
	$(BIN)/ruff format spark_mlt jobs benchmarks tests
	$(BIN)/ruff check --fix spark_mlt jobs benchmarks tests

docs: $(STAMP) ## Build the documentation site into site/ (mkdocs build --strict: a broken link or reference fails)
	$(BIN)/mkdocs build --strict --site-dir site

bench-codec: $(STAMP) ## Benchmark the NumPy codec against light-mlt (10M ids, one core)
	OPENBLAS_NUM_THREADS=1 taskset -c 0 $(BIN)/python benchmarks/benchmark_codec.py

BENCH_LINE ?=
bench-functions: $(STAMP) jvm ## Benchmark mlt_encode/mlt_decode in Spark: a matrix of codecs, layouts, query shapes and engines (2M ids, local[2]) and 3-row latency; BENCH_LINE=3.5.0 runs it on a compat venv
	py=$(call line_python,$(BENCH_LINE)); PYSPARK_PYTHON=$$py $$py -m benchmarks.benchmark_functions $(BENCH_ARGS)

bench-delta: $(STAMP) ## Benchmark the tokenize-into-Delta job on delta-rs and delta-spark, local disk and local S3, against plain Parquet (20M ratings; PySpark 4.2.1 unless BENCH_LINE=...)
	py=$(call line_python,$(or $(BENCH_LINE),$(DELTA_LINE))); $(call line_jars,$$py,delta s3) && \
	    PYSPARK_PYTHON=$$py $$py -m benchmarks.benchmark_delta $(BENCH_ARGS)

bench-read: $(STAMP) ## Benchmark jar-free Delta reads (partitions, deletion vectors) against delta-spark (5M rows; PySpark 4.2.1 unless BENCH_LINE=...)
	py=$(call line_python,$(or $(BENCH_LINE),$(DELTA_LINE))); $(call line_jars,$$py,delta) && \
	    PYSPARK_PYTHON=$$py $$py -m benchmarks.benchmark_read $(BENCH_ARGS)

bench-publish: $(STAMP) jvm ## Benchmark a decode through a published catalog function against the native and JVM engines' (20M ids, three codecs)
	$(BIN)/python -m benchmarks.benchmark_publish $(BENCH_ARGS)

bench-scale: $(STAMP) ## Tokenize + decode-verify 5M and 50M rows; the driver's peak memory must stay flat
	$(BIN)/python benchmarks/benchmark_scale.py $(BENCH_ARGS)

bench-stream: $(STAMP) ## Benchmark the streaming tokenize job (available-now and continuous) against the batch job on the same files
	$(BIN)/python benchmarks/benchmark_stream.py $(BENCH_ARGS)

bench-sync: $(STAMP) ## Benchmark a mirror's jar-free sync of 0.1%, 1% and 10% changes (clustered and uniform keys; Spark jobs, rows read per changed row, a one-row window) against a full re-tokenize (10M rows; BENCH_ARGS=--quick: 1M)
	$(BIN)/python benchmarks/benchmark_sync.py $(BENCH_ARGS)

bench-paper: $(STAMP) ## Seconds per epoch of each Table 1 method on 1M and 4M ratings (ML-20M ids); 20M extrapolated
	$(BIN)/python benchmarks/benchmark_paper.py $(BENCH_ARGS)

paper: check-java $(STAMP) ## The paper's Table 1 into output/paper: MovieLens (SPARK_MLT_ML_DIR, else data/ml-*) else synthetic; SPARK_MLT_PAPER_EPOCHS=fixed for the paper's epochs
	$(BIN)/python jobs/paper_demo.py

bench: bench-codec bench-functions bench-delta bench-read bench-publish bench-scale bench-stream bench-sync bench-paper ## Run every benchmark

# The wheel needs no extra: pip builds it in its own isolated environment (setuptools only), in
# whichever virtualenv is at $(VENV) (created bare if none is)
dist: jvm ## Build the wheel and the spark-submit --py-files zip into dist/ (prints their paths); installs no extra
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -f dist/spark_mlt-*.whl dist/spark_mlt-*.zip
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	@ls -1 dist/spark_mlt-*.whl
	@$(BIN)/python jobs/build_pyfiles.py --out-dir dist

# Jars for local sessions, one folder per Spark line and group (see jars/pom.xml):
# .jars/spark-<line>/{delta,connect,s3}/. Maven's downloads stay in its own repository
# (~/.m2, shared by every clone and worktree on the machine; MAVEN_REPO=... moves it), so the
# folders here are plain copies that a fresh clone rebuilds from it without the network.
JARS_DIR := .jars
JARS_LINES := 3.5 4.0 4.1 4.2 4.3
JARS_LINE ?= $(JARS_LINES)
JARS_GROUPS ?= delta connect s3
# what exists per line: Connect's server jar is built into pyspark 4.x; no Delta for 4.3 yet
jar_groups_3.5 := delta connect s3
jar_groups_4.0 := delta s3
jar_groups_4.1 := delta s3
jar_groups_4.2 := delta s3
jar_groups_4.3 := s3
# -B and -q keep CI logs short; jansi.noreset drops the colour resets Debian's Maven 3.8 prints
MVN := MAVEN_OPTS="-Djansi.noreset=true $$MAVEN_OPTS" mvn -q -B $(if $(MAVEN_REPO),-Dmaven.repo.local=$(abspath $(MAVEN_REPO)))
JAR_STAMPS := $(foreach line,$(JARS_LINE),$(foreach group,$(filter $(JARS_GROUPS),$(jar_groups_$(line))),$(JARS_DIR)/spark-$(line)/$(group)/.complete))

jars: $(JAR_STAMPS) ## Copy each Spark line's Delta, Connect and s3a jars into .jars/ (JARS_LINE=3.5, JARS_GROUPS=delta)
	@$(foreach line,$(filter-out $(JARS_LINES),$(JARS_LINE)),echo "no Spark line $(line); lines: $(JARS_LINES)" >&2; exit 1;)
	@$(foreach line,$(JARS_LINE),echo "$(JARS_DIR)/spark-$(line): $(or $(filter $(JARS_GROUPS),$(jar_groups_$(line))),nothing, this line has no $(JARS_GROUPS) jars)";)

# Offline first: a no-op pom change or a fresh clone on a machine that already has the
# artifacts needs no network; online only when something is missing.
$(JARS_DIR)/%/.complete: jars/pom.xml
	@line=$(patsubst spark-%,%,$(*D)); out=$(JARS_DIR)/$*; rm -rf "$$out.tmp"; \
	args="-f jars/pom.xml -P spark-$$line,$(*F) dependency:copy-dependencies -DoutputDirectory=$(abspath $(JARS_DIR))/$*.tmp"; \
	echo "== jars: spark-$$line $(*F)"; \
	{ $(MVN) -o $$args >/dev/null 2>&1 || $(MVN) $$args || { rm -rf "$$out.tmp"; exit 1; }; } && \
	rm -rf "$$out" && mv "$$out.tmp" "$$out" && touch "$$out/.complete"

clean: ## Remove build artefacts and caches (keeps .venv)
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache spark-warehouse metastore_db derby.log site $(ZOO_DIR) jvm/target $(JVM_DIR)

.PHONY: help check-java check-jdk jars jvm zoo demo paper venv test test-slow test-differential test-engines test-compat lint format bench bench-codec bench-functions bench-delta bench-read bench-publish bench-scale bench-stream bench-sync bench-paper dist docs clean
