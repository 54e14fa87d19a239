"""The `vertex` deployment's settings: its project, location and publisher's wire, no key (a service
account's tokens authenticate it), and the Vertex-only settings refused where they would mean nothing."""

import pytest

from domain.settings import ConfigError, parse_settings
from tests.unit.domain.test_bedrock_settings import FILE

VERTEX = 'upstream = {kind = "vertex", api = "messages", project = "p", region = "us-east5", model = "claude-x@1"}'


def parse(upstream: str) -> object:
    return parse_settings(FILE + upstream + "\n", "t.toml")


@pytest.mark.parametrize(("api", "wire"), [("messages", "messages"), ("gemini", "gemini")])
def test_a_vertex_deployment_speaks_its_publishers_wire_without_a_base_url_or_key(api: str, wire: str):
    text = FILE + VERTEX.replace('api = "messages"', f'api = "{api}"') + "\n"
    (deployment,) = parse_settings(text, "t.toml").models[0].deployments
    assert (deployment.wire, deployment.project, deployment.region, deployment.base_url) == (
        wire,
        "p",
        "us-east5",
        None,
    )


@pytest.mark.parametrize(
    ("upstream", "key", "problem"),
    [
        (VERTEX.replace('project = "p", ', ""), "project", "required for kind 'vertex'"),
        (VERTEX.replace('region = "us-east5", ', ""), "region", "required for kind 'vertex'"),
        (VERTEX.replace('api = "messages", ', ""), "api", "one of messages, gemini"),
        (VERTEX.replace('api = "messages"', 'api = "chat"'), "api", "one of messages, gemini"),
        (VERTEX.replace("model =", 'api_key_env = "KEY", model ='), "api_key_env", "takes no key"),
        (
            'upstream = {kind = "anthropic", base_url = "https://api.anthropic.com", project = "p"}',
            "project",
            "only a vertex deployment takes project",
        ),
        (
            'upstream = {kind = "anthropic", base_url = "https://x", credentials_file = "sa.json"}',
            "credentials_file",
            "only a vertex deployment takes credentials_file",
        ),
    ],
)
def test_a_vertex_setting_missing_or_out_of_place_is_refused_with_its_key(upstream: str, key: str, problem: str):
    with pytest.raises(ConfigError) as refused:
        parse(upstream)
    assert refused.value.key == f"models[0].upstream.{key}"
    assert problem in refused.value.problem
