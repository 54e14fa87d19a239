"""The `azure-openai` deployment's settings: what it requires, which wire it speaks, and the Azure-only
keys refused where they would mean nothing."""

import pytest

from domain.settings import ConfigError, parse_settings, require_upstream_secrets

AZURE = (
    'upstream = {kind = "azure-openai", base_url = "https://acme.openai.azure.com", api_version = "2024-10-21", '
    'api_key_env = "AZURE_OPENAI_KEY", model = "gpt-4o-prod"}'
)
FILE = """
database_url = "sqlite:///tollgate.db"
credits_per_usd = 100
[[models]]
id = "gpt-4o"
display_name = "GPT-4o on Azure"
owned_by = "openai"
context_window = 128000
max_output_tokens = 16384
endpoints = ["chat.completions", "responses", "messages"]
pricing = {input = 2.5, output = 10, cache_create = 2.5, cache_hit = 1.25}
"""


def parse(upstream: str = AZURE, endpoints: str = "") -> object:
    text = FILE.replace("cache_hit = 1.25}", "cache_hit = 1.25, input_characters = 15}") + upstream + "\n"
    if endpoints:
        text = text.replace('endpoints = ["chat.completions", "responses", "messages"]', f"endpoints = {endpoints}")
    return parse_settings(text, "t.toml")


def test_an_azure_deployment_speaks_chat_unless_its_api_says_responses():
    (chat,) = parse_settings(FILE + AZURE + "\n", "t.toml").models[0].deployments
    assert (chat.wire, chat.api_version, chat.auth) == ("chat", "2024-10-21", None)
    responses = AZURE.replace('model = "gpt-4o-prod"', 'model = "gpt-4o-prod", api = "responses", auth = "entra"')
    (deployment,) = parse_settings(FILE + responses + "\n", "t.toml").models[0].deployments
    assert (deployment.wire, deployment.auth) == ("responses", "entra")


def test_an_azure_deployment_may_serve_embeddings_but_not_audio():
    parse(endpoints='["embeddings"]')
    with pytest.raises(ConfigError) as refused:
        parse(endpoints='["audio.speech"]')
    assert refused.value.key == "models[0].upstream.kind"


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        ((' api_version = "2024-10-21",', ""), "models[0].upstream.api_version", "required for kind 'azure-openai'"),
        (('model = "gpt-4o-prod"', 'model = "x", api = "messages"'), "models[0].upstream.api", "not one of"),
        (('model = "gpt-4o-prod"', 'model = "x", auth = "oauth"'), "models[0].upstream.auth", "not one of"),
        (("azure.com", "azure.com/openai/"), "models[0].upstream.base_url", "without /openai"),
        ((' api_key_env = "AZURE_OPENAI_KEY",', ""), "models[0].upstream.api_key_env", "required for kind"),
        (('"azure-openai"', '"openai"'), "models[0].upstream.api_version", "only an azure-openai deployment"),
    ],
)
def test_a_wrong_azure_deployment_is_refused_naming_the_key(change, key, problem):
    with pytest.raises(ConfigError) as refused:
        parse(AZURE.replace(*change))
    assert refused.value.key == key
    assert problem in refused.value.problem


PRINCIPAL = AZURE.replace(
    'api_key_env = "AZURE_OPENAI_KEY",',
    'auth = "entra", tenant_id = "t-1", client_id = "c-1", client_secret_env = "ENTRA_SECRET",',
)


def test_a_service_principal_needs_no_key_and_its_secret_must_be_set_to_serve():
    (deployment,) = parse(PRINCIPAL).models[0].deployments  # type: ignore[attr-defined]
    assert (deployment.tenant_id, deployment.client_id, deployment.authority_host) == ("t-1", "c-1", None)
    settings = parse(PRINCIPAL)
    with pytest.raises(ConfigError) as refused:
        require_upstream_secrets(settings, "t.toml", {})  # type: ignore[arg-type]
    assert refused.value.key == "models[0].upstream.client_secret_env"
    require_upstream_secrets(settings, "t.toml", {"ENTRA_SECRET": "s"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (('auth = "entra", ', ""), "models[0].upstream.auth"),
        ((' client_id = "c-1",', ""), "models[0].upstream.client_id"),
        ((' client_secret_env = "ENTRA_SECRET",', ""), "models[0].upstream.client_secret_env"),
        (
            ('tenant_id = "t-1",', 'tenant_id = "t-1", authority_host = "login.example",'),
            "models[0].upstream.authority_host",
        ),
        ((' tenant_id = "t-1",', ' api_key_env = "K",'), "models[0].upstream.tenant_id"),
    ],
)
def test_an_incomplete_service_principal_is_refused_naming_the_key(change, key):
    with pytest.raises(ConfigError) as refused:
        parse(PRINCIPAL.replace(*change))
    assert refused.value.key == key
