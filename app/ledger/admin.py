"""Team administration: opening teams, issuing keys, adding credits.

These go through the same ledger writer as requests do, so an operator's top-up and a gateway's
charge on the same team are ordered by the event store, never lost to a race.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from app.keys import new_key
from app.ledger.writer import LedgerWriter
from domain.ledger import InvalidTeamName, TeamAlreadyExists, TeamLedger, team_id, TEAM_NAME

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class TeamSummary:
    name: str
    balance: int
    held: int
    suspended: bool = False
    rpm: int | None = None
    tpm: int | None = None

    @classmethod
    def of(cls, team: TeamLedger) -> TeamSummary:
        return cls(team.name, team.balance, team.held, team.suspended, team.rpm, team.tpm)


@dataclass(frozen=True, slots=True)
class Limits:
    """Rate limits per minute; ``None`` leaves a limit as it is, 0 removes it."""

    rpm: int | None = None
    tpm: int | None = None

    @property
    def given(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    def merged(self, rpm: int | None, tpm: int | None) -> tuple[int | None, int | None]:
        return (rpm if self.rpm is None else self.rpm), (tpm if self.tpm is None else self.tpm)


def create_team(writer: LedgerWriter, name: str, credits: int, limits: Limits = Limits()) -> TeamSummary:
    if not TEAM_NAME.fullmatch(name):
        raise InvalidTeamName(name)

    def command(team: TeamLedger | None) -> tuple[TeamLedger, TeamSummary]:
        if team is not None:
            raise TeamAlreadyExists(name)
        team = TeamLedger.open(name)
        if credits:
            team.add_credits(credits, reference="opening balance")
        if limits.given:
            team.limit(*limits.merged(None, None))
        return team, TeamSummary.of(team)

    return writer.submit(team_id(name), command).result()


def issue_key(writer: LedgerWriter, team_name: str, label: str = "", models: list[str] | None = None,
              endpoints: list[str] | None = None, limits: Limits = Limits()) -> str:
    """Issue a key for a team (optionally only for some models or endpoints, with rate limits) and
    return its secret, the only time it is seen."""
    key = new_key()

    def issue(team: TeamLedger) -> None:
        team.issue_key(key.key_id, key.key_hash, label)
        if models:
            team.restrict_key(key.key_id, models)
        if endpoints:
            team.restrict_key_endpoints(key.key_id, endpoints)
        if limits.given:
            team.limit_key(key.key_id, *limits.merged(None, None))

    writer.on_team(team_id(team_name), team_name, issue).result()
    return key.secret


def restrict_key_endpoints(writer: LedgerWriter, team_name: str, key_id: str, endpoints: list[str]) -> None:
    writer.on_team(team_id(team_name), team_name, lambda team: team.restrict_key_endpoints(key_id, endpoints)).result()


def limit_key(writer: LedgerWriter, team_name: str, key_id: str, limits: Limits) -> None:
    def limit(team: TeamLedger) -> None:
        key = team.keys.get(key_id, {})
        team.limit_key(key_id, *limits.merged(key.get("rpm"), key.get("tpm")))

    writer.on_team(team_id(team_name), team_name, limit).result()


def limit_team(writer: LedgerWriter, team_name: str, limits: Limits) -> TeamSummary:
    def limit(team: TeamLedger) -> TeamSummary:
        team.limit(*limits.merged(team.rpm, team.tpm))
        return TeamSummary.of(team)

    return writer.on_team(team_id(team_name), team_name, limit).result()


def suspend_team(writer: LedgerWriter, team_name: str, reason: str = "") -> None:
    writer.on_team(team_id(team_name), team_name, lambda team: team.suspend(reason)).result()


def reinstate_team(writer: LedgerWriter, team_name: str) -> None:
    writer.on_team(team_id(team_name), team_name, lambda team: team.reinstate()).result()


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
    endpoints: tuple[str, ...] = ()
    rpm: int | None = None
    tpm: int | None = None


def _caught_up(writer: LedgerWriter, read: Callable[[TeamLedger], R]) -> Callable[[TeamLedger], R]:
    """``read``, on the team brought up to date first. The writer's copy of a team learns what other
    processes appended (a top-up from the CLI, another gateway's charges) only when one of its own
    saves conflicts; a command that only reads saves nothing, so without this it would answer from a
    stale copy. The caught-up copy then replaces the writer's (it has no events of its own to save).
    A team this batch already changed is left alone: its save will conflict, and the batch, this
    read included, is decided again on the caught-up copy."""

    def caught_up(team: TeamLedger) -> R:
        if not team.pending_events:
            for event in writer.store.newer_events(team):
                event.mutate(team)
        return read(team)

    return caught_up


def list_keys(writer: LedgerWriter, team_name: str) -> list[KeySummary]:
    return writer.on_team(team_id(team_name), team_name, _caught_up(writer, lambda team: [
        KeySummary(key_id, k["label"], k["revoked"], tuple(k.get("models", ())), tuple(k.get("endpoints", ())),
                   k.get("rpm"), k.get("tpm"))
        for key_id, k in team.keys.items()
    ])).result()


def add_credits(writer: LedgerWriter, team_name: str, amount: int, reference: str = "") -> int:
    """Top up a team; returns its balance after, in micro-credits."""
    return writer.on_team(team_id(team_name), team_name, lambda team: team.add_credits(amount, reference)).result()


def team_summary(writer: LedgerWriter, team_name: str) -> TeamSummary:
    return writer.on_team(team_id(team_name), team_name, _caught_up(writer, TeamSummary.of)).result()
