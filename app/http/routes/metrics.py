"""``GET /metrics`` on the gateway's own port, for Prometheus, behind the admin key.

Metrics name teams' models and their traffic, so on the public port they need the admin key
(``authorization: Bearer ADMIN_KEY`` in Prometheus' scrape config). With ``metrics_port`` set they
are served on a listener of their own instead (``app/runtime.py``) and this route does not exist.
"""

from __future__ import annotations

import asyncio

from litestar import Response, get

from app.http.routes.admin_common import require_admin
from app.observability.metrics import exposition


@get(
    "/metrics",
    before_request=require_admin,
    summary="Prometheus metrics (admin key)",
    tags=["operations"],
    media_type="text/plain",
)
async def metrics() -> Response[bytes]:
    body, content_type = await asyncio.to_thread(exposition)
    # Litestar adds the charset to a text/* type itself: given Prometheus' type whole, it said it twice.
    return Response(body, media_type=content_type.replace("; charset=utf-8", ""))
