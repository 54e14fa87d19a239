"""Liveness and readiness, for load balancers and orchestrators; no key needed, nothing secret said.

``/health/live`` answers 200 while the process can answer at all (restart it when it cannot).
``/health/ready`` answers 200 only while the ledger can be written and the writer runs, and the
process is not shutting down; otherwise 503 with what is wrong — send traffic elsewhere meanwhile.
Its checks also say how the audit history projection stands (current, behind, failing; events it
set aside), which never makes the process unready: requests are served and charged regardless.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from app.http.routes.answers import Liveness, Readiness, answers
from app.json import encode
from app.runtime import Runtime


@get(
    "/health/live",
    summary="Liveness: the process answers",
    tags=["health"],
    responses=answers(Liveness, "the process answers"),
)
async def live() -> Response[bytes]:
    return Response(encode({"status": "live"}), media_type="application/json")


@get(
    "/health/ready",
    summary="Readiness: the ledger can be written and the writer runs (else 503)",
    tags=["health"],
    responses={**answers(Readiness, "ready"), **answers(Readiness, "not ready, and why", 503)},
)
async def ready(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    ok, checks = runtime.health.readiness()
    checks = {**checks, **runtime.projector.status.readiness_checks()}
    body = {"status": "ready" if ok else "unavailable", "checks": checks}
    return Response(encode(body), status_code=200 if ok else 503, media_type="application/json")
