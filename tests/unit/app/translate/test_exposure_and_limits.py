"""What a request may make the upstream bill beyond its tokens (its hold covers it), and an output
limit lowered to what a balance covers, in each wire's own field."""

from __future__ import annotations

from app.translate.exposure import HELD_TOOL_CALLS, exposure_of
from app.translate.output_limit import clamp_output


def test_a_named_tier_is_the_only_one_held_and_auto_or_none_may_be_any():
    assert exposure_of({"service_tier": "flex"}, "chat").tiers == frozenset({"flex"})
    assert exposure_of({"service_tier": "default"}, "chat").tiers == frozenset()
    assert exposure_of({"service_tier": "standard_only"}, "messages").tiers == frozenset()
    assert exposure_of({"service_tier": "auto"}, "messages").tiers is None
    assert exposure_of({}, "responses").tiers is None
    assert exposure_of({"service_tier": ["not", "a", "tier"]}, "chat").tiers is None  # forwarded as is, held as any


def test_declared_provider_tools_are_held_for_their_bound():
    messages = {
        "tools": [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"type": "web_fetch_20250910", "name": "web_fetch"},
            {"name": "my_function"},
        ]
    }
    assert exposure_of(messages, "messages").tool_calls == {"web_search": 3, "web_fetch": HELD_TOOL_CALLS}
    assert exposure_of({"tools": [{"type": "web_search_preview"}]}, "responses").tool_calls == {
        "web_search": HELD_TOOL_CALLS
    }
    assert exposure_of({"web_search_options": {}}, "chat").tool_calls == {"web_search": 1}
    assert exposure_of({"tools": "nonsense"}, "chat").tool_calls == {}


def test_the_output_limit_is_set_in_each_wire_s_field():
    assert clamp_output({"max_tokens": 32000}, "messages", 500)["max_tokens"] == 500
    assert clamp_output({"max_output_tokens": 9000}, "responses", 500)["max_output_tokens"] == 500
    assert clamp_output({"max_tokens": 100, "max_completion_tokens": 100}, "chat", 50) == {
        "max_tokens": 50,
        "max_completion_tokens": 50,
    }
    assert clamp_output({}, "chat", 50) == {"max_completion_tokens": 50}
    # a limit below the new one stays (clamp_output_to_model lowers only the one above the model's)
    assert clamp_output({"max_tokens": 100, "max_completion_tokens": 128000}, "chat", 1024) == {
        "max_tokens": 100,
        "max_completion_tokens": 1024,
    }
    body = {"max_tokens": 32000}
    clamp_output(body, "messages", 10)
    assert body == {"max_tokens": 32000}  # the client's body is left as it came


def test_a_thinking_budget_stays_below_the_lowered_limit_or_is_dropped():
    thinking = {"type": "enabled", "budget_tokens": 31999}
    assert clamp_output({"max_tokens": 32000, "thinking": thinking}, "messages", 5000)["thinking"] == {
        "type": "enabled",
        "budget_tokens": 4999,
    }
    assert "thinking" not in clamp_output({"max_tokens": 32000, "thinking": thinking}, "messages", 1000)
    adaptive = {"type": "adaptive"}
    assert clamp_output({"max_tokens": 32000, "thinking": adaptive}, "messages", 1000)["thinking"] == adaptive
