"""Every CSV a user may open in a spreadsheet, end to end: tags and end users that a spreadsheet would
take for formulas (``=HYPERLINK(…)``, ``+cmd|…``, ``@SUM(…)``, ``-2+3``), sent by real clients through
the official SDKs, and an operator's reference and reason (one with a space before its formula), come out of
``tollgate ledger export``, the dashboard's download, ``tollgate usage --format csv`` and the monthly
statement (CLI, admin API, dashboard) as text that is never evaluated — while the amounts, negative
ones included, stay numbers, and the chained statement still verifies against the ledger."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

TAGS = "x-tollgate-tags"
HI = [{"role": "user", "content": "hello spreadsheet"}]
#: What a spreadsheet evaluates a cell starting with (OWASP's list), unless the cell is a plain number.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
#: The end users, and the project tag's values, the requests carry.
USERS = ['=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0", "@SUM(A1:A2)", "-2+3"]
PROJECTS = ['=HYPERLINK("http://evil.example/x")', "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3"]
TOP_UP_REFERENCE = " =1+1"  # a TAB is refused where an operator's text enters (domain/client_text.py)
ADJUSTMENT_REASON = '=HYPERLINK("http://evil.example")'


@dataclass
class Hostile:
    team: Team
    month: str


def evaluated(text: str) -> list[str]:
    """The cells of a CSV a spreadsheet would evaluate as a formula."""
    return [
        cell
        for line in csv.reader(io.StringIO(text))
        for cell in line
        if cell and cell.lstrip(" ")[:1] in FORMULA_STARTS and not NUMBER.fullmatch(cell)
    ]


def cells(text: str) -> set[str]:
    return {cell for line in csv.reader(io.StringIO(text)) for cell in line}


def column(text: str, name: str) -> list[str]:
    return [row[name] for row in csv.DictReader(io.StringIO(text))]


@pytest.fixture(scope="module")
def hostile(gateway: Gateway, teams: Teams) -> Hostile:
    """A team's requests on every endpoint, each with an end user and a project tag that look like
    formulas (one also with a tag whose name starts with a dash), then an operator's top-up and
    correction whose reference and reason do too."""
    team = teams.open("100")
    with (
        openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client,
        anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude,
    ):
        client.chat.completions.create(
            model="fake-gpt", messages=HI, user=USERS[0], extra_headers={TAGS: f"project={PROJECTS[0]}"}
        )
        for _ in client.chat.completions.create(
            model="fake-claude", messages=HI, user=USERS[1], stream=True, extra_headers={TAGS: f"project={PROJECTS[1]}"}
        ):
            pass
        claude.messages.create(
            model="fake-claude",
            max_tokens=50,
            messages=HI,
            metadata={"user_id": USERS[2]},
            extra_headers={TAGS: f"project={PROJECTS[2]}"},
        )
        client.responses.create(
            model="fake-gpt",
            input="hello spreadsheet",
            user=USERS[3],
            extra_headers={TAGS: f"project={PROJECTS[3]},-x=y"},
        )
        gateway.wait_until_nothing_held(team.name)  # the gateway's lease given back: the correction takes no more
        gateway.cli("credits", "add", "--team", team.name, "5", "--reference", TOP_UP_REFERENCE)
        gateway.cli(
            "credits",
            "adjust",
            "--team",
            team.name,
            "--",
            "-1",
            "--reason",
            ADJUSTMENT_REASON,
            "--reference",
            "@SUM(1)",
        )
        return Hostile(team, datetime.now(UTC).strftime("%Y-%m"))


@pytest.fixture
def admin(gateway: Gateway) -> Iterator[httpx.Client]:
    with plain_http.Client(
        base_url=gateway.root_url + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30
    ) as client:
        yield client


def _dashboard(gateway: Gateway, team: Team, path: str) -> httpx.Response:
    answer = plain_http.get(
        f"{gateway.root_url}/dashboard/api/teams/{team.name}{path}",
        headers={"Authorization": f"Bearer {team.key}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer


def test_the_ledger_export_and_the_dashboards_download_evaluate_nothing(gateway: Gateway, hostile: Hostile):
    exported = gateway.cli("ledger", "export", "--team", hostile.team.name, "--format", "csv").stdout
    assert evaluated(exported) == []
    assert sorted(u for u in column(exported, "end_user") if u) == sorted("'" + user for user in USERS)
    assert "'-x=y,project=-2+3" in column(exported, "tags")
    assert f"'{TOP_UP_REFERENCE}" in column(exported, "reference")
    assert f"'{ADJUSTMENT_REASON}" in column(exported, "reason")
    amounts = column(exported, "amount")
    assert "-1000000" in amounts  # the correction: a number, unmarked
    assert sum(amount.startswith("-") for amount in amounts) == 5  # the four charges too
    assert all(NUMBER.fullmatch(amount) for amount in amounts)

    download = _dashboard(gateway, hostile.team, "/export?format=csv")
    assert download.text == exported
    jsonl = [
        json.loads(line)
        for line in gateway.cli(
            "ledger", "export", "--team", hostile.team.name, "--format", "jsonl"
        ).stdout.splitlines()
    ]
    assert sorted(row["end_user"] for row in jsonl if row["end_user"]) == sorted(USERS)  # JSON keeps the text


def test_usage_by_end_user_and_by_tag_as_csv_evaluates_nothing(gateway: Gateway, hostile: Hostile):
    for by, values in (("user", USERS), ("tag:project", PROJECTS)):
        shown = gateway.cli("usage", "--team", hostile.team.name, "--by", by, "--format", "csv").stdout
        assert evaluated(shown) == [], by
        assert set(column(shown, "value")) == {"'" + value for value in values}, by
        assert all(NUMBER.fullmatch(cost) for cost in column(shown, "cost"))


def test_the_statement_as_csv_evaluates_nothing_and_still_verifies(
    gateway: Gateway, hostile: Hostile, admin: httpx.Client, tmp_path: Path
):
    name, month = hostile.team.name, hostile.month
    written = gateway.cli("ledger", "statement", "--team", name, "--month", month, "--format", "csv").stdout
    answered = admin.get(f"/teams/{name}/statements/{month}", params={"format": "csv"})
    downloaded = _dashboard(gateway, hostile.team, f"/statements/{month}?format=csv")
    assert written == answered.text == downloaded.text
    assert evaluated(written) == []
    assert {f"'{TOP_UP_REFERENCE}", f"'{ADJUSTMENT_REASON}", "'@SUM(1)", "-1", "-1000000"} <= cells(written)

    chained = admin.get(f"/teams/{name}/statements/{month}", params={"format": "csv", "chained": "true"})
    assert evaluated(chained.text) == []
    path = tmp_path / "statement.csv"
    path.write_bytes(chained.content)
    verified = gateway.cli("ledger", "verify", "--statement", str(path))
    assert "It is the statement the ledger gives" in verified.stdout
    as_json = json.loads(admin.get(f"/teams/{name}/statements/{month}", params={"chained": "true"}).text)
    assert as_json["final_hash"] == chained.text.splitlines()[-1].split(",")[-1]  # the chain covers the text
    assert [e.get("reference") for e in as_json["entries"]][-2:] == [TOP_UP_REFERENCE, "@SUM(1)"]
