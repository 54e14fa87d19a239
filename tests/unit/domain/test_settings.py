from decimal import Decimal

import pytest

from domain.pricing import Price
from domain.settings import ConfigError, parse_settings, require_upstream_secrets, require_webhook_secrets

#: The one deployment of GOOD's model.
UPSTREAM = (
    'upstream = {kind = "openai", base_url = "http://127.0.0.1:9100/v1", api_key_env = "UPSTREAM_KEY", model = "gpt-x"}'
)

GOOD = (
    """
database_url = "sqlite:///tollgate.db"
credits_per_usd = 100
[[models]]
id = "fake-gpt"
display_name = "Fake GPT"
owned_by = "acme"
context_window = 8192
max_output_tokens = 1024
vision = false
default_effort_level = "medium"
effort_levels = [{value = "low", display = "Low"}, {value = "medium", display = "Medium"},
                 {value = "high", display = "High"}]
pricing = {input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}   # USD per million tokens
"""
    + UPSTREAM
    + "\n"
)


def test_the_documented_example_parses_with_exact_prices():
    settings = parse_settings(GOOD, "t.toml")
    model = settings.model("fake-gpt")
    assert model is not None
    assert [model.name_at(up) for up in model.deployments] == ["gpt-x"]
    assert model.pricing.cache_create == Decimal("3.125")
    assert settings.credits_per_usd == Decimal(100)


def test_a_batch_price_is_a_discount_or_rates_of_its_own():
    half = parse_settings(GOOD.replace("cache_hit = 1.25}", "cache_hit = 1.25, batch_discount = 0.5}"), "t.toml")
    model = half.model("fake-gpt")
    assert model is not None
    assert model.price.for_batch()[0].output == Decimal(5)
    own = GOOD.replace(
        "cache_hit = 1.25}", "cache_hit = 1.25, batch = {input = 1, output = 4, cache_write = 1, cache_hit = 0.5}}"
    )
    model = parse_settings(own, "t.toml").model("fake-gpt")
    assert model is not None
    assert model.price.for_batch() == (Price(Decimal(1), Decimal(4), Decimal(1), Decimal("0.5")), "batch")


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        (("context_window = 8192", 'context_window = "big"'), "models[0].context_window", "expected `int`"),
        (('id = "fake-gpt"\n', ""), "models[0].id", "required key is missing"),
        (("vision = false", "vision = false\ncolour = 1"), "models[0].colour", "unknown key"),
        (('kind = "openai"', 'kind = "grpc"'), "models[0].upstream.kind", "unknown kind"),
        (("input = 2.5", "input = -1"), "models[0].pricing.input", "must not be negative"),
        (("credits_per_usd = 100", "credits_per_usd = 0"), "credits_per_usd", "greater than 0"),
        (
            ("cache_hit = 1.25}", "cache_hit = 1.25, batch_discount = 1}"),
            "models[0].pricing.batch_discount",
            "fraction",
        ),
        (
            (
                "cache_hit = 1.25}",
                (
                    "cache_hit = 1.25, batch_discount = 0.5, batch = {input = 1, output = 2, "
                    "cache_write = 1, cache_hit = 0.1}}"
                ),
            ),
            "models[0].pricing.batch",
            "not both",
        ),
        (
            (
                "cache_hit = 1.25}",
                "cache_hit = 1.25, batch = {input = -1, output = 2, cache_write = 1, cache_hit = 0}}",
            ),
            "models[0].pricing.batch.input",
            "must not be negative",
        ),
        (("credits_per_usd = 100", "credits_per_usd = 100\nbatch_poll_seconds = 0"), "batch_poll_seconds", "greater"),
        (
            ('default_effort_level = "medium"', 'default_effort_level = "max"'),
            "models[0].default_effort_level",
            "not one of",
        ),
        (('base_url = "http://127.0.0.1:9100/v1", ', ""), "models[0].upstream.base_url", "required"),
        (("sqlite:///tollgate.db", "mysql://db"), "database_url", "unsupported URL"),
        (("sqlite:///tollgate.db", "postgresql://host-without-database"), "database_url", "unsupported URL"),
        (("credits_per_usd = 100", "credits_per_usd = 100\nmax_request_bytes = 0"), "max_request_bytes", "at least 1"),
        (
            ("credits_per_usd = 100", "credits_per_usd = 100\nmax_streams_per_key = -1"),
            "max_streams_per_key",
            "at least 1",
        ),
        (("credits_per_usd = 100", "credits_per_usd = 100\nwrite_timeout = 0"), "write_timeout", "greater than 0"),
        (
            ("credits_per_usd = 100", 'credits_per_usd = 100\nwebhooks = [{url = "http://127.0.0.1:9/h"}]'),
            "webhooks[0].secret_env",
            "required key is missing",
        ),
        (
            ("credits_per_usd = 100", 'credits_per_usd = 100\nwebhooks = [{url = "http://x/h", secret_env = " "}]'),
            "webhooks[0].secret_env",
            "must name the environment variable",
        ),
    ],
)
def test_an_invalid_file_is_refused_naming_the_file_the_key_and_the_problem(change, key, problem):
    with pytest.raises(ConfigError) as error:
        parse_settings(GOOD.replace(*change), "conf/t.toml")
    assert error.value.key == key
    assert problem in error.value.problem
    assert str(error.value).startswith(f"conf/t.toml: {key}: ")


def test_broken_toml_is_refused_with_the_file_name():
    with pytest.raises(ConfigError, match=r"^t.toml: not valid TOML"):
        parse_settings("models = [", "t.toml")


def test_a_missing_upstream_secret_names_the_variable():
    settings = parse_settings(GOOD, "t.toml")
    with pytest.raises(ConfigError, match="UPSTREAM_KEY is not set"):
        require_upstream_secrets(settings, "t.toml", {})
    require_upstream_secrets(settings, "t.toml", {"UPSTREAM_KEY": "x"})


def test_the_database_url_can_come_from_the_environment():
    settings = parse_settings(GOOD, "t.toml", {"TOLLGATE_DATABASE_URL": "sqlite:////var/lib/tollgate.db"})
    assert settings.database_url == "sqlite:////var/lib/tollgate.db"


MANY = GOOD.replace(
    UPSTREAM,
    """upstreams = [
  {kind = "openai", base_url = "http://127.0.0.1:9100/v1", api_key_env = "UPSTREAM_KEY", model = "gpt-x", weight = 3},
  {kind = "openai", base_url = "http://127.0.0.1:9200/v1", api_key_env = "OTHER_KEY"},
  {kind = "demo"},
]""",
)


def test_a_model_may_list_several_deployments_each_with_its_weight_and_model_name():
    model = parse_settings(MANY, "t.toml").models[0]
    assert [(up.base_url, up.weight) for up in model.deployments] == [
        ("http://127.0.0.1:9100/v1", 3),
        ("http://127.0.0.1:9200/v1", 1),
        (None, 1),
    ]
    assert [model.name_at(up) for up in model.deployments] == ["gpt-x", "fake-gpt", "fake-gpt"]
    assert model.attempts == 3
    assert parse_settings(MANY.replace("[[models]]", "[[models]]\nmax_attempts = 2"), "t.toml").models[0].attempts == 2


def test_a_model_may_have_deployments_of_different_wires_each_sent_its_own():
    mixed = MANY.replace('{kind = "demo"}', '{kind = "anthropic", base_url = "https://api.anthropic.com"}')
    model = parse_settings(mixed, "t.toml").models[0]
    assert [up.wire for up in model.deployments] == ["chat", "chat", "messages"]


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        (("weight = 3", "weight = 0"), "models[0].upstreams[0].weight", "at least 1"),
        (('{kind = "demo"}', '{kind = "openai"}'), "models[0].upstreams[2].base_url", "required"),
        (
            ("[[models]]", "[[models]]\nmax_attempts = 4"),
            "models[0].max_attempts",
            "between 1 and the number of deployments (3)",
        ),
        (("[[models]]", "[[models]]\nmax_attempts = 0"), "models[0].max_attempts", "between 1"),
        (("upstreams = [", 'upstream = {kind = "demo"}\nupstreams = ['), "models[0].upstreams", "not both"),
        (("weight = 3", 'weight = "heavy"'), "models[0].upstreams[0].weight", "expected `int`"),
    ],
)
def test_an_invalid_deployment_list_is_refused_naming_the_key(change, key, problem):
    with pytest.raises(ConfigError) as error:
        parse_settings(MANY.replace(*change), "conf/t.toml")
    assert (error.value.key, str(error.value).startswith(f"conf/t.toml: {key}: ")) == (key, True)
    assert problem in error.value.problem


def test_a_model_needs_one_deployment_at_least():
    no_upstream = GOOD.replace(UPSTREAM, "")
    with pytest.raises(ConfigError, match=r"models\[0\].upstream: required key is missing"):
        parse_settings(no_upstream, "t.toml")
    with pytest.raises(ConfigError, match=r"models\[0\].upstreams: must list at least one deployment"):
        parse_settings(no_upstream + "upstreams = []\n", "t.toml")


def test_every_deployment_s_secret_must_be_set():
    settings = parse_settings(MANY, "t.toml")
    with pytest.raises(ConfigError) as error:
        require_upstream_secrets(settings, "t.toml", {"UPSTREAM_KEY": "x"})
    assert error.value.key == "models[0].upstreams[1].api_key_env"
    assert "OTHER_KEY is not set" in error.value.problem
    require_upstream_secrets(settings, "t.toml", {"UPSTREAM_KEY": "x", "OTHER_KEY": "y"})


def test_a_model_may_choose_how_its_tokens_are_counted():
    assert parse_settings(GOOD, "t.toml").models[0].tokenizer is None  # by the upstream's wire
    chosen = parse_settings(GOOD.replace("vision = false", 'vision = false\ntokenizer = "bytes"'), "t.toml")
    assert chosen.models[0].tokenizer == "bytes"
    with pytest.raises(ConfigError) as error:
        parse_settings(GOOD.replace("vision = false", 'vision = false\ntokenizer = "cl100k"'), "t.toml")
    assert str(error.value) == (
        "t.toml: models[0].tokenizer: unknown tokenizer 'cl100k'; expected one of o200k, anthropic, bytes"
    )


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ('webhooks = [{url = "ftp://hooks.example/x", secret_env = "HOOK_SECRET"}]', "webhooks[0].url"),
        ("webhook_retry_max_seconds = 0", "webhook_retry_max_seconds"),
    ],
)
def test_webhooks_are_checked(extra, key):
    with pytest.raises(ConfigError) as refused:
        parse_settings(extra + "\n" + GOOD, "t.toml")
    assert key in str(refused.value)


def test_serving_needs_every_webhooks_secret_set_and_not_empty():
    settings = parse_settings(
        GOOD.replace(
            "credits_per_usd = 100",
            'credits_per_usd = 100\nwebhooks = [{url = "http://127.0.0.1:9/h", secret_env = "HOOK_SECRET"}]',
        ),
        "t.toml",
    )
    for environ, state in (({}, "not set"), ({"HOOK_SECRET": ""}, "empty")):
        with pytest.raises(ConfigError) as error:
            require_webhook_secrets(settings, "t.toml", environ)
        assert str(error.value).startswith(
            f"t.toml: webhooks[0].secret_env: environment variable HOOK_SECRET is {state}"
        )
    require_webhook_secrets(settings, "t.toml", {"HOOK_SECRET": "whsec"})
