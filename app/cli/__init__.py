"""The ``tollgate`` command: serve, demo, bench, and the operators' team, key, credit, ledger and
database commands (``app/cli/main.py`` builds the parser; each group of commands has a module)."""
