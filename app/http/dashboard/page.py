"""The dashboard page: static HTML, CSS and JavaScript from ``static/``, inlined into one answer.

The files stay separate in the package so each is easy to read and edit, with no build step; they
are joined once, when first served, so the browser needs exactly one request for the page. The
answer's Content-Security-Policy allows only those inline blocks (by their SHA-256 hashes) and
requests to this gateway: the page can load nothing from anywhere else, and script injected into
it would not run — which matters, because the page holds an API key.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources

from litestar import MediaType, Response, get
from litestar.datastructures import CacheControlHeader

#: Joined in this order into one <script>: the chart first, the page's logic (which uses it) after.
_SCRIPTS = ("chart.js", "dashboard.js")


def _static(name: str) -> str:
    return resources.files("app.http.dashboard").joinpath("static", name).read_text(encoding="utf-8")


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


@cache
def assembled() -> tuple[str, str]:
    """The page's HTML and its Content-Security-Policy."""
    style = "\n" + _static("dashboard.css")
    script = "\n" + "\n".join(_static(name) for name in _SCRIPTS)
    html = (
        _static("index.html")
        .replace("<!-- style -->", f"<style>{style}</style>")
        .replace("<!-- script -->", f"<script>{script}</script>")
    )
    policy = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; connect-src 'self'; "
        "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return html, policy


@get(
    ["/dashboard", "/dashboard/"],
    media_type=MediaType.HTML,
    cache_control=CacheControlHeader(no_cache=True),
    tags=["dashboard"],
)
async def dashboard_page() -> Response[str]:
    """The team dashboard: sign in with a team API key or the admin key (kept in the browser tab only)."""
    html, policy = assembled()
    return Response(
        html,
        media_type=MediaType.HTML,
        headers={
            "Content-Security-Policy": policy,
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
        },
    )
