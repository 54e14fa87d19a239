"""The image and audio models the fuzzers add to a gateway's configuration, on the fake upstream."""

from __future__ import annotations


def _model(model_id: str, deployed: str, upstream: str, endpoints: str, pricing: str, extra: str = "") -> str:
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "openai"
context_window = 32000
max_output_tokens = 1
endpoints = [{endpoints}]
{extra}
upstream = {{kind = "openai", base_url = "{upstream}", api_key_env = "UPSTREAM_KEY", model = "{deployed}"}}
[models.pricing]
{pricing}
"""


def spend_models(upstream: str) -> str:
    """``fuzz-whisper`` (0.0001 USD per second of audio), ``fuzz-tts`` (15 USD per million characters),
    ``fuzz-dalle`` (dall-e-3's table) and ``fuzz-dalle-2`` (its edits)."""
    defaults = 'image_defaults = {size = "1024x1024", quality = "standard"}'
    return (
        _model(
            "fuzz-whisper",
            "whisper-1",
            upstream,
            '"audio.transcriptions", "audio.translations"',
            "audio_second = 0.0001",
        )
        + _model("fuzz-tts", "tts-1", upstream, '"audio.speech"', "input_characters = 15")
        + _model(
            "fuzz-dalle",
            "dall-e-3",
            upstream,
            '"images.generations"',
            'images = {"1024x1024/standard" = 0.04, "1024x1024/hd" = 0.08, "1792x1024/hd" = 0.12}',
            defaults,
        )
        + _model(
            "fuzz-dalle-2",
            "dall-e-2",
            upstream,
            '"images.edits"',
            'images = {"256x256/standard" = 0.016, "1024x1024/standard" = 0.02}',
            defaults,
        )
    )
