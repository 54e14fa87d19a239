"""What every upstream adapter provides."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol


class ChatStream(Protocol):
    """An open streaming answer: chat-completion chunks, as dicts, in order.

    Iteration raises :class:`app.errors.GatewayError` if the upstream fails mid-stream.
    """

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


class ChatUpstream(Protocol):
    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """A non-streaming chat completion (raises ``GatewayError`` on failure)."""
        ...

    async def open_stream(self, body: dict[str, Any]) -> ChatStream:
        """Start a streaming chat completion; raises before the first chunk if the upstream refuses."""
        ...

    async def aclose(self) -> None: ...
