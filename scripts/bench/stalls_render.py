"""The stall finder's report as text (``scripts/bench/stalls.py`` finds; this says what it found)."""

from __future__ import annotations

from typing import Any

from scripts.bench.stalls import STEPS, SYMPTOM


def _detail(detail: Any) -> str:
    if isinstance(detail, dict) and "stacks" in detail:  # a late loop: its most frequent stack
        n, stack = detail["stacks"][0]
        return f"[{n}/{detail['samples']} samples: {stack}]"
    return "" if detail is None else f"({detail})"


def render(label: str, s: dict[str, Any]) -> str:
    if not s.get("outliers"):
        return f"stalls, {label}: no outliers"
    n = s["outliers"]
    head = (
        f"stalls, {label}: {n} outliers ({s['outliers_over_3x_p50']} over 3× p50) of {s['requests']:,} requests "
        f"in {s['seconds']:.1f} s, {s['episodes']} separate episodes; {s['rule']}"
    )
    columns = (
        f"  {'kind':<17} {'explains':>8} {'ms/s':>6} {'CPU':>6} {'runq':>6} {'spans/s':>7} {'long/s':>6} "
        f"{'long: % of outliers / of run':>29}  longest (ms)"
    )
    out = [head, columns]
    for kind, k in sorted(s["kinds"].items(), key=lambda kv: (-kv[1]["outliers"], -kv[1]["ms_per_s"])):
        longest = ", ".join(f"{x['ms']:.1f}" for x in k["longest"])
        shares = f"{k['long_share_of_outliers']:.0%} / {k['long_share_of_run']:.0%}"
        cpu, runq = (("" if k[f] is None else f"{k[f]:.1f}") for f in ("cpu_ms_per_s", "runq_ms_per_s"))
        out.append(
            f"  {kind:<17} {k['outliers_share']:>8.0%} {k['ms_per_s']:>6.1f} {cpu:>6} {runq:>6} "
            f"{k['per_s']:>7.1f} {k['long_per_s']:>6.1f} {shares:>29}  {longest}"
        )
    timeline = s.get("timeline", {})
    out.append(
        f"  explained by a recorded cause: {s['explained']} of {n}; only by the loop being late: "
        f"{s['loop_late_only']}; neither, nor by a slow step: {s['unexplained']}"
        + ("" if timeline.get("complete", True) else " (TIMELINE INCOMPLETE)")
        + (f"; {timeline['dropped']} spans dropped" if timeline.get("dropped") else "")
    )
    steps = s.get("steps", {})
    if steps.get("outliers") and steps.get("all"):
        o, a = steps["outliers"], steps["all"]
        out.append(
            "  where the time went, the median time to reach each step, outliers / all requests (ms): "
            + ", ".join(f"{step} {o.get(step, 0):.1f} / {a.get(step, 0):.1f}" for step in STEPS if step in a)
        )
        slow = steps.get("slow", {})
        out.append(
            "  outliers with a slow step: "
            + (", ".join(f"{step} {slow[step]}" for step in STEPS if slow.get(step)) or "none")
        )
    for x in s["kinds"].get(SYMPTOM, {}).get("longest", []):
        if x["detail"]:
            out.append(
                f"  loop late {x['ms']:.1f} ms (the loop thread on a CPU {x['cpu_ms'] or 0:.1f} ms, waiting "
                f"for one {x['runq_ms'] or 0:.1f} ms): {_detail(x['detail'])}"
            )
            threads = "; ".join(f"{n}× {where}" for n, where in x["detail"].get("threads", []))
            out.append(f"      other threads meanwhile: {threads or 'all waiting'}")
    out.append(
        "  the worst request of each of the worst episodes (run, start in the run, latency; "
        "spans from the request's start):"
    )
    for w in s["worst"]:
        steps = w.get("steps_ms")
        stepped = "" if not steps else " = " + " + ".join(f"{v:.1f} to {k}" for k, v in steps.items())
        out.append(
            f"    #{w['run']} +{w['offset_s']:.3f} s {w['latency_ms']:.1f} ms{stepped} "
            f"(p50 {w['p50_ms']:.1f}), explained by {', '.join(w['explained_by']) or 'nothing'}, "
            f"slow steps: {', '.join(w['slow_steps']) or 'none'}; {w['not_drawn']} shorter spans not drawn:"
        )
        for sp in w["spans"][:16]:
            cpu = "" if sp["cpu_ms"] is None else f"(CPU {sp['cpu_ms']:.1f}, runq {sp['runq_ms'] or 0:.1f}) "
            out.append(
                f"      {sp['at_ms']:+8.1f} ms {sp['ms']:7.1f} ms  {sp['kind']:<16} {cpu}{_detail(sp['detail'])}"
            )
    return "\n".join(out)
