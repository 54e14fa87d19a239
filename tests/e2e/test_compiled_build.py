"""The build's two forms: the modules ``domain/compiled.py`` lists run compiled (mypyc) where ``make
install`` or ``pip install .`` built them, and from their source with ``TOLLGATE_PURE=1`` — and a
gateway run from the source serves and charges as the compiled one does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import openai
import pytest

import tests.support.gateway as gateway_support
from domain.compiled import COMPILED, PURE_ENV, _extension, source_path
from tests.support.charges import HELLO, charged, micros, reported
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams


def _compiled_in_a_new_interpreter(pure: bool) -> list[str]:
    """The listed modules a new interpreter runs compiled (``compiled_modules``; not the tests' fork
    server, which has imported them already)."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV} | ({PURE_ENV: "1"} if pure else {})
    script = "import json; from domain.compiled import compiled_modules; print(json.dumps(compiled_modules()))"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    compiled: list[str] = json.loads(done.stdout)
    return compiled


def _built() -> list[str]:
    built = [name for name in COMPILED if _extension(source_path(name)) is not None]
    assert built in ([], list(COMPILED)), f"a partial build: only {built} were compiled"
    return built


def test_every_listed_module_runs_compiled_where_the_build_made_it():
    if not _built():
        pytest.skip("a pure install: nothing was compiled (make install compiles)")
    from_source = sorted(set(COMPILED) - set(_compiled_in_a_new_interpreter(pure=False)))
    assert from_source == [], f"run from source although compiled (edited since the build? make install): {from_source}"


def test_with_tollgate_pure_every_listed_module_runs_from_its_source():
    assert _compiled_in_a_new_interpreter(pure=True) == []


def test_a_gateway_run_from_source_serves_and_charges_as_the_compiled_one(
    tmp_path, fake_upstream: FakeUpstream, monkeypatch
):
    """One ledger served in turn from the source and by the build: the same request costs the same,
    charged once each time, and the ledger replays clean."""
    config = write_config(tmp_path, fake_upstream.base_url)
    teams = Teams(config)
    try:
        team = teams.open("10")
    finally:
        teams.close()
    answers = []
    for env in ({PURE_ENV: "1"}, {}):
        # a new interpreter for the source: the fork server's has imported the compiled modules
        monkeypatch.setattr(gateway_support, "FORK_GATEWAYS", not env)
        served = Gateway(config, env=env).start()
        try:
            with openai.OpenAI(base_url=served.base_url, api_key=team.key, max_retries=0) as client:
                answers.append(client.chat.completions.create(model="fake-gpt", messages=HELLO))
            if not env:
                assert served.cli("ledger", "verify").returncode == 0
                assert charged(served, team) == [reported(answer.usage) for answer in answers]
        finally:
            served.stop()
    costs = [micros(answer.usage.prompt_tokens, answer.usage.completion_tokens) for answer in answers]
    assert [reported(answer.usage) for answer in answers] == costs
