"""Other models on AWS Bedrock (Llama, Mistral, Amazon Nova, …): the Converse wire at
``{endpoint}/model/{modelId}/converse`` and ``…/converse-stream``, signed with SigV4 as InvokeModel is.

Converse is Bedrock's own shape for every model, so the body is the ``converse`` wire's
(``app/translate/converse/upstream.py``) less ``model``, which goes in the URL. A stream comes in AWS's
event-stream framing, as InvokeModel's does, but each frame is one Converse event whose
``:event-type`` header names it (``messageStart`` … ``metadata``, the last, with the usage); it is
handed on as ``{event_type: payload}``, the shape boto3 gives it. A failure mid-stream is an
``exception`` message, mapped as InvokeModel's are.
"""

from __future__ import annotations

from typing import Any

import msgspec
from botocore.eventstream import EventStreamBuffer, EventStreamMessage

from app.errors import GatewayError, UpstreamFailure
from app.upstream.base import Answer, StreamEvent
from app.upstream.bedrock import (
    _EXCEPTION_TYPES,
    EVENT_STREAM,
    BedrockUpstream,
    EventStream,
    as_sent,
    model_url,
    read_frames,
)
from app.upstream.errors import error_from_stream_event

#: The events of a Converse stream (its exceptions come as ``exception`` messages).
_EVENTS = frozenset({"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop"})


class BedrockConverseUpstream(BedrockUpstream):
    """The ``converse`` wire; ``modelId`` is the deployment's ``model``: a model id or a cross-region
    inference profile (``us.meta.llama3-3-70b-instruct-v1:0``)."""

    wire = "converse"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        url, content = self._converse(body, "converse")
        answer = await self._post_json(as_sent(url), content, await self._signed(url, content, "application/json"))
        if not answer.starts_with("output", b"{"):
            raise UpstreamFailure("The upstream provider sent an answer without output.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> EventStream:
        url, content = self._converse(body, "converse-stream")
        response = await self._send(as_sent(url), content, await self._signed(url, content, EVENT_STREAM))
        return EventStream(response, _converse_events)

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        raise UpstreamFailure("A Bedrock Converse deployment serves only conversations.", status=400)

    def _converse(self, body: dict[str, Any], action: str) -> tuple[str, bytes]:
        sent = {key: value for key, value in body.items() if key not in ("model", "stream")}
        return model_url(self._base, body, action), msgspec.json.encode(sent)


def _converse_events(frames: EventStreamBuffer) -> tuple[list[StreamEvent], bool | GatewayError]:
    """The Converse events of the frames read so far; the stream ends with ``metadata``."""
    return read_frames(frames, _event, lambda event: "metadata" in (event.object() or {}))


def _event(message: EventStreamMessage) -> StreamEvent | GatewayError | None:
    headers = message.headers
    if headers.get(":message-type") == "event":
        name = headers.get(":event-type")
        if name not in _EVENTS and name != "metadata":
            return None
        try:
            payload = msgspec.json.decode(message.payload)
        except msgspec.DecodeError:
            return UpstreamFailure("The upstream provider sent an invalid stream event.")
        return StreamEvent.of({str(name): payload})
    name = str(headers.get(":exception-type") or headers.get(":error-code") or "error")
    try:
        text = msgspec.json.decode(message.payload).get("message", "")
    except (msgspec.DecodeError, AttributeError):
        text = message.payload[:300].decode("utf-8", "replace")
    failure = error_from_stream_event({"type": _EXCEPTION_TYPES.get(name, name), "message": f"{name}: {text}"})
    failure.upstream_wire = "converse"
    return failure
