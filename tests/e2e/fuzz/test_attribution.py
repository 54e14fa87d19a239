"""Generated attribution on the three generation endpoints, passed through and translated, plain and
streamed: ``x-tollgate-tags`` header values sent as raw bytes (UTF-8, Latin-1, bytes that are not
UTF-8, every control character — NUL, CR and LF on a raw socket, since no client library sends them
— bidirectional controls, commas and ``=`` in values, too long, too many), and end users (``user``,
``metadata.user_id``) of every control character, bidirectional controls, lone surrogates as JSON
escapes and as bytes, the whole Unicode range, huge lengths and wrong types.

Beyond what every fuzzed request is held to (tests/support/fuzz/harness.py: no 5xx of the gateway's
own, no traceback, no money moved by a refusal, the audit history projection keeping up), a served
request was charged exactly once and its charge records what the client sent — the tags as their
UTF-8 spells them, the end user's first 256 characters — and never a character no reader can show
(a control or bidirectional control, a NUL: README, Attribution); a refused one is a 4xx in its
endpoint's error shape.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import strategies as st

from tests.support import plain_http
from tests.support.fuzz.attribution import (
    EndUserCase,
    end_user_cases,
    expected_tags,
    has_unrecordable,
    sendable,
    tags_headers,
)
from tests.support.fuzz.harness import Ledger, Run, exercise, fuzz
from tests.support.fuzz.served import PATHS, check_served, headers_for
from tests.support.gateway import Gateway
from tests.support.raw_http import post_raw
from tests.support.teams import Team

#: Each endpoint's models: one whose upstream speaks its protocol (passed through), and one translated.
MODELS = {
    "chat": ["fake-gpt", "fake-claude"],
    "responses": ["fake-codex", "fake-gpt"],
    "messages": ["fake-claude", "fake-gpt"],
}
ENDPOINTS = list(MODELS)


def plain_body(endpoint: str, model: str, stream: bool = False, **more: Any) -> dict[str, Any]:
    hi = [{"role": "user", "content": "hello fuzz"}]
    body: dict[str, Any] = (
        {"model": model, "input": "hello fuzz"}
        if endpoint == "responses"
        else {"model": model, "messages": hi, **({"max_tokens": 16} if endpoint == "messages" else {})}
    )
    return {**body, **({"stream": True} if stream else {}), **more}


def _tags_case(values: list[str | bytes], model: str, stream: bool) -> dict[str, Any]:
    return {"values": [v.encode() if isinstance(v, str) else v for v in values], "model": model, "stream": stream}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_no_tags_header_breaks_the_gateway_or_is_recorded_other_than_sent(
    fuzz_gateway: Gateway, fuzz_team: Team, ledger: Ledger, run: Run, endpoint: str
):
    url = fuzz_gateway.root_url + PATHS[endpoint]
    items = [(name.encode(), value.encode()) for name, value in headers_for(endpoint, fuzz_team.key).items()]

    def one(values: list[bytes], model: str, stream: bool) -> None:
        raw = not sendable(values)  # NUL, CR or LF: only a raw socket sends it (and no stream is read there)
        stream = stream and not raw
        route = f"tags {endpoint}→{model}{' stream' if stream else ''}{' raw' if raw else ''}"
        shown = b" | ".join(values)[:2000]
        body = json.dumps(plain_body(endpoint, model, stream)).encode()
        headers = [*items, *((b"x-tollgate-tags", value) for value in values)]

        def send() -> httpx.Response:
            if not raw:  # httpx sends bytes values as they are, each value on a line of its own
                return plain_http.post(url, content=body, headers=headers, timeout=60)
            reply = post_raw(fuzz_gateway.port, PATHS[endpoint], headers, body)
            return httpx.Response(
                reply.status, headers=reply.headers, content=reply.body, request=httpx.Request("POST", url)
            )

        sent = exercise(run, ledger, route, url, {}, body, example=shown, send=send)
        found = check_served(run, ledger, sent, endpoint, stream, route, shown)
        if found is None or sent is None:
            return
        recorded, said = found.get("tags") or {}, expected_tags(values)
        if any(has_unrecordable(name + value) for name, value in recorded.items()):
            run.tally.fail(
                "recorded",
                route,
                sent.response.status_code,
                "a tag holding a control or bidirectional control character was recorded",
                shown,
            )
        elif recorded != said:
            run.tally.fail(
                "recorded",
                route,
                sent.response.status_code,
                f"the tags recorded are not what the header's UTF-8 says: {str(recorded)[:80]} for {str(said)[:80]}",
                shown,
            )

    first, other = MODELS[endpoint]
    fuzz(
        one,
        values=tags_headers(),
        model=st.sampled_from(MODELS[endpoint]),
        stream=st.booleans(),
        explicit=[
            _tags_case(["project=café, env=ci"], other, False),  # UTF-8, not Latin-1
            _tags_case([b"project=caf\xe9"], first, False),  # Latin-1: not UTF-8
            _tags_case(["project=a\u0085b"], first, True),  # a C1 control
            _tags_case(["who=\u202eevil"], other, False),  # a bidirectional control
            _tags_case([b"project=a\x00b"], first, False),
        ],
    )  # a NUL, on a raw socket
    run.check()


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_no_end_user_breaks_the_gateway_or_the_projection(
    fuzz_gateway: Gateway, fuzz_team: Team, ledger: Ledger, run: Run, endpoint: str
):
    url, headers = fuzz_gateway.root_url + PATHS[endpoint], headers_for(endpoint, fuzz_team.key)

    def one(case: EndUserCase) -> None:
        route = f"end user {endpoint}→{case.model}{' stream' if case.stream else ''}"
        sent = exercise(run, ledger, route, url, headers, case.body)
        found = check_served(run, ledger, sent, endpoint, case.stream, route, case.body)
        if found is None or sent is None:
            return
        recorded = found.get("end_user") or ""
        if has_unrecordable(recorded):
            run.tally.fail(
                "recorded",
                route,
                sent.response.status_code,
                "an end user holding a NUL, a control or a bidirectional control was recorded",
                case.body,
            )
        elif recorded != case.says[:256]:
            run.tally.fail(
                "recorded",
                route,
                sent.response.status_code,
                f"the end user recorded is not the first 256 characters sent: {recorded[:60]!r}",
                case.body,
            )

    fuzz(
        one,
        case=end_user_cases(endpoint, MODELS[endpoint]),
        explicit=[
            {"case": _end_user_case(endpoint, model, user, stream)}
            for model, user, stream in (
                (MODELS[endpoint][0], "user\x00one", False),  # stopped PostgreSQL's
                (MODELS[endpoint][1], "user\x00two", True),  # projection
                (MODELS[endpoint][0], "\u202emoc.live", False),
            )
        ],
    )
    run.check()


def _end_user_case(endpoint: str, model: str, user: str, stream: bool) -> EndUserCase:
    more = {"metadata": {"user_id": user}} if endpoint == "messages" else {"user": user}
    return EndUserCase(json.dumps(plain_body(endpoint, model, stream, **more)).encode(), model, stream, user)
