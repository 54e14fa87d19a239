"""The page at ``/schema``: the OpenAPI document rendered by Redoc, served entirely by the gateway.

The viewer used to come from a CDN with no integrity hash, on the origin of ``/dashboard``, whose
tab keeps the keys it was given (the admin key among them) in sessionStorage: whoever could change
that file could read them. Redoc's standalone bundle (2.5.2, MIT; ``static/redoc.LICENSE`` and
``static/redoc.standalone.js.LICENSE.txt``) is vendored here instead, served from
``/schema/redoc.standalone.js``, and every ``/schema`` answer carries a Content-Security-Policy
that lets the page run scripts from this gateway only and send requests nowhere else. Redoc is a
reader: it has no "try it" form, so the page never asks for a key.

One change is made to the bundle: the Redocly logo in its sidebar, which it loads from
cdn.redoc.ly, has the empty image ``data:,`` as its source (so it is not shown, and nothing is
fetched from elsewhere). To upgrade: ``npm pack redoc@VERSION``, copy
``package/bundles/redoc.standalone.js`` and its licence files here, make that change
(``src:"https://cdn.redoc.ly/redoc/logo-mini.svg"`` → ``src:"data:,"``), and update
``REDOC_SHA256``; a test checks the file against it, and the page in a browser.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from litestar import MediaType, Request, Response, Router, get
from litestar.datastructures import CacheControlHeader, ResponseHeader
from litestar.openapi.plugins import OpenAPIRenderPlugin

REDOC_VERSION = "2.5.2"
#: The published bundle's SHA-256 is 6beb5aea23b71d09122ee35de8f326e38aec050e774f3bfba1f34e5c36608986;
#: with the change above, this:
REDOC_SHA256 = "b71a129e7905f5e1b953961c6f79e5216b858f09f47e83aeceec163213fe1104"
SCRIPT_PATH = "/schema/redoc.standalone.js"

#: Scripts from this gateway only (no inline script, no eval); Redoc writes its styles inline and
#: runs its search in a worker made from a blob; fetches only the document, from this gateway.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; worker-src blob:; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}

_PAGE = f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Tollgate API</title>
</head>
<body>
  <redoc spec-url="/schema/openapi.json" hide-download-button></redoc>
  <script src="{SCRIPT_PATH}"></script>
</body>
</html>
"""


@cache
def redoc_script() -> bytes:
    return resources.files("app.http.schema_page").joinpath("static", "redoc.standalone.js").read_bytes()


@get(
    "/redoc.standalone.js",
    media_type="text/javascript",
    include_in_schema=False,
    cache_control=CacheControlHeader(max_age=86400, public=True),
)
async def redoc_standalone() -> Response[bytes]:
    return Response(redoc_script(), media_type="text/javascript")


class RedocPage(OpenAPIRenderPlugin):
    """The HTML page at ``/schema``: Redoc, from this gateway."""

    def __init__(self) -> None:
        super().__init__(path="/", media_type=MediaType.HTML)

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return _PAGE.encode()


def schema_router() -> Router:
    """The router every ``/schema`` route is served under, each answer with the security headers."""
    return Router(
        "/schema",
        route_handlers=[redoc_standalone],
        include_in_schema=False,
        response_headers=[ResponseHeader(name=k, value=v) for k, v in SECURITY_HEADERS.items()],
    )
