"""Named admin keys and their roles, through a real gateway: an auditor reads every admin route and
changes nothing, an operator changes things, a revoked key is refused, and the audit history says
who did what and why."""

from __future__ import annotations

import getpass
import json
import re
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, write_config

TEAM = "audited-roles"
WRITE_METHODS = ("post", "put", "patch", "delete")

#: Every write route of the admin API, in an order an operator can run them all in, with a body
#: each accepts. The test fails if the OpenAPI document lists a write route this table lacks.
WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("post", "/admin/teams", {"name": "opened-by-operator", "credits": "1", "reason": "new customer"}),
    ("post", "/admin/teams/{name}/credits", {"amount": "2", "reference": "INV-7", "reason": "invoice paid"}),
    ("post", "/admin/teams/{name}/adjustments", {"amount": "-1", "reason": "refund reversed"}),
    ("post", "/admin/teams/{name}/keys", {"name": "made-by-operator"}),
    ("put", "/admin/teams/{name}/keys/{key_id}/models", {"models": []}),
    ("put", "/admin/teams/{name}/keys/{key_id}/endpoints", {"endpoints": []}),
    ("put", "/admin/teams/{name}/keys/{key_id}/limits", {"rpm": 100}),
    ("put", "/admin/teams/{name}/keys/{key_id}/clamp", {"clamp_output_to_balance": True}),
    ("put", "/admin/teams/{name}/limits", {"rpm": 1000}),
    ("put", "/admin/teams/{name}/clamp", {"clamp_output_to_balance": False}),
    ("put", "/admin/teams/{name}/price-adjustment", {"percent": "5", "reason": "volume deal"}),
    ("post", "/admin/teams/{name}/suspend", {"reason": "unpaid"}),
    ("post", "/admin/teams/{name}/reinstate", {"reason": "paid"}),
    ("put", "/admin/teams/{name}/keys/{key_id}/budget", {"credits": "50", "period": "day", "reason": "ci cap"}),
    ("put", "/admin/teams/{name}/budget", {"credits": "500", "period": "month", "reason": "monthly cap"}),
    ("put", "/admin/teams/{name}/alerts", {"kind": "budget_percent", "value": 80, "reason": "warn early"}),
    ("put", "/admin/teams/{name}/auto-recharge", {"threshold": "5", "target": "50", "monthly_cap": "100"}),
    ("post", "/admin/teams/{name}/keys/{key_id}/revoke", {"reason": "leaked"}),
    # the dashboard's "Buy credits": an operator's or the team's own (this gateway takes no payments,
    # so an operator gets 404 there; tests/e2e/test_dashboard_buy_credits.py buys with one)
    ("post", "/dashboard/api/teams/{name}/checkout", {"amount": "20"}),
]
#: Write routes that answer 404 on a gateway without [payments], whoever asks.
NEEDS_PAYMENTS = {("post", "/dashboard/api/teams/{name}/checkout")}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    """A gateway of its own: the ledger's event count is compared before and after the auditor's writes."""
    gw = Gateway(write_config(tmp_path_factory.mktemp("admin-roles"), fake_upstream.base_url)).start()
    yield gw
    gw.stop()


def issue(gateway: Gateway, name: str, role: str) -> tuple[str, str]:
    """An admin key issued by the CLI: its id and its secret (the last line)."""
    out = gateway.cli("admin-key", "issue", "--name", name, "--role", role, "--reason", f"{name} joined").stdout
    key_id = re.search(r"admin key (adm_\w+)", out)
    assert key_id is not None, out
    return key_id.group(1), out.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def keys(gateway: Gateway) -> dict[str, tuple[str, str]]:
    gateway.cli("team", "create", TEAM, "--credits", "10")
    secret = gateway.cli("key", "create", "--team", TEAM, "--name", "app").stdout.strip().splitlines()[-1]
    answer = plain_http.post(
        f"{gateway.base_url}/chat/completions",
        headers={"Authorization": f"Bearer {secret}"},
        json={"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    SERVED.append(answer.headers["x-request-id"])  # a request the lookup routes can find
    gateway.wait_until_nothing_held(TEAM)  # its credit lease given back: no event comes after this
    return {"auditor": issue(gateway, "alice-auditor", "auditor"), "operator": issue(gateway, "oscar-op", "operator")}


def client(gateway: Gateway, secret: str) -> httpx.Client:
    return plain_http.Client(base_url=gateway.root_url, headers={"Authorization": f"Bearer {secret}"}, timeout=10)


def team_key_id(gateway: Gateway) -> str:
    return gateway.cli("key", "list", "--team", TEAM).stdout.split()[0]


def event_count(gateway: Gateway) -> int:
    verified = gateway.cli("ledger", "verify").stdout
    found = re.search(r"Ledger verified: (\d+) events", verified)
    assert found is not None, verified
    return int(found.group(1))


def admin_routes(gateway: Gateway) -> dict[str, list[str]]:
    """Every admin-guarded path of the OpenAPI document (under /admin, /metrics, and the dashboard's
    API, which admin keys read), with its methods."""
    document = plain_http.get(gateway.root_url + "/schema/openapi.json").json()
    return {
        path: [m for m in operations if m in ("get", *WRITE_METHODS)]
        for path, operations in document["paths"].items()
        if path.startswith(("/admin", "/dashboard/api")) or path == "/metrics"
    }


#: The id of a request the team made (``keys``).
SERVED: list[str] = []


def filled(path: str, key_id: str) -> str:
    month = datetime.now(UTC).strftime("%Y-%m")
    return (
        path.replace("{name}", TEAM)
        .replace("{key_id}", key_id)
        .replace("{month}", month)
        .replace("{request_id}", SERVED[0] if SERVED else "req_none")
    )


def history(gateway: Gateway, team: str = TEAM) -> list[dict[str, Any]]:
    out = gateway.cli("ledger", "export", "--team", team, "--format", "jsonl").stdout
    return [json.loads(line) for line in out.splitlines()]


def test_an_auditor_reads_every_admin_route_and_changes_nothing(gateway: Gateway, keys):
    routes = admin_routes(gateway)
    writes = {(m, p) for p, methods in routes.items() for m in methods if m in WRITE_METHODS}
    assert writes == {(m, p) for m, p, _ in WRITES}, "a write route without a body in WRITES"
    assert any(p.startswith("/admin") for p in routes)
    assert "get" in routes["/admin/teams"]
    key_id = team_key_id(gateway)
    before = event_count(gateway)
    balance = gateway.cli("team", "show", TEAM).stdout
    with client(gateway, keys["auditor"][1]) as auditor:
        for method, path, body in WRITES:
            refused = auditor.request(method.upper(), filled(path, key_id), json=body)
            assert refused.status_code == 403, (method, path, refused.text)
            error = refused.json()["error"]
            assert error["type"] == "permission_error"
            assert "'auditor'" in error["message"], error
            assert keys["auditor"][0] in error["message"], error
        for path, methods in routes.items():
            if "get" in methods:
                read = auditor.get(filled(path, key_id))
                assert read.status_code == 200, (path, read.status_code, read.text)
                headed = auditor.head(filled(path, key_id))  # the role reads with HEAD as with GET
                assert (headed.status_code, headed.content) == (200, b""), (path, headed.status_code)
                assert headed.headers["content-type"] == read.headers["content-type"]
        verified = auditor.get("/admin/ledger/verify").json()  # an auditor verifies the ledger, too
        assert (verified["ok"], verified["problems"]) == (True, [])
        assert verified["events"] > 0
    assert event_count(gateway) == before
    assert gateway.cli("team", "show", TEAM).stdout == balance


def test_an_operator_makes_every_change_and_each_names_its_key_and_reason(gateway: Gateway, keys):
    operator_id, secret = keys["operator"]
    key_id = team_key_id(gateway)
    with client(gateway, secret) as operator:
        for method, path, body in WRITES:
            done = operator.request(method.upper(), filled(path, key_id), json=body)
            expected = (404,) if (method, path) in NEEDS_PAYMENTS else (200, 201)
            assert done.status_code in expected, (method, path, done.text)
        # For a route without a body of its own, the reason may come in a header instead.
        answer = operator.post(f"/admin/teams/{TEAM}/suspend", headers={"x-tollgate-reason": "audit hold"})
        assert answer.status_code == 200
        operator.post(f"/admin/teams/{TEAM}/reinstate")
        api_rows = operator.get(f"/admin/teams/{TEAM}/history", params={"per_page": 1000}).json()["data"]
    actor = f"admin:{operator_id}"
    rows = history(gateway)
    assert api_rows == [{k: r[k] for k in api_rows[0]} for r in rows]  # the admin API and the export agree
    top_up = next(r for r in rows if r["kind"] == "top_up" and r["reference"] == "INV-7")
    assert (top_up["actor"], top_up["reason"], top_up["amount"]) == (actor, "invoice paid", 2_000_000)
    adjustment = next(r for r in rows if r["kind"] == "adjustment")
    assert (adjustment["actor"], adjustment["reason"]) == (actor, "refund reversed")
    revoked = next(r for r in rows if r["kind"] == "key_revoked")
    assert (revoked["actor"], revoked["reason"], revoked["key_id"], revoked["amount"]) == (actor, "leaked", key_id, 0)
    assert revoked["balance_after"] == top_up["balance_after"] + adjustment["amount"]  # moves no money
    suspended = [(r["actor"], r["reason"]) for r in rows if r["kind"] == "suspended"]
    assert suspended == [(actor, "unpaid"), (actor, "audit hold")]
    priced = next(r for r in rows if r["kind"] == "price_adjustment")
    assert (priced["reference"], priced["reason"]) == ("percent=5", "volume deal")
    opened = history(gateway, "opened-by-operator")
    assert [(r["kind"], r["actor"], r["reason"]) for r in opened] == [
        ("team_opened", actor, "new customer"),
        ("top_up", actor, "new customer"),
    ]
    assert gateway.cli("ledger", "verify").returncode == 0


def test_the_cli_and_the_configured_key_are_named_too(gateway: Gateway, keys):
    gateway.cli("credits", "add", "--team", TEAM, "3", "--reference", "INV-8", "--reason", "wire transfer")
    with client(gateway, ADMIN_KEY) as config_admin:
        answer = config_admin.post(f"/admin/teams/{TEAM}/credits", json={"amount": "4", "reason": "promo"})
        assert answer.status_code == 200
        api_rows = config_admin.get(f"/admin/teams/{TEAM}/history", params={"per_page": 1000}).json()["data"]
    cli_row = next(r for r in api_rows if r["reference"] == "INV-8")
    assert (cli_row["actor"], cli_row["reason"]) == (f"cli:{getpass.getuser()}@{socket.gethostname()}", "wire transfer")
    config_row = next(r for r in api_rows if r["amount"] == 4_000_000)
    assert (config_row["actor"], config_row["reason"]) == ("admin:config", "promo")
    shown = gateway.cli("ledger", "history", "--team", TEAM, "--per-page", "1000").stdout
    assert "[cli:" in shown
    assert "wire transfer" in shown
    assert "[admin:config]: promo" in shown


def test_a_revoked_admin_key_is_refused_at_once(gateway: Gateway, keys):
    key_id, secret = issue(gateway, "temp-operator", "operator")
    with client(gateway, secret) as temp:
        assert temp.get("/admin/teams").status_code == 200
        assert "temp-operator" in gateway.cli("admin-key", "list").stdout
        gateway.cli("admin-key", "revoke", key_id, "--reason", "left the company")
        deadline = time.monotonic() + 1.0
        while (answer := temp.get("/admin/teams")).status_code != 401:
            assert time.monotonic() < deadline, f"still answered {answer.status_code} a second after its revocation"
            time.sleep(0.05)
        assert answer.json()["error"]["type"] == "authentication_error"
        assert "revoked" in answer.json()["error"]["message"]
        assert temp.get("/metrics").status_code == 401
        assert temp.get(f"/dashboard/api/teams/{TEAM}").status_code == 401
    listed = gateway.cli("admin-key", "list").stdout
    assert re.search(rf"{key_id}\s+revoked\s+operator\s+temp-operator", listed), listed
    again = gateway.cli("admin-key", "revoke", key_id, check=False)
    assert again.returncode == 1
    assert "already revoked" in again.stderr
    assert gateway.cli("ledger", "verify").returncode == 0


def test_admin_keys_are_checked_when_issued(gateway: Gateway, keys):
    wrong_role = gateway.cli("admin-key", "issue", "--name", "x", "--role", "root", check=False)
    assert wrong_role.returncode == 2
    assert "invalid choice" in wrong_role.stderr
    taken = gateway.cli("admin-key", "issue", "--name", "alice-auditor", "--role", "operator", check=False)
    assert taken.returncode == 1
    assert "already in force" in taken.stderr
    bad_name = gateway.cli("admin-key", "issue", "--name", "no spaces", "--role", "auditor", check=False)
    assert bad_name.returncode == 1
    assert "name" in bad_name.stderr
    assert "Traceback" not in bad_name.stderr
    with client(gateway, keys["operator"][1]) as operator:
        long = operator.post(f"/admin/teams/{TEAM}/credits", json={"amount": "1", "reason": "x" * 501})
    assert long.status_code == 400
    assert long.json()["error"]["param"] == "reason"
