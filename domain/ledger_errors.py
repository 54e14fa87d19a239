"""The commands a team ledger refuses, and why; nothing is recorded when one is raised."""

from __future__ import annotations


class LedgerError(Exception):
    """A command the ledger refuses; nothing was recorded."""


class InvalidTeamName(LedgerError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"invalid team name {name!r}: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )


class TeamNotFound(LedgerError):
    def __init__(self, name: str) -> None:
        super().__init__(f"team {name!r} does not exist")
        self.name = name


class TeamAlreadyExists(LedgerError):
    def __init__(self, name: str) -> None:
        super().__init__(f"team {name!r} already exists")
        self.name = name


class InvalidAmount(LedgerError):
    pass


class InsufficientCredits(LedgerError):
    def __init__(self, team: str, needed: int, available: int) -> None:
        super().__init__(f"team {team!r} needs {needed} micro-credits but has {available} available")
        self.team = team
        self.needed = needed
        self.available = available


class BudgetExceeded(InsufficientCredits):
    """The request's worst case does not fit in what a budget has left this period: the key's
    (``key_id``) or the team's (``key_id`` empty). ``available`` is what the budget has left."""

    def __init__(self, team: str, needed: int, available: int, *, key_id: str, limit: int, period: str,
                 resets_at: str) -> None:
        whose = f"key {key_id!r} of team {team!r}" if key_id else f"team {team!r}"
        LedgerError.__init__(self, f"{whose} needs {needed} micro-credits but has {available} left of its {period} "
                                   f"budget of {limit}")
        self.team = team
        self.needed = needed
        self.available = available
        self.key_id = key_id
        self.limit = limit
        self.period = period
        self.resets_at = resets_at  # ISO 8601, UTC; "" for a lifetime budget

    def leaving(self, available: int) -> BudgetExceeded:
        """The same refusal, with ``available`` left."""
        return BudgetExceeded(self.team, self.needed, available, key_id=self.key_id, limit=self.limit,
                              period=self.period, resets_at=self.resets_at)


class RequestInProgress(LedgerError):
    """The same request (same Idempotency-Key) already holds credits and has not finished."""

    def __init__(self, team: str, request_id: str) -> None:
        super().__init__(f"request {request_id!r} of team {team!r} is already in progress")


class TeamSuspended(LedgerError):
    """A suspended team's request: refused before any credit is held."""

    def __init__(self, team: str) -> None:
        super().__init__(f"team {team!r} is suspended")
        self.team = team


class KeyNotFound(LedgerError):
    def __init__(self, team: str, key_id: str) -> None:
        super().__init__(f"team {team!r} has no key {key_id!r}")


class HoldNotFound(LedgerError):
    def __init__(self, team: str, request_id: str) -> None:
        super().__init__(f"team {team!r} has no open hold for request {request_id!r}")
        self.request_id = request_id


class AlreadyCharged(LedgerError):
    """The request was charged before: a request is charged at most once, whatever path the second
    charge took."""

    def __init__(self, team: str, request_id: str) -> None:
        super().__init__(f"request {request_id!r} of team {team!r} is already charged")
        self.request_id = request_id


class TeamNotOpenedYet(TeamNotFound):
    """The team exists, but was opened after the instant asked about."""

    def __init__(self, name: str, at: str) -> None:
        LedgerError.__init__(self, f"team {name!r} was not opened yet at {at}")
        self.name = name
