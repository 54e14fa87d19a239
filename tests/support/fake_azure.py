"""The fake upstream's Azure OpenAI endpoints: Azure's URLs and authentication in front of the fake's
OpenAI chat completions, Responses API and embeddings (the bodies, answers and streams are OpenAI's).

The paths are the ones the official ``openai.AzureOpenAI`` client sends (``openai/lib/azure.py``):
``/openai/deployments/{deployment}/chat/completions`` and ``.../embeddings`` (the deployment in the
URL decides the model: the body's ``model`` is replaced by it, as Azure ignores it), and
``/openai/responses`` (the deployment in the body's ``model``). Every request needs the
``api-version`` query (Azure answers 404 without it) and either the resource's key in the ``api-key``
header or a Microsoft Entra token (:data:`ENTRA_TOKEN`) as a bearer; anything else gets Azure's 401,
whose error has a string ``code`` and no ``type``. ``tests/e2e/test_fake_azure.py`` proves the fake
faithful with ``openai.AzureOpenAI``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import msgspec

from tests.support.fake_entra import ISSUED
from tests.support.fake_upstream import Receive, RecordedRequest, Send, _Reject, _send_json

if TYPE_CHECKING:
    from tests.support.fake_upstream import FakeUpstream

#: The Microsoft Entra access token the fake accepts as ``Authorization: Bearer``.
ENTRA_TOKEN = "entra-access-token-for-tests"
#: Azure's ``api-version`` values: a date, perhaps a preview.
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?")
_DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)/(chat/completions|embeddings)")
BAD_KEY = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an "
    "active subscription and use a correct regional API endpoint for your resource."
)
BAD_TOKEN = (
    "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), "
    "or have expired."
)


def azure_error(status: int, code: str, message: str) -> _Reject:
    """Azure's error: ``{"error": {"code", "message"}}``."""
    return _Reject(status, {"error": {"code": code, "message": message}})


def _check_auth(api_key: str | None, headers: dict[str, str]) -> None:
    if api_key is None:
        return
    bearer = headers.get("authorization")
    if bearer is not None and "api-key" not in headers:
        token = bearer.removeprefix("Bearer ")
        if token != ENTRA_TOKEN and not ISSUED.valid(token):  # a static one, or one the fake Entra ID issued
            raise azure_error(401, "401", BAD_TOKEN)
    elif headers.get("api-key") != api_key:
        raise azure_error(401, "401", BAD_KEY)


def _openai_path(record: RecordedRequest) -> tuple[str, str | None]:
    """The fake's OpenAI path for an Azure one, and the deployment its URL names (None: in the body)."""
    if record.path == "/openai/responses":
        return "/v1/responses", None
    found = _DEPLOYMENT.fullmatch(record.path)
    if found is None:
        raise azure_error(404, "404", "Resource not found")
    return f"/v1/{found.group(2)}", found.group(1)


async def serve_azure(fake: FakeUpstream, record: RecordedRequest, raw: bytes, receive: Receive, send: Send) -> None:
    """Answer an Azure request (``record``: as it came) with the fake's OpenAI endpoint for its path."""
    try:
        if record.method != "POST":
            raise azure_error(404, "404", "Resource not found")
        version = parse_qs(record.query).get("api-version")
        if not version:
            raise azure_error(404, "404", "Resource not found")
        if not _VERSION.fullmatch(version[0]):
            raise azure_error(400, "BadRequest", "API version not supported")
        _check_auth(fake.api_key, record.headers)
        path, deployment = _openai_path(record)
        if deployment is not None and isinstance(record.body, dict):
            raw = msgspec.json.encode({**record.body, "model": deployment})
    except _Reject as r:
        return await _send_json(send, r.status, r.body, r.headers)
    inner = {k: v for k, v in record.headers.items() if k not in ("api-key", "authorization")}
    if fake.api_key is not None:  # the OpenAI endpoints check OpenAI's bearer key; Azure's was checked above
        inner["authorization"] = f"Bearer {fake.api_key}"
    await fake.answer_openai(path, raw, inner, receive, send)
