"""Usage by attribution is bounded per team and day, in the order charges come, and still adds up."""

from __future__ import annotations

import pytest

from app.store.usage_rows import AttributionRow
from domain import attribution_bounds
from domain.attribution_bounds import OTHER, Admission


@pytest.fixture(autouse=True)
def small_bounds(monkeypatch):
    monkeypatch.setattr(attribution_bounds, "MAX_VALUES_PER_DAY", 3)
    monkeypatch.setattr(attribution_bounds, "MAX_VALUES_PER_TEAM_DAY", 5)
    monkeypatch.setattr(attribution_bounds, "MAX_TAG_NAMES_PER_DAY", 2)


def row(dimension: str, value: str, team: str = "acme", day: str = "2026-11-27") -> AttributionRow:
    return AttributionRow(
        team_name=team,
        dimension=dimension,
        value=value,
        day=day,
        requests=1,
        input_tokens=10,
        output_tokens=0,
        cache_write_tokens=0,
        cache_hit_tokens=0,
        cost=7,
    )


def test_values_beyond_a_dimensions_bound_count_under_other_and_no_end_user_is_never_bounded():
    admission = Admission()
    counted = admission.admit([row("user", u) for u in ("a", "b", "c", "d", "a", "", "e")])
    assert [r.value for r in counted] == ["a", "b", "c", OTHER, "a", "", OTHER]
    assert len(counted) == 7  # every charge still counted once under the dimension


def test_each_team_and_day_has_bounds_of_its_own():
    admission = Admission()
    counted = admission.admit(
        [*(row("user", u) for u in "abcd"), row("user", "x", team="other"), row("user", "y", day="2026-11-28")]
    )
    assert [r.value for r in counted] == ["a", "b", "c", OTHER, "x", "y"]


def test_the_teams_values_over_all_dimensions_are_bounded_too():
    admission = Admission()
    counted = admission.admit(
        [row("user", "a"), row("user", "b"), row("user", "c"), row("tag:p", "1"), row("tag:p", "2"), row("tag:p", "3")]
    )
    assert [r.value for r in counted] == ["a", "b", "c", "1", "2", OTHER]


def test_a_tag_name_beyond_the_days_bound_is_not_counted_by_name():
    admission = Admission()
    counted = admission.admit([row("tag:a", "1"), row("tag:b", "1"), row("tag:c", "1"), row("tag:a", "2")])
    assert [(r.dimension, r.value) for r in counted] == [("tag:a", "1"), ("tag:b", "1"), ("tag:a", "2")]


def test_a_day_seeded_with_what_is_stored_goes_on_as_a_replay_from_the_start_would():
    charges = [row("user", u) for u in ("a", "b", "c", "d", "b", "e")]
    whole = Admission().admit(charges)
    resumed = Admission()
    resumed.seed("acme", "2026-11-27", [("user", 2)], [("user", "b")])  # a and b counted already
    assert resumed.admit(charges[2:]) == whole[2:]
