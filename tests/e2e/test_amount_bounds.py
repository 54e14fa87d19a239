"""Credit amounts on the admin API: anything that is not a finite number of micro-credits within
the largest one amount may be is a 400 naming the field, and the team's money is untouched."""

from __future__ import annotations

import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway
from tests.support.refusals import admin_headers, error_of, money_of

TOO_MUCH_OR_NOT_A_NUMBER = [
    "10000000000000",
    "1e999999",
    "1e999999999999",
    "NaN",
    "Infinity",
    "-Infinity",
    "-0",
    "1e18",
    "0.0000001",
    "1e-999999999",
    1e300,
    10**30,
]


@pytest.mark.parametrize("amount", TOO_MUCH_OR_NOT_A_NUMBER)
def test_a_top_up_out_of_range_or_not_a_number_is_a_400(gateway: Gateway, team, amount):
    response = plain_http.post(
        f"{gateway.root_url}/admin/teams/{team.name}/credits",
        json={"amount": amount},
        headers=admin_headers(),
        timeout=30,
    )
    assert error_of(response, 400)["param"] == "amount"
    assert money_of(gateway, team.name) == (100, 0)


@pytest.mark.parametrize("amount", ["1e20", "NaN", 10**30])
def test_a_new_team_s_credits_out_of_range_are_a_400_and_no_team_is_made(gateway: Gateway, amount):
    name = f"too-rich-{abs(hash(str(amount))) % 10**6}"
    response = plain_http.post(
        f"{gateway.root_url}/admin/teams", json={"name": name, "credits": amount}, headers=admin_headers(), timeout=30
    )
    assert error_of(response, 400)["param"] == "credits"
    assert plain_http.get(f"{gateway.root_url}/admin/teams/{name}", headers=admin_headers()).status_code == 404


def test_the_largest_top_up_is_added(gateway: Gateway, team):
    response = plain_http.post(
        f"{gateway.root_url}/admin/teams/{team.name}/credits",
        json={"amount": "10000000000"},
        headers=admin_headers(),
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert money_of(gateway, team.name) == (10_000_000_100, 0)
