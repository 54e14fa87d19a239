"""The layering is enforced by the lint (README, "Layout"): each layer's ``ruff.toml`` bans the
imports it must not make. These run the project's ruff on a one-line module placed, by name, in each
layer, so a configuration that stopped biting would fail here, not go quiet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RUFF = Path(sys.executable).parent / "ruff"


def lint(path: str, source: str) -> subprocess.CompletedProcess[str]:
    """ruff's verdict on ``source`` as if it were the file ``path`` of the checkout."""
    return subprocess.run([str(RUFF), "check", "--no-cache", "--select", "TID", "--stdin-filename", path, "-"],
                          input=source, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)


@pytest.mark.parametrize(("path", "source"), [
    ("domain/probe.py", "import httpx\n"),
    ("domain/probe.py", "import psycopg\n"),
    ("domain/probe.py", "from app.keys import hash_key\n"),
    ("domain/probe.py", "from app.store.event_store import LedgerStore\n"),
    ("projections/probe.py", "from app.ledger.writer import LedgerWriter\n"),
    ("app/ledger/probe.py", "from app.http.relay import serve\n"),
    ("app/runtime_probe.py", "from app.http.routes.models import ModelListCache\n"),
    ("app/http/probe.py", "from scripts.bench.options import add_bench_arguments\n"),
    ("app/cli/probe.py", "import scripts.bench\n"),
    ("app/ledger/probe.py", "from .writer import LedgerWriter\n"),  # relative imports would slip past the bans
])
def test_an_import_across_the_layering_fails_the_gate(path: str, source: str) -> None:
    result = lint(path, source)
    assert result.returncode == 1, result.stdout
    assert "TID25" in result.stdout


@pytest.mark.parametrize(("path", "source"), [
    ("domain/probe.py", "from domain.money import format_credits\n"),
    ("projections/probe.py", "from domain.ledger import TeamLedger\n"),
    ("app/ledger/probe.py", "from app.store.event_store import LedgerStore\n"),
    ("app/cli/probe.py", "from app.http.serving import serve\n"),
    ("app/http/probe.py", "from app.ledger.service import LedgerService\n"),
    ("scripts/probe.py", "from scripts.bench.options import add_bench_arguments\n"),
])
def test_an_import_down_the_layering_passes(path: str, source: str) -> None:
    result = lint(path, source)
    assert result.returncode == 0, result.stdout
