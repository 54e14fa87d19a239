"""The fake Stripe's objects of money moved: charges (each attempt to collect a PaymentIntent),
refunds and disputes, in Stripe's shape (as ``fake_stripe_objects.py``, whose rules they follow)."""

from __future__ import annotations

from tests.support.fake_stripe_objects import Obj, address, new_id

#: A charge's ``outcome`` and its failure, by how the attempt ended.
OUTCOMES: dict[str, Obj] = {
    "succeeded": {
        "network_status": "approved_by_network",
        "reason": None,
        "seller_message": "Payment complete.",
        "type": "authorized",
    },
    "card_declined": {
        "network_status": "declined_by_network",
        "reason": "generic_decline",
        "seller_message": "The bank did not return any further details with this decline.",
        "type": "issuer_declined",
    },
    "authentication_required": {
        "network_status": "declined_by_network",
        "reason": "authentication_required",
        "seller_message": "The bank returned the decline code `authentication_required`.",
        "type": "issuer_declined",
    },
}


def charge(chid: str, created: int, intent: Obj, ending: str) -> Obj:
    """The charge a PaymentIntent's attempt made: ``ending`` is ``succeeded``, ``pending`` or a decline code."""
    failed = ending not in ("succeeded", "pending")
    outcome = OUTCOMES["succeeded" if not failed else ending]
    amount = intent["amount"]
    return {
        "id": chid,
        "object": "charge",
        "amount": amount,
        "amount_captured": 0 if failed or ending == "pending" else amount,
        "amount_refunded": 0,
        "application": None,
        "application_fee": None,
        "application_fee_amount": None,
        "balance_transaction": None if failed else new_id("txn_"),
        "billing_details": {"address": address(), "email": None, "name": None, "phone": None, "tax_id": None},
        "calculated_statement_descriptor": "TOLLGATE",
        "captured": not failed and ending != "pending",
        "created": created,
        "currency": intent["currency"],
        "customer": intent["customer"],
        "description": intent["description"],
        "disputed": False,
        "failure_balance_transaction": None,
        "failure_code": ending if failed else None,
        "failure_message": DECLINES[ending][0] if failed else None,
        "fraud_details": {},
        "livemode": False,
        "metadata": dict(intent["metadata"]),  # copied once, when the PaymentIntent is confirmed
        "on_behalf_of": None,
        "outcome": {
            "advice_code": "try_again_later" if failed else None,
            "network_advice_code": None,
            "network_decline_code": None,
            "risk_level": "normal",
            "risk_score": 32,
            **outcome,
        },
        "paid": not failed and ending != "pending",
        "payment_intent": intent["id"],
        "payment_method": intent["payment_method"],
        "payment_method_details": {"card": card_details(amount, failed), "type": "card"},
        "receipt_email": None,
        "receipt_number": None,
        "receipt_url": None if failed else f"https://pay.stripe.com/receipts/payment/{new_id('', 40)}",
        "refunded": False,
        "review": None,
        "shipping": None,
        "source": None,
        "source_transfer": None,
        "statement_descriptor": None,
        "statement_descriptor_suffix": None,
        "status": "failed" if failed else ending,
        "transfer_data": None,
        "transfer_group": None,
    }


def card_details(amount: int, failed: bool) -> Obj:
    return {
        "amount_authorized": None if failed else amount,
        "authorization_code": None if failed else "123456",
        "brand": "visa",
        "checks": {"address_line1_check": None, "address_postal_code_check": None, "cvc_check": None},
        "country": "US",
        "exp_month": 12,
        "exp_year": 2034,
        "fingerprint": "Xt5EWLLDS7FJjR1c",
        "funding": "credit",
        "installments": None,
        "last4": "4242",
        "mandate": None,
        "network": "visa",
        "network_transaction_id": None if failed else "104102978678771",
        "three_d_secure": None,
        "wallet": None,
    }


#: Each decline the fake can be told to make: the message a card error shows, and its ``decline_code``.
DECLINES: dict[str, tuple[str, str]] = {
    "card_declined": ("Your card was declined.", "generic_decline"),
    "authentication_required": (
        "Your card was declined. This transaction requires authentication.",
        "authentication_required",
    ),
}


def refund(reid: str, created: int, charged: Obj, amount: int, reason: str | None, metadata: Obj) -> Obj:
    return {
        "id": reid,
        "object": "refund",
        "amount": amount,
        "balance_transaction": new_id("txn_"),
        "charge": charged["id"],
        "created": created,
        "currency": charged["currency"],
        "destination_details": {
            "card": {"reference": None, "reference_status": "pending", "reference_type": None, "type": "refund"},
            "type": "card",
        },
        "metadata": metadata,
        "payment_intent": charged["payment_intent"],
        "reason": reason,
        "receipt_number": None,
        "source_transfer_reversal": None,
        "status": "succeeded",
        "transfer_reversal": None,
    }


#: The evidence a dispute can be answered with, none given yet.
_EVIDENCE = (
    "access_activity_log billing_address cancellation_policy cancellation_policy_disclosure "
    "cancellation_rebuttal customer_communication customer_email_address customer_name customer_purchase_ip "
    "customer_signature duplicate_charge_documentation duplicate_charge_explanation duplicate_charge_id "
    "product_description receipt refund_policy refund_policy_disclosure refund_refusal_explanation "
    "service_date service_documentation shipping_address shipping_carrier shipping_date "
    "shipping_documentation shipping_tracking_number uncategorized_file uncategorized_text"
)


def dispute(duid: str, created: int, charged: Obj, amount: int, reason: str, status: str) -> Obj:
    """A dispute (chargeback, or an inquiry: ``warning_needs_response``) of ``charged``."""
    return {
        "id": duid,
        "object": "dispute",
        "amount": amount,
        "balance_transactions": [],
        "charge": charged["id"],
        "created": created,
        "currency": charged["currency"],
        "enhanced_eligibility_types": [],
        "evidence": {**dict.fromkeys(_EVIDENCE.split()), "enhanced_evidence": {}},
        "evidence_details": {
            "due_by": created + 21 * 24 * 3600,
            "enhanced_eligibility": {},
            "has_evidence": False,
            "past_due": False,
            "submission_count": 0,
            "submission_method": "not_submitted",
        },
        "is_charge_refundable": False,
        "livemode": False,
        "metadata": {},
        "network_reason_code": "10.4",
        "payment_intent": charged["payment_intent"],
        "payment_method_details": {
            "card": {"brand": "visa", "case_type": "chargeback", "network": "visa", "network_reason_code": "10.4"},
            "type": "card",
        },
        "reason": reason,
        "status": status,
    }
