"""The `bedrock` deployment's settings: a region it signs for, the endpoint it defaults to, no key (AWS's
chain provides the credentials), and the region refused where it would mean nothing."""

import pytest

from domain.settings import ConfigError, parse_settings

BEDROCK = 'upstream = {kind = "bedrock", region = "us-east-1", model = "us.anthropic.claude-sonnet-4-20250514-v1:0"}'
FILE = """
database_url = "sqlite:///tollgate.db"
credits_per_usd = 100
[[models]]
id = "claude-sonnet"
display_name = "Claude Sonnet on Bedrock"
owned_by = "anthropic"
context_window = 200000
max_output_tokens = 8192
pricing = {input = 3.3, output = 16.5, cache_create = 4.125, cache_hit = 0.33}
"""


def parse(upstream: str) -> object:
    return parse_settings(FILE + upstream + "\n", "t.toml")


def test_a_bedrock_deployment_speaks_messages_without_a_base_url_or_key():
    (deployment,) = parse_settings(FILE + BEDROCK + "\n", "t.toml").models[0].deployments
    assert (deployment.wire, deployment.region, deployment.base_url) == ("messages", "us-east-1", None)


@pytest.mark.parametrize(
    ("upstream", "key", "problem"),
    [
        (BEDROCK.replace('region = "us-east-1", ', ""), "region", "required for kind 'bedrock'"),
        (BEDROCK.replace("us-east-1", "virginia"), "region", "an AWS region such as us-east-1"),
        (BEDROCK.replace("model =", 'api_key_env = "AWS_KEY", model ='), "api_key_env", "takes no key"),
        (BEDROCK.replace("model =", 'base_url = "bedrock.local", model ='), "base_url", "not an http(s) URL"),
        (
            'upstream = {kind = "anthropic", base_url = "https://api.anthropic.com", region = "us-east-1"}',
            "region",
            "only bedrock and vertex deployments take region",
        ),
    ],
)
def test_a_bedrock_setting_out_of_place_is_refused_with_its_key(upstream: str, key: str, problem: str):
    with pytest.raises(ConfigError) as refused:
        parse(upstream)
    assert refused.value.key.endswith(f".{key}")
    assert problem in refused.value.problem


@pytest.mark.parametrize(("api", "wire"), [(None, "messages"), ("messages", "messages"), ("converse", "converse")])
def test_a_bedrock_deployments_api_chooses_invoke_model_or_converse(api: str | None, wire: str):
    upstream = BEDROCK if api is None else BEDROCK.replace("region =", f'api = "{api}", region =')
    (deployment,) = parse_settings(FILE + upstream + "\n", "t.toml").models[0].deployments
    assert deployment.wire == wire


def test_a_bedrock_api_it_does_not_have_is_refused_with_its_key():
    with pytest.raises(ConfigError) as refused:
        parse(BEDROCK.replace("region =", 'api = "chat", region ='))
    assert refused.value.key == "models[0].upstream.api"
    assert "one of messages, converse" in refused.value.problem
