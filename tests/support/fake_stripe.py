"""A fake of the few Stripe API routes credit top-ups use, on a loopback port, and its webhook endpoint.

Payment services cannot be reached from the test machines, so the ``stripe`` library is pointed here
(``stripe.StripeClient(key, base_addresses={"api": fake.base_url})``) and the fake answers as Stripe
does, byte for byte where a client could tell: form-encoded requests with brackets
(``stripe_form.py``), ``Authorization: Bearer sk_test_…`` (or Basic, as curl sends it), Stripe's objects
(``fake_stripe_objects.py``) and errors (``{"error": {"type", "code", "message", "param", …}}`` with
Stripe's statuses: 400 refused parameters, 401 keys, 402 card errors, 404 unknown objects and URLs),
and the ``Idempotency-Key`` as Stripe keeps it: the first answer of a request that began executing is
saved with its key (a card decline too; a refused parameter is not), the same key with the same
parameters gets it again (``Idempotent-Replayed: true``), with other parameters or on another
endpoint an ``idempotency_error``. Requests are answered one at a time, so two with the same key
never both execute.

Routes (``fake_stripe_api.py``): Customers (create, retrieve, list), Checkout Sessions (create in
``mode=payment`` with ``price_data`` line items, retrieve, list), PaymentIntents (create, with
``confirm`` and ``off_session`` on a saved card; retrieve, list), Charges, Refunds (create), Disputes
and Events (list, with ``created`` bounds, ``type`` and cursors, newest first). A Session's ``url``
is the fake's own payment page (``/c/pay/{id}``: a Pay button that completes it and goes to its
``success_url``), so a browser test can follow it.

What a customer, a bank or Stripe's dashboard would do, the test does with the control API:
:meth:`FakeStripe.complete_checkout`, :meth:`~FakeStripe.settle_checkout`, :meth:`~FakeStripe.decline_next`,
:meth:`~FakeStripe.refund`, :meth:`~FakeStripe.dispute`, :meth:`~FakeStripe.close_dispute`; each
change makes Stripe's events, listed by ``/v1/events`` and delivered, signed, to the webhook URL
(:attr:`FakeStripe.webhooks`, ``fake_stripe_webhooks.py``: held, reordered, duplicated or redelivered
as the test says). Faults: :meth:`~FakeStripe.drop_next` executes a request and cuts the connection
before the answer (the library's retry, with the same key, gets the saved answer),
:meth:`~FakeStripe.fail_next` answers 500 before executing.

``tests/e2e/test_fake_stripe.py`` proves all of it with the official library.
Run standalone with ``python -m tests.support.fake_stripe --port 12111``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import html
import socket
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import uvicorn

from tests.support import fake_stripe_api as api
from tests.support.fake_stripe_account import Account, StripeError
from tests.support.fake_stripe_objects import API_VERSION, Obj, encode, new_id
from tests.support.fake_stripe_webhooks import Delivery, Webhooks
from tests.support.fake_upstream import Receive, Scope, Send, _drop
from tests.support.stripe_form import FormError, decode

API_KEY = "sk_test_51TollgateFakeStripeKey0000000000000000000000000000000000000000000000000000000000000"
WEBHOOK_SECRET = "whsec_tollgate_fake_stripe_webhook_secret_0000"
NO_KEY = (
    "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer "
    "auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for "
    "details, or we can help at https://support.stripe.com/."
)


@dataclass
class StripeRequest:
    """One API request as the fake saw it and answered it."""

    method: str
    path: str
    headers: dict[str, str]
    params: dict[str, Any]
    request_id: str
    status: int = 0
    replayed: bool = False


@dataclass
class _Saved:
    """An answer kept under its Idempotency-Key."""

    path: str
    params: dict[str, Any]
    status: int
    body: bytes
    request_id: str


@dataclass
class _Answer:
    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


def _redact(key: str) -> str:
    """How Stripe shows a wrong key: its prefix and last four characters."""
    prefix = key[: key.index("_", 3) + 1] if key.count("_") >= 2 else ""
    return prefix + "*" * max(len(key) - len(prefix) - 4, 0) + key[-4:]


class FakeStripe:
    """The fake Stripe API on a loopback port, in a thread of the test's process; use as a context manager."""

    def __init__(
        self, api_key: str = API_KEY, webhook_secret: str = WEBHOOK_SECRET, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.api_key, self.host, self.port = api_key, host, port
        self._offset = 0
        self.account = Account(self.now)
        self.webhooks = Webhooks(webhook_secret, self.now)
        self.requests: list[StripeRequest] = []
        self._saved: dict[str, _Saved] = {}
        self._faults: list[str] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The API base the library is given (it appends ``/v1/…``)."""
        return f"http://{self.host}:{self.port}"

    def now(self) -> int:
        """The fake's clock (Unix seconds): every ``created``, and the signatures' timestamps."""
        return int(time.time()) + self._offset

    def advance(self, seconds: int) -> None:
        """Move the fake's clock on (its objects and events are then created later)."""
        self._offset += seconds

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> FakeStripe:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self.account.checkout_url = self.base_url
        config = uvicorn.Config(
            self, loop="asyncio", http="h11", ws="none", lifespan="off", log_level="warning", access_log=False,
            log_config=None, timeout_graceful_shutdown=2,
        )  # fmt: skip
        self._server = server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="fake-stripe")
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake Stripe failed to start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.webhooks.close()
        self._server = self._thread = None

    def __enter__(self) -> FakeStripe:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # ----------------------------------------------------------------- control API
    def _control(self, change: Any) -> tuple[Obj, list[Delivery]]:
        """Run a change as Stripe's own doing (no API request), then deliver its events before returning."""
        with self.account.lock:
            obj = copy.deepcopy(change())
        return obj, self.webhooks.publish(self.account.take_outbox(), now=True)

    def complete_checkout(self, session_id: str, *, paid: bool = True) -> Obj:
        """The customer pays the Session: by card (``payment_status: paid``), or (``paid=False``) by a
        method that settles later (``unpaid``; then :meth:`settle_checkout`). Returns the Session."""
        return self._control(lambda: self.account.pay_session(session_id, paid=paid))[0]

    def settle_checkout(self, session_id: str, *, succeeded: bool = True) -> Obj:
        """A delayed payment of a completed Session settles, or fails."""
        return self._control(lambda: self.account.settle_session(session_id, succeeded=succeeded))[0]

    def decline_next(self, count: int = 1, code: str = "card_declined") -> None:
        """The next ``count`` confirmed PaymentIntents fail: ``card_declined`` or ``authentication_required``."""
        self.account.decline_next(count, code)

    def refund(self, target: str, amount: int | None = None, reason: str | None = None) -> Obj:
        """A refund made in the dashboard, of a PaymentIntent (``pi_…``) or charge (``ch_…``)."""
        param = "payment_intent" if target.startswith("pi_") else "charge"
        return self._control(lambda: self.account.refund(target, amount, reason, {}, param))[0]

    def dispute(
        self, target: str, *, amount: int | None = None, reason: str = "fraudulent", inquiry: bool = False
    ) -> Obj:
        """The cardholder disputes a payment: a chargeback, or (``inquiry``) a question with no money taken."""
        return self._control(lambda: self.account.dispute(target, amount, reason, inquiry))[0]

    def close_dispute(self, dispute_id: str, *, won: bool) -> Obj:
        return self._control(lambda: self.account.close_dispute(dispute_id, won))[0]

    def saved_cards(self, customer_id: str) -> list[str]:
        """The ids of the cards saved to a customer (by a Session with ``setup_future_usage``)."""
        with self.account.lock:
            return [pm["id"] for pm in self.account.objects["payment_method"].values() if pm["customer"] == customer_id]

    def drop_next(self, count: int = 1) -> None:
        """Execute the next ``count`` requests, then cut each connection before its answer."""
        self._faults.extend(["drop"] * count)

    def fail_next(self, count: int = 1) -> None:
        """Answer the next ``count`` requests with Stripe's 500 ``api_error``, before executing them."""
        self._faults.extend(["fail"] * count)

    # ----------------------------------------------------------------- the API
    def _authenticate(self, headers: dict[str, str]) -> None:
        auth = headers.get("authorization", "")
        if auth.startswith("Basic "):
            with contextlib.suppress(ValueError):
                auth = "Bearer " + base64.b64decode(auth[6:]).decode().partition(":")[0]
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            raise StripeError(401, {"message": NO_KEY, "type": "invalid_request_error"})
        if auth[7:] != self.api_key:
            raise StripeError(
                401, {"message": f"Invalid API Key provided: {_redact(auth[7:])}", "type": "invalid_request_error"}
            )

    def _execute(self, method: str, path: str, params: dict[str, Any], request: tuple[str, str | None]) -> Obj:
        found = api.find_route(method, path)
        if found is None:
            raise StripeError(404, {
                "message": f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs or we "
                "can help at https://support.stripe.com/.",
                "type": "invalid_request_error",
            })  # fmt: skip
        route, path_args = found
        expands = params.get("expand") or []
        with self.account.lock:
            self.account.request = request
            try:
                obj = copy.deepcopy(route(self.account, params, path_args))
                for event in obj["data"] if obj["object"] == "list" else [obj]:
                    if event["object"] == "event":  # how many endpoints still wait for it: known at answer time
                        event["pending_webhooks"] = self.webhooks.pending_for(event["id"])
                return api.expand(self.account, obj, expands if isinstance(expands, list) else [expands])
            finally:
                self.account.request = (None, None)

    def _idempotent(self, key: str, path: str, params: dict[str, Any]) -> _Saved | None:
        saved = self._saved.get(key)
        if saved is None:
            return None
        retry = f"Try using a key other than '{key}' if you meant to execute a different request."
        if saved.path != path:
            message = "Keys for idempotent requests can only be used for the same endpoint they were first used for "
            message += f"('{saved.path}' vs '{path}'). {retry}"
        elif saved.params != params:
            message = "Keys for idempotent requests can only be used with the same parameters they were first used "
            message += f"with. {retry}"
        else:
            return saved
        raise StripeError(400, {"message": message, "type": "idempotency_error"})

    def _serve(self, method: str, path: str, raw: bytes, headers: dict[str, str], query: str) -> _Answer:
        request_id = new_id("req_", 14)
        key = headers.get("idempotency-key") if method == "POST" else None
        params: dict[str, Any] = {}
        record = StripeRequest(method, path, headers, params, request_id)
        self.requests.append(record)
        extra = [(b"request-id", request_id.encode())]
        if key is not None:
            extra.append((b"idempotency-key", key.encode()))
        try:
            self._authenticate(headers)
            params.update(decode(raw.decode("utf-8", "replace") if method == "POST" else query))
            if self._faults and self._faults[0] == "fail":
                self._faults.pop(0)
                raise StripeError(500, {"message": "An unknown error occurred", "type": "api_error"})
            saved = self._idempotent(key, path, params) if key is not None else None
            if saved is not None:
                record.replayed = True
                extra += [(b"idempotent-replayed", b"true"), (b"original-request", saved.request_id.encode())]
                return _Answer(saved.status, saved.body, extra)
            status, body = 200, encode(self._execute(method, path, params, (request_id, key)))
            keep = True
        except FormError as e:
            error = {"message": e.message, "type": "invalid_request_error", "param": e.param, "code": e.code}
            status, body, keep = 400, self._error({k: v for k, v in error.items() if v is not None}, request_id), False
        except StripeError as e:
            status, body, keep = e.status, self._error(e.error, request_id), e.saved
        if key is not None and keep:
            self._saved[key] = _Saved(path, params, status, body, request_id)
            extra.append((b"original-request", request_id.encode()))
        return _Answer(status, body, extra)

    def _error(self, error: Obj, request_id: str) -> bytes:
        if "code" in error and "doc_url" not in error:
            error = {**error, "doc_url": f"https://stripe.com/docs/error-codes/{error['code'].replace('_', '-')}"}
        return encode({"error": {**error, "request_log_url": f"https://dashboard.stripe.com/test/logs/{request_id}"}})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return None
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path, query = scope["method"], scope["path"], scope["query_string"].decode("latin-1")
        if path.startswith("/c/pay/"):
            answer = self._payment_page(method, path[len("/c/pay/") :])
        else:
            answer = self._serve(method, path, raw, headers, query)
            self.requests[-1].status = answer.status
        self.webhooks.publish(self.account.take_outbox(), now=False)
        if self._faults and self._faults[0] == "drop":
            self._faults.pop(0)
            return await _drop(send, receive)
        version = headers.get("stripe-version", API_VERSION).encode()
        kind = b"text/html; charset=utf-8" if answer.body.startswith(b"<!doctype") else b"application/json"
        head = [(b"content-type", kind), (b"content-length", str(len(answer.body)).encode())]
        head += [(b"stripe-version", version), *answer.headers]
        await send({"type": "http.response.start", "status": answer.status, "headers": head})
        await send({"type": "http.response.body", "body": answer.body, "more_body": False})

    def _payment_page(self, method: str, session_id: str) -> _Answer:
        """Checkout's page, reduced to a Pay button: POST pays by card and goes to the ``success_url``."""
        try:
            with self.account.lock:
                session = copy.deepcopy(self.account.get("checkout.session", session_id))
                if method == "POST":
                    session = copy.deepcopy(self.account.pay_session(session_id))
        except (StripeError, ValueError) as e:
            return _Answer(400, f"<!doctype html><p>{html.escape(str(e))}</p>".encode())
        if method == "POST":
            target = (session["success_url"] or "").replace("{CHECKOUT_SESSION_ID}", session_id)
            if target:
                return _Answer(303, b"<!doctype html>", [(b"location", target.encode())])
            return _Answer(200, b"<!doctype html><h1>Payment complete</h1>")
        amount = f"{session['amount_total'] / 100:.2f} {session['currency'].upper()}"
        page = (
            f"<!doctype html><title>Pay</title><h1>Pay {html.escape(amount)}</h1>"
            f'<form method="post"><button type="submit">Pay</button></form>'
        )
        return _Answer(200, page.encode())


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground, deliver webhooks to ``--webhook-url`` (Ctrl-C to stop)."""
    p = argparse.ArgumentParser(description="Fake Stripe API")
    p.add_argument("--port", type=int, default=12111)
    p.add_argument("--webhook-url")
    a = p.parse_args(argv)
    fake = FakeStripe(port=a.port)
    fake.webhooks.url = a.webhook_url
    fake.start()
    print(f"fake Stripe on {fake.base_url} (key {fake.api_key}, webhook secret {fake.webhooks.secret})", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)
    fake.stop()


if __name__ == "__main__":
    main()
