"""What each wire's usage is billed as: every kind a provider bills, each counted once.

OpenAI counts cached (and cache-written) tokens inside ``prompt_tokens`` and reasoning inside
``completion_tokens``; Anthropic counts cache writes and reads beside ``input_tokens`` and splits
writes by lifetime; the tier served and the provider-run tool calls come in their own fields.
"""

from __future__ import annotations

from app.translate import canonical as c
from app.translate.chat.upstream import usage_from_openai
from app.translate.messages.upstream import MessagesEventReader, usage_from_anthropic
from app.translate.responses.upstream import usage_from_responses
from domain.usage import TokenUsage


def test_openai_cached_tokens_are_taken_out_of_the_prompt_and_reasoning_stays_output():
    usage = usage_from_openai(
        {
            "prompt_tokens": 1239328,
            "completion_tokens": 12909,
            "prompt_tokens_details": {"cached_tokens": 1188096},
            "completion_tokens_details": {"reasoning_tokens": 9000},
        },
        "flex",
    )
    assert usage == TokenUsage(input_tokens=51232, output_tokens=12909, cache_hit_tokens=1188096, service_tier="flex")
    assert usage.prompt_tokens == 1239328


def test_a_tier_that_is_not_a_string_is_no_tier():
    assert usage_from_openai({"prompt_tokens": 1, "completion_tokens": 1}, 7).service_tier == ""


def test_anthropic_cache_writes_split_by_lifetime_and_server_tool_calls_are_read():
    usage = usage_from_anthropic(
        {
            "input_tokens": 10,
            "output_tokens": 100,
            "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 300,
            "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
            "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 0},
            "service_tier": "priority",
        }
    )
    assert usage == TokenUsage(
        input_tokens=10,
        output_tokens=100,
        cache_write_tokens=100,
        cache_hit_tokens=5,
        cache_write_1h_tokens=200,
        service_tier="priority",
        tool_calls=(("web_search", 3),),
    )
    assert usage.prompt_tokens == 315


def test_anthropic_writes_without_a_split_are_5_minute_writes():
    usage = usage_from_anthropic({"input_tokens": 6, "output_tokens": 1, "cache_creation_input_tokens": 159217})
    assert (usage.cache_write_tokens, usage.cache_write_1h_tokens) == (159217, 0)


def test_a_stream_s_cumulative_reports_are_billed_once_bifrost_3451():
    reader = MessagesEventReader()
    start = {"input_tokens": 6, "cache_creation_input_tokens": 159217, "cache_read_input_tokens": 0, "output_tokens": 1}
    reader.events({"type": "message_start", "message": {"usage": start}})
    events = reader.events(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {**start, "output_tokens": 2745}}
    )
    (reported,) = [e for e in events if isinstance(e, c.UsageReported)]
    assert reported.usage == TokenUsage(input_tokens=6, output_tokens=2745, cache_write_tokens=159217)


def test_responses_tool_calls_are_its_output_items_and_its_tier_the_response_s():
    response = {
        "service_tier": "default",
        "output": [
            {"type": "web_search_call"},
            {"type": "web_search_call"},
            {"type": "message"},
            {"type": "file_search_call"},
        ],
    }
    usage = usage_from_responses(
        {"input_tokens": 100, "output_tokens": 10, "input_tokens_details": {"cached_tokens": 40}}, response
    )
    assert usage == TokenUsage(
        input_tokens=60,
        output_tokens=10,
        cache_hit_tokens=40,
        service_tier="default",
        tool_calls=(("file_search", 1), ("web_search", 2)),
    )
