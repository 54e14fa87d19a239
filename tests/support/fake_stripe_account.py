"""The fake Stripe's account: its objects, how each changes, and the events each change makes.

One instance holds a test-mode account's customers, Checkout Sessions, PaymentIntents, charges,
refunds and disputes, and every event, newest last. Requests (``fake_stripe_api.py``) and the test's
control calls (``FakeStripe.complete_checkout``, ``refund``, ``dispute``, …) change it the way Stripe
would, under one lock, each change recording its events (:attr:`Account.outbox`) for the caller to
publish to the webhook endpoint once the lock is released.

The lifecycles kept:

- a Checkout Session (mode ``payment``) is ``open`` until the customer pays: then ``complete`` with
  ``payment_status`` ``paid`` (a card) or ``unpaid`` (a delayed method, settled later as
  ``checkout.session.async_payment_succeeded`` or ``_failed``); its PaymentIntent (none before the
  payment, since API version 2022-08-01) gets ``payment_intent_data``'s metadata, not the Session's,
  and with ``setup_future_usage`` its card is saved to the Session's customer for off-session use;
- a PaymentIntent created with ``confirm=true`` is attempted at once: it succeeds, or (the next
  declines the test queued, :meth:`Account.decline_next`) fails with a ``card_error`` and
  ``requires_payment_method``; each attempt makes a charge, which copies the PaymentIntent's
  metadata (once, as Stripe does);
- refunds add to a charge's ``amount_refunded`` up to its amount; disputes open
  (``needs_response``, or ``warning_needs_response`` for an inquiry) and close ``won`` or ``lost``
  (``warning_closed``).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

from tests.support import fake_stripe_money as money
from tests.support import fake_stripe_objects as shapes
from tests.support.fake_stripe_objects import Obj, new_id

#: The smallest amount Stripe charges in a few currencies (minor units), and its symbol.
MINIMUMS = {"usd": (50, "$"), "eur": (50, "€"), "gbp": (30, "£")}
MAXIMUM = 99_999_999
#: What each object kind is called in Stripe's "No such …" errors, and its URL.
NAMES = {
    "customer": ("customer", "/v1/customers"),
    "checkout.session": ("checkout.session", "/v1/checkout/sessions"),
    "payment_intent": ("payment_intent", "/v1/payment_intents"),
    "payment_method": ("PaymentMethod", "/v1/payment_methods"),
    "charge": ("charge", "/v1/charges"),
    "refund": ("refund", "/v1/refunds"),
    "dispute": ("dispute", "/v1/disputes"),
    "event": ("event", "/v1/events"),
}


class StripeError(Exception):
    """An API error as Stripe answers it. ``saved``: the request had begun executing, so an
    Idempotency-Key replays this answer (a card decline); a refused parameter is not saved."""

    def __init__(self, status: int, error: Obj, *, saved: bool = False) -> None:
        super().__init__(error.get("message"))
        self.status, self.error, self.saved = status, error, saved


def invalid(message: str, param: str | None = None, code: str | None = None, status: int = 400) -> StripeError:
    error: Obj = {"message": message, "type": "invalid_request_error"}
    if param is not None:
        error["param"] = param
    if code is not None:
        error["code"] = code
        error["doc_url"] = f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}"
    return StripeError(status, error)


def _money(amount: int, currency: str) -> str:
    symbol = MINIMUMS.get(currency, (0, ""))[1]
    return f"{symbol}{amount / 100:,.2f}" if symbol else f"{amount} {currency}"


class Account:
    """A test-mode Stripe account (thread-safe: every method takes the lock)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.objects: dict[str, dict[str, Obj]] = {kind: {} for kind in NAMES}
        self.events: list[Obj] = []
        self.outbox: list[Obj] = []
        #: The API request being served (its id, its Idempotency-Key), named by the events it causes.
        self.request: tuple[str | None, str | None] = (None, None)
        #: Where a Session's ``url`` points: the fake's own payment page (``FakeStripe`` sets it).
        self.checkout_url = "https://checkout.stripe.com"
        #: Each object's place in the order of creation: the tie-break of lists, within a second.
        self.order: dict[str, int] = {}
        self._declines: list[str] = []
        self._async: dict[str, Obj] = {}  # a Session's payment_intent_data, until it is paid

    # ----------------------------------------------------------------- basics
    def _keep(self, kind: str, obj: Obj) -> Obj:
        self.order.setdefault(obj["id"], len(self.order))
        self.objects[kind][obj["id"]] = obj
        return obj

    def get(self, kind: str, oid: str, param: str | None = "id") -> Obj:
        found = self.objects[kind].get(oid)
        if found is None:
            raise invalid(
                f"No such {NAMES[kind][0]}: '{oid}'", param, "resource_missing", 404 if param == "id" else 400
            )
        return found

    def emit(self, kind: str, obj: Obj, previous: Obj | None = None) -> None:
        data: Obj = {"object": copy.deepcopy(obj)}
        if previous is not None:
            data["previous_attributes"] = previous
        event = shapes.event(new_id("evt_"), self.clock(), kind, data, self.request)
        self._keep("event", event)
        self.events.append(event)
        self.outbox.append(event)

    def take_outbox(self) -> list[Obj]:
        with self.lock:
            out, self.outbox = self.outbox, []
            return out

    def decline_next(self, count: int, code: str) -> None:
        if code not in money.DECLINES:
            raise ValueError(f"unknown decline {code!r}: one of {sorted(money.DECLINES)}")
        with self.lock:
            self._declines.extend([code] * count)

    @staticmethod
    def check_amount(amount: int, currency: str, param: str = "amount") -> None:
        least = MINIMUMS.get(currency, (1, ""))[0]
        if amount < least:
            raise invalid(f"Amount must be at least {_money(least, currency)} {currency}", param, "amount_too_small")
        if amount > MAXIMUM:
            raise invalid(f"Amount must be no more than {_money(MAXIMUM, currency)}", param, "amount_too_large")

    # ----------------------------------------------------------------- customers and sessions
    def create_customer(self, email: str | None, name: str | None, description: str | None, metadata: Obj) -> Obj:
        with self.lock:
            made = self._keep(
                "customer", shapes.customer(new_id("cus_", 14), self.clock(), email, name, description, metadata)
            )
            self.emit("customer.created", made)
            return made

    def create_session(self, fields: Obj, intent_data: Obj) -> Obj:
        """A new open Session; ``intent_data``: ``payment_intent_data`` (``metadata``, ``description``,
        ``setup_future_usage``), kept for the PaymentIntent its payment makes."""
        with self.lock:
            if fields.get("customer") is not None:
                self.get("customer", fields["customer"], "customer")
            sid = new_id("cs_test_a1", 56)
            fields = {**fields, "url": f"{self.checkout_url}/c/pay/{sid}"}
            made = self._keep("checkout.session", shapes.checkout_session(sid, self.clock(), fields))
            self._async[sid] = intent_data
            return made

    def pay_session(self, sid: str, *, paid: bool = True) -> Obj:
        """The customer pays: by card (``paid``), or by a method that settles later (``unpaid``)."""
        with self.lock:
            session = self.get("checkout.session", sid)
            if session["status"] != "open":
                raise ValueError(f"{sid} is {session['status']}, not open")
            data = self._async[sid]
            saving = data.get("setup_future_usage") is not None
            if session["customer"] is None and (session.get("customer_creation") == "always" or saving):
                # Stripe makes the payer a Customer on completion: always when asked, and whenever the
                # card is saved for later (a saved PaymentMethod belongs to a Customer).
                details = shapes.customer_details(session["customer_email"])
                made = self.create_customer(details["email"], None, None, {})
                session["customer"] = made["id"]
            pm = self._card(session["customer"], save=saving)
            intent = self._keep(
                "payment_intent",
                shapes.payment_intent(
                    new_id("pi_3"),
                    self.clock(),
                    {
                        "amount": session["amount_total"],
                        "currency": session["currency"],
                        "customer": session["customer"],
                        "description": data.get("description"),
                        "metadata": dict(data.get("metadata") or {}),
                        "payment_method": pm["id"],
                        "setup_future_usage": data.get("setup_future_usage"),
                    },
                ),
            )
            self.emit("payment_intent.created", intent)
            session.update(
                status="complete",
                payment_intent=intent["id"],
                customer_details=shapes.customer_details(session["customer_email"]),
                collected_information={"business_name": None, "individual_name": None, "shipping_details": None},
            )
            if paid:
                self._attempt(intent, "succeeded")
                session["payment_status"] = "paid"
            else:
                self._attempt(intent, "pending")
                self.emit("payment_intent.processing", intent)
            self.emit("checkout.session.completed", session)
            return session

    def settle_session(self, sid: str, *, succeeded: bool = True) -> Obj:
        """A delayed payment settles: ``checkout.session.async_payment_succeeded`` (or ``_failed``)."""
        with self.lock:
            session = self.get("checkout.session", sid)
            if session["status"] != "complete" or session["payment_status"] != "unpaid":
                raise ValueError(f"{sid} has no payment waiting to settle")
            intent = self.get("payment_intent", session["payment_intent"])
            charged = self.get("charge", intent["latest_charge"])
            if succeeded:
                charged.update(status="succeeded", paid=True, captured=True, amount_captured=charged["amount"])
                self.emit("charge.succeeded", charged)
                intent.update(status="succeeded", amount_received=intent["amount"])
                self.emit("payment_intent.succeeded", intent)
                session["payment_status"] = "paid"
                self.emit("checkout.session.async_payment_succeeded", session)
            else:
                charged.update(status="failed", failure_code="card_declined", failure_message="Your card was declined.")
                self.emit("charge.failed", charged)
                intent.update(status="requires_payment_method", last_payment_error=self._error(intent, "card_declined"))
                self.emit("payment_intent.payment_failed", intent)
                self.emit("checkout.session.async_payment_failed", session)
            return session

    # ----------------------------------------------------------------- payments
    def _card(self, customer_id: str | None, *, save: bool) -> Obj:
        """A Visa card the customer entered; saved to the customer (for off-session use) when asked."""
        pm = shapes.payment_method(new_id("pm_1"), self.clock(), customer_id if save else None)
        self._keep("payment_method", pm)
        if save and customer_id is not None:
            self.emit("payment_method.attached", pm)
        return pm

    def _error(self, intent: Obj, code: str) -> Obj:
        message, decline_code = money.DECLINES[code]
        return {
            "charge": intent["latest_charge"],
            "code": code,
            "decline_code": decline_code,
            "doc_url": f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}",
            "message": message,
            "payment_method": copy.deepcopy(self.objects["payment_method"].get(intent["payment_method"])),
            "type": "card_error",
        }

    def _attempt(self, intent: Obj, ending: str) -> Obj:
        """One attempt to collect ``intent``: its charge, and the PaymentIntent's new state."""
        charged = self._keep("charge", money.charge(new_id("ch_3"), self.clock(), intent, ending))
        intent["latest_charge"] = charged["id"]
        if ending == "succeeded":
            intent.update(status="succeeded", amount_received=intent["amount"])
            self.emit("charge.succeeded", charged)
            self.emit("payment_intent.succeeded", intent)
        elif ending == "pending":
            intent["status"] = "processing"
            self.emit("charge.pending", charged)
        else:
            intent.update(status="requires_payment_method", last_payment_error=self._error(intent, ending))
            self.emit("charge.failed", charged)
            self.emit("payment_intent.payment_failed", intent)
        return charged

    def create_payment_intent(self, fields: Obj, *, confirm: bool, off_session: bool) -> Obj:
        """A PaymentIntent; with ``confirm``, attempted at once (off-session: on a saved card)."""
        with self.lock:
            if fields.get("customer") is not None:
                self.get("customer", fields["customer"], "customer")
            pm_id = fields.get("payment_method")
            if pm_id == "pm_card_visa":  # Stripe's test card: a new PaymentMethod each time, used once
                pm_id = fields["payment_method"] = self._card(None, save=False)["id"]
            elif pm_id is not None:
                pm = self.get("payment_method", pm_id, "payment_method")
                if off_session and pm["customer"] != fields.get("customer"):
                    raise invalid(
                        "The provided PaymentMethod was previously used with a PaymentIntent without Customer "
                        "attachment, shared with a connected account without Customer attachment, or was detached "
                        "from a Customer. It may not be used again. To use a PaymentMethod multiple times, you must "
                        "attach it to a Customer first.",
                        "payment_method",
                    )
            if confirm and pm_id is None:
                raise invalid(
                    "You cannot confirm this PaymentIntent because it's missing a payment method. You can either "
                    "update the PaymentIntent with a payment method and then confirm it again, or confirm it again "
                    "directly with a payment method.",
                    None,
                    "payment_intent_unexpected_state",
                )
            status = "requires_confirmation" if pm_id is not None else "requires_payment_method"
            intent = self._keep(
                "payment_intent", shapes.payment_intent(new_id("pi_3"), self.clock(), {**fields, "status": status})
            )
            self.emit("payment_intent.created", intent)
            if confirm:
                ending = self._declines.pop(0) if self._declines else "succeeded"
                self._attempt(intent, ending)
                if ending != "succeeded":
                    error = {**self._error(intent, ending), "payment_intent": copy.deepcopy(intent)}
                    raise StripeError(402, error, saved=True)
            return intent

    # ----------------------------------------------------------------- refunds and disputes
    def _charge_of(self, target: str, param: str) -> Obj:
        """The succeeded charge of a PaymentIntent (``pi_…``), or the charge itself (``ch_…``)."""
        if target.startswith("pi_"):
            intent = self.get("payment_intent", target, param)
            if intent["status"] != "succeeded":
                raise invalid(
                    f"This PaymentIntent ({target}) does not have a successful charge to refund.",
                    param,
                    "charge_not_refundable" if param == "payment_intent" else None,
                )
            return self.get("charge", intent["latest_charge"])
        return self.get("charge", target, param)

    def refund(self, target: str, amount: int | None, reason: str | None, metadata: Obj, param: str) -> Obj:
        with self.lock:
            charged = self._charge_of(target, param)
            if charged["disputed"]:
                raise invalid(
                    f"Charge {charged['id']} has been charged back; cannot issue a refund.", None, "charge_disputed"
                )
            left = charged["amount"] - charged["amount_refunded"]
            if left == 0:
                raise invalid(f"Charge {charged['id']} has already been refunded.", None, "charge_already_refunded")
            amount = left if amount is None else amount
            if amount > left:
                currency = charged["currency"]
                raise invalid(
                    f"Refund amount ({_money(amount, currency)}) is greater than unrefunded amount on charge "
                    f"({_money(left, currency)})",
                    "amount",
                    "amount_too_large",
                )
            if amount <= 0:
                raise invalid("Amount must be at least 1", "amount", "amount_too_small")
            made = self._keep("refund", money.refund(new_id("re_3"), self.clock(), charged, amount, reason, metadata))
            self.emit("refund.created", made)
            previous = {"amount_refunded": charged["amount_refunded"], "refunded": charged["refunded"]}
            charged["amount_refunded"] += amount
            charged["refunded"] = charged["amount_refunded"] == charged["amount"]
            self.emit("charge.refunded", charged, {k: v for k, v in previous.items() if charged[k] != v})
            return made

    def dispute(self, target: str, amount: int | None, reason: str, inquiry: bool) -> Obj:
        with self.lock:
            charged = self._charge_of(target, "charge")
            if charged["disputed"]:
                raise ValueError(f"{charged['id']} is already disputed")
            status = "warning_needs_response" if inquiry else "needs_response"
            made = money.dispute(new_id("du_1"), self.clock(), charged, amount or charged["amount"], reason, status)
            self._keep("dispute", made)
            charged["disputed"] = True
            self.emit("charge.dispute.created", made)
            if not inquiry:
                self.emit("charge.dispute.funds_withdrawn", made)
            return made

    def close_dispute(self, duid: str, won: bool) -> Obj:
        with self.lock:
            found = self.get("dispute", duid)
            if found["status"] not in (
                "needs_response",
                "warning_needs_response",
                "under_review",
                "warning_under_review",
            ):
                raise ValueError(f"{duid} is already closed ({found['status']})")
            inquiry = found["status"].startswith("warning_")
            previous = {"status": found["status"]}
            found["status"] = "warning_closed" if inquiry else ("won" if won else "lost")
            self.emit("charge.dispute.closed", found, previous)
            if won and not inquiry:
                self.emit("charge.dispute.funds_reinstated", found)
            return found
