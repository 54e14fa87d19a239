"""The rows the history projection makes of events: the audit history's, the usage's (by key,
model and day; by endpoint), the attribution's, the alerts' and the recharge attempts' (each as it is stored:
``app/store/storable.py``), for the live projection, ``ledger rebuild`` and ``ledger verify`` alike,
so the three make the very same rows.

A :class:`Slice` gathers a run of events' rows: an event's rows are all kept, or, if one of them
cannot be made, none, and the event is quarantined (``projections/quarantine.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from eventsourcing.persistence import Notification

from app.store.alert_rows import AlertRow
from app.store.entry_rows import ENTRY_COLUMNS, EntryHead, EntryRow
from app.store.usage_rows import AttributionRow, UsageRow
from domain.attribution import tags_text
from domain.ledger import TeamLedger
from domain.money import usd_from_micros
from domain.usage import UsageRecord
from projections import attribution, endpoint_usage, quarantine
from projections.alerts import alert_row
from projections.operator_rows import operator_row
from projections.recharges import RechargeRow, recharge_row

__all__ = ["ENTRY_COLUMNS", "EntryRow", "Slice", "entry_row", "price_text", "usage_row"]


def entry_row(notification_id: int, team_name: str, event: object, balance: int = 0) -> EntryRow | None:
    """The audit-history row of an event: a top-up, an adjustment, a charge, or an operator's action
    that moves no money (``balance``: the team's balance as it stood then, which such a row repeats);
    None for the events of the request path that move none (holds, leases, releases). As it is
    stored (``app/store/storable.py``; :class:`~app.store.storable.Unstorable` if it cannot be)."""
    if not isinstance(event, TeamLedger.Event):
        return None
    row = _entry_row(notification_id, team_name, event, balance)
    return row.storable() if row is not None else None


def _entry_row(notification_id: int, team_name: str, event: TeamLedger.Event, balance: int) -> EntryRow | None:
    common = EntryHead(
        notification_id=notification_id,
        team_id=event.originator_id.hex,
        team_name=team_name,
        version=event.originator_version,
        occurred_at=event.timestamp.isoformat(),
    )
    if isinstance(event, TeamLedger.CreditsAdded):
        return EntryRow(
            **common,
            kind="top_up",
            amount=event.amount - event.owed_paid,
            balance_after=event.balance_after,
            reference=event.reference,
            actor=event.actor,
            reason=event.reason,
        )
    if isinstance(event, TeamLedger.CreditsAdjusted):
        reference = f"{event.reason} ({event.reference})" if event.reference else event.reason
        return EntryRow(
            **common,
            kind="adjustment",
            amount=event.amount - event.owed_paid,
            balance_after=event.balance_after,
            reference=reference,
            actor=event.actor,
            reason=event.reason,
        )
    if isinstance(event, TeamLedger.PaymentRefunded | TeamLedger.DisputeOpened):
        owed = f"; {event.owed_added} micro-credits owed" if event.owed_added else ""
        return EntryRow(
            **common,
            kind="refund" if isinstance(event, TeamLedger.PaymentRefunded) else "dispute",
            amount=-event.taken,
            balance_after=event.balance_after,
            reference=f"{event.payment_intent} {event.reversal_id}",
            actor=event.actor,
            reason=f"{event.amount} micro-credits taken back{owed}",
        )
    if isinstance(event, TeamLedger.DisputeClosed):
        return EntryRow(
            **common,
            kind="dispute_closed",
            amount=event.amount - event.owed_paid,
            balance_after=event.balance_after,
            reference=f"{event.payment_intent} {event.dispute_id}",
            actor=event.actor,
            reason="won: the credit came back" if event.won else "lost: the credit stays taken",
        )
    if isinstance(event, TeamLedger.CreditsExpired):
        return EntryRow(
            **common,
            kind="expiry",
            amount=-event.amount,
            balance_after=event.balance_after,
            reference=event.lot,
            reason="the credit lot expired",
        )
    if not isinstance(event, TeamLedger.Charged):
        return operator_row(common, event, balance)
    u = event.usage
    usd = usd_from_micros(event.charged, Decimal(event.credits_per_usd))
    return EntryRow(
        **common,
        kind="charge",
        key_id=event.key_id,
        request_id=event.request_id,
        endpoint=event.endpoint,
        model=event.model,
        input_tokens=u["input_tokens"],
        output_tokens=u["output_tokens"],
        cache_write_tokens=_cache_writes(u),
        cache_hit_tokens=u["cache_hit_tokens"],
        price=price_text(event),
        amount=-event.charged,
        cost_usd=f"{usd:f}",
        balance_after=event.balance_after,
        tags=tags_text(event.tags),
        end_user=event.end_user,
    )


def price_text(event: TeamLedger.Charged) -> str:
    """A charge's price as the audit history shows it: each rate (``tool_fees.web_search=…`` for a
    tool's), then what else priced it (the basis, the price list entry, the team's adjustment) and
    what else was billed (1-hour cache writes, the tier served, tool calls)."""
    rates: list[str] = []
    for key, value in event.price.items():
        rates += [f"{key}.{name}={v}" for name, v in value.items()] if isinstance(value, dict) else [f"{key}={value}"]
    extra = [
        f"{k}={v}"
        for k, v in (("basis", event.basis), ("price_ref", event.price_ref), ("adjustment", event.adjustment))
        if v
    ]
    extra += [
        f"{k}={v}"
        for k, v in event.usage.items()
        if k
        in (
            "cache_write_1h_tokens",
            "service_tier",
            "image_input_tokens",
            "image_output_tokens",
            "audio_seconds",
            "input_characters",
            "audio_input_tokens",
        )
    ]
    extra += [f"images.{kind}={n}" for kind, n in (event.usage.get("images") or {}).items()]
    extra += [f"calls.{tool}={n}" for tool, n in (event.usage.get("tool_calls") or {}).items()]
    return ",".join(rates + extra)


def _cache_writes(usage: UsageRecord) -> int:
    """Every cache write, of whichever lifetime (the price column says how many were 1-hour ones)."""
    return int(usage["cache_write_tokens"]) + int(usage.get("cache_write_1h_tokens", 0))


def usage_row(team_name: str, event: object) -> UsageRow | None:
    """A charge's increment of ``usage_daily``, as it is stored (``app/store/storable.py``)."""
    if not isinstance(event, TeamLedger.Charged):
        return None
    u = event.usage
    return UsageRow(
        team_name=team_name,
        key_id=event.key_id,
        model=event.model,
        day=event.timestamp.date().isoformat(),
        requests=1,
        input_tokens=u["input_tokens"],
        output_tokens=u["output_tokens"],
        cache_write_tokens=_cache_writes(u),
        cache_hit_tokens=u["cache_hit_tokens"],
        cost=event.charged,
    ).storable()


@dataclass
class Slice:
    """The rows a run of events makes, table by table, and the events set aside (``quarantined``:
    notification id, topic, why)."""

    entries: list[EntryRow] = field(default_factory=list)
    usage: list[UsageRow] = field(default_factory=list)
    alerts: list[AlertRow] = field(default_factory=list)
    recharges: list[RechargeRow] = field(default_factory=list)
    attributed: list[AttributionRow] = field(default_factory=list)
    by_endpoint: list[tuple[Any, ...]] = field(default_factory=list)
    quarantined: list[tuple[int, str, str]] = field(default_factory=list)

    def add(self, notification_id: int, team_name: str, event: object, balance: int) -> EntryRow | None:
        """The event's rows (``balance``: its team's as it stood, for a row that repeats it); returns
        its audit history row, if it has one. Every row is made before any is kept, so an event
        whose rows cannot be made or stored (raised) leaves the slice as it was."""
        entry = entry_row(notification_id, team_name, event, balance)
        used = usage_row(team_name, event)
        alert = alert_row(notification_id, team_name, event)
        recharge = recharge_row(notification_id, team_name, event)
        attributed = attribution.attribution_rows(team_name, event)
        by_endpoint = endpoint_usage.endpoint_row(team_name, event)
        if entry is not None:
            self.entries.append(entry)
        if used is not None:
            self.usage.append(used)
        if alert is not None:
            self.alerts.append(alert)
        if recharge is not None:
            self.recharges.append(recharge)
        self.attributed += attributed
        if by_endpoint is not None:
            self.by_endpoint.append(by_endpoint)
        return entry

    def quarantine(self, notification: Notification, exc: BaseException) -> None:
        """Set the event aside, with why."""
        self.quarantined.append((notification.id, notification.topic, quarantine.why(exc)))
