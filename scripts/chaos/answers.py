"""Judging what the clients were told: every answer must be one the documentation promises.

The suite's requests are all valid, so each status has exactly one legitimate reason, and the
plan and the fault record say whether it applied: a 503 that says the ledger is away only while
the database was restarting or refusing connections (and a few seconds after, while pools
reconnect), a 503 about rate limits only around the Redis restart, an upstream's 502/503/504 only
for a failure the fake was asked for or the upstream's own words, a 402 only for a poor team (or,
saying so, a team at its budget), a 401 only for a key revoked before the request began, a 409 only
for an Idempotency-Key whose first attempt was still running, a 429 only where the fake was told
to rate-limit. Anything else — a 500, a traceback, a 200 that is not JSON — is a violation.
"""

from __future__ import annotations

from scripts.chaos.client import ANSWERED, BROKEN, NO_ANSWER, Attempt
from scripts.chaos.faults import KILL, POSTGRES_REFUSING, POSTGRES_RESTART, REDIS_RESTART, Fault
from scripts.chaos.host_faults import DATABASE_CUT, FREEZE, HOST_FAULTS, REDIS_CUT
from scripts.chaos.record import RunRecord
from scripts.chaos.teams import Team
from scripts.chaos.traffic import Plan
from scripts.chaos.verdict import Verdict

#: Seconds after a database or Redis outage during which its 503s are still documented (the
#: gateway probes its database every second; connection pools reconnect on their next use).
GRACE = 10.0
#: Seconds after ``tollgate key revoke`` returned by which every gateway refuses the key (the
#: documentation promises 0.25 s; the margin absorbs a loaded machine).
REVOCATION_GRACE = 2.0
DATABASE_AWAY = ("The billing ledger", "The key directory cannot be read")
LIMITS_AWAY = ("Rate limits cannot be checked",)


def _during(attempt: Attempt, faults: list[Fault], kinds: tuple[str, ...]) -> bool:
    return any(
        f.kind in kinds and attempt.started <= f.ended + GRACE and attempt.ended >= f.started - 1 for f in faults
    )


def _gateway_down(attempt: Attempt, faults: list[Fault]) -> bool:
    """Whether the attempt's gateway was killed while it ran, or was down (until its restart was ready)."""
    return any(
        f.kind == KILL
        and f.victim == attempt.gateway
        and attempt.started <= (f.back or f.ended) + 1
        and attempt.ended >= f.started
        for f in faults
    )


def _on_host_during(attempt: Attempt, faults: list[Fault], kinds: tuple[str, ...]) -> bool:
    """Whether the attempt's host was cut off, on a lossy link or frozen (one of ``kinds``) while it
    ran, or a moment before (its connections recover within :data:`GRACE`)."""
    return any(
        f.kind in kinds
        and f.victim == attempt.gateway
        and attempt.started <= f.ended + GRACE
        and attempt.ended >= f.started - 1
        for f in faults
    )


def _refused_from(revocation: tuple[float, float], faults: list[Fault]) -> float:
    """When every gateway must refuse a key revoked between these times: within the grace, unless the
    database was away meanwhile (the gateways learn of it from the events), then after it is back."""
    deadline = revocation[1] + REVOCATION_GRACE
    for fault in faults:
        if (
            fault.kind in (POSTGRES_RESTART, POSTGRES_REFUSING, *DATABASE_CUT, FREEZE)
            and fault.started <= deadline
            and fault.ended >= revocation[0]
        ):
            deadline = max(deadline, fault.ended + GRACE)
    return deadline


def _says(attempt: Attempt, phrases: tuple[str, ...]) -> bool:
    return any(phrase in attempt.error for phrase in phrases)


def _from_upstream(attempt: Attempt) -> bool:
    """The gateway's words for an upstream failure, or the fake's own, relayed as they came."""
    return attempt.error.startswith("The upstream provider") or "fake upstream failure" in attempt.error


def _describe(attempt: Attempt, plan: Plan) -> str:
    return (
        f"request #{plan.index} attempt {attempt.number} ({plan.endpoint}, {plan.model}, "
        f"{'stream' if plan.stream else 'plain'}, fault {plan.fault or 'none'}, gateway {attempt.gateway} "
        f"pid {attempt.pid}, id {attempt.request_id or '-'}, at {attempt.started:.3f}): {attempt.status} "
        f"{attempt.error[:200]!r}"
    )


def classify_5xx(attempt: Attempt, plan: Plan, faults: list[Fault], verdict: Verdict) -> None:
    status = attempt.status
    assert status is not None
    verdict.five_xx[status] += 1
    if status == 503 and _says(attempt, DATABASE_AWAY):
        if _during(attempt, faults, (POSTGRES_RESTART, POSTGRES_REFUSING)):
            verdict.causes["503 database away (outage)"] += 1
            return
        if _on_host_during(attempt, faults, (*DATABASE_CUT, FREEZE)):
            verdict.causes["503 database away (its host cut off)"] += 1
            return
        verdict.fail("503 outside the database outage", _describe(attempt, plan))
        return
    if status == 503 and _says(attempt, LIMITS_AWAY):
        if _during(attempt, faults, (REDIS_RESTART,)):
            verdict.causes["503 rate limits away (Redis restart)"] += 1
            return
        if _on_host_during(attempt, faults, (*REDIS_CUT, FREEZE)):
            verdict.causes["503 rate limits away (its host cut off from Redis)"] += 1
            return
        verdict.fail("503 rate limits away outside the Redis restart", _describe(attempt, plan))
        return
    if status in (502, 503, 504) and _from_upstream(attempt):
        expected = {"fail-503": 503, "fail-502": 502, "hang": 504, "cut": 502}.get(plan.fault)
        cause = f"{status} upstream ({plan.fault or 'no fault asked'})"
        verdict.causes[cause] += 1
        if expected is None:
            verdict.note(f"an upstream failure nobody asked for: {_describe(attempt, plan)}")
        return
    verdict.fail(f"undocumented {status}", _describe(attempt, plan))


def _judge_status(
    status: int,
    attempt: Attempt,
    record: RunRecord,
    revoked: dict[tuple[str, str], tuple[float, float]],
    verdict: Verdict,
) -> None:
    """Whether the answer's status is one the gateway documents for what happened to the request."""
    plan = record.plan_of(attempt)
    team = record.team_of(plan)
    faults = record.faults
    key_id = team.key_ids[plan.key]
    revocation = revoked.get((team.name, key_id))
    if status >= 500:
        classify_5xx(attempt, plan, faults, verdict)
    elif status == 200:
        if revocation is not None and attempt.started > _refused_from(revocation, faults):
            verdict.fail(
                "revoked key served", f"key {key_id} revoked at {revocation[1]:.3f}: {_describe(attempt, plan)}"
            )
    elif status == 401:
        if revocation is None or attempt.ended < revocation[0]:
            verdict.fail("valid key refused", _describe(attempt, plan))
    elif status == 402:
        _judge_402(attempt, plan, team, verdict)
    elif status == 409:
        if not plan.idempotency_key or "still in progress" not in attempt.error:
            verdict.fail("undocumented 409", _describe(attempt, plan))
    elif status == 429:
        if plan.fault != "fail-429":
            verdict.fail("429 without a rate limit that binds", _describe(attempt, plan))
    else:
        verdict.fail(f"undocumented {status}", _describe(attempt, plan))


def _judge_402(attempt: Attempt, plan: Plan, team: Team, verdict: Verdict) -> None:
    """A 402 is documented for a poor team, and for a team at its budget when it says so."""
    if team.poor:
        return
    if not team.budget:
        verdict.fail("402 for a team with plenty of credit", _describe(attempt, plan))
    elif "budget" not in attempt.error:
        verdict.fail("402 for a team with plenty of credit, not about its budget", _describe(attempt, plan))


def check_answers(record: RunRecord, verdict: Verdict) -> None:
    faults = record.faults
    revoked = {(a.team, a.argument): (a.started, a.ended) for a in record.actions if a.kind == "revoke" and a.ok}
    for attempt in record.attempts:
        plan = record.plan_of(attempt)
        verdict.statuses[str(attempt.status) if attempt.status else attempt.outcome] += 1
        for problem in attempt.problems:
            verdict.fail("malformed answer", f"{problem}: {_describe(attempt, plan)}; body {attempt.body[:300]!r}")
        if attempt.outcome in (NO_ANSWER, BROKEN) and _on_host_during(attempt, faults, HOST_FAULTS):
            verdict.causes[f"{attempt.outcome} (its host cut off or frozen)"] += 1
        elif attempt.outcome in (NO_ANSWER, BROKEN) and not _gateway_down(attempt, faults):
            verdict.fail("no whole answer from a live gateway", f"{_describe(attempt, plan)}; {attempt.outcome}")
        status = attempt.status
        if status is None:
            continue
        _judge_status(status, attempt, record, revoked, verdict)
        if attempt.outcome == ANSWERED and status != 200 and not attempt.error:
            verdict.fail("an error without a message", f"{_describe(attempt, plan)}; body {attempt.body[:300]!r}")
