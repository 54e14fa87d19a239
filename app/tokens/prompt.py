"""A request's prompt tokens, for each of the three wire protocols, under one model's rules.

The walkers only find the pieces — messages, text, images, tool calls and results, thinking, tool
definitions, output schemas — in a chat, responses or messages body; what each piece costs is
decided by the ``Rules`` (``app/tokens/counting.py``), so the three protocols are counted alike.

Pieces whose size only the provider knows (audio, PDF documents, file ids, encrypted reasoning) are
not counted; the upstream's own context-window error still applies to them. Everything else a
protocol may carry that is not known here — a new block, item or part type, a new top-level field —
is counted as its JSON text (keys and punctuation included, opaque payloads excepted), which errs
high: the gateway forwards what it does not understand, and never counts it as free.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from app.json import object_or
from app.tokens.counting import Rules
from app.tokens.image_size import size_of_base64, size_of_data_url

#: Fields that carry binary or opaque payloads, never text the model reads as tokens of ours.
_OPAQUE_KEYS = frozenset({"data", "file_data", "file_id", "encrypted_content", "signature", "cache_control"})
_json = msgspec.json.Encoder()


class Tally:
    """A running count under one model's rules, and the images it met (for the vision check)."""

    __slots__ = ("images", "rules", "total")

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.total = 0
        self.images = 0

    def text(self, value: Any) -> None:
        if isinstance(value, str) and value:
            self.total += self.rules.text(value)

    def message(self, role: Any, name: Any = None) -> None:
        self.total += self.rules.per_message
        self.text(role)
        if isinstance(name, str) and name:
            self.total += self.rules.per_name
            self.text(name)

    def image(self, size: tuple[int, int] | None, detail: Any = None) -> None:
        self.images += 1
        self.total += self.rules.image(size, detail if isinstance(detail, str) else None)

    def tool_call(self, *texts: Any) -> None:
        """A tool call or a tool result in the history: its id, name and arguments (or output)."""
        self.total += self.rules.per_tool_call
        for value in texts:
            self.text(value)

    def as_json(self, value: Any) -> None:
        """Structured data the model reads as JSON text (tool inputs, schemas)."""
        if value is not None:
            self.text(_json.encode(value).decode())

    def tools(self, definitions: Any) -> None:
        if not isinstance(definitions, list) or not definitions:
            return
        self.total += self.rules.tools_preamble
        for definition in definitions:
            self.total += self.rules.per_tool + self.rules.per_enum_value * _enum_values(definition)
            self.as_json(definition)

    def strings(self, value: Any) -> None:
        """Every string in a structure the model reads as text (a reasoning summary), opaque
        payloads excepted."""
        if isinstance(value, str):
            self.text(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in _OPAQUE_KEYS:
                    self.strings(item)
        elif isinstance(value, list):
            for item in value:
                self.strings(item)

    def unknown(self, value: Any) -> None:
        """Something this counter does not know: its whole JSON text, opaque payloads excepted."""
        if value is not None:
            self.text(_json.encode(_without_opaque(value)).decode())

    def fields(self, body: dict[str, Any], known: frozenset[str]) -> None:
        """A body's top-level fields this counter does not know (a new parameter may carry text)."""
        for key, value in body.items():
            if key not in known:
                self.unknown({key: value})

    def done(self) -> int:
        return self.total + self.rules.per_request


def _listed(value: Any) -> list[Any]:
    """The items of a list; nothing for anything else (the counter reads bodies no one checked:
    a request passed through is judged by its upstream, so a wrong type here must not crash)."""
    return value if isinstance(value, list) else []


def _without_opaque(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_opaque(v) for k, v in value.items() if k not in _OPAQUE_KEYS}
    if isinstance(value, list):
        return [_without_opaque(v) for v in value]
    return value


#: The top-level fields of each protocol that carry no prompt text of their own (or that the
#: counter reads itself); any other is counted as text.
_CHAT_FIELDS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "functions",
        "response_format",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "n",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "seed",
        "tool_choice",
        "function_call",
        "parallel_tool_calls",
        "user",
        "reasoning_effort",
        "metadata",
        "store",
        "service_tier",
        "modalities",
        "audio",
        "prediction",
        "verbosity",
        "web_search_options",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
    }
)
_RESPONSES_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "text",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "max_output_tokens",
        "max_tool_calls",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "store",
        "include",
        "metadata",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "previous_response_id",
        "conversation",
        "background",
        "truncation",
        "service_tier",
        "top_logprobs",
    }
)
_MESSAGES_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "max_tokens",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tool_choice",
        "thinking",
        "metadata",
        "output_config",
        "service_tier",
        "context_management",
        "container",
        "inference_geo",
        "cache_control",
    }
)


def _enum_values(schema: Any) -> int:
    """How many ``enum`` values a tool's JSON schema lists, at any depth."""
    if isinstance(schema, dict):
        enum = schema.get("enum")
        found = len(enum) if isinstance(enum, list) else 0
        return found + sum(_enum_values(v) for k, v in schema.items() if k != "enum" and isinstance(v, dict | list))
    if isinstance(schema, list):
        return sum(_enum_values(v) for v in schema if isinstance(v, dict | list))
    return 0


# -- Chat Completions --------------------------------------------------------------------------------


def chat_prompt(body: dict[str, Any], rules: Rules) -> Tally:
    tally = Tally(rules)
    for message in _listed(body.get("messages")):
        if not isinstance(message, dict):
            continue
        tally.message(message.get("role"), message.get("name"))
        _chat_content(tally, message.get("content"))
        tally.text(message.get("refusal"))
        for call in _listed(message.get("tool_calls")):
            if isinstance(call, dict):
                function = object_or(call.get("function"), call.get("custom"))
                function = function if isinstance(function, dict) else {}
                tally.tool_call(call.get("id"), function.get("name"), function.get("arguments"), function.get("input"))
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            tally.tool_call(legacy.get("name"), legacy.get("arguments"))
        if message.get("tool_call_id") is not None:
            tally.tool_call(message.get("tool_call_id"))
    tally.tools(body.get("tools"))
    tally.tools(body.get("functions"))
    tally.as_json(body.get("response_format") if _is_schema(body.get("response_format")) else None)
    tally.fields(body, _CHAT_FIELDS)
    return tally


def _chat_content(tally: Tally, content: Any) -> None:
    if isinstance(content, str):
        tally.text(content)
        return
    for part in _listed(content):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            tally.text(part.get("text"))
        elif kind == "refusal":
            tally.text(part.get("refusal"))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            detail = image.get("detail") if isinstance(image, dict) else None
            tally.image(size_of_data_url(url) if isinstance(url, str) else None, detail)
        else:
            tally.unknown(part)


def _is_schema(response_format: Any) -> bool:
    return isinstance(response_format, dict) and response_format.get("type") == "json_schema"


# -- Responses ---------------------------------------------------------------------------------------


def responses_prompt(body: dict[str, Any], rules: Rules) -> Tally:
    tally = Tally(rules)
    if body.get("instructions"):
        tally.message("system")
        tally.text(body.get("instructions"))
    items = body.get("input")
    if isinstance(items, str):
        tally.message("user")
        tally.text(items)
        items = ()
    for item in _listed(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            tally.message(item.get("role"))
            _responses_content(tally, item.get("content"))
        elif kind == "function_call":
            tally.message("assistant")
            tally.tool_call(item.get("call_id"), item.get("namespace"), item.get("name"), item.get("arguments"))
        elif kind == "custom_tool_call":
            tally.message("assistant")
            tally.tool_call(item.get("call_id"), item.get("namespace"), item.get("name"), item.get("input"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            tally.message("tool")
            tally.tool_call(item.get("call_id"))
            _responses_content(tally, item.get("output"))
        elif kind == "reasoning":
            tally.message("assistant")
            tally.strings(item.get("summary"))
        else:
            tally.message(item.get("role"))
            tally.unknown(item)
    tally.tools(body.get("tools"))
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    tally.as_json(fmt if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None)
    tally.fields(body, _RESPONSES_FIELDS)
    return tally


def _responses_content(tally: Tally, content: Any) -> None:
    if isinstance(content, str):
        tally.text(content)
        return
    for part in _listed(content):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            tally.text(part.get("text"))
        elif kind == "refusal":
            tally.text(part.get("refusal"))
        elif kind == "input_image":
            url = part.get("image_url")
            tally.image(size_of_data_url(url) if isinstance(url, str) else None, part.get("detail"))
        else:
            tally.unknown(part)


# -- Anthropic Messages ------------------------------------------------------------------------------


def messages_prompt(body: dict[str, Any], rules: Rules) -> Tally:
    tally = Tally(rules)
    system = body.get("system")
    if system:
        tally.message("system")
        _message_blocks(tally, system)
    for message in _listed(body.get("messages")):
        if isinstance(message, dict):
            tally.message(message.get("role"))
            _message_blocks(tally, message.get("content"))
    tally.tools(body.get("tools"))
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else None
    tally.as_json(fmt if isinstance(fmt, dict) else None)
    tally.fields(body, _MESSAGES_FIELDS)
    return tally


def _message_blocks(tally: Tally, content: Any) -> None:
    if isinstance(content, str):
        tally.text(content)
        return
    for block in _listed(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        count = _MESSAGE_BLOCKS.get(kind) if isinstance(kind, str) else None
        if count is None:
            tally.unknown(block)
        else:
            count(tally, block)


def _image_block(tally: Tally, block: dict[str, Any]) -> None:
    source = block.get("source")
    data = source.get("data") if isinstance(source, dict) and source.get("type") == "base64" else None
    tally.image(size_of_base64(data) if isinstance(data, str) else None)


def _tool_use_block(tally: Tally, block: dict[str, Any]) -> None:
    tally.tool_call(block.get("id"), block.get("name"))
    tally.as_json(block.get("input"))


def _tool_result_block(tally: Tally, block: dict[str, Any]) -> None:
    tally.tool_call(block.get("tool_use_id"))
    _message_blocks(tally, block.get("content"))


def _document_block(tally: Tally, block: dict[str, Any]) -> None:
    source = object_or(block.get("source"), {})
    if source.get("type") == "text":
        tally.text(source.get("data"))
    elif source.get("type") == "content":
        _message_blocks(tally, source.get("content"))
    tally.text(block.get("title"))
    tally.text(block.get("context"))


#: How each kind of Messages content block is counted; a kind not here is counted as its JSON.
_MESSAGE_BLOCKS: dict[str, Callable[[Tally, dict[str, Any]], None]] = {
    "text": lambda tally, block: tally.text(block.get("text")),
    "image": _image_block,
    "tool_use": _tool_use_block,
    "tool_result": _tool_result_block,
    "thinking": lambda tally, block: tally.text(block.get("thinking")),
    "redacted_thinking": lambda tally, block: None,  # opaque, and not counted
    "document": _document_block,
}
