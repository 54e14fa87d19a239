"""The soak: non-streaming chat at half Tollgate's measured peak rate for a long while, watching
its memory. A gateway that keeps something per request (a cache without bound, a list of holds, a
leaked task) grows steadily; one that does not levels off after its warm-up.

Growth is measured from the resident set after the first tenth of the soak (caches and pools warm)
to the end, for the gateway process that grew most.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from scripts.bench.cases import CASES
from scripts.bench.loadgen import Load, LoadGenerators, Result, Target, render_request
from scripts.bench.procstat import rss_mb


def soak(
    plan: Any, gateway: Any, key: str, loadgens: LoadGenerators, config: dict[str, Any], seconds: float
) -> dict[str, Any]:
    chat = config["cases"].get("chat")
    if not chat:
        raise SystemExit("--soak needs the chat case, whose peak rate it runs at half of")
    top = max(chat, key=int)
    rate = chat[top]["tollgate"]["rps"] / 2
    concurrency = int(top)
    case = CASES["chat"]
    request = render_request("127.0.0.1", gateway.port, case.path, case.body_bytes(), case.headers(key))
    print(f"soak: {seconds:.0f} s of chat at {rate:.0f} req/s over {concurrency} connections", flush=True)

    outcome: dict[str, Result] = {}
    runner = threading.Thread(
        target=lambda: outcome.setdefault(
            "result", loadgens.run(Target("127.0.0.1", gateway.port), Load(request, concurrency, seconds, rate=rate))
        )
    )
    every = max(1.0, min(5.0, seconds / 20))
    samples: list[dict[str, Any]] = []
    started = time.monotonic()
    runner.start()
    while runner.is_alive():
        samples.append(
            {
                "t": round(time.monotonic() - started, 1),
                "rss_mb": {str(pid): round(mb, 2) for pid, mb in rss_mb(gateway.pids()).items()},
            }
        )
        runner.join(timeout=every)
    samples.append(
        {
            "t": round(time.monotonic() - started, 1),
            "rss_mb": {str(pid): round(mb, 2) for pid, mb in rss_mb(gateway.pids()).items()},
        }
    )
    result = outcome["result"]

    baseline = next(s for s in samples if s["t"] >= seconds / 10) if samples[-1]["t"] >= seconds / 10 else samples[0]
    end = samples[-1]
    growth = {
        pid: (end["rss_mb"][pid] - mb) / mb * 100
        for pid, mb in baseline["rss_mb"].items()
        if pid in end["rss_mb"] and mb > 0
    }
    worst = max(growth, key=growth.__getitem__)
    return {
        "seconds": seconds,
        "rate": rate,
        "concurrency": concurrency,
        "requests": result.ok,
        "errors": result.errors,
        "achieved_rps": result.ok / result.seconds,
        "growth_pct": growth[worst],
        "rss_start_mb": baseline["rss_mb"][worst],
        "rss_end_mb": end["rss_mb"][worst],
        "baseline_at_s": baseline["t"],
        "samples": samples,
    }
