"""GET /v1/requests/{id} and GET /admin/requests/{id}: one request, looked up by its ``x-request-id``.

Modelled on OpenRouter's ``GET /api/v1/generation?id=…``: the answer is under ``data``, with its
``total_cost``, ``latency``, ``generation_time``, ``tokens_prompt`` and ``tokens_completion``, and
Tollgate's own fields beside them: the key, tags and end user, the status the client got, whether
it was charged, its tokens by kind, the rates and price list entry it was charged at, the cost as
the answer's ``usage.cost`` said it (the same object), the balance right after, and which deployment
answered after how many attempts (``app/ledger/lookup.py`` says where each part comes from).

The id is the one every answer carries in its ``x-request-id`` header (and the ledger records on
the charge); the ``id`` in an answer's body is the protocol's own and is not looked up. A team key
sees its own team's requests only: another team's answers 404 exactly as an unknown id does. The
admin key sees any. Neither waits for what is not written yet: the answer says what is known, and
``pending`` names the parts still to come (``record``: the request's record, written within a
second of the answer; ``charge``: a charge the gateway made but the ledger has not recorded yet).
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgspec
from litestar import Request, Response, get
from litestar.params import FromPath

from app.errors import NotFound
from app.http.routes.admin_common import json_response
from app.http.routes.answers import answers
from app.http.routes.auth import authenticate
from app.ledger.lookup import FoundRequest, find_request
from app.ledger.receipts import Charge
from app.runtime import Runtime
from app.store.database import Sql
from app.store.log_reads import LogReads
from domain.ledger import TeamLedger
from domain.money import credits_from_micros

#: Longer ids are no request's (``req_`` and 24 hex digits; an Idempotency-Key's replay keeps its original's).
_MAX_ID = 200


class RequestFacts(msgspec.Struct):
    """One request, as ``GET /v1/requests/{id}`` answers it (docs/api.md, "Looking a request up")."""

    id: str
    created_at: str
    team: str
    key_id: str
    model: str
    endpoint: str
    tags: dict[str, str]
    end_user: str | None
    streamed: bool | None
    status: int | None
    outcome: str | None
    error: str | None
    tokens_prompt: int | None
    tokens_completion: int | None
    tokens: dict[str, int] | None
    service_tier: str | None
    tool_calls: dict[str, int]
    price: dict[str, Any] | None
    cost: dict[str, Any] | None
    total_cost: float
    cost_micros: int | None
    charged_micros: int
    uncollected_micros: int | None
    balance_after: float | None
    balance_after_micros: int | None
    latency: float | None
    generation_time: float | None
    upstream: dict[str, Any] | None
    pending: list[str]
    unit: str
    #: The charge's leaf in the transparency log and its inclusion proof against the latest checkpoint
    #: (``leaf_index``, ``leaf_hash``, ``checkpoint``, ``proof``; null: not charged, or no checkpoint yet).
    log: dict[str, Any] | None = None


class RequestAnswer(msgspec.Struct):
    data: RequestFacts


@get(
    "/v1/requests/{request_id:str}",
    responses=answers(
        RequestAnswer,
        "the request: status, outcome, tokens by kind, price and cost, balance after, timings, "
        "deployment and attempts (OpenRouter's generation shape)",
    ),
)
async def read_request(request: Request[Any, Any, Any], request_id: FromPath[str]) -> Response[bytes]:
    """A request of the calling key's team, by the id its answer carried in ``x-request-id``."""
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    return await _answer(runtime, request_id, principal.team_name)


@get(
    "/requests/{request_id:str}",
    responses=answers(RequestAnswer, "the request, whichever team made it (the same answer as GET /v1/requests/{id})"),
)
async def admin_read_request(request: Request[Any, Any, Any], request_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    return await _answer(runtime, request_id, None)


async def _answer(runtime: Runtime, request_id: str, team_name: str | None) -> Response[bytes]:
    found = None
    if 0 < len(request_id) <= _MAX_ID:
        found = await asyncio.to_thread(find_request, runtime.store, request_id, team_name)
    if found is None:
        raise NotFound(
            f"No request with id '{request_id[:_MAX_ID]}' was found.", param="request_id", code="request_not_found"
        )
    facts = request_facts(found)
    facts["log"] = None if found.charge is None else await asyncio.to_thread(_in_the_log, runtime, found.charge)
    return json_response({"data": facts})


def _in_the_log(runtime: Runtime, charge: TeamLedger.Charged) -> dict[str, Any] | None:
    """The charge's leaf and its inclusion proof against the latest checkpoint kept (None: the
    gateway keeps none yet, or the charge came after it)."""
    sql = Sql(runtime.store.database)
    try:
        reads = LogReads(sql)
        index = reads.leaf_of(charge.originator_id, charge.originator_version)
        kept = reads.latest_checkpoint()
        if index is None or kept is None or index >= kept.size:
            return None
        return {
            "leaf_index": index,
            "leaf_hash": base64.b64encode(reads.leaf_hash(index, kept.size)).decode("ascii"),
            "checkpoint": kept.note,
            "proof": [base64.b64encode(h).decode("ascii") for h in reads.inclusion(index, kept.size)],
        }
    finally:
        sql.close()


def request_facts(found: FoundRequest) -> dict[str, Any]:
    """The answer's ``data``: the record's part, the charge's part, and what is still pending."""
    record, charge = found.record, found.charge
    pending = [] if record is not None else ["record"]
    if charge is None and record is not None and record["charged"] is not None:
        pending.append("charge")  # charged by the gateway, not yet recorded by the ledger (it is owed)
    outcome = "charged" if charge is not None else "not_charged" if record is not None and not pending else None
    if record is not None:
        created = datetime.fromtimestamp(record["started_at"], UTC)
    else:
        assert charge is not None
        created = charge.timestamp
    return {
        "id": found.request_id,
        "created_at": created.isoformat(timespec="milliseconds"),
        "team": found.team_name,
        "key_id": record["key_id"] if record is not None else charge.key_id if charge is not None else "",
        "model": charge.model if charge is not None else record["model"] if record is not None else "",
        "endpoint": charge.endpoint if charge is not None else record["endpoint"] if record is not None else "",
        "tags": dict(charge.tags) if charge is not None else {},
        "end_user": (charge.end_user or None) if charge is not None else None,
        "streamed": bool(record["streamed"]) if record is not None else None,
        "status": record["status"] if record is not None else None,
        "outcome": outcome,
        "error": record["error"] if record is not None else None,
        **_charged(charge),
        "latency": record["first_byte_ms"] if record is not None else None,
        "generation_time": record["duration_ms"] if record is not None else None,
        "upstream": _upstream(record),
        "pending": pending,
        "unit": "credits",
    }


def _charged(charge: TeamLedger.Charged | None) -> dict[str, Any]:
    """The charge's part: tokens by kind, the rates, the cost (as the answer's ``usage.cost``), the balance after."""
    if charge is None:
        return {
            "tokens_prompt": None,
            "tokens_completion": None,
            "tokens": None,
            "service_tier": None,
            "tool_calls": {},
            "images": {},
            "price": None,
            "cost": None,
            "total_cost": Decimal(0),
            "cost_micros": None,
            "charged_micros": 0,
            "uncollected_micros": None,
            "balance_after": None,
            "balance_after_micros": None,
        }
    u = charge.usage
    tokens = {
        "input": int(u["input_tokens"]),
        "output": int(u["output_tokens"]),
        "cache_write": int(u["cache_write_tokens"]),
        "cache_write_1h": int(u.get("cache_write_1h_tokens", 0)),
        "cache_hit": int(u["cache_hit_tokens"]),
    }
    for kind in ("image_input", "image_output", "audio_input"):  # image or audio tokens, when it billed some
        counted = u.get(f"{kind}_tokens")
        if isinstance(counted, int) and counted:
            tokens[kind] = counted
    credits_per_usd = Decimal(charge.credits_per_usd)
    return {
        "tokens_prompt": tokens["input"] + tokens["cache_write"] + tokens["cache_write_1h"] + tokens["cache_hit"],
        "tokens_completion": tokens["output"],
        "tokens": tokens,
        "service_tier": u.get("service_tier") or None,
        "tool_calls": dict(u.get("tool_calls") or {}),
        "images": dict(u.get("images") or {}),  # SIZE/QUALITY → images billed per image
        "price": {
            "rates": charge.price,
            "basis": charge.basis or None,
            "price_ref": charge.price_ref or None,
            "adjustment": Decimal(charge.adjustment) if charge.adjustment else None,
            "credits_per_usd": credits_per_usd,
        },
        "cost": Charge.of(charge, credits_per_usd).usage_fields()["cost"],
        "total_cost": credits_from_micros(charge.charged),
        "cost_micros": charge.cost,
        "charged_micros": charge.charged,
        "uncollected_micros": charge.uncollected,
        "balance_after": credits_from_micros(charge.balance_after),
        "balance_after_micros": charge.balance_after,
    }


def _upstream(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """Which deployment of the model answered (its index in the model's ``upstreams``, and the name it
    knows the model by), after how many attempts, and what each failed attempt failed with."""
    if record is None or not record["attempts"]:
        return None
    errors = record["upstream_errors"]
    return {
        "deployment": record["deployment"],
        "upstream_model": record["upstream_model"] or None,
        "attempts": record["attempts"],
        "errors": errors.split(",") if errors else [],
    }
