"""``tollgate prices …``: the ledger's price list — apply the file's prices, show a model's history,
and adjust a team's prices.

A price is a fact in the ledger (``domain/prices.py``): ``apply`` compares the configuration file
with the price list and records each model whose price differs, from an instant that is never in the
past (by default a few seconds ahead, so that every gateway process has read it before it takes
effect; a charge is priced by the entry in force at its own instant). ``--dry-run`` says what would
be recorded and records nothing.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from app.cli.support import CommandError, cli_actor, ledger_service, ledger_store, recorded_text
from app.settings_file import load_settings
from domain.prices import PriceList
from domain.pricing import Price

#: A price applied without ``--effective-from`` takes effect this long after it is recorded: every
#: gateway process reads new prices within a quarter of a second (its projector's poll).
APPLY_AHEAD = timedelta(seconds=10)


def _instant(text: str | None, now: datetime) -> datetime:
    if text is None:
        return now + APPLY_AHEAD
    if text == "now":
        return now
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--effective-from: not an ISO 8601 instant: {text!r} (e.g. 2026-12-01T00:00:00Z)") from None
    if when.tzinfo is None:
        raise CommandError(f"--effective-from: say the time zone (e.g. {text}Z for UTC)")
    return when


def _flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)
    return out


def changes(old: Price | None, new: Price) -> list[str]:
    """What differs between two prices, rate by rate (``input 2.5 -> 3``)."""
    before = _flat(old.as_record()) if old is not None else {}
    after = _flat(new.as_record())
    out = []
    for key in sorted(before.keys() | after.keys()):
        was, now = before.get(key), after.get(key)
        if was is None or now is None or Decimal(was) != Decimal(now):
            out.append(f"{key} {was if was is not None else '-'} -> {now if now is not None else '-'}")
    return out


def cmd_prices_apply(args: argparse.Namespace) -> int:
    from app.store.store_errors import VersionConflict

    settings, _ = load_settings(args.config)
    planned: list[tuple[str, list[str]]] = []
    effective = datetime.now(UTC)
    with ledger_store(args.config) as store:
        for _ in range(5):
            prices = store.load_prices() or PriceList.start()
            now = datetime.now(UTC)
            effective = _instant(args.effective_from, now)
            planned = []
            for key, price in (priced for model in settings.models for priced in model.priced_keys()):
                latest = prices.history(key)[-1].price if prices.history(key) else None
                if latest != price:
                    planned.append((key, changes(latest, price)))
                    if not args.dry_run:
                        prices.set_price(
                            key,
                            price,
                            effective,
                            now,
                            args.reason or "tollgate prices apply",
                            actor=cli_actor(),
                        )
            if args.dry_run or not planned:
                break
            try:
                store.save_prices(prices)
                break
            except VersionConflict:  # another process recorded a price meanwhile: compare again
                continue
    if not planned:
        print("The ledger's price list already has the configuration's prices: nothing to record.")
        return 0
    verb = "Would record" if args.dry_run else "Recorded"
    for model_id, diff in planned:
        print(f"{verb} a price of {model_id}, in force from {effective.isoformat()}:")
        for line in diff:
            print(f"  {line}")
    if args.dry_run:
        print("Dry run: nothing was recorded.")
    return 0


def cmd_prices_history(args: argparse.Namespace) -> int:
    with ledger_store(args.config) as store:
        prices = store.load_prices()
    entries = prices.history(args.model) if prices is not None else []
    if not entries:
        raise CommandError(f"the ledger has no price of model {args.model!r}")
    now = datetime.now(UTC)
    current = prices.in_force(args.model, now) if prices is not None else None
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "ref": e.ref,
                        "effective_from": e.effective_from.isoformat(),
                        "recorded_at": e.recorded_at.isoformat(),
                        "reason": e.reason,
                        "actor": e.actor,
                        "in_force": current is not None and e.ref == current.ref,
                        "price": e.price.as_record(),
                    }
                    for e in entries
                ],
                indent=2,
            )
        )
        return 0
    previous: Price | None = None
    for entry in entries:
        state = (
            "in force"
            if current is not None and entry.ref == current.ref
            else "scheduled"
            if entry.effective_from > now
            else "superseded"
        )
        print(
            f"{entry.ref}  from {entry.effective_from.isoformat()}  ({state}; recorded "
            f"{entry.recorded_at.isoformat()}{' by ' + entry.actor if entry.actor else ''}: {entry.reason})"
        )
        for line in changes(previous, entry.price):
            print(f"  {line}")
        previous = entry.price
    return 0


def cmd_prices_adjust(args: argparse.Namespace) -> int:
    try:
        percent = Decimal(args.percent)
    except InvalidOperation:
        raise CommandError(f"--percent: not a number: {args.percent!r}") from None
    settings, base = load_settings(args.config)
    if args.model and settings.model(args.model) is None:
        raise CommandError(f"no model {args.model!r} in the configuration")
    with ledger_service(settings, base) as ledger:
        adjustments = ledger.adjust_prices(args.team, percent, args.model or "", args.reason or "", actor=cli_actor())
    shown = ", ".join(f"{p} % on {m or 'every model'}" for m, p in sorted(adjustments.items())) or "none"
    print(f"Team {args.team}'s price adjustments: {shown}.")
    return 0


def add_prices_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    prices = commands.add_parser("prices", help="the ledger's price list").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    apply = prices.add_parser(
        "apply", parents=[common], help="record the configuration's prices where they differ from the price list"
    )
    apply.add_argument("--dry-run", action="store_true", help="say what would be recorded; record nothing")
    apply.add_argument(
        "--effective-from",
        help="when the new prices take effect: an ISO 8601 instant, or 'now' "
        f"(default: {int(APPLY_AHEAD.total_seconds())} seconds from now)",
    )
    apply.add_argument("--reason", type=recorded_text, help="kept in the ledger with each price")
    apply.set_defaults(func=cmd_prices_apply)
    history = prices.add_parser("history", parents=[common], help="every price a model has had, and when")
    history.add_argument("model")
    history.add_argument("--json", action="store_true")
    history.set_defaults(func=cmd_prices_history)
    adjust = prices.add_parser(
        "adjust",
        parents=[common],
        help="price a team's requests some percent above (markup) or below (discount) the list",
    )
    adjust.add_argument("--team", required=True)
    adjust.add_argument("--percent", required=True, help="e.g. 15 (a markup), -10 (a discount), 0 (none)")
    adjust.add_argument("--model", help="only this model (default: every model without its own adjustment)")
    adjust.add_argument("--reason", type=recorded_text, help="kept in the ledger")
    adjust.set_defaults(func=cmd_prices_adjust)
