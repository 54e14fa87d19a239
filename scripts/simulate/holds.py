"""Every hold ends exactly once: placed (a request's hold, or a lease's first growth), then closed
by its charge, its release, its expiry or its process's death — never twice, never one that was
never opened. Read from the stored events as they arrive, apart from the aggregate's own books."""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.ledger import TeamLedger


@dataclass
class HoldBook:
    """The holds and leases open on each team, as the events say."""

    open: dict[str, set[str]] = field(default_factory=dict)

    def see(self, team: str, event: TeamLedger.Event) -> str | None:
        """Follow ``event``; what is wrong with the hold's life, if anything."""
        holds = self.open.setdefault(team, set())
        if isinstance(event, TeamLedger.HoldPlaced):
            if event.request_id in holds:
                return f"{team}: {event.request_id} held twice"
            holds.add(event.request_id)
        elif isinstance(event, TeamLedger.CreditsLeased):
            holds.add(event.lease)  # a lease grows many times; it is one hold until released
        elif isinstance(event, TeamLedger.HoldReleased):
            if event.request_id not in holds:
                return f"{team}: {event.request_id} released, but it was not held (it ended twice, or never began)"
            holds.discard(event.request_id)
        elif isinstance(event, TeamLedger.Charged) and not event.lease:
            holds.discard(event.request_id)  # its charge ends it (if it had not expired first)
        return None
