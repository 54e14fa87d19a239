"""How many rows usage by attribution may grow by: per team and day, a bounded number of values.

Every charge is counted under its end user and under each of its tags (``domain/attribution.py``),
and those values are the client's to choose: two hundred requests with ten new tags each once made
2,200 rows of ``usage_by_attribution`` and a 183 KB usage answer, and nothing stopped the next
thousand. So, per team and UTC day, in the order the charges were recorded:

- a value gets a row of its own while its dimension has fewer than :data:`MAX_VALUES_PER_DAY`
  values that day and the team fewer than :data:`MAX_VALUES_PER_TEAM_DAY` over all its dimensions;
  a value that comes after is counted under the dimension's :data:`OTHER` row (shown ``(other)``);
  no end user (``""``) is always a row of its own;
- a tag name counts as a dimension while the team has used fewer than :data:`MAX_TAG_NAMES_PER_DAY`
  tag names that day; a tag of a name beyond it is not counted by name that day (so, read by that
  name, its charges fall under ``(none)``).

Every charge still counts once under each dimension it is counted by, so a dimension's values add
up to the team's charges exactly; the charge's event keeps its exact tags and end user. The rule
depends only on the charges and their order, so the live projection, ``ledger rebuild`` and
``ledger verify`` count alike. A team's rows per day are at most
``MAX_VALUES_PER_TEAM_DAY + MAX_TAG_NAMES_PER_DAY + 2``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, Self, TypeVar

from domain.attribution import TAG_PREFIX

MAX_VALUES_PER_DAY = 1000
MAX_VALUES_PER_TEAM_DAY = 2000
MAX_TAG_NAMES_PER_DAY = 20
#: The value the charges beyond a dimension's bound for the day are counted under: a control
#: character, which no recorded client text may hold (``domain/client_text.py``), so it is no
#: client's value. Answered as ``null``, shown as :data:`OTHER_SHOWN`.
OTHER = "\x1f"
OTHER_SHOWN = "(other)"


class Attributed(Protocol):
    """A usage-by-attribution row, as the bounds see it (``app/store/usage_rows.py``: ``AttributionRow``)."""

    @property
    def team_name(self) -> str: ...
    @property
    def dimension(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def day(self) -> str: ...
    def under(self, value: str) -> Self:
        """The same counts under another value."""
        ...


Row = TypeVar("Row", bound=Attributed)


@dataclass
class _Day:
    """What one team has counted on one day: its tag names, and the values with rows of their own."""

    names: set[str] = field(default_factory=set)
    values: dict[str, int] = field(default_factory=dict)  # dimension → how many values have rows
    known: set[tuple[str, str]] = field(default_factory=set)  # (dimension, value) with a row
    total: int = 0

    def counted(self, dimension: str, value: str) -> str | None:
        """The value a charge's ``value`` of ``dimension`` is counted under (None: not counted by it)."""
        if dimension.startswith(TAG_PREFIX) and dimension not in self.names:
            if len(self.names) >= MAX_TAG_NAMES_PER_DAY:
                return None
            self.names.add(dimension)
        if value == "" or (dimension, value) in self.known:
            return value
        if self.values.get(dimension, 0) >= MAX_VALUES_PER_DAY or self.total >= MAX_VALUES_PER_TEAM_DAY:
            return OTHER
        self.known.add((dimension, value))
        self.values[dimension] = self.values.get(dimension, 0) + 1
        self.total += 1
        return value


class Admission:
    """The bounds applied to usage-by-attribution rows (:class:`Attributed`) in the order their
    charges were recorded. A replay starts empty; the live projection first :meth:`seed`\\ s each
    team's day with what is already counted."""

    def __init__(self) -> None:
        self._days: dict[tuple[str, str], _Day] = {}

    def seed(self, team: str, day: str, counts: Iterable[tuple[str, int]], known: Iterable[tuple[str, str]]) -> None:
        """What a team counted on a day already: each dimension with how many values have rows of
        their own (``counts``), and which (dimension, value) pairs, of those about to be counted, have
        one (``known``)."""
        state = self._days[(team, day)] = _Day()
        for dimension, n in counts:
            if dimension.startswith(TAG_PREFIX):
                state.names.add(dimension)
            state.values[dimension] = n
            state.total += n
        state.known.update(known)

    def admit(self, rows: Sequence[Row]) -> list[Row]:
        """``rows`` as they are counted: a value beyond its bounds under :data:`OTHER`, a tag of a
        name beyond them left out."""
        counted: list[Row] = []
        for row in rows:
            state = self._days.get((row.team_name, row.day))
            if state is None:
                state = self._days[(row.team_name, row.day)] = _Day()
            kept = state.counted(row.dimension, row.value)
            if kept is not None:
                counted.append(row if kept == row.value else row.under(kept))
        return counted
