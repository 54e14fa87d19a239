"""The benchmark's further teams (``--teams N``), each with credits that never run out and a key whose
limits never bind, made in one process: ``tollgate team create`` and ``key create`` once per team
would take a second each.

    python -m scripts.bench.teams CONFIG FIRST COUNT    # prints one key a line, teams FIRST … FIRST+COUNT-1

Team ``i`` is named ``bench-i`` (team 0 is ``bench``, made with the ``tollgate`` command as before).
"""

from __future__ import annotations

import sys

#: Every bench team's opening credits and its key's per-minute limits (never reached).
CREDITS = "1000000000"
KEY_RPM = 100_000_000
KEY_TPM = 100_000_000_000


def team_name(index: int) -> str:
    return "bench" if index == 0 else f"bench-{index}"


def main(argv: list[str]) -> int:
    from app.cli.support import credits_amount, ledger_service
    from app.ledger.results import KeyTerms, Limits
    from app.settings_file import load_settings

    config, first, count = argv[0], int(argv[1]), int(argv[2])
    settings, base = load_settings(config)
    with ledger_service(settings, base) as ledger:
        for index in range(first, first + count):
            ledger.create_team(team_name(index), credits_amount(CREDITS))
            print(ledger.issue_key(team_name(index), terms=KeyTerms(limits=Limits(KEY_RPM, KEY_TPM))).secret)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
