"""Upstream HTTP failures, mapped once for every provider and every inbound protocol.

Both OpenAI and Anthropic put the reason in ``error.message``; it is kept word for word (coding
agents match on it). Nothing here is charged: a failed upstream call releases its hold.
"""

from __future__ import annotations

import msgspec

from app.errors import GatewayError, InvalidRequest, Overloaded, RateLimited, UpstreamFailure
from app.upstream.client import TransportFailure


def upstream_message(content: bytes) -> str:
    try:
        value = msgspec.json.decode(content)
        # AWS services (Bedrock) put it at the top level: {"message": "..."}
        message = value["message"] if "message" in value and "error" not in value else value["error"]["message"]
        return str(message)
    except Exception:  # noqa: BLE001 - an error body of any shape falls back to its first bytes
        return content[:300].decode("utf-8", "replace")


def error_from_status(status: int, content: bytes, retry_after: str | None) -> GatewayError:
    """An error status from the upstream. A 5xx or 429 is this deployment's trouble (another may answer);
    any other 4xx refuses the request itself, or the gateway's key, and no other deployment is tried."""
    error = _from_status(status, content, retry_after)
    error.failover = status >= 500 or status == 429
    error.upstream_kind = (
        "rate_limited"
        if status == 429
        else "overloaded"
        if status in (503, 529)
        else "rejected_key"
        if status in (401, 403)
        else f"status_{status // 100}xx"
    )
    return error


def _from_status(status: int, content: bytes, retry_after: str | None) -> GatewayError:
    message = upstream_message(content)
    if status == 429:
        headers = {"retry-after": retry_after} if retry_after else {}
        return RateLimited(f"The upstream provider is rate limiting: {message}", headers=headers)
    if status in (400, 413, 422):
        return InvalidRequest(message)
    if status in (401, 403):
        return UpstreamFailure("The upstream provider rejected the gateway's credentials.")
    if status in (503, 529):
        return Overloaded(f"The upstream provider is overloaded: {message}")
    return UpstreamFailure(f"The upstream provider failed with status {status}: {message}")


def error_from_exception(exc: TransportFailure, *, answering: bool = False) -> GatewayError:
    """A transport failure: before the upstream answered (refused, reset, timed out waiting for the
    status) another deployment may be tried; once it was ``answering`` (a 2xx status came), never."""
    if exc.timeout:
        error = UpstreamFailure("The upstream provider timed out.", status=504)
    elif answering:
        error = UpstreamFailure(f"The upstream provider broke off its answer: {exc.description}.")
    else:
        error = UpstreamFailure(f"The upstream provider could not be reached: {exc.description}.")
    error.failover = not answering
    error.upstream_kind = "timeout" if exc.timeout else "broken" if answering else "unreachable"
    return error


def error_from_stream_event(error: object) -> GatewayError:
    """An error reported inside a stream that had started (HTTP status 200)."""
    kind = error.get("type") if isinstance(error, dict) else None
    message = str(error.get("message") if isinstance(error, dict) else error)
    mapped: GatewayError
    if kind == "overloaded_error":
        mapped = Overloaded(f"The upstream provider is overloaded: {message}")
    elif kind == "rate_limit_error":
        mapped = RateLimited(f"The upstream provider is rate limiting: {message}")
    else:
        mapped = UpstreamFailure(f"The upstream provider failed mid-stream: {message}")
    mapped.upstream_kind = "stream_error"
    return mapped
