"""What a receiver can rely on: the signature is the HMAC-SHA256 of the exact body, and a refused
delivery is retried after a wait that doubles up to the configured longest."""

from __future__ import annotations

import hashlib
import hmac

from app.alerts.webhooks import retry_after, signature


def test_the_signature_is_the_hmac_of_the_exact_body():
    body = b'{"id":"alert_1","type":"alert.balance_below"}'
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert signature("s3cret", body) == f"sha256={expected}"
    assert signature("s3cret", body + b" ") != signature("s3cret", body)


def test_retries_back_off_doubling_up_to_the_longest_wait():
    assert [retry_after(n, 300) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert retry_after(40, 300) == 300
