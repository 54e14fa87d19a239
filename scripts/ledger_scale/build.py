"""Building a long history fast, exactly as a gateway would have written it.

The teams and their keys are opened through the ledger's own service (what ``tollgate team create``
and ``key create`` do). Then each team's requests are applied to its aggregate directly — per
request a hold (``place_hold``) and its charge (``charge``), with a top-up whenever the available
balance would not cover the next hold — and saved with ``LedgerStore.save_teams`` many thousands
of events per transaction, which writes the read models beside the events as every save does. A
snapshot is taken every ``snapshot_every`` events of a team, after a request, as the writer does
after a commit (``app/ledger/team_cache.py``), and stored once its events are. Last, the audit
history projection catches up with everything, as a gateway's projector would have. The history is
then the one a gateway serving those requests would have left; only the time it took differs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.observability.request_ids import new_request_id
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.snapshots import SnapshotRow
from domain.endpoints import CHAT
from domain.ledger import TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price, worst_case_in_micros
from domain.usage import TokenUsage
from projections.history import HistoryProjection
from scripts.bench.fast_upstream import COMPLETION_TOKENS, PROMPT_TOKENS
from scripts.ledger_scale.ledger import BIG, CREDITS_PER_USD, MODEL, PRICES, SMALL, Ledger, Team

PRICE = Price(Decimal(PRICES[0]), Decimal(PRICES[1]), Decimal(PRICES[2]), Decimal(PRICES[3]))
#: What the fast upstream reports for every chat completion.
USAGE = TokenUsage(input_tokens=PROMPT_TOKENS, output_tokens=COMPLETION_TOKENS)
HOLD = worst_case_in_micros(200, 64, PRICE, Decimal(CREDITS_PER_USD))
OPENING = 100 * 10**6  # micro-credits (100 credits)
TOP_UP = 1000 * 10**6
SAVE_EVERY = 10_000  # events per transaction
OWNER = "scale-builder"  # the gateway process the holds are recorded under


def open_teams(ledger: Ledger, store: LedgerStore) -> None:
    """Open the big team and the small ones, each with one key (what the CLI's commands do)."""
    with LedgerWriter(store, snapshot_every=None) as writer:
        service = LedgerService(writer)
        for name in (*SMALL, BIG):
            service.create_team(name, OPENING)
            key = service.issue_key(name, "scale benchmark")
            ledger.teams[name] = Team(name, key.secret, key.key_id)


def grow(
    store: LedgerStore, team: Team, events: int, snapshot_every: int, progress: Callable[[int], None] | None = None
) -> int:
    """Add requests to the team until it has ``events`` events; returns the snapshots taken."""
    ledger = store.find_team(team.id)
    if ledger is None:
        raise RuntimeError(f"team {team.name} was never opened")
    latest = store.team_snapshots.latest(team.id)
    snapshot_at = latest.version if latest is not None else 0
    taken: list[SnapshotRow] = []
    count = 0

    def save(team_ledger: TeamLedger) -> None:
        store.save_teams([team_ledger])
        store.team_snapshots.save(taken)
        taken.clear()
        if progress is not None:
            progress(team_ledger.version)

    while ledger.version < events:
        if ledger.available < HOLD:
            ledger.add_credits(TOP_UP, reference="top-up")
        request_id = new_request_id()
        ledger.place_hold(RequestOnLedger(request_id, team.key_id, MODEL, CHAT), HOLD, owner=OWNER)
        ledger.charge(RequestOnLedger(request_id, team.key_id, MODEL, CHAT), USAGE, PRICE, Decimal(CREDITS_PER_USD))
        if ledger.version - snapshot_at >= snapshot_every:  # after a request, as after a writer's commit
            taken.append(store.team_snapshots.take(ledger))
            snapshot_at = ledger.version
            count += 1
        if len(ledger.pending_events) >= SAVE_EVERY:
            save(ledger)
    save(ledger)
    return count


def bury(ledger: Ledger, team: str, snapshot_every: int, events: int = 2100) -> None:
    """Add ``events`` events to ``team``: the most recent events are then all its own, so a gateway
    started next does not warm the other teams (``LedgerStore.recent_teams``) — their first
    requests load them."""
    store = open_ledger_store(ledger.database_url, ledger.workdir, pool_size=2)
    try:
        current = store.find_team(ledger.teams[team].id)
        grow(store, ledger.teams[team], (current.version if current else 0) + events, snapshot_every)
    finally:
        store.close()


def top_up(ledger: Ledger, below: int = 5000 * 10**6, amount: int = 100_000 * 10**6) -> None:
    """Top up every team with less than ``below`` available (a run's requests spend a few hundred
    credits of the teams it uses; a kept ledger serves run after run)."""
    store = open_ledger_store(ledger.database_url, ledger.workdir, pool_size=2)
    try:
        for team in ledger.teams.values():
            found = store.find_team(team.id)
            if found is not None and found.available < below:
                found.add_credits(amount, reference="top-up")
                store.save_teams([found])
    finally:
        store.close()


def _progress(label: str, total: int) -> Callable[[int], None]:
    """A line on stderr every tenth of the way, with the rate so far."""
    started = time.perf_counter()
    shown = [-1]

    def report(done: int) -> None:
        tenth = min(10, done * 10 // max(total, 1))
        if tenth > shown[0]:
            shown[0] = tenth
            rate = done / max(time.perf_counter() - started, 1e-6)
            print(f"  {label}: {done:,}/{total:,} events ({rate:,.0f}/s)", file=sys.stderr, flush=True)

    return report


def build(ledger: Ledger, events: int, snapshot_every: int) -> dict[str, Any]:
    """Open the teams and write their histories; returns what it took."""
    started = time.perf_counter()
    store = open_ledger_store(ledger.database_url, ledger.workdir, pool_size=2)
    try:
        open_teams(ledger, store)
        snapshots = sum(grow(store, ledger.teams[name], size, snapshot_every) for name, size in SMALL.items())
        grown = time.perf_counter()
        snapshots += grow(store, ledger.teams[BIG], events, snapshot_every, _progress("big team", events))
        written = time.perf_counter() - grown
        total = store.recorder.max_notification_id() or 0
        history = HistoryProjection(store, store.database)
        projected = time.perf_counter()
        try:
            history.catch_up(batch=5000, progress=_progress("audit history", total))
        finally:
            history.close()
        projected = time.perf_counter() - projected
        big = store.find_team(ledger.teams[BIG].id)
    finally:
        store.close()
    seconds = time.perf_counter() - started
    ledger.built_events = events
    ledger.build = {
        "events": total,
        "big_team_events": big.version if big else 0,
        "snapshots": snapshots,
        "seconds": round(seconds, 1),
        "events_per_s": round(total / seconds),
        "big_team_write_seconds": round(written, 1),
        "big_team_write_events_per_s": round((big.version if big else 0) / written),
        "history_seconds": round(projected, 1),
        "history_events_per_s": round(total / projected),
    }
    ledger.save()
    return ledger.build
