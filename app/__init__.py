"""The gateway: its HTTP server, the ledger's service and storage, and the command line."""

import domain  # noqa: F401 - puts the compiled modules' source-first finder in place (domain/compiled.py)
