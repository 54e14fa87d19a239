"""Team administration: opening teams, issuing keys, adding credits.

These go through the same ledger writer as requests do, so an operator's top-up and a gateway's
charge on the same team are ordered by the event store, never lost to a race.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.keys import new_key
from app.ledger_writer import LedgerWriter
from domain.ledger import InvalidTeamName, TeamAlreadyExists, TeamLedger, team_id, TEAM_NAME


@dataclass(frozen=True, slots=True)
class TeamSummary:
    name: str
    balance: int
    held: int


def create_team(writer: LedgerWriter, name: str, credits: int) -> TeamSummary:
    if not TEAM_NAME.match(name):
        raise InvalidTeamName(name)

    def command(team: TeamLedger | None) -> tuple[TeamLedger, TeamSummary]:
        if team is not None:
            raise TeamAlreadyExists(name)
        team = TeamLedger.open(name)
        if credits:
            team.add_credits(credits, reference="opening balance")
        return team, TeamSummary(team.name, team.balance, team.held)

    return writer.submit(team_id(name), command).result()


def issue_key(writer: LedgerWriter, team_name: str, label: str = "") -> str:
    """Issue a key for a team and return its secret (the only time it is seen)."""
    key = new_key()
    writer.on_team(
        team_id(team_name), team_name, lambda team: team.issue_key(key.key_id, key.key_hash, label)
    ).result()
    return key.secret


def add_credits(writer: LedgerWriter, team_name: str, amount: int, reference: str = "") -> int:
    """Top up a team; returns its balance after, in micro-credits."""
    return writer.on_team(team_id(team_name), team_name, lambda team: team.add_credits(amount, reference)).result()


def team_summary(writer: LedgerWriter, team_name: str) -> TeamSummary:
    return writer.on_team(
        team_id(team_name), team_name, lambda team: TeamSummary(team.name, team.balance, team.held)
    ).result()
