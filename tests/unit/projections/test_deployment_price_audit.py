"""`verify_ledger` checks a charge priced by a deployment's own price (``MODEL/NAME@VERSION``): the
entry must belong to the charged model and be the one in force under its key at the charge's instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.prices import PriceEntry, PriceList
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(Decimal(1), Decimal(1), Decimal("1.25"), Decimal("0.1"))
EU = Price(Decimal("1.1"), Decimal("1.1"), Decimal("1.375"), Decimal("0.11"))


class Under:
    """The price list read under one key, as a deployment's charges read it (``DeploymentPrices``)."""

    def __init__(self, prices: PriceList, key: str) -> None:
        self.prices, self.key = prices, key

    def in_force(self, model: str, at: datetime) -> PriceEntry | None:
        return self.prices.in_force(self.key, at)


@pytest.fixture
def ledger(tmp_path) -> tuple[LedgerStore, RawDatabase]:
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    prices = PriceList.start()
    then = datetime.now(UTC) - timedelta(seconds=1)
    prices.set_price("m", PRICE, then, then)
    prices.set_price("m/eu", EU, then, then)
    store.save_prices(prices)
    with LedgerWriter(store) as writer:
        LedgerService(writer).create_team("acme", 1_000_000)
    yield store, RawDatabase(url, tmp_path)
    store.close()


@pytest.fixture
def store(ledger: tuple[LedgerStore, RawDatabase]) -> LedgerStore:
    return ledger[0]


def charge(store: LedgerStore, model: str, key: str) -> None:
    prices = store.load_prices()
    assert prices is not None
    with LedgerWriter(store) as writer:
        tid = team_id("acme")
        request = RequestOnLedger(f"r-{model}-{key}", "k", model, "chat")
        writer.on_team(tid, "acme", lambda t: t.place_hold(request, 500_000)).result()
        writer.on_team(
            tid, "acme", lambda t: t.charge(request, TokenUsage(100, 50), Under(prices, key), Decimal(100))
        ).result()


def test_a_charge_at_its_deployments_price_verifies(store: LedgerStore):
    charge(store, "m", "m/eu")
    charge(store, "m", "m")
    report = verify_ledger(store)
    assert report.ok, report.problems
    assert report.charges == 2


def test_a_charge_naming_another_models_deployment_price_is_found(store: LedgerStore):
    charge(store, "other", "m/eu")
    report = verify_ledger(store)
    assert not report.ok
    assert "which the price list does not have for model 'other'" in report.problems[0]


def test_a_charge_whose_rates_are_not_its_deployment_entrys_is_found(ledger: tuple[LedgerStore, RawDatabase]):
    store, raw = ledger
    charge(store, "m", "m/eu")
    ((event_id, state),) = raw.events("Charged")
    assert b'"price_ref":"m/eu@' in state
    prices = store.load_prices()
    assert prices is not None
    eu, own = prices.history("m/eu")[-1].ref, prices.history("m")[-1].ref
    raw.set_event_state(event_id, state.replace(f'"price_ref":"{eu}"'.encode(), f'"price_ref":"{own}"'.encode()))
    report = verify_ledger(store)
    assert not report.ok
    assert "priced at" in report.problems[0]
