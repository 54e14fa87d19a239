"""The error ``type`` each HTTP status has, in each error shape (interface specification, section 7).

The gateway's own errors carry their type (``app/errors.py``). An upstream's error that is passed
through to a client of its own protocol keeps the upstream's status, message and code (coding agents
match on the wording), but its ``type`` is the one the specification gives its status: OpenAI
answers a rate limit with ``"type": "requests"`` (or ``"tokens"``), and other OpenAI-compatible
servers with types of their own (vLLM's ``BadRequestError``), where a client of this gateway is
promised ``rate_limit_error`` and ``invalid_request_error``. One table per shape, for every status.
"""

from __future__ import annotations

import msgspec

#: Chat completions, responses and models (section 7.1): any other 4xx is ``invalid_request_error``,
#: any 5xx ``server_error``.
OPENAI_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}
#: Messages (section 7.2), with Anthropic's own types for the statuses the specification does not
#: list (413 ``request_too_large``; an overloaded upstream's 503 and 529, ``overloaded_error``, which
#: Anthropic's clients back off from): any other 4xx is ``invalid_request_error``, any 5xx ``api_error``.
ANTHROPIC_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def openai_type(status: int) -> str:
    return OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def anthropic_type(status: int) -> str:
    return ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def type_for(wire: str, status: int) -> str:
    """The type an error of ``status`` has on ``wire`` (``chat``, ``responses`` or ``messages``)."""
    return anthropic_type(status) if wire == "messages" else openai_type(status)


def retyped(body: bytes, wire: str, status: int) -> bytes | None:
    """An upstream's error ``body`` (of ``status``, in ``wire``'s shape) with the type the
    specification gives its status, everything else as the upstream wrote it (the same bytes when
    its type was that already; a Gemini error, which has a ``status`` name and no type, as it is);
    None when the body is not an error in that shape (no JSON object with an ``error`` object that
    has a ``message``), which the gateway then answers in its own words."""
    try:
        decoded = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    error = decoded.get("error") if isinstance(decoded, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    if wire == "messages" and decoded.get("type") != "error":
        return None
    if wire == "gemini":  # Google's errors have no type: the status name is theirs to give
        return body if isinstance(error.get("status"), str) else None
    kind = type_for(wire, status)
    if error.get("type") == kind:
        return body
    error["type"] = kind
    return msgspec.json.encode(decoded)
