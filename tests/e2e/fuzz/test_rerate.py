"""Generated ``tollgate ledger rerate`` inputs (tests/support/fuzz/rerates.py) on a team with charges
in two batches: ``--from`` and ``--to`` spelled every way, price files written every way, with and
without ``--apply``.

Never a traceback: a report (``--json``) or a clear error (``tollgate: error: …``, exit 1 or 2). With
``--apply``, the balance moves by exactly what the report says it adjusted, and the same re-rate run
again right after — as it was written, then respelled (its bounds at another offset, its prices file
with a comment) — moves nothing (a re-rate is named by its content, and applied once); without it,
nothing moves. Whatever was applied, no refund exceeds what was collected: the team's balance
never rises above what it was given (and a debit never takes it below 0). Every case leaves the
audit history projection able to keep up (tests/support/fuzz/projection.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import strategies as st

from tests.support import plain_http
from tests.support.fuzz.harness import Ledger, Run, fuzz
from tests.support.fuzz.rerates import REASONS, Moments, bound, price_files, respelled
from tests.support.fuzz.served import headers_for
from tests.support.gateway import Gateway
from tests.support.teams import Teams

GIVEN = Decimal(100)
PLUS_ONE = timezone(timedelta(hours=1))
HALF = b'[[models]]\nid = "fake-gpt"\npricing = {input = 1.25, output = 5, cache_create = 1.5625, cache_hit = 0.625}\n'


@dataclass(frozen=True)
class Charged:
    """A team given ``GIVEN`` credits, charged in two batches around ``moments.middle``."""

    name: str
    moments: Moments


def _requests(gateway: Gateway, key: str, count: int) -> None:
    for i in range(count):
        answer = plain_http.post(
            gateway.root_url + "/v1/chat/completions",
            headers=headers_for("chat", key),
            json={"model": "fake-gpt", "messages": [{"role": "user", "content": f"price me {i}"}]},
        )
        assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def charged(fuzz_gateway: Gateway) -> Charged:
    teams = Teams(fuzz_gateway.config)
    try:
        team = teams.open(str(GIVEN))
    finally:
        teams.close()
    start = datetime.now(UTC) - timedelta(seconds=0.5)
    _requests(fuzz_gateway, team.key, 3)
    time.sleep(0.3)
    middle = datetime.now(UTC)
    time.sleep(0.3)
    _requests(fuzz_gateway, team.key, 3)
    end = datetime.now(UTC) + timedelta(seconds=0.2)
    fuzz_gateway.wait_until_nothing_held(team.name)
    time.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds()) + 0.05)  # only a period that has ended applies
    return Charged(team.name, Moments(start, middle, end))


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    moved: Decimal  # how far the team's balance moved, in credits


def _run(gateway: Gateway, ledger: Ledger, args: list[str]) -> Outcome:
    before = ledger.now()[0]
    done = gateway.cli(*args, check=False)
    return Outcome(done.returncode, done.stdout, done.stderr, ledger.now()[0] - before)


def _args(team: str, start: str, end: str, prices: Path, apply: bool, reason: str | None) -> list[str]:
    return [
        "ledger",
        "rerate",
        "--team",
        team,
        f"--from={start}",
        f"--to={end}",
        "--prices",
        str(prices),
        "--json",
        *(["--apply"] if apply else []),
        *([f"--reason={reason}"] if reason else []),
    ]


def problem_of(outcome: Outcome, apply: bool) -> str | None:
    """What is wrong with one run of the command, or None."""
    code, out, err = outcome.code, outcome.out, outcome.err
    if "Traceback" in out + err:
        return f"a traceback: {(out + err).strip().splitlines()[-1][:150]}"
    if code != 0:
        clear = err.startswith("tollgate: error: ") or (code == 2 and err.startswith("usage: ") and ": error: " in err)
        if code not in (1, 2) or not clear:  # the command's error line, or argparse's (an option it refused)
            return f"exit {code} without a clear error: {err.strip()[:150]!r}"
        return f"refused (exit {code}), and the balance moved by {outcome.moved}" if outcome.moved else None
    try:
        report = json.loads(out)
        adjusted = Decimal(sum(report["adjusted_micros"])) / 1_000_000
        refund, collected = int(report["adjustment_micros"]), int(report["collected_micros"])
    except (ValueError, KeyError, TypeError):
        return f"exit 0 without a report of its figures (README, Prices: --json): {out[:100]!r}"
    if refund > collected:
        return f"a refund of {refund} beyond the {collected} collected"
    if outcome.moved != adjusted or (adjusted and not apply):
        return f"the balance moved by {outcome.moved} for adjustments of {adjusted}{'' if apply else ' (a preview)'}"
    return None


def test_no_rerate_input_crashes_the_command_or_moves_money_twice(
    fuzz_gateway: Gateway, charged: Charged, run: Run, tmp_path: Path
):
    ledger = Ledger(fuzz_gateway, charged.name)
    prices = tmp_path / "prices.toml"

    def one(start: str, end: str, file: bytes, apply: bool, reason: str | None) -> None:
        route = f"ledger rerate{' --apply' if apply else ''}"
        args = _args(charged.name, start, end, prices, apply, reason)
        shown = json.dumps(args[3:]).encode() + b"\n" + file
        run.case()
        prices.write_bytes(file)
        outcomes = [_run(fuzz_gateway, ledger, args)]
        if apply and outcomes[0].code == 0:  # the same re-rate again: as it was written, then respelled
            outcomes.append(_run(fuzz_gateway, ledger, args))
            prices.write_bytes(b"# the same prices, respelled\n" + file)
            outcomes.append(
                _run(fuzz_gateway, ledger, _args(charged.name, respelled(start), respelled(end), prices, apply, reason))
            )
        run.done(route, shown)
        for outcome in outcomes:
            problem = problem_of(outcome, apply)
            if problem is not None:
                run.tally.fail("cli", route, outcome.code, problem, shown)
        if any(again.moved for again in outcomes[1:]):
            run.tally.fail(
                "balance",
                route,
                outcomes[0].code,
                f"the same re-rate, applied again, moved {' then '.join(str(again.moved) for again in outcomes[1:])}",
                shown,
            )
        balance = ledger.now()[0]
        if not 0 <= balance <= GIVEN:
            run.tally.fail(
                "balance",
                route,
                outcomes[0].code,
                f"the balance is {balance}: refunds beyond what was collected, or a debit below 0",
                shown,
            )

    with ledger:  # its client closed once the cases are run
        moments = charged.moments
        fuzz(
            one,
            start=bound(moments),
            end=bound(moments),
            file=price_files(),
            apply=st.booleans(),
            reason=REASONS,
            explicit=[
                {
                    "start": moments.start.isoformat(),
                    "end": moments.middle.isoformat(),
                    "file": HALF,
                    "apply": True,
                    "reason": None,
                },
                {
                    "start": moments.start.astimezone(PLUS_ONE).isoformat(),  # the same period, at +01:00
                    "end": moments.middle.astimezone(PLUS_ONE).isoformat(),
                    "file": HALF,
                    "apply": True,
                    "reason": None,
                },
                {"start": "9999-12-31", "end": "9999-12-31", "file": HALF, "apply": False, "reason": None},
                {
                    "start": moments.start.isoformat(),
                    "end": moments.end.isoformat(),
                    "file": b"\xff" + HALF,
                    "apply": False,
                    "reason": None,
                },
            ],
        )
    run.check()
