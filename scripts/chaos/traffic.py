"""The traffic mix: which requests the suite sends, decided up front from the seed.

Every choice — endpoint, model (its own wire or translated), plain or streaming, team and key,
gateway, Idempotency-Key, and the upstream fault the request asks the fake for — is drawn from one
seeded generator before anything runs, so a seed names the same traffic every time; only the
timing of the faults around it varies. Requests are spread evenly over the load phase (an open
loop), so the infrastructure faults always land in the middle of traffic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from scripts.chaos.gateways import MODELS

#: The endpoints and the model of each one's own wire (the rest of the time a model is translated).
ENDPOINTS = {
    "chat": ("/v1/chat/completions", "chaos-gpt"),
    "responses": ("/v1/responses", "chaos-codex"),
    "messages": ("/v1/messages", "chaos-claude"),
}
#: The upstream faults a request may ask for, and how often (the rest ask for none).
UPSTREAM_FAULTS = {
    "fail-503": 0.04,  # the provider is overloaded: 503
    "fail-502": 0.03,  # the provider fails: 502
    "fail-429": 0.03,  # the provider rate-limits: 429
    "hang": 0.03,  # the provider never answers within the model's timeout: 504
    "cut": 0.06,  # the provider breaks off its answer (a stream mid-way; a plain answer: 502)
    "stream-error": 0.03,  # the provider sends an error event mid-stream
}
#: Streams that take a couple of seconds (a pause before each chunk): the gateway killed "mid-stream"
#: must have some in flight.
SLOW_SHARE = 0.12
#: Requests for one busy team (the first, a rich one), from every gateway at once: its writes contend
#: across processes (the writer lock, optimistic concurrency), idempotent holds included.
HOT_SHARE = 0.2
SLOW_CHUNK_MS = 150
HANG_MS = 6000
MAX_TOKENS = 32
WORDS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
)


@dataclass(frozen=True, slots=True)
class Plan:
    """One logical request: what is sent, to whom, when, and what it asks the upstream to do."""

    index: int
    at: float  # seconds after the load phase starts
    gateway: int
    team: int
    key: int  # which of the team's two keys
    endpoint: str  # chat | responses | messages
    model: str
    stream: bool
    fault: str  # "" or one of UPSTREAM_FAULTS, or "slow"
    idempotency_key: str  # "" for none
    replay: bool  # sent once more after it succeeded: the stored answer must come back, uncharged
    text: str

    @property
    def path(self) -> str:
        return ENDPOINTS[self.endpoint][0]

    def body(self) -> dict[str, Any]:
        if self.endpoint == "chat":
            body: dict[str, Any] = {
                "model": self.model,
                "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": self.text}],
            }
            if self.stream:
                body["stream_options"] = {"include_usage": True}
        elif self.endpoint == "responses":
            body = {"model": self.model, "max_output_tokens": MAX_TOKENS, "input": self.text}
        else:
            body = {"model": self.model, "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": self.text}]}
        if self.stream:
            body["stream"] = True
        return body


def _directive(fault: str, rng: random.Random, words: int) -> str:
    if fault == "fail-503":
        return "[[fail:503]]"
    if fault == "fail-502":
        return "[[fail:502]]"
    if fault == "fail-429":
        return "[[fail:429]]"
    if fault == "hang":
        return f"[[latency:{HANG_MS}]]"
    if fault == "cut":
        return f"[[drop-after:{rng.randint(1, max(1, words - 1))}]]"
    if fault == "stream-error":
        return "[[stream-error]]"
    if fault == "slow":
        return f"[[chunk-delay:{SLOW_CHUNK_MS}]]"
    return ""


def plan_traffic(
    seed: int, requests: int, teams: int, gateways: int, duration: float, idempotent_share: float = 0.15
) -> list[Plan]:
    """``requests`` plans over ``duration`` seconds, drawn from ``seed``."""
    rng = random.Random(seed)
    faults = list(UPSTREAM_FAULTS)
    weights = list(UPSTREAM_FAULTS.values())
    plans = []
    for i in range(requests):
        endpoint = rng.choices(list(ENDPOINTS), weights=(0.4, 0.3, 0.3))[0]
        model = ENDPOINTS[endpoint][1] if rng.random() < 0.8 else rng.choice(list(MODELS))
        stream = rng.random() < 0.5
        draw = rng.random()
        fault = ""
        for name, weight in zip(faults, weights, strict=True):
            if draw < weight:
                fault = name
                break
            draw -= weight
        if not fault and stream and rng.random() < SLOW_SHARE / 0.5:
            fault = "slow"
        if fault == "stream-error" and not stream:
            fault = ""
        words = rng.randint(6, 14)
        text = f"chaos {seed} {i}: " + " ".join(rng.choice(WORDS) for _ in range(words))
        directive = _directive(fault, rng, words)
        idempotent = rng.random() < idempotent_share
        plans.append(
            Plan(
                index=i,
                at=i * duration / requests + rng.uniform(0, duration / requests),
                gateway=rng.randrange(gateways),
                team=0 if rng.random() < HOT_SHARE else rng.randrange(teams),
                key=rng.randrange(2),
                endpoint=endpoint,
                model=model,
                stream=stream,
                fault=fault,
                idempotency_key=f"chaos-{seed}-{i}" if idempotent else "",
                replay=idempotent and rng.random() < 0.25,
                text=f"{text} {directive}".strip(),
            )
        )
    return plans
