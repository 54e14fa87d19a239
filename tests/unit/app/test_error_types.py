"""An upstream's error passed through keeps its status, message and code, with the type the
interface specification (section 7) gives its status, on each wire's error shape."""

from __future__ import annotations

import json

import pytest

from app.upstream.errors import error_from_status

#: status → (chat and responses, messages), as sections 7.1 and 7.2 say (and Anthropic's own types
#: for the statuses they do not list).
SPECIFIED = {
    400: ("invalid_request_error", "invalid_request_error"),
    402: ("billing_error", "billing_error"),
    404: ("invalid_request_error", "not_found_error"),
    409: ("invalid_request_error", "invalid_request_error"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", "invalid_request_error"),
    429: ("rate_limit_error", "rate_limit_error"),
    500: ("server_error", "api_error"),
    502: ("server_error", "api_error"),
    503: ("server_error", "overloaded_error"),
    529: ("server_error", "overloaded_error"),
}


def relayed(wire: str, status: int, body: bytes) -> tuple[int, bytes] | None:
    """What a client of ``wire`` is answered when the upstream of its own protocol answered ``status``."""
    error = error_from_status(status, body, None)
    error.upstream_wire, error.upstream_status, error.upstream_body = wire, status, body
    error.verbatim = True
    return error.relayed_answer()


@pytest.mark.parametrize("status", sorted(SPECIFIED))
@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_an_openai_shaped_error_gets_the_type_of_its_status(wire: str, status: int):
    # vLLM and other OpenAI-compatible servers name the type after their exception class
    upstream = {"error": {"message": "model says no", "type": "SomeServerError", "param": "x", "code": status}}
    answer = relayed(wire, status, json.dumps(upstream).encode())
    assert answer is not None
    code, body = answer
    assert code == status
    assert json.loads(body) == {
        "error": {"message": "model says no", "type": SPECIFIED[status][0], "param": "x", "code": status}
    }


def test_openai_s_own_rate_limit_keeps_its_code_and_message():
    upstream = (
        b'{"error": {"message": "Rate limit reached for requests", "type": "requests", '
        b'"param": null, "code": "rate_limit_exceeded"}}'
    )
    answer = relayed("chat", 429, upstream)
    assert answer is not None
    assert json.loads(answer[1]) == {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


@pytest.mark.parametrize("status", sorted(SPECIFIED))
def test_an_anthropic_error_gets_the_type_of_its_status(status: int):
    upstream = {"type": "error", "error": {"type": "whatever_error", "message": "no"}, "request_id": "req_1"}
    answer = relayed("messages", status, json.dumps(upstream).encode())
    assert answer is not None
    assert json.loads(answer[1]) == {
        "type": "error",
        "error": {"type": SPECIFIED[status][1], "message": "no"},
        "request_id": "req_1",
    }


def test_an_error_whose_type_is_right_already_is_relayed_byte_for_byte():
    upstream = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},  "request_id":"r"}'
    assert relayed("messages", 529, upstream) == (529, upstream)


@pytest.mark.parametrize(
    ("wire", "body"),
    [
        ("chat", b"<html>502 Bad Gateway</html>"),
        ("chat", b'{"detail": "not found"}'),
        ("chat", b'{"error": "a string"}'),
        ("responses", b'{"error": {"type": "x"}}'),
        ("messages", b'{"error": {"type": "x", "message": "no"}}'),
        ("messages", b"[]"),
    ],
)
def test_a_body_that_is_no_error_of_the_protocol_is_answered_in_the_gateway_s_own_words(wire: str, body: bytes):
    assert relayed(wire, 404, body) is None


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_of_the_gateway_s_own_key_is_never_relayed(status: int):
    body = b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": null}}'
    assert relayed("chat", status, body) is None
