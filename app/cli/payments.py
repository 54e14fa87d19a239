"""``tollgate payments reconcile --since DAY [--apply]``: the ledger's top-ups against Stripe's list.

Prints each difference (a payment the ledger never credited, refunds not all taken back, more taken
back than Stripe refunded) with its team, Stripe ids and micro-credits, then a count. Exit 0 when
there is none (or ``--apply`` recorded every one it can), 1 when any is left.
"""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime
from typing import Any

from app.cli.support import CommandError, ledger_service
from app.settings_file import load_settings
from domain.money import format_credits


def cmd_payments_reconcile(args: argparse.Namespace) -> int:
    from app.payments.reconcile import apply, differences
    from app.payments.stripe_account import StripeAccount

    settings, base = load_settings(args.config)
    if settings.payments is None:
        raise CommandError("this configuration takes no payments (no [payments] table): nothing to reconcile")
    try:
        since = datetime.combine(date.fromisoformat(args.since), datetime.min.time(), UTC)
    except ValueError:
        raise CommandError(f"--since must be a day, YYYY-MM-DD; got {args.since!r}") from None
    import stripe

    account = StripeAccount(settings.payments, settings.credits_per_usd)
    left = 0
    try:
        with ledger_service(settings, base) as ledger:
            try:
                found = differences(account, ledger, since)
            except stripe.StripeError as exc:
                raise CommandError(f"Stripe did not answer the list of payments: {exc}") from None
            for difference in found:
                paid = difference.payment
                recorded = args.apply and apply(ledger, difference)
                left += 0 if recorded else 1
                print(
                    f"{'recorded' if recorded else 'differs'}: team {paid.team}: {difference.kind}: "
                    f"{paid.payment_intent} (charge {paid.charge or '-'}) {format_credits(difference.micros)} credits"
                )
    finally:
        account.close()
    print(f"{len(found)} difference(s) since {since.date().isoformat()}; {left} left")
    return 1 if left else 0


def add_payments_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """``payments reconcile``."""
    payments = commands.add_parser("payments", help="payments taken through Stripe").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    reconcile = payments.add_parser(
        "reconcile", parents=[common], help="compare the ledger's top-ups with Stripe's list of succeeded payments"
    )
    reconcile.add_argument("--since", required=True, help="the first day to compare (UTC), YYYY-MM-DD")
    reconcile.add_argument("--apply", action="store_true", help="record what the webhooks would have recorded")
    reconcile.set_defaults(func=cmd_payments_reconcile)
