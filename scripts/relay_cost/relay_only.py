"""``--part relay``: one request through the relay alone, without auth, prompt count or ledger, so that
what changes between two runs is the relay's own cost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, ClassVar

from litestar.response import Stream

from app.http.prompt_size import model_rules
from app.http.relay import answer
from app.tokens import Protocol as Wire
from app.tokens.delivered import Delivered
from app.translate.exchange import plan
from domain.usage import TokenUsage
from scripts.relay_cost.driver import Driver


class _Call:
    """What the relay asks of a billed call, without the ledger: the charge is the final frames'
    rendering, with a fixed cost (``--part relay``)."""

    def __init__(self, exchange: Any, upstream: Any, delivered: Delivered) -> None:
        self.exchange = exchange
        self.transcript = None
        self.headers: dict[str, str] = {}
        self.delivered = delivered
        self._upstream = upstream
        self._stream: Any = None

    def seal(self, extra: Mapping[str, str] | None = None) -> None:
        """As the billed call's: the answer's headers completed and checked sendable (a version before
        the check never calls it)."""
        if extra:
            self.headers.update(extra)
        from app.http.answer_head import encoded_headers  # only a version that seals has it

        encoded_headers(self.headers)

    async def __aenter__(self) -> _Call:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stream is not None:
            if hasattr(self._stream, "close"):
                self._stream.close()
            else:  # the stream of a version before streams closed at once
                await self._stream.aclose()

    async def complete(self) -> Any:
        return await self._upstream.complete(self.exchange.body, self.exchange.headers)

    async def open_stream(self) -> Any:
        self._stream = await self._upstream.open_stream(self.exchange.body, self.exchange.headers)
        return self._stream

    async def charge(self, usage: TokenUsage, render: Callable[[dict[str, Any]], bytes]) -> bytes:
        return render(_COST)

    async def charge_stream(self, usage: TokenUsage, final: Callable[[dict[str, Any]], list[bytes]]) -> bytes:
        return b"".join(final(_COST))

    async def last_frames(self, frames: bytes) -> bytes:
        from app.http.event_stream import LastChunk  # only a version with last frames asks for them

        return LastChunk(frames)

    async def settle_partial(self, exc: Exception) -> None:
        raise RuntimeError(f"the canned stream failed: {exc}")


_COST = {"cost": {"credits": Decimal("0.000123")}, "remaining": {"credits": Decimal("99.99")}}


class _Request:
    headers: ClassVar[dict[str, str]] = {}


async def relay_once(driver: Driver) -> int:
    """One request through the relay alone (``app/http/relay.py``: plan, call, answer, and the
    streamed answer's ASGI messages), its call billed by nothing."""
    path, body, _, _ = driver.case
    protocol: Wire = "chat" if path == "/v1/chat/completions" else "messages"
    model = driver.runtime.settings.model(body["model"])
    assert model is not None
    upstream = driver.runtime.upstreams[model.id]
    exchange = plan(model, upstream.wire, protocol, dict(body), {}, 20)
    call = _Call(exchange, upstream, Delivered(model_rules(model, upstream.wire), 20))
    response = await answer(call)  # type: ignore[arg-type]
    if not isinstance(response, Stream):
        return 200 if response.content else 0
    complete = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await complete.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            complete.set()

    await response.to_asgi_response(None, _Request())({}, receive, send)  # type: ignore[arg-type]
    return 200
