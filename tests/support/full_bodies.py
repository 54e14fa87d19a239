"""One request body per protocol that uses every field the gateway reads to translate or count it:
system turns, text, images, documents, tool definitions, tool calls and results, reasoning, tool
choice, stop sequences, sampling, effort and output format. Each is served (200) by a model of
every upstream kind, so a change to one of its fields tests only that field."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

IMAGE_DATA = "iVBORw0KGgo="  # a PNG signature: an image whose size the counter cannot read
IMAGE_URL = f"data:image/png;base64,{IMAGE_DATA}"

#: A model of each upstream kind, all taking images: (upstream wire, model).
MODELS = {"chat": "agent-gpt", "messages": "agent-claude", "responses": "agent-codex"}
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}

_SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "enum": ["a", "b"]}}, "required": ["q"]}

CHAT: dict[str, Any] = {
    "max_tokens": 50,
    "n": 1,
    "temperature": 0.5,
    "top_p": 0.9,
    "stop": ["zzz"],
    "user": "u-1",
    "reasoning_effort": "low",
    "response_format": {"type": "text"},
    "metadata": {"k": "v"},
    "store": False,
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "verbosity": "medium",
    "prompt_cache_key": "p",
    "service_tier": "auto",
    "safety_identifier": "s",
    "stream": False,
    "stream_options": {"include_usage": True},
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": IMAGE_URL, "detail": "low"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}},
            ],
        },
        {
            "role": "assistant",
            "content": "calling",
            "refusal": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "found"}]},
        {"role": "user", "content": "thanks"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "Find", "strict": False, "parameters": _SCHEMA},
        }
    ],
}

MESSAGES: dict[str, Any] = {
    "max_tokens": 2048,
    "temperature": 1,
    "top_p": 0.9,
    "top_k": 5,
    "stop_sequences": ["zzz"],
    "metadata": {"user_id": "u-1"},
    "stream": False,
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "output_config": {"effort": "low"},
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_DATA}},
                {
                    "type": "document",
                    "title": "Notes",
                    "context": "ctx",
                    "source": {"type": "text", "data": "the notes"},
                },
                {
                    "type": "search_result",
                    "title": "R",
                    "source": "https://example.com",
                    "content": [{"type": "text", "text": "found text"}],
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "let me see", "signature": "sig"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": False,
                    "content": [{"type": "text", "text": "found"}],
                },
                {"type": "text", "text": "thanks"},
            ],
        },
    ],
    "tools": [
        {"name": "lookup", "description": "Find", "input_schema": _SCHEMA, "cache_control": {"type": "ephemeral"}}
    ],
}

RESPONSES: dict[str, Any] = {
    "max_output_tokens": 50,
    "temperature": 0.5,
    "top_p": 0.9,
    "instructions": "Be brief.",
    "user": "u-1",
    "metadata": {"k": "v"},
    "store": False,
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "stream": False,
    "reasoning": {"effort": "low", "summary": "auto"},
    "include": ["reasoning.encrypted_content"],
    "text": {
        "format": {"type": "json_schema", "name": "out", "schema": _SCHEMA, "strict": False},
        "verbosity": "medium",
    },
    "prompt_cache_key": "p",
    "service_tier": "auto",
    "input": [
        {"type": "message", "role": "developer", "content": "Use tools."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": IMAGE_URL, "detail": "low"},
                {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
            ],
        },
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thought"}]},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "a"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
        {"type": "custom_tool_call", "call_id": "call_2", "name": "patch", "input": "*** patch"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "ok"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"role": "user", "content": "thanks"},
    ],
    "tools": [
        {"type": "function", "name": "lookup", "description": "Find", "parameters": _SCHEMA, "strict": False},
        {
            "type": "custom",
            "name": "patch",
            "description": "Patch",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
        },
        {"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "read", "parameters": _SCHEMA}]},
    ],
}

BODIES = {"chat": CHAT, "messages": MESSAGES, "responses": RESPONSES}

#: Fields a translator or the counter reads that the full bodies leave out (their absence is
#: their usual value); each is also given a value of every type.
EXTRA_FIELDS = {
    "chat": [
        "max_completion_tokens",
        "functions",
        "function_call",
        "modalities",
        "audio",
        "web_search_options",
        "prediction",
    ],
    "messages": ["mcp_servers", "service_tier", "context_management"],
    "responses": ["previous_response_id", "conversation", "background", "truncation"],
}


def full_body(protocol: str, model: str) -> dict[str, Any]:
    return {**copy.deepcopy(BODIES[protocol]), "model": model}


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path to every value inside ``value`` (keys of objects, indexes of arrays), outermost first."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        yield (*prefix, key)
        yield from paths_of(item, (*prefix, key))


def field_paths(protocol: str) -> list[tuple[Any, ...]]:
    """Every field of the protocol's full body (but ``model``), and the extra fields."""
    paths = [p for p in paths_of(BODIES[protocol]) if p[0] != "model"]
    return paths + [(name,) for name in EXTRA_FIELDS[protocol]]


def with_value(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """``body`` with the value at ``path`` replaced (or added)."""
    out = copy.deepcopy(body)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out
