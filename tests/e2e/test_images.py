"""Image generation through a real gateway with the official openai SDK: priced per image by the
model's size × quality table (dall-e-3, which reports no usage), or by the tokens the answer
reports (GPT image models), held for ``n`` images at the dearest price the request allows, each
answer's reported cost equal to its ledger charge to the micro-credit.

100 credits per USD: 1 USD is 100,000,000 micro-credits; a token rate of R USD per million tokens
is R × 100 micro-credits per token.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import openai
import pytest

from app.upstream.demo_images import demo_png
from tests.support import plain_http
from tests.support.fake_images import fake_image
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import UPSTREAM_KEY, Gateway
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("verified_at_the_end")

MICROS = Decimal(1_000_000)
#: An input image for edits (its bytes are passed on, never read for the bill).
PNG = demo_png("an input image", 0)
DALL_E_3 = """
"1024x1024/standard" = 0.04
"1024x1024/hd" = 0.08
"1792x1024/standard" = 0.08
"1792x1024/hd" = 0.12
"1024x1792/standard" = 0.08
"1024x1792/hd" = 0.12
"""
GPT_IMAGE = """
"1024x1024/low" = 0.009
"1024x1024/medium" = 0.034
"1024x1024/high" = 0.133
"1536x1024/low" = 0.013
"1536x1024/medium" = 0.05
"1536x1024/high" = 0.2
"1024x1536/low" = 0.013
"1024x1536/medium" = 0.05
"1024x1536/high" = 0.2
"""


def images_config(directory: Path, upstream: str) -> Path:
    from tests.support.backend import new_database_url

    def model(model_id: str, name: str, pricing: str, table: str, extra: str = "", served: str = "generations") -> str:
        return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "openai"
context_window = 32000
max_output_tokens = 1
upstream = {{kind = "openai", base_url = "{upstream}", api_key_env = "UPSTREAM_KEY", model = "{name}"}}
endpoints = [{", ".join(f'"images.{e}"' for e in served.split())}]
{extra}
[models.pricing]
{pricing}
[models.pricing.images]
{table}
"""

    no_tokens = ""  # dall-e-3 bills no tokens: its images alone are priced
    config = directory / "tollgate.toml"
    config.write_text(
        f'database_url = "{new_database_url()}"\ncredits_per_usd = 100\nlease_idle_seconds = 0.3\n'
        + model("dalle", "dall-e-3", no_tokens, DALL_E_3, 'image_defaults = {size = "1024x1024", quality = "standard"}')
        + model("dalle-any-quality", "dall-e-3", no_tokens, DALL_E_3, 'image_defaults = {size = "1024x1024"}')
        + model(
            "image-1.5",
            "gpt-image-1.5",
            "input = 5\noutput = 10\nimage_tokens = {input = 8, output = 32}",
            GPT_IMAGE,
            served="generations edits",
        )
        + model(
            "dalle-2",
            "dall-e-2",
            no_tokens,
            '"256x256/standard" = 0.016\n"512x512/standard" = 0.018\n"1024x1024/standard" = 0.02',
            'image_defaults = {size = "1024x1024", quality = "standard"}',
            served="edits",
        )
        + model(
            "image-1",
            "gpt-image-1",
            "input = 5\noutput = 0\nimage_tokens = {input = 10, output = 40}",
            GPT_IMAGE,
        )
    )
    return config


@pytest.fixture(scope="module")
def imaging(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gateway = Gateway(images_config(tmp_path_factory.mktemp("images"), fake_upstream.base_url)).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def image_teams(imaging: Gateway) -> Iterator[Teams]:
    teams = Teams(imaging.config)
    yield teams
    teams.close()


@pytest.fixture(scope="module")
def verified_at_the_end(imaging: Gateway) -> Iterator[None]:
    yield
    result = imaging.cli("ledger", "verify", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


_CLIENTS: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _clients_closed() -> Iterator[None]:
    """Each test's SDK clients closed after it, so none of their sockets is left to the collector."""
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def client(gateway: Gateway, team: Team) -> openai.OpenAI:
    _CLIENTS.append(openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0))
    return _CLIENTS[-1]


def cost_micros(usage: dict) -> int:
    micros = Decimal(str(usage["cost"]["credits"])) * MICROS
    assert micros == micros.to_integral_value()
    return int(micros)


def charged(gateway: Gateway, team: Team) -> list[int]:
    return [-int(row["amount"]) for row in gateway.charges(team.name)]


def image_requests(fake: FakeUpstream) -> list:
    return [r for r in fake.requests if r.path == "/v1/images/generations"]


def test_the_fake_speaks_openais_image_wire_to_the_official_sdk(fake_upstream: FakeUpstream):
    """The fake, called directly by the SDK: dall-e-3's answer has no usage, gpt-image-1's has the
    usage the SDK's types read (input details; no output details for gpt-image-1)."""
    sdk = openai.OpenAI(base_url=fake_upstream.base_url, api_key=UPSTREAM_KEY, max_retries=0)
    _CLIENTS.append(sdk)
    dalle = sdk.images.generate(model="dall-e-3", prompt="a fox", response_format="b64_json")
    assert dalle.usage is None
    assert dalle.data is not None
    assert dalle.data[0].b64_json == fake_image("a fox", 0)
    gpt = sdk.images.generate(model="gpt-image-1", prompt="a calm sea", quality="low", n=2)
    assert gpt.usage is not None
    assert gpt.size == "1024x1024"
    assert gpt.quality == "low"
    assert (gpt.usage.input_tokens, gpt.usage.output_tokens) == (3, 2 * 272)
    assert gpt.usage.input_tokens_details.text_tokens == 3
    assert gpt.usage.output_tokens_details is None
    with pytest.raises(openai.BadRequestError):
        sdk.images.generate(model="dall-e-3", prompt="a fox", size="512x512")  # type: ignore[arg-type]
    # An edit of two images, multipart: each input image is 323 image tokens in.
    edit = sdk.images.edit(
        model="gpt-image-1.5",
        image=[("a.png", PNG, "image/png"), ("b.png", PNG * 2, "image/png")],
        prompt="make it blue",
        quality="low",
    )
    assert edit.usage is not None
    assert edit.usage.input_tokens_details.image_tokens == 2 * 323
    assert edit.usage.input_tokens == 3 + 2 * 323
    form = [r for r in fake_upstream.requests if r.path == "/v1/images/edits"][-1].body
    assert [image["size"] for image in form["image[]"]] == [len(PNG), 2 * len(PNG)]
    assert form["prompt"] == "make it blue"
    dall_e_2 = sdk.images.edit(model="dall-e-2", image=("a.png", PNG, "image/png"), prompt="a hat", n=2)
    assert dall_e_2.data is not None
    assert len(dall_e_2.data) == 2


def test_dall_e_3_is_charged_per_image_by_size_and_quality(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    """One 1024x1792 hd image at 0.12 USD: 12 credits, 12,000,000 micro-credits. dall-e-3 sends no
    usage, so the gateway makes one carrying the images billed, the cost and the balance left; the
    image itself comes through byte for byte."""
    team = image_teams.open("100")
    answer = client(imaging, team).images.generate(
        model="dalle", prompt="a red fox in snow", size="1024x1792", quality="hd", response_format="b64_json"
    )
    usage = answer.to_dict()["usage"]
    assert cost_micros(usage) == 12_000_000
    assert usage["images"] == 1
    assert usage["cost"]["breakdown"] == {"image:1024x1792/hd": {"images": 1, "credits": 12, "usd": 0.12}}
    assert Decimal(str(usage["remaining"]["credits"])) == 88
    assert answer.data is not None
    assert answer.data[0].b64_json == fake_image("a red fox in snow", 0)
    assert charged(imaging, team) == [12_000_000]
    sent = image_requests(fake_upstream)[-1].body
    assert sent["model"] == "dall-e-3"
    assert sent["quality"] == "hd"


def test_left_out_size_and_quality_are_the_models_defaults(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    """dall-e-3 makes 1024x1024 standard when neither is said: 0.04 USD, 4,000,000 micro-credits,
    as a URL (the default response format) relayed as it came."""
    team = image_teams.open("100")
    answer = client(imaging, team).images.generate(model="dalle", prompt="a lighthouse")
    assert cost_micros(answer.to_dict()["usage"]) == 4_000_000
    assert answer.data is not None
    assert answer.data[0].url is not None
    assert answer.data[0].url.startswith("https://images.example/")
    assert charged(imaging, team) == [4_000_000]


def test_a_gpt_image_answer_is_charged_by_its_tokens(imaging: Gateway, image_teams: Teams):
    """gpt-image-1.5, two high 1024x1024 images of "a watercolour lighthouse at dusk" (5 text tokens
    by the fake's count): 5 × 5 USD/M text in + 2 × 4,160 image tokens × 32 USD/M out = 266,265
    USD/M, × 100 = 26,626,500 micro-credits; the answer's own usage keeps its token counts."""
    team = image_teams.open("100")
    answer = client(imaging, team).images.generate(
        model="image-1.5", prompt="a watercolour lighthouse at dusk", quality="high", size="1024x1024", n=2
    )
    usage = answer.to_dict()["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (5, 8320)
    assert cost_micros(usage) == 26_626_500
    assert usage["cost"]["breakdown"]["image_output"] == {"tokens": 8320, "credits": 26.624, "usd": 0.26624}
    assert usage["cost"]["breakdown"]["input"] == {"tokens": 5, "credits": 0.0025, "usd": 0.000025}
    assert answer.data is not None
    assert len(answer.data) == 2
    assert answer.data[1].b64_json == fake_image("a watercolour lighthouse at dusk", 1)
    assert charged(imaging, team) == [26_626_500]


def test_gpt_image_1_output_tokens_are_image_tokens(imaging: Gateway, image_teams: Teams):
    """gpt-image-1 details no output: its 1,056 output tokens (one medium image, the fake's `auto`)
    are image tokens at 40 USD/M; 3 text tokens at 5 USD/M: 42,255 USD/M × 100 = 4,225,500."""
    team = image_teams.open("100")
    answer = client(imaging, team).images.generate(model="image-1", prompt="a calm sea", quality="auto")
    usage = answer.to_dict()["usage"]
    assert cost_micros(usage) == 4_225_500
    assert charged(imaging, team) == [4_225_500]


def test_the_hold_is_the_dearest_quality_the_request_allows(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    """A model whose provider picks the quality (no default): a 1024x1024 image may be standard
    (0.04 USD) or hd (0.08), so it is held at 8 credits. A team with 5 credits affords the standard
    image but not the dearest allowed: 402 before the upstream is called, affording 0 images."""
    team = image_teams.open("5")
    with pytest.raises(openai.APIStatusError) as refused:
        client(imaging, team).images.generate(model="dalle-any-quality", prompt="a fox")
    assert refused.value.status_code == 402
    error = refused.value.body
    assert isinstance(error, dict)
    assert error["affordable_n"] == 0
    assert refused.value.response.headers["x-tollgate-affordable-n"] == "0"
    assert image_requests(fake_upstream) == []
    assert charged(imaging, team) == []
    # Said outright, the standard quality is held at its own price, and served.
    answer = client(imaging, team).images.generate(model="dalle-any-quality", prompt="a fox", quality="standard")
    assert cost_micros(answer.to_dict()["usage"]) == 4_000_000


def test_a_quality_the_answer_does_not_name_is_charged_at_the_dearest_allowed(imaging: Gateway, image_teams: Teams):
    """dall-e-3 does not say which quality it chose: the charge takes the dearest the request
    allowed (hd, 8 credits), never less than the provider may bill."""
    team = image_teams.open("100")
    answer = client(imaging, team).images.generate(model="dalle-any-quality", prompt="a fox")
    assert cost_micros(answer.to_dict()["usage"]) == 8_000_000
    assert charged(imaging, team) == [8_000_000]


def test_402_says_how_many_images_the_balance_affords(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    """Three high images of gpt-image-1.5 are held at 3 × 0.133 USD (39.9 credits) and the prompt's
    bytes; a team with 30 credits affords two."""
    team = image_teams.open("30")
    with pytest.raises(openai.APIStatusError) as refused:
        client(imaging, team).images.generate(model="image-1.5", prompt="boats", quality="high", size="1024x1024", n=3)
    assert refused.value.status_code == 402
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["affordable_n"] == 2
    assert image_requests(fake_upstream) == []


def test_a_size_the_model_does_not_offer_is_a_clear_400(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    team = image_teams.open("100")
    with pytest.raises(openai.BadRequestError) as refused:
        client(imaging, team).images.generate(model="dalle", prompt="a fox", size="512x512")
    error = refused.value.body
    assert isinstance(error, dict)
    assert error["param"] == "size"
    assert error["message"] == (
        "The size '512x512' is not offered for this model; one of: 1024x1024, 1024x1792, 1792x1024."
    )
    for bad, param in (
        ({"n": 11}, "n"),
        ({"prompt": "x" * 32_001}, "prompt"),
        ({"response_format": "gif"}, "response_format"),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            client(imaging, team).images.generate(**{"model": "dalle", "prompt": "a fox", **bad})  # type: ignore[arg-type]
        assert isinstance(refused.value.body, dict)
        assert refused.value.body["param"] == param
    assert image_requests(fake_upstream) == []
    assert charged(imaging, team) == []


def test_an_upstream_refusal_is_passed_on_and_charges_nothing(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    team = image_teams.open("100")
    with pytest.raises(openai.BadRequestError) as refused:
        client(imaging, team).images.generate(model="dalle", prompt="[[fail:400]] a fox")
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["message"] == "fake upstream failure 400"
    assert len(image_requests(fake_upstream)) == 1
    assert charged(imaging, team) == []
    assert "held 0," in imaging.wait_until_nothing_held(team.name)


def test_an_idempotency_key_is_charged_once_and_replayed(imaging: Gateway, image_teams: Teams):
    team = image_teams.open("100")
    sdk = client(imaging, team)
    first = sdk.images.with_raw_response.generate(
        model="dalle", prompt="a fox", extra_headers={"Idempotency-Key": "image-once"}
    )
    again = sdk.images.with_raw_response.generate(
        model="dalle", prompt="a fox", extra_headers={"Idempotency-Key": "image-once"}
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert json.loads(again.http_response.content) == json.loads(first.http_response.content)
    assert charged(imaging, team) == [4_000_000]
    # The request lookup finds the charge under the answer's id.
    request_id = first.headers["x-request-id"]
    found = plain_http.get(
        f"{imaging.base_url}/requests/{request_id}", headers={"authorization": f"Bearer {team.key}"}
    ).json()["data"]
    assert (found["endpoint"], found["outcome"], found["charged_micros"]) == (
        "images.generations",
        "charged",
        4_000_000,
    )
    assert found["images"] == {"1024x1024/standard": 1}


def test_a_key_restricted_to_chat_may_not_generate_images(imaging: Gateway, image_teams: Teams):
    from app.ledger.results import KeyTerms

    team = image_teams.open("100")
    restricted = image_teams._ledger.issue_key(team.name, terms=KeyTerms(endpoints=["chat.completions"])).secret
    with pytest.raises(openai.PermissionDeniedError) as refused:
        client(imaging, Team(team.name, restricted)).images.generate(model="dalle", prompt="a fox")
    assert "/v1/images/generations" in str(refused.value)
    allowed = image_teams._ledger.issue_key(team.name, terms=KeyTerms(endpoints=["images.generations"])).secret
    answer = client(imaging, Team(team.name, allowed)).images.generate(model="dalle", prompt="a fox")
    assert cost_micros(answer.to_dict()["usage"]) == 4_000_000


def test_an_image_model_serves_images_only_and_a_chat_model_no_images(imaging: Gateway, image_teams: Teams):
    """Each model serves the endpoints it declares: a chat request to an image model, or an image
    request for a model that is not configured, is a 404 before anything is held."""
    team = image_teams.open("100")
    with pytest.raises(openai.NotFoundError):
        client(imaging, team).chat.completions.create(model="dalle", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError):
        client(imaging, team).images.generate(model="no-such-model", prompt="a fox")
    assert charged(imaging, team) == []


def test_image_requests_count_against_the_keys_rate_limit_and_are_logged(imaging: Gateway, image_teams: Teams):
    """A key allowed one request a minute makes one image, then gets 429 (nothing held or charged
    for it); the image's log line names its endpoint and model."""
    team = image_teams.open("100", key_rpm=1)
    first = client(imaging, team).images.with_raw_response.generate(model="dalle", prompt="a fox")
    with pytest.raises(openai.RateLimitError):
        client(imaging, team).images.generate(model="dalle", prompt="a fox")
    assert charged(imaging, team) == [4_000_000]
    line = imaging.access_line(first.headers["x-request-id"])
    assert (line["endpoint"], line["model"], line["status"]) == ("images.generations", "dalle", 200)


def edit_requests(fake: FakeUpstream) -> list:
    return [r for r in fake.requests if r.path == "/v1/images/edits"]


def test_an_edit_of_two_images_is_charged_by_its_tokens(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    """gpt-image-1.5 edits two images (323 image tokens each, by the fake) with "make it blue" (3
    text tokens) into one low 1024x1024 image (272 image tokens): 3 × 5 + 646 × 8 + 272 × 32 =
    13,887 USD/M, × 100 = 1,388,700 micro-credits. The form reaches the upstream as the client sent
    it but for the deployment's name of the model, its files byte for byte."""
    team = image_teams.open("100")
    answer = client(imaging, team).images.edit(
        model="image-1.5",
        image=[("a.png", PNG, "image/png"), ("b.png", PNG * 3, "image/png")],
        prompt="make it blue",
        quality="low",
        size="1024x1024",
    )
    usage = answer.to_dict()["usage"]
    assert usage["input_tokens_details"] == {"image_tokens": 646, "text_tokens": 3}
    assert cost_micros(usage) == 1_388_700
    assert usage["cost"]["breakdown"]["image_input"] == {"tokens": 646, "credits": 0.5168, "usd": 0.005168}
    assert charged(imaging, team) == [1_388_700]
    form = edit_requests(fake_upstream)[-1].body
    assert form["model"] == "gpt-image-1.5"
    assert [image["sha256"] for image in form["image[]"]] == [
        hashlib.sha256(PNG).hexdigest(),
        hashlib.sha256(PNG * 3).hexdigest(),
    ]


def test_a_dall_e_2_edit_is_charged_per_image(imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream):
    """Two 1024x1024 images (the default size) at 0.02 USD: 4,000,000 micro-credits; a mask is
    passed on."""
    team = image_teams.open("100")
    answer = client(imaging, team).images.edit(
        model="dalle-2", image=("a.png", PNG, "image/png"), mask=("m.png", PNG, "image/png"), prompt="a hat", n=2
    )
    assert cost_micros(answer.to_dict()["usage"]) == 4_000_000
    assert answer.to_dict()["usage"]["images"] == 2
    assert charged(imaging, team) == [4_000_000]
    assert edit_requests(fake_upstream)[-1].body["mask"]["size"] == len(PNG)


def test_an_edit_the_balance_cannot_hold_never_reaches_the_upstream(
    imaging: Gateway, image_teams: Teams, fake_upstream: FakeUpstream
):
    """Two high 1024x1024 edits are held at 2 × 0.133 USD (26.6 credits), plus the prompt's 5 bytes at
    5 USD/M and the input image at 6,240 image tokens × 8 USD/M (4.992 credits): 31.5945 credits. A
    team with 20 credits affords one (18.2945)."""
    team = image_teams.open("20")
    with pytest.raises(openai.APIStatusError) as refused:
        client(imaging, team).images.edit(
            model="image-1.5", image=("a.png", PNG, "image/png"), prompt="sails", quality="high", size="1024x1024", n=2
        )
    assert refused.value.status_code == 402
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["affordable_n"] == 1
    assert edit_requests(fake_upstream) == []
    with pytest.raises(openai.NotFoundError):  # dall-e-3's model here serves generations only
        client(imaging, team).images.edit(model="dalle", image=("a.png", PNG, "image/png"), prompt="x")
    with pytest.raises(openai.BadRequestError) as bad:
        client(imaging, team).images.edit(model="dalle-2", image=("a.png", PNG, "image/png"), prompt="x", size="64x64")  # type: ignore[arg-type]
    assert isinstance(bad.value.body, dict)
    assert bad.value.body["param"] == "size"
    assert charged(imaging, team) == []


def test_an_edit_under_an_idempotency_key_is_charged_once(imaging: Gateway, image_teams: Teams):
    """The same form sent twice under one Idempotency-Key (each with its own boundary, as the SDK
    makes them): one charge (two 1024x1024 dall-e-2 images, 4 credits), the second answer replayed."""
    team = image_teams.open("100")
    sdk = client(imaging, team)
    sent = [
        sdk.images.with_raw_response.edit(
            model="dalle-2",
            image=("a.png", PNG, "image/png"),
            prompt="a hat",
            n=2,
            extra_headers={"Idempotency-Key": "edit-once"},
        )
        for _ in range(2)
    ]
    assert sent[1].headers["idempotent-replayed"] == "true"
    assert json.loads(sent[1].http_response.content) == json.loads(sent[0].http_response.content)
    assert charged(imaging, team) == [4_000_000]
