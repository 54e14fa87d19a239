"""Screenshots taken by the browser tests, listed at the end of the run.

Each is saved under the test's tmp_path and copied to ``test-artifacts/`` at the repository root
(ignored by git), where CI and people find it without digging through pytest's temporary folders;
``pytest_terminal_summary`` in tests/conftest.py prints where they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TAKEN: list[Path] = []


def keep(page: Any, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot of a Playwright page, as ``tmp_path / name`` and ``test-artifacts/name``."""
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    ARTIFACTS.mkdir(exist_ok=True)
    copy = shutil.copyfile(shot, ARTIFACTS / name)
    TAKEN.extend([shot, copy])
    return shot


def report(terminal: Any) -> None:
    if TAKEN:
        terminal.section("screenshots")
        for path in TAKEN:
            terminal.write_line(str(path))
