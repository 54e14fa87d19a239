"""Headless Chromium (Debian's package, driven by Playwright), launched once per module that uses it.

Without Chromium the tests that use it fail, never skip: CI installs it (``apt-get install
chromium``); ``TOLLGATE_TEST_CHROMIUM`` points elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = os.environ.get("TOLLGATE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: the browser tests need it. Install Debian's chromium "
            "package (apt-get install chromium) or set TOLLGATE_TEST_CHROMIUM to a Chromium binary."
        )
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
