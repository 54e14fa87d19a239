"""Metrics and logs, asserted after real traffic through a real gateway: what Prometheus scrapes and
what the log says must agree with what the clients were answered and charged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anthropic
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, free_port, write_config
from tests.support.teams import Team, Teams


class Observed:
    def __init__(self, gateway: Gateway, teams: Teams, metrics_url: str) -> None:
        self.gateway, self.teams, self.metrics_url = gateway, teams, metrics_url

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        answer = plain_http.get(self.metrics_url)
        content_type = answer.headers["content-type"]
        assert answer.status_code == 200
        assert content_type.startswith("text/plain")
        assert content_type.count("charset") == 1
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        return self.samples().get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Observed]:
    """A gateway of its own (the metrics count only this module's traffic), with its metrics on a
    separate port."""
    port = free_port()
    config = write_config(
        tmp_path_factory.mktemp("observed"), fake_upstream.base_url, settings=f"metrics_port = {port}"
    )
    gateway = Gateway(config).start()
    teams = Teams(config)
    try:
        yield Observed(gateway, teams, f"http://127.0.0.1:{port}/metrics")
    finally:
        teams.close()
        gateway.stop()


@pytest.fixture(scope="module")
def traffic(observed: Observed) -> dict[str, Any]:
    """One of each: answered plain and streamed, translated, refused for credit, rate limited,
    upstream down, failed over. Returns what the clients saw."""
    gateway = observed.gateway
    team = observed.teams.open("100")
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        seen: dict[str, Any] = {"team": team, "answers": []}

        for text in ("first question", "second question"):
            raw = client.chat.completions.with_raw_response.create(
                model="fake-gpt", messages=[{"role": "user", "content": text}]
            )
            seen["answers"].append((raw.headers["x-request-id"], raw.parse().usage))
        with client.chat.completions.with_streaming_response.create(
            model="fake-gpt",
            messages=[{"role": "user", "content": "a stream [[chunk-delay:20]]"}],
            stream=True,
            stream_options={"include_usage": True},
        ) as streamed:
            seen["stream_id"] = streamed.headers["x-request-id"]
            chunks = list(streamed.parse())
        seen["answers"].append((seen["stream_id"], chunks[-1].usage))

        with anthropic.Anthropic(
            base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0
        ) as claude:
            raw_message = claude.messages.with_raw_response.create(
                model="fake-claude", max_tokens=100, messages=[{"role": "user", "content": "hello claude"}]
            )
            seen["claude"] = (raw_message.headers["x-request-id"], raw_message.parse().usage)

            poor = observed.teams.open("0.01")
            with (
                pytest.raises(openai.APIStatusError) as refused,
                openai.OpenAI(base_url=gateway.base_url, api_key=poor.key, max_retries=0) as sdk,
            ):
                sdk.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "too dear"}])
            assert refused.value.status_code == 402

            limited_key = (
                gateway.cli("key", "create", "--team", team.name, "--rpm", "1").stdout.strip().splitlines()[-1]
            )
            with openai.OpenAI(base_url=gateway.base_url, api_key=limited_key, max_retries=0) as limited:
                limited.chat.completions.create(model="demo-gpt", messages=[{"role": "user", "content": "one"}])
                with pytest.raises(openai.RateLimitError):
                    limited.chat.completions.create(model="demo-gpt", messages=[{"role": "user", "content": "two"}])

                with pytest.raises(openai.APIStatusError) as down:
                    client.chat.completions.create(model="dead-gpt", messages=[{"role": "user", "content": "anyone?"}])
                assert down.value.status_code == 502
                seen["down_id"] = down.value.response.headers["x-request-id"]

                raw = client.chat.completions.with_raw_response.create(
                    model="overloaded-gpt", messages=[{"role": "user", "content": "fail over"}]
                )
                seen["failover_id"] = raw.headers["x-request-id"]
                seen["secrets"] = [team.key, poor.key, limited_key, ADMIN_KEY]
                gateway.wait_until_nothing_held(team.name)
                return seen


def _credits(usage: Any) -> Decimal:
    return Decimal(str(usage.model_extra["cost"]["credits"]))


def test_requests_are_counted_by_endpoint_model_and_status(observed: Observed, traffic: dict[str, Any]):
    requests = "tollgate_requests_total"
    assert observed.value(requests, endpoint="chat.completions", model="fake-gpt", status="200") == 3
    assert observed.value(requests, endpoint="messages", model="fake-claude", status="200") == 1
    assert observed.value(requests, endpoint="chat.completions", model="fake-gpt", status="402") == 1
    assert observed.value(requests, endpoint="chat.completions", model="demo-gpt", status="429") == 1
    assert observed.value(requests, endpoint="chat.completions", model="dead-gpt", status="502") == 1
    assert observed.value(requests, endpoint="chat.completions", model="overloaded-gpt", status="200") == 1
    # every answered request is in the latency histogram; only the stream has a first token
    assert observed.value("tollgate_request_duration_seconds_count", endpoint="chat.completions", model="fake-gpt") == 4
    assert (
        observed.value("tollgate_time_to_first_token_seconds_count", endpoint="chat.completions", model="fake-gpt") == 1
    )


def test_tokens_and_credits_add_up_to_what_clients_were_charged(observed: Observed, traffic: dict[str, Any]):
    usages = [usage for _, usage in traffic["answers"]]
    assert observed.value("tollgate_tokens_total", model="fake-gpt", kind="input") == sum(
        u.prompt_tokens for u in usages
    )
    assert observed.value("tollgate_tokens_total", model="fake-gpt", kind="output") == sum(
        u.completion_tokens for u in usages
    )
    charged = sum(_credits(u) for u in usages)
    assert Decimal(str(observed.value("tollgate_credits_charged_total", model="fake-gpt"))) == pytest.approx(charged)
    _, claude = traffic["claude"]
    assert observed.value("tollgate_tokens_total", model="fake-claude", kind="output") == claude.output_tokens


def test_upstream_errors_rate_limits_holds_and_the_writer_are_measured(observed: Observed, traffic: dict[str, Any]):
    assert observed.value("tollgate_upstream_errors_total", model="dead-gpt", kind="unreachable") == 1
    assert observed.value("tollgate_upstream_errors_total", model="overloaded-gpt", kind="overloaded") == 1
    assert observed.value("tollgate_rate_limit_rejections_total", scope="key", kind="requests") == 1
    assert observed.value("tollgate_open_holds") == 0  # everything settled
    assert observed.value("tollgate_ledger_batch_size_count") >= 7  # at least one commit per charge
    assert observed.value("tollgate_ledger_commit_seconds_count") == observed.value("tollgate_ledger_batch_size_count")
    assert observed.value("tollgate_ledger_writable") == 1


def _access_lines(gateway: Gateway, *request_ids: str) -> dict[str, dict[str, Any]]:
    """The request lines logged so far, once those of ``request_ids`` are there (lines are written in
    batches, a tenth of a second apart)."""
    deadline = time.monotonic() + 5
    while True:
        lines = {line["request_id"]: line for line in gateway.log_lines() if line.get("logger") == "tollgate.access"}
        if all(i in lines for i in request_ids) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_one_json_log_line_per_request_with_team_key_tokens_cost_and_latency(
    observed: Observed, traffic: dict[str, Any]
):
    lines = _access_lines(observed.gateway, traffic["stream_id"], traffic["down_id"], traffic["failover_id"])
    team: Team = traffic["team"]
    key_id = observed.gateway.cli("key", "list", "--team", team.name).stdout.split()[0]
    for request_id, usage in traffic["answers"]:
        line = lines[request_id]
        assert line["level"] == "info"
        assert line["time"].endswith("+00:00")
        assert (line["team"], line["model"], line["endpoint"], line["status"]) == (
            team.name,
            "fake-gpt",
            "chat.completions",
            200,
        )
        assert line["key_id"] == key_id
        assert line["tokens"]["input"] == usage.prompt_tokens
        assert line["tokens"]["output"] == usage.completion_tokens
        assert Decimal(line["cost_credits"]) == _credits(usage)
        assert line["latency_ms"] > 0
        assert line["upstream"] == {"attempts": 1, "deployment": 0, "errors": None}
    stream = lines[traffic["stream_id"]]
    assert stream["stream"] is True
    assert 0 < stream["ttft_ms"] <= stream["latency_ms"]
    claude_id, claude = traffic["claude"]
    assert lines[claude_id]["endpoint"] == "messages"
    assert lines[claude_id]["tokens"]["output"] == claude.output_tokens
    down = lines[traffic["down_id"]]
    assert down["status"] == 502
    assert down["tokens"] is None
    assert down["upstream"]["errors"] == ["unreachable"]
    assert "could not be reached" in down["error"]
    failover = lines[traffic["failover_id"]]
    assert failover["upstream"] == {"attempts": 2, "deployment": 1, "errors": ["overloaded"]}


def test_the_log_never_contains_a_key(observed: Observed, traffic: dict[str, Any]):
    _access_lines(observed.gateway, traffic["failover_id"])  # the traffic's lines are all written
    output = observed.gateway.output()
    assert output.count('"logger":"tollgate.access"') >= 9
    for secret in traffic["secrets"]:
        assert secret not in output


def test_every_response_carries_a_request_id(observed: Observed, traffic: dict[str, Any]):
    root = observed.gateway.root_url
    answers = [
        plain_http.get(root + "/v1/models"),
        plain_http.get(root + "/nowhere"),
        plain_http.get(root + "/health/live"),
        plain_http.post(root + "/v1/chat/completions", json={"model": "fake-gpt"}),  # 401: no key
        plain_http.get(root + "/admin/teams", headers={"authorization": f"Bearer {ADMIN_KEY}"}),
    ]
    ids = [answer.headers.get("x-request-id", "") for answer in answers]
    assert [answer.status_code for answer in answers] == [200, 404, 200, 401, 200]
    assert all(i.startswith("req_") for i in ids)
    assert len(set(ids)) == len(ids)
    lines = _access_lines(observed.gateway, *ids)
    assert lines[ids[3]]["status"] == 401
    assert lines[ids[1]]["status"] == 404


def test_metrics_on_a_separate_port_are_not_on_the_public_one(observed: Observed):
    assert (
        plain_http.get(
            observed.gateway.root_url + "/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"}
        ).status_code
        == 404
    )


def test_metrics_on_the_public_port_need_the_admin_key(gateway: Gateway, team: Team):
    url = gateway.root_url + "/metrics"
    assert plain_http.get(url).status_code == 401
    assert plain_http.get(url, headers={"authorization": f"Bearer {team.key}"}).status_code == 403
    answer = plain_http.get(url, headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert answer.status_code == 200
    assert "tollgate_requests_total" in answer.text
    content_type = answer.headers["content-type"]
    assert content_type.startswith("text/plain; version=")
    assert content_type.count("charset") == 1
