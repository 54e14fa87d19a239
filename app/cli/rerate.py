"""``tollgate ledger rerate``: a team's charges over a period priced again at another price list.

It reports what the charges cost as recorded, what they come to at the price list ``--prices`` names
(a file of ``[[models]]`` with their ``pricing``, such as a configuration file), and the difference
per model and key; history is never changed. ``--apply`` records each difference as an adjustment
(a refund where the team paid too much, a debit where it paid too little, as far as its available
balance goes), under a reference that names the period and the price list, so it is made once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from app.cli.support import CommandError, cli_actor, ledger_service, load_settings
from domain.money import format_credits
from domain.settings import parse_price_list


def _bound(text: str, *, end: bool) -> datetime:
    """A period's bound: a date is its day's start (an end date: the next day's start, so the day is
    in the period); an instant is itself (an end instant is not in the period)."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text) + (timedelta(days=1) if end else timedelta())
            return datetime.combine(day, time(), UTC)
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"not a date or an ISO 8601 instant: {text!r} (e.g. 2026-11-01)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def cmd_ledger_rerate(args: argparse.Namespace) -> int:
    from projections.rerate import rerate

    start, end = _bound(args.start, end=False), _bound(args.end, end=True)
    if end <= start:
        raise CommandError("--to must come after --from")
    path = Path(args.prices)
    try:
        text = path.read_text()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    prices = parse_price_list(text, str(path))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        ledger.team_summary(args.team)  # an unknown team is refused here, as every command refuses it
        report = rerate(ledger.store, args.team, start, end, prices)
        corrections = [(line.difference, (f"re-rated {start.isoformat()} to {end.isoformat()} at {path.name} "
                                           f"({line.model}, {line.key_id})"),
                        f"rerate:{digest}:{start.isoformat()}:{end.isoformat()}:{line.model}:{line.key_id}")
                       for line in report.lines.values() if line.difference]
        moved = ledger.correct(args.team, corrections, actor=cli_actor()) if args.apply and corrections else []
    if args.json:
        print(json.dumps(_as_json(report, moved), indent=2))
        return 0
    print(f"Team {args.team}: charges from {start.isoformat()} to {end.isoformat()} (not included), "
          f"re-rated at {path} (sha256 {digest}…); history unchanged.")
    print(f"{'model':<24} {'key':<18} {'charges':>8} {'recorded':>16} {'re-rated':>16} {'difference':>16}")
    for line in report.lines.values():
        print(f"{line.model:<24} {line.key_id:<18} {line.charges:>8} {format_credits(line.recorded):>16} "
              f"{format_credits(line.rerated):>16} {format_credits(line.rerated - line.recorded):>16}")
    print(f"{'total':<43} {sum(x.charges for x in report.lines.values()):>8} {format_credits(report.recorded):>16} "
          f"{format_credits(report.rerated):>16} {format_credits(report.rerated - report.recorded):>16}")
    for model, count in report.unpriced.items():
        print(f"({count} charge(s) of {model} left out: the price list has no price for it)")
    if moved:
        print(f"Recorded {len(moved)} adjustment(s): {format_credits(sum(moved))} credits to the team.")
        short = sum(c[0] for c in corrections) - sum(moved)
        if short:
            print(f"{format_credits(-short)} credits could not be taken: the team's available balance did not "
                  "cover it.")
    elif args.apply:
        print("Nothing to adjust: the price list gives the charges their recorded costs.")
    return 0


def _as_json(report: Any, moved: list[int]) -> dict[str, Any]:
    return {"team": report.team, "from": report.start.isoformat(), "to": report.end.isoformat(),
            "recorded_micros": report.recorded, "rerated_micros": report.rerated,
            "lines": [{"model": x.model, "key_id": x.key_id, "charges": x.charges, "recorded_micros": x.recorded,
                       "rerated_micros": x.rerated, "difference_micros": x.rerated - x.recorded}
                      for x in report.lines.values()],
            "unpriced": report.unpriced, "adjusted_micros": moved}


def add_rerate_command(ledger: Any, common: argparse.ArgumentParser) -> None:
    parser = ledger.add_parser("rerate", parents=[common],
                               help="price a team's charges over a period at another price list (history unchanged)")
    parser.add_argument("--team", required=True)
    parser.add_argument("--from", dest="start", required=True, help="first day (2026-11-01) or instant of the period")
    parser.add_argument("--to", dest="end", required=True, help="last day of the period (included), or an instant")
    parser.add_argument("--prices", required=True, help="a file of [[models]] with id and pricing (a config works)")
    parser.add_argument("--apply", action="store_true", help="record each difference as an adjustment of the team")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=cmd_ledger_rerate)
