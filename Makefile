# The two quick-start commands: `make demo` and `make test`.
# Both create .venv on first use and install the project into it.
# `make test` runs the in-process layer (tests/unit, SQLite) first and stops there if it fails; then the
# end-to-end layer (tests/e2e) twice, on SQLite and on PostgreSQL side by side
# (TOLLGATE_TEST_POSTGRES_URL, default postgresql://postgres@127.0.0.1:5432/postgres; an unreachable
# server fails the run), the unit tests that write the ledger's database on PostgreSQL too; then
# the chaos suite's CI mode, on a PostgreSQL cluster and a Redis of its own (make test-chaos). It
# installs Chromium (Debian's package) first if it is missing, for the dashboard's browser test, and
# Claude Code and Codex CLI (npm), for the coding-agent tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo check test test-unit test-unit-postgresql test-e2e-sqlite test-e2e-postgresql test-sqlite test-postgresql \
	test-chaos install browser agents

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: install
	$(BIN)/tollgate demo --config examples/demo.toml

# The in-process layer first (about 20 s): a failure there stops the run before the end-to-end
# layer's ten minutes. Then the two backends' halves run side by side (their output kept apart,
# each printed whole when it ends): they wait on sockets, subprocesses and timeouts more than they
# compute. The PostgreSQL half also runs the unit tests that write the ledger. Then the chaos suite's
# CI mode runs alone (about a minute and a half; it judges answers by when faults happened, so it gets
# the cores to itself). The build fails if any of them fails; the chaos suite runs even if a half failed.
test: install browser agents
	$(MAKE) --no-print-directory check
	$(MAKE) --no-print-directory docs
	@$(MAKE) --no-print-directory test-unit || exit $$?; \
	status=0; \
	$(MAKE) --no-print-directory -j2 --output-sync=target test-e2e-sqlite test-postgresql || status=$$?; \
	$(MAKE) --no-print-directory test-chaos || status=$$?; \
	exit $$status

# The gate (scripts/check): ruff's lint, with the layering's banned imports, and mypy, strict. `make
# test` runs it first and stops there if it fails.
check: install
	VENV=$(VENV) sh scripts/check

# The documentation site (mkdocs.yml, docs/) built into site/, strict: a broken link or anchor, or a page
# left out of the nav, fails the build. A few seconds; `make test` runs it after the gate.
.PHONY: docs
docs: install
	$(BIN)/mkdocs build --strict --site-dir site  # not --quiet: it silences the warnings that --strict counts

# The chaos suite (scripts/chaos, README "Chaos suite"): its own PostgreSQL cluster and Redis, three
# gateways, a burst of traffic and faults; non-zero exit on any violation.
test-chaos: install
	$(BIN)/python -m scripts.chaos

# End-to-end tests that never touch the ledger's database (the fake upstream, the gateway
# benchmark's quick run) run once, in the SQLite half.
BACKEND_FREE := --ignore=tests/e2e/test_fake_upstream.py --ignore=tests/e2e/test_fake_responses.py \
	--ignore=tests/e2e/scripts/test_bench.py

# The unit tests that write the ledger's database (the writer, billing, the relay, the audit, the
# process registry) run on PostgreSQL too, in its half; the rest of the unit layer is backend-free.
UNIT_LEDGER := tests/unit/app/ledger tests/unit/app/http tests/unit/app/store tests/unit/projections tests/unit/app/observability/test_record_writer.py

# The dashboard test drives headless Chromium (Debian's package; installed here when missing and root).
browser:
	sh scripts/ensure_chromium.sh

# The coding-agent tests run Claude Code and Codex CLI, installed from npm once into a cache folder
# (Node from Debian's packages when missing, as root); see scripts/ensure_agents.sh.
agents:
	sh scripts/ensure_agents.sh

# Tests that need PostgreSQL's behaviour whatever the backend (a database that turns read-only, or
# refuses connections) run once, in the PostgreSQL half.
POSTGRES_ONLY := --ignore=tests/e2e/test_owed_charges.py --ignore=tests/e2e/test_key_directory_outage.py

test-unit: install
	TOLLGATE_TEST_BACKEND=sqlite $(BIN)/python -m pytest tests/unit

test-unit-postgresql: install
	TOLLGATE_TEST_BACKEND=postgresql $(BIN)/python -m pytest $(UNIT_LEDGER)

test-e2e-sqlite: install browser agents
	TOLLGATE_TEST_BACKEND=sqlite $(BIN)/python -m pytest tests/e2e $(POSTGRES_ONLY)

test-e2e-postgresql: install browser agents
	TOLLGATE_TEST_BACKEND=postgresql $(BIN)/python -m pytest tests/e2e $(BACKEND_FREE)

# Each backend's whole share, as before the layers were split: the unit layer (all of it on SQLite,
# its ledger tests on PostgreSQL) and that backend's end-to-end half.
test-sqlite: install browser agents
	TOLLGATE_TEST_BACKEND=sqlite $(BIN)/python -m pytest tests/unit tests/e2e $(POSTGRES_ONLY)

test-postgresql: install browser agents
	TOLLGATE_TEST_BACKEND=postgresql $(BIN)/python -m pytest $(UNIT_LEDGER) tests/e2e $(BACKEND_FREE)
