"""The commands a team ledger refuses, and why; nothing is recorded when one is raised.

Each refusal carries its facts and ``told``: the words a client or an operator reads it in, the same
for the APIs and the CLI. How it is answered over HTTP (status, error type, headers) is the HTTP
application's one table (``app/http/refusals.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.budgets import RESET_NAMES
from domain.money import format_credits


class LedgerError(Exception):
    """A command the ledger refuses; nothing was recorded."""

    @property
    def told(self) -> str:
        """The refusal in the words a client or an operator reads: its own message, unless it says more."""
        return str(self)


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

    @property
    def told(self) -> str:
        return (
            f"Insufficient credits: this request can cost up to {format_credits(self.needed)} credits "
            f"but team '{self.team}' has {format_credits(self.available)} available. Add credits or lower "
            "max_tokens."
        )


@dataclass(frozen=True, slots=True)
class RefusingBudget:
    """The budget that refused a request: the key's (``key_id``) or the team's (``key_id`` empty), its
    ``limit`` (micro-credits) a ``period``, and when it resets (ISO 8601, UTC; "" for a lifetime budget)."""

    key_id: str
    limit: int
    period: str
    resets_at: str


class BudgetExceeded(InsufficientCredits):
    """The request's worst case does not fit in what a budget has left this period (``budget``).
    ``available`` is what the budget has left."""

    def __init__(self, team: str, needed: int, available: int, budget: RefusingBudget) -> None:
        key_id, period, limit = budget.key_id, budget.period, budget.limit
        whose = f"key {key_id!r} of team {team!r}" if key_id else f"team {team!r}"
        LedgerError.__init__(
            self, f"{whose} needs {needed} micro-credits but has {available} left of its {period} budget of {limit}"
        )
        self.team = team
        self.needed = needed
        self.available = available
        self.budget = budget
        self.key_id = key_id
        self.limit = limit
        self.period = period
        self.resets_at = budget.resets_at

    @property
    def told(self) -> str:
        whose = f"key '{self.key_id}' of team '{self.team}'" if self.key_id else f"team '{self.team}'"
        period = RESET_NAMES.get(self.period) or "lifetime"
        resets = f"it resets at {self.resets_at}" if self.resets_at else "it does not reset"
        return (
            f"Budget exceeded: this request can cost up to {format_credits(self.needed)} credits but {whose} "
            f"has {format_credits(self.available)} credits left of its {period} budget of "
            f"{format_credits(self.limit)} credits ({resets}). Lower max_tokens, or wait for the reset."
        )

    def leaving(self, available: int) -> BudgetExceeded:
        """The same refusal, with ``available`` left."""
        return BudgetExceeded(self.team, self.needed, available, self.budget)


class RequestInProgress(LedgerError):
    """The same request (same Idempotency-Key) already holds credits and has not finished."""

    def __init__(self, team: str, request_id: str) -> None:
        super().__init__(f"request {request_id!r} of team {team!r} is already in progress")

    @property
    def told(self) -> str:
        return "A request with this Idempotency-Key is still in progress; retry when it has finished."


class TeamSuspended(LedgerError):
    """A suspended team's request: refused before any credit is held."""

    def __init__(self, team: str) -> None:
        super().__init__(f"team {team!r} is suspended")
        self.team = team

    @property
    def told(self) -> str:
        return f"Team '{self.team}' is suspended."


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
