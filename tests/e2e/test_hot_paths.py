"""The generation endpoints are dispatched before Litestar's router (app/http/hot_paths.py): what the
router used to give them for free — the body-size limit, 405 for other methods, each endpoint's own
error shape — must still hold, through a real gateway process."""

from __future__ import annotations

from domain.settings import Settings
from tests.support import plain_http
from tests.support.gateway import Gateway
from tests.support.raw_http import exchange, head
from tests.support.teams import Team


def test_a_body_over_the_size_limit_is_refused_in_each_endpoints_own_shape(gateway: Gateway, team: Team):
    limit = Settings(models=[]).max_request_bytes  # the default: 50 MB of images fit, base64-encoded
    assert limit >= 64 * 1024 * 1024
    openai_headers = {"authorization": f"Bearer {team.key}", "content-type": "application/json"}
    announced = [*openai_headers.items(), ("content-length", str(limit + 1))]  # refused before it is sent
    chat, closed = exchange(gateway.port, head("POST", "/v1/chat/completions", announced))
    assert chat.status == 413
    assert closed
    assert chat.json()["error"]["type"] == "invalid_request_error"

    anthropic_headers = {"x-api-key": team.key, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    announced = [*anthropic_headers.items(), ("content-length", str(limit + 1))]
    messages, closed = exchange(gateway.port, head("POST", "/v1/messages", announced))
    assert messages.status == 413
    assert closed
    assert messages.json()["type"] == "error"
    assert messages.json()["error"]["type"] == "request_too_large"


def test_other_methods_on_a_generation_path_get_405_and_unknown_paths_404(gateway: Gateway, team: Team):
    root = gateway.base_url.removesuffix("/v1")
    headers = {"authorization": f"Bearer {team.key}"}
    wrong_method = plain_http.get(root + "/v1/chat/completions", headers=headers)
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["type"] == "invalid_request_error"
    unknown = plain_http.post(root + "/v1/chat/completion", headers=headers, json={})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "invalid_request_error"
