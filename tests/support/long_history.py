"""Long ledger histories, built fast: the aggregate's own commands saved in big batches.

The tests that bound the memory of the tools reading history (verify, rebuild, export) need tens
of thousands of events in a few seconds; driving them through the writer or a gateway would take
minutes. The commands are the ones the gateway runs (a hold, then its charge, per request), and
``LedgerStore.save_teams`` writes them with the read models, as the writer does; a snapshot is
stored every ``snapshot_every`` events of a team, as the writer's snapshot thread does.
"""

from __future__ import annotations

from decimal import Decimal

from app.store.event_store import LedgerStore
from domain.ledger import TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
USAGE = TokenUsage(input_tokens=500, output_tokens=200)
MODELS = ("fake-gpt", "fake-claude")


def build_history(
    store: LedgerStore, requests: dict[str, int], *, batch: int = 400, snapshot_every: int | None = 500
) -> int:
    """Open each named team and run its number of requests (a hold and a charge each), saving
    ``batch`` requests of every team at a time; returns how many events were stored."""
    teams = {name: TeamLedger.open(name) for name in requests}
    for team in teams.values():
        team.add_credits(10**15, "opening")
        team.issue_key("k1", "hash-" + team.name)
    snapshot_at = dict.fromkeys(teams, 0)
    done = dict.fromkeys(teams, 0)
    events = 0
    while any(done[name] < total for name, total in requests.items()):
        for name, team in teams.items():
            for i in range(done[name], min(done[name] + batch, requests[name])):
                rid = f"{name}-r{i}"
                model = MODELS[i % len(MODELS)]
                team.place_hold(RequestOnLedger(rid, "k1", model, "chat.completions"), 10_000)
                team.charge(RequestOnLedger(rid, "k1", model, "chat.completions"), USAGE, PRICE, Decimal(100))
            done[name] = min(done[name] + batch, requests[name])
        events += sum(len(t.pending_events) for t in teams.values())
        store.save_teams(teams.values())
        if snapshot_every is not None:
            due = [t for t in teams.values() if t.version - snapshot_at[t.name] >= snapshot_every]
            store.team_snapshots.save(store.team_snapshots.take(t) for t in due)
            snapshot_at.update((t.name, t.version) for t in due)
    return events
