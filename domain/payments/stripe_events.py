"""What a Stripe event means to Tollgate: one typed, frozen record per verified event, no I/O.

The webhook endpoint verifies the delivery with the ``stripe`` library (``Webhook.construct_event``)
and hands its dict (``event.to_dict()``) to :func:`read_event`, which answers one of:

- :class:`PaymentSucceeded`: money arrived for a team: ``checkout.session.completed`` with
  ``payment_status: paid``, ``checkout.session.async_payment_succeeded`` (a delayed method settled), or
  ``payment_intent.succeeded`` (an off-session charge: auto-recharge). A Checkout payment makes both a
  Session event and a PaymentIntent event: they name the same ``payment_intent_id``, which is what
  the ledger credits once, whichever arrives first and however often;
- :class:`PaymentFailed`: ``payment_intent.payment_failed`` or ``checkout.session.async_payment_failed``;
- :class:`PaymentRefunded`: ``charge.refunded``, carrying the charge's *total* refunded so far (Stripe
  adds each refund to ``amount_refunded``), so a late or repeated event never takes back twice: the
  ledger takes back up to that total;
- :class:`DisputeOpened` / :class:`DisputeClosed`: ``charge.dispute.created`` / ``.closed``;
- :class:`Ignored`, with the reason: any other event, a Session not paid yet (``unpaid``: credited on
  ``async_payment_succeeded``), a payment that is not a Tollgate top-up.

**Whose payment.** The team is read from the metadata key :data:`TEAM_KEY`, which the gateway sets
when it creates a Checkout Session, on the Session (``metadata``) and on its PaymentIntent
(``payment_intent_data.metadata``: Stripe copies neither to the other), and on off-session
PaymentIntents. Stripe copies a PaymentIntent's metadata to its charge, so refunds name the team too;
disputes carry no metadata of ours, only the charge and PaymentIntent, which the ledger knows.

Amounts stay as Stripe states them, in the currency's minor units (``domain.payments.amounts`` says
what they buy). A dict that is not the event its ``type`` says (a field missing or of the wrong type)
raises :class:`MalformedEvent`: a signed event Tollgate cannot read is an error to see, not to skip.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The metadata key naming the team a payment is for.
TEAM_KEY = "tollgate_team"
#: The metadata key naming the auto-recharge attempt an off-session payment pays.
RECHARGE_KEY = "tollgate_recharge"


class MalformedEvent(ValueError):
    """An event whose object lacks a field its type always has, or has it with another type."""


@dataclass(frozen=True, slots=True)
class PaymentSucceeded:
    """A team's payment succeeded: credit it, once per ``payment_intent_id``."""

    team: str
    payment_intent_id: str
    amount_minor: int
    currency: str
    #: The Checkout Session paid (None: an off-session PaymentIntent, or its own event of a Session's).
    checkout_session_id: str | None
    customer_id: str | None
    event_id: str
    created: int
    #: The auto-recharge attempt it pays (``metadata.tollgate_recharge``; None: a top-up).
    recharge: str | None = None


@dataclass(frozen=True, slots=True)
class PaymentFailed:
    """A team's payment failed (auto-recharge counts these)."""

    team: str
    payment_intent_id: str | None
    amount_minor: int
    currency: str
    #: Stripe's error code (``card_declined``, ``authentication_required``) and the issuer's reason.
    code: str | None
    decline_code: str | None
    event_id: str
    created: int
    #: The auto-recharge attempt it was to pay (None: a Checkout payment).
    recharge: str | None = None


@dataclass(frozen=True, slots=True)
class PaymentRefunded:
    """Part or all of a payment was refunded: ``refunded_minor`` is the charge's total refunded so far."""

    #: From the charge's metadata (copied from its PaymentIntent); None: find the payment by its id.
    team: str | None
    payment_intent_id: str
    charge_id: str
    refunded_minor: int
    #: What the charge was for.
    amount_minor: int
    currency: str
    event_id: str
    created: int

    @property
    def fully(self) -> bool:
        return self.refunded_minor >= self.amount_minor


@dataclass(frozen=True, slots=True)
class DisputeOpened:
    """The cardholder disputed a payment. An ``inquiry`` (``warning_needs_response``) takes no money
    yet; a chargeback (``needs_response``) has taken ``amount_minor`` back."""

    dispute_id: str
    charge_id: str
    payment_intent_id: str | None
    amount_minor: int
    currency: str
    reason: str
    status: str
    event_id: str
    created: int

    @property
    def inquiry(self) -> bool:
        return self.status.startswith("warning_")


@dataclass(frozen=True, slots=True)
class DisputeClosed:
    """A dispute ended: ``won`` (the money came back, or an inquiry closed without taking any) or lost."""

    dispute_id: str
    charge_id: str
    payment_intent_id: str | None
    amount_minor: int
    currency: str
    status: str
    won: bool
    event_id: str
    created: int


@dataclass(frozen=True, slots=True)
class Ignored:
    """An event Tollgate does not act on, and why."""

    event_id: str
    type: str
    reason: str


PaymentRecord = PaymentSucceeded | PaymentFailed | PaymentRefunded | DisputeOpened | DisputeClosed | Ignored


# ----------------------------------------------------------------- reading fields
def _malformed(obj: Mapping[str, Any], key: str, kind: str) -> MalformedEvent:
    return MalformedEvent(f"{obj.get('object', 'object')}.{key} should be {kind}, got {obj.get(key)!r}")


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise _malformed(obj, key, "a string")
    return value


def _optional_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _malformed(obj, key, "a string or null")
    return value


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _malformed(obj, key, "an integer")
    return value


def _ref(obj: Mapping[str, Any], key: str) -> str | None:
    """An id field, which ``expand[]`` may have replaced by its object."""
    value = obj.get(key)
    return _str(value, "id") if isinstance(value, Mapping) else _optional_str(obj, key)


def _team(obj: Mapping[str, Any]) -> str | None:
    return _metadata(obj, TEAM_KEY)


def _metadata(obj: Mapping[str, Any], key: str) -> str | None:
    metadata = obj.get("metadata")
    value = metadata.get(key) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class _Event:
    id: str
    type: str
    created: int
    obj: Mapping[str, Any]

    def ignored(self, reason: str) -> Ignored:
        return Ignored(self.id, self.type, reason)


_NOT_OURS = f"no {TEAM_KEY} in its metadata: not a Tollgate top-up"


# ----------------------------------------------------------------- one reader per event type
def _session_paid(event: _Event) -> PaymentRecord:
    session = event.obj
    if _str(session, "mode") != "payment":
        return event.ignored(f"a Checkout Session in mode {session['mode']}, not payment")
    status = _str(session, "payment_status")
    if status != "paid":
        return event.ignored(
            f"payment_status is {status}: credited when paid (checkout.session.async_payment_succeeded)"
        )
    team, intent = _team(session), _ref(session, "payment_intent")
    if team is None:
        return event.ignored(_NOT_OURS)
    if intent is None:
        raise MalformedEvent(f"a paid Checkout Session without a PaymentIntent: {session.get('id')}")
    return PaymentSucceeded(
        team,
        intent,
        _int(session, "amount_total"),
        _str(session, "currency"),
        _str(session, "id"),
        _ref(session, "customer"),
        event.id,
        event.created,
    )


def _session_failed(event: _Event) -> PaymentRecord:
    session, team = event.obj, _team(event.obj)
    if team is None:
        return event.ignored(_NOT_OURS)
    amount, currency = _int(session, "amount_total"), _str(session, "currency")
    return PaymentFailed(team, _ref(session, "payment_intent"), amount, currency, None, None, event.id, event.created)


def _intent_succeeded(event: _Event) -> PaymentRecord:
    intent, team = event.obj, _team(event.obj)
    if team is None:
        return event.ignored(_NOT_OURS)
    amount, currency = _int(intent, "amount_received"), _str(intent, "currency")
    return PaymentSucceeded(
        team,
        _str(intent, "id"),
        amount,
        currency,
        None,
        _ref(intent, "customer"),
        event.id,
        event.created,
        _metadata(intent, RECHARGE_KEY),
    )


def _intent_failed(event: _Event) -> PaymentRecord:
    intent, team = event.obj, _team(event.obj)
    if team is None:
        return event.ignored(_NOT_OURS)
    error = intent.get("last_payment_error")
    error = error if isinstance(error, Mapping) else {}
    return PaymentFailed(
        team,
        _str(intent, "id"),
        _int(intent, "amount"),
        _str(intent, "currency"),
        _optional_str(error, "code"),
        _optional_str(error, "decline_code"),
        event.id,
        event.created,
        _metadata(intent, RECHARGE_KEY),
    )


def _charge_refunded(event: _Event) -> PaymentRecord:
    charge = event.obj
    intent = _ref(charge, "payment_intent")
    if intent is None:
        return event.ignored("a charge without a PaymentIntent: not a Tollgate payment")
    return PaymentRefunded(
        _team(charge),
        intent,
        _str(charge, "id"),
        _int(charge, "amount_refunded"),
        _int(charge, "amount"),
        _str(charge, "currency"),
        event.id,
        event.created,
    )


def _dispute(event: _Event) -> tuple[str, str, str | None, int, str, str]:
    """A dispute's id, charge, PaymentIntent, amount, currency and status."""
    dispute = event.obj
    charge = _ref(dispute, "charge")
    if charge is None:
        raise MalformedEvent(f"a dispute without its charge: {dispute.get('id')}")
    amount, currency = _int(dispute, "amount"), _str(dispute, "currency")
    return _str(dispute, "id"), charge, _ref(dispute, "payment_intent"), amount, currency, _str(dispute, "status")


def _dispute_opened(event: _Event) -> PaymentRecord:
    dispute_id, charge, intent, amount, currency, status = _dispute(event)
    reason = _str(event.obj, "reason")
    return DisputeOpened(dispute_id, charge, intent, amount, currency, reason, status, event.id, event.created)


def _dispute_closed(event: _Event) -> PaymentRecord:
    dispute_id, charge, intent, amount, currency, status = _dispute(event)
    won = status in ("won", "warning_closed")
    return DisputeClosed(dispute_id, charge, intent, amount, currency, status, won, event.id, event.created)


READERS: dict[str, Callable[[_Event], PaymentRecord]] = {
    "checkout.session.completed": _session_paid,
    "checkout.session.async_payment_succeeded": _session_paid,
    "checkout.session.async_payment_failed": _session_failed,
    "payment_intent.succeeded": _intent_succeeded,
    "payment_intent.payment_failed": _intent_failed,
    "charge.refunded": _charge_refunded,
    "charge.dispute.created": _dispute_opened,
    "charge.dispute.closed": _dispute_closed,
}


def read_event(event: Mapping[str, Any]) -> PaymentRecord:
    """What a verified Stripe event (a dict, as the library parsed it) means to Tollgate."""
    if event.get("object") != "event":
        raise MalformedEvent(f"not a Stripe event: object is {event.get('object')!r}")
    data = event.get("data")
    obj = data.get("object") if isinstance(data, Mapping) else None
    if not isinstance(obj, Mapping):
        raise MalformedEvent(f"event {event.get('id')!r} has no data.object")
    parsed = _Event(_str(event, "id"), _str(event, "type"), _int(event, "created"), obj)
    reader = READERS.get(parsed.type)
    if reader is None:
        return parsed.ignored(f"{parsed.type} is not an event Tollgate acts on")
    return reader(parsed)
