"""``python -m scripts.chaos``: the chaos suite (see scripts/chaos/run.py and docs/chaos.md).

The CI mode (the default) runs about a minute of load with every fault once and finishes within
three minutes; ``--long`` runs five minutes of load, more teams, every fault three times, for
people. ``--hosts 3`` puts each gateway on a host of its own (a Linux network namespace; root and
``iptables``) and adds the faults between hosts; ``make test`` runs that. Exit status 0 only with
no violation.
"""

from __future__ import annotations

import argparse
import sys

from scripts.chaos.run import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.chaos",
        description=(
            "Three gateways on one PostgreSQL ledger and Redis (the suite's own), a mixed burst of requests, "
            "and faults: a gateway killed mid-stream, the database restarted and refusing connections, Redis "
            "restarted, the upstream failing, hanging and cutting streams. Then every charge is checked."
        ),
    )
    parser.add_argument("--seed", type=int, help="the traffic's seed (default: 14 in CI mode, random with --long)")
    parser.add_argument("--long", action="store_true", help="five minutes of load, more teams and faults")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, attempts, events)")
    parser.add_argument(
        "--no-faults",
        dest="faults",
        action="store_false",
        help="the same traffic without the infrastructure faults (upstream faults stay)",
    )
    parser.add_argument(
        "--hosts",
        type=int,
        default=0,
        help="that many gateway hosts, each in a Linux network namespace of its own, the database and Redis in "
        "another, and the faults between them: partitions, a lossy link, a frozen host, clocks apart (root)",
    )
    args = parser.parse_args(argv)
    if args.hosts:
        from scripts.chaos.netns import available

        if args.hosts < 2:
            parser.error("--hosts: at least 2")
        if (missing := available()) is not None:  # a developer's machine without root: still a chaos run
            print(f"chaos: --hosts cannot run here ({missing}); the single-host suite runs instead", flush=True)
            args.hosts = 0
    try:
        return run(args.seed, args.long, args.keep, args.faults, args.hosts)
    except KeyboardInterrupt:
        print("chaos: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
