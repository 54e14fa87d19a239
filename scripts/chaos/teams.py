"""The teams the traffic bills, and the operator's work on them while it runs.

Fifty teams with two keys each are opened before the load, in this process, through the same
ledger writer the ``tollgate`` command uses (one command per team would cost a minute of
interpreter start-ups on a 2-core machine). Some are poor — they can afford only part of their
traffic, so the gateways must refuse the rest with 402 and never overspend — and some keys carry
rate limits (far too high to bind) so that every request of theirs goes through Redis. During the
load the operator tops some poor teams up and revokes some keys with the real ``tollgate``
command; what it did, and when, is kept for the verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.chaos.gateways import run_cli

#: Opening balances in credits.
RICH = "50"
POOR = "0.15"
TOP_UP = "0.25"
#: Per-minute limits on the limited keys: every request consults Redis; none is ever refused.
HIGH_RPM, HIGH_TPM = 1_000_000, 1_000_000_000
#: Every fifth team (from the third) has credit enough but a daily budget its traffic runs into:
#: the gateways, all of them at once, must refuse past it and never let it be overspent.
BUDGET = "0.3"


@dataclass
class Team:
    name: str
    opening: int  # micro-credits
    poor: bool
    secrets: tuple[str, str]
    key_ids: tuple[str, str]
    limited: bool  # its first key has rate limits
    budget: int = 0  # its daily budget, micro-credits (0: none)


@dataclass
class OperatorAction:
    """One ``tollgate`` command the operator ran during the load."""

    kind: str  # top-up | revoke
    team: str
    argument: str  # the amount, or the key id
    reference: str
    started: float
    ended: float = 0.0
    ok: bool = False
    output: str = ""


def open_teams(database_url: str, base_dir: Path, count: int, poor_every: int) -> list[Team]:
    """Open ``count`` teams (every ``poor_every``-th one poor), two keys each."""
    from app.keys import hash_key
    from app.ledger.results import KeyTerms, Limits
    from app.ledger.service import LedgerService
    from app.ledger.writer import LedgerWriter
    from app.store.event_store import open_ledger_store
    from domain.ledger import team_id
    from domain.money import micros_from_credits

    store = open_ledger_store(database_url, base_dir, pool_size=2)
    teams = []
    try:
        with LedgerWriter(store) as writer:
            ledger = LedgerService(writer)
            for i in range(count):
                name = f"chaos-team-{i:02d}"
                poor = i % poor_every == poor_every - 1
                opening = micros_from_credits(POOR if poor else RICH)
                limited = i % 2 == 0
                ledger.create_team(name, opening)
                budget = micros_from_credits(BUDGET) if i % 5 == 2 and not poor else 0
                if budget:
                    ledger.set_budget(name, budget, "day", actor="chaos")
                terms = KeyTerms(limits=Limits(HIGH_RPM, HIGH_TPM) if limited else Limits())
                first = ledger.issue_key(name, "first", terms)
                secrets = (first.secret, ledger.issue_key(name, "second").secret)
                teams.append((name, opening, poor, secrets, limited, budget))
        result = []
        for name, opening, poor, secrets, limited, budget in teams:
            team = store.find_team(team_id(name))
            assert team is not None
            by_hash = {key.key_hash: key_id for key_id, key in team.keys.items()}
            key_ids = (by_hash[hash_key(secrets[0])], by_hash[hash_key(secrets[1])])
            result.append(Team(name, opening, poor, secrets, key_ids, limited, budget))
        return result
    finally:
        store.close()


@dataclass
class Operator:
    """Runs ``tollgate`` commands on the gateways' configuration and keeps what happened."""

    config: Path
    actions: list[OperatorAction] = field(default_factory=list)

    def top_up(self, team: str, amount: str = TOP_UP) -> OperatorAction:
        reference = f"chaos top-up {len(self.actions) + 1}"
        return self._run(
            OperatorAction("top-up", team, amount, reference, time.time()),
            "credits",
            "add",
            "--team",
            team,
            amount,
            "--reference",
            reference,
        )

    def revoke(self, team: str, key_id: str) -> OperatorAction:
        return self._run(
            OperatorAction("revoke", team, key_id, "", time.time()), "key", "revoke", "--team", team, key_id
        )

    def _run(self, action: OperatorAction, *args: str) -> OperatorAction:
        self.actions.append(action)
        result = run_cli(self.config, *args)
        action.ended = time.time()
        action.ok = result.returncode == 0
        action.output = (result.stdout + result.stderr).strip()[-1000:]
        return action
