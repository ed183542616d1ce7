# spark-mlt developer commands. `make` alone lists them.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
PYTEST_ARGS ?=

help: ## List the commands
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

check-java: ## Check that Java 17+ is available (Spark needs it); says how to install it if not
	@sh jobs/check_java.sh

DELTA ?=
demo: check-java $(STAMP) ## Run the main job: tokenise MovieLens (ML_DIR, data/ml-*, ../shared/movielens/ml-*, else synthetic) into Delta, decode-check it (DELTA=spark: through delta-spark)
	$(if $(filter spark,$(DELTA)),$(MAKE) --no-print-directory jars JARS_LINE=$$($(BIN)/python -c 'from spark_mlt.batch.jars import spark_line; print(spark_line())') JARS_GROUPS=delta &&) \
	SPARK_MLT_DELTA=$(DELTA) $(BIN)/python jobs/demo.py

venv: $(STAMP) ## Create or refresh the virtualenv (.venv) with the dev extra

test: check-java $(STAMP) ## Run the whole test suite, slow tests included
	$(BIN)/python -m pytest $(PYTEST_ARGS)

COMPAT_LINES ?= 3.5.0 4.0.0 4.1.0 4.2.1
test-compat: check-java ## Run the compatibility tests on older PySpark lines (COMPAT_LINES=...), one venv each
	@for line in $(COMPAT_LINES); do PYTHON=$(PYTHON) tests/compat/run-line.sh $$line $(PYTEST_ARGS) || exit 1; done

test-fast: $(STAMP) ## Run the test suite without the slow tests
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP) ## Lint (ruff), check formatting and type-check (mypy --strict)
	$(BIN)/ruff check spark_mlt jobs benchmarks tests
	$(BIN)/ruff format --check spark_mlt jobs benchmarks tests
	$(BIN)/mypy

format: $(STAMP) ## Format and auto-fix the code
	$(BIN)/ruff format spark_mlt jobs benchmarks tests
	$(BIN)/ruff check --fix spark_mlt jobs benchmarks tests

bench-codec: $(STAMP) ## Benchmark the NumPy codec against light-mlt (10M ids, one core)
	OPENBLAS_NUM_THREADS=1 taskset -c 0 $(BIN)/python benchmarks/benchmark_codec.py

BENCH_LINE ?=
bench-functions: $(STAMP) ## Benchmark mlt_encode/mlt_decode in Spark (20M ids, local[2]); BENCH_LINE=3.5.0 runs it on a compat venv
	@if [[ -n "$(BENCH_LINE)" ]]; then PYTHON=$(PYTHON) tests/compat/run-line.sh $(BENCH_LINE) --collect-only -q >/dev/null; fi
	PYSPARK_PYTHON=$(if $(BENCH_LINE),.compat/pyspark-$(BENCH_LINE)/bin/python,$(BIN)/python) \
	    $(if $(BENCH_LINE),.compat/pyspark-$(BENCH_LINE)/bin/python,$(BIN)/python) -m benchmarks.benchmark_functions $(BENCH_ARGS)

bench-delta: $(STAMP) ## Benchmark the tokenise-into-Delta job against plain Parquet (20M ratings)
	$(BIN)/python benchmarks/benchmark_delta.py

bench-scale: $(STAMP) ## Tokenise + decode-verify 5M and 50M rows; the driver's peak memory must stay flat
	$(BIN)/python benchmarks/benchmark_scale.py

bench-paper: $(STAMP) ## Seconds per epoch of each Table 1 method on 1M and 4M ratings (ML-20M ids); 20M extrapolated
	$(BIN)/python benchmarks/benchmark_paper.py $(BENCH_ARGS)

paper: check-java $(STAMP) ## The paper's Table 1 into output/paper: MovieLens (ML_DIR, data/ml-*, ../shared/movielens/ml-*) else synthetic; PAPER_EPOCHS=fixed for the paper's epochs
	$(BIN)/python jobs/paper_demo.py

bench: bench-codec bench-functions bench-delta bench-scale bench-paper ## Run every benchmark

dist: $(STAMP) ## Build the wheel and the spark-submit --py-files zip into dist/ (prints their paths)
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
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache spark-warehouse metastore_db derby.log

.PHONY: help check-java jars demo paper venv test test-compat test-fast lint format bench bench-codec bench-functions bench-delta bench-scale bench-paper dist clean
