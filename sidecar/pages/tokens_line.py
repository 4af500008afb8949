"""The line of token-length drift on ``/``, read from the check's gauges (the page needs no handle on it); the
words are ``sidecar/alerting/render/tokens.py``'s."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.alerting.render.tokens import line_text

__all__ = ["tokens_line"]

_P = "sidecar_token_drift_"
_FAMILIES = {_P + n for n in ("psi", "drifting", "edges_mismatch", "mean_tokens", "level")}
_MAX_PARTS = 12  # bounded: the alerts page lists everything


def tokens_line(registry: CollectorRegistry) -> str | None:
    """None when the token-length drift check does not run."""
    seen = False
    rows: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for family in registry.collect():
        if family.name not in _FAMILIES:
            continue
        seen = True
        for s in family.samples:
            lab = s.labels
            if "tokens" not in lab:
                continue
            key = (lab.get("server", ""), lab.get("model", ""), lab.get("version", ""), lab["tokens"])
            name = family.name[len(_P) :] + (f":{lab['window']}" if "window" in lab else "")
            rows.setdefault(key, {})[name] = s.value
    if not seen:
        return None
    out = []
    for key, v in rows.items():
        cur, ref = v.get("mean_tokens:current"), v.get("mean_tokens:reference")
        change = cur / ref - 1 if cur is not None and ref else None
        out.append((*key, v.get("psi"), change, v.get("drifting") == 1, v.get("edges_mismatch") == 1))
    out.sort(key=lambda r: (not r[6], not r[7], r[:4]))
    return line_text(out[:_MAX_PARTS])
