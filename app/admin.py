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


def issue_key(writer: LedgerWriter, team_name: str, label: str = "", models: list[str] | None = None) -> str:
    """Issue a key for a team (optionally only for some models) and return its secret, the only
    time it is seen."""
    key = new_key()

    def issue(team: TeamLedger) -> None:
        team.issue_key(key.key_id, key.key_hash, label)
        if models:
            team.restrict_key(key.key_id, models)

    writer.on_team(team_id(team_name), team_name, issue).result()
    return key.secret


def revoke_key(writer: LedgerWriter, team_name: str, key_id: str) -> None:
    writer.on_team(team_id(team_name), team_name, lambda team: team.revoke_key(key_id)).result()


def restrict_key(writer: LedgerWriter, team_name: str, key_id: str, models: list[str]) -> None:
    writer.on_team(team_id(team_name), team_name, lambda team: team.restrict_key(key_id, models)).result()


@dataclass(frozen=True, slots=True)
class KeySummary:
    key_id: str
    label: str
    revoked: bool
    models: tuple[str, ...]


def list_keys(writer: LedgerWriter, team_name: str) -> list[KeySummary]:
    return writer.on_team(team_id(team_name), team_name, lambda team: [
        KeySummary(key_id, k["label"], k["revoked"], tuple(k.get("models", ()))) for key_id, k in team.keys.items()
    ]).result()


def add_credits(writer: LedgerWriter, team_name: str, amount: int, reference: str = "") -> int:
    """Top up a team; returns its balance after, in micro-credits."""
    return writer.on_team(team_id(team_name), team_name, lambda team: team.add_credits(amount, reference)).result()


def team_summary(writer: LedgerWriter, team_name: str) -> TeamSummary:
    return writer.on_team(
        team_id(team_name), team_name, lambda team: TeamSummary(team.name, team.balance, team.held)
    ).result()
