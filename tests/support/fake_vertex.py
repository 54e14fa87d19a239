"""The Google Vertex AI side of the fake upstream, with its OAuth token endpoint.

- ``POST /token``: Google's token endpoint for a service account (the ``token_uri`` of the key files
  :func:`service_account_file` writes). It takes the signed JWT assertion
  (``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``), checks its RS256 signature against the
  test key's public half, its issuer, audience, scope and expiry, and issues an access token that
  lives ``TOKENS.lifetime`` seconds.
- ``POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict``
  and ``:streamRawPredict``: Anthropic models, answered by the fake Anthropic (the body must carry
  ``anthropic_version: vertex-2023-10-16``, or a dated version as newer SDKs send, and no ``model``,
  as Vertex requires).
- ``…/publishers/google/models/{model}:generateContent`` and ``:streamGenerateContent``: Gemini
  models, answered by the fake Gemini API.

Every model request must carry a token this endpoint issued and that has not expired; anything else
is Google's 401 ``UNAUTHENTICATED``. ``anthropic.AnthropicVertex`` and ``google.genai.Client(vertexai=True)``
read all of it (tests/e2e/test_fake_vertex.py).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.fake_gemini import GeminiRefusal, answer_gemini
from tests.support.fake_upstream import Receive, Send, _send_json

PROJECT, REGION = "tollgate-test", "us-east5"
CLIENT_EMAIL = "gateway@tollgate-test.iam.gserviceaccount.com"
VERTEX_VERSION = "vertex-2023-10-16"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: The audience of a service account's assertion: Google's token endpoint, wherever it is posted.
AUDIENCE = "https://oauth2.googleapis.com/token"
_PATH = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/(?P<publisher>anthropic|google)"
    r"/models/(?P<model>[^:/]+):(?P<method>rawPredict|streamRawPredict|generateContent|streamGenerateContent)$"
)
_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Tokens:
    """The access tokens issued, with their expiry; how long new ones live; how many were issued."""

    def __init__(self) -> None:
        self.lifetime = 3600
        self.issued: dict[str, float] = {}
        self._lock = threading.Lock()

    def issue(self) -> tuple[str, int]:
        token = "ya29.fake-" + secrets.token_urlsafe(16)
        with self._lock:
            self.issued[token] = time.time() + self.lifetime
        return token, self.lifetime

    def check(self, authorization: str) -> None:
        token = authorization.removeprefix("Bearer ").strip()
        expiry = self.issued.get(token)
        if expiry is None or expiry <= time.time():
            state = "expired" if expiry is not None else "invalid"
            raise GeminiRefusal(401, f"Request had {state} authentication credentials. Expected OAuth 2 access token.")


TOKENS = Tokens()


def service_account_file(path: Path, token_uri: str) -> Path:
    """A service account's JSON key for the test key pair, its tokens fetched at ``token_uri``."""
    pem = _KEY.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    key = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "fake-key-1",
        "private_key": pem.decode(),
        "client_email": CLIENT_EMAIL,
        "client_id": "1",
        "token_uri": token_uri,
    }
    path.write_text(json.dumps(key))
    return path


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _grant(raw: bytes) -> dict[str, Any]:
    """The access token for a JWT bearer grant, or Google's OAuth error."""
    form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
    if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
        return {"error": "unsupported_grant_type"}
    try:
        head, payload, signature = form["assertion"].split(".")
        _KEY.public_key().verify(_b64(signature), f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
        claims = json.loads(_b64(payload))
    except (KeyError, ValueError, InvalidSignature):
        return {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
    if claims.get("iss") != CLIENT_EMAIL or claims.get("aud") != AUDIENCE or SCOPE not in claims.get("scope", ""):
        return {"error": "invalid_grant", "error_description": "Invalid JWT: claims."}
    if claims.get("exp", 0) < time.time():
        return {"error": "invalid_grant", "error_description": "Invalid JWT: Token must be a short-lived token."}
    token, lifetime = TOKENS.issue()
    return {"access_token": token, "expires_in": lifetime, "token_type": "Bearer"}


async def handle_vertex(
    scope: dict[str, Any], raw: bytes, headers: dict[str, str], send: Send, receive: Receive
) -> None:
    """Serve the token endpoint or one Vertex AI model request."""
    if scope["path"] == "/token":
        answer = _grant(raw)
        return await _send_json(send, 400 if "error" in answer else 200, answer)
    route = _PATH.match(scope["path"])
    try:
        if scope["method"] != "POST" or route is None:
            raise GeminiRefusal(404, f"The requested URL {scope['path']} was not found on this server.")
        TOKENS.check(headers.get("authorization", ""))
        if route["publisher"] == "google":
            return await answer_gemini(route["model"], route["method"], raw, scope["query_string"].decode(), send)
        if b"[[fail:429]]" in raw:  # Vertex's own quota, not Anthropic's: refused in Google's shape
            raise GeminiRefusal(429, f"{QUOTA} with base model: anthropic-{route['model'].split('@')[0]}.")
        body = _anthropic_body(raw, route["model"], route["method"] == "streamRawPredict")
    except GeminiRefusal as refusal:
        return await _send_json(send, refusal.code, refusal.body())
    from tests.support.fake_anthropic import handle_anthropic  # lazy: it imports fake_upstream, which imports this

    beta = {"anthropic-beta": headers["anthropic-beta"]} if "anthropic-beta" in headers else {}
    anthropic_headers = {"anthropic-version": "2023-06-01", **beta}
    await handle_anthropic(None, "POST", "/v1/messages", msgspec.json.encode(body), anthropic_headers, receive, send)


#: What Vertex AI says when a project's per-model quota for a partner model is spent.
QUOTA = "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model"


def _anthropic_body(raw: bytes, model: str, stream: bool) -> dict[str, Any]:
    """The Messages body the fake Anthropic answers, from the one Vertex takes."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise GeminiRefusal(400, "Invalid JSON payload received.") from None
    version = body.get("anthropic_version") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not (
        version == VERTEX_VERSION or re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(version))
    ):
        raise GeminiRefusal(400, f"anthropic_version: must be {VERTEX_VERSION} (or a dated version)")
    if "model" in body:
        raise GeminiRefusal(400, "model: Extra inputs are not permitted")
    body = {k: v for k, v in body.items() if k != "anthropic_version"}
    return {**body, "model": model, **({"stream": True} if stream else {})}
