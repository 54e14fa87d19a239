"""The tests' own HTTP calls: httpx's top-level functions and clients, on one TLS context a process.

httpx builds a TLS context for every client it makes, and each top-level call (``httpx.get``,
``httpx.post``) makes one: certifi's bundle parsed again, 26 ms of CPU on these 2-core machines,
for requests that go to the gateway and the fakes over plain ``http://`` and never use it. Sampled
over a ``make test`` run (2026-11-29), that was two fifths of the pytest processes' CPU — the
gateway's readiness poll alone built one every 50 ms while the gateway it waited for started.
The clients under test (the providers' SDKs, the coding agents) build their own, as they do for
their users; these functions are for the tests' own requests, and take what httpx's take."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import certifi
import httpx

#: httpx's default context (certifi's roots, hostnames checked), built once.
TLS = ssl.create_default_context(cafile=certifi.where())


def request(method: str, url: str | httpx.URL, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("verify", TLS)
    return httpx.request(method, url, **kwargs)


get = functools.partial(request, "GET")
options = functools.partial(request, "OPTIONS")
head = functools.partial(request, "HEAD")
post = functools.partial(request, "POST")
put = functools.partial(request, "PUT")
patch = functools.partial(request, "PATCH")
delete = functools.partial(request, "DELETE")


@contextmanager
def stream(method: str, url: str | httpx.URL, **kwargs: Any) -> Iterator[httpx.Response]:
    kwargs.setdefault("verify", TLS)
    with httpx.stream(method, url, **kwargs) as response:
        yield response


def Client(**kwargs: Any) -> httpx.Client:  # noqa: N802 - it stands for httpx.Client at its call sites
    kwargs.setdefault("verify", TLS)
    return httpx.Client(**kwargs)


def AsyncClient(**kwargs: Any) -> httpx.AsyncClient:  # noqa: N802 - it stands for httpx.AsyncClient
    kwargs.setdefault("verify", TLS)
    return httpx.AsyncClient(**kwargs)
