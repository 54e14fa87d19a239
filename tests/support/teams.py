"""Teams opened on a gateway's ledger, as an operator would from another process."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.ledger.results import KeyTerms, Limits
from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from domain.money import micros_from_credits
from domain.settings import parse_settings

_team_numbers = itertools.count(1)


@dataclass(frozen=True)
class Team:
    name: str
    key: str


class Teams:
    """Opens teams on a gateway's ledger, as an operator would from another process."""

    def __init__(self, config: Path) -> None:
        settings = parse_settings(config.read_text(), str(config))
        self._store = open_ledger_store(settings.database_url, config.parent, pool_size=2)  # one writer's
        self._writer = LedgerWriter(self._store).start()
        self._ledger = LedgerService(self._writer)

    def open(self, balance: str = "100", key_rpm: int | None = None) -> Team:
        name = f"team-{next(_team_numbers)}"
        self._ledger.create_team(name, micros_from_credits(balance))
        return Team(name, self._ledger.issue_key(name, terms=KeyTerms(limits=Limits(rpm=key_rpm))).secret)

    def close(self) -> None:
        self._writer.stop()
        self._store.close()


def teams_of(config: Path) -> Iterator[Teams]:
    """Teams on the ledger of the gateway configured by ``config``, closed after (a fixture yields from it)."""
    teams = Teams(config)
    yield teams
    teams.close()
