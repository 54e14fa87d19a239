# The two quick-start commands: `make demo` and `make test`.
# Both create .venv on first use and install the project into it.
# `make test` runs the whole suite twice: on SQLite, then on PostgreSQL (TOLLGATE_TEST_POSTGRES_URL,
# default postgresql://postgres@127.0.0.1:5432/postgres); an unreachable server fails the run. It
# installs Chromium (Debian's package) first if it is missing, for the dashboard's browser test.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-sqlite test-postgresql install browser

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: install
	$(BIN)/tollgate demo --config examples/demo.toml

test: test-sqlite test-postgresql

# The dashboard test drives headless Chromium (Debian's package; installed here when missing and root).
browser:
	sh scripts/ensure_chromium.sh

test-sqlite: install browser
	TOLLGATE_TEST_BACKEND=sqlite $(BIN)/python -m pytest

test-postgresql: install browser
	TOLLGATE_TEST_BACKEND=postgresql $(BIN)/python -m pytest
