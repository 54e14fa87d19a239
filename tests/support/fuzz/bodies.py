"""Request bodies for the generation endpoints, from valid to hostile, as raw bytes.

Each body starts as a valid request of its endpoint and is then bent: fields (known or unknown)
set to values of the wrong type, huge or negative numbers, strings, deep nesting, enormous arrays;
required fields dropped; messages and content blocks of every kind and of no known kind; and the
JSON text itself damaged (invalid UTF-8 inside a string, a lone surrogate, a cut-off body, bytes
that are not JSON at all). Deep nesting is written as text (``[[[…]]]``), never built as Python
objects, so the generator is not the one that runs out of stack.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: The fields each endpoint's requests carry (those the gateway reads, and others it passes on).
FIELDS = {
    "chat": [
        "model",
        "messages",
        "stream",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "stream_options",
        "tools",
        "tool_choice",
        "response_format",
        "reasoning_effort",
        "stop",
        "top_p",
        "seed",
        "user",
        "metadata",
        "parallel_tool_calls",
        "logprobs",
    ],
    "messages": [
        "model",
        "max_tokens",
        "messages",
        "system",
        "stream",
        "temperature",
        "tools",
        "tool_choice",
        "metadata",
        "stop_sequences",
        "thinking",
        "top_k",
        "top_p",
    ],
    "responses": [
        "model",
        "input",
        "instructions",
        "stream",
        "temperature",
        "top_p",
        "max_output_tokens",
        "tools",
        "reasoning",
        "text",
        "tool_choice",
        "previous_response_id",
        "store",
        "include",
        "metadata",
    ],
}
FIELDS["count_tokens"] = [f for f in FIELDS["messages"] if f not in ("max_tokens", "stream")]
BLOCK_TYPES = [
    "text",
    "image",
    "image_url",
    "input_text",
    "input_image",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "function_call",
    "function_call_output",
    "reasoning",
    "message",
    "refusal",
    "input_audio",
    "file",
    "server_tool_use",
    "web_search_tool_result",
    "custom_tool_call",
    "nonsense",
]
ROLES = ["user", "assistant", "system", "developer", "tool", "function", "model", ""]

SPECIAL_NUMBERS = st.sampled_from(
    [0, -1, 1, -(2**31), 2**31, 2**53 + 1, 2**63, 2**64, 10**40, -(10**40), 0.5, -0.0, 1e308, -1e308, 5e-324, 3.0]
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    SPECIAL_NUMBERS,
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(BLOCK_TYPES + ROLES),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["type", "text", "content", "role", "name", "id", "source", "input", "arguments", "image_url", "x"]
            )
            | st.text(max_size=6),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)

#: Placeholders replaced in the serialised text by what cannot be built as a Python object cheaply.
DEEP = "\x00deep:{}\x00"
WIDE = "\x00wide:{}\x00"


def valid(endpoint: str, model: str) -> dict[str, Any]:
    hi = [{"role": "user", "content": "hello fuzz"}]
    if endpoint == "chat":
        return {"model": model, "messages": hi}
    if endpoint == "responses":
        return {"model": model, "input": "hello fuzz"}
    if endpoint == "messages":
        return {"model": model, "max_tokens": 16, "messages": hi}
    return {"model": model, "messages": hi}


def _block(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(BLOCK_TYPES))
    block: dict[str, Any] = {"type": kind}
    for name in draw(
        st.lists(
            st.sampled_from(
                [
                    "text",
                    "source",
                    "image_url",
                    "content",
                    "input",
                    "id",
                    "name",
                    "tool_use_id",
                    "arguments",
                    "call_id",
                    "output",
                    "thinking",
                    "signature",
                    "data",
                    "summary",
                ]
            ),
            max_size=3,
        )
    ):
        block[name] = draw(VALUES)
    return block if draw(st.integers(0, 9)) else draw(VALUES)


def _message(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {"role": draw(st.sampled_from(ROLES) | VALUES)}
    content = draw(st.sampled_from(["text", "blocks", "other", "none"]))
    if content == "text":
        message["content"] = draw(st.text(max_size=40))
    elif content == "blocks":
        message["content"] = [_block(draw) for _ in range(draw(st.integers(0, 3)))]
    elif content == "other":
        message["content"] = draw(VALUES)
    for name in draw(st.lists(st.sampled_from(["name", "tool_calls", "tool_call_id", "type", "id", "x"]), max_size=2)):
        message[name] = draw(VALUES)
    return message if draw(st.integers(0, 9)) else draw(VALUES)


def _hostile_value(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["value", "number", "string", "deep", "wide", "messages", "blocks"]))
    if kind == "value":
        return draw(VALUES)
    if kind == "number":
        return draw(SPECIAL_NUMBERS)
    if kind == "string":
        return draw(st.sampled_from(["", "x" * 100_000, "\u202e\u0000\ud7ff", "🎉" * 1000, "[[fail:500]]"]))
    if kind == "deep":
        return DEEP.format(draw(st.sampled_from([64, 1_000, 20_000, 200_000])))
    if kind == "wide":
        return WIDE.format(draw(st.sampled_from([1_000, 50_000])))
    if kind == "messages":
        return [_message(draw) for _ in range(draw(st.integers(0, 4)))]
    return [_block(draw) for _ in range(draw(st.integers(0, 4)))]


@st.composite
def bodies(draw: st.DrawFn, endpoint: str, model: str) -> bytes:
    """One body for ``endpoint`` naming ``model``, as the bytes sent."""
    body = valid(endpoint, model)
    conversation = "input" if endpoint == "responses" else "messages"
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["set", "set", "unknown", "drop", "message", "message"]))
        if action == "set":
            body[draw(st.sampled_from(FIELDS[endpoint]))] = _hostile_value(draw)
        elif action == "unknown":
            body[draw(st.text(min_size=1, max_size=12))] = _hostile_value(draw)
        elif action == "drop" and body:
            body.pop(draw(st.sampled_from(sorted(body))))
        elif action == "message":
            items = body.get(conversation)
            if not isinstance(items, list):
                items = body[conversation] = []
            items.append(_message(draw))
    if draw(st.integers(0, 3)) == 0:
        body["stream"] = True
    return _damaged(draw, _serialised(body))


def _serialised(body: dict[str, Any]) -> bytes:
    text = json.dumps(body, ensure_ascii=False, allow_nan=False)
    while "\\u0000deep:" in text or "\\u0000wide:" in text:
        for marker, build in (
            ("deep", lambda n: "[" * n + "]" * n),
            ("wide", lambda n: "[" + ",".join(["0"] * n) + "]"),
        ):
            start = text.find(f'"\\u0000{marker}:')
            if start >= 0:
                end = text.index('\\u0000"', start + 1)
                n = int(text[start + len(f'"\\u0000{marker}:') : end])
                text = text[:start] + build(n) + text[end + len('\\u0000"') :]
    return text.encode("utf-8", "surrogatepass")


def _damaged(draw: st.DrawFn, raw: bytes) -> bytes:
    damage = draw(st.sampled_from(["none"] * 6 + ["utf8", "surrogate", "cut", "bytes", "empty"]))
    if damage == "none":
        return raw
    if damage in ("utf8", "surrogate"):  # inside the first string literal, so the JSON stays well-formed
        bad = b"\xff\xfe\xc3" if damage == "utf8" else "\ud800".encode("utf-8", "surrogatepass")
        at = raw.find(b'"', raw.find(b":")) + 1
        return raw[:at] + bad + raw[at:] if at > 0 else raw + bad
    if damage == "cut":
        return raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    if damage == "bytes":
        return draw(st.binary(max_size=64))
    return b""
