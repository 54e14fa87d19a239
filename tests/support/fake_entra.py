"""The fake upstream's Microsoft Entra ID token endpoint, for Azure OpenAI's service principals.

``POST /entra/{tenant}/oauth2/v2.0/token`` takes the OAuth 2.0 client-credentials grant as the
Microsoft identity platform (v2.0) does: a form with ``grant_type=client_credentials``, the
application's ``client_id`` and ``client_secret``, and the scope ``https://cognitiveservices.azure.com/.default``;
it answers ``{"token_type": "Bearer", "expires_in", "ext_expires_in", "access_token"}``, or the
platform's error (``{"error", "error_description", "error_codes", ...}``, 400 or 401) with its
AADSTS codes. The tokens it issues live ``ISSUED.lifetime`` seconds; the fake Azure endpoints accept
them until then (``tests/support/fake_azure.py``). Tests point a deployment's ``authority_host`` at
``{fake}/entra``.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from typing import Any
from urllib.parse import parse_qs

from tests.support.fake_upstream import Send, _send_json

TENANT = "00000000-0000-4000-8000-00000000aaaa"
CLIENT_ID = "11111111-1111-4111-8111-111111111111"
CLIENT_SECRET = "entra-client-secret-for-tests"
SCOPE = "https://cognitiveservices.azure.com/.default"
_PATH = re.compile(r"/entra/(?P<tenant>[^/]+)/oauth2/v2\.0/token")


class IssuedTokens:
    """The access tokens issued, with their expiry; how long new ones live; every grant asked for."""

    def __init__(self) -> None:
        self.lifetime = 3600
        self.issued: dict[str, float] = {}
        self.grants = 0
        self._lock = threading.Lock()

    def issue(self) -> tuple[str, int]:
        token = "eyJ0eXAiOiJKV1Qi.fake-entra." + secrets.token_urlsafe(16)
        with self._lock:
            self.issued[token] = time.time() + self.lifetime
            self.grants += 1
        return token, self.lifetime

    def valid(self, token: str) -> bool:
        expiry = self.issued.get(token)
        return expiry is not None and expiry > time.time()


ISSUED = IssuedTokens()


def _error(status: int, error: str, code: int, description: str) -> tuple[int, dict[str, Any]]:
    return status, {
        "error": error,
        "error_description": f"AADSTS{code}: {description}",
        "error_codes": [code],
        "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
        "trace_id": "00000000-0000-0000-0000-000000000000",
        "correlation_id": "00000000-0000-0000-0000-000000000000",
    }


def grant(path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
    """The answer to a token request (``path``: its path, ``raw``: its form)."""
    found = _PATH.fullmatch(path)
    if found is None:
        return _error(404, "invalid_request", 90002, "Tenant not found.")
    form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
    if found["tenant"] != TENANT:
        return _error(400, "invalid_request", 90002, f"Tenant '{found['tenant']}' not found.")
    if form.get("grant_type") != "client_credentials":
        return _error(400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
    if form.get("client_id") != CLIENT_ID:
        return _error(
            400, "unauthorized_client", 700016, f"Application with identifier '{form.get('client_id')}' was not found."
        )
    if form.get("client_secret") != CLIENT_SECRET:
        return _error(401, "invalid_client", 7000215, "Invalid client secret provided.")
    if form.get("scope") != SCOPE:
        return _error(400, "invalid_scope", 1002012, "The provided value for scope is not valid.")
    token, lifetime = ISSUED.issue()
    return 200, {"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime, "access_token": token}


async def serve_entra(path: str, raw: bytes, send: Send) -> None:
    status, body = grant(path, raw)
    await _send_json(send, status, body)
