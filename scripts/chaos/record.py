"""What one run did and what its clients saw, as the checks judge it: the planned requests, every
attempt at them with what it was told, the faults injected, the teams and what the operator did to
them. Built once the load and the faults are over; the ledger's own side (``Snapshot``) is read
apart, and judged against this.
"""

from __future__ import annotations

from dataclasses import dataclass

from scripts.chaos.client import Attempt
from scripts.chaos.faults import Fault
from scripts.chaos.teams import OperatorAction, Team
from scripts.chaos.traffic import Plan


@dataclass(frozen=True, slots=True)
class RunRecord:
    plans: list[Plan]  # by index: ``Attempt.plan`` names one
    attempts: list[Attempt]
    faults: list[Fault]
    teams: list[Team]  # by index: ``Plan.team`` names one
    actions: list[OperatorAction]  # the operator's top-ups and key revocations

    def plan_of(self, attempt: Attempt) -> Plan:
        return self.plans[attempt.plan]

    def team_of(self, plan: Plan) -> Team:
        return self.teams[plan.team]
