"""Checking the audit history and usage projections against the events, as ``ledger verify`` replays them.

The projections are read inside one consistent read snapshot of the database (projectors keep
writing while a verify runs): the position they had reached, then ``ledger_entries`` in keyset pages
in notification order, merge-joined with the events as the replay reaches them (the replay reads the
events in notification order too). Only a page of rows is held at a time, never the history; the
expected usage is summed in dictionaries bounded by team × key × model × day, by team × dimension ×
value × day (usage by attribution) and by team × endpoint × day (usage by endpoint).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

from app.store.entry_rows import NOTIFICATION_ID, EntryRow
from app.store.usage_rows import AttributionRow, UsageRow, add_into
from domain.attribution_bounds import Admission
from domain.ledger import TeamLedger
from projections import attribution, endpoint_usage, quarantine
from projections.history import HistoryProjection
from projections.history_rows import entry_row, usage_row

#: How many rows a report lists of the events whose audit history rows are missing.
_MISSING_SHOWN = 5


class HistoryCheck:
    """Open (:meth:`start`) for as long as the replay runs, then :meth:`finish` for the problems."""

    def __init__(self, history: HistoryProjection) -> None:
        self._history = history
        self._reading = ExitStack()
        self.position = 0
        self.behind = 0  # how many events the projection had not reached when the check began
        self._rows: Iterator[tuple[Any, ...]] = iter(())
        self._row: tuple[Any, ...] | None = None  # the next row (its ENTRY_COLUMNS) not yet matched with an event
        self._row_id = 0
        self._problem: str | None = None  # the first row that is wrong (reported before missing rows)
        self._missing: list[int] = []
        self._usage: dict[tuple[str, ...], UsageRow] = {}  # team × key × model × day
        self._attributed: dict[tuple[str, ...], AttributionRow] = {}  # team × dimension × value × day
        self._by_endpoint: dict[tuple[Any, ...], list[int]] = {}  # team × endpoint × day
        self._admission = Admission()  # its bounds, counted as the replay reaches each charge
        self._quarantined: set[int] = set()  # events the projection set aside: they have no rows
        self._unprojectable: str | None = None  # the first event whose rows cannot be made, not set aside

    def start(self) -> HistoryCheck:
        self._reading.enter_context(self._history.consistent())
        self.position = self._history.position()
        self.behind = max(0, self._history.newest_event() - self.position)
        self._quarantined = self._history.quarantined_ids()
        self._rows = self._pages()
        self._advance()
        return self

    def close(self) -> None:
        try:
            self._reading.close()
        finally:
            self._history.close()

    def _pages(self) -> Iterator[tuple[Any, ...]]:
        """Every row, even any beyond the position (which only tampering could have written there)."""
        after = 0
        while page := self._history.entry_page(after):
            after = int(page[-1][NOTIFICATION_ID])
            yield from page
            del page  # not held while the next page is read

    def _advance(self) -> None:
        self._row = next(self._rows, None)
        self._row_id = int(self._row[NOTIFICATION_ID]) if self._row is not None else 0

    def expect(self, notification_id: int, team_name: str, event: TeamLedger.Event, balance: int = 0) -> None:
        """What the projections should hold for this event (the next in notification order);
        ``balance``: the team's after it, which an operator's row that moves no money repeats."""
        if notification_id > self.position or notification_id in self._quarantined:
            return  # not projected yet, or set aside by the projection (reported by ``finish``)
        try:
            expected = entry_row(notification_id, team_name, event, balance)
            used = usage_row(team_name, event)
            attributed = attribution.attribution_rows(team_name, event)
            by_endpoint = endpoint_usage.endpoint_row(team_name, event)
        except Exception as exc:  # noqa: BLE001 - rows that cannot be made are the check's finding
            self._unprojectable = self._unprojectable or (
                f"event #{notification_id} cannot be projected ({quarantine.why(exc)}), yet the audit history "
                "projection went past it without setting it aside"
            )
            return
        if expected is not None and self._problem is None:
            self._match(notification_id, expected)
        if used is not None:
            add_into(self._usage, [used])
        if attributed:
            add_into(self._attributed, self._admission.admit(attributed))
        if by_endpoint is not None:
            endpoint_usage.add_rows(self._by_endpoint, [by_endpoint])

    def _match(self, notification_id: int, expected: EntryRow) -> None:
        if self._row is not None and self._row_id < notification_id:
            self._problem = f"audit history row for event #{self._row_id} has no ledger entry behind it"
        elif self._row is None or self._row_id > notification_id:
            if len(self._missing) < _MISSING_SHOWN:
                self._missing.append(notification_id)
        else:
            difference = expected.difference(self._row)
            if difference is not None:
                self._problem = f"audit history row for event #{notification_id} differs from its event: {difference}"
            self._advance()

    @property
    def quarantined(self) -> int:
        return len(self._quarantined)

    def finish(self) -> list[str]:
        """The first problem found, if any: events set aside, then a wrong row, then missing rows,
        then usage (by key, model and day; by attribution; by endpoint)."""
        if self._quarantined:
            return [self._quarantine_problem()]
        if self._unprojectable is not None:
            return [self._unprojectable]
        if self._problem is None and self._row is not None:
            self._problem = f"audit history row for event #{self._row_id} has no ledger entry behind it"
        if self._problem is not None:
            return [self._problem]
        if self._missing:
            return [f"audit history is missing the rows of events {self._missing}"]
        for row in self._history.usage():  # bounded by team × key × model × day, like the sums it is checked against
            expected = self._usage.pop(row.key(), None)
            if expected != row:
                return [f"usage for {row.key()} is {_counts(row)}, the events say {_counts(expected)}"]
        if self._usage:
            return [f"usage is missing {sorted(self._usage)[:3]}"]
        return self._attribution_problems() or self._endpoint_problems()

    def _quarantine_problem(self) -> str:
        shown = self._history.quarantined(_MISSING_SHOWN)
        listed = "; ".join(
            f"#{q['notification_id']} ({q['topic'].rpartition(':')[2] or q['topic']}): {q['error']}" for q in shown
        )
        return (
            f"the audit history projection set aside {len(self._quarantined)} event(s) it could not project, "
            f"which have no rows in it: {listed}. Fix the cause, then `tollgate ledger rebuild` projects them "
            "again"
        )

    def _attribution_problems(self) -> list[str]:
        """``usage_by_attribution`` against the sums of the replayed charges."""
        for row in self._history.attribution_rows():
            expected = self._attributed.pop(row.key(), None)
            if expected != row:
                return [f"usage by attribution for {row.key()} is {_counts(row)}, the events say {_counts(expected)}"]
        if self._attributed:
            return [f"usage by attribution is missing {sorted(self._attributed)[:3]}"]
        return []

    def _endpoint_problems(self) -> list[str]:
        """``usage_by_endpoint`` against the sums of the replayed charges."""
        width = len(endpoint_usage.KEY)
        for row in self._history.endpoint_rows():
            key, counted = tuple(row[:width]), [int(v) for v in row[width:]]
            expected = self._by_endpoint.pop(key, None)
            if expected != counted:
                return [f"usage by endpoint for {key} is {counted}, the events say {expected}"]
        if self._by_endpoint:
            return [f"usage by endpoint is missing {sorted(self._by_endpoint)[:3]}"]
        return []


def _counts(row: UsageRow | AttributionRow | None) -> list[int] | None:
    """A usage row's counts as a report says them (None: no such row)."""
    return list(row.counts()) if row is not None else None
