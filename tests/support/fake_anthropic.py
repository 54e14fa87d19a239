"""The Anthropic Messages API side of the fake upstream (``tests/support/fake_upstream.py``).

``FakeUpstream`` routes ``/v1/messages`` and ``/v1/messages/count_tokens`` here,
so one loopback server fakes both providers; clients use ``anthropic_base_url``.
The wire format is the one the official SDK parses: the error envelope
``{"type": "error", "error": {...}, "request_id": ...}``, and streams where every
SSE frame carries an ``event:`` line naming the same ``type`` as its data (the
SDK silently skips frames without one).  Validation mirrors the real API's 400s
that a translating gateway is most likely to trigger (tool_use/tool_result
pairing, roles, system shape, temperature range, thinking budgets ...).

Behaviour follows the OpenAI side: the reply echoes the last user message and
the same ``[[directive]]`` markers drive failures, latency, dropped connections,
cache reads/writes (``[[cached:N]]``, ``[[cache-write:N]]``), tool use
(``[[tool:NAME]]``), thinking (``[[think]]``), a mid-stream error event
(``[[stream-error]]``) and no usage at all (``[[no-usage]]``).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from typing import Any

import msgspec

from tests.support.fake_upstream import (
    Receive,
    Send,
    _drop,
    _parse_directives,
    _Reject,
    _send_json,
    before_answering,
    cut_at_stop,
    tokens,
)

REQUEST_ID = "req_fake"
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_TOOL_CHOICES = ("auto", "any", "tool", "none")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    """Anthropic's error envelope; the SDK reads ``error.type``/``error.message`` from it."""
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": REQUEST_ID}


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def _invalid(message: str) -> _Reject:
    return _Reject(400, anthropic_error("invalid_request_error", message))


def content_text(content: Any) -> str:
    """Text of a message's content: the string, or text blocks + tool_result text + tool_use input as JSON."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_result":
            parts.append(content_text(block.get("content")))
        elif kind == "tool_use":
            parts.append(json.dumps(block.get("input", {})))
    return "".join(parts)


def prompt_tokens(req: dict[str, Any]) -> int:
    """System tokens plus, per message, its tokens + 3; directives count as written."""
    return len(tokens(content_text(req.get("system")))) + sum(
        len(tokens(content_text(m.get("content")))) + 3 for m in req["messages"]
    )


# --------------------------------------------------------------------------- validation
def _check_image(block: dict[str, Any], where: str) -> None:
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64":
        if source.get("media_type") not in _IMAGE_MEDIA_TYPES:  # type: ignore[union-attr]
            raise _invalid(
                f"{where}.source.base64.media_type: Input should be " + ", ".join(repr(t) for t in _IMAGE_MEDIA_TYPES)
            )
        if not isinstance(source.get("data"), str):  # type: ignore[union-attr]
            raise _invalid(f"{where}.source.base64.data: Field required")
    elif kind == "url":
        if not isinstance(source.get("url"), str):  # type: ignore[union-attr]
            raise _invalid(f"{where}.source.url.url: Field required")
    else:
        raise _invalid(
            f"{where}.source: Input tag {kind!r} found using 'type' does not match any of the "
            "expected tags: 'base64', 'url'"
        )


def _check_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        raise _invalid(f"{where}: Input should be a valid string or a list of content blocks")
    for j, block in enumerate(content):
        at = f"{where}.{j}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _invalid(f"{at}: Input should be a content block object with a 'type'")
        kind = block["type"]
        if kind == "text" and not isinstance(block.get("text"), str):
            raise _invalid(f"{at}.text: Input should be a valid string")
        if kind == "image":
            _check_image(block, at)
        elif kind == "tool_use":
            _check_tool_use(block, at)
        elif kind == "tool_result":
            _check_tool_result(block, at)
    return content


def _check_tool_use(block: dict[str, Any], at: str) -> None:
    if not isinstance(block.get("id"), str) or not _TOOL_ID.match(block["id"]):
        raise _invalid(f"{at}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    if not isinstance(block.get("name"), str):
        raise _invalid(f"{at}.tool_use.name: Field required")
    if not isinstance(block.get("input"), dict):
        raise _invalid(f"{at}.tool_use.input: Input should be a valid dictionary")


def _check_tool_result(block: dict[str, Any], at: str) -> None:
    if not isinstance(block.get("tool_use_id"), str) or not _TOOL_ID.match(block["tool_use_id"]):
        raise _invalid(f"{at}.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    if block.get("content") is not None:
        _check_blocks(block["content"], f"{at}.tool_result.content")


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Every tool_use needs a tool_result at the head of the next (user) message, and vice versa."""
    for i, m in enumerate(messages):
        blocks = m["content"] if isinstance(m["content"], list) else []
        if m["role"] == "user":
            before = messages[i - 1] if i else None
            used = {
                b["id"]
                for b in (
                    before["content"]
                    if before and before["role"] == "assistant" and isinstance(before["content"], list)
                    else []
                )
                if b["type"] == "tool_use"
            }
            for b in blocks:
                if b["type"] == "tool_result" and b["tool_use_id"] not in used:
                    raise _invalid(
                        f"messages.{i}: unexpected tool_use_id found in tool_result blocks: "
                        f"{b['tool_use_id']}. Each tool_result block must have a corresponding "
                        "tool_use block in the previous message."
                    )
            continue
        ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if not ids:
            continue
        after = messages[i + 1] if i + 1 < len(messages) else None
        answered: set[str] = set()
        if after is not None and after["role"] == "user" and isinstance(after["content"], list):
            for b in after["content"]:  # only the leading run of tool_result blocks counts
                if b["type"] != "tool_result":
                    break
                answered.add(b["tool_use_id"])
        if missing := [x for x in ids if x not in answered]:
            raise _invalid(
                f"tool_use ids were found without tool_result blocks immediately after: {', '.join(missing)}"
            )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate(req: Any, *, count_only: bool = False) -> None:
    """Raise the real API's 400 for the request shapes a gateway can get wrong."""
    if not isinstance(req, dict):
        raise _invalid("Request body must be a JSON object")
    if not isinstance(req.get("model"), str):
        raise _invalid("model: Field required")
    max_tokens = req.get("max_tokens")
    if not count_only and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise _invalid(
            "max_tokens: Field required"
            if max_tokens is None
            else "max_tokens: Input should be a valid integer greater than or equal to 1"
        )
    _check_messages(req.get("messages"))
    _check_sampling(req)
    _check_tools(req)
    _check_thinking(req, count_only=count_only)


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages: at least one message is required")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise _invalid(f"messages.{i}: Input should be a valid dictionary")
        if m.get("role") not in ("user", "assistant", "system"):  # "system": mid-conversation system turns
            raise _invalid(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
        _check_blocks(m.get("content"), f"messages.{i}.content")
    _check_tool_pairing(messages)


def _check_sampling(req: dict[str, Any]) -> None:
    """The system prompt, the temperature and the stop sequences."""
    system = req.get("system")
    if (
        system is not None
        and not isinstance(system, str)
        and not (
            isinstance(system, list)
            and all(isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in system)
        )
    ):
        raise _invalid("system: Input should be a valid string or a list of text blocks")
    temperature = req.get("temperature")
    if temperature is not None and (not _number(temperature) or not 0 <= temperature <= 1):
        raise _invalid("temperature: Input should be a number between 0 and 1")
    stops = req.get("stop_sequences")
    if stops is not None and not (isinstance(stops, list) and all(isinstance(s, str) and s.strip() for s in stops)):
        raise _invalid("stop_sequences: each stop sequence must be a string containing non-whitespace")


def _check_tools(req: dict[str, Any]) -> None:
    tools = req.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _invalid("tools: Input should be a valid list")
    for k, tool in enumerate(tools or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise _invalid(f"tools.{k}.name: Field required")
        if tool.get("type") in (None, "custom") and not isinstance(tool.get("input_schema"), dict):
            raise _invalid(f"tools.{k}.custom.input_schema: Field required")
    choice = req.get("tool_choice")
    if choice is not None and (not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICES):
        raise _invalid("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
    if isinstance(choice, dict) and choice["type"] == "tool" and not isinstance(choice.get("name"), str):
        raise _invalid("tool_choice.tool.name: Field required")


def _check_thinking(req: dict[str, Any], *, count_only: bool) -> None:
    """A thinking budget of at least 1,024 tokens, below max_tokens, at temperature 1 (if one is set)."""
    thinking = req.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1024:
            raise _invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if not count_only and budget >= req["max_tokens"]:
            raise _invalid("max_tokens must be greater than thinking.budget_tokens")
        temperature = req.get("temperature")
        if temperature is not None and temperature != 1:
            raise _invalid("temperature may only be set to 1 when thinking is enabled")


# --------------------------------------------------------------------------- handling
async def handle_anthropic(
    api_key: str | None, method: str, path: str, raw: bytes, headers: dict[str, str], receive: Receive, send: Send
) -> None:
    """Serve one Anthropic route; errors use Anthropic's envelope (handled here, not by the OpenAI side)."""
    rid = [(b"request-id", REQUEST_ID.encode())]
    try:
        if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            raise _Reject(404, anthropic_error("not_found_error", f"Not found: {method} {path}"))
        # The real API takes x-api-key; anthropic 2.x SDKs send the key as "Authorization: Bearer" instead.
        if (
            api_key is not None
            and api_key != headers.get("x-api-key")
            and headers.get("authorization") != f"Bearer {api_key}"
        ):
            raise _Reject(401, anthropic_error("authentication_error", "invalid x-api-key"))
        if not headers.get("anthropic-version"):
            raise _invalid("anthropic-version: header is required")
        try:
            req = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            raise _invalid("There was an issue with your request body: it is not valid JSON") from None
        count_only = path.endswith("/count_tokens")
        validate(req, count_only=count_only)
        if count_only:
            return await _send_json(send, 200, {"input_tokens": prompt_tokens(req)}, rid)
        await _messages(req, receive, send)
    except _Reject as r:
        await _send_json(send, r.status, r.body, r.headers + rid)


def _reply(req: dict[str, Any]) -> tuple[Any, list[dict[str, Any]], str, str | None]:
    """(directives, content blocks, stop_reason, stop_sequence) for a validated request."""
    user = next((m for m in reversed(req["messages"]) if m["role"] == "user"), None)
    content = user["content"] if user else ""
    prefix, source = "Echo: ", content_text(content)
    if isinstance(content, list) and content and all(b["type"] == "tool_result" for b in content):
        prefix, source = "Echo: tool result: ", " ".join(content_text(b.get("content")) for b in content)
    text, d = _parse_directives(source, _invalid)
    blocks: list[dict[str, Any]] = []
    thinking = req.get("thinking")
    if d.think and isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        blocks.append(
            {"type": "thinking", "thinking": f"Thinking about: {text}", "signature": "sig_" + secrets.token_hex(16)}
        )
    if d.tool is not None and req.get("tools"):
        blocks.append({"type": "text", "text": f"Calling {d.tool}."})
        blocks.append(
            {
                "type": "tool_use",
                "id": "toolu_" + secrets.token_hex(12),
                "name": d.tool,
                "input": d.tool_args if d.tool_args is not None else {"echo": text},
            }
        )
        return d, blocks, "tool_use", None
    reply, stop_sequence = cut_at_stop(prefix + text, req.get("stop_sequences") or [])
    pieces = tokens(reply)
    stop_reason = "stop_sequence" if stop_sequence is not None else "end_turn"
    if len(pieces) > req["max_tokens"]:
        pieces, stop_reason, stop_sequence = pieces[: req["max_tokens"]], "max_tokens", None
    blocks.append({"type": "text", "text": "".join(pieces)})
    return d, blocks, stop_reason, stop_sequence


def _block_output(block: dict[str, Any]) -> str:
    """The text a content block is billed for as output."""
    if block["type"] == "tool_use":
        return json.dumps(block["input"])
    return str(block.get(block["type"], ""))  # "thinking" or "text"


async def _messages(req: dict[str, Any], receive: Receive, send: Send) -> None:
    d, blocks, stop_reason, stop_sequence = _reply(req)
    await before_answering(d)
    if d.fail is not None:
        extra = [(b"retry-after", b"1")] if d.fail == 429 else []
        raise _Reject(d.fail, anthropic_error(error_type(d.fail), f"fake upstream failure {d.fail}"), extra)
    read, write = d.cached, d.cache_write or 0
    cache = {"cache_creation_input_tokens": write, "cache_read_input_tokens": read}
    input_tokens = prompt_tokens(req) - read - write
    output_tokens = sum(len(tokens(_block_output(b))) for b in blocks)
    message = {"id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant", "model": req["model"]}
    # [[no-usage]]: a provider that reports no usage at all (the gateway must count it itself).
    usage: dict[str, Any] = {} if d.no_usage else {"usage": {"input_tokens": input_tokens, **cache}}
    if req.get("stream") is not True:
        if d.drop_after is not None:
            return await _drop(send, receive)
        if usage:
            usage["usage"]["output_tokens"] = output_tokens
        return await _send_json(
            send,
            200,
            {**message, "content": blocks, "stop_reason": stop_reason, "stop_sequence": stop_sequence, **usage},
            [(b"request-id", REQUEST_ID.encode())],
        )

    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"request-id", REQUEST_ID.encode()),
            ],
        }
    )
    await _event(
        send,
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                **({"usage": {**usage["usage"], "output_tokens": 1}} if usage else {}),
            },
        },
    )
    # [[drop-after:N]] breaks the connection after N deltas; [[stream-error]] sends an error event after 1.
    limit = d.drop_after if d.drop_after is not None else 1 if d.stream_error else None
    sent = 0
    for index, block in enumerate(blocks):
        await _event(send, {"type": "content_block_start", "index": index, "content_block": _empty(block)})
        if index == 0:
            await _event(send, {"type": "ping"})
        for delta in _deltas(block):
            if limit is not None and sent >= limit:
                return await _cut(send, receive, dropped=d.drop_after is not None)
            if d.chunk_delay_ms:
                await asyncio.sleep(d.chunk_delay_ms / 1000)
            await _event(send, {"type": "content_block_delta", "index": index, "delta": delta})
            sent += 1
        await _event(send, {"type": "content_block_stop", "index": index})
    if limit is not None:
        return await _cut(send, receive, dropped=d.drop_after is not None)
    await _event(
        send,
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            **({"usage": {"output_tokens": output_tokens, **usage["usage"]}} if usage else {}),
        },
    )
    await _event(send, {"type": "message_stop"})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _empty(block: dict[str, Any]) -> dict[str, Any]:
    """A block as content_block_start announces it, before any delta."""
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if block["type"] == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    return {"type": "text", "text": ""}


def _deltas(block: dict[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "thinking":
        return [{"type": "thinking_delta", "thinking": p} for p in tokens(block["thinking"])] + [
            {"type": "signature_delta", "signature": block["signature"]}
        ]
    if block["type"] == "tool_use":
        args = json.dumps(block["input"])
        size = max(1, -(-len(args) // 3))
        return [
            {"type": "input_json_delta", "partial_json": p}
            for p in ["", *(args[i : i + size] for i in range(0, len(args), size))]
        ]
    return [{"type": "text_delta", "text": p} for p in tokens(block["text"])]


async def _event(send: Send, payload: dict[str, Any]) -> None:
    """One ``event:``/``data:`` frame per ASGI message, so the client sees a real incremental stream."""
    await send(
        {
            "type": "http.response.body",
            "more_body": True,
            "body": b"event: " + payload["type"].encode() + b"\ndata: " + msgspec.json.encode(payload) + b"\n\n",
        }
    )


async def _cut(send: Send, receive: Receive, *, dropped: bool) -> None:
    if dropped:
        return await _drop(send, receive)
    await _event(send, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
