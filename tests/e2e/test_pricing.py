"""Everything providers bill, priced to the micro-credit, through the official SDKs and a real
gateway: the hidden-price traps other gateways fell into, each a fixed case with its exact cost.

An upstream that answers with exactly the bytes a test gives it (``CannedUpstream``) plays the
provider, so each case is the provider's own payload: a 1-hour cache write, a 205k-token prompt
priced whole at the long-context rate, an upstream that reports serving ``flex`` on a default
request, a web search declared but not called and called three times, and the payloads of Bifrost
#904 (cached tokens counted as input too: 1.68 USD for a 0.34 USD request) and #3451 (streamed
cache writes counted twice), streamed and not. 100 credits per USD, so 1 USD = 100,000,000
micro-credits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.canned_upstream import CannedUpstream
from tests.support.gateway import Gateway
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("verified_at_the_end")

MICROS = Decimal(1_000_000)


def pricing_config(directory: Path, canned: str) -> Path:
    from tests.support.backend import new_database_url

    config = directory / "tollgate.toml"
    root = canned.removesuffix("/v1")
    config.write_text(f"""
database_url = "{new_database_url()}"
credits_per_usd = 100
lease_idle_seconds = 0.3

[[models]]
id = "opus"
display_name = "Opus"
owned_by = "anthropic"
context_window = 1000000
max_output_tokens = 64000
upstream = {{kind = "anthropic", base_url = "{root}", api_key_env = "UPSTREAM_KEY", model = "claude-opus"}}
[models.pricing]
input = 5
output = 25
cache_create = 6.25
cache_hit = 0.5
cache_write_1h = 10
[models.pricing.long_context]
threshold = 200000
input = 10
output = 37.5
cache_write = 12.5
cache_hit = 1
cache_write_1h = 20
[models.pricing.tool_fees]
web_search = 0.01

[[models]]
id = "gpt-tiers"
display_name = "GPT with tiers"
owned_by = "openai"
context_window = 2000000
max_output_tokens = 32000
upstream = {{kind = "openai", base_url = "{canned}", api_key_env = "UPSTREAM_KEY", model = "gpt-x"}}
[models.pricing]
input = 1.25
output = 10
cache_create = 1.25
cache_hit = 0.125
[models.pricing.service_tiers.flex]
input = 0.625
output = 5
cache_write = 0.625
cache_hit = 0.0625
[models.pricing.service_tiers.priority]
input = 2.5
output = 20
cache_write = 2.5
cache_hit = 0.25

[[models]]
id = "gpt-search"
display_name = "GPT (Responses) with web search"
owned_by = "openai"
context_window = 400000
max_output_tokens = 32000
upstream = {{kind = "openai-responses", base_url = "{canned}", api_key_env = "UPSTREAM_KEY", model = "gpt-r"}}
pricing = {{input = 1.25, output = 10, cache_create = 1.25, cache_hit = 0.125, tool_fees = {{web_search = 0.01}}}}
""")
    return config


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedUpstream]:
    with CannedUpstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory, canned: CannedUpstream) -> Iterator[Gateway]:
    gateway = Gateway(pricing_config(tmp_path_factory.mktemp("pricing"), canned.base_url)).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def priced_teams(priced: Gateway) -> Iterator[Teams]:
    teams = Teams(priced.config)
    yield teams
    teams.close()


@pytest.fixture(scope="module")
def verified_at_the_end(priced: Gateway) -> Iterator[None]:
    yield
    result = priced.cli("ledger", "verify", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def cost_micros(usage: dict) -> int:
    """The cost an answer's usage reports, in micro-credits (exact)."""
    micros = Decimal(str(usage["cost"]["credits"])) * MICROS
    assert micros == micros.to_integral_value()
    return int(micros)


def charged(gateway: Gateway, team: Team) -> list[int]:
    """What the ledger charged the team, request by request, in micro-credits."""
    return [-int(row["amount"]) for row in gateway.charges(team.name)]


def message(usage: dict) -> bytes:
    return json.dumps(
        {
            "id": "msg_canned",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus",
            "content": [{"type": "text", "text": "Done."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
    ).encode()


def chat(usage: dict, **top: object) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-canned",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "gpt-x",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}],
            "usage": usage,
            **top,
        }
    ).encode()


def sse(event: dict, name: str | None = None) -> bytes:
    return (f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(event).encode() + b"\n\n"


def claude(gateway: Gateway, team: Team) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)


def gpt(gateway: Gateway, team: Team) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)


ASK = [{"role": "user", "content": "Summarise the repository."}]


def test_a_1_hour_cache_write_is_billed_at_the_1_hour_rate(priced: Gateway, priced_teams: Teams, canned):
    """Anthropic bills 1-hour cache writes at 2 × input (10 USD/M here), 5-minute ones at 1.25 ×
    (6.25 USD/M): at the 5-minute rate this request would cost 62.755 credits, not 100.255."""
    team = priced_teams.open("1000")
    canned.answer(
        [
            message(
                {
                    "input_tokens": 10,
                    "cache_creation_input_tokens": 100000,
                    "cache_read_input_tokens": 0,
                    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 100000},
                    "output_tokens": 100,
                }
            )
        ],
        content_type=b"application/json",
    )
    with claude(priced, team) as sdk:
        answer = sdk.messages.create(model="opus", max_tokens=200, messages=ASK)
        usage = answer.usage.model_dump()
        # (10 × 5 + 100,000 × 10 + 100 × 25) USD/M × 100 credits/USD
        assert cost_micros(usage) == 100_255_000
        assert usage["cache_creation_input_tokens"] == 100000
        breakdown = usage["cost"]["breakdown"]
        assert breakdown["cache_write_1h"] == {"tokens": 100000, "credits": 100, "usd": 1}
        assert "cache_write" not in breakdown
        assert charged(priced, team) == [100_255_000]


def test_a_prompt_past_the_threshold_is_priced_whole_at_the_long_context_rate(
    priced: Gateway, priced_teams: Teams, canned
):
    """205,000 prompt tokens: input and output both at the long-context rates (10 and 37.5 USD/M),
    not the base rates, and not only the tokens past 200,000."""
    team = priced_teams.open("1000")
    canned.answer(
        [
            message(
                {
                    "input_tokens": 205000,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1000,
                }
            )
        ],
        content_type=b"application/json",
    )
    long_prompt = [{"role": "user", "content": "word " * 205000}]
    with claude(priced, team) as sdk:
        answer = sdk.messages.create(model="opus", max_tokens=2000, messages=long_prompt)
        usage = answer.usage.model_dump()
        assert cost_micros(usage) == (205000 * 10 + 1000 * Decimal("37.5")) * 100  # 208,750,000
        assert usage["cost"]["basis"] == "long_context"
        assert charged(priced, team) == [208_750_000]


def test_the_hold_of_a_long_prompt_is_at_the_long_context_rate(priced: Gateway, priced_teams: Teams, canned):
    """The worst case covers the dearest dimension the request may trigger: a prompt that may pass
    the threshold is held at the long-context rates, so a balance that covers the base worst case
    but not the long-context one is refused before the upstream is called, saying what it affords."""
    team = priced_teams.open("300")
    sent = len(canned.requests)
    with pytest.raises(anthropic.APIStatusError) as refused, claude(priced, team) as sdk:
        sdk.messages.create(model="opus", max_tokens=2000, messages=[{"role": "user", "content": "word " * 205000}])
    assert refused.value.status_code == 402
    assert len(canned.requests) == sent  # refused before the upstream was called
    error = refused.value.body["error"]
    needed = Decimal(error["message"].split("can cost up to ")[1].split(" credits")[0])
    prompt = (needed * MICROS / 100 - 2000 * Decimal("37.5")) / 20  # the prompt bound at the long-context 1h rate
    assert prompt == prompt.to_integral_value(), needed
    assert prompt > 200000, needed
    assert error["affordable_max_tokens"] == 0  # 300 credits do not cover even such a prompt there


def test_the_tier_the_upstream_served_is_the_tier_priced(priced: Gateway, priced_teams: Teams, canned):
    """A default request the upstream reports serving at ``flex`` is billed at flex's rates (LiteLLM
    priced the tier requested), plain and streamed."""
    team = priced_teams.open("1000")
    canned.answer(
        [chat({"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}, service_tier="flex")],
        content_type=b"application/json",
    )
    with gpt(priced, team) as sdk:
        answer = sdk.chat.completions.create(model="gpt-tiers", messages=ASK)
        assert cost_micros(answer.usage.model_dump()) == (1000 * Decimal("0.625") + 500 * 5) * 100  # 312,500
        assert answer.usage.model_extra["cost"]["basis"] == "tier:flex"

        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-x",
            "service_tier": "priority",
        }
        canned.answer(
            [
                sse({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Done."}}]}),
                sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                sse(
                    {
                        **chunk,
                        "choices": [],
                        "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500},
                    }
                ),
                b"data: [DONE]\n\n",
            ]
        )
        with gpt(priced, team) as sdk:
            stream = sdk.chat.completions.create(
                model="gpt-tiers", messages=ASK, stream=True, stream_options={"include_usage": True}
            )
            usage = [c.usage for c in stream if c.usage is not None][-1]
            assert cost_micros(usage.model_dump()) == (1000 * Decimal("2.5") + 500 * 20) * 100  # 1,250,000
            assert charged(priced, team) == [312_500, 1_250_000]


WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


def test_web_search_is_charged_per_call_made_never_per_declaration(priced: Gateway, priced_teams: Teams, canned):
    """Declared and not called: no fee (LiteLLM charged one); called three times: three fees of
    0.01 USD (1 credit each), on Messages (``server_tool_use``) and on Responses (its output items)."""
    team = priced_teams.open("1000")
    tokens = {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 10}
    token_cost = (100 * 5 + 10 * 25) * 100  # 75,000
    canned.answer(
        [message({**tokens, "server_tool_use": {"web_search_requests": 0}})], content_type=b"application/json"
    )
    canned.answer(
        [message({**tokens, "server_tool_use": {"web_search_requests": 3}})], content_type=b"application/json"
    )
    with claude(priced, team) as client:
        not_called = client.messages.create(model="opus", max_tokens=100, messages=ASK, tools=[WEB_SEARCH])
        called = client.messages.create(model="opus", max_tokens=100, messages=ASK, tools=[WEB_SEARCH])
        assert cost_micros(not_called.usage.model_dump()) == token_cost
        assert cost_micros(called.usage.model_dump()) == token_cost + 3 * 1_000_000
        assert called.usage.model_dump()["cost"]["breakdown"]["tool:web_search"]["calls"] == 3

        search = {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "q"},
        }
        canned.answer(
            [
                json.dumps(
                    {
                        "id": "resp_canned",
                        "object": "response",
                        "created_at": 1700000000,
                        "status": "completed",
                        "model": "gpt-r",
                        "output": [{**search, "id": f"ws_{i}"} for i in range(3)]
                        + [
                            {
                                "type": "message",
                                "id": "msg_1",
                                "role": "assistant",
                                "status": "completed",
                                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
                            }
                        ],
                        "usage": {
                            "input_tokens": 100,
                            "input_tokens_details": {"cached_tokens": 0},
                            "output_tokens": 10,
                            "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": 110,
                        },
                    }
                ).encode()
            ],
            content_type=b"application/json",
        )
        with gpt(priced, team) as sdk:
            response = sdk.responses.create(model="gpt-search", input="Search.", tools=[{"type": "web_search"}])
            assert cost_micros(response.usage.model_dump()) == (100 * Decimal("1.25") + 10 * 10) * 100 + 3 * 1_000_000
            assert charged(priced, team) == [token_cost, token_cost + 3_000_000, 22_500 + 3_000_000]


#: Bifrost #904: an OpenAI answer whose prompt count includes 1,188,096 cached tokens.
BIFROST_904 = {
    "prompt_tokens": 1239328,
    "completion_tokens": 12909,
    "total_tokens": 1252237,
    "prompt_tokens_details": {"cached_tokens": 1188096},
}
#: … billed 0.341642 USD: 51,232 × 1.25 + 1,188,096 × 0.125 + 12,909 × 10, per million (not 1.68 USD).
BIFROST_904_MICROS = 34_164_200


def test_bifrost_904_cached_tokens_are_not_billed_as_input_too(priced: Gateway, priced_teams: Teams, canned):
    team = priced_teams.open("1000")
    canned.answer([chat(BIFROST_904)], content_type=b"application/json")
    with gpt(priced, team) as sdk:
        answer = sdk.chat.completions.create(model="gpt-tiers", messages=ASK)
        assert cost_micros(answer.usage.model_dump()) == BIFROST_904_MICROS
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x"}
        canned.answer(
            [
                sse({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Done."}}]}),
                sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                sse({**chunk, "choices": [], "usage": BIFROST_904}),
                b"data: [DONE]\n\n",
            ]
        )
        with gpt(priced, team) as sdk:
            stream = sdk.chat.completions.create(model="gpt-tiers", messages=ASK, stream=True)
            assert [c for c in stream if c.usage is not None] == []  # the client asked for no usage: none is sent
            assert charged(priced, team) == [BIFROST_904_MICROS, BIFROST_904_MICROS]


#: Bifrost #3451: a streamed Anthropic answer reports its cache writes at the start and again at the
#: end (cumulative counts); 6 × 5 + 159,217 × 6.25 + 2,745 × 25 per million = 1.06376125 USD.
BIFROST_3451_START = {
    "input_tokens": 6,
    "cache_creation_input_tokens": 159217,
    "cache_read_input_tokens": 0,
    "output_tokens": 1,
}
BIFROST_3451_END = {**BIFROST_3451_START, "output_tokens": 2745}
BIFROST_3451_MICROS = 106_376_125


def test_bifrost_3451_streamed_cache_writes_are_billed_once(priced: Gateway, priced_teams: Teams, canned):
    team = priced_teams.open("1000")
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": BIFROST_3451_START,
        },
    }
    canned.answer(
        [
            sse(start, "message_start"),
            sse(
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                "content_block_start",
            ),
            sse(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}},
                "content_block_delta",
            ),
            sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": BIFROST_3451_END,
                },
                "message_delta",
            ),
            sse({"type": "message_stop"}, "message_stop"),
        ]
    )
    with claude(priced, team) as sdk, sdk.messages.stream(model="opus", max_tokens=3000, messages=ASK) as stream:
        deltas = [event for event in stream if event.type == "message_delta"]
    assert deltas[-1].usage.output_tokens == 2745
    assert cost_micros(deltas[-1].usage.model_dump()) == BIFROST_3451_MICROS  # the final message_delta says it
    canned.answer([message(BIFROST_3451_END)], content_type=b"application/json")
    with claude(priced, team) as sdk:
        plain = sdk.messages.create(model="opus", max_tokens=3000, messages=ASK)
        assert cost_micros(plain.usage.model_dump()) == BIFROST_3451_MICROS
        assert charged(priced, team) == [BIFROST_3451_MICROS, BIFROST_3451_MICROS]


def test_the_model_list_shows_the_whole_price(priced: Gateway):
    opus = next(m for m in plain_http.get(priced.base_url + "/models").json()["data"] if m["id"] == "opus")
    assert opus["pricing"]["input"] == 5
    assert opus["pricing"]["cache_write_1h"] == 10
    assert opus["pricing"]["long_context"]["threshold"] == 200000
    assert opus["pricing"]["tool_fees"] == {"web_search": 0.01}
