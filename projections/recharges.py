"""The auto-recharge outbox: every ``RechargeStarted`` event as a row of ``recharge_attempts``
(written by the history projection in the transaction that advances its position, so each attempt
is there exactly once), with what became of its payment.

As the alert outbox (``projections/alerts.py``), it is fed by the events, not by the request path:
an attempt begun by a charge on a process that died a moment later is still in the events, hence
here, and whichever gateway process runs the recharger next creates its payment. A rebuild
completes the table from the events and never touches an attempt's outcome, so no payment is made
again because the read models were rebuilt. The payment's creation carries the attempt's id as
Stripe's Idempotency-Key, so even a creation retried after a lost answer pays once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from app.store.database import Sql, Transaction
from domain.ledger import TeamLedger

RECHARGE_COLUMNS = ("attempt", "notification_id", "team_name", "amount", "occurred_at")
INSERT_RECHARGES = f"INSERT INTO recharge_attempts ({', '.join(RECHARGE_COLUMNS)})"
ON_RECHARGE_CONFLICT = "ON CONFLICT (attempt) DO NOTHING"


class RechargeRow(NamedTuple):
    """An attempt as the outbox first records it (what became of it is added later)."""

    attempt: str
    notification_id: int
    team_name: str
    amount: int  # micro-credits
    occurred_at: str


def recharge_row(notification_id: int, team_name: str, event: object) -> RechargeRow | None:
    """A ``RechargeStarted`` event's row of the outbox (None for any other event)."""
    if not isinstance(event, TeamLedger.RechargeStarted):
        return None
    return RechargeRow(event.attempt, notification_id, team_name, event.amount, event.timestamp.isoformat())


def write_recharges(tx: Transaction, rows: Sequence[RechargeRow]) -> None:
    tx.insert_many(INSERT_RECHARGES, [tuple(row) for row in rows], ON_RECHARGE_CONFLICT)


class RechargeOutbox:
    """The attempts whose payment is still to be made, and what became of each."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def due(self, now: float, limit: int = 20) -> list[dict[str, Any]]:
        """Attempts not settled whose next try is due, oldest first."""
        return self._sql.query(
            "SELECT * FROM recharge_attempts WHERE settled_at IS NULL AND next_try_at <= ? "
            f"ORDER BY notification_id LIMIT {int(limit)}",
            [now],
        )

    def claim(self, attempt: dict[str, Any], until: float) -> bool:
        """Take the attempt's next try for this process (until ``until``); False if another took it."""
        with self._sql.transaction() as tx:
            return (
                tx.execute(
                    "UPDATE recharge_attempts SET next_try_at = ?, tries = tries + 1 "
                    "WHERE attempt = ? AND next_try_at = ? AND settled_at IS NULL",
                    (until, attempt["attempt"], attempt["next_try_at"]),
                )
                == 1
            )

    def settled(self, attempt: str, at: str, outcome: str, payment_intent: str = "") -> None:
        """The attempt is over: ``outcome`` says how (``succeeded``, ``failed: …``, ``not pending``)."""
        with self._sql.transaction() as tx:
            tx.execute(
                "UPDATE recharge_attempts SET settled_at = ?, outcome = ?, payment_intent = ?, last_error = '' "
                "WHERE attempt = ?",
                (at, outcome[:300], payment_intent, attempt),
            )

    def retry(self, attempt: str, at: float, error: str) -> None:
        """The try could not reach a verdict (Stripe unreachable, a 5xx): try again at ``at``."""
        with self._sql.transaction() as tx:
            tx.execute(
                "UPDATE recharge_attempts SET next_try_at = ?, last_error = ? WHERE attempt = ?",
                (at, error[:300], attempt),
            )

    def of_team(self, team: str, limit: int = 20) -> list[dict[str, Any]]:
        """The team's latest attempts, newest first."""
        return self._sql.query(
            f"SELECT * FROM recharge_attempts WHERE team_name = ? ORDER BY notification_id DESC LIMIT {int(limit)}",
            [team],
        )
