"""The ``tollgate`` command: serve the gateway, and administer teams, keys, credits and the ledger.

Every command takes ``--config PATH`` (or ``TOLLGATE_CONFIG``). Scripts rely on these forms:
``serve``, ``team create NAME --credits X``, ``key create --team NAME`` (the key is the last line of
stdout), ``credits add --team NAME AMOUNT`` and ``ledger verify`` (exit 0 only if the ledger is whole).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.admin_keys import add_admin_key_commands
from app.cli.alerts import add_alert_commands
from app.cli.balance import add_balance_command
from app.cli.credits import add_credits_commands
from app.cli.keys import add_key_commands, add_team_commands
from app.cli.log_commands import add_log_commands
from app.cli.log_offline import add_offline_commands
from app.cli.log_watch import add_watch_commands
from app.cli.payments import add_payments_commands
from app.cli.prices import add_prices_commands
from app.cli.rerate import add_rerate_command
from app.cli.statement import add_statement_commands
from app.cli.support import (
    CommandError,
    cli_actor,
    credits_amount,
    ledger_service,
    ledger_store,
    out_of_bounds,
)
from app.cli.usage import add_usage_command
from app.clock_shift import ClockOffsetError, shift_clock_from_environment
from app.errors import bounded
from app.http.serving import serve
from app.ledger.refusals import REFUSALS
from app.log_key import log_signer
from app.ratelimit.choice import StartupRefused
from app.settings_file import CONFIG_ENV, load_settings
from app.upstream.google_token import require_google_credentials
from domain.money import format_credits
from domain.settings import ConfigError, require_strong_admin_key, require_upstream_secrets, require_webhook_secrets
from domain.settings_payments import require_payment_secrets

if TYPE_CHECKING:
    from app.store.event_store import LedgerStore
    from projections.history import HistoryProjection


def _total_events(store: LedgerStore) -> int:
    return store.recorder.max_notification_id() or 0


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    from app.cli.progress import progress_bar
    from projections.audit import verify_caught_up

    with ledger_store(args.config) as store:
        report = verify_caught_up(
            store,
            progress=progress_bar("verify", _total_events(store)),
            catching_up=lambda n: progress_bar("catching up", n) if n > 5000 else None,
        )
    if report.ok:
        print(
            f"Ledger verified: {report.events} events, {report.teams} teams, {report.charges} charges; "
            "every recorded balance matches the replay."
        )
        outdated = (
            ""
            if not report.outdated_snapshots
            else (
                f" ({report.outdated_snapshots} of them taken before the team gained some state, so loads replay its "
                "events instead; `tollgate ledger rebuild` takes them again)"
            )
        )
        print(f"Team snapshots checked against the replay: {report.snapshots}, all equal to it{outdated}.")
        lag = f" (the projections are {report.behind} events behind; they catch up)" if report.behind else ""
        print(f"Audit history and usage match the events up to event #{report.projected}{lag}.")
        print(
            f"Transparency log recomputed from the events: {report.log_leaves} leaves, "
            f"{report.log_checkpoints} checkpoints, all equal to it."
        )
        return 0
    print(f"Ledger verification FAILED after {report.events} events: {report.problems[0]}", file=sys.stderr)
    for problem in report.problems[1:]:
        print(f"  also: {problem}", file=sys.stderr)
    return 1


def cmd_ledger_rebuild(args: argparse.Namespace) -> None:
    from app.cli.progress import progress_bar
    from projections.history import HistoryProjection

    settings, _ = load_settings(args.config)
    with ledger_store(args.config) as store:
        history = HistoryProjection(store, store.database)
        try:
            done = history.rebuild(
                progress=progress_bar("rebuild", _total_events(store)), snapshot_every=settings.snapshot_every
            )
        finally:
            history.close()
    print(
        f"Rebuilt the audit history, usage, balances, key directories and team snapshots (one every "
        f"{settings.snapshot_every} events of a team) from {done} events."
    )


def _caught_up_history(store: LedgerStore) -> HistoryProjection:
    from app.cli.progress import progress_bar
    from projections.history import HistoryProjection

    history = HistoryProjection(store, store.database)
    behind = _total_events(store) - history.position()
    history.catch_up(progress=progress_bar("catching up", behind) if behind > 5000 else None)
    return history


def _query_checked(check: Callable[..., None], *values: object) -> None:
    """A query's numbers and times, bounded as the admin API bounds them (``app/paging.py``)."""
    from app.paging import OutOfBounds

    try:
        check(*values)
    except OutOfBounds as exc:
        raise out_of_bounds(exc) from None


def cmd_ledger_export(args: argparse.Namespace) -> None:
    from app.ledger.queries import export_chunks  # the dashboard's export writes the same lines
    from app.paging import check_since

    _query_checked(check_since, args.since)
    with ledger_store(args.config) as store:
        history = _caught_up_history(store)
        upto = history.position()
        history.close()
        for chunk in export_chunks(store, args.team, args.format, upto, since=args.since):
            sys.stdout.write(chunk)


def cmd_ledger_history(args: argparse.Namespace) -> None:
    from app.paging import MAX_HISTORY_PER_PAGE, check_page

    _query_checked(check_page, args.page, args.per_page, MAX_HISTORY_PER_PAGE)
    with ledger_store(args.config) as store:
        history = _caught_up_history(store)
        total = history.count(team=args.team)
        rows = history.entries(team=args.team, limit=args.per_page, offset=(args.page - 1) * args.per_page)
        history.close()
    pages = max(1, -(-total // args.per_page))
    print(f"Team {args.team}: {total} ledger entries, page {args.page} of {pages}")
    print(
        f"{'time (UTC)':<20} {'entry':<16} {'model':<14} {'tokens in/out':>14} {'amount':>14} {'balance':>14}  "
        "request or note [by whom]: why"
    )
    for r in rows:
        tokens = (
            f"{r['input_tokens'] + r['cache_write_tokens'] + r['cache_hit_tokens']}/{r['output_tokens']}"
            if r["kind"] == "charge"
            else ""
        )
        amount = ("+" if r["amount"] > 0 else "-" if r["amount"] < 0 else " ") + format_credits(abs(int(r["amount"])))
        note = r["request_id"] or r["key_id"] + (" " if r["key_id"] and r["reference"] else "") + r["reference"]
        note += f" [{r['actor']}]" if r["actor"] else ""
        note += f": {r['reason']}" if r["reason"] and r["kind"] != "adjustment" else ""  # an adjustment's note says it
        print(
            f"{r['occurred_at'][:19].replace('T', ' '):<20} {r['kind']:<16} {r['model'][:14]:<14} {tokens:>14} "
            f"{amount:>14} {format_credits(int(r['balance_after'])):>14}  {note}"
        )


def cmd_db_upgrade(args: argparse.Namespace) -> None:
    from app.store.event_store import open_ledger_store

    settings, base = load_settings(args.config)
    open_ledger_store(settings.database_url, base, pool_size=1).close()  # the schema is made on a connection of its own
    print(f"Database ready: {settings.database_url} (event store created, read models migrated).")


def cmd_serve(args: argparse.Namespace) -> None:
    if args.workers < 1:
        raise CommandError("--workers must be at least 1")
    settings, base = load_settings(args.config)
    config_path = str(args.config or os.environ.get(CONFIG_ENV))
    require_upstream_secrets(settings, config_path, os.environ)
    require_google_credentials(settings, config_path)
    require_webhook_secrets(settings, config_path, os.environ)
    require_payment_secrets(settings.payments, config_path, os.environ)
    log_signer(settings.transparency, base, os.environ, config_path)  # refuses to serve without its key
    require_strong_admin_key(settings, config_path, os.environ)
    serve(settings, base, args.host, args.port, args.workers, config_path)


def cmd_bench(bench_args: Sequence[str]) -> int:
    """Run the source checkout's benchmark (``scripts/bench``) with these arguments. It is a tool for
    the people who change Tollgate, so it ships with the source, not with the installed package: the
    command runs it as a process of its own, from the checkout this package was installed from."""
    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "scripts" / "bench" / "run.py").is_file():
        raise CommandError(
            "the benchmark ships with Tollgate's source checkout (scripts/bench); "
            "install Tollgate from a checkout (pip install -e .) to run it"
        )
    command = [sys.executable, "-m", "scripts.bench", *bench_args]
    return subprocess.run(command, cwd=checkout, check=False).returncode


def cmd_demo(args: argparse.Namespace) -> None:
    """Open the demo team (once), issue a key, print how to use it, and serve."""
    from domain.ledger import TeamAlreadyExists

    settings, base = load_settings(args.config)
    require_webhook_secrets(settings, str(args.config or os.environ.get(CONFIG_ENV)), os.environ)
    require_strong_admin_key(settings, str(args.config or os.environ.get(CONFIG_ENV)), os.environ)
    with ledger_service(settings, base) as ledger:
        try:
            ledger.create_team(args.team, credits_amount(args.credits), actor=cli_actor(), reason="demo")
        except TeamAlreadyExists:  # opened by an earlier demo: topped up if it spent everything
            if ledger.team_summary(args.team).balance == 0:
                ledger.top_up(args.team, credits_amount(args.credits), "demo top-up", actor=cli_actor())
        secret = ledger.issue_key(args.team, "demo", actor=cli_actor(), reason="demo").secret
        balance = ledger.team_summary(args.team).balance
    model = settings.models[0].id
    base_url = f"http://{args.host}:{args.port}/v1"
    print(
        f"""
Tollgate demo: team '{args.team}' has {format_credits(balance)} credits.
API key (shown once): {secret}

Try it:
  curl -s {base_url}/chat/completions -H "Authorization: Bearer {secret}" \\
    -H "Content-Type: application/json" \\
    -d '{{"model": "{model}", "messages": [{{"role": "user", "content": "Hello, Tollgate!"}}]}}'

Or with the OpenAI SDK: OpenAI(base_url="{base_url}", api_key="{secret}")
The team's dashboard: http://{args.host}:{args.port}/dashboard (sign in with the key)
""",
        flush=True,
    )
    serve(settings, base, args.host, args.port)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help=f"configuration file (TOML); default: ${CONFIG_ENV}")

    parser = argparse.ArgumentParser(
        prog="tollgate", description="An LLM gateway with a prepaid, event-sourced ledger."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve_p = commands.add_parser("serve", parents=[common], help="run the gateway")
    serve_p.add_argument("--host", default="127.0.0.1")
    serve_p.add_argument("--port", type=int, default=8080)
    serve_p.add_argument(
        "--workers", type=int, default=1, help="gateway processes sharing the port (more than 1 needs redis_url)"
    )
    serve_p.set_defaults(func=cmd_serve)

    bench = commands.add_parser(
        "bench",
        add_help=False,
        prog="tollgate bench",
        help="benchmark the gateway against a bare proxy and the upstream itself "
        "(tollgate bench --help lists its options)",
    )
    bench.set_defaults(func=lambda args: cmd_bench([]))  # main() hands every argument after "bench" over
    bench.set_defaults(func=cmd_bench)

    demo = commands.add_parser("demo", parents=[common], help="open a demo team, print a key, and serve")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8080)
    demo.add_argument("--team", default="demo")
    demo.add_argument("--credits", default="100")
    demo.set_defaults(func=cmd_demo)

    add_team_commands(commands, common)
    add_key_commands(commands, common)
    add_alert_commands(commands, common)
    add_prices_commands(commands, common)
    add_usage_command(commands, common)
    add_admin_key_commands(commands, common)

    add_credits_commands(commands, common)
    add_payments_commands(commands, common)
    log = commands.add_parser("log", help="the transparency log: checkpoints, proofs, receipts").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    add_log_commands(log, common)
    add_offline_commands(log)
    add_watch_commands(log)

    ledger = commands.add_parser("ledger", help="the ledger").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    verify = ledger.add_parser(
        "verify",
        parents=[common],
        help="replay every event; check every recorded balance, projection row and team snapshot",
    )
    verify.set_defaults(func=cmd_ledger_verify)
    rebuild = ledger.add_parser(
        "rebuild",
        parents=[common],
        help="rebuild every read model from the events into fresh tables, then swap them in; "
        "drop the team snapshots and take them again",
    )
    rebuild.set_defaults(func=cmd_ledger_rebuild)
    export = ledger.add_parser("export", parents=[common], help="a team's audit history, as CSV or JSON lines")
    export.add_argument("--team", required=True)
    export.add_argument("--since", help="only entries at or after this date or time (ISO, UTC), e.g. 2026-11-01")
    export.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    export.set_defaults(func=cmd_ledger_export)
    history = ledger.add_parser("history", parents=[common], help="a team's ledger entries, readable, a page at a time")
    history.add_argument("--team", required=True)
    history.add_argument("--page", type=int, default=1)
    history.add_argument("--per-page", type=int, default=20)
    history.set_defaults(func=cmd_ledger_history)
    add_balance_command(ledger, common)
    add_rerate_command(ledger, common)
    add_statement_commands(ledger, common, verify)

    db = commands.add_parser("db", help="the database").add_subparsers(dest="action", required=True, metavar="ACTION")
    upgrade = db.add_parser("upgrade", parents=[common], help="create the event store and migrate the read models")
    upgrade.set_defaults(func=cmd_db_upgrade)
    return parser


def _negative_amounts(argv: list[str]) -> list[str]:
    """``credits adjust --team T -- -5 --reason R``: the ``--`` only says that ``-5`` is an amount,
    not an option; argparse would read everything after it as positional, so it is dropped."""
    return [
        arg
        for i, arg in enumerate(argv)
        if not (arg == "--" and i + 1 < len(argv) and re.fullmatch(r"-\d+(\.\d+)?", argv[i + 1]))
    ]


#: Where the errors of the database come from: its drivers, and the event store library's persistence.
_DATABASE_MODULES = (
    "psycopg",
    "sqlite3",
    "eventsourcing.persistence",
    "eventsourcing.postgres",
    "eventsourcing.sqlite",
)


def _from_the_database(exc: BaseException) -> bool:
    """Whether ``exc`` is the database's (unreachable, refusing connections, read-only, …) rather than
    a bug: the drivers' errors and the event store library's, which wraps them. Told apart by the
    class's module, so that neither driver need be imported to ask."""
    return any(cls.__module__.startswith(_DATABASE_MODULES) for cls in type(exc).__mro__)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        try:
            return cmd_bench(argv[1:])
        except CommandError as exc:
            print(f"tollgate: error: {exc}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(_negative_amounts(argv))
    try:
        shift_clock_from_environment()
        result = args.func(args)
    except (ConfigError, CommandError, StartupRefused, ClockOffsetError) as exc:
        print(f"tollgate: error: {exc}", file=sys.stderr)
        return 2
    except REFUSALS as exc:  # in the words the APIs answer with (its told)
        print(f"tollgate: error: {bounded(exc.told)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _from_the_database(exc):
            raise  # a bug: its traceback is what a report needs
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"tollgate: error: the ledger's database cannot be used: {first_line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
