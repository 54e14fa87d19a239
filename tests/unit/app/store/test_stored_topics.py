"""What a ledger's database names of the code: classes of ``domain/`` only, and the library's snapshot.

eventsourcing stores each event's class as a topic (``module:QualName``), and a snapshot's aggregate
in its state; reading them back imports that module. Because every stored name is a class of
``domain/``, the store's modules could move (``projections/`` → ``app/store/``) without a ledger
written before the move failing to load; an aggregate, event or snapshot class defined anywhere
else would tie the ledgers to that module's path, and fails here.
"""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from eventsourcing.utils import resolve_topic

from app.store.event_store import open_ledger_store
from domain.admin_keys import AdminKeys
from domain.ledger import TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.prices import PriceList
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
#: eventsourcing's own snapshot class, which holds the aggregate's topic in its state.
SNAPSHOT = "eventsourcing.domain:Snapshot"


def test_every_stored_topic_names_a_class_of_the_domain(tmp_path: Path) -> None:
    url = new_database_url()
    store = open_ledger_store(url, tmp_path, pool_size=2)
    try:
        team = TeamLedger.open("acme")
        team.add_credits(10_000_000, "opening")
        team.issue_key("k1", "hash-k1", "laptop")
        team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 10_000, owner="p1")
        team.charge(RequestOnLedger("r1", "k1", "m", "chat"), TokenUsage(500, 200), PRICE, Decimal(100))
        store.save_teams([team])
        store.team_snapshots.save([store.team_snapshots.take(team)])
        prices = PriceList.start()
        now = datetime.now(UTC)
        prices.set_price("m", PRICE, now, now)
        store.save_prices(prices)
        admin_keys = AdminKeys.start()
        admin_keys.issue("a1", "hash-a1", "ops", "operator", actor="test")
        store.save_admin_keys(admin_keys)
    finally:
        store.close()

    raw = RawDatabase(url, tmp_path)
    event_topics = {row[0] for row in raw.execute("SELECT DISTINCT topic FROM {events}")}
    snapshots = raw.execute("SELECT topic, state FROM team_snapshots")
    assert {row[0] for row in snapshots} == {SNAPSHOT}
    aggregate_topics = {json.loads(zlib.decompress(bytes(row[1])))["topic"] for row in snapshots}

    stored = event_topics | aggregate_topics
    assert {
        "domain.ledger:TeamLedger.Charged",
        "domain.prices:PriceList.PriceSet",
        "domain.admin_keys:AdminKeys.AdminKeyIssued",
        "domain.ledger:TeamLedger",
    } <= stored
    assert [topic for topic in stored if not topic.startswith("domain.")] == []
    for topic in stored | {SNAPSHOT}:
        resolve_topic(topic)  # each still names a class that can be imported
