"""JSON bodies the decoder cannot take — nested too deeply, or not UTF-8 — are the client's error
(400 in the endpoint's shape), on every route that reads a JSON body; the nesting real clients
send is served."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from app.http.routes.request_body import json_depth
from tests.support import plain_http
from tests.support.gateway import Gateway
from tests.support.refusals import admin_headers, error_of, key_headers, money_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"

#: Every route that reads a JSON body: the generation endpoints, count_tokens and the admin API's
#: writes (the dashboard's API has no request bodies).
BODY_ROUTES = [
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
    ("POST", "/admin/teams"),
    ("POST", "/admin/teams/{team}/credits"),
    ("POST", "/admin/teams/{team}/keys"),
    ("PUT", "/admin/teams/{team}/limits"),
    ("POST", "/admin/teams/{team}/suspend"),
]


def _nested(depth: int) -> bytes:
    return b'{"model":"demo-gpt","messages":' + b"[" * depth + b"]" * depth + b"}"


def _send(gateway: Gateway, team, method: str, path: str, body: bytes) -> httpx.Response:
    headers = admin_headers() if path.startswith("/admin") else key_headers(team.key)
    return plain_http.request(
        method, gateway.root_url + path.format(team=team.name), content=body, headers=headers, timeout=60
    )


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_a_body_nested_100000_levels_deep_is_a_400_in_the_route_s_shape(gateway: Gateway, team, method, path):
    response = _send(gateway, team, method, path, _nested(100_000))
    error = error_of(response, 400)
    assert "128 levels deep" in error["message"]
    assert money_of(gateway, team.name) == (100, 0)


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_a_body_with_invalid_utf8_in_a_string_is_a_400_in_the_route_s_shape(gateway: Gateway, team, method, path):
    response = _send(
        gateway,
        team,
        method,
        path,
        b'{"model":"demo-gpt","name":"x\xff\xfe","messages":[{"role":"user","content":"\xc3("}]}',
    )
    error = error_of(response, 400)
    assert "UTF-8" in error["message"]
    assert "Traceback" not in gateway.output()


@pytest.mark.parametrize("depth", [200, 950, 1500])
def test_a_body_just_past_the_limit_or_past_the_decoder_s_own_limit_is_a_400(gateway: Gateway, team, depth: int):
    error_of(_send(gateway, team, "POST", "/v1/messages/count_tokens", _nested(depth)), 400)


def test_the_agents_real_bodies_nest_far_less_than_the_limit():
    for fixture in FIXTURES.glob("*.json"):
        body = json.loads(fixture.read_text())["body"]
        assert 5 <= json_depth(body, 128) <= 16, fixture.name


def test_a_tool_schema_nested_to_the_limit_is_served_translated_and_counted(gateway: Gateway, team):
    schema: dict = {"type": "string"}
    for _ in range(60):  # 60 levels of {"type": "object", "properties": {"x": ...}}: about 124 deep in all
        schema = {"type": "object", "properties": {"x": schema}}
    body = {
        "model": "fake-claude",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "deep", "parameters": schema}}],
    }
    raw = json.dumps(body).encode()
    assert 120 < json_depth(body, 128) <= 128
    response = _send(gateway, team, "POST", "/v1/chat/completions", raw)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("raw", "depth"),
    [
        (b'{"a": "[[[[{{{{", "b": [1, {"c": "\\"]]]\\\\"}]}', 3),
        (b'[[], [[]], {"k": [[[]]]}]', 5),
        (b'"[[[["', 0),
        (b'{"a": "\\\\\\"[[["}', 1),
    ],
)
def test_depth_is_counted_outside_strings_and_their_escapes(raw: bytes, depth: int):
    assert json_depth(json.loads(raw), 128) == depth
    assert json_depth(json.loads(raw), 2) == min(depth, 3)  # counted only until it passes the limit
