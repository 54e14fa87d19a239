"""``tollgate ledger rerate``: a team's charges over a period priced again at another price list.

It reports what the charges cost as recorded, what they collected (cost less what was left
uncollected), what they come to at the price list ``--prices`` names (a file of ``[[models]]`` with
their ``pricing``, such as a configuration file), and the adjustment per model and key; history is
never changed. ``--apply`` records the re-rate and its adjustments (a refund of what a charge
collected beyond its new cost, a debit where it paid too little, as far as the available balance
goes), once: a re-rate is named by its content (the period in UTC, the prices as they bill), and one
that overlaps an applied re-rate of the same model is refused (``domain/rerates.py``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.support import CommandError, add_reason_option, cli_actor, ledger_service
from app.settings_file import UnreadableFile, load_settings, read_text_file
from domain.money import format_credits
from domain.price_list import parse_price_list
from domain.pricing import Price
from domain.rerates import RerateRaced, RerateScope, overlapping, scope_of

if TYPE_CHECKING:
    from app.ledger.service import LedgerService
    from projections.rerate import RerateReport

#: How often a re-rate is computed again when the team's ledger moved while it was computed.
ATTEMPTS = 5


def _bound(text: str, *, end: bool) -> datetime:
    """A period's bound, in UTC: a date is its day's start (an end date: the next day's start, so the
    day is in the period); an instant is itself (an end instant is not in the period), UTC unless it
    says its offset."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text) + (timedelta(days=1) if end else timedelta())
            return datetime.combine(day, time(), UTC)
        when = datetime.fromisoformat(text)
        return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).astimezone(UTC)
    except ValueError:
        raise CommandError(f"not a date or an ISO 8601 instant: {text!r} (e.g. 2026-11-01)") from None
    except OverflowError:  # in UTC, or as the end of its day, it falls outside the years 1 to 9999
        raise CommandError(
            f"{text!r} bounds no period: in UTC, or as the end of its day, it is outside the years 1 to 9999"
        ) from None


@dataclass(frozen=True, slots=True)
class Rerated:
    """What a re-rate came to: the report, the re-rate it names, an applied one it overlaps (reference
    and record) if any, and what each of its adjustments moved (nothing unless applied)."""

    report: RerateReport
    scope: RerateScope
    earlier: tuple[str, Mapping[str, Any]] | None
    moved: list[int]


def cmd_ledger_rerate(args: argparse.Namespace) -> int:
    start, end = _bound(args.start, end=False), _bound(args.end, end=True)
    if end <= start:
        raise CommandError("--to must come after --from")
    path = Path(args.prices)
    try:
        text = read_text_file(path)
    except UnreadableFile as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None
    prices = parse_price_list(text, str(path))
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        ledger.team_summary(args.team)  # an unknown team is refused here, as every command refuses it
        done = _rerate(ledger, args, start, end, prices)
    if args.json:
        print(json.dumps(_as_json(done), indent=2))
    else:
        _print(args, path, done)
    return 0


def _rerate(
    ledger: LedgerService, args: argparse.Namespace, start: datetime, end: datetime, prices: Mapping[str, Price]
) -> Rerated:
    """The re-rate of the team's charges, recorded if ``--apply`` says so; computed again if the team's
    ledger moved while it was (a charge could still have come in the period)."""
    from projections.rerate import rerate

    for attempt in range(ATTEMPTS):
        report = rerate(ledger.store, args.team, start, end, prices)
        scope = scope_of(start, end, prices, {line.model for line in report.lines.values()})
        earlier = overlapping(ledger.rerates(args.team), scope) if scope.models else None
        if not args.apply:
            return Rerated(report, scope, earlier, [])
        lines = [(line.model, line.key_id, line.adjustment) for line in report.lines.values()]
        try:
            moved = ledger.apply_rerate(
                args.team,
                scope,
                lines,
                actor=cli_actor(),
                reason=args.reason,
                through_version=None if report.complete else report.through_version,
            )
        except RerateRaced:
            if attempt == ATTEMPTS - 1:
                raise
            continue
        return Rerated(report, scope, earlier, moved)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _print(args: argparse.Namespace, path: Path, done: Rerated) -> None:
    report, scope, moved = done.report, done.scope, done.moved
    print(
        f"Team {args.team}: charges from {report.start.isoformat()} to {report.end.isoformat()} (not included), "
        f"re-rated at {path} ({scope.reference}); history unchanged."
    )
    print(
        f"{'model':<24} {'key':<18} {'charges':>8} {'recorded':>14} {'collected':>14} {'re-rated':>14} "
        f"{'adjustment':>14}"
    )
    for line in report.lines.values():
        print(
            f"{line.model:<24} {line.key_id:<18} {line.charges:>8} {format_credits(line.recorded):>14} "
            f"{format_credits(line.collected):>14} {format_credits(line.rerated):>14} "
            f"{format_credits(line.adjustment):>14}"
        )
    print(
        f"{'total':<43} {sum(x.charges for x in report.lines.values()):>8} {format_credits(report.recorded):>14} "
        f"{format_credits(report.collected):>14} {format_credits(report.rerated):>14} "
        f"{format_credits(report.adjustment):>14}"
    )
    for model, count in report.unpriced.items():
        print(f"({count} charge(s) of {model} left out: the price list has no price for it)")
    if done.earlier is not None and not args.apply:
        reference, record = done.earlier
        print(
            f"Already re-rated: {', '.join(record['models'])} from {record['from']} to {record['to']} ({reference}); "
            "--apply would be refused (re-rates of a model may not overlap)."
        )
    if any(moved):
        print(
            f"Recorded re-rate {scope.reference}: {sum(1 for m in moved if m)} adjustment(s), "
            f"{format_credits(sum(moved))} credits to the team."
        )
        short = report.adjustment - sum(moved)
        if short:
            print(
                f"{format_credits(-short)} credits could not be taken: the team's available balance did not cover it."
            )
    elif args.apply:
        print("Nothing to adjust: at this price list the charges collected what they owed.")


def _as_json(done: Rerated) -> dict[str, Any]:
    report, earlier = done.report, done.earlier
    return {
        "team": report.team,
        "from": report.start.isoformat(),
        "to": report.end.isoformat(),
        "reference": done.scope.reference,
        "recorded_micros": report.recorded,
        "collected_micros": report.collected,
        "rerated_micros": report.rerated,
        "adjustment_micros": report.adjustment,
        "lines": [
            {
                "model": x.model,
                "key_id": x.key_id,
                "charges": x.charges,
                "recorded_micros": x.recorded,
                "collected_micros": x.collected,
                "rerated_micros": x.rerated,
                "difference_micros": x.rerated - x.recorded,
                "adjustment_micros": x.adjustment,
            }
            for x in report.lines.values()
        ],
        "unpriced": report.unpriced,
        "adjusted_micros": done.moved,
        "earlier": {"reference": earlier[0], **earlier[1]} if earlier is not None else None,
    }


def add_rerate_command(ledger: Any, common: argparse.ArgumentParser) -> None:
    parser = ledger.add_parser(
        "rerate",
        parents=[common],
        help="price a team's charges over a period at another price list (history unchanged)",
    )
    parser.add_argument("--team", required=True)
    parser.add_argument("--from", dest="start", required=True, help="first day (2026-11-01) or instant of the period")
    parser.add_argument("--to", dest="end", required=True, help="last day of the period (included), or an instant")
    parser.add_argument("--prices", required=True, help="a file of [[models]] with id and pricing (a config works)")
    parser.add_argument(
        "--apply",
        action="store_true",
        help="record the re-rate and its adjustments (once: an overlapping re-rate is refused)",
    )
    parser.add_argument("--json", action="store_true")
    add_reason_option(parser)
    parser.set_defaults(func=cmd_ledger_rerate)
