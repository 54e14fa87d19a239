"""The team's events are stored and read under the topics they always had.

Each stored event names its class by topic (``module:QualName``). The events were defined inside the
aggregate's class, so every ledger in the field holds ``domain.ledger:TeamLedger.<Name>``; they are
defined in ``domain/ledger_events.py`` now, and must still be recorded, and read, under those topics.
"""

from __future__ import annotations

import inspect

import pytest
from eventsourcing.domain import Aggregate, CanMutateAggregate
from eventsourcing.utils import get_topic, resolve_topic

from domain import ledger_events
from domain.ledger import TeamLedger

#: Every topic a team's events were stored under before the events had a module of their own.
TOPICS = [
    f"domain.ledger:TeamLedger.{name}"
    for name in (
        "Opened",
        "CreditsAdded",
        "KeyIssued",
        "KeyRevoked",
        "KeyModelsRestricted",
        "KeyEndpointsRestricted",
        "KeyLimitsSet",
        "TeamLimitsSet",
        "Suspended",
        "Reinstated",
        "HoldPlaced",
        "Charged",
        "CreditsLeased",
        "RequestFailed",
        "HoldReleased",
        "CreditsAdjusted",
        "CreditsExpired",
        "PaymentRefunded",
        "DisputeOpened",
        "DisputeClosed",
        "AutoRechargeSet",
        "RechargeStarted",
        "RechargeFailed",
        "Rerated",
        "PricesAdjusted",
        "OutputClampSet",
        "BudgetSet",
        "AlertThresholdSet",
        "AlertRaised",
    )
]


@pytest.mark.parametrize("topic", TOPICS)
def test_each_event_is_recorded_and_read_under_its_topic_of_before(topic):
    name = topic.rpartition(".")[2]
    event_class = getattr(TeamLedger, name)
    assert get_topic(event_class) == topic
    assert resolve_topic(topic) is event_class
    assert issubclass(event_class, TeamLedger.Event)


def test_every_event_defined_is_one_of_the_team_s_and_no_other():
    defined = {
        name
        for name, value in vars(ledger_events).items()
        if inspect.isclass(value)
        and issubclass(value, CanMutateAggregate)
        and value.__module__ == ledger_events.__name__
        and not name.startswith("_")  # a base the events share, never recorded itself
    }
    assert {topic.rpartition(".")[2] for topic in TOPICS} == defined


def test_an_event_triggered_by_its_definition_is_recorded_as_the_team_s():
    """A command may name an event by its definition (``ledger_events.KeyIssued``): it is still recorded
    under the aggregate's class, and so under its topic."""
    team = TeamLedger.open("acme")
    team.trigger_event(ledger_events.KeyIssued, key_id="k1", key_hash="h", label="")
    team.issue_key("k2", "h2")
    recorded = team.collect_events()
    assert [type(e) for e in recorded[1:]] == [TeamLedger.KeyIssued, TeamLedger.KeyIssued]
    assert {get_topic(type(e)) for e in recorded[1:]} == {"domain.ledger:TeamLedger.KeyIssued"}
    assert type(recorded[0]) is TeamLedger.Opened
    assert get_topic(TeamLedger) == "domain.ledger:TeamLedger"
    assert TeamLedger.Opened is not ledger_events.Opened
    assert issubclass(TeamLedger.Opened, Aggregate.Created)
