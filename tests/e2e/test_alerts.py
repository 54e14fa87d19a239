"""Alerts, end to end: thresholds set with the CLI and the admin API are crossed by real requests
(the official SDK) and a correction; each crossing is recorded once in the ledger and delivered to a
real HTTP receiver on loopback, signed over its instant, its id and its body, which the receiver
checks as the README says (so a replay under a fresh id, or with another timestamp, is refused) —
and when the receiver is down (killed, its port refusing connections) and even the gateway restarts
meanwhile, every alert still arrives, exactly once by id. A gateway whose webhook has no secret does
not start.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest
from playwright.sync_api import Browser

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, GATEWAY_ENV, Gateway, free_port, tollgate_command, write_config
from tests.support.teams import Team

SECRET = "whsec-for-tests"
ASK = [{"role": "user", "content": "Say something short."}]


def verified_alert_id(
    secret: bytes, headers: Any, body: bytes, now: float | None = None, tolerance: int = 300
) -> str | None:
    """The receiver's check, as the README (Alerts) gives it: the alert's id if Tollgate signed this
    very request a moment ago, else None."""
    fields = dict(part.split("=", 1) for part in headers["x-tollgate-signature"].split(","))
    t, alert_id = fields.get("t", ""), headers["x-tollgate-alert-id"]
    expected = hmac.new(secret, f"{t}.{alert_id}.".encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields.get("v1", "")):
        return None
    if not t.isdigit() or abs((time.time() if now is None else now) - int(t)) > tolerance:
        return None
    return alert_id


class Receiver:
    """A webhook receiver on a loopback port that can be killed and brought back on the same port. It
    takes (204) what :func:`verified_alert_id` verifies and refuses (401) the rest."""

    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[tuple[str, bytes, str]] = []  # (alert id, body, signature), each verified
        self.refused: list[str] = []  # the alert ids of the requests that did not verify
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/tollgate"

    def start(self) -> Receiver:
        received, refused = self.received, self.refused

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                alert_id = verified_alert_id(SECRET.encode(), self.headers, body)
                if alert_id is None:
                    refused.append(self.headers["x-tollgate-alert-id"])
                else:
                    received.append((alert_id, body, self.headers["x-tollgate-signature"]))
                self.send_response(401 if alert_id is None else 204)
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


def replays_are_refused(receiver: Receiver, alert_id: str, body: bytes, signature: str) -> None:
    """A delivery caught on its way and sent again: under a fresh id (which deduplication would not
    catch), with another timestamp, or as it was but later than the tolerance — none verifies."""
    fields = dict(part.split("=", 1) for part in signature.split(","))
    assert set(fields) == {"t", "v1"}
    assert abs(time.time() - int(fields["t"])) < 60  # signed at the attempt
    headers = {"x-tollgate-alert-id": alert_id, "x-tollgate-signature": signature}
    assert verified_alert_id(SECRET.encode(), headers, body) == alert_id
    assert verified_alert_id(SECRET.encode(), headers, body, now=int(fields["t"]) + 301) is None  # too old
    for forged in (
        {**headers, "x-tollgate-alert-id": "alert_" + "f" * 32},
        {**headers, "x-tollgate-signature": signature.replace(f"t={fields['t']}", f"t={int(fields['t']) + 7}")},
    ):
        answer = plain_http.post(receiver.url, content=body, headers={"content-type": "application/json", **forged})
        assert answer.status_code == 401
    assert receiver.refused == ["alert_" + "f" * 32, alert_id]


def test_every_alert_arrives_exactly_once_through_a_receiver_outage_and_a_gateway_restart(
    tmp_path: Path, fake_upstream: FakeUpstream, receiver: Receiver, browser: Browser
):
    config = write_config(
        tmp_path,
        fake_upstream.base_url,
        settings=(
            f'webhooks = [{{url = "{receiver.url}", secret_env = "ALERT_SECRET"}}]\nwebhook_retry_max_seconds = 2'
        ),
    )
    gateway = start_gateway(config)
    try:
        gateway.cli("team", "create", "watched", "--credits", "1")
        secret = gateway.cli("key", "create", "--team", "watched").stdout.strip().splitlines()[-1]
        team = Team("watched", secret)
        key_id = plain_http.get(f"{gateway.base_url}/key", headers={"Authorization": f"Bearer {secret}"}).json()[
            "data"
        ]["key_id"]
        gateway.cli("key", "budget", "--team", "watched", key_id, "--credits", "0.2", "--period", "day")
        gateway.cli("alert", "set", "--team", "watched", "--key", key_id, "--budget-percent", "50")
        with plain_http.Client(
            base_url=f"{gateway.root_url}/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        ) as api:
            answer = api.put("/teams/watched/alerts", json={"kind": "budget_percent", "value": 80, "key_id": key_id})
            assert answer.status_code == 200, answer.text
            answer = api.put("/teams/watched/alerts", json={"kind": "balance_below", "value": "0.5"})
            assert sorted(t["kind"] for t in answer.json()["thresholds"]) == [
                "balance_below",
                "budget_percent",
                "budget_percent",
            ]
            assert api.put("/teams/watched/alerts", json={"kind": "balance_below", "value": "-1"}).status_code == 400
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
            # Half the key's budget: one alert, delivered and signed (the receiver verified it).
            spend_until(client, gateway, "watched", key_id, 100_000)
            first = until(lambda: receiver.received, "the 50 % alert's delivery")
            alert_id, body, signature = first[0]
            assert receiver.refused == []
            sent = json.loads(body)
            assert (sent["id"], sent["type"], sent["key_id"], sent["threshold"]) == (
                alert_id,
                "alert.budget_percent",
                key_id,
                "50",
            )
            assert sent["value"] >= 100_000
            replays_are_refused(receiver, alert_id, body, signature)

            # The receiver dies; 80 % of the budget and the balance under 0.5 credits are crossed.
            receiver.kill()
            spend_until(client, gateway, "watched", key_id, 160_000)
            gateway.cli("credits", "adjust", "--team", "watched", "--", "-0.4", "--reason", "chargeback")
            recorded = until(
                lambda: len(ledger_alerts(gateway, "watched")) == 3 and ledger_alerts(gateway, "watched"),
                "three alerts in the ledger",
            )
            until(
                lambda: all(d["attempts"] >= 2 for a in ledger_alerts(gateway, "watched")[:2] for d in a["deliveries"]),
                "failed delivery attempts",
            )

            # The gateway restarts while the receiver is still down: the outbox is in the database.
            gateway.stop()
            gateway = start_gateway(config)
            receiver.start()
            until(lambda: len(set(receiver.ids())) == 3, "every alert's delivery", within=30)
            time.sleep(1)  # whatever else would arrive, give it the time to
            assert Counter(receiver.ids()) == Counter({a["alert_id"]: 1 for a in recorded})
            kinds = sorted((json.loads(b)["type"], json.loads(b)["threshold"]) for _, b, _ in receiver.received)
            assert kinds == [
                ("alert.balance_below", "500000"),
                ("alert.budget_percent", "50"),
                ("alert.budget_percent", "80"),
            ]

            # Over the line already: more spending raises nothing new.
            with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
                client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=5)
                assert len(ledger_alerts(gateway, "watched")) == 3
                shown = gateway.cli("alert", "list", "--team", "watched").stdout
                assert shown.count("delivered") == 3
                on_the_dashboard(browser, gateway, team)
                assert gateway.cli("ledger", "verify").returncode == 0
    finally:
        gateway.stop()


def test_a_gateway_whose_webhook_has_no_secret_does_not_start(
    tmp_path: Path, fake_upstream: FakeUpstream, receiver: Receiver
):
    """Alerts are never sent unsigned: a webhook without ``secret_env`` is not a configuration, and
    ``tollgate serve`` refuses to start while the variable it names is unset or empty — one line
    naming the file and the key, exit 2."""
    config = write_config(
        tmp_path,
        fake_upstream.base_url,
        settings=f'webhooks = [{{url = "{receiver.url}", secret_env = "ALERT_SECRET"}}]',
    )
    env = {k: v for k, v in {**os.environ, **GATEWAY_ENV}.items() if k != "ALERT_SECRET"}

    def serve(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*tollgate_command(), "serve", "--config", str(config), "--port", str(free_port())],
            env=environment,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )

    for environment, state in ((env, "not set"), ({**env, "ALERT_SECRET": ""}, "empty")):
        refused = serve(environment)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr == (
            f"tollgate: error: {config}: webhooks[0].secret_env: environment variable "
            f"ALERT_SECRET is {state} (the secret alerts to this webhook are signed with)\n"
        )
    config.write_text(config.read_text().replace(', secret_env = "ALERT_SECRET"', ""))
    unsigned = serve({**env, "ALERT_SECRET": SECRET})
    assert unsigned.returncode == 2
    assert unsigned.stderr == f"tollgate: error: {config}: webhooks[0].secret_env: required key is missing\n"
    assert receiver.received == receiver.refused == []
