"""Who is looking at the dashboard, and which team they may read.

The dashboard has no accounts of its own: a viewer signs in with a secret the gateway already knows,
a team's API key (it reads that team and no other) or an admin key (any team; the dashboard only
reads, so an auditor's key does as well as an operator's). The page keeps the
key in the tab's sessionStorage and sends it with every API call as ``Authorization: Bearer``;
nothing is remembered on the server, so a revoked key stops working at its next call (the key
directory forgets it within 0.25 s, as it does for the generation endpoints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from litestar import Request

from app.admin_keys import AdminIdentity
from app.errors import AuthenticationFailed, PermissionDenied
from app.http.routes.admin_common import admin_identity, ledger_call
from app.http.routes.auth import client_address, presented_key, wrong_key
from app.ledger.results import TeamSummary
from app.runtime import Runtime
from domain.admin_keys import OPERATOR


@dataclass(frozen=True, slots=True)
class Viewer:
    role: Literal["team", "admin"]
    team: str | None = None  # a team key's team; None for the admin
    key_id: str | None = None
    admin: AdminIdentity | None = None  # an admin key's holder and role


async def identify(request: Request[Any, Any, Any]) -> None:
    """Every /dashboard/api request: 401 unless it carries the admin key or a live team key."""
    runtime: Runtime = request.app.state.runtime
    key = presented_key(request)
    if key is None:
        raise AuthenticationFailed("Sign in with a team API key or the admin key, sent as 'Authorization: Bearer KEY'.")
    principal = runtime.keys.known(key)  # a team key this process has served: neither checked nor throttled
    if principal is None:
        runtime.key_guesses.check(client_address(request))
        identity = await admin_identity(runtime, key)
        if identity is not None:
            request.state.viewer = Viewer("admin", admin=identity)
            return
        principal = await runtime.keys.principal_for(key)  # None for an unknown or revoked key
    if principal is None:
        raise await wrong_key(request, runtime, "Incorrect API key provided.")
    request.state.viewer = Viewer("team", principal.team_name, principal.key_id)


def viewer_of(request: Request[Any, Any, Any]) -> Viewer:
    viewer: Viewer = request.state.viewer  # set by ``identify``, which runs before every route
    return viewer


async def changeable_team(request: Request[Any, Any, Any], name: str) -> TeamSummary:
    """The team ``name``, if the viewer may act for it (start a top-up): its own team key, or an
    operator's admin key; an auditor's key reads but changes nothing (403, as on the admin API)."""
    viewer = viewer_of(request)
    identity = viewer.admin
    if identity is not None and identity.role != OPERATOR:
        raise PermissionDenied(
            f"This admin key ({identity.key_id}, '{identity.name}') has the role '{identity.role}', which "
            f"reads but changes nothing: {request.method} {request.url.path} needs a key with the role '{OPERATOR}'."
        )
    return await readable_team(request, name)


async def readable_team(request: Request[Any, Any, Any], name: str) -> TeamSummary:
    """The team ``name``, if the viewer may read it: 403 for another team than a team key's own
    (whether or not it exists, so a key learns nothing about other teams), 404 for the admin
    asking for a team that does not exist."""
    viewer = viewer_of(request)
    if viewer.role == "team" and viewer.team != name:
        raise PermissionDenied(f"This API key belongs to team '{viewer.team}'; it cannot read another team.")
    runtime: Runtime = request.app.state.runtime
    return await ledger_call(runtime.ledger.team_summary, name)
