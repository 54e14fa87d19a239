"""A Microsoft Entra ID access token for an Azure OpenAI deployment, from a service principal.

The OAuth 2.0 client-credentials grant of the Microsoft identity platform (v2.0): the application's
id and secret are exchanged at ``{authority_host}/{tenant_id}/oauth2/v2.0/token`` for a token of the
scope ``https://cognitiveservices.azure.com/.default``, which lasts about an hour. It is refreshed
ahead of its expiry (five minutes early, or at half its life when it lives less than ten), so no
request leaves with a token that lapses on the way; the requests that find it stale together wait
for one refresh, not one each. The grant is a small, documented form POST, so it is made here with
httpx (already a dependency) rather than through a client library that insists on HTTPS and
instance discovery, which a local fake of the token endpoint cannot offer.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from app.errors import UpstreamFailure

#: The Microsoft identity platform's host in Azure's public cloud (sovereign clouds have their own).
PUBLIC_AUTHORITY = "https://login.microsoftonline.com"
SCOPE = "https://cognitiveservices.azure.com/.default"
#: How early a token is refreshed: five minutes, or half its life if that is shorter.
EARLY = 300.0


class EntraToken:
    """The bearer header of one service principal, refreshed before it expires."""

    def __init__(self, authority_host: str, tenant_id: str, client_id: str, client_secret: str) -> None:
        self.url = f"{authority_host.rstrip('/')}/{tenant_id}/oauth2/v2.0/token"
        self._form = {
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client_secret,
            "scope": SCOPE,
        }
        self._token = ""
        self._refresh_at = 0.0
        self._lock = asyncio.Lock()
        self._client: httpx.AsyncClient | None = None

    async def header(self) -> dict[str, str]:
        if self._stale():
            async with self._lock:
                if self._stale():  # another request may have refreshed it meanwhile
                    await self._refresh()
        return {"authorization": f"Bearer {self._token}"}

    def _stale(self) -> bool:
        return not self._token or time.monotonic() >= self._refresh_at

    async def _refresh(self) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0))
        try:
            answer = await self._client.post(self.url, data=self._form)
        except httpx.HTTPError as exc:
            raise UpstreamFailure(f"Microsoft Entra ID could not be reached for a token: {exc}") from None
        try:
            body = answer.json()
        except ValueError:
            body = {}
        if answer.status_code != 200 or not isinstance(body, dict) or not body.get("access_token"):
            said = body.get("error_description") or body.get("error") if isinstance(body, dict) else None
            why = said or answer.text[:200]
            raise UpstreamFailure(
                f"Microsoft Entra ID refused the deployment's credentials ({answer.status_code}): {why}"
            )
        lifetime = float(body.get("expires_in") or 3600)
        self._token = str(body["access_token"])
        self._refresh_at = time.monotonic() + lifetime - min(EARLY, lifetime / 2)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
