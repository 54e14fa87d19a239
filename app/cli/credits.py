"""``tollgate credits``: a team's top-ups (each a lot of credit: its kind, expiry and priority),
corrections, and its lots with what each has left, in the order charges use them."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from app.cli.auto_recharge import add_auto_recharge_command
from app.cli.support import CommandError, add_reason_option, cli_actor, credits_amount, ledger_service, recorded_text
from app.settings_file import load_settings
from domain.credit_lot import DEFAULT_PRIORITY
from domain.credit_lots import KINDS, PAID, LotTerms
from domain.ledger_errors import InvalidAmount
from domain.money import AmountError, format_credits, micros_from_credits


def cmd_credits_add(args: argparse.Namespace) -> None:
    amount = credits_amount(args.amount)
    if amount == 0:
        raise CommandError("invalid credit amount: must be greater than 0")
    try:
        terms = LotTerms.parse(args.kind, args.expires or "", args.priority)
    except InvalidAmount as exc:
        raise CommandError(str(exc)) from None
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        team = ledger.top_up(
            args.team, amount, args.reference or "", actor=cli_actor(), reason=args.reason, terms=terms
        )
    print(f"Added {format_credits(amount)} credits to team {args.team}; balance {format_credits(team.balance)}.")


def cmd_credits_lots(args: argparse.Namespace) -> None:
    """The team's credit lots with something left, in the order charges draw them."""
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        funds = ledger.funds(args.team)
    print(f"{'LOT':<12} {'KIND':<12} {'PRIORITY':>8} {'AMOUNT':>14} {'REMAINING':>14}  EXPIRES")
    for lot in funds.lots:
        expires = datetime.fromtimestamp(lot.expires, UTC).isoformat() if lot.expires is not None else "never"
        amount = format_credits(lot.amount) if lot.amount else "-"
        line = f"{lot.lot_id:<12} {lot.kind:<12} {lot.priority:>8} {amount:>14} {format_credits(lot.remaining):>14}"
        print(f"{line}  {expires}")
    owed = f"; owed {format_credits(funds.owed)}" if funds.owed else ""
    print(f"balance {format_credits(funds.balance)}{owed}")


def cmd_credits_adjust(args: argparse.Namespace) -> None:
    """A correction of the balance, never an edit of history: credits given back (a refund) or
    taken, with the reason and the operator's reference kept in the ledger."""
    try:
        amount = micros_from_credits(args.amount)
    except AmountError as exc:
        raise CommandError(f"invalid credit amount: {exc}") from None
    if amount == 0:
        raise CommandError("invalid credit amount: an adjustment moves credits one way or the other (not 0)")
    if not args.reason.strip():
        raise CommandError("--reason: say why (it is kept in the ledger)")
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        team = ledger.adjust_credits(args.team, amount, args.reason, args.reference or "", actor=cli_actor())
    moved = "Gave back" if amount > 0 else "Took"
    print(
        f"{moved} {format_credits(abs(amount))} credits {'to' if amount > 0 else 'from'} team {args.team} "
        f"({args.reason}); balance {format_credits(team.balance)}."
    )


def add_credits_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """``credits add``, ``credits adjust`` and ``credits lots``."""
    credit = commands.add_parser("credits", help="credits").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    add = credit.add_parser("add", parents=[common], help="top up a team")
    add.add_argument("--team", required=True)
    add.add_argument("amount", help="credits to add (e.g. 50 or 0.25)")
    add.add_argument("--reference", type=recorded_text, help="a note kept with the top-up (invoice number, …)")
    add.add_argument("--kind", choices=KINDS, default=PAID, help="the lot's kind (default: paid)")
    add.add_argument("--expires", help="when the lot expires, ISO 8601 with a time zone (default: never)")
    add.add_argument("--priority", type=int, default=DEFAULT_PRIORITY, help="0-100: lower is used first (default: 50)")
    add_reason_option(add)
    add.set_defaults(func=cmd_credits_add)
    lots = credit.add_parser("lots", parents=[common], help="a team's credit lots, in the order they are used")
    lots.add_argument("--team", required=True)
    lots.set_defaults(func=cmd_credits_lots)
    adjust = credit.add_parser(
        "adjust", parents=[common], help="correct a team's balance (a refund, or credits taken back), with a reason"
    )
    adjust.add_argument("--team", required=True)
    adjust.add_argument("amount", help="credits to give back, or to take when negative (e.g. -- -5)")
    adjust.add_argument("--reason", required=True, type=recorded_text, help="why; kept in the ledger")
    adjust.add_argument(
        "--reference", type=recorded_text, help="the operator's reference (a ticket); one adjustment per reference"
    )
    adjust.set_defaults(func=cmd_credits_adjust)
    add_auto_recharge_command(credit, common)
