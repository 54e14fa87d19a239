"""The generation endpoints, dispatched before Litestar's router.

Every request a client is billed for goes through one of three POST paths. Litestar's routing,
signature model, middleware stack and response hooks cost about 0.1 ms of CPU per request on these
machines (a bare Litestar handler against a raw ASGI callable on the same uvicorn, measured by
scripts/bench's profile) — a tenth of the gateway's whole own cost per request, for nothing these
handlers use: they take the ``Request`` alone and return a finished response.

So for exactly those paths this callable builds the same ``Request`` Litestar would (same scope keys:
the app, the route handler whose body-size limit applies, the state), calls the handler's function,
and turns its answer or its error into ASGI messages with the same exception handlers as the app.
Everything else (admin, models, unknown paths, other methods) goes to Litestar unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from litestar import Litestar, Request, Response
from litestar.enums import MediaType, ScopeType
from litestar.handlers import HTTPRouteHandler
from litestar.types import Receive, Scope, Send

ExceptionHandler = Callable[[Request[Any, Any, Any], Any], Response[bytes]]


class HotPaths:
    def __init__(
        self,
        app: Litestar,
        handlers: list[HTTPRouteHandler],
        exception_handlers: Mapping[type[BaseException], ExceptionHandler],
        by_path: tuple[Callable[[str], bool], HTTPRouteHandler] | None = None,
    ) -> None:
        self.app = app
        self._handlers = {path: handler for handler in handlers for path in handler.paths}
        #: A handler of paths that hold a parameter (Gemini's ``/v1beta/models/ID:generateContent``),
        #: and the test of a path it takes; it reads the path itself.
        self._by_path = by_path
        self._exception_handlers = list(exception_handlers.items())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        is_post = scope["type"] == ScopeType.HTTP and scope["method"] == "POST"
        handler = self._handlers.get(scope["path"]) if is_post else None
        if handler is None and is_post and self._by_path is not None and self._by_path[0](scope["path"]):
            handler = self._by_path[1]
        if handler is None:
            await self.app(scope, receive, send)
            return
        scope["litestar_app"] = self.app
        scope["route_handler"] = handler
        scope.setdefault("state", {})
        request: Request[Any, Any, Any] = Request(scope, receive, send)
        try:
            response = await handler.fn(request)
        except Exception as exc:  # noqa: BLE001 - every error becomes its endpoint's error body
            response = self._answer_error(request, exc)
        try:
            if _is_whole(response):
                await _send_whole(response, send)
            else:
                await response.to_asgi_response(None, request)(scope, receive, send)  # the app is request.app
        finally:
            # A stream's relay ends here however its answer ended — sent whole, the client gone, or
            # cut off (a send that raised): Litestar stops iterating but does not close the iterator,
            # which would otherwise wait for the garbage collector to settle its hold.
            iterator = getattr(response, "iterator", None)
            if iterator is not None and hasattr(iterator, "aclose"):
                await iterator.aclose()

    def _answer_error(self, request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
        for kind, answer in self._exception_handlers:  # most specific first, as the app lists them
            if isinstance(exc, kind):
                return answer(request, exc)
        raise exc


def _is_whole(response: Response[Any]) -> bool:
    """A finished body with nothing Litestar must add (no cookies, no background task), of a status
    that carries a body: sent as two ASGI messages, as Litestar would send them."""
    status = response.status_code or 200
    return (
        type(response) is Response
        and isinstance(response.content, bytes)
        and not response.cookies
        and response.background is None
        and status >= 200
        and status not in (204, 304)
    )


async def _send_whole(response: Response[Any], send: Send) -> None:
    """Litestar's ``ASGIResponse`` for a whole body, without building one: the handler's headers in
    its order (names lowercased), then ``content-type`` and ``content-length`` unless it set them."""
    body: bytes = response.content
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()]
    names = {name for name, _ in headers}
    if b"content-type" not in names:
        given = response.media_type or MediaType.JSON
        media_type = given.value if isinstance(given, MediaType) else given
        if media_type.startswith("text/"):
            media_type = f"{media_type}; charset={response.encoding}"
        headers.append((b"content-type", media_type.encode("latin-1")))
    if b"content-length" not in names:
        headers.append((b"content-length", str(len(body)).encode("latin-1")))
    await send({"type": "http.response.start", "status": response.status_code or 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
