"""The bounds on usage by attribution (``domain/attribution_bounds.py``) as the live projection,
``ledger rebuild`` and ``ledger verify`` apply them: the same rows, whatever the slices, adding up."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from domain import attribution_bounds
from domain.attribution import Attribution
from domain.attribution_bounds import OTHER
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from projections.history import HistoryProjection
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))


@pytest.fixture(autouse=True)
def small_bounds(monkeypatch):
    monkeypatch.setattr(attribution_bounds, "MAX_VALUES_PER_DAY", 3)
    monkeypatch.setattr(attribution_bounds, "MAX_VALUES_PER_TEAM_DAY", 5)
    monkeypatch.setattr(attribution_bounds, "MAX_TAG_NAMES_PER_DAY", 2)


@pytest.mark.parametrize("batch", [1, 5, 500])
def test_live_rebuilt_and_verified_rows_are_the_same_within_the_bounds(tmp_path, batch):
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    charges = [
        ("u1", {"a": "1"}),
        ("u2", {"b": "1", "c": "1"}),
        ("u3", {}),
        ("u4", {"a": "2"}),
        ("u1", {"a": "3"}),
        ("", {"a": "4"}),
        ("u5", {"b": "2"}),
        ("u6", {}),
    ]
    with LedgerWriter(store) as writer:
        for name in ("acme", "beta"):  # two teams, their charges interleaved: each has bounds of its own
            LedgerService(writer).create_team(name, 10**9)
        for i, (user, tags) in enumerate(charges):
            for name in ("acme", "beta"):
                tid = team_id(name)
                writer.on_team(
                    tid, name, lambda t, i=i: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 1000)
                ).result()
                request = RequestOnLedger(f"r{i}", "k", "m", "chat", Attribution(tags or {}, user))
                writer.on_team(
                    tid, name, lambda t, i=i, r=request: t.charge_priced(r, TokenUsage(10 + i, 5), PRICE, Decimal(100))
                ).result()
    raw = RawDatabase(url, tmp_path)
    history = HistoryProjection(store, store.database)
    rows = "SELECT dimension, value, requests, cost FROM usage_by_attribution WHERE team_name = ?"
    try:
        history.catch_up(batch=batch)
        live = sorted(raw.execute(rows, ("acme",)))
        assert sorted(raw.execute(rows, ("beta",))) == live
        users = {r[1]: r[2] for r in live if r[0] == "user"}
        assert users == {"u1": 2, "u2": 1, "u3": 1, "": 1, OTHER: 3}  # u4, u5, u6 beyond 3 values
        assert {r[0] for r in live} == {"user", "tag:a", "tag:b"}  # tag c came third on the day
        assert {r[1]: r[2] for r in live if r[0] == "tag:a"} == {"1": 1, OTHER: 3}  # the team's 5 values were taken
        total = sum(r[3] for r in live if r[0] == "user")
        assert (
            total
            == raw.execute(
                "SELECT SUM(-amount) FROM ledger_entries WHERE kind = 'charge' AND team_name = ?", ("acme",)
            )[0][0]
        )
        page = history.attribution_usage("acme", "user", limit=2, offset=1)
        assert page.values == 5
        assert page.total["requests"] == 8
        assert [r["value"] for r in page.rows] == ["u1", ""]  # after OTHER (3 charges): by cost
        assert verify_ledger(store, store.database).ok
        history.rebuild()
        assert sorted(raw.execute(rows, ("acme",))) == live
    finally:
        history.close()
        store.close()
