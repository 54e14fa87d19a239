"""The admin API, over a real socket, with the admin key and without it."""

from __future__ import annotations

from decimal import Decimal

import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.gateway import ADMIN_KEY, Gateway


@pytest.fixture
def admin(gateway: Gateway) -> httpx.Client:
    with plain_http.Client(
        base_url=gateway.base_url.removesuffix("/v1") + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as client:
        yield client


def exact(response: httpx.Response):
    import json

    return json.loads(response.content, parse_float=Decimal)


def test_only_the_admin_key_opens_the_admin_api(gateway: Gateway, team):
    url = gateway.base_url.removesuffix("/v1") + "/admin/teams"
    anonymous = plain_http.get(url)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["type"] == "authentication_error"
    wrong = plain_http.get(url, headers={"Authorization": "Bearer not-the-admin-key"})
    assert wrong.status_code == 401
    team_key = plain_http.get(url, headers={"Authorization": f"Bearer {team.key}"})
    assert team_key.status_code == 403
    assert team_key.json()["error"]["type"] == "permission_error"


def test_teams_credits_and_balances(admin: httpx.Client):
    created = admin.post("/teams", json={"name": "admin-made", "credits": "12.5"})
    assert created.status_code == 201
    assert exact(created)["balance"] == Decimal("12.5")
    assert admin.post("/teams", json={"name": "admin-made"}).status_code == 409
    topped = admin.post("/teams/admin-made/credits", json={"amount": "0.25", "reference": "INV-9"})
    assert exact(topped)["balance"] == Decimal("12.75")
    assert exact(topped)["available"] == Decimal("12.75")
    assert "admin-made" in [t["name"] for t in admin.get("/teams").json()["data"]]
    bad = admin.post("/teams/admin-made/credits", json={"amount": "0.0000001"})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
    missing = admin.get("/teams/nobody")
    assert missing.status_code == 404
    assert "does not exist" in missing.json()["error"]["message"]


def test_keys_issue_restrict_revoke_and_their_effect(admin: httpx.Client, gateway: Gateway):
    admin.post("/teams", json={"name": "keyed", "credits": "50"})
    issued = admin.post("/teams/keyed/keys", json={"name": "ci", "models": ["fake-gpt"]}).json()
    with openai.OpenAI(base_url=gateway.base_url, api_key=issued["key"], max_retries=0) as client:
        client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.PermissionDeniedError):
            client.chat.completions.create(model="demo-gpt", messages=[{"role": "user", "content": "hi"}])

        assert admin.put(f"/teams/keyed/keys/{issued['id']}/models", json={"models": []}).status_code == 200
        client.chat.completions.create(model="demo-gpt", messages=[{"role": "user", "content": "hi"}])
        keys = admin.get("/teams/keyed/keys").json()["data"]
        assert keys == [
            {
                "id": issued["id"],
                "name": "ci",
                "revoked": False,
                "models": [],
                "endpoints": [],
                "rpm": None,
                "tpm": None,
                "clamp_output_to_balance": False,
                "budget": None,
            }
        ]
        assert "key" not in keys[0]  # secrets are shown once, at issue

        assert admin.post(f"/teams/keyed/keys/{issued['id']}/revoke").status_code == 200
        with pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "hi"}])
        assert admin.post(f"/teams/keyed/keys/{issued['id']}/revoke").status_code == 400
        assert admin.post("/teams/keyed/keys/key_nope/revoke").status_code == 404


def test_history_is_paginated_and_usage_is_summed(admin: httpx.Client, gateway: Gateway):
    admin.post("/teams", json={"name": "audited", "credits": "10"})
    key = admin.post("/teams/audited/keys", json={}).json()["key"]
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        answers = [
            client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": f"n {i}"}])
            for i in range(3)
        ]
        first = admin.get("/teams/audited/history", params={"per_page": 3}).json()
        assert (first["total"], first["has_more"], len(first["data"])) == (6, True, 3)
        second = admin.get("/teams/audited/history", params={"per_page": 3, "page": 2}).json()
        assert [e["kind"] for e in first["data"] + second["data"]] == [
            "team_opened",
            "top_up",
            "key_issued",
            "charge",
            "charge",
            "charge",
        ]
        assert {e["actor"] for e in first["data"]} == {"admin:config"}  # the operator's entries say who
        assert second["data"][-1]["balance_after"] == int(
            Decimal(str(answers[-1].usage.model_extra["remaining"]["credits"])) * 1_000_000
        )

        usage = exact(admin.get("/teams/audited/usage"))
        (gpt,) = usage["by_model"]
        assert gpt["model"] == "fake-gpt"
        assert gpt["requests"] == 3
        assert gpt["cost"] == sum(Decimal(str(a.usage.model_extra["cost"]["credits"])) for a in answers)
        assert admin.get("/teams/audited/history", params={"page": 0}).status_code == 400


def test_pricing_policy_through_the_admin_api(admin: httpx.Client, gateway: Gateway, teams):
    """A team's discount and its clamp, a key's own clamp, and the price list, as an operator's
    dashboard or script would set and read them; each change is a ledger event, seen by the gateway."""
    team = teams.open("100")
    adjusted = exact(
        admin.put(
            f"/teams/{team.name}/price-adjustment", json={"percent": "-10", "model": "fake-gpt", "reason": "partner"}
        )
    )
    assert adjusted["price_adjustments"] == [{"model": "fake-gpt", "percent": Decimal(-10)}]
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        cost = client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "hi"}]).usage
        assert cost.model_extra["cost"]["breakdown"]["adjustment"]["percent"] == -10
        unknown = admin.put(f"/teams/{team.name}/price-adjustment", json={"percent": "5", "model": "no-such-model"})
        assert unknown.status_code == 400
        assert admin.put(f"/teams/{team.name}/price-adjustment", json={"percent": "1001"}).status_code == 400

        clamped = admin.put(f"/teams/{team.name}/clamp", json={"clamp_output_to_balance": True}).json()
        assert clamped["clamp_output_to_balance"] is True
        key_id = admin.get(f"/teams/{team.name}/keys").json()["data"][0]["id"]
        assert admin.put(f"/teams/{team.name}/keys/{key_id}/clamp", json={"clamp_output_to_balance": False}).json() == {
            "id": key_id,
            "clamp_output_to_balance": False,
        }
        keys = admin.get(f"/teams/{team.name}/keys").json()["data"]
        assert keys[0]["clamp_output_to_balance"] is False  # the key's own setting wins over its team's

        prices = {m["model"]: m for m in admin.get("/prices").json()["data"]}
        assert prices["fake-gpt"]["in_force"] == prices["fake-gpt"]["entries"][-1]["ref"]
        assert prices["fake-gpt"]["entries"][-1]["price"]["input"] == "2.5"


def test_adjustments_are_events_of_their_own_with_a_reason_and_a_reference(
    admin: httpx.Client, gateway: Gateway, teams
):
    """A refund and a correction, from the CLI (a negative amount after ``--``, as the README shows)
    and the admin API: each is an adjustment entry in the audit history, the replay agrees, and a
    reference names one adjustment only."""
    team = teams.open("10")
    taken = gateway.cli(
        "credits", "adjust", "--team", team.name, "--", "-2.5", "--reason", "billed twice", "--reference", "TICKET-1"
    )
    assert "Took 2.5 credits" in taken.stdout
    again = gateway.cli(
        "credits",
        "adjust",
        "--team",
        team.name,
        "--",
        "-2.5",
        "--reason",
        "billed twice",
        "--reference",
        "TICKET-1",
        check=False,
    )
    assert again.returncode == 1
    assert "TICKET-1" in again.stderr
    given = exact(admin.post(f"/teams/{team.name}/adjustments", json={"amount": "1.25", "reason": "goodwill"}))
    assert given["balance"] == Decimal("8.75")
    assert admin.post(f"/teams/{team.name}/adjustments", json={"amount": "0", "reason": "x"}).status_code == 400
    assert admin.post(f"/teams/{team.name}/adjustments", json={"amount": "-100", "reason": "x"}).status_code == 400
    entries = admin.get(f"/teams/{team.name}/history").json()["data"]
    adjustments = [(e["amount"], e["reference"]) for e in entries if e["kind"] == "adjustment"]
    assert adjustments == [(-2_500_000, "billed twice (TICKET-1)"), (1_250_000, "goodwill")]
    assert gateway.cli("ledger", "verify", check=False).returncode == 0


def test_verify_callers_share_one_run_which_runs_outside_the_gateway_process(admin: httpx.Client, gateway: Gateway):
    """Issue #27, finding 11: four auditors verifying at once ran four replays in the gateway's own
    interpreter, beside the request path. Callers that ask while a run is under way now share it (the
    same report, started and finished at the same instants), and the run is a child process."""
    import threading
    import time

    answers: list[dict] = []

    def ask() -> None:
        with plain_http.Client(base_url=str(admin.base_url), headers=dict(admin.headers), timeout=120) as own:
            answers.append(own.get("/ledger/verify").json())

    assert gateway.process is not None
    children_before = _children(gateway.process.pid)
    callers = [threading.Thread(target=ask) for _ in range(4)]
    for caller in callers:
        caller.start()
    seen: set[str] = set()
    while any(c.is_alive() for c in callers):
        seen |= {cmd for pid, cmd in _children(gateway.process.pid).items() if pid not in children_before}
        time.sleep(0.01)
    for caller in callers:
        caller.join()
    assert len(answers) == 4
    assert all(a["ok"] for a in answers), answers[0]["problems"]
    assert len({(a["started_at"], a["finished_at"]) for a in answers}) == 1  # one run, shared
    assert any("app.ledger.verify_child" in cmd for cmd in seen)  # the replay ran in a process of its own
    later = admin.get("/ledger/verify", timeout=120).json()  # a whole run of its own, on the session's ledger
    assert later["started_at"] >= answers[0]["finished_at"]  # a caller after it ended gets a run of its own


def _children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their command lines (Linux's /proc)."""
    from pathlib import Path

    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    return found
