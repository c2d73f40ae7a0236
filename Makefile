# Every target sets itself up: the venv is created and the pinned
# dependencies installed when missing or when the pins change.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test test-unit bench clean venv

venv: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/zero-rename demo

test: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

bench: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m bench.commit_bench

clean:
	rm -rf $(VENV) .pytest_cache
