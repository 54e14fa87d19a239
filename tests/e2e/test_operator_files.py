"""What an operator hands the CLI — a configuration, a price list, a statement, a period's bounds — that
it cannot take is refused with one clear line, never a traceback (findings of the fuzzers in
tests/e2e/fuzz: a file that is not UTF-8, a bound at the ends of the calendar)."""

from __future__ import annotations

from pathlib import Path

from tests.support.gateway import Gateway, run_cli
from tests.support.teams import Team

HALF = b'[[models]]\nid = "fake-gpt"\npricing = {input = 1.25, output = 5, cache_create = 1.5625, cache_hit = 0.625}\n'


def _refused(done, code: int, says: str) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == code, (done.returncode, done.stderr)
    assert says in done.stderr, done.stderr


def test_a_statement_that_is_not_utf8_fails_as_no_statement_and_a_missing_one_is_a_usage_error(
    gateway: Gateway, tmp_path: Path
):
    latin1 = tmp_path / "statement.csv"
    latin1.write_bytes("team,month\r\ncafé,2026-11\r\n".encode("latin-1"))
    failed = gateway.cli("ledger", "verify", "--statement", str(latin1), check=False)
    _refused(failed, 1, f"Statement verification FAILED for {latin1}: it is not UTF-8 text (byte 0xe9 at offset 15")
    missing = gateway.cli("ledger", "verify", "--statement", str(tmp_path / "nowhere.json"), check=False)
    _refused(missing, 2, "tollgate: error: cannot read")


def test_a_rerate_bounded_at_the_ends_of_the_calendar_is_refused(gateway: Gateway, team: Team, tmp_path: Path):
    prices = tmp_path / "half.toml"
    prices.write_bytes(HALF)
    for start, end in (("2026-11-01", "9999-12-31"), ("0001-01-01T00:00:00+01:00", "2026-11-02")):
        done = gateway.cli(
            "ledger",
            "rerate",
            "--team",
            team.name,
            f"--from={start}",
            f"--to={end}",
            "--prices",
            str(prices),
            check=False,
        )
        _refused(done, 2, "bounds no period: in UTC, or as the end of its day, it is outside the years 1 to 9999")


def test_a_price_list_or_configuration_that_is_not_utf8_is_refused_naming_the_file(
    gateway: Gateway, team: Team, tmp_path: Path
):
    prices = tmp_path / "prices.toml"
    prices.write_bytes(b"# tarifs r\xe9vis\xe9s\n" + HALF)
    done = gateway.cli(
        "ledger",
        "rerate",
        "--team",
        team.name,
        "--from=2026-11-01",
        "--to=2026-11-02",
        "--prices",
        str(prices),
        check=False,
    )
    _refused(done, 2, f"tollgate: error: cannot read {prices}: it is not UTF-8 text (byte 0xe9 at offset 10")
    config = tmp_path / "tollgate.toml"
    config.write_bytes(gateway.config.read_bytes() + b"\n# r\xe9vis\xe9\n")
    done = run_cli(config, "team", "show", team.name, check=False)
    _refused(done, 2, "cannot read the file: it is not UTF-8 text")
