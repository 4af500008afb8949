"""The words of a batching-advisor finding (kind ``advice``), from its ``facts`` (``sidecar/checks/batching/check.py``).

Summary: ``ctr v2: max_queue_delay_microseconds 100 too short, try 2700`` with the evidence in the
description (rate, fill, queue time, the config), so the advice can be checked before it is followed.
"""

from __future__ import annotations

from sidecar.alerting.render.text import FindingText
from sidecar.model import Finding
from sidecar.naming import human_secs

__all__ = ["VERDICT_WORDS", "render"]

# The verdicts that call for a change, in the few words a one-line overview (``/``) gives each.
VERDICT_WORDS = {
    "enable": "enable dynamic batching",
    "saturated": "instances saturated",
    "too_long": "queue delay too long",
    "too_short": "queue delay too short",
}


def _num(v: object) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else float("nan")


def render(f: Finding) -> FindingText:
    facts = f.facts
    who = f"{f.labels.get('model', '?')} v{f.labels.get('version', '?')}"
    verdict = str(facts.get("verdict", ""))
    delay, sugg = _num(facts.get("delay_us")), _num(facts.get("suggested_delay_us"))
    rate, fill, queue = _num(facts.get("rate")), _num(facts.get("fill")), _num(facts.get("queue_us"))
    target, mbs = facts.get("target"), facts.get("max_batch_size")
    evidence = (
        f"Over the last {human_secs(f.window_secs)}: {facts.get('requests')} inferences at {rate:.3g}/s, "
        f"{fill:.2f} per execution (target batch {target}, max_batch_size {mbs}), mean queue time "
        f"{queue:.0f} us"
        + (f", max_queue_delay_microseconds {delay:.0f}." if delay == delay else ", dynamic batching off.")
    )
    if verdict == "insufficient":
        return (
            f"{who}: batching advice needs more traffic",
            f"{evidence} The advisor needs {facts.get('min_requests')} inferences in its window.",
        )
    if verdict == "enable":
        return (
            f"{who}: enable dynamic_batching (try max_queue_delay_microseconds {sugg:.0f})",
            f"{evidence} At this rate a wait of {sugg:.0f} us gathers about {rate * sugg / 1e6:.1f} more "
            f"requests per batch: add dynamic_batching {{ max_queue_delay_microseconds: {sugg:.0f} }}.",
        )
    if verdict == "saturated":
        return (
            f"{who}: requests queue {queue:.0f} us, far above the {delay:.0f} us delay: instances busy",
            f"{evidence} Queue time is over three times the configured delay, so the wait is for busy "
            f"instances, not for a batch: raise the instance_group count or the model's GPU share; a "
            f"different delay will not help.",
        )
    if verdict == "too_long":
        return (
            f"{who}: max_queue_delay_microseconds {delay:.0f} too long, try {sugg:.0f}",
            f"{evidence} Requests wait about the full delay yet batches barely form at this traffic: the "
            f"wait adds latency for little throughput. Try max_queue_delay_microseconds {sugg:.0f}.",
        )
    if verdict == "too_short":
        return (
            f"{who}: max_queue_delay_microseconds {delay:.0f} too short, try {sugg:.0f}",
            f"{evidence} Batches stay under the target; at this rate a wait of {sugg:.0f} us gathers about "
            f"{rate * sugg / 1e6:.1f} more requests. Try max_queue_delay_microseconds {sugg:.0f} (it adds "
            f"up to that much latency).",
        )
    if verdict == "not_batchable":
        return f"{who}: not batchable (max_batch_size {mbs})", f"{evidence} Nothing to advise."
    return f"{who}: batching delay fits the traffic", f"{evidence} Nothing to change."
