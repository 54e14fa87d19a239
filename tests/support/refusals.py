"""What every refusal of bad input must look like, and what it must leave behind.

A refusal is a 4xx in the endpoint's own error shape (OpenAI's for chat, responses, models, admin
and dashboard; Anthropic's for ``/v1/messages*``), says ``x-should-retry: false`` (the official
SDKs retry on true), and leaves the team's balance and held credits exactly as they were.
"""

from __future__ import annotations

import json
from decimal import Decimal

import httpx

from tests.support import plain_http
from tests.support.gateway import ADMIN_KEY, Gateway

#: The generation endpoints and count_tokens, by the path a client posts to.
GENERATION_PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


def speaks_messages(path: str) -> bool:
    return path.startswith("/v1/messages")


def error_of(response: httpx.Response, status: int | None = None) -> dict:
    """The error of a refusal, checked for its shape and its headers (``status``: exactly that one).
    Only a rate limit (429) is worth retrying; any other refusal says so with ``x-should-retry: false``."""
    assert 400 <= response.status_code < 500, f"{response.status_code}: {response.text[:500]}"
    if status is not None:
        assert response.status_code == status, f"{response.status_code}: {response.text[:500]}"
    retry = response.headers.get("x-should-retry")
    assert retry == "true" if response.status_code == 429 else retry != "true", response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    # A refusal for credits also says the largest output limit the balance covers (the same in both shapes).
    extra = {"affordable_max_tokens"} if response.status_code == 402 else set()
    if response.status_code == 402:
        assert body["error"]["affordable_max_tokens"] == int(response.headers["x-tollgate-affordable-max-tokens"])
    if response.request.url.path.startswith("/v1beta/"):  # Google's shape: google.rpc.Status
        assert set(body) == {"error"}, body
        assert (
            {"code", "message", "status"} <= set(body["error"]) <= {"code", "message", "status"} | extra | {"budget"}
        ), body
        assert body["error"]["code"] == response.status_code, body
        assert isinstance(body["error"]["message"], str)
        assert body["error"]["message"]
    elif speaks_messages(response.request.url.path):
        assert body["type"] == "error", body
        assert set(body["error"]) == {"type", "message"} | extra, body
        assert isinstance(body["error"]["message"], str)
        assert body["error"]["message"]
    else:
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"message", "type", "param", "code"} | extra, body
        assert isinstance(body["error"]["message"], str)
        assert body["error"]["message"]
    return body["error"]


def key_headers(key: str) -> dict[str, str]:
    """A team key as both protocols send it (a client of either wire is accepted with it)."""
    return {"authorization": f"Bearer {key}", "x-api-key": key, "content-type": "application/json"}


def admin_headers() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN_KEY}", "content-type": "application/json"}


def money_of(gateway: Gateway, team_name: str) -> tuple[Decimal, Decimal]:
    """The team's balance and held credits, as the ledger has them now (the admin API reads the
    team's aggregate, not a read model that may lag)."""
    response = plain_http.get(f"{gateway.root_url}/admin/teams/{team_name}", headers=admin_headers(), timeout=30)
    assert response.status_code == 200, response.text
    team = json.loads(response.content, parse_float=Decimal)
    return Decimal(team["balance"]), Decimal(team["held"])
