"""A streamed answer (server-sent events), sent with the least machinery that keeps its behaviour.

Litestar's ``Stream`` sends its body from an anyio task group: one task sends the chunks while the
other waits for the client's ``http.disconnect`` and cancels the group. That machinery — the task
group, a task, sniffio's lookup of the running library, a cancel scope whose ``cancel`` formats the
task's repr — and its header encoding cost more CPU per streamed request than the relay itself
(``python -m scripts.relay_cost``). The same behaviour costs a future and a callback: the chunks are
sent from the request's own task, and a disconnect cancels that task, once; the cancellation ends the
send (as the task group's did) and is absorbed here, so the caller sees the answer end as it would
have with Litestar's. The headers are those Litestar would send (the given ones, lower-cased, then
the content type with its charset).

The answer's first chunk is given apart (the relay reads it before answering, so that a refusal is
an ordinary error answer), so no generator is stacked on the relay's only to put it back in front.
A chunk that says it is the last (:class:`LastChunk`) goes out with the end of the body, in the
same write.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable
from typing import Any

from litestar import Litestar, Request
from litestar.background_tasks import BackgroundTask, BackgroundTasks
from litestar.datastructures.cookie import Cookie
from litestar.enums import MediaType
from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.types import Receive, Scope, Send, TypeEncodersMap

_MEDIA_TYPE = "text/event-stream"


class LastChunk(bytes):
    """The answer's last chunk: sent with the end of the body (whatever the stream yields after it
    is not sent)."""

    __slots__ = ()


class EventStream(Stream):
    """A stream of ``first`` then every chunk of ``rest`` (its ``iterator``, which whoever sends it
    closes), as ``text/event-stream``."""

    __slots__ = ("first",)

    def __init__(self, first: bytes, rest: AsyncGenerator[bytes, None], *, headers: dict[str, str]) -> None:
        super().__init__(rest, headers=headers, media_type=_MEDIA_TYPE)
        self.first = first

    def to_asgi_response(
        self,
        app: Litestar | None,
        request: Request[Any, Any, Any],
        *,
        background: BackgroundTask | BackgroundTasks | None = None,
        cookies: Iterable[Cookie] | None = None,
        encoded_headers: Iterable[tuple[bytes, bytes]] | None = None,
        headers: dict[str, str] | None = None,
        is_head_response: bool = False,
        media_type: MediaType | str | None = None,
        status_code: int | None = None,
        type_encoders: TypeEncodersMap | None = None,
    ) -> ASGIResponse:
        if background or cookies or encoded_headers or headers or is_head_response or self.cookies:
            raise NotImplementedError("an event stream is sent as it is, by the generation endpoints' fast path")
        encoded = [
            (name.lower().encode("latin-1"), str(value).encode("latin-1")) for name, value in self.headers.items()
        ]
        if not any(name == b"content-type" for name, _ in encoded):
            encoded.append((b"content-type", f"{_MEDIA_TYPE}; charset={self.encoding}".encode("latin-1")))
        return _EventStreamResponse(self.status_code or 200, encoded, self.first, self.iterator)  # type: ignore[return-value,arg-type]


class _EventStreamResponse:
    """The ASGI side of an :class:`EventStream` (what ``to_asgi_response`` answers)."""

    __slots__ = ("_first", "_headers", "_rest", "_status")

    def __init__(
        self, status: int, headers: list[tuple[bytes, bytes]], first: bytes, rest: AsyncGenerator[bytes, None]
    ) -> None:
        self._status = status
        self._headers = headers
        self._first = first
        self._rest = rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the head, every chunk, then the end of the body; the client's disconnect stops it
        (cancelling this task once, wherever it waits: on the relay, or on a send)."""
        await send({"type": "http.response.start", "status": self._status, "headers": self._headers})
        task = asyncio.current_task()
        assert task is not None
        watch = _DisconnectWatch(task, receive)
        try:
            ended = await _send_chunk(send, self._first, watch)
            async for chunk in self._rest:
                if not ended:
                    ended = await _send_chunk(send, chunk, watch)
            if not ended:
                watch.stop()  # nothing left to cut short: the disconnect that follows the answer is not one
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not watch.cancelled or task.uncancel() > 0:
                raise  # not (only) the client's disconnect: the task itself is being cancelled
        finally:
            watch.stop()
        watch.raise_failure()


async def _send_chunk(send: Send, chunk: bytes, watch: _DisconnectWatch) -> bool:
    """Send a chunk; whether it ended the body."""
    if type(chunk) is LastChunk:
        watch.stop()
        await send({"type": "http.response.body", "body": chunk, "more_body": False})
        return True
    await send({"type": "http.response.body", "body": chunk, "more_body": True})
    return False


class _DisconnectWatch:
    """Waits for the client's ``http.disconnect`` (from ``receive``) and then cancels ``task``."""

    __slots__ = ("_failure", "_receive", "_task", "_waiter", "cancelled")

    def __init__(self, task: asyncio.Task[Any], receive: Receive) -> None:
        self._task = task
        self._receive = receive
        self._failure: BaseException | None = None
        self.cancelled = False
        self._waiter: asyncio.Future[Any] | None = None
        self._listen()

    def _listen(self) -> None:
        self._waiter = asyncio.ensure_future(self._receive())
        self._waiter.add_done_callback(self._received)

    def _received(self, waiter: asyncio.Future[Any]) -> None:
        if waiter is not self._waiter or waiter.cancelled():
            return
        failure = waiter.exception()
        if failure is None and waiter.result()["type"] != "http.disconnect":
            self._listen()  # another message (none is expected once the body was read): listen on
            return
        self._failure = failure
        self._waiter = None
        self.cancelled = True
        self._task.cancel()

    def stop(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.cancel()

    def raise_failure(self) -> None:
        """``receive`` failed (as Litestar's task group would, the failure is the answer's)."""
        if self._failure is not None:
            raise self._failure
