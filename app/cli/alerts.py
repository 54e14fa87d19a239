"""``tollgate alert``: the thresholds a team is alerted at, and the alerts raised.

``set`` and ``clear`` record a threshold (a ledger event, like a top-up); the ledger raises an alert
in the very charge that crosses one, and every gateway process delivers it to the configured
webhooks from the outbox (``app/alerts/webhooks.py``). ``list`` shows both, with each alert's
deliveries.
"""

from __future__ import annotations

import argparse
import json
from decimal import Decimal, InvalidOperation
from typing import Any

from app.cli.support import CommandError, cli_actor, credits_amount, ledger_service, ledger_store, recorded_text
from app.ledger.queries import recent_alerts
from app.ledger.results import AlertSetting
from app.settings_file import load_settings
from domain.alerts import BALANCE_BELOW, BUDGET_PERCENT, Threshold
from domain.money import format_credits


def shown(t: Threshold) -> str:
    whose = f"key {t.key_id}" if t.key_id else "team"
    if t.kind == BUDGET_PERCENT:
        return f"{whose}: budget reaches {t.value} %"
    return f"{whose}: balance below {format_credits(int(t.value))} credits"


def _threshold(args: argparse.Namespace) -> tuple[str, Decimal]:
    if (args.budget_percent is None) == (args.balance_below is None):
        raise CommandError("give one of --budget-percent P or --balance-below CREDITS")
    if args.balance_below is not None:
        return BALANCE_BELOW, Decimal(credits_amount(args.balance_below))
    try:
        return BUDGET_PERCENT, Decimal(args.budget_percent)
    except InvalidOperation:
        raise CommandError(f"not a percentage: {args.budget_percent!r}") from None


def cmd_alert_set(args: argparse.Namespace) -> None:
    kind, value = _threshold(args)
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        alert = AlertSetting(kind, value, args.key or "", enabled=args.action == "set")
        thresholds = ledger.set_alert(args.team, alert, actor=cli_actor(), reason=args.reason or "")
    print(f"Team {args.team} is alerted when: " + ("; ".join(shown(t) for t in thresholds) or "never") + ".")


def cmd_alert_list(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        thresholds = ledger.alert_thresholds(args.team)
    with ledger_store(args.config) as store:
        alerts = recent_alerts(store, args.team, args.limit)
    if args.json:
        print(json.dumps({"thresholds": [t.as_record() for t in thresholds], "alerts": alerts}, default=str))
        return
    for t in thresholds:
        print(f"threshold  {shown(t)}")
    for a in alerts:
        print(f"{a['occurred_at']}  {a['alert_id']}  {_raised(a)}  {_delivered(a['deliveries'])}")


def _raised(alert: dict[str, Any]) -> str:
    whose = f"key {alert['key_id']}" if alert["key_id"] else "team"
    if alert["kind"] == BUDGET_PERCENT:
        return (
            f"{whose} reached {alert['threshold']} % of its budget: {format_credits(int(alert['value']))} of "
            f"{format_credits(int(alert['budget_limit']))} credits in {alert['period']}"
        )
    return f"balance {format_credits(int(alert['value']))} credits, under {format_credits(int(alert['threshold']))}"


def _delivered(deliveries: list[dict[str, Any]]) -> str:
    if not deliveries:
        return "(not sent yet)"
    return ", ".join(
        f"{d['url']}: " + ("delivered" if d["delivered_at"] else f"retrying ({d['last_error']})") for d in deliveries
    )


def add_alert_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    alert = commands.add_parser("alert", help="alert thresholds and the alerts raised").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    for action, text in (
        ("set", "alert when a budget reaches a share or the balance falls under an amount"),
        ("clear", "stop alerting at a threshold"),
    ):
        parser = alert.add_parser(action, parents=[common], help=text)
        parser.add_argument("--team", required=True)
        parser.add_argument("--key", help="a key's budget (default: the team's)")
        parser.add_argument("--budget-percent", help="a share of the budget, e.g. 80")
        parser.add_argument("--balance-below", help="an amount of credits (the team's balance)")
        parser.add_argument("--reason", type=recorded_text, help="kept in the ledger")
        parser.set_defaults(func=cmd_alert_set)
    listing = alert.add_parser("list", parents=[common], help="a team's thresholds and latest alerts")
    listing.add_argument("--team", required=True)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_alert_list)
