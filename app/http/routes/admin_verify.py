"""``GET /admin/ledger/verify``: ``tollgate ledger verify`` over the admin API, so that an auditor's key
(which reads and changes nothing) can have the whole history replayed and checked without a shell on
the gateway's machine. It reads only: the events, the read models, the snapshots."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from litestar import Request, Response, get

from app.http.routes.admin_common import json_response
from app.http.routes.answers import answers
from app.runtime import Runtime
from projections.audit import verify_ledger


class VerifyAnswer(msgspec.Struct):
    """Whether every recorded balance, read model and snapshot matches the replay, and what was read."""

    ok: bool
    events: int
    teams: int
    charges: int
    snapshots: int
    projected: int
    behind: int
    quarantined: int
    problems: list[str]


@get("/ledger/verify", responses=answers(VerifyAnswer, "the replay of the whole ledger, checked (ok: nothing differs)"))
async def verify(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    report = await asyncio.to_thread(verify_ledger, runtime.store, runtime.store.database)
    return json_response({"ok": report.ok, "events": report.events, "teams": report.teams, "charges": report.charges,
                          "snapshots": report.snapshots, "projected": report.projected, "behind": report.behind,
                          "quarantined": report.quarantined, "problems": report.problems})


verify_handlers = [verify]
