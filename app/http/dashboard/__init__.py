"""The team dashboard at /dashboard: one self-contained page, and the JSON API it reads.

A team signs in with one of its API keys to see its balance, recent requests, usage by model and
day, and its whole audit history (with CSV and JSON Lines export); the admin key may pick any team.
The page is plain HTML, CSS and JavaScript shipped inside the package and inlined into one answer,
so it needs no build step and fetches nothing but this gateway's own API.

- ``access``: who signed in (the same keys the gateway already knows) and which team they may read.
- ``views``: the API's answers as typed structs (exact decimal credits; documented at /schema).
- ``api``: the JSON endpoints under /dashboard/api.
- ``page``: the page itself, assembled from ``static/`` with a Content-Security-Policy.
"""

from litestar import Router

from app.http.dashboard.api import dashboard_api
from app.http.dashboard.page import dashboard_page

dashboard_router = Router(path="/", route_handlers=[dashboard_page, dashboard_api])

__all__ = ["dashboard_router"]
