"""HTTP at its edges, through real sockets: paths with extra slashes are the endpoint they name, for
billing, the log line and the request lookup alike; 405s say what is allowed; HEAD is served where
GET is; an error that quotes the client's input quotes a bounded part of it; and what uvicorn's
own parser refuses is refused in the endpoint's JSON shape."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway
from tests.support.raw_http import exchange, head
from tests.support.teams import Team

CHAT = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}


def found(gateway: Gateway, team: Team, request_id: str) -> dict[str, Any]:
    """The team's lookup of the request, once its record is written (in batches, within a second)."""
    deadline = time.monotonic() + 10
    while True:
        answer = plain_http.get(
            f"{gateway.base_url}/requests/{request_id}", headers={"authorization": f"Bearer {team.key}"}
        )
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()["data"]
        if not data["pending"]:
            return data
        assert time.monotonic() < deadline, f"the request's record never came: {data}"
        time.sleep(0.05)


@pytest.mark.parametrize("path", ["/v1/chat/completions/", "//v1/chat/completions", "/v1//chat//completions/"])
def test_a_generation_path_with_extra_slashes_is_that_endpoint_everywhere(gateway: Gateway, team: Team, path: str):
    headers = {"authorization": f"Bearer {team.key}", "content-type": "application/json", "connection": "close"}
    reply, _ = exchange(gateway.port, head("POST", path, headers, httpx.Request("POST", "/", json=CHAT).read()))
    assert reply.status == 200, reply.body
    assert reply.json()["choices"][0]["message"]["content"] == "Echo: hi"
    request_id = reply.headers["x-request-id"]
    line = gateway.access_line(request_id)  # the metrics are counted from the same record, by the same label
    assert (line["endpoint"], line["path"]) == ("chat.completions", "/v1/chat/completions")
    data = found(gateway, team, request_id)
    assert (data["endpoint"], data["status"], data["outcome"]) == ("chat.completions", 200, "charged")
    (charge,) = gateway.charges(team.name)
    assert (charge["request_id"], charge["endpoint"]) == (request_id, "chat.completions")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/v1/chat/completions", "POST, OPTIONS"),
        ("DELETE", "/v1/models", "GET, HEAD, OPTIONS"),
        ("PUT", "/v1/messages/count_tokens", "POST, OPTIONS"),
    ],
)
def test_a_method_not_allowed_says_which_are(gateway: Gateway, method: str, path: str, allowed: str):
    answer = plain_http.request(method, gateway.root_url + path)
    assert answer.status_code == 405
    assert answer.headers["allow"] == allowed
    assert allowed in answer.json()["error"]["message"]
    assert answer.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/models", {"GET", "HEAD", "OPTIONS"}),
        ("/v1/credits", {"GET", "HEAD", "OPTIONS"}),
        ("/v1/chat/completions", {"POST", "OPTIONS"}),
    ],
)
def test_an_options_answer_lists_head_wherever_get_is(gateway: Gateway, path: str, allowed: set[str]):
    """Issue #27, finding 13: the router's own answer to OPTIONS listed GET but not the HEAD served
    beside it (a 405's ``Allow`` did)."""
    answer = plain_http.options(gateway.root_url + path)
    assert answer.status_code in (200, 204), answer.text
    assert {m.strip() for m in answer.headers["allow"].split(",")} == allowed
    assert plain_http.head(gateway.root_url + "/v1/models").status_code == 200  # what it says is served


def test_head_is_served_wherever_get_is(gateway: Gateway, team: Team):
    for path, headers in (("/v1/models", {}), ("/v1/credits", {"authorization": f"Bearer {team.key}"})):
        got = plain_http.get(gateway.root_url + path, headers=headers)
        headed = plain_http.head(gateway.root_url + path, headers=headers)
        assert (headed.status_code, headed.content) == (200, b"")
        assert headed.headers["content-type"] == got.headers["content-type"]
    assert (
        plain_http.head(gateway.root_url + "/v1/models").headers["content-length"]
        == plain_http.get(gateway.root_url + "/v1/models").headers["content-length"]
    )
    assert plain_http.head(gateway.base_url + "/credits").status_code == 401  # a HEAD is authorised as its GET


@pytest.mark.parametrize("endpoint", ["chat/completions", "messages"])
def test_an_error_quotes_a_bounded_part_of_a_huge_input(gateway: Gateway, team: Team, endpoint: str):
    model = "m" * 100_000
    answer = plain_http.post(
        f"{gateway.base_url}/{endpoint}",
        headers={"authorization": f"Bearer {team.key}"},
        json={"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.status_code == 404
    assert len(answer.content) < 1500
    message = answer.json()["error"]["message"]
    assert message.startswith("The model `mmm")
    assert message.endswith("` does not exist or you do not have access to it.")
    assert "characters left out" in message


@pytest.mark.parametrize(("path", "shape"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")])
def test_what_the_http_parser_refuses_is_refused_as_json(gateway: Gateway, path: str, shape: str):
    reply, closed = exchange(gateway.port, f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: x\r\n\r\n".encode())
    assert reply.status == 400
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    error = body["error"]
    assert error["type"] == "invalid_request_error"
    assert (body.get("type") == "error") == (shape == "anthropic")
    assert closed
