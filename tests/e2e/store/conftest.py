"""The ledger's schema as its own processes make it: no ledger here is a copy of a template."""

from __future__ import annotations

import pytest

from tests.support import backend


@pytest.fixture(autouse=True)
def _ledgers_made_from_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "sqlite_template", None)
    monkeypatch.setattr(backend, "postgres_template", None)
