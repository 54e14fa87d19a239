"""Checks on the ledger as a whole: money conserved at every event, holds that end, a dead process's
credit given back in time.

* **Never below zero, replayed at every event.** Each team's events are applied here with plain
  arithmetic (independently of the aggregate's own code): after every event the balance, the held
  amount and the available balance (balance − held) must be ≥ 0, every recorded ``balance_after``
  must be the replayed balance, a release must free exactly what its hold or lease still held,
  and a charge against a lease can never take more than the lease has left.
* **Σ charges = Σ balance drops.** Per team: the top-ups the ledger recorded are exactly the opening
  balance and the top-ups the operator's ``tollgate credits add`` reported (by their reference),
  and top-ups − Σ charged = the final balance, which is also what the balances read model says.
* **Nothing held at the end** (every request settled, every lease returned), once traffic stopped.
* **A killed process's holds and leases are released within 30 s** of its death (issue #14 item 4):
  the holds open when it died that no live process went on using must be closed (released, or
  charged) by then; how long it took is reported.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from scripts.chaos.client import Attempt
from scripts.chaos.faults import KILL, Fault
from scripts.chaos.ledger import LedgerEvent, Snapshot
from scripts.chaos.teams import OperatorAction, Team
from scripts.chaos.verdict import Verdict

#: Seconds within which a dead process's holds and leases must be released (issue #14, item 4).
DEAD_RELEASE_SECONDS = 30.0


@dataclass
class TeamReplay:
    balance: int = 0
    held: int = 0
    added: int = 0
    charged: int = 0
    failed: bool = False  # a violation was found: the rest of this team's events are not judged again

    def __post_init__(self) -> None:
        self.open: dict[str, int] = {}  # hold or lease id → what it still holds


def replay(snapshot: Snapshot, verdict: Verdict) -> dict[str, TeamReplay]:
    teams: dict[str, TeamReplay] = {}
    for team, events in snapshot.by_team().items():
        state = teams[team] = TeamReplay()
        for event in events:
            problem = _apply(state, event)
            if problem is None and min(state.balance, state.held, state.balance - state.held) < 0:
                problem = f"balance {state.balance}, held {state.held}: below zero"
            if problem is not None and not state.failed:
                state.failed = True
                verdict.fail(
                    "ledger replay",
                    f"team {team}, event #{event.position} {event.kind} "
                    f"(version {event.version}): {problem}; {event.fields}",
                )
    return teams


def _apply_charge(state: TeamReplay, event: LedgerEvent) -> str | None:
    """A charge closes its hold (or takes from its lease) and debits the balance."""
    hold, lease = event["hold"], event.get("lease", "")
    name = lease or event["request_id"]
    if name in state.open:
        if not lease and hold != state.open[name]:
            return f"closed a hold of {state.open[name]} as {hold}"
        state.open[name] -= hold
        if state.open[name] < 0:
            return f"took {hold} from {name}, which held {state.open[name] + hold}"
        if not lease:
            del state.open[name]
    elif hold:
        return f"took {hold} from {name}, which holds nothing"
    state.held -= hold
    state.balance -= event["charged"]
    state.charged += event["charged"]
    if event["charged"] + event["uncollected"] != event["cost"] or event["charged"] < 0:
        return "charged + uncollected != cost"
    return None


def _apply(state: TeamReplay, event: LedgerEvent) -> str | None:
    kind = event.kind
    if kind == "CreditsAdded":
        state.balance += event["amount"]
        state.added += event["amount"]
    elif kind in ("HoldPlaced", "CreditsLeased"):
        name = event["request_id"] if kind == "HoldPlaced" else event["lease"]
        if kind == "HoldPlaced" and name in state.open:
            return f"a second hold for {name}"
        state.open[name] = state.open.get(name, 0) + event["amount"]
        state.held += event["amount"]
    elif kind == "Charged":
        if (problem := _apply_charge(state, event)) is not None:
            return problem
    elif kind == "HoldReleased":
        name = event["request_id"]
        if state.open.get(name) != event["amount"]:
            return f"released {event['amount']} of {name}, which held {state.open.get(name)}"
        del state.open[name]
        state.held -= event["amount"]
    recorded = event.get("balance_after")
    if recorded is not None and recorded != state.balance:
        return f"recorded balance_after {recorded}, replayed {state.balance}"
    return None


def check_sums(
    snapshot: Snapshot,
    replayed: dict[str, TeamReplay],
    teams: list[Team],
    actions: list[OperatorAction],
    verdict: Verdict,
) -> None:
    top_ups: dict[str, list[OperatorAction]] = defaultdict(list)
    for action in actions:
        if action.kind == "top-up":
            top_ups[action.team].append(action)
    added = defaultdict(list)
    for event in snapshot.of_kind("CreditsAdded"):
        added[event.team].append(event)
    for team in teams:
        state = replayed.get(team.name)
        if state is None:
            verdict.fail("team missing", f"team {team.name} has no events")
            continue
        from domain.money import micros_from_credits

        events = {e["reference"]: e for e in added[team.name]}
        opening = events.pop("opening balance", None)
        if opening is None or opening["amount"] != team.opening:
            verdict.fail(
                "top-ups", f"team {team.name}: opening balance {opening and opening['amount']} != {team.opening}"
            )
        for action in top_ups[team.name]:
            recorded = events.pop(action.reference, None)
            if action.ok and (recorded is None or recorded["amount"] != micros_from_credits(action.argument)):
                verdict.fail("top-ups", f"team {team.name}: '{action.reference}' reported done, ledger has {recorded}")
        if events:
            verdict.fail("top-ups", f"team {team.name}: top-ups nobody made: {sorted(events)}")
        if state.added - state.charged != state.balance:
            verdict.fail(
                "sum of charges",
                f"team {team.name}: added {state.added} - charged {state.charged} != balance {state.balance}",
            )
        row = snapshot.balances.get(team.name)
        if row != (state.balance, state.held):
            verdict.fail(
                "balances read model", f"team {team.name}: read model {row}, replay {(state.balance, state.held)}"
            )


def check_dead_holds(
    snapshot: Snapshot,
    attempts: list[Attempt],
    faults: list[Fault],
    verdict: Verdict,
) -> set[tuple[str, str]]:
    """Each kill: the holds and leases open at the moment of death that no live process used
    afterwards must be closed within 30 s. Returns those still open (team, id), not to count twice."""
    pid_of: dict[str, set[int]] = defaultdict(set)
    for attempt in attempts:
        if attempt.request_id:
            pid_of[attempt.request_id].add(attempt.pid)
    still_open: set[tuple[str, str]] = set()
    judged: set[tuple[str, str]] = set()  # holds an earlier kill already accounted for
    for kill in (f for f in faults if f.kind == KILL):
        dead, delays, lost, owned = kill.pid, [], 0, 0
        for team, events in snapshot.by_team().items():
            before = TeamReplay()
            for event in events:
                if event.at > kill.started:
                    break
                _apply(before, event)
            earlier = [e for e in events if e.at <= kill.started]
            after = [e for e in events if e.at > kill.started]
            for name, amount in before.open.items():
                if amount <= 0 or (team, name) in judged or _used_by_the_living(name, after, pid_of, dead):
                    continue  # an empty lease holds no money; a lease still in use is a live process's
                judged.add((team, name))
                owned += _owned_by(name, earlier, pid_of, dead)
                closed = next(
                    (
                        e
                        for e in after
                        if (e.kind == "HoldReleased" and e["request_id"] == name)
                        or (e.kind == "Charged" and not e.get("lease") and e["request_id"] == name)
                    ),
                    None,
                )
                if closed is None:
                    lost += 1
                    still_open.add((team, name))
                    verdict.fail(
                        "dead process's hold not released",
                        f"kill of pid {dead} at {kill.started:.3f}: team {team}'s {name} ({amount} "
                        f"micro-credits) is still held at the end, {snapshot_age(snapshot, kill):.0f} s later",
                    )
                    continue
                delay = closed.at - kill.started
                delays.append(delay)
                if delay > DEAD_RELEASE_SECONDS:
                    verdict.fail(
                        "dead process's hold released late",
                        f"kill of pid {dead} at {kill.started:.3f}: team {team}'s {name} ({amount}) "
                        f"released after {delay:.1f} s (event #{closed.position} {closed.kind})",
                    )
        slowest = f", the last after {max(delays):.1f} s" if delays else ""
        verdict.note(
            f"kill -9 of pid {dead} ({kill.streams} stream(s) delivering): {len(delays) + lost} holds and "
            f"leases open at its death that no live process used again ({owned} of them known to be its "
            f"own, the others idle leases of either); {len(delays)} released{slowest}; {lost} never"
        )
    return still_open


def snapshot_age(snapshot: Snapshot, kill: Fault) -> float:
    return (snapshot.events[-1].at if snapshot.events else kill.started) - kill.started


def _owned_by(name: str, earlier: list[LedgerEvent], pid_of: dict[str, set[int]], dead: int) -> int:
    """1 if the hold is known to be the dead process's: its own request's, or a lease it charged."""
    if dead in pid_of.get(name, set()):
        return 1
    return int(
        any(
            e.kind == "Charged" and e.get("lease") == name and dead in pid_of.get(e["request_id"], set())
            for e in earlier
        )
    )


def _used_by_the_living(name: str, after: list[LedgerEvent], pid_of: dict[str, set[int]], dead: int) -> bool:
    """A lease (or hold) that some other process went on using after the kill is not the dead one's."""
    for event in after:
        if event.kind == "CreditsLeased" and event["lease"] == name:
            return True
        if (
            event.kind == "Charged"
            and (event.get("lease") or event["request_id"]) == name
            and pid_of.get(event["request_id"], {dead}) - {dead}
        ):
            return True
    return False


def check_nothing_held(
    snapshot: Snapshot, replayed: dict[str, TeamReplay], reported: set[tuple[str, str]], verdict: Verdict
) -> None:
    for team, state in sorted(replayed.items()):
        left = {name: amount for name, amount in state.open.items() if (team, name) not in reported and amount}
        if left:
            verdict.fail(
                "still held at the end",
                f"team {team}: {left} (every request settled and idle leases returned long before)",
            )


def check_budgets(snapshot: Snapshot, teams: list[Team], verdict: Verdict) -> None:
    """No team with a daily budget was charged more than it in any UTC day (each charge's own ledger
    instant), however many gateways held its requests at once: the bound is 0. Reports how close
    each came."""
    import datetime as dt

    budgets = {team.name: team.budget for team in teams if team.budget}
    spent: dict[tuple[str, str], int] = defaultdict(int)
    for event in snapshot.of_kind("Charged"):
        if event.team in budgets:
            day = dt.datetime.fromtimestamp(event.at, dt.UTC).date().isoformat()
            spent[event.team, day] += int(event["charged"])
    for (name, day), total in sorted(spent.items()):
        if total > budgets[name]:
            verdict.fail(
                "budget overspent", f"team {name} was charged {total} on {day}, its daily budget {budgets[name]}"
            )
    if budgets:
        closest = max((total / budgets[name] for (name, _), total in spent.items()), default=0.0)
        verdict.note(
            f"budgets: {len(budgets)} teams with a daily budget, the fullest day at {closest:.0%} of it "
            "(the bound: 100 %, never more)"
        )
