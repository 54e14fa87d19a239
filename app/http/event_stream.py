"""A streamed answer (server-sent events) sent without Litestar's per-stream task group.

Litestar's ``Stream`` sends its body from an anyio task group: one task sends the chunks while the
other waits for the client's ``http.disconnect`` and cancels the group. That machinery — the task
group, a task, sniffio's lookup of the running library, a cancel scope whose ``cancel`` formats the
task's repr — cost about a fifth of a streamed request's CPU in process (``python -m
scripts.relay_cost``), more than the relay itself. The same behaviour costs a future and a callback:
the chunks are sent from the request's own task, and a disconnect cancels that task, once; the
cancellation ends the send (as the task group's did) and is absorbed here, so the caller sees the
answer end as it would have with Litestar's. The headers are Litestar's, built by its own code.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterable, Iterable
from typing import Any

from litestar import Litestar, Request
from litestar.background_tasks import BackgroundTask, BackgroundTasks
from litestar.datastructures.cookie import Cookie
from litestar.enums import MediaType
from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse
from litestar.types import Receive, Send, TypeEncodersMap
from litestar.utils.helpers import get_enum_string_value


class EventStream(Stream):
    """``Stream``, for an async iterator of ``bytes``, sent by :class:`_EventStreamResponse`."""

    def to_asgi_response(self, app: Litestar | None, request: Request[Any, Any, Any], *,
                         background: BackgroundTask | BackgroundTasks | None = None,
                         cookies: Iterable[Cookie] | None = None,
                         encoded_headers: Iterable[tuple[bytes, bytes]] | None = None,
                         headers: dict[str, str] | None = None, is_head_response: bool = False,
                         media_type: MediaType | str | None = None, status_code: int | None = None,
                         type_encoders: TypeEncodersMap | None = None) -> ASGIResponse:
        iterator = self.iterator
        if callable(iterator):
            iterator = iterator()
        return _EventStreamResponse(
            background=self.background or background, content_length=0,
            cookies=self.cookies if cookies is None else itertools.chain(self.cookies, cookies),
            encoded_headers=encoded_headers, encoding=self.encoding,
            headers={**headers, **self.headers} if headers is not None else self.headers,
            is_head_response=is_head_response, iterator=iterator,
            media_type=get_enum_string_value(media_type or self.media_type or MediaType.JSON),
            status_code=self.status_code or status_code)


class _EventStreamResponse(ASGIStreamingResponse):
    __slots__ = ()

    async def send_body(self, send: Send, receive: Receive) -> None:
        """Send every chunk, then the end of the body; the client's disconnect stops it (cancelling
        this task once, wherever it waits: on the relay, or on a send)."""
        task = asyncio.current_task()
        assert task is not None
        watch = _DisconnectWatch(task, receive)
        iterator: AsyncIterable[bytes] = self.iterator  # type: ignore[assignment]  # EventStream's
        try:
            async for chunk in iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            watch.stop()  # nothing left to cut short: the disconnect that follows the answer is not one
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not watch.cancelled or task.uncancel() > 0:
                raise  # not (only) the client's disconnect: the task itself is being cancelled
        finally:
            watch.stop()
        watch.raise_failure()


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
