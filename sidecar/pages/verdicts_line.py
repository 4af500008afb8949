"""The one line of Triton verdicts on ``/``: what the cold-start watch, batching advisor and tracing governor say
now, read from their metrics (so the page needs no handle on them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.alerting.render.batching import VERDICT_WORDS as _ADVICE
from sidecar.alerting.render.cold_start import CHECK_WORDS as _COLD

__all__ = ["gpu_memory_line", "verdict_line"]

_FAMILIES = {"sidecar_cold_start_condition", "sidecar_batching_verdict", "sidecar_tracing_governor_boosted"}


def verdict_line(registry: CollectorRegistry) -> str | None:
    """None when no verdict is configured; "nothing to report" when all is well."""
    seen = False
    parts: list[str] = []
    boosted: list[str] = []
    for family in registry.collect():
        if family.name not in _FAMILIES:
            continue
        seen = True
        for s in family.samples:
            lab = s.labels
            if s.value != 1:
                continue
            who = f"{lab.get('model', '?')} v{lab.get('version', '?')}"
            if family.name == "sidecar_cold_start_condition":
                parts.append(f"{who}: {_COLD.get(lab.get('check', ''), lab.get('check', ''))}")
            elif family.name == "sidecar_batching_verdict" and lab.get("verdict") in _ADVICE:
                parts.append(f"{who}: {_ADVICE[lab['verdict']]}")
            elif family.name == "sidecar_tracing_governor_boosted":
                boosted.append(lab.get("model", "?"))
    if not seen:
        return None
    parts = sorted(parts)[:20]  # bounded: the alerts page lists everything
    if boosted:
        parts.append("tracing raised for " + ", ".join(sorted(boosted)))
    return "; ".join(parts) or "nothing to report"


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def gpu_memory_line(registry: CollectorRegistry, limit: int = 10) -> str | None:
    """The largest per-model GPU memory figures, each with the method that gave it; None when nothing is
    attributed (no GPU, no NVML, or GPU memory per model not wired)."""
    rows: list[tuple[float, str]] = []
    for family in registry.collect():
        if family.name != "sidecar_model_gpu_memory_bytes":
            continue
        for s in family.samples:
            lab = s.labels
            rows.append(
                (
                    s.value,
                    f"{lab.get('model', '?')} v{lab.get('version', '?')} {_bytes(s.value)} ({lab.get('method', '?')})",
                )
            )
    if not rows:
        return None
    rows.sort(key=lambda r: (-r[0], r[1]))
    more = len(rows) - limit
    return "; ".join(text for _, text in rows[:limit]) + (f"; {more} more on /metrics" if more > 0 else "")
