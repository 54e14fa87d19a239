"""An AWS Bedrock Converse upstream's side: canonical requests → its wire, its answers → canonical.

Converse is one API over every model Bedrock serves (Llama, Mistral, Amazon Nova, …), so no client
speaks it: a request to a ``bedrock`` deployment with ``api = "converse"`` is always translated.
Shapes follow bedrock-runtime's service model (2023-09-30): the REST wire carries an image's bytes
as a base64 string, and a ConverseStream event is one frame whose ``:event-type`` header names it;
the adapter hands each event here as ``{event_type: payload}``, as boto3 parses it.
"""

from __future__ import annotations

import json
from typing import Any

from app.errors import InvalidRequest
from app.json import object_or
from app.translate import canonical as c
from app.translate.messages.client import arguments_object
from app.translate.tools import ToolNames
from domain.usage import TokenUsage

_STOP_IN: dict[object, c.Finish] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
#: The image formats Converse takes, by media type.
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}


def usage_from_converse(usage: Any) -> TokenUsage | None:
    """Converse's ``inputTokens`` leave the cache out (as Anthropic's do): reads and writes are
    counted beside them, each billed at its own rate."""
    if not isinstance(usage, dict):
        return None

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    return TokenUsage(
        input_tokens=count(usage.get("inputTokens")),
        output_tokens=count(usage.get("outputTokens")),
        cache_write_tokens=count(usage.get("cacheWriteInputTokens")),
        cache_hit_tokens=count(usage.get("cacheReadInputTokens")),
    )


# -- requests ------------------------------------------------------------------------------------


def _media(part: c.Text | c.Image | c.File) -> dict[str, Any]:
    if isinstance(part, c.Text):
        return {"text": part.text}
    if isinstance(part, c.File):
        raise InvalidRequest("Documents cannot be sent to a Bedrock Converse model through Tollgate.")
    fmt = _IMAGE_FORMATS.get(part.media_type or "")
    if part.url or fmt is None:
        raise InvalidRequest(
            "A Bedrock Converse model takes images as base64 data of type "
            f"{', '.join(_IMAGE_FORMATS)}, not {'a URL' if part.url else repr(part.media_type)}."
        )
    return {"image": {"format": fmt, "source": {"bytes": part.data}}}


def _result(part: c.ToolResult) -> dict[str, Any]:
    content = [_media(p) for p in part.content if not isinstance(p, c.Text) or p.text] or [{"text": ""}]
    return {
        "toolResult": {
            "toolUseId": c.safe_tool_id(part.call_id),
            "content": content,
            "status": "error" if part.is_error else "success",
        }
    }


def _block(part: c.Part, names: ToolNames) -> dict[str, Any] | None:
    if isinstance(part, c.Text):
        return {"text": part.text} if part.text else None
    if isinstance(part, c.Image | c.File):
        return _media(part)
    if isinstance(part, c.ToolResult):
        return _result(part)
    if isinstance(part, c.ToolCall):
        return {
            "toolUse": {
                "toolUseId": c.safe_tool_id(part.id),
                "name": names.upstream_name(part.name, part.namespace),
                "input": arguments_object(part),
            }
        }
    # Reasoning goes back only with the signature that lets the model check it (Anthropic's on Bedrock).
    if part.redacted:
        return {"reasoningContent": {"redactedContent": part.redacted}}
    if part.signature:
        return {"reasoningContent": {"reasoningText": {"text": part.text, "signature": part.signature}}}
    return None


def _messages(req: c.Request, names: ToolNames) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in req.messages:
        if message.role == "system":
            continue
        blocks = [b for b in (_block(p, names) for p in message.parts) if b is not None] or [{"text": "(empty)"}]
        if out and out[-1]["role"] == message.role:  # Converse wants the roles to alternate
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": message.role, "content": blocks})
    return out


def canonical_to_converse_body(req: c.Request, max_output_tokens: int, names: ToolNames) -> dict[str, Any]:
    """The Converse body; the model is named in the URL, not here. System text from the middle of
    the conversation is hoisted, as for Anthropic."""
    body: dict[str, Any] = {"messages": _messages(req, names)}
    texts = [*req.system, *(p for m in req.messages if m.role == "system" for p in m.parts if isinstance(p, c.Text))]
    if any(t.text for t in texts):
        body["system"] = [{"text": t.text} for t in texts if t.text]
    config: dict[str, Any] = {"maxTokens": req.max_output_tokens or max_output_tokens}
    if req.temperature is not None:
        config["temperature"] = min(req.temperature, 1.0)
    if req.top_p is not None:
        config["topP"] = req.top_p
    stops = [s for s in req.stop if s.strip()]
    if stops:
        config["stopSequences"] = stops
    body["inferenceConfig"] = config
    if req.top_k is not None:  # not one of Converse's own fields: the model's
        body["additionalModelRequestFields"] = {"top_k": req.top_k}
    _add_tools(body, req, names)
    return body


def _add_tools(body: dict[str, Any], req: c.Request, names: ToolNames) -> None:
    """The request's functions and how the model must use them; none when the client said ``none``
    (Converse has no such choice: a model offered no tools calls none)."""
    if not req.tools or req.tool_choice == "none":
        return
    specs = []
    for tool in req.tools:
        name, description, parameters = names.definition(tool)
        spec: dict[str, Any] = {"name": name, "inputSchema": {"json": parameters}}
        if description:
            spec["description"] = description
        specs.append({"toolSpec": spec})
    config: dict[str, Any] = {"tools": specs}
    if isinstance(req.tool_choice, c.NamedTool):
        config["toolChoice"] = {"tool": {"name": names.upstream_name(req.tool_choice.name, req.tool_choice.namespace)}}
    elif req.tool_choice == "required":
        config["toolChoice"] = {"any": {}}
    elif req.tool_choice == "auto":
        config["toolChoice"] = {"auto": {}}
    body["toolConfig"] = config


# -- answers -------------------------------------------------------------------------------------


def _reasoning(block: dict[str, Any]) -> c.Thinking:
    if block.get("redactedContent"):
        return c.Thinking("", redacted=str(block["redactedContent"]))
    text = object_or(block.get("reasoningText"), {})
    return c.Thinking(str(text.get("text", "")), text.get("signature") or None)


def converse_to_canonical(answer: dict[str, Any]) -> c.Response:
    message = object_or(object_or(answer.get("output"), {}).get("message"), {})
    parts: list[c.Text | c.ToolCall | c.Thinking] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if "text" in block:
            parts.append(c.Text(str(block["text"])))
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            parts.append(
                c.ToolCall(str(use.get("toolUseId")), str(use.get("name")), json.dumps(use.get("input") or {}))
            )
        elif isinstance(block.get("reasoningContent"), dict):
            parts.append(_reasoning(block["reasoningContent"]))
    return c.Response(
        id="",
        model="",
        parts=parts,
        finish=_STOP_IN.get(answer.get("stopReason"), "stop"),
        usage=usage_from_converse(answer.get("usage")),
    )


def _delta(delta: dict[str, Any]) -> list[c.Event]:
    if "text" in delta:
        return [c.TextDelta(str(delta["text"]))]
    use = delta.get("toolUse")
    if isinstance(use, dict):
        return [c.ToolArgumentsDelta(str(use.get("input", "")))]
    reasoning = object_or(delta.get("reasoningContent"), {})
    if "text" in reasoning:
        return [c.ThinkingDelta(str(reasoning["text"]))]
    if reasoning.get("signature"):
        return [c.ThinkingSealed(signature=str(reasoning["signature"]))]
    if reasoning.get("redactedContent"):
        return [c.ThinkingSealed(redacted=str(reasoning["redactedContent"]))]
    return []


class ConverseEventReader:
    """ConverseStream events, each ``{event_type: payload}``, → canonical events. Usage comes once,
    in the last event (``metadata``), after ``messageStop`` has said why the answer ended."""

    def events(self, event: dict[str, Any]) -> list[c.Event]:
        if isinstance(event.get("contentBlockStart"), dict):
            use = object_or(object_or(event["contentBlockStart"].get("start"), {}).get("toolUse"), None)
            return [c.ToolCallStarted(str(use.get("toolUseId")), str(use.get("name")))] if use else []
        if isinstance(event.get("contentBlockDelta"), dict):
            return _delta(object_or(event["contentBlockDelta"].get("delta"), {}))
        if isinstance(event.get("messageStop"), dict):
            return [c.Finished(_STOP_IN.get(event["messageStop"].get("stopReason"), "stop"))]
        if isinstance(event.get("metadata"), dict):
            usage = usage_from_converse(event["metadata"].get("usage"))
            return [c.UsageReported(usage)] if usage is not None else []
        return []
