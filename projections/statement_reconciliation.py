"""A monthly statement's reconciliation: its own sum, the ledger's balance at the month's end loaded
apart (its newest snapshot by then, plus its events), and the audit history's entries of the month
(counts and amounts of each kind, by model and by key, the balances before and after). What differs
goes into the statement's figures, and the statement says it does not reconcile."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from app.store.event_store import LedgerStore
from domain.money import format_credits
from projections.history import HistoryProjection
from projections.statement_figures import ONE_MICROSECOND, Figures, Month, Usage

#: The audit history's kinds of entries that move money (an operator's rows do not).
ENTRY_KINDS = ("top_up", "charge", "adjustment", "expiry", "refund", "dispute", "dispute_closed")


@dataclass(frozen=True, slots=True)
class MonthOfTeam:
    """Whose month is reconciled, and where its ledger is."""

    store: LedgerStore
    team: str
    team_id: UUID
    month: Month


def reconcile(month: MonthOfTeam, figures: Figures) -> None:
    """The statement's sum, against the ledger loaded apart and the audit history; what differs is
    added to ``figures.problems``."""
    if figures.computed_closing != figures.closing:
        figures.problems.append(
            f"opening {format_credits(figures.opening)} + top-ups {format_credits(figures.top_ups)} - charges "
            f"{format_credits(figures.charges.charged)} + adjustments {format_credits(figures.adjustments)}"
            f"{figures.expiry_text()} = {format_credits(figures.computed_closing)}, but the replay closes at "
            f"{format_credits(figures.closing)}"
        )
    _check_ledger(month, figures)
    _check_history(month, figures)


def _check_ledger(month: MonthOfTeam, figures: Figures) -> None:
    """The closing balance against the ledger's balance at the month's end, loaded on its own."""
    if figures.closing_version:
        team, _ = month.store.load_team(month.team_id, figures.closing_version, at=month.month.end - ONE_MICROSECOND)
        figures.ledger_balance = team.balance if team is not None else 0
        at_version = team.version if team is not None else 0
        if at_version != figures.closing_version:
            figures.problems.append(
                f"the ledger at the month's end is at version {at_version}, the statement's "
                f"replay at {figures.closing_version}"
            )
    if figures.ledger_balance != figures.closing:
        figures.problems.append(
            f"the ledger's balance at the month's end is "
            f"{format_credits(figures.ledger_balance)}, the statement closes at "
            f"{format_credits(figures.closing)}"
        )


def _check_history(month: MonthOfTeam, figures: Figures) -> None:
    """The audit history's entries of the month against the replay's: counts and amounts by kind,
    by model and by key, and the balances before and after the month."""
    history = HistoryProjection(month.store, month.store.database)
    try:
        history.catch_up()  # every event read above is stored: the history reaches it
    finally:
        history.close()
    kinds, by_model, by_key = _history_figures(month, figures)
    figures.history_entries = sum(count for count, _ in kinds.values())
    replayed = {
        "top_up": (figures.top_up_count, figures.top_ups),
        "charge": (figures.charges.requests, -figures.charges.charged),
        "adjustment": (figures.adjustment_count, figures.adjustments),
        "expiry": (figures.expiry_count, -figures.expired),
    }
    replayed.update(figures.reversal_kinds)
    for kind in sorted(set(kinds) | set(replayed)):
        (have, have_amount), (want, want_amount) = kinds.get(kind, (0, 0)), replayed.get(kind, (0, 0))
        if (have, have_amount) != (want, want_amount):
            figures.problems.append(
                f"the audit history has {have} {kind} entries of {format_credits(have_amount)} "
                f"credits in the month; the ledger has {want} of {format_credits(want_amount)}"
            )
    for what, found, replayed_usage in (("model", by_model, figures.by_model), ("key", by_key, figures.by_key)):
        for name in sorted(set(found) | set(replayed_usage)):
            figures.problems.extend(_usage_differs(f"{what} {name!r}", found.get(name), replayed_usage.get(name)))
    for label, version, balance in (
        ("before", figures.opening_version, figures.opening),
        ("after", figures.closing_version, figures.closing),
    ):
        last = month.store.read_models.read_rows(
            "SELECT balance_after FROM ledger_entries WHERE team_name = {p} AND version <= {p} "
            "ORDER BY notification_id DESC LIMIT 1",
            (month.team, version),
        )
        recorded = int(last[0]["balance_after"]) if last else 0
        if recorded != balance:
            figures.problems.append(
                f"the audit history's balance {label} the month is {format_credits(recorded)}"
                f", the ledger's {format_credits(balance)}"
            )


def _history_figures(
    month: MonthOfTeam, figures: Figures
) -> tuple[dict[str, tuple[int, int]], dict[str, Usage], dict[str, Usage]]:
    """The audit history's entries of the month (the versions the replay read): count and amount of
    each kind, and the charges by model and by key."""
    rows = month.store.read_models.read_rows(
        "SELECT kind, model, key_id, COUNT(*) AS n, SUM(amount) AS amount, SUM(input_tokens) AS i, "
        "SUM(output_tokens) AS o, SUM(cache_write_tokens) AS w, SUM(cache_hit_tokens) AS h "
        "FROM ledger_entries WHERE team_name = {p} AND version > {p} AND version <= {p} "
        f"AND kind IN ({', '.join(repr(kind) for kind in ENTRY_KINDS)}) "  # an operator's rows move no money
        "GROUP BY kind, model, key_id",
        (month.team, figures.opening_version, figures.closing_version),
    )
    kinds: dict[str, tuple[int, int]] = {}
    by_model: dict[str, Usage] = {}
    by_key: dict[str, Usage] = {}
    for row in rows:
        count, amount = int(row["n"]), int(row["amount"])
        before = kinds.get(str(row["kind"]), (0, 0))
        kinds[str(row["kind"])] = (before[0] + count, before[1] + amount)
        if row["kind"] != "charge":
            continue
        tokens = (int(row["i"]), int(row["o"]), int(row["w"]), int(row["h"]))
        for usage in (by_model.setdefault(row["model"], Usage()), by_key.setdefault(row["key_id"], Usage())):
            usage.add(Usage(count, *tokens, charged=-amount))
    return kinds, by_model, by_key


def _usage_differs(what: str, found: Usage | None, replayed: Usage | None) -> list[str]:
    """What differs between the audit history's charges of a model or key and the replay's."""
    found, replayed = found or Usage(), replayed or Usage()
    if (found.requests, found.charged, found.tokens()) == (replayed.requests, replayed.charged, replayed.tokens()):
        return []
    return [
        (
            f"the audit history's charges of {what} are {found.requests} requests, {sum(found.tokens())} tokens, "
            f"{format_credits(found.charged)} credits; the ledger's are {replayed.requests}, "
            f"{sum(replayed.tokens())}, {format_credits(replayed.charged)}"
        )
    ]
