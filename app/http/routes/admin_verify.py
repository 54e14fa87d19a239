"""``GET /admin/ledger/verify``: ``tollgate ledger verify`` over the admin API, so that an auditor's key
(which reads and changes nothing) can have the whole history replayed and checked without a shell on
the gateway's machine. It reads only: the events, the read models, the snapshots. One run at a time,
in a process of its own (``app/ledger/verify_runs.py``): callers that ask while one runs share it."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get

from app.http.refusals import answered_over_http
from app.http.routes.admin_common import json_response
from app.http.routes.answers import answers
from app.runtime import Runtime


class VerifyAnswer(msgspec.Struct):
    """Whether every recorded balance, read model and snapshot matches the replay, and what was read;
    when the run that checked it started and finished (callers that asked while it ran share it)."""

    ok: bool
    events: int
    teams: int
    charges: int
    snapshots: int
    projected: int
    behind: int
    quarantined: int
    problems: list[str]
    started_at: str
    finished_at: str


@get("/ledger/verify", responses=answers(VerifyAnswer, "the replay of the whole ledger, checked (ok: nothing differs)"))
async def verify(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    with answered_over_http():
        run = await runtime.verify_runs.result()
    fields = ("ok", "events", "teams", "charges", "snapshots", "projected", "behind", "quarantined", "problems")
    return json_response(
        {
            **{name: run.report[name] for name in fields},
            "started_at": run.started_at.isoformat(),
            "finished_at": run.finished_at.isoformat(),
        }
    )


verify_handlers = [verify]
