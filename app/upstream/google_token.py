"""A Google Cloud access token for a deployment, from a service account or Application Default Credentials.

google-auth does the work: it signs the service account's JWT, exchanges it at the token endpoint
the credentials file names (``token_uri``), and says when the token is about to expire (a few minutes
early, so that no request leaves with a token that lapses on the way). A refresh is a blocking HTTP
call, so it runs in a thread, and the requests that find the token stale together wait for one
refresh, not one each. The transport is google-auth's over urllib3, which botocore already brings.
"""

from __future__ import annotations

import asyncio
from typing import Any

import google.auth
import urllib3
from google.auth.exceptions import GoogleAuthError
from google.auth.transport.urllib3 import Request
from google.oauth2 import service_account

from app.errors import UpstreamFailure
from domain.settings import ConfigError, Settings
from domain.settings_checks import deployment_keys

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def load_credentials(credentials_file: str | None) -> Any:
    """The credentials of ``credentials_file`` (a service account's JSON key), or unset, Application
    Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's, the metadata server's); raises
    ``ValueError`` saying why they cannot be used."""
    try:
        if credentials_file:
            return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                credentials_file, scopes=SCOPES
            )
        credentials, _ = google.auth.default(scopes=SCOPES)
        return credentials
    except (OSError, ValueError, GoogleAuthError) as exc:
        raise ValueError(f"no usable Google credentials ({credentials_file or 'application default'}): {exc}") from exc


class GoogleToken:
    """The bearer header of one deployment's credentials, refreshed before it expires."""

    def __init__(self, credentials: Any) -> None:
        self._credentials = credentials
        self._lock = asyncio.Lock()
        self._request = Request(urllib3.PoolManager(num_pools=1, maxsize=1))  # type: ignore[no-untyped-call]

    async def header(self) -> dict[str, str]:
        if not self._credentials.valid:
            async with self._lock:
                if not self._credentials.valid:  # another request may have refreshed it meanwhile
                    await asyncio.to_thread(self._refresh)
        return {"authorization": f"Bearer {self._credentials.token}"}

    def _refresh(self) -> None:
        try:
            self._credentials.refresh(self._request)
        except GoogleAuthError as exc:
            raise UpstreamFailure(f"Google refused the deployment's credentials: {exc}") from None


def require_google_credentials(settings: Settings, origin: str) -> None:
    """Check, before serving, that every vertex deployment's credentials can be loaded."""
    for i, model in enumerate(settings.models):
        for where, upstream in deployment_keys(model, i):
            if upstream.kind == "vertex":
                try:
                    load_credentials(upstream.credentials_file)
                except ValueError as exc:
                    raise ConfigError(origin, f"{where}.credentials_file", str(exc)) from None
