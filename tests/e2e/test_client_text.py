"""Text a client sends that the ledger would record (the end user, the tags header, an
Idempotency-Key, an operator's reason) is checked where it enters (``domain/client_text.py``):
UTF-8, no NUL, no control or bidirectional control characters, bounded. A value that breaks the rule
is a 400 in the endpoint's own error shape naming the field, and moves no money; and one team's
hostile request never stops what other teams read (issue #27, finding 1: an end user holding NUL
once stopped the audit history projection, on PostgreSQL, for every team).

These tests run on a gateway of their own, on a fresh ledger: on the tree before the fix, their
first request poisoned its projection for good."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, write_config
from tests.support.teams import Team, Teams

HI = [{"role": "user", "content": "hello hostile text"}]
EVIL = "evil\u0000user"
TAGS = "x-tollgate-tags"


@pytest.fixture(scope="module")
def own_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gateway = Gateway(write_config(tmp_path_factory.mktemp("client-text"), fake_upstream.base_url)).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def two_teams(own_gateway: Gateway) -> tuple[Team, Team]:
    teams = Teams(own_gateway.config)
    pair = teams.open("10"), teams.open("10")
    teams.close()
    return pair


def _admin(gateway: Gateway) -> httpx.Client:
    return plain_http.Client(base_url=gateway.root_url + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"})


def _balance_line(gateway: Gateway, team: Team) -> str:
    return gateway.cli("team", "show", team.name).stdout


def test_a_nul_in_the_end_user_is_refused_and_every_team_reads_on(
    own_gateway: Gateway, two_teams: tuple[Team, Team], fake_upstream: FakeUpstream
):
    gateway = own_gateway
    evil, other = two_teams
    before = _balance_line(gateway, evil)
    sent = len(fake_upstream.requests)
    with (
        openai.OpenAI(base_url=gateway.base_url, api_key=evil.key, max_retries=0) as client,
        anthropic.Anthropic(base_url=gateway.root_url, api_key=evil.key, max_retries=0) as claude,
    ):
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(model="fake-gpt", messages=HI, user=EVIL)
        assert chat.value.body["type"] == "invalid_request_error"
        assert chat.value.body["param"] == "user"
        assert "'user'" in chat.value.body["message"]
        assert "U+0000" in chat.value.body["message"]
        with pytest.raises(openai.BadRequestError) as responses:
            client.responses.create(model="fake-codex", input="hi", user=EVIL, stream=True)
        assert responses.value.body["param"] == "user"
        with pytest.raises(anthropic.BadRequestError) as messages:
            claude.messages.create(model="fake-claude", max_tokens=20, messages=HI, metadata={"user_id": EVIL})
        assert messages.value.body["type"] == "error"
        assert messages.value.body["error"]["type"] == "invalid_request_error"
        assert "'metadata.user_id'" in messages.value.body["error"]["message"]
        with pytest.raises(anthropic.BadRequestError):  # a bidirectional control reads one way, is another
            claude.messages.create(
                model="fake-claude", max_tokens=20, messages=HI, metadata={"user_id": "abc\u202edef"}
            )

        assert len(fake_upstream.requests) == sent  # nothing went upstream
        assert gateway.charges(evil.name) == []
        assert _balance_line(gateway, evil) == before  # nothing held or charged

        # The other team: served, its key, history and usage read, the projection current, verify clean.
        with openai.OpenAI(base_url=gateway.base_url, api_key=other.key, max_retries=0) as sdk:
            sdk.chat.completions.create(model="fake-gpt", messages=HI, user="alice")
            key = plain_http.get(gateway.base_url + "/key", headers={"Authorization": f"Bearer {other.key}"})
            assert key.status_code == 200
            assert key.json()["data"]["usage"] > 0
            with _admin(gateway) as admin:
                history = admin.get(f"/teams/{other.name}/history")
                assert history.status_code == 200
                assert [r["end_user"] for r in history.json()["data"] if r["kind"] == "charge"] == ["alice"]
                usage = admin.get(f"/teams/{other.name}/usage", params={"by": "user"})
                assert usage.status_code == 200
                assert [r["value"] for r in usage.json()["data"]] == ["alice"]
            dashboard = plain_http.get(
                gateway.root_url + f"/dashboard/api/teams/{other.name}/history",
                headers={"Authorization": f"Bearer {other.key}"},
            )
            assert dashboard.status_code == 200
            verify = gateway.cli("ledger", "verify", check=False)
            assert verify.returncode == 0, verify.stderr


def test_tags_are_utf8_and_a_control_or_bidi_character_in_them_is_refused(
    own_gateway: Gateway, two_teams: tuple[Team, Team]
):
    gateway = own_gateway
    team = two_teams[1]
    headers = {"Authorization": f"Bearer {team.key}", "content-type": "application/json"}
    body = b'{"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}'
    with plain_http.Client(base_url=gateway.base_url) as http:
        ok = http.post(
            "/chat/completions", content=body, headers=[*headers.items(), (TAGS, "project=caf\u00e9".encode())]
        )
        assert ok.status_code == 200, ok.text
        for raw, says in (
            (b"project=\xe2\x80\xaeevil", "U+202E"),
            (b"project=a\xc2\x85b", "U+0085"),
            (b"project=\xff\xfe", "not valid UTF-8"),
        ):
            refused = http.post("/chat/completions", content=body, headers=[*headers.items(), (TAGS, raw)])
            assert refused.status_code == 400
            assert TAGS in refused.json()["error"]["message"]
            assert says in refused.json()["error"]["message"]
    charges = gateway.charges(team.name)
    assert [c["tags"] for c in charges if c["tags"]] == ["project=caf\u00e9"]
    with _admin(gateway) as admin:
        usage = admin.get(f"/teams/{team.name}/usage", params={"by": "tag:project"}).json()
    assert "caf\u00e9" in [r["value"] for r in usage["data"]]


def test_an_idempotency_key_and_an_operators_reason_follow_the_same_rule(
    own_gateway: Gateway, two_teams: tuple[Team, Team]
):
    gateway = own_gateway
    team = two_teams[1]
    before = gateway.wait_until_nothing_held(team.name)
    body = b'{"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}'
    refused = plain_http.post(
        gateway.base_url + "/chat/completions",
        content=body,
        headers=[
            ("Authorization", f"Bearer {team.key}"),
            ("content-type", "application/json"),
            ("Idempotency-Key", "k\u0085ey".encode()),
        ],
    )
    assert refused.status_code == 400
    assert "Idempotency-Key" in refused.json()["error"]["message"]
    assert "U+0085" in refused.json()["error"]["message"]
    with _admin(gateway) as admin:
        reason = admin.post(f"/teams/{team.name}/credits", json={"amount": "1", "reason": "bad\u0000reason"})
        assert reason.status_code == 400
        assert reason.json()["error"]["param"] == "reason"
        reference = admin.post(f"/teams/{team.name}/credits", json={"amount": "1", "reference": "INV\u202e7"})
        assert reference.status_code == 400
        assert reference.json()["error"]["param"] == "reference"
    cli = gateway.cli("credits", "add", "--team", team.name, "1", "--reason", "bad\x1breason", check=False)
    assert cli.returncode == 2
    assert "U+001B" in cli.stderr
    assert gateway.wait_until_nothing_held(team.name) == before
