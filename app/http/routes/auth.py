"""Reading the caller's API key and finding the team it bills to."""

from __future__ import annotations

from typing import Any

from litestar import Request

from app.errors import AuthenticationFailed, PermissionDenied
from app.keys import Principal
from app.observability.record import current_record
from app.ratelimit.key_guesses import address_of
from app.runtime import Runtime
from domain.endpoints import ENDPOINT_PATHS


def presented_key(request: Request[Any, Any, Any]) -> str | None:
    authorization = request.headers.get("authorization")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return request.headers.get("x-api-key") or None


def google_key(request: Request[Any, Any, Any]) -> str | None:
    """The key as Google's clients send it: ``x-goog-api-key``, ``?key=``, or a Bearer token."""
    return request.headers.get("x-goog-api-key") or request.query_params.get("key") or presented_key(request)


def client_address(request: Request[Any, Any, Any]) -> str:
    """Whose failed key attempts a request's are (``app/ratelimit/key_guesses.py``)."""
    client = request.client
    return address_of(client.host if client is not None else None)


async def team_principal(request: Request[Any, Any, Any], runtime: Runtime, key: str) -> Principal | None:
    """The team key's principal, or None for a key that is none (not counted here: the caller says
    whether that is a failed attempt). A key this process has served is answered from memory, never
    throttled; any other is looked up only if the client's address has failed attempts left (429)."""
    principal = runtime.keys.known(key)
    if principal is not None:
        return principal
    runtime.key_guesses.check(client_address(request))
    return await runtime.keys.principal_for(key)


async def wrong_key(request: Request[Any, Any, Any], runtime: Runtime, message: str) -> AuthenticationFailed:
    """The 401 for a key that is none, once it is counted as a failed attempt of the client's address
    (which raises 429 instead when the address has none left)."""
    await runtime.key_guesses.failed(client_address(request))
    return AuthenticationFailed(message)


async def authenticate(request: Request[Any, Any, Any], runtime: Runtime, key: str | None = None) -> Principal:
    """The team the request's key bills to (``key``: as the endpoint read it; else as
    :func:`presented_key` reads it); 401 without one or for one that is none."""
    key = key or presented_key(request)
    if key is None:
        raise AuthenticationFailed(
            "You didn't provide an API key. Send it in the Authorization header as 'Bearer YOUR_KEY'."
        )
    principal = await team_principal(request, runtime, key)
    if principal is None:
        raise await wrong_key(request, runtime, "Incorrect API key provided.")
    record = current_record()
    if record is not None:
        record.team, record.key_id = principal.team_name, principal.key_id
    return principal


def authorize(principal: Principal, model_id: str, endpoint: str) -> None:
    """403 for a suspended team, an endpoint or a model the key is not allowed (checked in that order)."""
    record = current_record()
    if record is not None:
        record.model = model_id  # a configured model's id: the metrics' label, never what the client typed
    if principal.suspended:
        raise PermissionDenied(f"Team '{principal.team_name}' is suspended; contact your administrator.")
    if not principal.may_call(endpoint):
        raise PermissionDenied(f"This API key may not call {ENDPOINT_PATHS.get(endpoint, endpoint)}.")
    if not principal.may_use(model_id):
        raise PermissionDenied(f"This API key may not use the model `{model_id}`.")
