# The two quick-start commands: `make demo` and `make test`.
# Both create .venv on first use and install the project into it.
# `make test` runs the whole suite twice, on SQLite and on PostgreSQL side by side (TOLLGATE_TEST_POSTGRES_URL,
# default postgresql://postgres@127.0.0.1:5432/postgres); an unreachable server fails the run. It
# installs Chromium (Debian's package) first if it is missing, for the dashboard's browser test, and
# Claude Code and Codex CLI (npm), for the coding-agent tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-sqlite test-postgresql install browser agents

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: install
	$(BIN)/tollgate demo --config examples/demo.toml

# The two halves run side by side (their output kept apart, each printed whole when it ends): the
# suite waits on sockets, subprocesses and timeouts more than it computes.
test: install browser agents
	$(MAKE) --no-print-directory -j2 --output-sync=target test-sqlite test-postgresql

# Tests that never touch the ledger's database (the domain, token counting, the codecs, the fake
# upstream, the gateway benchmark's quick run, the configuration reference) run once, in the SQLite half.
BACKEND_FREE := --ignore=tests/domain --ignore=tests/app/tokens --ignore=tests/app/translate \
	--ignore=tests/test_fake_upstream.py --ignore=tests/test_fake_responses.py \
	--ignore=tests/scripts/test_bench.py --ignore=tests/scripts/test_config_reference.py

# The dashboard test drives headless Chromium (Debian's package; installed here when missing and root).
browser:
	sh scripts/ensure_chromium.sh

# The coding-agent tests run Claude Code and Codex CLI, installed from npm once into a cache folder
# (Node from Debian's packages when missing, as root); see scripts/ensure_agents.sh.
agents:
	sh scripts/ensure_agents.sh

# Tests that need PostgreSQL's behaviour whatever the backend (a database that turns read-only, or
# refuses connections) run once, in the PostgreSQL half.
POSTGRES_ONLY := --ignore=tests/app/test_owed_charges.py --ignore=tests/app/test_key_directory_outage.py

test-sqlite: install browser agents
	TOLLGATE_TEST_BACKEND=sqlite $(BIN)/python -m pytest $(POSTGRES_ONLY)

test-postgresql: install browser agents
	TOLLGATE_TEST_BACKEND=postgresql $(BIN)/python -m pytest $(BACKEND_FREE)
