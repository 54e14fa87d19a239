"""A gateway process that dies with a hold open does not lock the team's credits forever."""

from __future__ import annotations

import time

from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.settings import parse_settings
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config


def test_the_holds_of_a_dead_process_are_released_after_the_timeout(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url)
    config.write_text("hold_timeout = 2\n" + config.read_text())
    gateway = Gateway(config).start()
    try:
        gateway.cli("team", "create", "acme", "--credits", "10")
        # Another "gateway" places a hold, as before forwarding a request, and dies without settling.
        settings = parse_settings(config.read_text(), str(config))
        store = open_ledger_store(settings.database_url, config.parent)
        with LedgerWriter(store) as dead:
            dead.on_team(
                team_id("acme"),
                "acme",
                lambda t: t.place_hold(RequestOnLedger("req_lost", "k", "fake-gpt", "chat.completions"), 4_000_000),
            ).result()
        store.close()
        assert "held 4, available 6" in gateway.cli("team", "show", "acme").stdout

        deadline = time.monotonic() + 15
        while "held 0," not in (shown := gateway.cli("team", "show", "acme").stdout) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "balance 10 credits, held 0, available 10" in shown
        assert gateway.cli("ledger", "verify").returncode == 0
    finally:
        gateway.stop()
