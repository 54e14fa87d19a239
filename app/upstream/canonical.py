"""Any upstream, spoken to in canonical terms: encode for its wire, call it, decode its answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.translate import canonical as c
from app.translate.chat import ChatChunkReader, canonical_to_chat_body, chat_response_to_canonical, usage_from_openai
from app.translate.messages import MessagesEventReader, canonical_to_messages_body, message_to_canonical
from app.upstream.base import Upstream
from domain.settings import Model


def upstream_body(upstream: Upstream, req: c.Request, model: Model) -> dict[str, Any]:
    """The request in the upstream's wire. Its ``model`` is the gateway's id: the deployment that is
    called puts its own name in (:class:`app.upstream.fallback.FallbackUpstream`)."""
    if upstream.wire == "messages":
        return canonical_to_messages_body(req, model.id, model.max_output_tokens)
    return canonical_to_chat_body(req, model.id)


async def complete(upstream: Upstream, req: c.Request, model: Model, headers: dict[str, str] | None = None) -> c.Response:
    answer = await upstream.complete(upstream_body(upstream, req, model), headers)
    if upstream.wire == "messages":
        return message_to_canonical(answer)
    return chat_response_to_canonical(answer, usage_from_openai(answer.get("usage")))


class CanonicalStream:
    """An open upstream stream, read as canonical events."""

    def __init__(self, raw: Any, wire: str) -> None:
        self._raw = raw
        self._reader = MessagesEventReader() if wire == "messages" else ChatChunkReader()

    async def __aiter__(self) -> AsyncIterator[c.Event]:
        async for item in self._raw:
            for event in self._reader.events(item):
                yield event

    async def aclose(self) -> None:
        await self._raw.aclose()


async def open_stream(upstream: Upstream, req: c.Request, model: Model,
                      headers: dict[str, str] | None = None) -> CanonicalStream:
    raw = await upstream.open_stream(upstream_body(upstream, req, model), headers)
    return CanonicalStream(raw, upstream.wire)
