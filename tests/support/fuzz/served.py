"""What a served fuzzed request is held to: a proper answer of its endpoint, charged exactly once,
and recorded as it was sent; and what a refused one is held to: its endpoint's error shape.

The finding behind it: a translated request whose built-in tool's ``type`` was not Latin-1 (or held
a line break) was charged, and then its answer could not be sent — its head named the dropped tool
— so the client got a broken answer for money. A served answer here is one the client can use:
JSON of its endpoint's shape, or a stream that reaches its terminal event; and the team's balance
moved by exactly what the ledger's charge for that request took (``GET /admin/requests/{id}``),
once the credit lease was given back.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import httpx

from tests.support.fuzz.harness import Ledger, Run, Sent
from tests.support.refusals import error_of

PATHS = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "messages": "/v1/messages",
    "count_tokens": "/v1/messages/count_tokens",
    "embeddings": "/v1/embeddings",
}
#: The event that ends a stream, by endpoint (Responses: any of its three endings).
TERMINAL = {
    "chat": ("data: [DONE]",),
    "messages": ("event: message_stop",),
    "responses": ("event: response.completed", "event: response.incomplete", "event: response.failed"),
}
#: What a whole (not streamed) answer says it is, by endpoint.
SHAPE = {
    "chat": ("object", "chat.completion"),
    "responses": ("object", "response"),
    "messages": ("type", "message"),
    "embeddings": ("object", "list"),
}


def answer_problem(endpoint: str, response: httpx.Response, stream: bool) -> str | None:
    """What is wrong with a 2xx answer of ``endpoint``, or None if it is a proper one."""
    media = response.headers.get("content-type", "")
    if stream:
        if not media.startswith("text/event-stream"):
            return f"a stream answered as {media!r}"
        lines = response.text.splitlines()
        if not any(line.strip() in TERMINAL[endpoint] for line in lines):
            return f"a stream without its terminal event ({' or '.join(TERMINAL[endpoint])})"
        return None
    try:
        body = response.json()
    except ValueError:
        return f"a 200 that is not JSON ({media!r})"
    field, value = SHAPE[endpoint]
    if not isinstance(body, dict) or body.get(field) != value:
        return f"a 200 whose body is not a {value}: {str(body)[:120]}"
    return None


def lookup(ledger: Ledger, response: httpx.Response) -> dict[str, Any] | None:
    """The request as the ledger charged it, waiting briefly for an owed charge; None if the answer
    carries no request id or the request is unknown."""
    request_id = response.headers.get("x-request-id")
    if request_id is None:
        return None
    deadline = time.monotonic() + 5
    while True:
        found = ledger.request(request_id)
        data = found.json().get("data") if found.status_code == 200 else None
        if (data is not None and "charge" not in (data.get("pending") or [])) or time.monotonic() > deadline:
            return data
        time.sleep(0.05)


def charged_once(
    run: Run,
    ledger: Ledger,
    before: Decimal,
    response: httpx.Response,
    route: str,
    example: bytes,
    *,
    required: bool = True,
) -> dict[str, Any] | None:
    """A served request was charged (or, unless ``required``, not at all: a stream that failed before
    it delivered anything), and the team's balance moved by that charge exactly once the lease is
    back; the request as recorded, or None (tallied) if it was not charged."""
    found = lookup(ledger, response)
    charged = found is not None and found.get("outcome") == "charged"
    if required and not charged:
        run.tally.fail(
            "charge",
            route,
            response.status_code,
            f"served and not charged: {None if found is None else found.get('outcome')}",
            example,
        )
    settled = ledger.settled()
    if settled is None:
        run.tally.fail("held", route, response.status_code, "a hold or lease stayed open after it was served", example)
        return found if charged else None
    taken = (before - settled[0]) * 1_000_000
    owed = found["charged_micros"] if charged and found is not None else 0
    if taken != owed:
        run.tally.fail(
            "charge",
            route,
            response.status_code,
            f"the balance moved by {taken} micro-credits for a charge of {owed}",
            example,
        )
    return found if charged else None


def refused_in_shape(run: Run, response: httpx.Response, route: str, example: bytes) -> None:
    """A 4xx in its endpoint's own error shape (``tests/support/refusals.py``)."""
    if not 400 <= response.status_code < 500:
        return
    try:
        error_of(response)
    except (AssertionError, KeyError, ValueError) as exc:
        run.tally.fail(
            "shape", route, response.status_code, f"a refusal not in its endpoint's shape: {exc}"[:200], example
        )


def check_served(
    run: Run, ledger: Ledger, sent: Sent | None, endpoint: str, stream: bool, route: str, example: bytes
) -> dict[str, Any] | None:
    """A 2xx's answer and charge checked, a refusal's shape: the request as recorded if it was served."""
    if sent is None:
        return None
    response = sent.response
    if not 200 <= response.status_code < 300:
        refused_in_shape(run, response, route, example)
        return None
    problem = answer_problem(endpoint, response, stream)
    if problem is not None:
        run.tally.fail("answer", route, response.status_code, problem, example)
    return charged_once(run, ledger, sent.before, response, route, example)


def headers_for(endpoint: str, key: str) -> dict[str, str]:
    """A team key as the endpoint's clients send it."""
    if endpoint in ("messages", "count_tokens"):
        return {"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    return {"authorization": f"Bearer {key}", "content-type": "application/json"}
