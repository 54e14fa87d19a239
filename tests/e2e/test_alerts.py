"""Alerts, end to end: thresholds set with the CLI and the admin API are crossed by real requests
(the official SDK) and a correction; each crossing is recorded once in the ledger and delivered to a
real HTTP receiver on loopback, signed — and when the receiver is down (killed, its port refusing
connections) and even the gateway restarts meanwhile, every alert still arrives, exactly once by id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from playwright.sync_api import Browser

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, free_port, write_config
from tests.support.teams import Team

SECRET = "whsec-for-tests"
ASK = [{"role": "user", "content": "Say something short."}]


class Receiver:
    """A webhook receiver on a loopback port that can be killed and brought back on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[tuple[str, bytes, str]] = []  # (alert id, body, signature)
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/tollgate"

    def start(self) -> Receiver:
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                received.append((self.headers["x-tollgate-alert-id"], body, self.headers["x-tollgate-signature"]))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def kill(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()  # the port refuses connections from now on

    def ids(self) -> list[str]:
        return [alert_id for alert_id, _, _ in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    if r._server is not None:
        r._server.server_close()


def on_the_dashboard(browser: Browser, gateway: Gateway, team: Team) -> None:
    """The team, signed in to its dashboard, sees its three alerts, each delivered."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{gateway.root_url}/dashboard")
        page.fill("#key", team.key)
        page.click("#sign-in-button")
        page.wait_for_selector(f'body[data-loaded="{team.name}"]', timeout=10_000)
        rows = page.locator("#alerts-table tbody tr")
        assert rows.count() == 3
        text = page.inner_text("#alerts-table tbody")
        assert (text.count("budget reached"), text.count("balance low"), text.count("delivered")) == (2, 1, 3)
        assert "80 %" in text
    finally:
        context.close()


def start_gateway(config: Path) -> Gateway:
    return Gateway(config, env={"ALERT_SECRET": SECRET}).start()


def ledger_alerts(gateway: Gateway, team: str) -> list[dict[str, Any]]:
    return json.loads(gateway.cli("alert", "list", "--team", team, "--json").stdout)["alerts"]


def until(condition: Any, what: str, within: float = 20.0) -> Any:
    deadline = time.monotonic() + within
    while not (result := condition()):
        assert time.monotonic() < deadline, f"{what} did not happen within {within} s"
        time.sleep(0.1)
    return result


def spend_until(client: openai.OpenAI, gateway: Gateway, team: str, key_id: str, micros: int) -> None:
    """Requests until the key was charged at least ``micros``."""
    while sum(-int(r["amount"]) for r in gateway.charges(team) if r["key_id"] == key_id) < micros:
        client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=20)


def test_every_alert_arrives_exactly_once_through_a_receiver_outage_and_a_gateway_restart(
        tmp_path: Path, fake_upstream: FakeUpstream, receiver: Receiver, browser: Browser):
    config = write_config(tmp_path, fake_upstream.base_url, settings=(
        f'webhooks = [{{url = "{receiver.url}", secret_env = "ALERT_SECRET"}}]\nwebhook_retry_max_seconds = 2'))
    gateway = start_gateway(config)
    try:
        gateway.cli("team", "create", "watched", "--credits", "1")
        secret = gateway.cli("key", "create", "--team", "watched").stdout.strip().splitlines()[-1]
        team = Team("watched", secret)
        key_id = httpx.get(f"{gateway.base_url}/key", headers={"Authorization": f"Bearer {secret}"}).json()[
            "data"]["key_id"]
        gateway.cli("key", "budget", "--team", "watched", key_id, "--credits", "0.2", "--period", "day")
        gateway.cli("alert", "set", "--team", "watched", "--key", key_id, "--budget-percent", "50")
        with httpx.Client(base_url=f"{gateway.root_url}/admin",
                          headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as api:
            answer = api.put("/teams/watched/alerts", json={"kind": "budget_percent", "value": 80, "key_id": key_id})
            assert answer.status_code == 200, answer.text
            answer = api.put("/teams/watched/alerts", json={"kind": "balance_below", "value": "0.5"})
            assert sorted(t["kind"] for t in answer.json()["thresholds"]) == ["balance_below", "budget_percent",
                                                                             "budget_percent"]
            assert api.put("/teams/watched/alerts", json={"kind": "balance_below", "value": "-1"}).status_code == 400
        client = openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)

        # Half the key's budget: one alert, delivered and signed.
        spend_until(client, gateway, "watched", key_id, 100_000)
        first = until(lambda: receiver.received, "the 50 % alert's delivery")
        alert_id, body, signature = first[0]
        assert signature == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        sent = json.loads(body)
        assert (sent["id"], sent["type"], sent["key_id"], sent["threshold"]) == (
            alert_id, "alert.budget_percent", key_id, "50")
        assert sent["value"] >= 100_000

        # The receiver dies; 80 % of the budget and the balance under 0.5 credits are crossed.
        receiver.kill()
        spend_until(client, gateway, "watched", key_id, 160_000)
        gateway.cli("credits", "adjust", "--team", "watched", "--", "-0.4", "--reason", "chargeback")
        recorded = until(lambda: len(ledger_alerts(gateway, "watched")) == 3 and ledger_alerts(gateway, "watched"),
                         "three alerts in the ledger")
        until(lambda: all(d["attempts"] >= 2 for a in ledger_alerts(gateway, "watched")[:2]
                          for d in a["deliveries"]), "failed delivery attempts")

        # The gateway restarts while the receiver is still down: the outbox is in the database.
        gateway.stop()
        gateway = start_gateway(config)
        receiver.start()
        until(lambda: len(set(receiver.ids())) == 3, "every alert's delivery", within=30)
        time.sleep(1)  # whatever else would arrive, give it the time to
        assert Counter(receiver.ids()) == Counter({a["alert_id"]: 1 for a in recorded})
        kinds = sorted((json.loads(b)["type"], json.loads(b)["threshold"]) for _, b, _ in receiver.received)
        assert kinds == [("alert.balance_below", "500000"), ("alert.budget_percent", "50"),
                         ("alert.budget_percent", "80")]

        # Over the line already: more spending raises nothing new.
        client = openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)
        client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=5)
        assert len(ledger_alerts(gateway, "watched")) == 3
        shown = gateway.cli("alert", "list", "--team", "watched").stdout
        assert shown.count("delivered") == 3
        on_the_dashboard(browser, gateway, team)
        assert gateway.cli("ledger", "verify").returncode == 0
    finally:
        gateway.stop()
