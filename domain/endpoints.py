"""The billed endpoints, by the names the ledger records, key restrictions and models' `endpoints` use."""

from __future__ import annotations

CHAT = "chat.completions"
RESPONSES = "responses"
MESSAGES = "messages"
EMBEDDINGS = "embeddings"
IMAGES_GENERATIONS = "images.generations"
IMAGES_EDITS = "images.edits"
AUDIO_TRANSCRIPTIONS = "audio.transcriptions"
AUDIO_TRANSLATIONS = "audio.translations"
AUDIO_SPEECH = "audio.speech"
BATCHES = "batches"
#: Google's Gemini API: generateContent and streamGenerateContent (countTokens belongs to it).
GENERATE_CONTENT = "generate_content"

#: The endpoints that generate text (chat completions, Responses, Anthropic messages, Gemini's
#: generateContent): what a model serves when its configuration does not say (``Model.endpoints``).
GENERATION = (CHAT, RESPONSES, MESSAGES, GENERATE_CONTENT)

#: Name → the path a client calls (``/v1/messages/count_tokens`` belongs to ``messages``).
ENDPOINT_PATHS = {
    CHAT: "/v1/chat/completions",
    RESPONSES: "/v1/responses",
    MESSAGES: "/v1/messages",
    EMBEDDINGS: "/v1/embeddings",
    IMAGES_GENERATIONS: "/v1/images/generations",
    IMAGES_EDITS: "/v1/images/edits",
    AUDIO_TRANSCRIPTIONS: "/v1/audio/transcriptions",
    AUDIO_TRANSLATIONS: "/v1/audio/translations",
    AUDIO_SPEECH: "/v1/audio/speech",
    BATCHES: "/v1/batches",
    GENERATE_CONTENT: "/v1beta/models/{model}:generateContent",
}

#: Name → its label for people (the dashboard's usage by endpoint).
ENDPOINT_LABELS = {
    CHAT: "Chat completions",
    RESPONSES: "Responses",
    MESSAGES: "Messages",
    EMBEDDINGS: "Embeddings",
    IMAGES_GENERATIONS: "Image generations",
    IMAGES_EDITS: "Image edits",
    AUDIO_TRANSCRIPTIONS: "Audio transcriptions",
    AUDIO_TRANSLATIONS: "Audio translations",
    AUDIO_SPEECH: "Speech",
    BATCHES: "Batches",
    GENERATE_CONTENT: "Gemini generateContent",
}


#: The paths a Gemini client calls a model's methods under (``/v1beta/models/ID:generateContent``;
#: Google serves ``/v1/`` too), and those methods.
GEMINI_PREFIXES = ("/v1beta/models/", "/v1/models/")
GEMINI_METHODS = ("generateContent", "streamGenerateContent", "countTokens")


def gemini_call(path: str) -> tuple[str, str] | None:
    """The model and method a Gemini path names, or None. The method follows the model's last colon
    (an id may hold colons: ``…-v1:0``); ``models/`` before the id is Google's resource name."""
    for prefix in GEMINI_PREFIXES:
        if path.startswith(prefix):
            model, colon, method = path[len(prefix) :].rpartition(":")
            if colon and model and method in GEMINI_METHODS:
                return model.removeprefix("models/"), method
    return None


def parse_endpoints(text: str) -> list[str]:
    """A comma-separated list of endpoint names ('' for any); paths are accepted too."""
    by_path = {path: name for name, path in ENDPOINT_PATHS.items()}
    names = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name = by_path.get(item, item)
        if name not in ENDPOINT_PATHS:
            raise ValueError(f"unknown endpoint {item!r}; expected one of {', '.join(ENDPOINT_PATHS)}")
        names.append(name)
    return names
