"""A request planned for every wire its model's deployments speak: each wire gets its own body, a
wire that cannot take the request is left out (its deployments are not tried), only a request no
wire takes is refused, and the hold covers the dearest of the plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.errors import GatewayError
from app.http.wire_plans import plan_for_each_wire, widest_exposure
from domain.pricing import Exposure
from domain.settings import parse_settings

ROOT = Path(__file__).resolve().parents[4]
MODEL = parse_settings((ROOT / "examples" / "demo.toml").read_text(), "demo.toml").models[0]
HI = {"model": MODEL.id, "input": "hello there", "max_output_tokens": 50}


async def test_each_wire_gets_its_own_body_and_the_first_passes_the_clients_through():
    planned = await plan_for_each_wire(MODEL, ["responses", "messages", "converse"], "responses", HI, {}, 100)
    first = planned.exchange
    assert (first.wire, first.passthrough_wire, first.body["input"]) == ("responses", "responses", "hello there")
    assert sorted(first.alternatives) == ["converse", "messages"]
    assert first.alternatives["messages"].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello there"}]}
    ]
    assert first.alternatives["converse"].body["inferenceConfig"]["maxTokens"] == 50
    assert set(first.planned()) == {"responses", "messages", "converse"}
    assert first.answered_on("messages") is first.alternatives["messages"]
    assert first.answered_on("responses") is first


async def test_the_hold_is_sized_by_the_largest_prompt_count_over_the_wires():
    alone = [
        (await plan_for_each_wire(MODEL, [w], "responses", HI, {}, 100)).prompt_tokens
        for w in ("responses", "messages")
    ]
    both = await plan_for_each_wire(MODEL, ["responses", "messages"], "responses", HI, {}, 100)
    assert both.prompt_tokens == max(alone)


async def test_a_wire_that_cannot_take_the_request_is_left_out():
    stateful = {**HI, "previous_response_id": "resp_1"}  # only the Responses API keeps that conversation
    planned = await plan_for_each_wire(MODEL, ["messages", "responses"], "responses", stateful, {}, 100)
    assert (planned.exchange.wire, planned.exchange.alternatives) == ("responses", {})


async def test_a_request_no_wire_can_take_is_refused_with_the_first_wires_reason():
    stateful = {**HI, "previous_response_id": "resp_1"}
    with pytest.raises(GatewayError) as refused:
        await plan_for_each_wire(MODEL, ["messages", "chat"], "responses", stateful, {}, 100)
    assert refused.value.status == 400
    assert "previous_response_id" in refused.value.message


async def test_errors_reach_the_client_word_for_word_only_from_the_wire_that_got_the_body_as_written():
    translated_first = await plan_for_each_wire(MODEL, ["messages", "chat"], "chat", _chat(), {}, 100)
    assert (translated_first.exchange.wire, translated_first.exchange.passthrough_wire) == ("messages", "chat")
    never = await plan_for_each_wire(MODEL, ["messages", "converse"], "chat", _chat(), {}, 100)
    assert never.exchange.passthrough_wire is None


async def test_the_exposure_held_for_is_the_widest_of_the_plans():
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    body = {"model": MODEL.id, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}], "tools": [search]}
    planned = await plan_for_each_wire(MODEL, ["messages", "chat"], "messages", body, {}, 100)
    exposure = widest_exposure(planned.exchange)
    assert exposure.tool_calls.get("web_search", 0) >= 3


def test_exposures_widen_by_tiers_and_by_the_most_calls_of_each_tool():
    a = Exposure(frozenset({"flex"}), {"web_search": 2})
    b = Exposure(frozenset({"priority"}), {"web_search": 5, "file_search": 1})
    assert a.widest(b) == Exposure(frozenset({"flex", "priority"}), {"web_search": 5, "file_search": 1})
    assert a.widest(Exposure(None, {})) == Exposure(None, {"web_search": 2})  # any tier at all


def _chat() -> dict[str, Any]:
    return {"model": MODEL.id, "messages": [{"role": "user", "content": "hi"}]}
