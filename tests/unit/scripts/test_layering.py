"""The layering is enforced by the lint (README, "Layout"): each layer's ``ruff.toml`` bans the
imports it must not make. These run the project's ruff on a one-line module placed, by name, in each
layer, so a configuration that stopped biting would fail here, not go quiet. A layer that may import one
part of a package (the projections app.store of app/, the CLI app.http.serving of app/http) bans each
other part by name, checked here against the package's contents, so a new part cannot slip through.

The layers, from the bottom: domain/ ← app/store ← projections/ ← the rest of app/ (the ledger's
service, the translator, the upstreams, …) ← app/http ← app/cli."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RUFF = Path(sys.executable).parent / "ruff"


def lint(path: str, source: str) -> subprocess.CompletedProcess[str]:
    """ruff's verdict on ``source`` as if it were the file ``path`` of the checkout."""
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "--select", "TID", "--stdin-filename", path, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("domain/probe.py", "import httpx\n"),
        ("domain/probe.py", "import psycopg\n"),
        ("domain/probe.py", "from app.keys import hash_key\n"),
        ("domain/probe.py", "from app.store.event_store import LedgerStore\n"),
        ("domain/payments/probe.py", "import stripe\n"),  # the domain reads Stripe's events, never calls Stripe
        ("projections/probe.py", "from app.ledger.writer import LedgerWriter\n"),
        ("app/ledger/probe.py", "from app.http.relay import serve\n"),
        ("app/runtime_probe.py", "from app.http.routes.models import ModelListCache\n"),
        ("app/http/probe.py", "from scripts.bench.options import add_bench_arguments\n"),
        ("app/cli/probe.py", "import scripts.bench\n"),
        ("app/ledger/probe.py", "from .writer import LedgerWriter\n"),  # relative imports would slip past the bans
        # the ledger's service refuses in the ledger's terms; app/http/refusals.py answers them over HTTP
        ("app/ledger/probe.py", "from app.errors import ServiceUnavailable\n"),
        ("app/ledger/probe.py", "from litestar import Request\n"),
        ("app/ledger/probe.py", "import app.http.refusals\n"),
        ("app/ledger/probe.py", "import scripts.bench\n"),
        ("app/cli/probe.py", "from app.http.refusals import http_error\n"),
        # the store imports the domain only: neither the rest of app/ nor the projections built on it
        ("app/store/probe.py", "from app.ledger.writer import LedgerWriter\n"),
        ("app/store/probe.py", "from app.keys import hash_key\n"),
        ("app/store/probe.py", "import app.runtime\n"),
        ("app/store/probe.py", "from projections.history import HistoryProjection\n"),
        ("app/store/probe.py", "import scripts.bench\n"),
        # the projections import app.store of app/, nothing else of it
        ("projections/probe.py", "from app.keys import hash_key\n"),
        ("projections/probe.py", "from app import runtime\n"),
        ("projections/probe.py", "import app.http.relay\n"),
        # nothing but the CLI imports the CLI; the HTTP application neither (its settings are app/settings_file.py)
        ("app/http/probe.py", "from app.cli.support import CommandError\n"),
        ("app/http/serving.py", "from app.cli.support import load_settings\n"),
        ("app/ledger/probe.py", "from app.cli.support import ledger_store\n"),
        ("app/translate/probe.py", "from app.http.relay import answer\n"),  # the translator is under HTTP
        # the CLI imports app.http.serving only (the paging bounds are app/paging.py)
        ("app/cli/main.py", "from app.http.routes.paging import check_page\n"),
        ("app/cli/probe.py", "from app.http.routes.admin import team_history\n"),
        ("app/cli/probe.py", "from app.http import relay\n"),
    ],
)
def test_an_import_across_the_layering_fails_the_gate(path: str, source: str) -> None:
    result = lint(path, source)
    assert result.returncode == 1, result.stdout
    assert "TID25" in result.stdout


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("domain/probe.py", "from domain.money import format_credits\n"),
        ("projections/probe.py", "from domain.ledger import TeamLedger\n"),
        ("app/ledger/probe.py", "from app.store.event_store import LedgerStore\n"),
        ("app/cli/probe.py", "from app.http.serving import serve\n"),
        ("app/http/probe.py", "from app.ledger.service import LedgerService\n"),
        ("scripts/probe.py", "from scripts.bench.options import add_bench_arguments\n"),
        ("app/store/probe.py", "from domain.ledger import TeamLedger\n"),
        ("app/store/probe.py", "from app.store.database import Database\n"),
        ("projections/probe.py", "from app.store.event_store import LedgerStore\n"),
        ("app/ledger/probe.py", "from projections.history import HistoryProjection\n"),
        ("app/ledger/probe.py", "from domain.ledger_errors import LedgerError\n"),
        ("app/cli/probe.py", "from app.ledger.refusals import REFUSALS\n"),
        ("app/http/serving.py", "from app.settings_file import load_settings\n"),
        ("app/http/probe.py", "from app.paging import check_page\n"),
        ("app/cli/probe.py", "from app.paging import check_page\n"),
        ("app/translate/probe.py", "from app.upstream.base import Answer\n"),
    ],
)
def test_an_import_down_the_layering_passes(path: str, source: str) -> None:
    result = lint(path, source)
    assert result.returncode == 0, result.stdout


def _parts(package: Path) -> set[str]:
    """The modules and subpackages directly in ``package``, by dotted name."""
    dotted = ".".join(package.relative_to(ROOT).parts)
    return {
        f"{dotted}.{path.stem}"
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }


def _banned(config: str) -> set[str]:
    return set(tomllib.loads((ROOT / config).read_text())["lint"]["flake8-tidy-imports"]["banned-api"])


@pytest.mark.parametrize(
    ("config", "package", "allowed"),
    [
        ("projections/ruff.toml", "app", {"app.store"}),
        ("app/store/ruff.toml", "app", {"app.store"}),
        ("app/cli/ruff.toml", "app/http", {"app.http.serving"}),
    ],
)
def test_every_part_of_a_package_a_layer_may_not_import_is_banned(config: str, package: str, allowed: set[str]) -> None:
    """ruff bans module prefixes, so a layer that may import one part of a package bans each of the
    others by name: a part added to the package must be added to the bans, or the layering leaks."""
    parts = _parts(ROOT / package)
    assert allowed <= parts
    assert sorted(parts - allowed - _banned(config)) == [], f"add them to {config}"
    assert not allowed & _banned(config)


@pytest.mark.parametrize("path", ["app/http/probe.py", "app/ledger/probe.py", "domain/probe.py", "scripts/probe.py"])
def test_a_function_of_more_than_six_arguments_fails_the_gate(path: str) -> None:
    """Records, not long argument lists (issue #28): the billed path once passed twelve."""
    source = "def f(a, b, c, d, e, g, h):\n    return a\n"
    result = subprocess.run(
        [str(RUFF), "check", "--no-cache", "--select", "PLR0913", "--stdin-filename", path, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stdout
    assert "PLR0913" in result.stdout
    six = subprocess.run(
        [str(RUFF), "check", "--no-cache", "--select", "PLR0913", "--stdin-filename", path, "-"],
        input="def f(a, b, c, d, e, g):\n    return a\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert six.returncode == 0, six.stdout
