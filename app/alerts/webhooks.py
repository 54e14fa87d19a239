"""Delivering alerts to the configured webhooks: at least once, signed, retried with backoff.

The alerts come from the outbox (``projections/alerts.py``), which the history projection fills
from the ``AlertRaised`` events, so an alert recorded by any process — even one that died a moment
later — is delivered by whichever process runs this. Each attempt is claimed in the database first
(``AlertOutbox.claim``), so the processes of one ledger do not all send the same alert at once; an
attempt that fails (a connection refused, a timeout, a status other than 2xx) is tried again after a
wait that doubles from half a second up to ``webhook_retry_max_seconds``, for as long as it takes.
A receiver may see an alert twice (a 2xx lost on the way back): ``x-tollgate-alert-id`` is the
idempotency key it deduplicates by.

Every attempt is signed afresh (:func:`signature`): ``x-tollgate-signature: t=<unix seconds>,v1=<hex>``,
the HMAC-SHA256, under the webhook's secret, of ``<t>.<alert id>.<body>``. The timestamp lets a
receiver refuse an old request replayed (it checks ``t`` is within a few minutes of its clock), and
the id is signed with the body, so a replay under a fresh id — to pass deduplication — fails the
signature. A webhook without a secret cannot be configured, and ``tollgate serve`` refuses to start
while a secret's variable is unset (``domain/settings.py``): an unsigned alert cannot be told from a
forged one.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from datetime import UTC, datetime

import httpx

from app.store.database import Database, Sql
from domain.settings import Settings, Webhook
from projections.alerts import AlertOutbox, alert_body

log = logging.getLogger("tollgate.alerts")

#: How often the outbox is looked at, in seconds.
POLL_SECONDS = 0.25
#: How long a claimed attempt is this process's before another may try (longer than a request's timeout).
CLAIM_SECONDS = 30.0
REQUEST_TIMEOUT = 10.0
FIRST_RETRY = 0.5


def signed_payload(timestamp: int, alert_id: str, body: bytes) -> bytes:
    """What the signature covers: the attempt's instant, the alert's id and the exact body."""
    return f"{timestamp}.{alert_id}.".encode() + body


def signature(secret: str, timestamp: int, alert_id: str, body: bytes) -> str:
    """``x-tollgate-signature``: ``t=<timestamp>,v1=<hex HMAC-SHA256 of the signed payload>``."""
    digest = hmac.new(secret.encode(), signed_payload(timestamp, alert_id, body), hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def retry_after(attempts: int, longest: float) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt."""
    return min(longest, FIRST_RETRY * float(2 ** max(0, attempts - 1)))


class WebhookDelivery:
    """A thread that sends every due alert to every webhook, until stopped."""

    def __init__(self, database: Database, settings: Settings) -> None:
        self._database = database
        self._hooks = list(settings.webhooks)
        self._secrets = {hook.url: os.environ.get(hook.secret_env, "") for hook in self._hooks}
        unset = [hook.secret_env for hook in self._hooks if not self._secrets[hook.url]]
        if unset:  # `tollgate serve` said so already, naming the file; never send an alert unsigned
            raise ValueError(f"the webhook secret's environment variable {unset[0]} is not set")
        self._longest = float(settings.webhook_retry_max_seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tollgate-alert-webhooks", daemon=True)

    def start(self) -> WebhookDelivery:
        if self._hooks:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=REQUEST_TIMEOUT + 1)

    def _run(self) -> None:
        sql = Sql(self._database)
        try:
            with httpx.Client(timeout=REQUEST_TIMEOUT) as client:
                outbox = AlertOutbox(sql)
                while not self._stop.wait(POLL_SECONDS):
                    for hook in self._hooks:
                        try:
                            self._deliver_due(outbox, client, hook)
                        except Exception:
                            log.warning(
                                "alert delivery to %s paused: the outbox could not be read", hook.url, exc_info=True
                            )
        finally:
            sql.close()

    def _deliver_due(self, outbox: AlertOutbox, client: httpx.Client, hook: Webhook) -> None:
        secret = self._secrets[hook.url]
        for alert in outbox.due(hook.url, time.time()):
            if self._stop.is_set() or not outbox.claim(hook.url, alert, time.time() + CLAIM_SECONDS):
                continue
            body, alert_id = alert_body(alert), alert["alert_id"]
            headers = {
                "content-type": "application/json",
                "x-tollgate-alert-id": alert_id,
                "x-tollgate-signature": signature(secret, int(time.time()), alert_id, body),
                "user-agent": "tollgate-alerts",
            }
            error = self._post(client, hook.url, body, headers)
            if error is None:
                outbox.delivered(hook.url, alert["alert_id"], datetime.now(UTC).isoformat())
            else:
                attempts = int(alert["attempts"]) + 1
                outbox.failed(hook.url, alert["alert_id"], time.time() + retry_after(attempts, self._longest), error)

    @staticmethod
    def _post(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> str | None:
        """None if the receiver took the alert (2xx), else why not."""
        try:
            answer = client.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if 200 <= answer.status_code < 300:
            return None
        return f"HTTP {answer.status_code}"
