"""``tollgate admin-key …``: the named admin keys (``domain/admin_keys.py``).

``issue`` prints the new key's id, then its secret as the last line of stdout (shown this once:
only its hash is kept); ``revoke`` stops it in every gateway process within a second; ``list`` shows
every key, revoked ones too, never a secret. Each is recorded with who ran it (``cli:USER@HOST``)
and the ``--reason`` given.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.support import add_reason_option, cli_actor, ledger_store
from domain.admin_keys import ROLES


def cmd_admin_key_issue(args: argparse.Namespace) -> None:
    from app.admin_keys import issue_admin_key

    with ledger_store(args.config) as store:
        key = issue_admin_key(store, args.name, args.role, actor=cli_actor(), reason=args.reason)
    print(f"Issued admin key {key.key_id} ({args.name}, role {args.role}). It is shown only once:")
    print(key.secret)


def cmd_admin_key_revoke(args: argparse.Namespace) -> None:
    from app.admin_keys import revoke_admin_key

    with ledger_store(args.config) as store:
        revoke_admin_key(store, args.key_id, actor=cli_actor(), reason=args.reason)
    print(f"Revoked admin key {args.key_id}; every gateway process refuses it from now on.")


def cmd_admin_key_list(args: argparse.Namespace) -> None:
    with ledger_store(args.config) as store:
        keys = store.read_models.admin_keys()
    if not keys:
        print("No admin keys (the configured admin key, if set, is the only one).")
    for k in keys:
        state = "revoked" if k.revoked else "active"
        print(f"{k.key_id}  {state:<8} {k.role:<9} {k.name}  issued {k.issued_at[:19]}Z by {k.issued_by or '-'}")


def add_admin_key_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    admin = commands.add_parser("admin-key", help="named admin keys, with roles").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    issue = admin.add_parser("issue", parents=[common], help="issue an admin key (printed once, as the last line)")
    issue.add_argument("--name", required=True, help="whose key it is (a person or a tool), as the history shows it")
    issue.add_argument(
        "--role",
        required=True,
        choices=ROLES,
        help="auditor: reads everything, changes nothing; operator: may also change things",
    )
    add_reason_option(issue)
    issue.set_defaults(func=cmd_admin_key_issue)
    revoke = admin.add_parser("revoke", parents=[common], help="revoke an admin key, in every gateway process")
    revoke.add_argument("key_id")
    add_reason_option(revoke)
    revoke.set_defaults(func=cmd_admin_key_revoke)
    listed = admin.add_parser("list", parents=[common], help="every admin key (ids, roles, names; never secrets)")
    listed.set_defaults(func=cmd_admin_key_list)
