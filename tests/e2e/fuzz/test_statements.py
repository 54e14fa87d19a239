"""Generated mutations of a real chained monthly statement (tests/support/fuzz/statements.py), JSON
and CSV, given to ``tollgate ledger verify --statement FILE``, with the gateway's configuration and
without one: never a traceback; exit 0 ("verified") only for a file that says what the ledger's
statement says, never for one that says anything else; without a configuration never 0, and 3 (the
chain alone checked) for the statement as written; a refusal says why on stderr (README, Monthly
statements: the exit codes).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import strategies as st

from app.settings_file import CONFIG_ENV
from tests.support import plain_http
from tests.support.cli_fork import run_tollgate
from tests.support.fuzz.harness import Run, fuzz
from tests.support.fuzz.served import headers_for
from tests.support.fuzz.statements import findings, mutated, same_content
from tests.support.gateway import GATEWAY_ENV, Gateway
from tests.support.teams import Teams


@pytest.fixture(scope="module")
def genuine(fuzz_gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A team's month so far — requests on both wires (one streamed), a top-up and an adjustment each
    way — and its chained statement as JSON and as CSV, as the CLI writes them."""
    teams = Teams(fuzz_gateway.config)
    try:
        team = teams.open("100")
    finally:
        teams.close()
    for endpoint, body in (
        ("chat", {"model": "fake-gpt", "messages": [{"role": "user", "content": "statement"}]}),
        (
            "messages",
            {
                "model": "fake-claude",
                "max_tokens": 16,
                "stream": True,
                "messages": [{"role": "user", "content": "statement =1+1"}],
            },
        ),
    ):
        path = "/v1/chat/completions" if endpoint == "chat" else "/v1/messages"
        answer = plain_http.post(fuzz_gateway.root_url + path, json=body, headers=headers_for(endpoint, team.key))
        assert answer.status_code == 200, answer.text
    fuzz_gateway.wait_until_nothing_held(team.name)
    fuzz_gateway.cli("credits", "add", "--team", team.name, "25", "--reference", "=HYPERLINK(1)")
    fuzz_gateway.cli(
        "credits", "adjust", "--team", team.name, "--", "-5", "--reason", "billed twice", "--reference", "T-7"
    )
    fuzz_gateway.cli("credits", "adjust", "--team", team.name, "1.25", "--reason", "@goodwill")
    month = datetime.now(UTC).strftime("%Y-%m")
    where = tmp_path_factory.mktemp("statements")
    files = {}
    for fmt in ("json", "csv"):
        written = where / f"genuine.{fmt}"
        fuzz_gateway.cli(
            "ledger",
            "statement",
            "--team",
            team.name,
            "--month",
            month,
            "--format",
            fmt,
            "--chained",
            "--output",
            str(written),
        )
        files[fmt] = written.read_bytes()
    return files


def verify(gateway: Gateway, path: Path, with_config: bool) -> tuple[int, str, str]:
    if with_config:
        done = gateway.cli("ledger", "verify", "--statement", str(path), check=False)
    else:
        env = {k: v for k, v in {**os.environ, **GATEWAY_ENV}.items() if k != CONFIG_ENV}
        done = run_tollgate(["ledger", "verify", "--statement", str(path)], env, timeout=60)
    return done.returncode, done.stdout, done.stderr


def verdict(untouched: bool, same: bool, with_config: bool, code: int, out: str, err: str) -> str | None:
    """What is wrong with ``verify``'s answer, or None."""
    if "Traceback" in out + err:
        return f"a traceback: {(out + err).strip().splitlines()[-1][:150]}"
    if code not in (0, 1, 3) or (code == 3 and with_config):
        return f"exit {code}: {err.strip()[:150]}"
    if (code == 0) != ("Statement verified" in out):
        return f"exit {code} with {out.strip()[:100]!r}"
    if code != 0 and not err.strip() and code != 3:
        return f"exit {code} saying nothing on stderr"
    if with_config and untouched and code != 0:
        return f"the statement as written is not verified (exit {code}): {err.strip()[:150]}"
    if code == 0 and not (same and with_config):
        return "exit 0 (verified) for a file that says something else" if with_config else "exit 0 without a ledger"
    if not with_config and untouched and code != 3:
        return f"the statement as written, without a configuration: exit {code}, not 3"
    return None


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_no_changed_statement_is_verified_and_none_crashes_the_command(
    fuzz_gateway: Gateway, genuine: dict[str, bytes], run: Run, tmp_path: Path, fmt: str
):
    original = genuine[fmt]
    path = tmp_path / f"statement.{fmt}"

    def one(content: bytes, with_config: bool) -> None:
        run.tally.cases += 1
        path.write_bytes(content)
        code, out, err = verify(fuzz_gateway, path, with_config)
        route = f"ledger verify --statement ({fmt}{'' if with_config else ', no config'})"
        problem = verdict(content == original, same_content(original, content, fmt), with_config, code, out, err)
        if problem is not None:
            run.tally.fail("cli", route, code, problem, content)

    fuzz(
        one,
        content=mutated(original, fmt),
        with_config=st.sampled_from([True, True, True, False]),
        explicit=[
            {"content": original, "with_config": True},
            {"content": original, "with_config": False},
            *({"content": forged, "with_config": True} for forged in findings(original, fmt)),
        ],
    )
    run.check()
