"""A batch's input file, checked and mapped line by line before anything goes upstream.

Each line is judged as the same request sent alone would be (``POST /v1/chat/completions``, or
``POST /v1/embeddings`` in a batch of embeddings): its body parsed and bounded, its model known,
serving that endpoint and allowed for the key, its output limit within the model's, its prompt (or
its inputs) within the context window. The first bad line refuses the whole batch, and the
refusal names it (its number and ``custom_id``) with what is wrong. Each good line is written out
with its model renamed to the deployment's, into a spool file (on disk past a few MB: the input is
never whole in memory), and its worst case at the model's batch price added to the batch's hold.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import msgspec

from app.batches.settle import EMBEDDINGS_PATH
from app.errors import GatewayError, InvalidRequest
from app.http.prompt_size import measure_prompt, model_rules
from app.http.routes.auth import authorize
from app.http.routes.chat import parse_chat_request
from app.http.routes.embeddings import count_inputs, parse_embeddings_request, read_inputs
from app.http.routes.messages import MessagesRequest
from app.http.routes.request_body import check_output_limit, check_positive, read_json_object, require, validate
from app.http.routes.request_counts import check_counts
from app.http.routes.served import served_model
from app.keys import Principal
from app.runtime import Runtime
from domain import endpoints
from domain.client_text import ClientTextError, checked_text
from domain.pricing import worst_case_in_micros
from domain.settings import Model

#: The endpoints a batch's lines may call (the Batch API's ``endpoint``), each as its request is checked.
BATCH_ENDPOINTS = ("/v1/chat/completions", EMBEDDINGS_PATH)
#: An input file's lines are spooled in memory up to this size, then on disk.
SPOOL_BYTES = 4 * 1024 * 1024
#: The most lines one batch may have (OpenAI's limit).
MAX_LINES = 50_000
#: The longest ``custom_id`` a line may have (it names the line's charge: ``BATCH_ID:CUSTOM_ID``).
MAX_CUSTOM_ID = 512


class BadLine(InvalidRequest):
    """A line of the input file that the batch is refused for; its words say which and why."""


@dataclass
class CheckedInput:
    """An input file whose every line passed: the model they all use, the deployment that runs them,
    the lines as they go upstream, and the sum of their worst cases at the batch price."""

    model: Model
    deployment: int
    lines: int = 0
    worst_case: int = 0
    size: int = 0
    # closed by the batch's creation once uploaded (not a ``with``: it outlives this module's calls)
    spool: IO[bytes] = field(default_factory=lambda: tempfile.SpooledTemporaryFile(SPOOL_BYTES))  # noqa: SIM115

    def chunks(self, size: int = 1024 * 1024) -> Iterator[bytes]:
        self.spool.seek(0)
        while chunk := self.spool.read(size):
            yield chunk


async def split_lines(chunks: Iterator[bytes]) -> Any:
    """The lines of a file read chunk by chunk (each chunk read in a worker thread: it is a query)."""
    pending = b""
    while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line
    if pending:
        yield pending


@dataclass(frozen=True, slots=True)
class Sized:
    """One checked request: its body as it goes upstream (model renamed after), its model, and the
    tokens its worst case is held for."""

    body: dict[str, Any]
    model: Model
    prompt: int
    most: int


class LineChecker:
    """Checks and maps the lines of one batch's input, in order."""

    def __init__(self, runtime: Runtime, principal: Principal, endpoint: str, deployment_of: Any) -> None:
        self._runtime = runtime
        self._principal = principal
        self._endpoint = endpoint
        self._deployment_of = deployment_of  # Model -> the index of the deployment that runs its batches
        self._seen: set[str] = set()
        self.checked: CheckedInput | None = None

    async def line(self, number: int, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            line = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            raise BadLine(f"Line {number} of the input file is not valid JSON.", param="input_file_id") from None
        await self.item(f"Line {number} of the input file", line, "input_file_id")

    async def item(self, where: str, line: Any, param: str) -> None:
        """Check one request of the batch (``where`` names it in a refusal, ``param`` the field)."""
        named = line.get("custom_id") if isinstance(line, dict) else None
        custom_id = named if isinstance(named, str) else ""
        try:
            if not isinstance(line, dict):
                raise InvalidRequest("each request must be a JSON object with its custom_id.")
            await self._check(line, custom_id)
        except GatewayError as exc:
            named = f" (custom_id '{custom_id}')" if custom_id else ""
            raise BadLine(f"{where}{named}: {exc.message}", param=param) from None

    def _unique(self, custom_id: str) -> None:
        if not custom_id:
            raise InvalidRequest("'custom_id' must be a non-empty string.")
        try:  # it names the line's charge in the ledger: the rule for text the ledger records
            checked_text(custom_id, "custom_id", MAX_CUSTOM_ID)
        except ClientTextError as exc:
            raise InvalidRequest(str(exc)) from None
        if custom_id in self._seen:
            raise InvalidRequest(f"the custom_id '{custom_id}' is used by an earlier request; each must be unique.")
        self._seen.add(custom_id)

    def _hold_for(self, checked: CheckedInput, model: Model, prompt: int, most: int) -> None:
        """Add the request's worst case at the model's batch price (with the team's markup)."""
        price = self._runtime.prices.current(model.id).for_batch()[0]
        checked.worst_case += worst_case_in_micros(
            prompt,
            most,
            price,
            self._runtime.settings.credits_per_usd,
            adjustment=self._principal.adjustment_for(model.id),
        )

    def _write(self, checked: CheckedInput, out: bytes, separator: bytes) -> None:
        if checked.lines:
            checked.spool.write(separator)
            checked.size += len(separator)
        checked.spool.write(out)
        checked.size += len(out)
        checked.lines += 1
        if checked.lines > MAX_LINES:
            raise InvalidRequest(f"a batch has at most {MAX_LINES} requests.")

    async def _check(self, line: dict[str, Any], custom_id: str) -> None:
        self._unique(custom_id)
        if line.get("method") != "POST":
            raise InvalidRequest("'method' must be POST.")
        if line.get("url") != self._endpoint:
            raise InvalidRequest(f"'url' must be the batch's endpoint, {self._endpoint}.")
        body = line.get("body")
        if not isinstance(body, dict):
            raise InvalidRequest("'body' must be a JSON object: the request.")
        if body.get("stream"):
            raise InvalidRequest("a batch's requests are not streamed: 'stream' must be false or left out.")
        raw = msgspec.json.encode(body)
        sized = await (self._embedding(raw) if self._endpoint == EMBEDDINGS_PATH else self._chat(raw))
        checked = self._for(sized.model)
        self._hold_for(checked, sized.model, sized.prompt, sized.most)
        sized.body["model"] = sized.model.name_at(sized.model.deployments[checked.deployment])
        out = msgspec.json.encode({"custom_id": custom_id, "method": "POST", "url": self._endpoint, "body": sized.body})
        self._write(checked, out, b"\n")

    async def _chat(self, raw: bytes) -> Sized:
        """A chat completion's line: its output limits within the model's, its prompt counted."""
        body, chat = parse_chat_request(raw, self._runtime.settings)
        model = served_model(self._runtime.settings, chat.model, endpoints.CHAT)
        authorize(self._principal, model.id, endpoints.BATCHES)
        self._same_model(model)
        limits = (
            check_output_limit(chat.max_tokens, model, "max_tokens"),
            check_output_limit(chat.max_completion_tokens, model, "max_completion_tokens"),
        )
        for name, limit in zip(("max_tokens", "max_completion_tokens"), limits, strict=True):
            if limit is not None:
                body[name] = limit
        most = (limits[1] or limits[0] or model.max_output_tokens) * (chat.n or 1)
        prompt = await measure_prompt(model, "chat", body, "chat", len(raw))
        return Sized(body, model, prompt, most)

    async def _embedding(self, raw: bytes) -> Sized:
        """An embeddings line, checked as ``POST /v1/embeddings`` alone is (``routes/embeddings.py``):
        its inputs counted with the model's tokenizer, each within the context window; no output."""
        body, parsed = parse_embeddings_request(raw, self._runtime.settings)
        inputs = read_inputs(parsed.input)
        model = served_model(self._runtime.settings, parsed.model, endpoints.EMBEDDINGS)
        authorize(self._principal, model.id, endpoints.BATCHES)
        self._same_model(model)
        rules = model_rules(model, self._runtime.upstreams[model.id].wire)
        return Sized(body, model, count_inputs(inputs, rules, model.context_window), 0)

    def _same_model(self, model: Model) -> None:
        if self.checked is not None and self.checked.model.id != model.id:
            raise InvalidRequest(
                f"every line of a batch uses one model: this one asks `{model.id}`, earlier lines "
                f"`{self.checked.model.id}`."
            )

    def _for(self, model: Model) -> CheckedInput:
        if self.checked is None:
            deployment = self._deployment_of(model)
            if deployment is None:
                raise InvalidRequest(f"The model `{model.id}` has no upstream that runs batches.", param="model")
            self.checked = CheckedInput(model, deployment)
        self._same_model(model)
        return self.checked


class MessagesChecker(LineChecker):
    """The requests of an Anthropic message batch (``{"custom_id", "params"}``), each checked as the same
    ``POST /v1/messages`` sent alone, written out comma-separated (the items of the upstream's
    ``requests`` array)."""

    async def _check(self, line: dict[str, Any], custom_id: str) -> None:
        self._unique(custom_id)
        params = line.get("params")
        if not isinstance(params, dict):
            raise InvalidRequest("'params' must be a JSON object: the Messages request.")
        if params.get("stream"):
            raise InvalidRequest("a batch's requests are not streamed: 'stream' must be false or left out.")
        raw = msgspec.json.encode(params)
        body = read_json_object(raw, self._runtime.settings.max_json_depth)
        check_counts(body, "messages", self._runtime.settings)
        require(body, "model", "messages", "max_tokens")
        parsed = validate(body, MessagesRequest)
        model = served_model(self._runtime.settings, parsed.model, endpoints.MESSAGES)
        authorize(self._principal, model.id, endpoints.BATCHES)
        checked = self._for(model)
        check_positive(parsed.max_tokens, "max_tokens")
        most = check_output_limit(parsed.max_tokens, model, "max_tokens") or parsed.max_tokens
        body["max_tokens"] = most
        prompt = await measure_prompt(model, "messages", body, "messages", len(raw))
        self._hold_for(checked, model, prompt, most)
        body["model"] = model.name_at(model.deployments[checked.deployment])
        self._write(checked, msgspec.json.encode({"custom_id": custom_id, "params": body}), b",")
