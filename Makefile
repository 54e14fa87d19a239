# The two quick-start commands: `make demo` and `make test`.
# Both create .venv on first use and install the project into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: install
	$(BIN)/tollgate demo --config examples/demo.toml

test: install
	$(BIN)/python -m pytest
