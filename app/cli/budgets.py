"""``tollgate key budget`` and ``tollgate team budget``: how much a key, or a whole team, may spend
per UTC day, week or month (or in all), and where that stands now.

A budget is a ledger event like a top-up; the gateway holds every request of the key (or team)
against what the budget has left, so it cannot be overspent, and the period resets because the
charges' own timestamps fall in a new one.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.support import CommandError, cli_actor, credits_amount, ledger_service, recorded_text
from app.ledger.results import BudgetSummary
from app.settings_file import load_settings
from domain.budgets import PERIODS, parse_period
from domain.money import format_credits


def _period(text: str) -> str:
    try:
        return parse_period(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def described(budget: BudgetSummary | None) -> str:
    """A budget in a line: its limit, what is spent, held and left, and when it resets."""
    if budget is None:
        return "no budget"
    per = "in all" if budget.period == "none" else f"per {budget.period}"
    resets = f", resets {budget.resets_at.isoformat()}" if budget.resets_at else ""
    return (
        f"{format_credits(budget.limit)} credits {per}: {format_credits(budget.spent)} spent, "
        f"{format_credits(budget.held)} held, {format_credits(budget.left)} left{resets}"
    )


def cmd_budget(args: argparse.Namespace) -> None:
    """Set, lift (``--clear``) or show (neither) a key's or a team's budget."""
    team, key_id = (args.team, args.key_id) if args.command == "key" else (args.name, "")
    if args.clear and args.credits is not None:
        raise CommandError("give --credits or --clear, not both")
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        if args.credits is None and not args.clear:
            budget = ledger.budget(team, key_id)
        else:
            limit = None if args.clear else credits_amount(args.credits)
            budget = ledger.set_budget(team, limit, args.period, key_id, actor=cli_actor(), reason=args.reason or "")
    whose = f"Key {key_id} of team {team}" if key_id else f"Team {team}"
    print(f"{whose}: {described(budget)}.")


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--credits", help="the most it may spend per period, in credits (e.g. 50 or 12.5)")
    parser.add_argument(
        "--period",
        type=_period,
        default="month",
        help=f"{', '.join(PERIODS)} (UTC calendar periods; none: in all); default month",
    )
    parser.add_argument("--clear", action="store_true", help="lift the budget")
    parser.add_argument("--reason", type=recorded_text, help="kept in the ledger")
    parser.set_defaults(func=cmd_budget)


def add_key_budget_command(key: Any, common: argparse.ArgumentParser) -> None:
    budget = key.add_parser(
        "budget", parents=[common], help="set (--credits, --period), lift (--clear) or show a key's spending budget"
    )
    budget.add_argument("--team", required=True)
    budget.add_argument("key_id")
    _add_options(budget)


def add_team_budget_command(team: Any, common: argparse.ArgumentParser) -> None:
    budget = team.add_parser(
        "budget", parents=[common], help="set (--credits, --period), lift (--clear) or show a team's spending budget"
    )
    budget.add_argument("name")
    _add_options(budget)
