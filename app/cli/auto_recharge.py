"""``tollgate credits auto-recharge``: set, turn off or show a team's auto-recharge.

With ``--threshold``, ``--target`` and ``--monthly-cap`` (credits) it sets it; with ``--off`` it
turns it off (keeping its figures); with neither it shows it and its latest attempts. The team may
set its own with its key (``PUT /v1/credits/auto-recharge``); both are ledger events.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.support import CommandError, add_reason_option, cli_actor, credits_amount, ledger_service
from app.ledger.queries import recent_recharges
from app.settings_file import load_settings
from domain.auto_recharge import Recharge, RechargeSetting
from domain.ledger_errors import InvalidAmount
from domain.money import format_credits


def cmd_auto_recharge(args: argparse.Namespace) -> None:
    figures = (args.threshold, args.target, args.monthly_cap)
    if args.off and any(f is not None for f in figures):
        raise CommandError("--off takes no figures: it keeps the ones set")
    if not args.off and any(f is not None for f in figures) and None in figures:
        raise CommandError("auto-recharge needs --threshold, --target and --monthly-cap together")
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        if args.off or figures[0] is not None:
            threshold, target, cap = (0 if f is None else credits_amount(f) for f in figures)
            setting = RechargeSetting(threshold, target, cap, enabled=not args.off)
            try:
                recharge: Recharge | None = ledger.set_auto_recharge(
                    args.team, setting, actor=cli_actor(), reason=args.reason
                )
            except InvalidAmount as exc:
                raise CommandError(str(exc)) from None
        else:
            recharge = ledger.auto_recharge(args.team)
        attempts = recent_recharges(ledger.store, args.team)
    print(describe(args.team, recharge))
    for a in attempts:
        outcome = a["outcome"] or ("trying: " + a["last_error"] if a["last_error"] else "pending")
        print(f"  {a['occurred_at']}  {a['attempt']}  {format_credits(int(a['amount']))} credits  {outcome}")


def describe(team: str, recharge: Recharge | None) -> str:
    if recharge is None:
        return f"Team {team} has no auto-recharge."
    state = "on" if recharge.enabled else "off"
    line = (
        f"Auto-recharge of team {team} is {state}: under {format_credits(recharge.threshold)} credits available, "
        f"up to {format_credits(recharge.target)}, at most {format_credits(recharge.monthly_cap)} a month"
    )
    if recharge.failures:
        line += f"; {recharge.failures} failed in a row"
    if recharge.pending:
        line += f"; attempt {recharge.pending} pending"
    return line + "."


def add_auto_recharge_command(credit: Any, common: argparse.ArgumentParser) -> None:
    recharge = credit.add_parser(
        "auto-recharge", parents=[common], help="set, turn off or show a team's auto-recharge (its saved card)"
    )
    recharge.add_argument("--team", required=True)
    recharge.add_argument("--threshold", help="credits: a charge taking the available balance under it recharges")
    recharge.add_argument("--target", help="credits: what a recharge tops the available balance up to")
    recharge.add_argument("--monthly-cap", help="credits: the most recharged per UTC month")
    recharge.add_argument("--off", action="store_true", help="turn it off (its figures are kept)")
    add_reason_option(recharge)
    recharge.set_defaults(func=cmd_auto_recharge)
