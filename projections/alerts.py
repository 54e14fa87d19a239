"""The alert outbox: every ``AlertRaised`` event as a row of ``alerts`` (written by the history
projection in the transaction that advances its position, so each alert is there exactly once), and
per receiver a row of ``alert_deliveries`` saying whether it took the alert and when to try again.

The outbox is fed by the events, not by the request path: an alert whose gateway process died
before it was sent is still in the events, hence in ``alerts``, and whichever process delivers next
sends it. A rebuild completes ``alerts`` from the events and never touches ``alert_deliveries``, so
nothing delivered is delivered again because the read models were rebuilt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.store.alert_rows import ALERT_COLUMNS, AlertRow
from app.store.database import Sql, Transaction
from domain.ledger import TeamLedger

INSERT_ALERTS = f"INSERT INTO alerts ({', '.join(ALERT_COLUMNS)})"
ON_ALERT_CONFLICT = "ON CONFLICT (alert_id) DO NOTHING"


def alert_row(notification_id: int, team_name: str, event: object) -> AlertRow | None:
    """An ``AlertRaised`` event's row of the outbox, as it is stored (``app/store/storable.py``)."""
    if not isinstance(event, TeamLedger.AlertRaised):
        return None
    return AlertRow(
        alert_id=event.alert_id,
        notification_id=notification_id,
        team_name=team_name,
        key_id=event.key_id,
        kind=event.kind,
        threshold=event.threshold,
        value=event.value,
        budget_limit=event.limit,
        period=event.period,
        request_id=event.request_id,
        occurred_at=event.timestamp.isoformat(),
    ).storable()


def write_alerts(tx: Transaction, rows: Sequence[AlertRow]) -> None:
    tx.insert_many(INSERT_ALERTS, [row.values() for row in rows], ON_ALERT_CONFLICT)


def alert_body(row: dict[str, Any]) -> bytes:
    """What a receiver is sent: the alert as the ledger recorded it (amounts in micro-credits)."""
    return json.dumps(
        {
            "id": row["alert_id"],
            "type": "alert." + row["kind"],
            "team": row["team_name"],
            "key_id": row["key_id"] or None,
            "threshold": row["threshold"],
            "value": int(row["value"]),
            "budget_limit": int(row["budget_limit"]) or None,
            "period": row["period"] or None,
            "request_id": row["request_id"] or None,
            "occurred_at": row["occurred_at"],
            "unit": "micro-credits",
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


class AlertOutbox:
    """The alerts due to each receiver, and what became of each attempt."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def due(self, url: str, now: float, limit: int = 50) -> list[dict[str, Any]]:
        """Alerts ``url`` has not taken, whose next attempt is due, oldest first."""
        return self._sql.query(
            "SELECT a.*, COALESCE(d.attempts, 0) AS attempts, COALESCE(d.next_attempt_at, 0) AS next_attempt_at "
            "FROM alerts a LEFT JOIN alert_deliveries d ON d.alert_id = a.alert_id AND d.url = ? "
            "WHERE d.delivered_at IS NULL AND COALESCE(d.next_attempt_at, 0) <= ? "
            f"ORDER BY a.notification_id LIMIT {int(limit)}",
            [url, now],
        )

    def claim(self, url: str, alert: dict[str, Any], until: float) -> bool:
        """Take the alert's next attempt for this process (until ``until``); False if another
        process took it first."""
        with self._sql.transaction() as tx:
            tx.execute(
                "INSERT INTO alert_deliveries (alert_id, url, attempts, next_attempt_at, delivered_at, "
                "last_error) VALUES (?, ?, 0, 0, NULL, '') ON CONFLICT (alert_id, url) DO NOTHING",
                (alert["alert_id"], url),
            )
            return (
                tx.execute(
                    "UPDATE alert_deliveries SET next_attempt_at = ?, attempts = attempts + 1 "
                    "WHERE alert_id = ? AND url = ? AND next_attempt_at = ? AND delivered_at IS NULL",
                    (until, alert["alert_id"], url, alert["next_attempt_at"]),
                )
                == 1
            )

    def delivered(self, url: str, alert_id: str, at: str) -> None:
        with self._sql.transaction() as tx:
            tx.execute(
                "UPDATE alert_deliveries SET delivered_at = ?, last_error = '' WHERE alert_id = ? AND url = ?",
                (at, alert_id, url),
            )

    def failed(self, url: str, alert_id: str, retry_at: float, error: str) -> None:
        with self._sql.transaction() as tx:
            tx.execute(
                "UPDATE alert_deliveries SET next_attempt_at = ?, last_error = ? WHERE alert_id = ? AND url = ?",
                (retry_at, error[:300], alert_id, url),
            )

    def recent(self, team: str, limit: int = 50) -> list[dict[str, Any]]:
        """The team's latest alerts, newest first, each with how its deliveries stand."""
        alerts = self._sql.query(
            f"SELECT * FROM alerts WHERE team_name = ? ORDER BY notification_id DESC LIMIT {int(limit)}", [team]
        )
        for alert in alerts:
            alert["deliveries"] = self._sql.query(
                "SELECT url, attempts, delivered_at, last_error FROM alert_deliveries WHERE alert_id = ? ORDER BY url",
                [alert["alert_id"]],
            )
        return alerts
