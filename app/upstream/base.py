"""What every upstream adapter provides: its wire protocol, spoken as JSON dicts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol


class RawStream(Protocol):
    """An open streaming answer: the wire's chunks or events, as dicts, in order.

    Iteration raises :class:`app.errors.GatewayError` if the upstream fails mid-stream.
    """

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


class Upstream(Protocol):
    #: ``chat`` (OpenAI Chat Completions), ``responses`` (the OpenAI Responses API) or ``messages``
    #: (Anthropic Messages).
    wire: str

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        """A non-streaming answer (raises ``GatewayError`` on failure)."""
        ...

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> RawStream:
        """Start a streaming answer; raises before the first item if the upstream refuses."""
        ...

    async def aclose(self) -> None: ...
