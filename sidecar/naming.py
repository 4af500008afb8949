"""Names and short forms shared by the checks, the alert book and the exporters: how a check's name becomes an
alert name, how a label set becomes an identity, how a duration is written. Depends on nothing of ours, so no
layer has to import another to agree on them."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

__all__ = ["alert_name", "camel_alertname", "fingerprint", "human_secs"]


def camel_alertname(check: str) -> str:
    """The alert name a finding of this check gets unless it names one: ``ctr_mean_down`` -> ``CtrMeanDown``."""
    return "".join(p.capitalize() for p in check.split("_") if p)


def alert_name(check: str, kind: str, labels: Mapping[str, str]) -> str:
    """The alert name of a finding whose labels carry none. Drift findings get the names the Prometheus rules
    (alerts/drift.rules.yml) and the runbooks use, so one silence written from a runbook matches both paths;
    any other check is named after itself."""
    if kind == "drift":
        return "FeatureMissingValuesHigh" if labels.get("test") == "missing" else "FeatureDrifting"
    return camel_alertname(check)


def fingerprint(labels: Mapping[str, str]) -> str:
    raw = "\x1f".join(f"{k}\x1e{v}" for k, v in sorted(labels.items()))
    return hashlib.sha1(raw.encode()).hexdigest()[:16]


def human_secs(secs: float | None) -> str:
    """86400 -> "1d", 300 -> "5m"; "" for None."""
    if secs is None or not math.isfinite(secs):
        return ""
    # Days only from two days up, so a day reads "24h" as operators say it.
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= (2 * size if unit == "d" else size) and secs % size == 0:
            return f"{int(secs // size)}{unit}"
    return f"{secs:g}s"
