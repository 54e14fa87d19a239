"""Numbers and times in the admin and dashboard query strings are bounded: a value the database
could not hold (an OFFSET past 64 bits) or would silently misread is a 400 that names it."""

from __future__ import annotations

import httpx
import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway
from tests.support.refusals import admin_headers, error_of

HUGE = str(10**30)


def _get(gateway: Gateway, path: str, key: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else admin_headers()
    return plain_http.get(gateway.root_url + path, headers=headers, timeout=30)


@pytest.mark.parametrize(
    ("query", "param"),
    [
        (f"page={HUGE}", "page"),
        ("page=1000001", "page"),
        ("page=0", "page"),
        ("page=-3", "page"),
        (f"per_page={HUGE}", "per_page"),
        ("per_page=0", "per_page"),
        ("per_page=1001", "per_page"),
        ("since=yesterday", "since"),
        ("since=2026-13-45", "since"),
    ],
)
def test_the_admin_history_s_paging_and_since_are_bounded(gateway: Gateway, team, query: str, param: str):
    assert error_of(_get(gateway, f"/admin/teams/{team.name}/history?{query}"), 400)["param"] == param


@pytest.mark.parametrize(
    ("path", "param"),
    [
        (f"history?page={HUGE}", "page"),
        ("history?page=1000001", "page"),
        ("history?page=0", "page"),
        (f"history?per_page={HUGE}", "per_page"),
        ("history?per_page=501", "per_page"),
        (f"requests?limit={HUGE}", "limit"),
        ("requests?limit=0", "limit"),
    ],
)
def test_the_dashboard_s_paging_is_bounded_for_a_team_key(gateway: Gateway, team, path: str, param: str):
    assert error_of(_get(gateway, f"/dashboard/api/teams/{team.name}/{path}", team.key), 400)["param"] == param


def test_the_last_page_allowed_is_served_empty(gateway: Gateway, team):
    answer = _get(gateway, f"/dashboard/api/teams/{team.name}/history?page=1000000&per_page=500", team.key)
    assert answer.status_code == 200
    assert answer.json()["data"] == []
    since = _get(gateway, f"/admin/teams/{team.name}/history?since=2020-01-01&per_page=1000&page=1000000")
    assert since.status_code == 200
    assert since.json()["data"] == []
    since_2020 = _get(gateway, f"/admin/teams/{team.name}/history?since=2020-01-01T00:00:00%2B00:00").json()
    assert since_2020["total"] == 3  # the team opened, its opening balance, its key issued
