"""What a receiver can rely on: the signature covers the attempt's instant, the alert's id and the
exact body, so neither a replay under a fresh id nor a changed timestamp passes; and a refused
delivery is retried after a wait that doubles up to the configured longest."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from app.alerts.webhooks import WebhookDelivery, retry_after, signature
from domain.settings import Settings, parse_settings

BODY = b'{"id":"alert_1","type":"alert.balance_below"}'


def receiver_accepts(secret: bytes, header: str, alert_id: str, body: bytes) -> bool:
    """The check the README tells a receiver to make (the age check aside)."""
    fields = dict(part.split("=", 1) for part in header.split(","))
    expected = hmac.new(secret, f"{fields['t']}.{alert_id}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"])


def test_the_signature_covers_the_timestamp_the_alert_id_and_the_exact_body():
    header = signature("s3cret", 1_764_240_000, "alert_1", BODY)
    expected = hmac.new(b"s3cret", b"1764240000.alert_1." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1764240000,v1={expected}"
    assert receiver_accepts(b"s3cret", header, "alert_1", BODY)


def test_a_replay_under_a_fresh_id_or_another_timestamp_or_body_does_not_verify():
    header = signature("s3cret", 1_764_240_000, "alert_1", BODY)
    assert not receiver_accepts(b"s3cret", header, "alert_2", BODY)  # a fresh id, to pass deduplication
    assert not receiver_accepts(b"s3cret", header.replace("t=1764240000", "t=1764240300"), "alert_1", BODY)
    assert not receiver_accepts(b"s3cret", header, "alert_1", BODY + b" ")
    assert not receiver_accepts(b"another", header, "alert_1", BODY)
    assert signature("s3cret", 1_764_240_001, "alert_1", BODY) != header  # each attempt signed afresh


def test_retries_back_off_doubling_up_to_the_longest_wait():
    assert [retry_after(n, 300) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert retry_after(40, 300) == 300


def _with_webhook() -> Settings:
    return parse_settings(
        """
webhooks = [{url = "http://127.0.0.1:9/hook", secret_env = "TOLLGATE_TEST_HOOK_SECRET"}]
[[models]]
id = "m"
display_name = "M"
owned_by = "acme"
context_window = 8192
max_output_tokens = 1024
vision = false
pricing = {input = 1, output = 1, cache_create = 1, cache_hit = 1}
upstream = {kind = "demo"}
""",
        "t.toml",
    )


def test_delivery_never_starts_without_its_secret(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TOLLGATE_TEST_HOOK_SECRET", raising=False)
    with pytest.raises(ValueError, match="TOLLGATE_TEST_HOOK_SECRET is not set"):
        WebhookDelivery(None, _with_webhook())  # type: ignore[arg-type]  # refused before any database use
