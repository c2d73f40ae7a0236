# Every target sets itself up: the venv is created and the pinned
# dependencies installed when missing or when the pins change.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv --no-config
PYTEST_ARGS ?=
# make test runs the suite on this many pytest-xdist workers, grouped as
# tests/conftest.py says (worker_group); 0 runs it in one process.
TEST_WORKERS ?= 3
# The S3 servers make test runs tests/core's cases on (tests/core/conftest.py):
# the cases on moto's server and on LocalStack (a tenth of tests/core's time, and
# a server of 480 MB that takes seconds to start) run under make test-extended,
# which CI runs after make test.
S3_BACKENDS ?= seaweedfs
# Options for the demos, e.g. DEMO_ARGS="--date 2024-02-01", "--table-format delta"
# (demo, demo-dagster: the day also published as a Delta version, read back) or,
# for demo-core, "--keep".
DEMO_ARGS ?=
# The lint, as configured in pyproject.toml: `make lint` runs all three, `make
# test` the two ruff checks first and mypy beside the tests.
RUFF_CHECK := $(VENV)/bin/ruff check .
RUFF_FORMAT_CHECK := $(VENV)/bin/ruff format --check .
MYPY := $(VENV)/bin/mypy

# LocalStack's S3, the behaviour suite's third S3 implementation, needs Python
# 3.13 (requirements-localstack.txt says why): a venv of its own, built where
# an interpreter is found (python3.13 on PATH, which may be a pyenv shim that
# fails, so each is tried; or pyenv's). Without one its tests are skipped,
# saying so; CI (ZERO_RENAME_TESTS_REQUIRE_ALL) fails them instead.
LOCALSTACK_VENV ?= .venv-localstack
LOCALSTACK_STAMP := $(LOCALSTACK_VENV)/.installed
PYTHON313 ?= $(firstword $(foreach p,python3.13 $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13),\
	$(shell $(p) --version 2>/dev/null | grep -q '^Python 3\.13' && echo $(p))))

.PHONY: demo demo-core demo-dagster lint test test-unit soak-tables bench bench-spark bench-peers \
	test-peers test-extended peers-venv clean venv localstack-venv

venv: $(STAMP) localstack-venv

# uv installs the same pinned set as pip in half the time (68 s against 131 s
# on two cores). Python writes a module's .pyc when it first imports it: the
# suite imports 6,100 of the 16,800 modules installed, and compiling all of them
# at install took 57 s against 25 s without, for no shorter a suite (303 s
# both). Where Python is told not to write its bytecode (PYTHONDONTWRITEBYTECODE,
# common in containers), every process would compile what it imports, so there
# they are compiled at install.
COMPILE_BYTECODE := $(if $(PYTHONDONTWRITEBYTECODE),--compile-bytecode,)
# The venv is made without pip and uv installed into it by the host's pip (4 s
# on two cores, against 11 s for ensurepip's pip first); a host without pip
# (or one older than 22.3, without --python) gets the venv's own, as before.
# PySpark is published as source only, so uv builds its wheel on every fresh
# install, and a wheel is a zip: deflating its 400 MB of jars, compressed
# already, took 33 s of a fresh clone's setup against 12 s stored as they are.
PYSPARK_BUILD := --config-settings-package "pyspark:--build-option=--compression=stored"
$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(PY) install --quiet uv==$(UV_VERSION) 2>/dev/null || \
		{ $(PY) -m ensurepip --upgrade >/dev/null && $(PY) -m pip install --quiet uv==$(UV_VERSION); }
	$(UV) pip install --python $(PY) --quiet $(COMPILE_BYTECODE) $(PYSPARK_BUILD) \
		-r requirements.txt -c constraints.txt
	$(UV) pip install --python $(PY) --quiet --no-deps -e .
	# The build leaves plugin/zero_rename.egg-info beside the sources; with
	# plugin/ on sys.path Airflow would see the distribution twice.
	rm -rf plugin/*.egg-info $(COLLECTED)
	touch $(STAMP)

localstack-venv: $(STAMP)
	@python313="$(PYTHON313)"; \
	if [ -z "$$python313" ]; then \
	  echo "no Python 3.13 found (python3.13 on PATH or under ~/.pyenv/versions):" \
	       "LocalStack's tests will be skipped" >&2; \
	else \
	  $(MAKE) --no-print-directory --silent $(LOCALSTACK_STAMP) PYTHON313="$$python313"; \
	fi

# Through the same pinned uv: about 15 s with an empty cache, 4 s with a warm
# one. No bytecode is compiled at install (28 s, mostly of modules never
# imported): LocalStack's first start compiles what it imports, about 3 s, once.
$(LOCALSTACK_STAMP): requirements-localstack.txt constraints-localstack.txt
	@echo "installing LocalStack's S3 into $(LOCALSTACK_VENV) ($(PYTHON313))"
	test -x $(LOCALSTACK_VENV)/bin/python || $(UV) venv --quiet --python $(PYTHON313) $(LOCALSTACK_VENV)
	$(UV) pip install --python $(LOCALSTACK_VENV)/bin/python --quiet \
		-r requirements-localstack.txt -c constraints-localstack.txt
	touch $(LOCALSTACK_STAMP)

# The peers' environment (requirements-peers.txt says why it is Spark 4.1): Spark's
# own committers and table writers beside zero-rename, on one Spark version. Their
# jars come from Maven Central at run time, into ~/.cache/zero-rename/jars
# ($$ZERO_RENAME_JAR_CACHE), about 1.6 GB the first time (bench/peers/jars.py).
PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed

peers-venv: $(PEERS_STAMP)

$(PEERS_STAMP): requirements-peers.txt constraints-peers.txt pyproject.toml $(STAMP)
	test -x $(PEERS_VENV)/bin/python || $(UV) venv --quiet --python $(PYTHON) $(PEERS_VENV)
	$(UV) pip install --python $(PEERS_VENV)/bin/python --quiet --compile-bytecode $(PYSPARK_BUILD) \
		-r requirements-peers.txt -c constraints-peers.txt
	$(UV) pip install --python $(PEERS_VENV)/bin/python --quiet --no-deps -e .
	rm -rf plugin/*.egg-info
	touch $(PEERS_STAMP)

# The demos live in demo/, beside dags/ and dagster_defs/; they are not installed.
# The daily DAG end to end: Airflow (dag.test), local Spark, the embedded S3.
demo: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m demo.airflow_dag $(DEMO_ARGS)

# The protocol alone, through the library: a few seconds.
demo-core: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m demo.protocol $(DEMO_ARGS)

# One day of the Dagster asset, materialized in process with local Spark.
demo-dagster: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m demo.dagster_asset $(DEMO_ARGS)

# ruff (lint rules, then the format check) and mypy (strict on the core), as
# configured in pyproject.toml. All three run, so one report shows every finding;
# `ruff format` applies the format, `ruff check --fix` the safe lint fixes.
lint: $(STAMP)
	@status=0; \
	$(RUFF_CHECK) || status=1; \
	$(RUFF_FORMAT_CHECK) || status=1; \
	$(MYPY) || status=1; \
	exit $$status

# Java and Chromium are installed when missing and possible (see the script);
# tests needing what could not be installed are skipped, saying why. The lint
# of `make lint`, with mypy (about 30 s of one core on a fresh clone) beside the
# tests, which seldom keep every core busy: its report follows theirs, and
# either failing fails the target.
# Every pytest-xdist worker imports what the whole suite's modules import (3,800
# modules): on a fresh clone, with no bytecode yet, three workers compiled the
# same modules side by side, 66 s of CPU against 23 s for one collection first
# (beside mypy) and 24 s for the workers after it; the suite started with mypy
# done 19 s sooner. Once after each install, and only where bytecode is written.
COLLECTED := $(VENV)/.collected
PRECOLLECT := $(if $(PYTHONDONTWRITEBYTECODE),,$(if $(filter 0,$(TEST_WORKERS)),,\
	test -e $(COLLECTED) || { $(PY) -m pytest --collect-only -q -p no:cacheprovider \
	--s3-backends $(S3_BACKENDS) >/dev/null 2>&1; touch $(COLLECTED); };))
# The system check runs beside mypy and that collection too: on a machine without
# Java and Chromium its apt-get took some 20 s before anything else started.
test: $(STAMP)
	$(RUFF_CHECK)
	$(RUFF_FORMAT_CHECK)
	@report=$$(mktemp); deps=$$(mktemp); \
	deploy/system-deps.sh >"$$deps" 2>&1 & system=$$!; \
	$(MYPY) >"$$report" 2>&1 & mypy=$$!; \
	$(PRECOLLECT) \
	wait $$system; checked=$$?; cat "$$deps"; rm -f "$$deps"; \
	if [ $$checked -ne 0 ]; then kill $$mypy 2>/dev/null; rm -f "$$report"; exit $$checked; fi; \
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup \
		--s3-backends $(S3_BACKENDS) $(PYTEST_ARGS); \
	status=$$?; \
	if wait $$mypy; then echo "mypy: $$(tail -n 1 "$$report")"; else cat "$$report"; status=1; fi; \
	rm -f "$$report"; \
	exit $$status

test-unit: $(STAMP)
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

# Table-format jobs (Iceberg and Delta) committed under lost answers and kills,
# ending with no pending upload anywhere in the bucket (tests/core/tables/test_table_soak.py):
# 30 jobs take about two and a half minutes on two cores. SOAK_JOBS=n for more.
SOAK_JOBS ?= 30
soak-tables: $(STAMP)
	ZERO_RENAME_TEST_SOAK=1 ZERO_RENAME_SOAK_JOBS=$(SOAK_JOBS) $(PY) -m pytest \
		tests/core/tables/test_table_soak.py --s3-backends seaweedfs -s $(PYTEST_ARGS)

# The JVM engines against zero-rename's tables (tests/peers, marker peers, opt-in
# by ZERO_RENAME_TEST_PEERS): Spark 4.1.2 with Iceberg 1.12.0 and Delta 4.4.0,
# from .venv-peers, reads the tables zero-rename publishes from the suite's Spark,
# and appends to them before zero-rename commits on top. A test may wait for the
# first run's download of the jars (bench/peers/jars.py), hence the long timeout.
# .ci/run runs it last, after test-extended.
test-peers: $(STAMP) $(PEERS_STAMP)
	deploy/system-deps.sh
	ZERO_RENAME_TEST_PEERS=1 PATH="$(abspath $(VENV))/bin:$$PATH" \
		$(PY) -m pytest tests/peers --timeout 1800 $(PYTEST_ARGS)

# What make test leaves out of its six minutes, run by .ci/run after it: the long
# end-to-end scenarios (marker extended, opt-in by ZERO_RENAME_TEST_EXTENDED):
# deploy/stack.sh's plain stack running the daily DAG on a standalone Spark
# cluster, a Spark stage whose Airflow worker is killed mid-write, dg dev
# materializing a day, dagster-webserver and dg's own commands on the component,
# and a daily run under OpenLineage's Spark listener (its jar from Maven
# Central), the daily DAG's run killed half-way through its commit, Spark
# Connect's client, the commit benchmark's run of every method, and the cells
# of a few crossed cases that make test samples; then tests/core's and
# tests/cli's cases on moto's server and LocalStack. About seven minutes on two
# cores of the slower machines.
test-extended: $(STAMP) localstack-venv
	deploy/system-deps.sh
	ZERO_RENAME_TEST_EXTENDED=1 PATH="$(abspath $(VENV))/bin:$$PATH" \
		$(PY) -m pytest -m extended -n 2 --dist loadgroup $(PYTEST_ARGS)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest tests/core tests/cli \
		-m "moto or localstack" --s3-backends seaweedfs,moto,localstack \
		-n 2 --dist loadgroup $(PYTEST_ARGS)

bench: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m bench.commit_bench

# About 1 GiB written five ways by local Spark, and a daily write of 10 files;
# about four minutes a round (--rounds) on two cores.
bench-spark: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m bench.spark_bench

# zero-rename beside Spark's own committers and Iceberg's and Delta's writers,
# every write in a driver of its own, in .venv-peers (Spark 4.1; bench/peers/run.py).
# BENCH_PEERS_ARGS passes options, e.g. --quick (every path on tiny sizes).
BENCH_PEERS_ARGS ?=
bench-peers: $(PEERS_STAMP)
	PATH="$(abspath $(PEERS_VENV))/bin:$$PATH" $(PEERS_VENV)/bin/python -m bench.peers.run \
		$(BENCH_PEERS_ARGS)


# What each method leaves after a fault (bench/peers/faults.py): four scenarios by
# the twelve methods of bench/peers/sessions.py, each row in driver processes of
# its own; its section of docs/benchmarks.md says how long the table took. One row:
# make bench-peers-faults FAULTS_ARGS="--scenarios driver-kill --methods s3a-magic"
FAULTS_ARGS ?=
.PHONY: bench-peers-faults
bench-peers-faults: $(PEERS_STAMP)
	PATH="$(abspath $(PEERS_VENV))/bin:$$PATH" $(PEERS_VENV)/bin/python -m bench.peers.faults $(FAULTS_ARGS)


clean:
	rm -rf $(VENV) $(LOCALSTACK_VENV) .pytest_cache .mypy_cache .ruff_cache

# The stack (S3, Spark, Airflow) as plain processes on 127.0.0.1; see docs/deployment.md.
.PHONY: stack-up stack-status stack-down stack-demo

stack-up: $(STAMP)
	$(PY) deploy/stack.py up

# The stack started (if it is not), then its Commits page filled: the daily DAG
# over a few days, a job committed, failed, aborted, rolled back, and one left
# for the page's "Roll back…" (demo/stack.py); prints the page's address.
stack-demo: stack-up
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m demo.stack

stack-status:
	$(PY) deploy/stack.py status

stack-down:
	$(PY) deploy/stack.py down
