"""A team's monthly statement, built from its events: the ledger itself, replayed, not a read model.

For one UTC calendar month: the opening balance (the team's balance after its last event before the
month; 0 if it had none), each top-up, charge and adjustment of the month in ledger order, the
charges grouped by model and by key (requests, tokens, credits charged, uncollected), the totals, the
closing balance, and the reconciliation, stated in the statement itself:

- opening + top-ups − charges + adjustments = closing, to the micro-credit;
- every entry's recorded ``balance_after`` is the balance the replay gives after it;
- the closing balance is what the ledger gives at the month's end, loaded apart (its newest snapshot
  by then, plus its events up to then: ``LedgerStore.load_team``);
- the audit history (``ledger_entries``) has the same entries: the same counts and amounts of each
  kind, by model and by key, and the same balances before and after the month.

Which events are the month's: in ledger order (the team's versions), those from the first event at
or after the month's first instant up to (not including) the first event at or after the next
month's — the same rule as every point-in-time read of a team (``app/ledger/balance_at.py``).

A statement is the same list of rows whichever format carries it (``projections/statement_chain.py``:
the columns, and the hash chain of the tamper-evident form): the month's entries first, then the
summary rows. Rows are produced as the events are read, a page at a time, so a month of a million
charges is never held in memory; the summary rows come once the month's events are all read.

A statement read while its month goes on covers the events up to the team's version then: its
closing row names that version (``version``), and the statement regenerated up to it
(``upto``) is the same statement whenever it is regenerated, as long as the ledger is unchanged.

What it adds up is ``projections/statement_figures.py``'s; its reconciliation,
``projections/statement_reconciliation.py``; its anchor in the transparency log,
``projections/statement_anchor.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from app.store.event_store import LedgerStore
from domain.credit_lots import PAID
from domain.ledger import TeamLedger, TeamNotFound, team_id
from domain.money import format_credits
from domain.usage import UsageRecord
from projections.statement_anchor import SECTION as ANCHOR_SECTION
from projections.statement_anchor import LeafIndex, anchor
from projections.statement_figures import ONE_MICROSECOND, Figures, Month, Usage
from projections.statement_reconciliation import MonthOfTeam, reconcile

__all__ = ["SUMMARY_SECTIONS", "Month", "Statement", "month_closed_at"]

#: The summary rows' sections, in the order they follow the entries.
SUMMARY_SECTIONS = (
    "opening_balance",
    "top_ups",
    "top_ups_by_kind",  # rows only in a month with credit other than paid (promotional, adjustment lots)
    "auto_recharges",  # rows only in a month with auto-recharge attempts: started, credited, failed
    "charges_by_model",
    "charges_by_key",
    "charges",
    "adjustments",
    "expirations",  # a row only in a month in which credit lots expired
    "reversals",  # a row only in a month with refunds or disputes
    "closing_balance",
    "reconciliation",
    "log_checkpoint",  # the checkpoint of the transparency log the statement is anchored to (form 2)
)
_TOKENS = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_hit_tokens")


def _reversal(event: object) -> tuple[str, int, str] | None:
    """A refund's, a dispute's or a dispute's end: its entry kind, what it moved, its reference."""
    if isinstance(event, TeamLedger.PaymentRefunded | TeamLedger.DisputeOpened):
        kind = "refund" if isinstance(event, TeamLedger.PaymentRefunded) else "dispute"
        return kind, -event.taken, f"{event.payment_intent} {event.reversal_id}"
    if isinstance(event, TeamLedger.DisputeClosed):
        return "dispute_closed", event.amount - event.owed_paid, f"{event.payment_intent} {event.dispute_id}"
    return None


#: The auto-recharge rows of a statement, in order: attempts begun (what they asked), their payments
#: credited (what they bought, counted in the top-ups too), and attempts failed.
RECHARGE_KINDS = ("started", "credited", "failed")


def _count_recharge(figures: Figures, event: TeamLedger.Event) -> None:
    """Count an auto-recharge attempt begun, credited or failed."""
    found: tuple[str, int] | None = None
    if isinstance(event, TeamLedger.RechargeStarted):
        found = "started", event.amount
    elif isinstance(event, TeamLedger.RechargeFailed):
        found = "failed", 0
    elif isinstance(event, TeamLedger.CreditsAdded) and event.recharge:
        found = "credited", event.amount - event.owed_paid
    if found is not None:
        count, amount = figures.recharges.get(found[0], (0, 0))
        figures.recharges[found[0]] = (count + 1, amount + found[1])


#: The events a statement has an entry row for.
_ENTRY_EVENTS = (
    TeamLedger.CreditsAdded,
    TeamLedger.CreditsAdjusted,
    TeamLedger.PaymentRefunded,
    TeamLedger.DisputeOpened,
    TeamLedger.DisputeClosed,
    TeamLedger.CreditsExpired,
    TeamLedger.Charged,
)


def _tokens(usage: UsageRecord) -> tuple[int, int, int, int]:
    """A charge's tokens as the audit history counts them (every cache write, of whichever lifetime)."""
    return (
        int(usage["input_tokens"]),
        int(usage["output_tokens"]),
        int(usage["cache_write_tokens"]) + int(usage.get("cache_write_1h_tokens", 0)),
        int(usage["cache_hit_tokens"]),
    )


def _money(prefix: str, micros: int) -> dict[str, Any]:
    """An amount as a row carries it: exact credits, and micro-credits."""
    return {prefix: format_credits(micros), f"{prefix}_micros": micros}


def _usage_cells(usage: Usage) -> dict[str, Any]:
    cells: dict[str, Any] = {
        "count": usage.requests,
        **dict(zip(_TOKENS, usage.tokens(), strict=True)),
        **_money("amount", usage.charged),
    }
    if usage.uncollected:
        cells.update(_money("uncollected", usage.uncollected))
    return cells


def month_closed_at(store: LedgerStore, team: str, month: Month, now: datetime) -> int | None:
    """The team's version at the end of ``month`` (that of its last event before the next month's
    first instant: the version a statement of the whole month closes at), once the month is over —
    ``now`` is past its end, or the team has an event after it; None while the month goes on."""
    tid = team_id(team)
    at_end, _ = store.load_team(tid, at=month.end - ONE_MICROSECOND)
    version = at_end.version if at_end is not None else 0
    if now < month.end and next(store.events_after(tid, version, page=1), None) is None:
        return None
    return version


class Statement:
    """``team``'s statement for ``month``: :meth:`rows` reads the team's events and yields the rows;
    once they are all read, :attr:`figures` holds the totals and the reconciliation.

    ``upto``: the team's events after this version are not read (a statement regenerated as it was
    first read). ``TeamNotFound`` if the team was never opened."""

    def __init__(self, store: LedgerStore, team: str, month: Month, upto: int | None = None) -> None:
        self.store = store
        self.team = team
        self.month = month
        self.upto = upto
        self.figures = Figures()
        self._id = team_id(team)
        if store.find_team(self._id, version=1) is None:
            raise TeamNotFound(team)
        self._leaves = LeafIndex(store, self._id)

    def _row(self, section: str, **cells: Any) -> dict[str, Any]:
        return {"team": self.team, "month": self.month.text, "section": section, **cells}

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row: the month's entries in ledger order, then the summary rows."""
        yield from self._entries()
        reconcile(MonthOfTeam(self.store, self.team, self._id, self.month), self.figures)
        yield from self._summary()

    # -- the month's events, replayed --------------------------------------------------------------

    def _entries(self) -> Iterator[dict[str, Any]]:
        figures = self.figures
        team, _ = self.store.load_team(self._id, self.upto, at=self.month.start - ONE_MICROSECOND)
        if team is not None:
            figures.opening, figures.opening_version = team.balance, team.version
        for event in self.store.events_after(self._id, figures.opening_version, upto=self.upto):
            if event.timestamp >= self.month.end:
                break
            try:
                team = event.mutate(team)
            except Exception as exc:  # noqa: BLE001 - a history that cannot be replayed is the statement's finding
                figures.problems.append(f"version {event.originator_version} cannot be applied: {exc}")
                break
            assert isinstance(team, TeamLedger)
            recorded = getattr(event, "balance_after", None)
            if recorded is not None and recorded != team.balance and len(figures.problems) < 10:
                figures.problems.append(
                    f"version {event.originator_version}: the entry records the balance after "
                    f"it as {format_credits(recorded)}, the replay gives "
                    f"{format_credits(team.balance)}"
                )
            row = self._entry(event)
            if row is not None:
                yield row
        if team is not None:
            figures.closing, figures.closing_version = team.balance, team.version

    def _entry(self, event: TeamLedger.Event) -> dict[str, Any] | None:
        """The row of a top-up, charge or adjustment (None for any other event), counted in the totals."""
        figures = self.figures
        _count_recharge(figures, event)
        if not isinstance(event, _ENTRY_EVENTS):
            return None
        version = event.originator_version
        common = {"occurred_at": event.timestamp.isoformat(), "version": version, "leaf": self._leaves.leaf(version)}
        if isinstance(event, TeamLedger.CreditsAdded):
            figures.top_ups += event.amount - event.owed_paid
            figures.top_up_count += 1
            kind = event.kind or PAID  # credit from before lots was paid
            count, amount = figures.top_ups_by_kind.get(kind, (0, 0))
            figures.top_ups_by_kind[kind] = (count + 1, amount + event.amount - event.owed_paid)
            return self._row(
                "entry",
                **common,
                kind="top_up",
                **_money("amount", event.amount - event.owed_paid),
                **_money("balance_after", event.balance_after),
                reference=event.reference,
            )
        if isinstance(event, TeamLedger.CreditsAdjusted):
            figures.adjustments += event.amount - event.owed_paid
            figures.adjustment_count += 1
            return self._row(
                "entry",
                **common,
                kind="adjustment",
                **_money("amount", event.amount - event.owed_paid),
                **_money("balance_after", event.balance_after),
                reason=event.reason,
                reference=event.reference,
            )
        reversal = _reversal(event)
        if reversal is not None:
            kind, moved, reference = reversal
            figures.reversed += moved
            figures.reversal_count += 1
            count, amount = figures.reversal_kinds.get(kind, (0, 0))
            figures.reversal_kinds[kind] = (count + 1, amount + moved)
            return self._row(
                "entry",
                **common,
                kind=kind,
                **_money("amount", moved),
                **_money("balance_after", event.balance_after),
                reference=reference,
            )
        if isinstance(event, TeamLedger.CreditsExpired):
            figures.expired += event.amount
            figures.expiry_count += 1
            return self._row(
                "entry",
                **common,
                kind="expiry",
                **_money("amount", -event.amount),
                **_money("balance_after", event.balance_after),
                reference=event.lot,
            )
        if not isinstance(event, TeamLedger.Charged):
            return None
        tokens = _tokens(event.usage)
        for usage in (
            figures.charges,
            figures.by_model.setdefault(event.model, Usage()),
            figures.by_key.setdefault(event.key_id, Usage()),
        ):
            usage.add(Usage(1, *tokens, charged=event.charged, uncollected=event.uncollected))
        uncollected = _money("uncollected", event.uncollected) if event.uncollected else {}
        return self._row(
            "entry",
            **common,
            kind="charge",
            key_id=event.key_id,
            model=event.model,
            endpoint=event.endpoint,
            request_id=event.request_id,
            **dict(zip(_TOKENS, tokens, strict=True)),
            **_money("amount", -event.charged),
            **uncollected,
            **_money("balance_after", event.balance_after),
        )

    # -- the summary ------------------------------------------------------------------------------

    def _summary(self) -> Iterator[dict[str, Any]]:
        figures = self.figures
        yield self._row("opening_balance", version=figures.opening_version, **_money("amount", figures.opening))
        yield self._row("top_ups", count=figures.top_up_count, **_money("amount", figures.top_ups))
        if set(figures.top_ups_by_kind) - {PAID}:  # paid and promotional credit apart, when there is both
            for kind, (count, amount) in sorted(figures.top_ups_by_kind.items()):
                yield self._row("top_ups_by_kind", kind=kind, count=count, **_money("amount", amount))
        for kind in RECHARGE_KINDS:
            if kind in figures.recharges:
                count, amount = figures.recharges[kind]
                yield self._row("auto_recharges", kind=kind, count=count, **_money("amount", amount))
        for model, usage in sorted(figures.by_model.items()):
            yield self._row("charges_by_model", model=model, **_usage_cells(usage))
        for key_id, usage in sorted(figures.by_key.items()):
            yield self._row("charges_by_key", key_id=key_id, **_usage_cells(usage))
        yield self._row("charges", **_usage_cells(figures.charges))
        yield self._row("adjustments", count=figures.adjustment_count, **_money("amount", figures.adjustments))
        if figures.expiry_count:
            yield self._row("expirations", count=figures.expiry_count, **_money("amount", -figures.expired))
        if figures.reversal_count:
            yield self._row("reversals", count=figures.reversal_count, **_money("amount", figures.reversed))
        yield self._row("closing_balance", version=figures.closing_version, **_money("amount", figures.closing))
        yield self._row(
            "reconciliation",
            reconciled=figures.reconciled,
            **_money("amount", figures.computed_closing),
            **_money("balance_after", figures.ledger_balance),
            count=figures.history_entries,
            note=self.note(),
        )
        yield self._row(ANCHOR_SECTION, **anchor(self._leaves, figures.closing_version).cells())

    def note(self) -> str:
        """The reconciliation in words: the sum, the ledger's balance, the audit history; or what differs."""
        f = self.figures
        sums = (
            f"opening {format_credits(f.opening)} + top-ups {format_credits(f.top_ups)} - charges "
            f"{format_credits(f.charges.charged)} + adjustments {format_credits(f.adjustments)}"
            f"{f.expiry_text()} = {format_credits(f.computed_closing)}"
        )
        if f.problems:
            return f"NOT RECONCILED: {sums}; " + "; ".join(f.problems)
        return (
            f"reconciled: {sums} = closing {format_credits(f.closing)}, the ledger's balance at the month's end "
            f"(version {f.closing_version}); the audit history's {f.history_entries} entries agree"
        )
