"""The fake Responses API's streams (``tests/support/fake_responses.py``): a finished response told as events.

The official order: ``response.created``, ``response.in_progress``, then for each output item its
``output_item.added``, its parts and deltas (text, a function's arguments, a custom tool's input, a
reasoning summary) and their ``.done`` events, ``output_item.done`` — where a reasoning item's
``encrypted_content`` is complete — and last ``response.completed`` (or ``.incomplete``); no
``[DONE]``. ``[[drop-after:N]]`` breaks the connection after N deltas, ``[[stream-error]]`` ends the
stream with ``response.failed`` after the first.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from tests.support.fake_upstream import Receive, Send, _drop, tokens

FAILURE = {"code": "server_error", "message": "The server had an error while processing your request."}


class _Cut(Exception):
    """The stream ends here: dropped, or failed."""


#: Sends one event of a kind with its payload (``stream_response``'s ``event`` and ``delta``).
_Emit = Callable[..., Awaitable[None]]


def _pieces(text: str) -> list[str]:
    size = max(1, -(-len(text) // 3))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _added(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``output_item.added`` announces it, before any delta."""
    kind = item["type"]
    if kind == "message":
        return {**item, "status": "in_progress", "content": []}
    if kind == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    if kind == "custom_tool_call":
        return {**item, "status": "in_progress", "input": ""}
    return {**item, "summary": [], "encrypted_content": None}


async def stream_response(response: dict[str, Any], d: Any, send: Send, receive: Receive) -> None:
    sequence = itertools.count()
    sent = 0

    async def event(kind: str, **payload: Any) -> None:
        frame = {"type": kind, "sequence_number": next(sequence), **payload}
        await send(
            {
                "type": "http.response.body",
                "more_body": True,
                "body": b"event: " + kind.encode() + b"\ndata: " + msgspec.json.encode(frame) + b"\n\n",
            }
        )

    async def delta(kind: str, **payload: Any) -> None:
        nonlocal sent
        if (d.drop_after is not None and sent >= d.drop_after) or (d.stream_error and sent >= 1):
            raise _Cut
        if d.chunk_delay_ms:
            await asyncio.sleep(d.chunk_delay_ms / 1000)
        await event(kind, **payload)
        sent += 1

    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    shell = {
        **response,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "incomplete_details": None,
        "completed_at": None,
    }
    await event("response.created", response=shell)
    await event("response.in_progress", response=shell)
    try:
        for index, item in enumerate(response["output"]):
            await event("response.output_item.added", output_index=index, item=_added(item))
            await _tell_item(item, {"item_id": item["id"], "output_index": index}, event, delta)
            await event("response.output_item.done", output_index=index, item=item)
        if d.drop_after is not None:
            raise _Cut
        await event(
            "response.incomplete" if response["status"] == "incomplete" else "response.completed", response=response
        )
    except _Cut:
        if d.drop_after is not None:
            return await _drop(send, receive)
        await event("response.failed", response={**shell, "status": "failed", "error": FAILURE})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _tell_item(item: dict[str, Any], where: dict[str, Any], event: _Emit, delta: _Emit) -> None:
    """An output item's parts and deltas and their ``.done`` events, between its ``output_item.added``
    and ``output_item.done``."""
    if item["type"] == "message":
        part = item["content"][0]
        await event(
            "response.content_part.added",
            **where,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
        )
        for piece in tokens(part["text"]):
            await delta("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[])
        await event("response.output_text.done", **where, content_index=0, text=part["text"], logprobs=[])
        await event("response.content_part.done", **where, content_index=0, part=part)
    elif item["type"] == "function_call":
        for piece in _pieces(item["arguments"]):
            await delta("response.function_call_arguments.delta", **where, delta=piece)
        await event("response.function_call_arguments.done", **where, name=item["name"], arguments=item["arguments"])
    elif item["type"] == "custom_tool_call":
        for piece in _pieces(item["input"]):
            await delta("response.custom_tool_call_input.delta", **where, delta=piece)
        await event("response.custom_tool_call_input.done", **where, input=item["input"])
    else:
        for number, summary in enumerate(item["summary"]):
            at = {**where, "summary_index": number}
            await event("response.reasoning_summary_part.added", **at, part={"type": "summary_text", "text": ""})
            for piece in tokens(summary["text"]):
                await delta("response.reasoning_summary_text.delta", **at, delta=piece)
            await event("response.reasoning_summary_text.done", **at, text=summary["text"])
            await event("response.reasoning_summary_part.done", **at, part=summary)
