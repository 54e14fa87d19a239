"""Attribution by tags (``x-tollgate-tags``) and end user (``user``, ``metadata.user_id``): recorded
on every charge, through the official SDKs on every endpoint, passed through and translated, plain
and streamed; usage by each tag and by end user adds up to the team's charges exactly, through the
admin API and the CLI; a malformed tags header is refused in each endpoint's shape, charging nothing."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal

import anthropic
import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.backend import RawDatabase
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.teams import Team

TAGS = "x-tollgate-tags"
HI = [{"role": "user", "content": "hello attribution"}]


@pytest.fixture
def admin(gateway: Gateway) -> Iterator[httpx.Client]:
    with plain_http.Client(base_url=gateway.root_url + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as c:
        yield c


@pytest.fixture
def claude(gateway: Gateway, team: Team) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        yield claude


def _drain(stream) -> None:
    for _ in stream:
        pass


def _serve_attributed(client: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    """One request per endpoint × (passed through, translated) × (plain, streamed), some tagged."""
    client.chat.completions.create(
        model="fake-gpt", messages=HI, user="alice", extra_headers={TAGS: "project=alpha, env=ci"}
    )
    _drain(
        client.chat.completions.create(
            model="fake-claude", messages=HI, user="bob", stream=True, extra_headers={TAGS: "project=beta"}
        )
    )
    client.chat.completions.create(model="fake-claude", messages=HI)  # untagged, no end user
    client.responses.create(
        model="fake-codex", input="hello attribution", user="alice", extra_headers={TAGS: "project=alpha"}
    )
    _drain(client.responses.create(model="fake-gpt", input="hello attribution", user="carol", stream=True))
    _drain(
        client.responses.create(
            model="fake-codex",
            input="hello attribution",
            stream=True,
            extra_headers={TAGS: "env=prod,cost-center=r:d.7"},
        )
    )
    with claude.messages.stream(
        model="fake-claude",
        max_tokens=50,
        messages=HI,
        metadata={"user_id": "bob"},
        extra_headers={TAGS: "project=beta,env=prod"},
    ) as stream:
        stream.get_final_message()
    claude.messages.create(
        model="fake-gpt",
        max_tokens=50,
        messages=HI,
        metadata={"user_id": "dave"},
        extra_headers={TAGS: "project=gamma"},
    )
    claude.messages.create(model="fake-claude", max_tokens=50, messages=HI)


def _expected(charges: list[dict], dimension: str) -> dict[str, list[int]]:
    """(requests, cost in micro-credits) by value of ``dimension``, from the exported charges."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in charges:
        tags = dict(pair.split("=", 1) for pair in row["tags"].split(",") if pair)
        value = row["end_user"] if dimension == "user" else tags.get(dimension.removeprefix("tag:"), "")
        sums[value][0] += 1
        sums[value][1] += -row["amount"]
    return dict(sums)


def _by_value(data: list[dict]) -> dict[str, list[int]]:
    return {row["value"]: [row["requests"], row["cost_micros"]] for row in data}


def test_usage_by_tag_and_end_user_adds_up_to_the_teams_charges(
    gateway: Gateway,
    team: Team,
    client: openai.OpenAI,
    claude: anthropic.Anthropic,
    admin: httpx.Client,
    fake_upstream: FakeUpstream,
):
    _serve_attributed(client, claude)
    charges = gateway.charges(team.name)
    assert len(charges) == 9
    assert {(c["endpoint"], c["tags"], c["end_user"]) for c in charges} == {
        ("chat.completions", "env=ci,project=alpha", "alice"),
        ("responses", "project=alpha", "alice"),
        ("chat.completions", "project=beta", "bob"),
        ("messages", "env=prod,project=beta", "bob"),
        ("responses", "cost-center=r:d.7,env=prod", ""),
        ("messages", "project=gamma", "dave"),
        ("responses", "", "carol"),
        ("messages", "", ""),
        ("chat.completions", "", ""),
    }
    total = sum(-c["amount"] for c in charges)
    spent = plain_http.get(gateway.base_url + "/key", headers={"Authorization": f"Bearer {team.key}"}).json()["data"]
    assert Decimal(str(spent["usage"])) * 1_000_000 == total
    assert not any(TAGS in r.headers for r in fake_upstream.requests)  # Tollgate's own header stays here

    for dimension in ("user", "tag:project", "tag:env", "tag:cost-center", "tag:never-used"):
        answer = admin.get(f"/teams/{team.name}/usage", params={"by": dimension}).json()
        assert answer["by"] == dimension
        assert _by_value(answer["data"]) == _expected(charges, dimension)
        assert sum(row["cost_micros"] for row in answer["data"]) == total == answer["total"]["cost_micros"]
        assert answer["total"]["requests"] == 9
        shown = json.loads(gateway.cli("usage", "--team", team.name, "--by", dimension, "--format", "json").stdout)
        assert _by_value(shown["data"]) == _by_value(answer["data"])
    assert _expected(charges, "tag:project")[""] == [4, _expected(charges, "tag:project")[""][1]]

    table = gateway.cli("usage", "--team", team.name, "--by", "tag:project").stdout
    assert "(none)" in table
    assert "alpha" in table
    assert "gamma" in table
    csv_lines = gateway.cli("usage", "--team", team.name, "--by", "user", "--format", "csv").stdout.splitlines()
    assert csv_lines[0].startswith("value,requests,")
    assert len(csv_lines) == 1 + 5  # alice, bob, carol, dave, and no end user
    plain = admin.get(f"/teams/{team.name}/usage").json()  # without 'by': by model, endpoint and day
    assert set(plain) == {"team", "by_model", "by_endpoint", "daily"}

    exported = gateway.cli("ledger", "export", "--team", team.name).stdout.splitlines()
    assert exported[0].endswith(",tags,end_user,actor,reason,leaf")
    assert any(re.search(r',"env=ci,project=alpha",alice,,,[0-9]+$', line) for line in exported)  # then its leaf
    history = admin.get(f"/teams/{team.name}/history", params={"per_page": 100}).json()["data"]
    assert {(r["tags"], r["end_user"]) for r in history if r["kind"] == "charge"} == {
        (c["tags"], c["end_user"]) for c in charges
    }

    before = {d: admin.get(f"/teams/{team.name}/usage", params={"by": d}).json() for d in ("user", "tag:project")}
    assert gateway.cli("ledger", "verify").returncode == 0
    gateway.cli("ledger", "rebuild")
    assert {d: admin.get(f"/teams/{team.name}/usage", params={"by": d}).json() for d in before} == before
    assert gateway.cli("ledger", "verify").returncode == 0


def test_since_limits_the_days(gateway: Gateway, team: Team, client: openai.OpenAI, admin: httpx.Client):
    client.chat.completions.create(model="fake-gpt", messages=HI, user="erin")
    assert [
        r["value"]
        for r in admin.get(f"/teams/{team.name}/usage", params={"by": "user", "since": "2000-01-01"}).json()["data"]
    ] == ["erin"]
    assert admin.get(f"/teams/{team.name}/usage", params={"by": "user", "since": "2999-01-01"}).json()["data"] == []


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("project", "is not name=value"),
        ("project=alpha,project=beta", "given twice"),
        ("bad name=x", "tag name"),
        ("project=", "value of tag 'project'"),
        ("k=" + "v" * 129, "value of tag 'k'"),
        (",".join(f"t{i}=v" for i in range(11)), "at most 10 tags"),
    ],
)
def test_a_malformed_tags_header_is_refused_in_each_endpoints_shape(
    gateway: Gateway,
    team: Team,
    header: str,
    says: str,
    client: openai.OpenAI,
    claude: anthropic.Anthropic,
    fake_upstream: FakeUpstream,
):
    sent_before = len(fake_upstream.requests)
    for call in (
        lambda: client.chat.completions.create(model="fake-gpt", messages=HI, extra_headers={TAGS: header}),
        lambda: client.responses.create(model="fake-codex", input="hi", stream=True, extra_headers={TAGS: header}),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            call()
        error = refused.value.body
        assert error["type"] == "invalid_request_error"
        assert TAGS in error["message"]
        assert says in error["message"]
    with pytest.raises(anthropic.BadRequestError) as refused_message:
        claude.messages.create(model="fake-claude", max_tokens=20, messages=HI, extra_headers={TAGS: header})
    body = refused_message.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert says in body["error"]["message"]
    assert len(fake_upstream.requests) == sent_before  # nothing went upstream
    assert gateway.charges(team.name) == []
    assert "balance 100 credits, held 0," in gateway.cli("team", "show", team.name).stdout


def test_a_long_or_non_string_end_user_goes_upstream_unchanged(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    long_user = "u" * 300
    client.chat.completions.create(model="fake-gpt", messages=HI, user=long_user)
    assert fake_upstream.requests[-1].body["user"] == long_user
    client.chat.completions.create(model="fake-gpt", messages=HI, extra_body={"user": 42})
    assert fake_upstream.requests[-1].body["user"] == 42
    assert [c["end_user"] for c in gateway.charges(team.name)] == ["u" * 256, ""]


def test_usage_by_refuses_an_unknown_dimension(admin: httpx.Client, gateway: Gateway, team: Team):
    refused = admin.get(f"/teams/{team.name}/usage", params={"by": "model"})
    assert refused.status_code == 400
    assert "unknown dimension" in refused.json()["error"]["message"]
    assert admin.get("/teams/nobody-at-all/usage", params={"by": "user"}).status_code == 404
    cli = gateway.cli("usage", "--team", team.name, "--by", "tag:", check=False)
    assert cli.returncode == 2
    assert "--by" in cli.stderr
    missing = gateway.cli("usage", "--team", "nobody-at-all", "--by", "user", check=False)
    assert missing.returncode == 1
    assert "does not exist" in missing.stderr


def test_a_client_cannot_grow_usage_by_attribution_without_bound(gateway: Gateway, team: Team, admin: httpx.Client):
    """Issue #27, finding 12: 200 requests, each with ten tags of fresh names and a fresh end user,
    made 2,200 rows of usage by attribution and a 183 KB answer. Per team and day only the first 20
    tag names are counted by name, and each dimension's values are bounded
    (``domain/attribution_bounds.py``); answers come a page at a time; every value still adds up."""
    body = {"model": "fake-gpt", "messages": HI}
    headers = {"Authorization": f"Bearer {team.key}"}
    with plain_http.Client(base_url=gateway.base_url, headers=headers) as http:
        for i in range(200):
            tags = ",".join(f"n{i}x{j}=v{i}" for j in range(10))
            answer = http.post("/chat/completions", json={**body, "user": f"user-{i}"}, headers={TAGS: tags})
            assert answer.status_code == 200, answer.text
    raw = RawDatabase.of_config(gateway.config)
    gateway.cli("ledger", "history", "--team", team.name)  # the projection caught up
    rows = raw.execute(
        "SELECT dimension, COUNT(*) FROM usage_by_attribution WHERE team_name = ? GROUP BY dimension", (team.name,)
    )
    assert sum(n for _, n in rows) == 200 + 20  # each end user, and the first 20 tag names' one value
    assert len(rows) == 1 + 20

    first = admin.get(f"/teams/{team.name}/usage", params={"by": "user"})
    assert len(first.content) < 40_000
    answer = first.json()
    assert (answer["values"], answer["per_page"], len(answer["data"]), answer["has_more"]) == (200, 100, 100, True)
    assert len(answer["dimensions"]) == 21
    second = admin.get(f"/teams/{team.name}/usage", params={"by": "user", "page": 2}).json()
    assert second["has_more"] is False
    values = [r["value"] for r in answer["data"] + second["data"]]
    assert sorted(values) == sorted(f"user-{i}" for i in range(200))
    total = sum(-c["amount"] for c in gateway.charges(team.name))
    assert sum(r["cost_micros"] for r in answer["data"] + second["data"]) == total == answer["total"]["cost_micros"]
    late = admin.get(f"/teams/{team.name}/usage", params={"by": "tag:n150x0"}).json()  # a name past the 20th
    assert late["data"] == [{**late["data"][0], "value": ""}]  # not counted by name: all under (none)
    assert late["data"][0]["cost_micros"] == total
    refused = admin.get(f"/teams/{team.name}/usage", params={"by": "user", "per_page": 1001})
    assert refused.status_code == 400
    assert gateway.cli("ledger", "verify").returncode == 0
