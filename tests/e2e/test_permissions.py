"""What a key may do: its models, its endpoints, its team's standing; the SDKs see 401 and 403."""

from __future__ import annotations

import time

import anthropic
import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.gateway import ADMIN_KEY, Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

HI = [{"role": "user", "content": "hi"}]


def key_id_of(gateway: Gateway, team: str) -> str:
    return gateway.cli("key", "list", "--team", team).stdout.split()[0]


@pytest.fixture
def admin(gateway: Gateway):
    with plain_http.Client(
        base_url=gateway.base_url.removesuffix("/v1") + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as client:
        yield client


def test_a_key_restricted_to_endpoints_is_refused_elsewhere_in_each_protocol(gateway: Gateway):
    gateway.cli("team", "create", "only-messages", "--credits", "5")
    key = gateway.cli("key", "create", "--team", "only-messages", "--endpoints", "messages").stdout.splitlines()[-1]
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=key, max_retries=0) as claude:
        claude.messages.create(model="fake-claude", max_tokens=20, messages=HI)

        with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as gpt:
            with pytest.raises(openai.PermissionDeniedError) as refused:
                gpt.chat.completions.create(model="fake-gpt", messages=HI)
            assert refused.value.body["type"] == "permission_error"  # type: ignore[index]
            assert "/v1/chat/completions" in refused.value.message
            with pytest.raises(openai.PermissionDeniedError):
                gpt.responses.create(model="fake-gpt", input="hi")

            # Lifting the restriction (an empty list) opens every endpoint again.
            gateway.cli(
                "key", "restrict", "--team", "only-messages", key_id_of(gateway, "only-messages"), "--endpoints", ""
            )
            time.sleep(0.6)  # the CLI is another process: the gateway's projector sees the change within 0.25 s
            gpt.chat.completions.create(model="fake-gpt", messages=HI)


def test_endpoint_restrictions_through_the_admin_api(gateway: Gateway, admin: httpx.Client):
    admin.post("/teams", json={"name": "admin-endpoints", "credits": "5"})
    issued = admin.post("/teams/admin-endpoints/keys", json={"endpoints": ["/v1/chat/completions"]}).json()
    assert issued["endpoints"] == ["chat.completions"]
    with anthropic.Anthropic(
        base_url=gateway.base_url.removesuffix("/v1"), api_key=issued["key"], max_retries=0
    ) as claude:
        with pytest.raises(anthropic.PermissionDeniedError) as refused:
            claude.messages.create(model="fake-claude", max_tokens=20, messages=HI)
        assert refused.value.body["error"]["type"] == "permission_error"  # type: ignore[index]
        bad = admin.put(f"/teams/admin-endpoints/keys/{issued['id']}/endpoints", json={"endpoints": ["images"]})
        assert bad.status_code == 400
        assert "unknown endpoint" in bad.json()["error"]["message"]
        assert admin.put(
            f"/teams/admin-endpoints/keys/{issued['id']}/endpoints", json={"endpoints": ["messages"]}
        ).json()["endpoints"] == ["messages"]
        claude.messages.create(model="fake-claude", max_tokens=20, messages=HI)


def test_a_suspended_team_gets_403_everywhere_until_reinstated_and_is_never_charged(gateway: Gateway):
    gateway.cli("team", "create", "suspended", "--credits", "5")
    key = gateway.cli("key", "create", "--team", "suspended").stdout.splitlines()[-1]
    with (
        openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as gpt,
        anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=key, max_retries=0) as claude,
    ):
        gpt.chat.completions.create(model="fake-gpt", messages=HI)  # the key is now cached by the gateway

        assert gateway.cli("team", "suspend", "suspended", "--reason", "unpaid").returncode == 0
        time.sleep(0.6)  # every process's projector looks every 0.25 s
        before = gateway.wait_until_nothing_held("suspended")  # the first request settled, its lease given back
        assert "SUSPENDED" in before
        with pytest.raises(openai.PermissionDeniedError) as refused:
            gpt.chat.completions.create(model="fake-gpt", messages=HI)
        assert "suspended" in refused.value.message
        with pytest.raises(openai.PermissionDeniedError):
            gpt.responses.create(model="fake-gpt", input="hi")
        with pytest.raises(anthropic.PermissionDeniedError):
            claude.messages.create(model="fake-claude", max_tokens=20, messages=HI)
        assert gateway.wait_until_nothing_held("suspended") == before  # nothing held, nothing charged

        gateway.cli("team", "reinstate", "suspended")
        time.sleep(0.6)
        gpt.chat.completions.create(model="fake-gpt", messages=HI)


def test_suspension_through_the_admin_api(gateway: Gateway, admin: httpx.Client):
    admin.post("/teams", json={"name": "admin-suspended", "credits": "5"})
    key = admin.post("/teams/admin-suspended/keys", json={}).json()["key"]
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as gpt:
        suspended = admin.post("/teams/admin-suspended/suspend", json={"reason": "audit"})
        assert suspended.status_code == 200
        assert suspended.json()["suspended"] is True
        with pytest.raises(openai.PermissionDeniedError):
            gpt.chat.completions.create(model="fake-gpt", messages=HI)
        assert admin.post("/teams/admin-suspended/suspend").status_code == 400  # already suspended
        assert admin.post("/teams/admin-suspended/reinstate").json()["suspended"] is False
        gpt.chat.completions.create(model="fake-gpt", messages=HI)


def test_missing_invalid_and_revoked_keys_get_401_in_each_protocol(gateway: Gateway):
    gateway.cli("team", "create", "revoked", "--credits", "5")
    key = gateway.cli("key", "create", "--team", "revoked").stdout.splitlines()[-1]
    gateway.cli("key", "revoke", "--team", "revoked", key_id_of(gateway, "revoked"))
    time.sleep(0.6)
    for bad in ("tg-not-a-key", key):
        with (
            pytest.raises(openai.AuthenticationError),
            openai.OpenAI(base_url=gateway.base_url, api_key=bad, max_retries=0) as sdk,
        ):
            sdk.chat.completions.create(model="fake-gpt", messages=HI)
        with (
            pytest.raises(anthropic.AuthenticationError) as refused,
            anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=bad, max_retries=0) as sdk,
        ):
            sdk.messages.create(model="fake-claude", max_tokens=20, messages=HI)
        assert refused.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    missing = plain_http.post(
        gateway.base_url + "/messages", json={"model": "fake-claude", "max_tokens": 5, "messages": HI}
    )
    assert missing.status_code == 401
    assert missing.json()["type"] == "error"


def test_the_admin_api_refuses_a_team_key_with_403(gateway: Gateway, team):
    url = gateway.base_url.removesuffix("/v1") + "/admin/teams/x/suspend"
    refused = plain_http.post(url, headers={"Authorization": f"Bearer {team.key}"})
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error"
