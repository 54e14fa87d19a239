"""``tollgate usage --team T --by tag:project|user [--since DAY] [--format table|json|csv] [--page N] [--per-page N]``.

A team's usage by the values of one tag, or by end user, from the usage projection (caught up
first): requests, tokens and cost per value, the charges without that tag (or with no end user)
under ``(none)``, so that the costs add up to the team's charges exactly (``domain/attribution.py``).
The same numbers as ``GET /admin/teams/{name}/usage?by=…`` (``app/ledger/queries.py``: ``usage_by``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.cli.support import CommandError, ledger_store, out_of_bounds
from app.spreadsheet_csv import CsvWriter
from domain.attribution import NONE_SHOWN, AttributionError, dimension_of
from domain.attribution_bounds import OTHER_SHOWN
from domain.ledger_errors import TeamNotFound
from domain.money import format_credits

_COUNTS = ("requests", "input_tokens", "output_tokens", "cache_write_tokens", "cache_hit_tokens")


def cmd_usage(args: argparse.Namespace) -> None:
    from app.ledger.queries import MAX_USAGE_PER_PAGE, usage_by
    from app.paging import OutOfBounds, check_page, check_since

    try:
        dimension = dimension_of(args.by)
        check_since(args.since)
        check_page(args.page, args.per_page, MAX_USAGE_PER_PAGE)
    except AttributionError as exc:
        raise CommandError(f"--by: {exc}") from None
    except OutOfBounds as exc:
        raise out_of_bounds(exc) from None
    with ledger_store(args.config) as store:
        if not store.read_models.read_rows("SELECT team_name FROM team_balances WHERE team_name = {p}", (args.team,)):
            raise TeamNotFound(args.team)
        answer = usage_by(store, args.team, dimension, args.since, args.page, args.per_page)
    rows: list[dict[str, Any]] = answer["data"]
    if args.format == "json":
        print(
            json.dumps(
                {
                    **answer,
                    "data": [{**r, "cost": str(r["cost"])} for r in rows],
                    "total": {**answer["total"], "cost": str(answer["total"]["cost"])},
                }
            )
        )
    elif args.format == "csv":
        writer = CsvWriter(sys.stdout)  # a tag's value or an end user may look like a formula
        writer.row(("value", *_COUNTS, "cost", "cost_micros"))
        writer.rows(
            (
                _shown(r["value"]) if r["value"] is None else r["value"],
                *(r[c] for c in _COUNTS),
                str(r["cost"]),
                r["cost_micros"],
            )
            for r in rows
        )
    else:
        _table(args.team, dimension, answer)


def _shown(value: str | None) -> str:
    """A value as people read it: ``(none)`` for charges without it, ``(other)`` for those beyond the bounds."""
    return OTHER_SHOWN if value is None else value or NONE_SHOWN


def _table(team: str, dimension: str, answer: dict[str, Any]) -> None:
    rows: list[dict[str, Any]] = answer["data"]
    pages = max(1, -(-answer["values"] // answer["per_page"]))
    print(f"Team {team}: usage by {dimension}, {answer['values']} values, page {answer['page']} of {pages}")
    print(f"{'value':<32} {'requests':>9} {'input':>12} {'output':>12} {'cache w/r':>15} {'cost':>16}")
    for r in rows:
        cache = f"{r['cache_write_tokens']}/{r['cache_hit_tokens']}"
        print(
            f"{_shown(r['value'])[:32]:<32} {r['requests']:>9} {r['input_tokens']:>12} "
            f"{r['output_tokens']:>12} {cache:>15} {format_credits(r['cost_micros']):>16}"
        )
    total = answer["total"]
    print(f"{'total':<32} {total['requests']:>9} {'':>12} {'':>12} {'':>15} {format_credits(total['cost_micros']):>16}")


def add_usage_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    usage = commands.add_parser(
        "usage",
        parents=[common],
        help="a team's usage by the values of a tag (--by tag:NAME) or by end user (--by user)",
    )
    usage.add_argument("--team", required=True)
    usage.add_argument("--by", required=True, help="tag:NAME (the x-tollgate-tags name) or user (the end user)")
    usage.add_argument("--since", help="only usage on or after this day (ISO, UTC), e.g. 2026-11-01")
    usage.add_argument("--format", choices=("table", "json", "csv"), default="table")
    usage.add_argument("--page", type=int, default=1, help="which page of values, the largest cost first")
    usage.add_argument("--per-page", type=int, default=100, help="values a page (at most 1000)")
    usage.set_defaults(func=cmd_usage)
