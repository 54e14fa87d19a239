"""The OpenAI Responses API side of the fake upstream (``tests/support/fake_upstream.py``): ``POST /v1/responses``.

It answers as the official SDK and the Codex CLI parse it — the Response object with its usage in
the official names, and streams whose every frame has an ``event:`` line, a ``sequence_number`` and
the official order of events — and it refuses, with OpenAI's 400s, what a translating gateway could
get wrong: a chat-style tool, an unknown item type, a tool output without its call, and reasoning it
did not issue (its ``encrypted_content`` is signed, so another provider's reasoning is caught).

Behaviour follows the other sides: the reply echoes the last user message (or the trailing tool
outputs), and the same ``[[directive]]`` markers drive failures, latency, dropped connections, cache
reads (``[[cached:N]]``), reasoning (``[[think]]``: a reasoning item with a summary and encrypted
content when asked for; ``[[reason:N]]``: hidden reasoning tokens), tool calls (``[[tool:NAME]]``, a
function — in its namespace if it has one — or a custom tool), a ``response.failed`` mid-stream
(``[[stream-error]]``) and no usage (``[[no-usage]]``). Responses stored (``store`` not false) can be
continued with ``previous_response_id``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

from tests.support.fake_upstream import (
    Receive,
    Send,
    _bad,
    _drop,
    _parse_directives,
    _send_json,
    before_answering,
    openai_failure,
    openai_request,
    tokens,
)

_SECRET = secrets.token_bytes(16)
_ROLES = ("user", "assistant", "system", "developer")
_BUILTIN_TOOLS = (
    "web_search",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "image_generation",
    "local_shell",
    "shell",
    "mcp",
    "computer_use_preview",
    "apply_patch",
    "tool_search",
)
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_STORED: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}  # id → (input, output)


def encrypted(text: str) -> str:
    """Reasoning as only this fake can read it back: the text, signed."""
    payload = base64.urlsafe_b64encode(text.encode()).decode()
    return "gAAAA" + payload + "." + hmac.new(_SECRET, payload.encode(), hashlib.sha256).hexdigest()[:32]


def _verified(token: Any) -> bool:
    if not isinstance(token, str) or not token.startswith("gAAAA") or "." not in token:
        return False
    payload, _, signature = token[5:].rpartition(".")
    return hmac.compare_digest(signature, hmac.new(_SECRET, payload.encode(), hashlib.sha256).hexdigest()[:32])


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        str(p.get("text") or "")
        for p in content or ()
        if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
    )


# --------------------------------------------------------------------------- validation
def _check_items(items: list[Any]) -> None:
    calls: set[str] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise _bad("Invalid type for 'input': expected an object.", where)
        kind = item.get("type", "message")
        if kind == "message":
            _check_message(item, where)
        elif kind in ("function_call", "custom_tool_call"):
            _check_call(item, kind, where)
            calls.add(item["call_id"])
        elif kind in ("function_call_output", "custom_tool_call_output"):
            _check_call_output(item, where, calls)
        elif kind == "reasoning":
            if item.get("encrypted_content") is not None and not _verified(item["encrypted_content"]):
                raise _bad(f"The encrypted content for item {item.get('id')} could not be verified.", where)
        elif kind != "item_reference" and not str(kind).endswith(("_call", "_call_output")):
            raise _bad(f"Invalid value: {kind!r}.", f"{where}.type")


def _check_message(item: dict[str, Any], where: str) -> None:
    if item.get("role") not in _ROLES:
        raise _bad(
            f"Invalid value: {item.get('role')!r}. Supported values are: 'user', 'assistant', "
            "'system', and 'developer'.",
            f"{where}.role",
        )
    if not isinstance(item.get("content"), str | list):
        raise _bad("Invalid type: expected a string or an array of content parts.", f"{where}.content")


def _check_call(item: dict[str, Any], kind: str, where: str) -> None:
    field = "arguments" if kind == "function_call" else "input"
    if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
        raise _bad(f"Missing required parameter: '{where}.call_id'.", where)
    if not isinstance(item.get(field), str):
        raise _bad(f"Invalid type for '{where}.{field}': expected a string.", f"{where}.{field}")


def _check_call_output(item: dict[str, Any], where: str, calls: set[str]) -> None:
    """A call's output, which answers one of the ``calls`` made earlier in the input."""
    if not isinstance(item.get("output"), str | list):
        raise _bad("Invalid type: expected a string or an array of content parts.", f"{where}.output")
    if not isinstance(item.get("call_id"), str) or item["call_id"] not in calls:
        raise _bad(f"No tool call found for function call output with call_id {item.get('call_id')}.", "input")


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _bad("Invalid type for 'tools': expected an array.", "tools")
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        inner = [(f"tools[{i}]", tool)]
        if kind == "namespace":
            if not isinstance(tool.get("name"), str) or not isinstance(tool.get("tools"), list):
                raise _bad(f"Missing required parameter: 'tools[{i}].tools'.", f"tools[{i}]")
            inner = [(f"tools[{i}].tools[{j}]", t) for j, t in enumerate(tool["tools"])]
        elif kind in _BUILTIN_TOOLS:
            continue
        elif kind not in ("function", "custom"):
            raise _bad(f"Invalid value: {kind!r}.", f"tools[{i}].type")
        for where, t in inner:
            if not isinstance(t, dict) or t.get("type") not in ("function", "custom"):
                raise _bad("Invalid value: namespaces hold function and custom tools.", f"{where}.type")
            if not isinstance(t.get("name"), str):
                raise _bad(f"Missing required parameter: '{where}.name'.", f"{where}.name")


def validate(req: Any) -> None:
    if not isinstance(req, dict) or not isinstance(req.get("model"), str):
        raise _bad("Missing required parameter: 'model'.", "model")
    items = req.get("input")
    if not isinstance(items, str | list):
        raise _bad("Missing required parameter: 'input'.", "input")
    if isinstance(items, list):
        _check_items(items)
    _check_tools(req.get("tools"))
    limit = req.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 16):
        raise _bad(
            f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got "
            f"{limit} instead.",
            "max_output_tokens",
        )
    temperature = req.get("temperature")
    if temperature is not None and (not isinstance(temperature, int | float) or not 0 <= temperature <= 2):
        raise _bad("Invalid 'temperature': expected a number between 0 and 2.", "temperature")
    fmt = (req.get("text") or {}).get("format") if isinstance(req.get("text"), dict) else None
    if fmt is not None and (
        not isinstance(fmt, dict)
        or fmt.get("type") not in ("text", "json_object", "json_schema")
        or (fmt["type"] == "json_schema" and not (fmt.get("name") and "schema" in fmt))
    ):
        raise _bad("Invalid 'text.format'.", "text.format")
    reasoning = req.get("reasoning")
    if reasoning is not None and (
        not isinstance(reasoning, dict)
        or reasoning.get("effort") not in (None, *_EFFORTS)
        or reasoning.get("summary") not in (None, "auto", "concise", "detailed")
    ):
        raise _bad("Invalid 'reasoning'.", "reasoning")
    previous = req.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or previous not in _STORED):
        raise _bad(f"Previous response with id '{previous}' not found.", "previous_response_id")


# --------------------------------------------------------------------------- answering
def prompt_tokens(req: dict[str, Any], items: list[dict[str, Any]]) -> int:
    """Instructions' tokens, plus per input item its text's tokens + 3 (a call's arguments, an output's text)."""
    total = len(tokens(str(req.get("instructions") or "")))
    for item in items:
        text = (
            _text(item.get("content"))
            if item.get("type", "message") == "message"
            else str(item.get("arguments") or item.get("input") or "") + _text(item.get("output"))
        )
        total += len(tokens(text)) + 3
    return total


def _find_tool(tools: list[Any], name: str) -> tuple[dict[str, Any], str | None] | None:
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or ():
                if inner.get("name") == name:
                    return inner, tool["name"]
        elif tool.get("type") in ("function", "custom") and tool.get("name") == name:
            return tool, None
    return None


def _output(req: dict[str, Any], items: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]], str | None, int]:
    """(directives, output items, incomplete reason, reasoning tokens)."""
    trailing = []
    for item in reversed(items):
        if item.get("type") not in ("function_call_output", "custom_tool_call_output"):
            break
        trailing.insert(0, item)
    if trailing:
        prefix = "Echo: tool result: "
        source = " ".join(o["output"] if isinstance(o.get("output"), str) else _text(o.get("output")) for o in trailing)
    else:
        user = next(
            (i for i in reversed(items) if i.get("type", "message") == "message" and i.get("role") == "user"), {}
        )
        prefix, source = "Echo: ", _text(user.get("content"))
    text, d = _parse_directives(source)
    output: list[dict[str, Any]] = []
    reasoning_tokens = d.reason
    config = req.get("reasoning")
    if d.think and isinstance(config, dict):
        thought = f"Thinking about: {text}"
        include = req.get("include") or []
        output.append(
            {
                "type": "reasoning",
                "id": "rs_" + secrets.token_hex(12),
                "summary": [{"type": "summary_text", "text": thought}] if config.get("summary") else [],
                "encrypted_content": encrypted(thought) if "reasoning.encrypted_content" in include else None,
            }
        )
        reasoning_tokens += len(tokens(thought))
    found = _find_tool(req.get("tools") or [], d.tool) if d.tool else None
    if found is not None:
        tool, namespace = found
        call_id = "call_" + secrets.token_hex(8)
        if tool["type"] == "custom":
            given = (d.tool_args or {}).get("input")
            item = {
                "type": "custom_tool_call",
                "id": "ctc_" + secrets.token_hex(12),
                "call_id": call_id,
                "name": d.tool,
                "input": given if isinstance(given, str) else text,
                "status": "completed",
            }
        else:
            item = {
                "type": "function_call",
                "id": "fc_" + secrets.token_hex(12),
                "call_id": call_id,
                "name": d.tool,
                "arguments": json.dumps(d.tool_args if d.tool_args is not None else {"echo": text}),
                "status": "completed",
            }
        if namespace is not None:
            item["namespace"] = namespace
        return d, [*output, item], None, reasoning_tokens
    pieces = tokens(prefix + text)
    limit, incomplete = req.get("max_output_tokens"), None
    if isinstance(limit, int) and len(pieces) + reasoning_tokens > limit:
        pieces, incomplete = pieces[: max(0, limit - reasoning_tokens)], "max_output_tokens"
    output.append(
        {
            "type": "message",
            "id": "msg_" + secrets.token_hex(12),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "".join(pieces), "annotations": [], "logprobs": []}],
        }
    )
    return d, output, incomplete, reasoning_tokens


def _output_tokens(output: list[dict[str, Any]], reasoning_tokens: int) -> int:
    count = reasoning_tokens
    for item in output:
        if item["type"] == "message":
            count += len(tokens(item["content"][0]["text"]))
        elif item["type"] in ("function_call", "custom_tool_call"):
            count += len(tokens(item.get("arguments") or item.get("input") or "")) + 3
    return count


async def handle_responses(
    api_key: str | None, raw: bytes, headers: dict[str, str], receive: Receive, send: Send
) -> None:
    req = openai_request(api_key, raw, headers)
    validate(req)
    items = [{"role": "user", "content": req["input"]}] if isinstance(req["input"], str) else list(req["input"])
    if req.get("previous_response_id"):
        earlier_input, earlier_output = _STORED[req["previous_response_id"]]
        items = [*earlier_input, *earlier_output, *items]
    d, output, incomplete, reasoning_tokens = _output(req, items)
    await before_answering(d)
    if d.fail is not None:
        raise openai_failure(d.fail, f"fake upstream failure {d.fail}")
    prompt = prompt_tokens(req, items)
    produced = _output_tokens(output, reasoning_tokens)
    usage = (
        None
        if d.no_usage
        else {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": min(d.cached, prompt)},
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": prompt + produced,
        }
    )
    response = _response(req, output, usage, incomplete)
    if req.get("store") is not False:
        _STORED[response["id"]] = (items, output)
    if req.get("stream") is not True:
        if d.drop_after is not None:
            return await _drop(send, receive)
        return await _send_json(send, 200, response)
    from tests.support.fake_responses_stream import stream_response  # the event sequence, in a module of its own

    await stream_response(response, d, send, receive)


def _response(
    req: dict[str, Any], output: list[dict[str, Any]], usage: dict[str, Any] | None, incomplete: str | None
) -> dict[str, Any]:
    now = int(time.time())
    return {
        "id": "resp_" + secrets.token_hex(12),
        "object": "response",
        "created_at": now,
        "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": req.get("instructions"),
        "max_output_tokens": req.get("max_output_tokens"),
        "model": req["model"],
        "output": output,
        "parallel_tool_calls": req.get("parallel_tool_calls", True),
        "previous_response_id": req.get("previous_response_id"),
        "reasoning": req.get("reasoning") or {"effort": None, "summary": None},
        "store": req.get("store", True),
        "temperature": req.get("temperature", 1.0),
        "text": req.get("text") or {"format": {"type": "text"}},
        "tool_choice": req.get("tool_choice", "auto"),
        "tools": req.get("tools") or [],
        "top_p": req.get("top_p", 1.0),
        "truncation": req.get("truncation", "disabled"),
        "usage": usage,
        "user": req.get("user"),
        "metadata": req.get("metadata") or {},
        "completed_at": now,
    }
