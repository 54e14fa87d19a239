"""Looking a request up by the ``x-request-id`` its answer carried, through real sockets: the official
SDKs make the requests, ``GET /v1/requests/{id}`` (the same team key) and ``GET /admin/requests/{id}``
(the admin key) must tell what the answer's ``usage`` said and what the ledger charged — to the
micro-credit — with the status, the deployment that answered and the attempts it took."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, write_config
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

MESSAGES = [{"role": "user", "content": "what does a lookup say"}]


def _get(gateway: Gateway, path: str, key: str) -> httpx.Response:
    return plain_http.get(gateway.root_url + path, headers={"authorization": f"Bearer {key}"}, timeout=10)


def _decoded(answer: httpx.Response) -> Any:
    return json.loads(answer.content, parse_float=Decimal)  # credits exactly as sent


def lookup(gateway: Gateway, team: Team, request_id: str) -> dict[str, Any]:
    """The team's lookup of the request, once nothing of it is pending (its record is written in
    batches, within a second of the answer; a request that was not charged is known by its record alone)."""
    deadline = time.monotonic() + 10
    while True:
        answer = _get(gateway, f"/v1/requests/{request_id}", team.key)
        if answer.status_code == 404 and time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = _decoded(answer)["data"]
        if not data["pending"] or time.monotonic() > deadline:
            return data
        time.sleep(0.05)


def key_id_of(gateway: Gateway, team: Team) -> str:
    return str(_get(gateway, "/v1/key", team.key).json()["data"]["key_id"])


def charge_of(gateway: Gateway, team: Team, request_id: str) -> dict[str, Any]:
    """The request's charge in the ledger's audit export (amounts in micro-credits)."""
    rows = [
        json.loads(line)
        for line in gateway.cli("ledger", "export", "--team", team.name, "--format", "jsonl").stdout.splitlines()
    ]
    (row,) = [r for r in rows if r["kind"] == "charge" and r["request_id"] == request_id]
    return row


def assert_charged_as_told(
    gateway: Gateway, team: Team, data: dict[str, Any], cost: dict[str, Any], remaining: Decimal
) -> None:
    """The lookup's cost is the answer's ``usage.cost``, and both are the ledger's charge."""
    charge = charge_of(gateway, team, data["id"])
    assert data["outcome"] == "charged"
    assert data["cost"] == cost
    assert data["total_cost"] == cost["credits"]
    assert data["charged_micros"] == -charge["amount"] == data["cost_micros"]
    assert Decimal(data["charged_micros"]) / 1_000_000 == data["total_cost"]
    assert data["balance_after"] == remaining
    assert data["balance_after_micros"] == charge["balance_after"]
    assert data["tokens"]["input"] == charge["input_tokens"]
    assert data["tokens_completion"] == charge["output_tokens"]
    assert data["price"]["rates"]["input"] == "2.5" if data["model"] == "fake-gpt" else True
    assert data["key_id"] == key_id_of(gateway, team)
    assert data["team"] == team.name
    assert data["status"] == 200
    assert data["pending"] == []
    assert data["unit"] == "credits"
    assert data["upstream"]["attempts"] >= 1
    assert 0 <= data["latency"] <= data["generation_time"]


def test_a_chat_completion_is_found_by_its_request_id(gateway: Gateway, team: Team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=MESSAGES)
        completion = raw.parse()
        request_id = raw.headers["x-request-id"]
        usage = json.loads(raw.content, parse_float=Decimal)["usage"]
        at_once = _decoded(_get(gateway, f"/v1/requests/{request_id}", team.key))["data"]
        # The charge is in the ledger before the answer's last byte; the record may still be on its way.
        assert (at_once["outcome"], at_once["total_cost"]) == ("charged", usage["cost"]["credits"])
        assert at_once["pending"] in ([], ["record"])
        data = lookup(gateway, team, request_id)
        assert data["id"] == request_id
        assert (data["model"], data["endpoint"], data["streamed"]) == ("fake-gpt", "chat.completions", False)
        assert data["tokens_prompt"] == completion.usage.prompt_tokens
        assert data["tokens_completion"] == completion.usage.completion_tokens
        assert_charged_as_told(gateway, team, data, usage["cost"], usage["remaining"]["credits"])
        assert data["upstream"] == {"deployment": 0, "upstream_model": "gpt-x", "attempts": 1, "errors": []}
        assert data["tags"] == {}
        assert data["error"] is None


def test_a_stream_is_found_with_what_its_final_usage_said(gateway: Gateway, team: Team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        stream = client.chat.completions.create(
            model="fake-gpt", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
        usage = chunks[-1].usage
        assert usage is not None
        told = usage.model_extra or {}
        data = lookup(gateway, team, stream.response.headers["x-request-id"])
        assert data["streamed"] is True
        assert data["tokens_prompt"] == usage.prompt_tokens
        assert data["tokens_completion"] == usage.completion_tokens
        cost = json.loads(json.dumps(told["cost"]), parse_float=Decimal)
        assert_charged_as_told(gateway, team, data, cost, Decimal(str(told["remaining"]["credits"])))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_anthropic_message_is_found_by_its_request_id(gateway: Gateway, team: Team, stream: bool):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        if stream:
            events = claude.messages.create(model="fake-claude", max_tokens=50, messages=MESSAGES, stream=True)
            (delta,) = [e for e in events if e.type == "message_delta"]
            request_id, told = events.response.headers["x-request-id"], delta.usage.model_extra or {}
            output_tokens = delta.usage.output_tokens
        else:
            raw = claude.messages.with_raw_response.create(model="fake-claude", max_tokens=50, messages=MESSAGES)
            message = raw.parse()
            request_id, told = raw.headers["x-request-id"], message.usage.model_extra or {}
            output_tokens = message.usage.output_tokens
            assert lookup(gateway, team, request_id)["tokens_prompt"] == message.usage.input_tokens
        data = lookup(gateway, team, request_id)
        assert (data["model"], data["endpoint"], data["streamed"]) == ("fake-claude", "messages", stream)
        assert data["tokens_completion"] == output_tokens
        cost = json.loads(json.dumps(told["cost"]), parse_float=Decimal)
        assert_charged_as_told(gateway, team, data, cost, Decimal(str(told["remaining"]["credits"])))
        assert data["upstream"]["upstream_model"] == "claude-x"


def test_another_teams_request_is_not_found_exactly_as_an_unknown_one(gateway: Gateway, team: Team, teams: Teams):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        request_id = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=MESSAGES).headers[
            "x-request-id"
        ]
        lookup(gateway, team, request_id)  # written: the other team is refused what exists
        other = teams.open("10")
        theirs = _get(gateway, f"/v1/requests/{request_id}", other.key)
        unknown_id = "req_" + "0" * 24
        unknown = _get(gateway, f"/v1/requests/{unknown_id}", team.key)
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json() == json.loads(unknown.text.replace(unknown_id, request_id))
        assert theirs.json()["error"]["code"] == "request_not_found"
        assert theirs.json()["error"]["type"] == "invalid_request_error"
        assert _get(gateway, f"/v1/requests/{request_id}", "sk-not-a-key").status_code == 401
        assert plain_http.get(f"{gateway.root_url}/v1/requests/{request_id}").status_code == 401


def test_the_admin_finds_any_teams_request_and_a_team_key_may_not_use_its_route(gateway: Gateway, team: Team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        request_id = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=MESSAGES).headers[
            "x-request-id"
        ]
        own = lookup(gateway, team, request_id)
        admin = _get(gateway, f"/admin/requests/{request_id}", ADMIN_KEY)
        assert admin.status_code == 200
        assert _decoded(admin)["data"] == own
        assert _get(gateway, f"/admin/requests/{request_id}", team.key).status_code == 403
        missing = _get(gateway, "/admin/requests/req_nothing", ADMIN_KEY)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "request_not_found"


def test_a_request_whose_upstream_failed_shows_its_status_attempts_and_no_charge(gateway: Gateway, team: Team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as error:  # both of twin-gpt's deployments answer 500
            client.chat.completions.create(model="twin-gpt", messages=[{"role": "user", "content": "x [[fail:500]]"}])
        data = lookup(gateway, team, error.value.response.headers["x-request-id"])
        assert data["status"] == 500
        assert data["outcome"] == "not_charged"
        assert data["error"]
        assert (data["total_cost"], data["charged_micros"], data["balance_after"], data["cost"]) == (0, 0, None, None)
        assert data["upstream"]["attempts"] == 2
        assert len(data["upstream"]["errors"]) == 2
        assert data["model"] == "twin-gpt"
        assert data["pending"] == []


def test_a_record_echoing_nul_is_kept_and_the_records_after_it_too(gateway: Gateway, team: Team):
    """A request's record echoes what its client sent (an unknown model's name, in its error): one
    holding NUL once failed every batch of records after it, on PostgreSQL, for every team. Its text
    is stored as the projections store it (``app/store/storable.py``)."""
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as unknown:
            client.chat.completions.create(model="evil\u0000model", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.InternalServerError) as failed:
            client.chat.completions.create(model="twin-gpt", messages=[{"role": "user", "content": "x [[fail:500]]"}])
        after = lookup(gateway, team, failed.value.response.headers["x-request-id"])  # known by its record alone
        assert (after["status"], after["outcome"]) == (500, "not_charged")
        poisoned = lookup(gateway, team, unknown.value.response.headers["x-request-id"])
        assert poisoned["status"] == 404
        assert "evil\ufffdmodel" in poisoned["error"]


def test_a_failover_shows_the_deployment_that_answered_and_the_attempts(gateway: Gateway, team: Team):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        raw = claude.messages.with_raw_response.create(model="overloaded-claude", max_tokens=50, messages=MESSAGES)
        told = raw.parse().usage.model_extra or {}
        data = lookup(gateway, team, raw.headers["x-request-id"])
        assert data["upstream"] == {
            "deployment": 1,
            "upstream_model": "claude-b",
            "attempts": 2,
            "errors": ["overloaded"],
        }
        cost = json.loads(json.dumps(told["cost"]), parse_float=Decimal)
        assert_charged_as_told(gateway, team, data, cost, Decimal(str(told["remaining"]["credits"])))


def test_both_routes_are_in_the_openapi_document(gateway: Gateway):
    paths = plain_http.get(gateway.root_url + "/schema/openapi.json").json()["paths"]
    own = paths["/v1/requests/{request_id}"]["get"]
    assert {"401", "404"} <= set(own["responses"])
    assert "404" in paths["/admin/requests/{request_id}"]["get"]["responses"]


def test_any_gateway_process_on_the_ledger_answers_for_another_s_requests(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    served_by, asked = Gateway(config).start(), Gateway(config).start()
    try:
        teams = Teams(config)
        team = teams.open("10")
        teams.close()
        with openai.OpenAI(base_url=served_by.base_url, api_key=team.key, max_retries=0) as client:
            raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=MESSAGES)
            usage = json.loads(raw.content, parse_float=Decimal)["usage"]
            data = lookup(asked, team, raw.headers["x-request-id"])
            assert data["pending"] == []
            assert (data["status"], data["total_cost"]) == (200, usage["cost"]["credits"])
    finally:
        served_by.stop()
        asked.stop()


def test_without_records_a_charge_is_still_found_with_its_record_pending(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, settings="request_record_days = 0")
    gateway = Gateway(config).start()
    try:
        teams = Teams(config)
        team = teams.open("10")
        teams.close()
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
            raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=MESSAGES)
            usage = json.loads(raw.content, parse_float=Decimal)["usage"]
            data = _decoded(_get(gateway, f"/v1/requests/{raw.headers['x-request-id']}", team.key))["data"]
            assert data["pending"] == ["record"]
            assert (data["outcome"], data["cost"], data["balance_after"]) == (
                "charged",
                usage["cost"],
                usage["remaining"]["credits"],
            )
            assert (data["status"], data["streamed"], data["upstream"], data["latency"]) == (None, None, None, None)
    finally:
        gateway.stop()
