"""The /schema page is served entirely by the gateway: its viewer (Redoc) is vendored in the
package, and the page and the dashboard — same origin, whose tab keeps keys — may run scripts from
the gateway only (Content-Security-Policy), checked in headless Chromium."""

from __future__ import annotations

import hashlib
import re

from playwright.sync_api import Browser

from app.http.schema_page import REDOC_SHA256, redoc_script
from tests.support import plain_http
from tests.support.gateway import Gateway


def _directives(policy: str) -> dict[str, list[str]]:
    return {name: values for name, *values in (part.split() for part in policy.split(";") if part.strip())}


def test_the_vendored_viewer_is_the_file_its_hash_names():
    assert hashlib.sha256(redoc_script()).hexdigest() == REDOC_SHA256


def test_the_schema_page_loads_its_viewer_from_the_gateway_under_a_policy_that_forbids_other_origins(gateway: Gateway):
    page = plain_http.get(gateway.root_url + "/schema")
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]
    assert re.findall(r"<script[^>]*>", page.text) == ['<script src="/schema/redoc.standalone.js">']
    assert "http://" not in page.text
    assert "https://" not in page.text
    policy = _directives(page.headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    script = plain_http.get(gateway.root_url + "/schema/redoc.standalone.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert hashlib.sha256(script.content).hexdigest() == REDOC_SHA256


def test_the_dashboard_runs_only_its_own_inline_script(gateway: Gateway):
    policy = _directives(plain_http.get(gateway.root_url + "/dashboard").headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"]
    assert policy["connect-src"] == ["'self'"]
    assert all(value.startswith("'sha256-") for value in policy["script-src"])


def test_the_schema_page_renders_in_a_browser_fetching_nothing_from_elsewhere(browser: Browser, gateway: Gateway):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    fetched: list[str] = []
    console: list[str] = []
    tab.on("request", lambda r: fetched.append(r.url))
    tab.on("console", lambda m: console.append(m.text))
    tab.goto(gateway.root_url + "/schema")
    tab.wait_for_selector("text=OpenAI Chat Completions, billed to the key's team", timeout=30_000)
    assert tab.locator("h1").first.text_content().startswith("Tollgate")  # type: ignore[union-attr]
    context.close()
    elsewhere = [url for url in fetched if not url.startswith((gateway.root_url + "/", "blob:", "data:"))]
    assert not elsewhere, f"the page fetched something other than the gateway: {elsewhere}"
    assert f"{gateway.root_url}/schema/openapi.json" in fetched
    refused = [m for m in console if "Content Security Policy" in m]
    assert not refused, f"the viewer broke the page's Content-Security-Policy: {refused}"
