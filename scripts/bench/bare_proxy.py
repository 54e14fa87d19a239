"""The floor of the gateway benchmark: the smallest honest Python async proxy.

No auth, no billing, no parsing: a plain ASGI callable on the same HTTP server stack as Tollgate
(uvicorn with uvloop and httptools, access log off) that forwards each request's body to the
upstream with one pooled aiohttp session (the client Tollgate uses, imported from it so that the
two can never drift apart) and relays the answer.
Streams are relayed event by event — each complete SSE event (up to its blank line) is sent as soon
as it has arrived, its own ASGI message — which is what any relay of a real provider's stream does
(a provider's events arrive apart in time); relaying the raw reads instead would send the fake
upstream's whole stream in one piece and make the floor cheaper than any real proxy could be.

Tollgate's own cost per request is measured against this: what Tollgate adds on top is what
authentication, validation, token counting, rate limits, billing and translation cost.

    BENCH_UPSTREAM_URL=http://127.0.0.1:9100 uvicorn scripts.bench.bare_proxy:app --port 9200
    python -m scripts.bench.bare_proxy --upstream http://127.0.0.1:9100 --port 9200 [--workers N]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from app.upstream.client import Timeouts, UpstreamClient, close

UPSTREAM_ENV = "BENCH_UPSTREAM_URL"
FORWARDED = (
    b"content-type",
    b"authorization",
    b"x-api-key",
    b"anthropic-version",
    b"anthropic-beta",
    b"x-goog-api-key",
)

_client: UpstreamClient | None = None
_TIMEOUTS = Timeouts(connect=10, read=600)


def _upstream() -> str:
    return os.environ.get(UPSTREAM_ENV, "http://127.0.0.1:9100").rstrip("/")


async def _lifespan(receive: Any, send: Any) -> None:
    global _client
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            # The same pool limits as Tollgate's client (app/runtime.py).
            _client = UpstreamClient(max_connections=1000)  # as Tollgate's (app/runtime.py)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if _client is not None:
                await _client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    headers = {k.decode(): v.decode() for k, v in scope["headers"] if k in FORWARDED}
    assert _client is not None
    try:
        response = await _client.post(_upstream() + scope["path"], b"".join(chunks), headers, _TIMEOUTS)
    except Exception:  # noqa: BLE001 - the floor answers any upstream failure with a 502, as a proxy would
        await send({"type": "http.response.start", "status": 502, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    try:
        content_type = response.headers.get("content-type", "application/json").encode()
        if not content_type.startswith(b"text/event-stream"):
            body = await response.read()
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status,
                    "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [(b"content-type", content_type), (b"cache-control", b"no-cache")],
            }
        )
        pending = b""
        async for data in response.content.iter_any():
            pending += data
            *events, pending = pending.split(b"\n\n")
            for event in events:
                await send({"type": "http.response.body", "body": event + b"\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": pending})
    finally:
        close(response)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", default=_upstream())
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9200)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ[UPSTREAM_ENV] = args.upstream  # read by every worker
    print(f"bare proxy on http://{args.host}:{args.port} -> {args.upstream}", flush=True)
    uvicorn.run(
        "scripts.bench.bare_proxy:app",
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
