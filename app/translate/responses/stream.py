"""Canonical stream events → the Responses API's server-sent events, as the SDK's helpers read them.

Each output item is opened (``response.output_item.added``), filled by its deltas — text, a function's
arguments, a custom tool's input, a reasoning summary — and closed with its ``.done`` events and
``response.output_item.done``; every event carries the next ``sequence_number``.
"""

from __future__ import annotations

import secrets
from typing import Any

from app.errors import GatewayError
from app.json import encode
from app.translate import canonical as c
from app.translate.responses.client import ResponseShell, call_item, message_item, usage_dict
from domain.usage import TokenUsage


def sse(event: dict[str, Any]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + encode(event) + b"\n\n"


class ResponsesStreamWriter:
    def __init__(self, shell: ResponseShell) -> None:
        self._shell = shell
        self._seq = 0
        self._output: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._text = ""
        self._call: c.ToolCall | None = None
        self._thinking: c.Thinking | None = None
        self._finish: str | None = None

    def _sse(self, kind: str, payload: dict[str, Any]) -> bytes:
        event = {"type": kind, "sequence_number": self._seq, **payload}
        self._seq += 1
        return sse(event)

    def start(self) -> list[bytes]:
        shell = self._shell.response("in_progress", [], None)
        return [
            self._sse("response.created", {"response": shell}),
            self._sse("response.in_progress", {"response": shell}),
        ]

    def _where(self) -> dict[str, Any]:
        assert self._open is not None
        return {"item_id": self._open["id"], "output_index": len(self._output)}

    def _add(self, item: dict[str, Any]) -> list[bytes]:
        frames = self._close()
        self._open = item
        return [*frames, self._sse("response.output_item.added", {"output_index": len(self._output), "item": item})]

    def _close(self) -> list[bytes]:
        item = self._open
        if item is None:
            return []
        where = self._where()
        frames: list[bytes] = []
        if item["type"] == "message":
            done = message_item(item["id"], self._text, "completed")
            frames += [
                self._sse(
                    "response.output_text.done", {**where, "content_index": 0, "text": self._text, "logprobs": []}
                ),
                self._sse("response.content_part.done", {**where, "content_index": 0, "part": done["content"][0]}),
            ]
        elif item["type"] == "reasoning":
            assert self._thinking is not None
            done = self._shell.reasoning_item(item["id"], self._thinking, "completed")
            if self._thinking.text:
                part = {"type": "summary_text", "text": self._thinking.text}
                frames += [
                    self._sse(
                        "response.reasoning_summary_text.done",
                        {**where, "summary_index": 0, "text": self._thinking.text},
                    ),
                    self._sse("response.reasoning_summary_part.done", {**where, "summary_index": 0, "part": part}),
                ]
        else:
            assert self._call is not None
            done = call_item(item["id"], self._call, "completed")
            if self._call.custom:
                frames.append(
                    self._sse("response.custom_tool_call_input.done", {**where, "input": self._call.arguments})
                )
            else:
                frames.append(
                    self._sse(
                        "response.function_call_arguments.done",
                        {**where, "name": self._call.name, "arguments": self._call.arguments},
                    )
                )
        frames.append(self._sse("response.output_item.done", {"output_index": len(self._output), "item": done}))
        self._output.append(done)
        self._open = None
        return frames

    def write(self, raw: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        return [frame for event in events for frame in self.event(event)]

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.TextDelta) and event.text:
            frames: list[bytes] = []
            if self._open is None or self._open["type"] != "message":
                self._text = ""
                frames = self._add(message_item("msg_" + secrets.token_hex(12), "", "in_progress"))
                frames.append(
                    self._sse(
                        "response.content_part.added",
                        {
                            **self._where(),
                            "content_index": 0,
                            "part": {"type": "output_text", "text": "", "annotations": []},
                        },
                    )
                )
            self._text += event.text
            return [
                *frames,
                self._sse(
                    "response.output_text.delta",
                    {**self._where(), "content_index": 0, "delta": event.text, "logprobs": []},
                ),
            ]
        if isinstance(event, c.ThinkingSealed) or (isinstance(event, c.ThinkingDelta) and event.text):
            return self._reasoning(event)
        if isinstance(event, c.ToolCallStarted):
            self._call = c.ToolCall(event.id, event.name, "", event.namespace, event.custom)
            return self._add(
                call_item(("ctc_" if event.custom else "fc_") + secrets.token_hex(12), self._call, "in_progress")
            )
        if (
            isinstance(event, c.ToolArgumentsDelta)
            and self._call is not None
            and self._open is not None
            and self._open["type"] in ("function_call", "custom_tool_call")
        ):
            self._call.arguments += event.fragment
            kind = "custom_tool_call_input" if self._call.custom else "function_call_arguments"
            return [self._sse(f"response.{kind}.delta", {**self._where(), "delta": event.fragment})]
        if isinstance(event, c.Finished):
            self._finish = event.reason
            return self._close()
        return []

    def _reasoning(self, event: c.ThinkingDelta | c.ThinkingSealed) -> list[bytes]:
        frames: list[bytes] = []
        if self._open is None or self._open["type"] != "reasoning":
            self._thinking = c.Thinking("")
            frames = self._add(
                {"type": "reasoning", "id": "rs_" + secrets.token_hex(12), "summary": [], "status": "in_progress"}
            )
        assert self._thinking is not None
        if isinstance(event, c.ThinkingSealed):
            self._thinking.signature, self._thinking.redacted = event.signature, event.redacted
            self._thinking.item_id, self._thinking.encrypted = event.item_id, event.encrypted
            return [*frames, *self._close()]
        if not self._thinking.text:
            frames.append(
                self._sse(
                    "response.reasoning_summary_part.added",
                    {**self._where(), "summary_index": 0, "part": {"type": "summary_text", "text": ""}},
                )
            )
        self._thinking.text += event.text
        return [
            *frames,
            self._sse(
                "response.reasoning_summary_text.delta", {**self._where(), "summary_index": 0, "delta": event.text}
            ),
        ]

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        frames = self._close()
        response = self._shell.response(
            "completed", self._output, {**usage_dict(usage, reasoning_tokens), **extra_usage}, self._finish
        )
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        frames.append(self._sse(kind, {"response": response}))
        return frames

    def error(self, exc: GatewayError) -> list[bytes]:
        failed = self._shell.response("failed", self._output, None, error={"code": exc.type, "message": exc.message})
        return [self._sse("response.failed", {"response": failed})]
