"""The team dashboard at /dashboard, used as people use it: real requests through the official
OpenAI SDK, then the page in headless Chromium (Debian's package, driven by Playwright), signed in
with the team's key and with the admin key; and its JSON API's rules over plain HTTP.

The browser is launched once for the module. Without Chromium these tests fail, never skip: CI
installs it (``apt-get install chromium``); ``TOLLGATE_TEST_CHROMIUM`` points elsewhere.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import openai
import pytest
from playwright.sync_api import Browser, Page

from app.store.event_store import open_ledger_store
from domain.settings import parse_settings
from tests.support import plain_http
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.long_history import build_history
from tests.support.screenshots import keep
from tests.support.teams import Team, Teams


@dataclass(frozen=True)
class Traffic:
    team: Team
    request_ids: list[str]  # x-request-id of each request, oldest first
    balance: str  # as `tollgate team show` prints it
    exports: dict[str, str]  # `tollgate ledger export --team NAME --format F`'s output, by format


def _root(gateway: Gateway) -> str:
    return gateway.base_url.removesuffix("/v1")


@pytest.fixture(scope="module")
def admin(gateway: Gateway) -> Iterator[httpx.Client]:
    """The admin API, one client for the module's tests, closed (its connections with it) after them."""
    with plain_http.Client(base_url=_root(gateway) + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as api:
        yield api


def _exact(answer: httpx.Response) -> dict:
    assert answer.status_code == 200, answer.text
    return json.loads(answer.text, parse_float=Decimal)


@pytest.fixture(scope="module")
def traffic(gateway: Gateway, teams: Teams, admin: httpx.Client) -> Traffic:
    """A team that opened with 100 credits, made three requests on two models and topped up once."""
    team = teams.open("100")
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        request_ids = []
        attributed = (("project=alpha", "alice"), ("project=beta", ""), ("", "alice"))  # tags, end user
        for model, (tags, user) in zip(("fake-gpt", "demo-gpt", "fake-gpt"), attributed, strict=True):
            raw = client.chat.completions.with_raw_response.create(
                model=model,
                messages=[{"role": "user", "content": "Hello, dashboard!"}],
                max_tokens=30,
                extra_headers={"x-tollgate-tags": tags} if tags else None,
                **({"user": user} if user else {}),
            )
            assert raw.parse().usage is not None
            request_ids.append(raw.headers["x-request-id"])
        # The gateway gives its credit lease back (its last write on the team) before the CLI, another
        # process, tops the team up: the gateway must still show the balance after the top-up.
        deadline = time.monotonic() + 10
        while _exact(admin.get(f"/teams/{team.name}"))["held"] != 0:
            assert time.monotonic() < deadline, "the gateway kept its credit lease on the team"
            time.sleep(0.05)
        gateway.cli("credits", "add", "--team", team.name, "25.5", "--reference", "INV-42")
        with ThreadPoolExecutor() as pool:  # what the operator's commands say, once for the module
            shown = pool.submit(gateway.cli, "team", "show", team.name)
            exports = {
                f: pool.submit(gateway.cli, "ledger", "export", "--team", team.name, "--format", f)
                for f in ("csv", "jsonl")
            }
            balance = re.search(r"balance (\S+) credits", shown.result().stdout).group(1)  # type: ignore[union-attr]
            return Traffic(team, request_ids, balance, {f: e.result().stdout for f, e in exports.items()})


@pytest.fixture
def page(browser: Browser, gateway: Gateway) -> Iterator[Page]:
    """A fresh tab (its own sessionStorage) on /dashboard; afterwards, everything it fetched must have
    come from the gateway (the page loads nothing from anywhere else), and nothing it ran or styled
    may have been refused by its Content-Security-Policy."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    tab = context.new_page()
    fetched: list[str] = []
    console: list[str] = []
    tab.on("request", lambda r: fetched.append(r.url))
    tab.on("console", lambda m: console.append(m.text))
    tab.goto(_root(gateway) + "/dashboard")
    yield tab
    context.close()
    elsewhere = [url for url in fetched if not url.startswith((_root(gateway) + "/", "blob:", "data:"))]
    assert not elsewhere, f"the page fetched something other than the gateway: {elsewhere}"
    refused = [m for m in console if "Content Security Policy" in m]
    assert not refused, f"the page's own script or style broke its Content-Security-Policy: {refused}"


def _sign_in(page: Page, key: str) -> None:
    page.fill("#key", key)
    page.click("#sign-in-button")


def _check_views(page: Page, traffic: Traffic) -> None:
    name = traffic.team.name
    page.wait_for_selector(f'body[data-loaded="{name}"]', timeout=10_000)
    assert page.text_content("#balance-value").replace(",", "") == traffic.balance  # type: ignore[union-attr]
    assert page.text_content("#team-state") == "active"
    assert page.locator("#requests-table .request-id").all_text_contents()[:3] == traffic.request_ids[::-1]
    for model in ("fake-gpt", "demo-gpt"):
        assert page.locator(f'#chart svg rect.bar[data-model="{model}"]').count() == 1, model
        assert page.locator(f'#legend li[data-model="{model}"]').count() == 1, model
    by_endpoint = page.locator("#usage-endpoints tbody tr")  # three chat completions, on two models
    assert by_endpoint.all_inner_texts()[0].split("\t")[:3] == ["Chat completions", "/v1/chat/completions", "3"]
    history = page.locator("#history-table tbody tr")
    assert history.count() == 7  # the team opened, the opening balance, its key issued, three charges, the top-up
    text = page.inner_text("#history-table tbody")
    assert "team opened" in text
    assert "key issued" in text  # an operator's actions, which move no money
    assert text.count("top-up") == 2
    assert text.count("charge") == 3
    assert "opening balance" in text
    assert "INV-42" in text
    assert "+25.5" in text
    assert all(request_id in text for request_id in traffic.request_ids)


def test_a_team_signs_in_and_sees_its_balance_requests_usage_and_history(
    page: Page, gateway: Gateway, traffic: Traffic, tmp_path: Path
):
    _sign_in(page, traffic.team.key)
    _check_views(page, traffic)
    assert page.locator("#picker").is_hidden()  # a team key sees its own team only

    with page.expect_download() as csv_download:
        page.click("#export-csv")
    assert csv_download.value.suggested_filename == f"tollgate-{traffic.team.name}-ledger.csv"
    exported = Path(csv_download.value.path()).read_text()
    assert exported == gateway.cli("ledger", "export", "--team", traffic.team.name).stdout
    assert len(exported.splitlines()) >= 8  # the header and seven entries (other tests may add some)

    keep(page, tmp_path, "dashboard-team.png")


def test_a_team_downloads_its_statement_of_the_month(page: Page, gateway: Gateway, traffic: Traffic, tmp_path: Path):
    """The statement card picks the current month (UTC): its download is the CLI's statement, and the
    tamper-evident one verifies."""
    name = traffic.team.name
    _sign_in(page, traffic.team.key)
    page.wait_for_selector(f'body[data-loaded="{name}"]')
    month = datetime.now(UTC).strftime("%Y-%m")
    assert page.input_value("#statement-month") == month
    with page.expect_download() as plain:
        page.click("#statement-download")
    assert plain.value.suggested_filename == f"tollgate-{name}-statement-{month}.csv"
    statement = gateway.cli("ledger", "statement", "--team", name, "--month", month, "--format", "csv").stdout
    assert Path(plain.value.path()).read_text() == statement
    assert ",reconciliation," in statement
    assert ",true," in next(line for line in statement.splitlines() if ",reconciliation," in line)

    page.select_option("#statement-format", "json")
    page.check("#statement-chained")
    with page.expect_download() as tamper_evident:
        page.click("#statement-download")
    assert tamper_evident.value.suggested_filename == f"tollgate-{name}-statement-{month}-chained.json"
    saved = tmp_path / tamper_evident.value.suggested_filename
    tamper_evident.value.save_as(saved)
    document = json.loads(saved.read_text())
    assert (document["reconciled"], len(document["entries"])) == (True, 5)
    assert "It is the statement the ledger gives" in gateway.cli("ledger", "verify", "--statement", str(saved)).stdout
    keep(page, tmp_path, "dashboard-statement.png")


def test_usage_by_attribution_is_filtered_by_a_tag_or_by_end_user(page: Page, traffic: Traffic, tmp_path: Path):
    """The select lists the team's dimensions; each one's values add up to the team's charges."""
    charges = [json.loads(line) for line in traffic.exports["jsonl"].splitlines()]
    spent = sum(-c["amount"] for c in charges if c["kind"] == "charge")
    _sign_in(page, traffic.team.key)
    page.wait_for_selector(f'body[data-loaded="{traffic.team.name}"]')
    assert page.locator("#attribution-by option").all_text_contents() == ["End user", "Tag project"]

    def shown() -> dict[str, tuple[str, str]]:
        rows = page.locator("#attribution-table tbody tr")
        return {
            rows.nth(i).locator("td").nth(0).text_content() or "": (
                rows.nth(i).locator("td").nth(1).text_content() or "",
                rows.nth(i).locator("td").nth(4).text_content() or "",
            )
            for i in range(rows.count())
        }

    assert set(shown()) == {"alice", "(none)"}
    assert shown()["alice"][0] == "2"
    page.select_option("#attribution-by", "tag:project")
    page.wait_for_selector("#attribution-table tbody td:has-text('beta')")
    by_project = shown()
    requests = {value: count for value, (count, _) in by_project.items()}
    assert requests == {"alpha": "1", "beta": "1", "(none)": "1"}
    assert sum(Decimal(cost.replace(",", "")) for _, cost in by_project.values()) * 1_000_000 == spent
    total = page.text_content("#attribution-total") or ""
    assert Decimal(total.replace(",", "")) * 1_000_000 == spent
    assert "project=alpha" in page.inner_text("#requests-table tbody")
    keep(page, tmp_path, "dashboard-attribution.png")


def test_the_admin_picks_a_team_and_signs_out(page: Page, gateway: Gateway, traffic: Traffic, tmp_path: Path):
    _sign_in(page, ADMIN_KEY)
    page.wait_for_selector("#picker:not([hidden])")
    assert page.is_visible("#choose")
    assert traffic.team.name in page.locator("#team-picker option").all_text_contents()
    page.select_option("#team-picker", traffic.team.name)
    _check_views(page, traffic)
    keep(page, tmp_path, "dashboard-admin.png")

    page.click("#sign-out")
    assert page.is_visible("#sign-in")
    assert page.is_hidden("#views")
    assert page.evaluate("sessionStorage.length") == 0


def test_the_audit_history_pages_through_every_entry(page: Page, gateway: Gateway, teams: Teams, admin: httpx.Client):
    team = teams.open("1")
    for n in range(24):
        topped_up = admin.post(f"/teams/{team.name}/credits", json={"amount": "0.5", "reference": f"T-{n}"})
        assert topped_up.status_code == 200
    _sign_in(page, team.key)
    page.wait_for_selector(f'body[data-loaded="{team.name}"]')
    assert page.text_content("#page-label") == "Page 1 of 2 · 27 entries"  # with the team opened and its key issued
    assert page.locator("#history-table tbody tr").count() == 20
    assert page.is_disabled("#newer")
    assert "T-23" in page.inner_text("#history-table tbody tr >> nth=0")  # latest first
    page.click("#older")
    page.wait_for_selector("#page-label:has-text('Page 2 of 2')")
    assert page.locator("#history-table tbody tr").count() == 7
    assert page.is_disabled("#older")
    assert "opening balance" in page.inner_text("#history-table tbody tr >> nth=-2")
    assert "team opened" in page.inner_text("#history-table tbody tr >> nth=-1")
    assert page.text_content("#balance-value") == "13"


def test_a_refused_key_stays_signed_out(page: Page):
    _sign_in(page, "tg-not-a-real-key")
    page.wait_for_selector("#sign-in-error:not([hidden])")
    assert "Incorrect API key" in page.text_content("#sign-in-error")  # type: ignore[operator]
    assert page.evaluate("sessionStorage.length") == 0


# -- the JSON API, over plain HTTP ---------------------------------------------------------------


def _api(gateway: Gateway, path: str, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return plain_http.get(_root(gateway) + "/dashboard/api" + path, headers=headers)


def _error_type(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    return answer.json()["error"]["type"]


def test_the_page_is_one_self_contained_document(gateway: Gateway):
    for path in ("/dashboard", "/dashboard/"):
        answer = plain_http.get(_root(gateway) + path)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", answer.text)  # nothing from elsewhere
        assert "<script>" in answer.text
        assert "<style>" in answer.text


def test_the_api_needs_a_live_key(gateway: Gateway, traffic: Traffic, teams: Teams, admin: httpx.Client):
    assert _error_type(_api(gateway, "/session", None), 401) == "authentication_error"
    assert _error_type(_api(gateway, "/session", "tg-wrong"), 401) == "authentication_error"
    assert _error_type(_api(gateway, f"/teams/{traffic.team.name}", "tg-wrong"), 401) == "authentication_error"
    team = teams.open("1").name  # not the traffic's: its history (where a key's issue shows) stays as it was
    issued = admin.post(f"/teams/{team}/keys", json={"name": "soon revoked"}).json()
    assert _exact(_api(gateway, "/session", issued["key"]))["team"] == team
    assert admin.post(f"/teams/{team}/keys/{issued['id']}/revoke").status_code == 200
    assert _error_type(_api(gateway, "/session", issued["key"]), 401) == "authentication_error"


def test_a_team_key_reads_its_own_team_only(gateway: Gateway, traffic: Traffic, teams: Teams):
    other = teams.open("5")
    key = traffic.team.key
    assert _exact(_api(gateway, "/session", key)) == {
        "role": "team",
        "team": traffic.team.name,
        "key_id": _exact(_api(gateway, "/session", key))["key_id"],
        "teams": [traffic.team.name],
    }
    assert _exact(_api(gateway, f"/teams/{traffic.team.name}", key))["name"] == traffic.team.name
    for path in (
        f"/teams/{other.name}",
        f"/teams/{other.name}/history",
        f"/teams/{other.name}/usage",
        f"/teams/{other.name}/requests",
        f"/teams/{other.name}/export",
        f"/teams/{other.name}/statements/2026-11",
        "/teams/no-such-team",
    ):
        assert _error_type(_api(gateway, path, key), 403) == "permission_error", path


def test_a_suspended_team_still_sees_its_dashboard(gateway: Gateway, teams: Teams, admin: httpx.Client):
    team = teams.open("3")
    assert admin.post(f"/teams/{team.name}/suspend", json={"reason": "unpaid"}).status_code == 200
    summary = _exact(_api(gateway, f"/teams/{team.name}", team.key))
    assert (summary["suspended"], summary["balance"]) == (True, Decimal(3))


def test_the_admin_key_reads_any_team(gateway: Gateway, traffic: Traffic, teams: Teams):
    other = teams.open("5")
    session = _exact(_api(gateway, "/session", ADMIN_KEY))
    assert session["role"] == "admin"
    assert session["team"] is None
    assert {traffic.team.name, other.name} <= set(session["teams"])
    assert _exact(_api(gateway, f"/teams/{other.name}", ADMIN_KEY))["balance"] == Decimal(5)
    summary = _exact(_api(gateway, f"/teams/{traffic.team.name}", ADMIN_KEY))
    assert f"{summary['balance']:f}" == traffic.balance
    assert summary["available"] == summary["balance"] - summary["held"]
    assert _error_type(_api(gateway, "/teams/no-such-team", ADMIN_KEY), 404) == "invalid_request_error"


def test_history_requests_and_usage_are_exact_credits(gateway: Gateway, traffic: Traffic):
    name, key = traffic.team.name, traffic.team.key
    first = _exact(_api(gateway, f"/teams/{name}/history?per_page=2", key))
    assert (first["total"], first["has_more"], len(first["data"])) == (7, True, 2)
    assert first["data"][0]["reference"] == "INV-42"  # newest first
    assert first["data"][0]["amount"] == Decimal("25.5")
    last = _exact(_api(gateway, f"/teams/{name}/history?page=3&per_page=2", key))
    assert [(e["kind"], e["reference"]) for e in last["data"]] == [("key_issued", ""), ("top_up", "opening balance")]
    oldest = _exact(_api(gateway, f"/teams/{name}/history?page=4&per_page=2", key))
    assert (oldest["has_more"], [(e["kind"], e["amount"]) for e in oldest["data"]]) == (False, [("team_opened", 0)])
    summary = _exact(_api(gateway, f"/teams/{name}", key))
    assert first["data"][0]["balance_after"] == summary["balance"]

    charges = _exact(_api(gateway, f"/teams/{name}/requests?limit=10", key))["data"]
    assert [c["request_id"] for c in charges] == traffic.request_ids[::-1]
    usage = _exact(_api(gateway, f"/teams/{name}/usage", key))
    by_model = {m["model"]: m for m in usage["by_model"]}
    assert (by_model["fake-gpt"]["requests"], by_model["demo-gpt"]["requests"]) == (2, 1)
    assert sum(m["cost"] for m in by_model.values()) == -sum(c["amount"] for c in charges)
    assert Decimal(100) + Decimal("25.5") + sum(c["amount"] for c in charges) == summary["balance"]
    assert _error_type(_api(gateway, f"/teams/{name}/history?page=0", key), 400) == "invalid_request_error"
    assert _error_type(_api(gateway, f"/teams/{name}/requests?limit=x", key), 400) == "invalid_request_error"


def test_export_is_an_attachment_with_the_cli_export_lines(gateway: Gateway, traffic: Traffic):
    name = traffic.team.name
    for fmt, media_type in (("csv", "text/csv"), ("jsonl", "application/x-ndjson")):
        answer = _api(gateway, f"/teams/{name}/export?format={fmt}", traffic.team.key)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith(media_type)
        assert answer.headers["content-disposition"] == f'attachment; filename="tollgate-{name}-ledger.{fmt}"'
        assert answer.text == gateway.cli("ledger", "export", "--team", name, "--format", fmt).stdout
    assert _error_type(_api(gateway, f"/teams/{name}/export?format=xml", ADMIN_KEY), 400) == "invalid_request_error"


def test_a_history_of_several_pages_downloads_as_the_cli_exports_it(gateway: Gateway):
    """More entries than a page (1000): the download streams them a page at a time, the CLI writes
    them a page at a time, and the two are the same bytes: the header once, every entry once, in
    ledger order."""
    name = f"long-{uuid.uuid4().hex[:8]}"
    settings = parse_settings(gateway.config.read_text(), str(gateway.config))
    store = open_ledger_store(settings.database_url, gateway.config.parent, pool_size=2)
    try:  # written beside the gateway, as by another gateway process
        build_history(store, {name: 1200}, batch=600, snapshot_every=None)
    finally:
        store.close()
    lines: list[str] = []
    for fmt in ("csv", "jsonl"):
        exported = gateway.cli("ledger", "export", "--team", name, "--format", fmt).stdout
        answer = _api(gateway, f"/teams/{name}/export?format={fmt}", ADMIN_KEY)
        assert answer.status_code == 200
        assert answer.text == exported
        lines = exported.splitlines()
        assert len(lines) == (fmt == "csv") + 3 + 1200  # the header, the team opened, its top-up, its key, the charges
    ids = [json.loads(line)["notification_id"] for line in lines]
    assert ids == sorted(set(ids))
