"""``tollgate ledger balance --team T [--at TIME]``: a team's balance now, or as it was at an instant."""

from __future__ import annotations

import argparse
import json

from app.cli.support import CommandError, ledger_store


def cmd_ledger_balance(args: argparse.Namespace) -> None:
    from app.ledger.balance_at import balance_at, parse_instant
    from domain.money import credits_from_micros, format_credits

    try:
        at = parse_instant(args.at) if args.at is not None else None
    except ValueError:
        raise CommandError(
            f"invalid --at {args.at!r}: expected an ISO 8601 date or time, e.g. 2026-11-20T12:00:00Z"
        ) from None
    with ledger_store(args.config) as store:
        found = balance_at(store, args.team, at)
    when = found.at.isoformat() if found.at is not None else "now"
    if args.json:
        print(
            json.dumps(
                {
                    "team": found.team,
                    "at": found.at.isoformat() if found.at is not None else None,
                    "balance": str(credits_from_micros(found.balance)),
                    "held": str(credits_from_micros(found.held)),
                    "available": str(credits_from_micros(found.balance - found.held)),
                    "balance_micros": found.balance,
                    "held_micros": found.held,
                    "version": found.version,
                    "last_event": {
                        "version": found.version,
                        "type": found.event,
                        "occurred_at": found.occurred_at.isoformat(),
                        "request_id": found.request_id,
                    },
                }
            )
        )
        return
    print(
        f"Team {found.team} at {when}: balance {format_credits(found.balance)} credits, "
        f"held {format_credits(found.held)}, available {format_credits(found.balance - found.held)}."
    )
    about = f" (request {found.request_id})" if found.request_id else ""
    print(f"Last event by then: #{found.version} {found.event} at {found.occurred_at.isoformat()}{about}.")


def add_balance_command(
    ledger: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    balance = ledger.add_parser(
        "balance", parents=[common], help="a team's balance and held credit now, or as they were at an instant (--at)"
    )
    balance.add_argument("--team", required=True)
    balance.add_argument(
        "--at", help="an ISO 8601 date or time, UTC unless it says otherwise, e.g. 2026-11-20T12:00:00Z"
    )
    balance.add_argument("--json", action="store_true", help="one JSON object (amounts as exact decimal strings)")
    balance.set_defaults(func=cmd_ledger_balance)
