"""POST /v1/embeddings through a real gateway with the official openai SDK: held, charged per input
token to the micro-credit, the vectors passed through untouched, and every guarantee chat has.

fake-embedding costs 0.135 USD per million input tokens and nothing else (it serves embeddings
only); 100 credits per USD, so an input token is 0.135 × 100 = 13.5 micro-credits, and a request's
total is rounded up once. The fake upstream counts a text's tokens as words (with the whitespace
after each) and a token array as its length.
"""

from __future__ import annotations

import base64
import json
import struct
import time
from collections.abc import Iterator
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

import openai
import pytest

from app.tokens.counting import o200k_text
from tests.support import plain_http
from tests.support.embeddings_models import embeddings_model
from tests.support.fake_embeddings import vector
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams

MICROS = Decimal(1_000_000)
SEVEN = "one two three four five six seven"  # 7 tokens: 7 × 13.5 = 94.5 → 95 micro-credits


def config_with_embeddings(directory: Path, upstream_base_url: str, pricing: str = "{input = 0.135}") -> Path:
    config = write_config(directory, upstream_base_url)
    config.write_text(config.read_text() + embeddings_model(upstream_base_url, pricing))
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gw = Gateway(config_with_embeddings(tmp_path_factory.mktemp("embeddings"), fake_upstream.base_url)).start()
    yield gw
    result = gw.cli("ledger", "verify", check=False)
    gw.stop()
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    t = Teams(gateway.config)
    yield t
    t.close()


@pytest.fixture
def team(teams: Teams) -> Team:
    return teams.open("100")


@pytest.fixture
def client(gateway: Gateway, team: Team) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)


def charged(gateway: Gateway, team: Team) -> list[dict[str, Any]]:
    return gateway.charges(team.name)


def cost_micros(usage: Any) -> int:
    micros = Decimal(str(usage.model_extra["cost"]["credits"])) * MICROS
    assert micros == micros.to_integral_value()
    return int(micros)


def test_floats_are_charged_per_input_token_to_the_micro_credit(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    raw = client.embeddings.with_raw_response.create(
        model="fake-embedding", input=[SEVEN, "eight"], encoding_format="float", user="alice"
    )
    answer = raw.parse()
    assert answer.model == "fake-embedding"  # the client's id, not the deployment's
    assert [d.index for d in answer.data] == [0, 1]
    assert answer.data[0].embedding == vector(SEVEN, 1536)  # every float exactly as the upstream sent it
    assert answer.data[1].embedding == vector("eight", 1536)
    # 8 tokens × 13.5 = 108 micro-credits exactly.
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == 8
    assert cost_micros(answer.usage) == 108
    assert answer.usage.model_extra["cost"]["breakdown"]["input"]["tokens"] == 8
    assert Decimal(str(answer.usage.model_extra["remaining"]["credits"])) == Decimal(100) - Decimal("0.000108")
    (charge,) = charged(gateway, team)
    assert (-charge["amount"], charge["endpoint"], charge["end_user"], charge["input_tokens"]) == (
        108,
        "embeddings",
        "alice",
        8,
    )
    sent = fake_upstream.requests[-1]
    assert sent.path == "/v1/embeddings"
    assert sent.body == {
        "model": "text-embedding-x",
        "input": [SEVEN, "eight"],
        "encoding_format": "float",
        "user": "alice",
    }
    line = gateway.access_line(raw.headers["x-request-id"])
    assert (line["endpoint"], line["model"], line["status"]) == ("embeddings", "fake-embedding", 200)


def test_base64_passes_through_untouched_and_rounds_up_once(gateway: Gateway, team: Team, client: openai.OpenAI):
    answer = client.embeddings.create(model="fake-embedding", input=SEVEN, encoding_format="base64", dimensions=256)
    encoded = answer.data[0].embedding
    assert isinstance(encoded, str)
    expected = base64.b64encode(struct.pack("<256f", *vector(SEVEN, 256))).decode()
    assert encoded == expected
    assert cost_micros(answer.usage) == 95  # 7 × 13.5 = 94.5, rounded up once
    assert [-c["amount"] for c in charged(gateway, team)] == [95]


def test_the_sdk_default_and_token_arrays(gateway: Gateway, team: Team, client: openai.OpenAI):
    """The SDK asks for base64 unless told (and decodes it to floats itself); token arrays count
    their own length: 3 + 2 = 5 tokens, 67.5 → 68 micro-credits."""
    answer = client.embeddings.create(model="fake-embedding", input=[[1, 2, 3], [4, 5]])
    assert len(answer.data[0].embedding) == 1536
    assert answer.data[0].embedding == pytest.approx(vector([1, 2, 3], 1536), rel=1e-6)  # float32 on the wire
    assert cost_micros(answer.usage) == 68
    assert [-c["amount"] for c in charged(gateway, team)] == [68]


def test_a_model_that_does_not_serve_embeddings_is_a_404_and_the_other_way_round(client: openai.OpenAI):
    with pytest.raises(openai.NotFoundError) as refused:
        client.embeddings.create(model="fake-gpt", input="hello")
    assert refused.value.body["code"] == "model_not_found"
    assert "does not serve /v1/embeddings" in refused.value.message
    with pytest.raises(openai.NotFoundError) as chat:
        client.chat.completions.create(model="fake-embedding", messages=[{"role": "user", "content": "hi"}])
    assert "does not serve /v1/chat/completions" in chat.value.message
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-model", input="hello")


def test_a_key_restricted_to_chat_is_refused_on_embeddings(gateway: Gateway, teams: Teams):
    team = teams.open("1")
    key = gateway.cli("key", "create", "--team", team.name, "--endpoints", "chat.completions").stdout.splitlines()[-1]
    restricted = openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        restricted.embeddings.create(model="fake-embedding", input="hello")
    assert "may not call /v1/embeddings" in refused.value.message
    assert charged(gateway, team) == []


def test_a_short_balance_is_a_402_saying_how_many_input_tokens_it_covers(gateway: Gateway, teams: Teams):
    team = teams.open("0.0001")  # 100 micro-credits: 7 tokens (94.5) fit, 8 (108) do not
    client = openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)
    with pytest.raises(openai.APIStatusError) as refused:
        client.embeddings.create(model="fake-embedding", input=[SEVEN, "eight"], encoding_format="float")
    assert refused.value.status_code == 402
    assert refused.value.body["type"] == "billing_error"
    assert refused.value.body["affordable_input_tokens"] == 7
    assert refused.value.response.headers["x-tollgate-affordable-input-tokens"] == "7"
    assert "covers up to 7 input tokens" in refused.value.message
    served = client.embeddings.create(model="fake-embedding", input=SEVEN, encoding_format="float")
    assert cost_micros(served.usage) == 95


def test_an_idempotency_key_charges_once_and_replays_the_answer(gateway: Gateway, team: Team, client: openai.OpenAI):
    headers = {"Idempotency-Key": "emb-once-1"}
    first = client.embeddings.with_raw_response.create(
        model="fake-embedding", input=SEVEN, encoding_format="base64", extra_headers=headers
    )
    again = client.embeddings.with_raw_response.create(
        model="fake-embedding", input=SEVEN, encoding_format="base64", extra_headers=headers
    )
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.content == first.content
    assert [-c["amount"] for c in charged(gateway, team)] == [95]


def test_an_upstream_failure_charges_nothing_and_holds_nothing(gateway: Gateway, team: Team, client: openai.OpenAI):
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="fake-embedding", input="boom [[fail:500]]", encoding_format="float")
    with pytest.raises(openai.BadRequestError):  # the upstream's own 400, word for word
        client.embeddings.create(model="fake-embedding", input="bad [[fail:400]]", encoding_format="float")
    assert charged(gateway, team) == []
    gateway.wait_until_nothing_held(team.name)


def test_bad_input_is_a_400_before_the_upstream_is_called(client: openai.OpenAI, fake_upstream: FakeUpstream):
    before = len(fake_upstream.requests)
    for bad in ([], "", [1, "two"], [["x"]], [True]):
        with pytest.raises(openai.BadRequestError):
            client.embeddings.create(model="fake-embedding", input=bad, encoding_format="float")  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="fake-embedding", input="x", encoding_format="hex")  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="fake-embedding", input="x", dimensions=0)
    with pytest.raises(openai.BadRequestError) as long:
        client.embeddings.create(model="fake-embedding", input=[list(range(9000))])
    assert long.value.body["code"] == "context_length_exceeded"
    assert len(fake_upstream.requests) == before


def test_the_request_lookup_finds_the_charge(gateway: Gateway, team: Team, client: openai.OpenAI):
    raw = client.embeddings.with_raw_response.create(model="fake-embedding", input=SEVEN, encoding_format="float")
    request_id = raw.headers["x-request-id"]
    deadline = time.monotonic() + 10
    while True:
        found = plain_http.get(
            f"{gateway.base_url}/requests/{request_id}", headers={"authorization": f"Bearer {team.key}"}
        )
        data = json.loads(found.content, parse_float=Decimal).get("data") if found.status_code == 200 else None
        if data is not None and not data["pending"]:
            break
        assert time.monotonic() < deadline, found.text
        time.sleep(0.05)
    assert (data["endpoint"], data["model"], data["charged_micros"]) == ("embeddings", "fake-embedding", 95)


def test_the_model_list_shows_its_endpoints_and_only_the_prices_it_has(gateway: Gateway):
    card = plain_http.get(gateway.base_url + "/models/fake-embedding").json()
    assert card["endpoints"] == ["embeddings"]
    assert card["pricing"] == {"input": 0.135}


def test_an_unpriced_embeddings_model_is_refused_at_start_up(tmp_path: Path, fake_upstream: FakeUpstream):
    config = config_with_embeddings(tmp_path, fake_upstream.base_url, pricing="{output = 1}")
    with pytest.raises(RuntimeError) as refused:
        Gateway(config).start()
    assert f"{config}: models[" in str(refused.value)
    assert "].pricing.input: required: the model serves embeddings" in str(refused.value)


def test_an_answer_without_usage_is_charged_the_gateway_s_own_count(
    gateway: Gateway, team: Team, client: openai.OpenAI
):
    """The upstream said nothing: the inputs are billed as the gateway counted them for the hold
    (o200k for an OpenAI upstream), never for free."""
    text = "count me [[no-usage]]"
    counted = o200k_text(text)
    assert counted > 0
    answer = client.embeddings.create(model="fake-embedding", input=text, encoding_format="float")
    assert answer.usage.prompt_tokens == counted
    expected = (Decimal(counted) * Decimal("13.5")).to_integral_value(rounding=ROUND_CEILING)
    assert cost_micros(answer.usage) == int(expected)
    assert [-c["amount"] for c in charged(gateway, team)] == [int(expected)]


def test_the_openapi_document_describes_the_endpoint(gateway: Gateway):
    document = plain_http.get(gateway.root_url + "/schema/openapi.json").json()
    operation = document["paths"]["/v1/embeddings"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    body = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    assert {"model", "input", "dimensions", "encoding_format", "user"} <= set(body["properties"])
    assert operation["responses"]["402"]["content"]["application/json"]["schema"]["$ref"].endswith("/OpenAIError")


def test_the_key_s_request_rate_limit_holds_on_embeddings(gateway: Gateway, teams: Teams):
    team = teams.open("1", key_rpm=1)
    client = openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)
    client.embeddings.create(model="fake-embedding", input=SEVEN, encoding_format="float")
    with pytest.raises(openai.RateLimitError) as limited:
        client.embeddings.create(model="fake-embedding", input=SEVEN, encoding_format="float")
    assert "retry-after" in limited.value.response.headers
    assert [-c["amount"] for c in charged(gateway, team)] == [95]
