"""The fake Stripe's webhooks: events delivered, signed as Stripe signs them, when and as often as a test says.

Stripe POSTs each event to the endpoint as its JSON (``Content-Type: application/json; charset=utf-8``)
with ``Stripe-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the endpoint's
secret>``; as in the header Stripe's documentation shows, a ``v0`` signature under another key
follows, which a receiver must ignore (only the ``v1`` scheme is checked, against downgrades).
Stripe does not promise order or uniqueness: an event may arrive twice, late, or after one that came
later, and a delivery answered with anything but a 2xx is retried (with the same body, signed anew).
The test decides all of that here:

- by default an event is delivered as it happens (events of the fake's control API before the call
  returns; events of an API request from a thread of their own, as Stripe would, after it answered);
- :meth:`Webhooks.hold` keeps them instead, until :meth:`Webhooks.release` sends them in any order,
  each any number of times, at once from many threads if asked;
- :meth:`Webhooks.redeliver` sends one again, :meth:`Webhooks.retry_failed` every one whose last
  delivery failed (Stripe's retries, on demand).

Every attempt is kept in :attr:`Webhooks.deliveries`.
"""

from __future__ import annotations

import hashlib
import hmac
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from tests.support import plain_http
from tests.support.fake_stripe_objects import Obj, encode

#: The key of the ``v0`` signature test-mode deliveries also carry (not the endpoint's secret).
_V0_KEY = b"whsec_test_mode_v0_signature_key"
USER_AGENT = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"


def signature(payload: bytes, secret: str, timestamp: int) -> str:
    """The hex HMAC-SHA256 Stripe's ``v1`` scheme puts on ``f"{timestamp}.{payload}"``."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256).hexdigest()


@dataclass
class Delivery:
    """One POST of an event to the endpoint, and how it was answered (``status`` None: no answer)."""

    event_id: str
    type: str
    url: str
    payload: bytes
    signature: str
    status: int | None = None
    body: bytes = b""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Webhooks:
    """Where events go: ``url`` (None: nowhere, events are only listed), signed with ``secret``,
    those of ``enabled_events`` (``{"*"}``: all, as an endpoint listening to every event)."""

    def __init__(self, secret: str, clock: Callable[[], int]) -> None:
        self.url: str | None = None
        self.secret = secret
        self.enabled_events: set[str] = {"*"}
        self.deliveries: list[Delivery] = []
        self.pending: list[Obj] = []
        self._clock = clock
        self._held = False
        self._lock = threading.Lock()
        self._sent: dict[str, Obj] = {}
        self._queue: queue.Queue[Obj | None] = queue.Queue()
        self._busy = 0
        self._idle = threading.Condition(self._lock)
        #: One client for every delivery (building one, and its TLS context, costs tens of milliseconds).
        self._http = plain_http.Client(timeout=30.0)
        self._worker = threading.Thread(target=self._work, daemon=True, name="fake-stripe-webhooks")
        self._worker.start()

    # ----------------------------------------------------------------- signing
    def header(self, payload: bytes, timestamp: int | None = None, secret: str | None = None) -> str:
        """The ``Stripe-Signature`` header of ``payload`` (now, under the endpoint's secret, by default)."""
        t = self._clock() if timestamp is None else timestamp
        v0 = hmac.new(_V0_KEY, f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
        return f"t={t},v1={signature(payload, secret or self.secret, t)},v0={v0}"

    @staticmethod
    def payload(event: Obj) -> bytes:
        """The bytes an event is delivered as."""
        return encode(event)

    # ----------------------------------------------------------------- control
    def hold(self) -> None:
        """Keep events from now on in :attr:`pending` until :meth:`release`."""
        self._held = True

    def release(
        self,
        order: str | Sequence[str] = "created",
        *,
        copies: int = 1,
        concurrently: bool = False,
        urls: Sequence[str] | None = None,
    ) -> list[Delivery]:
        """Deliver the held events and stop holding. ``order``: ``"created"``, ``"reversed"``, or the
        event types or ids in the order wanted (those not named follow, as created). Each is sent
        ``copies`` times; ``concurrently``: all the sends start together, from a thread each; ``urls``:
        where the sends go, in turn (default: the endpoint's url)."""
        with self._lock:
            events, self.pending, self._held = self.pending, [], False
        if order == "reversed":
            events.reverse()
        elif order != "created":
            rank = {name: i for i, name in enumerate(order)}
            events.sort(key=lambda e: min(rank.get(e["id"], len(rank)), rank.get(e["type"], len(rank))))
        return self._send([e for e in events for _ in range(copies)], concurrently, urls)

    def redeliver(
        self, event_id: str, *, copies: int = 1, concurrently: bool = False, urls: Sequence[str] | None = None
    ) -> list[Delivery]:
        """Send an event already delivered (or held) again, ``copies`` times, signed anew."""
        event = self._sent.get(event_id) or next(e for e in self.pending if e["id"] == event_id)
        return self._send([event] * copies, concurrently, urls)

    def retry_failed(self) -> list[Delivery]:
        """Resend every event whose last delivery was not answered with a 2xx (Stripe's retries)."""
        last: dict[str, Delivery] = {}
        for d in self.deliveries:
            last[d.event_id] = d
        return self._send([self._sent[i] for i, d in last.items() if not d.ok], False, None)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until the events of API requests have been delivered."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy or not self._queue.empty():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("webhook deliveries still running")
                self._idle.wait(left)

    def of_type(self, kind: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.type == kind]

    def pending_for(self, event_id: str) -> int:
        """The event's ``pending_webhooks``: 1 while the endpoint has not answered it with a 2xx."""
        if self.url is None or (event_id not in self._sent and not any(e["id"] == event_id for e in self.pending)):
            return 0
        return 0 if any(d.ok for d in self.deliveries if d.event_id == event_id) else 1

    # ----------------------------------------------------------------- publishing
    def publish(self, events: list[Obj], *, now: bool) -> list[Delivery]:
        """New events: held, or delivered (``now``: in this thread, before returning; else by the worker)."""
        wanted = [e for e in events if self.url is not None and self._wanted(e["type"])]
        with self._lock:
            if self._held:
                self.pending.extend(wanted)
                return []
            if not now:
                self._busy += len(wanted)
        if now:
            return self._send(wanted, False, None)
        for e in wanted:
            self._queue.put(e)
        return []

    def _wanted(self, kind: str) -> bool:
        return "*" in self.enabled_events or kind in self.enabled_events

    def _work(self) -> None:
        while (event := self._queue.get()) is not None:
            try:
                self._send([event], False, None)
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _send(self, events: list[Obj], concurrently: bool, urls: Sequence[str] | None) -> list[Delivery]:
        targets = list(urls or ([self.url] if self.url else []))
        if not targets:
            return []
        jobs = [(e, targets[i % len(targets)]) for i, e in enumerate(events)]
        if not concurrently:
            return [self._post(e, url) for e, url in jobs]
        barrier = threading.Barrier(len(jobs))
        out: list[Delivery | None] = [None] * len(jobs)

        def run(i: int, e: Obj, url: str) -> None:
            barrier.wait()
            out[i] = self._post(e, url)

        threads = [threading.Thread(target=run, args=(i, e, url)) for i, (e, url) in enumerate(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [d for d in out if d is not None]

    def _post(self, event: Obj, url: str) -> Delivery:
        self._sent[event["id"]] = event
        body = self.payload({**event, "pending_webhooks": 1})
        header = self.header(body)
        delivery = Delivery(event["id"], event["type"], url, body, header)
        headers = {
            "content-type": "application/json; charset=utf-8",
            "stripe-signature": header,
            "user-agent": USER_AGENT,
            "cache-control": "no-cache",
            "accept": "*/*; q=0.5, application/xml",
        }
        try:
            answer = self._http.post(url, content=body, headers=headers)
            delivery.status, delivery.body = answer.status_code, answer.content
        except httpx.HTTPError as e:
            delivery.error = f"{type(e).__name__}: {e}"
        with self._lock:
            self.deliveries.append(delivery)
        return delivery

    def close(self) -> None:
        self._queue.put(None)
        self._worker.join(timeout=5)
        self._http.close()
