"""Every number an operator sets has a range (``domain/bounds.py``): out of it, the admin API answers
400 naming the field and the CLI a one-line error, and nothing is recorded. A team's rpm of 2**70 used
to be accepted, and then every key issued to the team failed ("bigint out of range")."""

from __future__ import annotations

import httpx
import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway
from tests.support.refusals import admin_headers, error_of

HUGE = 2**70


def admin(gateway: Gateway) -> httpx.Client:
    return plain_http.Client(base_url=f"{gateway.root_url}/admin", headers=admin_headers(), timeout=30)


def policy(api: httpx.Client, team: str) -> tuple[object, ...]:
    """What the team's ledger says of its limits, prices and alerts (a refused command changes none)."""
    shown = api.get(f"/teams/{team}").json()
    alerts = api.get(f"/teams/{team}/alerts").json()["thresholds"]
    return shown["rpm"], shown["tpm"], shown["price_adjustments"], alerts, [k["rpm"] for k in shown["keys"]]


@pytest.mark.parametrize(("path", "field"), [("/limits", "rpm"), ("/limits", "tpm")])
def test_a_team_limit_of_2_to_the_70_is_a_400_and_keys_can_still_be_issued(gateway: Gateway, team, path, field):
    with admin(gateway) as api:
        before = policy(api, team.name)
        refused = api.put(f"/teams/{team.name}{path}", json={field: HUGE})
        error = error_of(refused, 400)
        assert error["param"] == field
        assert "at most" in error["message"]
        assert policy(api, team.name) == before
        issued = api.post(f"/teams/{team.name}/keys", json={"name": "after"})
        assert issued.status_code == 201, issued.text
        assert api.put(f"/teams/{team.name}{path}", json={field: 10**9}).status_code == 200  # the most is taken


def test_a_new_team_or_key_with_a_limit_out_of_range_is_refused_and_not_made(gateway: Gateway, team):
    with admin(gateway) as api:
        refused = api.post("/teams", json={"name": "limitless", "credits": "1", "rpm": HUGE})
        assert error_of(refused, 400)["param"] == "rpm"
        assert api.get("/teams/limitless").status_code == 404
        keys = len(api.get(f"/teams/{team.name}/keys").json()["data"])
        refused = api.post(f"/teams/{team.name}/keys", json={"name": "k", "tpm": 10**12 + 1})
        assert error_of(refused, 400)["param"] == "tpm"
        assert len(api.get(f"/teams/{team.name}/keys").json()["data"]) == keys
        key_id = api.get(f"/teams/{team.name}/keys").json()["data"][0]["id"]
        refused = api.put(f"/teams/{team.name}/keys/{key_id}/limits", json={"rpm": HUGE})
        assert error_of(refused, 400)["param"] == "rpm"


def test_other_operator_numbers_out_of_range_are_400s(gateway: Gateway, team):
    with admin(gateway) as api:
        before = policy(api, team.name)
        for path, body in [
            ("/price-adjustment", {"percent": str(HUGE)}),
            ("/alerts", {"kind": "balance_below", "value": str(HUGE)}),
            ("/alerts", {"kind": "budget_percent", "value": "1001"}),
        ]:
            assert error_of(api.put(f"/teams/{team.name}{path}", json=body), 400)
        assert policy(api, team.name) == before


def test_the_cli_refuses_a_limit_of_2_to_the_70_in_one_line(gateway: Gateway, team):
    for args in (
        ["team", "limit", team.name, "--rpm", str(HUGE)],
        ["key", "create", "--team", team.name, "--tpm", str(HUGE)],
        ["team", "create", "limitless-cli", "--rpm", str(HUGE)],
    ):
        refused = gateway.cli(*args, check=False)
        assert refused.returncode == 2, refused
        error = refused.stderr.strip().splitlines()[-1]
        assert "at most 1,000" in error, refused.stderr
        assert refused.stdout == ""
    assert "rpm=- tpm=-" in gateway.cli("team", "show", team.name).stdout
    assert gateway.cli("team", "show", "limitless-cli", check=False).returncode == 1
    assert gateway.cli("key", "create", "--team", team.name).returncode == 0
