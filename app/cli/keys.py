"""``tollgate team …`` and ``tollgate key …``: teams, their keys, and what those may do.

Scripts rely on ``team create NAME --credits X`` and ``key create --team NAME`` (the key is the
last line of stdout); the policy options (``--models``, ``--endpoints``, ``--rpm``, ``--tpm``) are
additions that leave those forms unchanged.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from app.cli.budgets import add_key_budget_command, add_team_budget_command, described
from app.cli.support import CommandError, add_reason_option, cli_actor, credits_amount, ledger_service, recorded_text
from app.ledger.results import KeyTerms, Limits
from app.settings_file import load_settings
from domain.bounds import RPM, TPM, Bound
from domain.endpoints import ENDPOINT_PATHS, parse_endpoints
from domain.money import format_credits
from domain.settings import Settings


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(args.rpm, args.tpm)


def _shown_limits(rpm: int | None, tpm: int | None) -> str:
    return f"rpm={rpm or '-'} tpm={tpm or '-'}"


def cmd_team_create(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        team = ledger.create_team(
            args.name, credits_amount(args.credits), _limits(args), actor=cli_actor(), reason=args.reason
        )
    print(f"Opened team {team.name} with {format_credits(team.balance)} credits.")


def cmd_team_show(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        team = ledger.team_summary(args.name)
    state = ", SUSPENDED" if team.suspended else ""
    state += ", clamp-output" if team.clamp_output else ""
    state += "".join(f", prices {p} % on {m or 'every model'}" for m, p in team.price_adjustments)
    state += f", budget {described(team.budget)}" if team.budget else ""
    print(
        f"team {team.name}: balance {format_credits(team.balance)} credits, "
        f"held {format_credits(team.held)}, available {format_credits(team.balance - team.held)}, "
        f"{_shown_limits(team.rpm, team.tpm)}{state}"
    )


def cmd_team_limit(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        team = ledger.limit_team(args.name, _limits(args), actor=cli_actor(), reason=args.reason)
    print(f"Team {team.name}: {_shown_limits(team.rpm, team.tpm)} (per minute, shared by its keys).")


def cmd_team_suspend(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        ledger.suspend(args.name, args.reason or "", actor=cli_actor())
    print(f"Suspended team {args.name}: every gateway process refuses its keys (403) until it is reinstated.")


def cmd_team_reinstate(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        ledger.reinstate(args.name, actor=cli_actor(), reason=args.reason)
    print(f"Reinstated team {args.name}.")


def _models(text: str | None) -> list[str]:
    return [m.strip() for m in (text or "").split(",") if m.strip()]


def _known_models(settings: Settings, models: list[str]) -> list[str]:
    unknown = [m for m in models if settings.model(m) is None]
    if unknown:
        raise CommandError(f"unknown model(s): {', '.join(unknown)}")
    return models


def _endpoints(text: str | None) -> list[str]:
    try:
        return parse_endpoints(text or "")
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def cmd_key_create(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    models = _known_models(settings, _models(args.models))
    endpoints = _endpoints(args.endpoints)
    with ledger_service(settings, base) as ledger:
        key = ledger.issue_key(
            args.team,
            args.name or "",
            KeyTerms(models, endpoints, _limits(args)),
            actor=cli_actor(),
            reason=args.reason,
        )
    only = [f"models: {', '.join(models)}"] if models else []
    only += [f"endpoints: {', '.join(endpoints)}"] if endpoints else []
    only += [_shown_limits(args.rpm, args.tpm)] if args.rpm or args.tpm else []
    print(
        f"Issued an API key for team {args.team}{' (' + '; '.join(only) + ')' if only else ''}. It is shown only once:"
    )
    print(key.secret)


def cmd_key_revoke(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        ledger.revoke_key(args.team, args.key_id, actor=cli_actor(), reason=args.reason)
    print(f"Revoked key {args.key_id} of team {args.team}; every gateway process refuses it from now on.")


def cmd_key_restrict(args: argparse.Namespace) -> None:
    if args.models is None and args.endpoints is None:
        raise CommandError("give --models, --endpoints or both")
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        if args.models is not None:
            models = _known_models(settings, _models(args.models))
            ledger.restrict_key(args.team, args.key_id, models, actor=cli_actor(), reason=args.reason)
            print(f"Key {args.key_id} of team {args.team} may use: {', '.join(models) or 'any model'}.")
        if args.endpoints is not None:
            endpoints = _endpoints(args.endpoints)
            ledger.restrict_key_endpoints(args.team, args.key_id, endpoints, actor=cli_actor(), reason=args.reason)
            print(f"Key {args.key_id} of team {args.team} may call: {', '.join(endpoints) or 'any endpoint'}.")


def cmd_key_limit(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        key = ledger.limit_key(args.team, args.key_id, _limits(args), actor=cli_actor(), reason=args.reason)
    print(f"Key {args.key_id} of team {args.team}: {_shown_limits(key.rpm, key.tpm)} (per minute).")


def cmd_key_list(args: argparse.Namespace) -> None:
    settings, base = load_settings(args.config)
    with ledger_service(settings, base) as ledger:
        keys = ledger.list_keys(args.team)
    for k in keys:
        state = "revoked" if k.revoked else "active"
        clamp = "  clamp-output" if k.clamp_output else ""
        budget = f"  budget: {described(k.budget)}" if k.budget else ""
        print(
            f"{k.key_id}  {state:<8} models={','.join(k.models) or '*'}  endpoints={','.join(k.endpoints) or '*'}  "
            f"{_shown_limits(k.rpm, k.tpm)}{clamp}{budget}  {k.label}"
        )


def cmd_clamp(args: argparse.Namespace) -> None:
    """``team clamp NAME on|off`` and ``key clamp --team NAME KEY_ID on|off``."""
    settings, base = load_settings(args.config)
    team, key_id = (args.team, args.key_id) if args.action == "clamp" and args.command == "key" else (args.name, "")
    enabled = args.state == "on"
    with ledger_service(settings, base) as ledger:
        ledger.clamp_output(team, enabled, key_id, actor=cli_actor(), reason=args.reason)
    whose = f"Key {key_id} of team {team}" if key_id else f"Team {team}"
    if enabled:
        print(
            f"{whose}: a request the available balance cannot cover is sent with its output limit lowered to what "
            "the balance covers (x-tollgate-output-clamped), instead of being refused with 402."
        )
    else:
        print(
            f"{whose}: a request the available balance cannot cover is refused with 402, which says the largest "
            "output limit the balance covers."
        )


def _per_minute(bound: Bound) -> Callable[[str], int]:
    """A per-minute limit as typed: a whole number in its range (``domain/bounds.py``), or 0 for none."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value != 0 and (wrong := bound.violation(value)) is not None:
            raise argparse.ArgumentTypeError(f"{wrong} (0: no limit), got {value}")
        return value

    return parse


def _add_limit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rpm", type=_per_minute(RPM), help="requests per minute (0: no limit)")
    parser.add_argument("--tpm", type=_per_minute(TPM), help="tokens per minute, prompt and output (0: no limit)")


def add_team_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    team = commands.add_parser("team", help="teams").add_subparsers(dest="action", required=True, metavar="ACTION")
    create = team.add_parser("create", parents=[common], help="open a team with some credits")
    create.add_argument("name")
    create.add_argument("--credits", default="0", help="opening balance in credits (e.g. 100 or 12.5)")
    _add_limit_options(create)
    add_reason_option(create)
    create.set_defaults(func=cmd_team_create)
    show = team.add_parser("show", parents=[common], help="a team's balance, limits and state")
    show.add_argument("name")
    show.set_defaults(func=cmd_team_show)
    limit = team.add_parser("limit", parents=[common], help="set a team's rate limits (shared by all its keys)")
    limit.add_argument("name")
    _add_limit_options(limit)
    add_reason_option(limit)
    limit.set_defaults(func=cmd_team_limit)
    suspend = team.add_parser("suspend", parents=[common], help="refuse a team's requests (403) until reinstated")
    suspend.add_argument("name")
    add_reason_option(suspend)
    suspend.set_defaults(func=cmd_team_suspend)
    reinstate = team.add_parser("reinstate", parents=[common], help="lift a team's suspension")
    reinstate.add_argument("name")
    add_reason_option(reinstate)
    reinstate.set_defaults(func=cmd_team_reinstate)
    clamp = team.add_parser(
        "clamp",
        parents=[common],
        help="on: lower a request's output limit to what the balance "
        "covers instead of refusing it (every key of the team)",
    )
    clamp.add_argument("name")
    clamp.add_argument("state", choices=("on", "off"))
    add_reason_option(clamp)
    clamp.set_defaults(func=cmd_clamp)
    add_team_budget_command(team, common)


def add_key_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    endpoint_help = f"comma-separated endpoints the key may call: {', '.join(ENDPOINT_PATHS)} (default: any)"
    key = commands.add_parser("key", help="API keys").add_subparsers(dest="action", required=True, metavar="ACTION")
    key_create = key.add_parser("create", parents=[common], help="issue a key (printed once, as the last line)")
    key_create.add_argument("--team", required=True)
    key_create.add_argument("--name", type=recorded_text, help="a label for the key")
    key_create.add_argument("--models", help="comma-separated model ids the key may use (default: any)")
    key_create.add_argument("--endpoints", help=endpoint_help)
    _add_limit_options(key_create)
    add_reason_option(key_create)
    key_create.set_defaults(func=cmd_key_create)
    key_revoke = key.add_parser("revoke", parents=[common], help="revoke a key, at once, in every process")
    key_revoke.add_argument("--team", required=True)
    key_revoke.add_argument("key_id")
    add_reason_option(key_revoke)
    key_revoke.set_defaults(func=cmd_key_revoke)
    key_restrict = key.add_parser("restrict", parents=[common], help="limit a key to some models or endpoints")
    key_restrict.add_argument("--team", required=True)
    key_restrict.add_argument("key_id")
    key_restrict.add_argument("--models", help="comma-separated model ids ('' for any)")
    key_restrict.add_argument("--endpoints", help=endpoint_help.replace("(default: any)", "('' for any)"))
    add_reason_option(key_restrict)
    key_restrict.set_defaults(func=cmd_key_restrict)
    key_limit = key.add_parser("limit", parents=[common], help="set a key's own rate limits")
    key_limit.add_argument("--team", required=True)
    key_limit.add_argument("key_id")
    _add_limit_options(key_limit)
    add_reason_option(key_limit)
    key_limit.set_defaults(func=cmd_key_limit)
    key_clamp = key.add_parser(
        "clamp",
        parents=[common],
        help="on: lower a request's output limit to what the balance covers instead of refusing it (this key)",
    )
    key_clamp.add_argument("--team", required=True)
    key_clamp.add_argument("key_id")
    key_clamp.add_argument("state", choices=("on", "off"))
    add_reason_option(key_clamp)
    key_clamp.set_defaults(func=cmd_clamp)
    key_list = key.add_parser("list", parents=[common], help="a team's keys (ids, state, policies; never secrets)")
    key_list.add_argument("--team", required=True)
    key_list.set_defaults(func=cmd_key_list)
    add_key_budget_command(key, common)
