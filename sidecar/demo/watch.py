"""The demo's running commentary: one line per alert transition (pending, firing, resolved) as the sidecar
reports it, and one when Alertmanager starts or stops listing the alert as active; under an action alert
(ActionPlanned, ActionTaken, ActionFailed) that fires, one ``ACTION`` line with its summary: the plan itself.

It reads only what an operator could: the sidecar's ``GET /v1/alerts`` and, when the demo started one,
Alertmanager's ``GET /api/v2/alerts``; so the terminal tells the story the pages and Alertmanager show. It keeps
what it printed (``sidecar_seen``, ``am_seen``), bounded by the alerts the demo can raise, for the promise table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from sidecar.demo.timeline import line

__all__ = ["ACTION", "AM_ACTIVE", "AM_GONE", "AlertWatcher", "describe"]

AM_ACTIVE = "active in Alertmanager"
AM_GONE = "gone from Alertmanager"
ACTION = "ACTION"  # the line under an Action* alert: the plan (dry-run) or what was done
_MAX_ALERTS = 200  # far more than the demo raises; a runaway is ignored rather than grown without bound


def _key(labels: dict[str, str]) -> tuple[str, ...]:
    return tuple(sorted(f"{k}={v}" for k, v in labels.items() if k not in ("severity",)))


def describe(labels: dict[str, str]) -> str:
    """``CtrMeanDown ctr all versions`` / ``FeatureDrifting ctr v2 clicks_7d``."""
    version = labels.get("version", "")
    ver = "all versions" if version in ("", "all", "unversioned") else f"v{version}"
    parts = [labels.get("alertname", "?"), labels.get("model", ""), ver, labels.get("feature", "")]
    return " ".join(p for p in parts if p)


class AlertWatcher:
    def __init__(
        self,
        sidecar_url: str,
        alertmanager_url: str | None,
        *,
        out: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sidecar_url = sidecar_url
        self.alertmanager_url = alertmanager_url
        self.out = out
        self.clock = clock
        self._t0 = clock()
        self._states: dict[tuple[str, ...], str] = {}
        self._am_active: set[tuple[str, ...]] = set()
        self.labels: dict[tuple[str, ...], dict[str, str]] = {}
        # What was printed, per alert: (seconds since the start, what) in order.
        self.sidecar_seen: dict[tuple[str, ...], list[tuple[float, str]]] = {}
        self.am_seen: dict[tuple[str, ...], list[tuple[float, str]]] = {}
        self.polls_failed = 0

    def elapsed(self) -> float:
        return self.clock() - self._t0

    def _say(self, what: str, key: tuple[str, ...], log: dict[tuple[str, ...], list[tuple[float, str]]]) -> None:
        t = self.elapsed()
        log.setdefault(key, []).append((t, what))
        self.out(line(t, what, describe(self.labels.get(key, {}))))

    def _known(self, labels: dict[str, str]) -> tuple[str, ...] | None:
        key = _key(labels)
        if key not in self.labels:
            if len(self.labels) >= _MAX_ALERTS:
                return None
            self.labels[key] = dict(labels)
        return key

    def observe(self, sidecar_alerts: list[dict[str, Any]], am_alerts: list[dict[str, Any]] | None) -> None:
        """Print what changed since the last call."""
        for a in sidecar_alerts:
            key = self._known(a["labels"])
            if key is None:
                continue
            state = "RESOLVED" if a.get("state") == "inactive" else str(a.get("state")).upper()
            if self._states.get(key) != state and not (state == "RESOLVED" and key not in self._states):
                self._say(state, key, self.sidecar_seen)
                if state == "FIRING" and str(a["labels"].get("alertname", "")).startswith("Action"):
                    # What the actions layer planned or did: the plan itself, as /, the audit and the change say.
                    self.out(line(self.elapsed(), ACTION, str(a.get("annotations", {}).get("summary", ""))))
            self._states[key] = state
        if am_alerts is None:
            return
        active = set()
        for a in am_alerts:
            if a.get("status", {}).get("state") != "active":
                continue
            key = self._known(a.get("labels", {}))
            if key is not None:
                active.add(key)
        for key in sorted(active - self._am_active):
            self._say(AM_ACTIVE, key, self.am_seen)
        for key in sorted(self._am_active - active):
            self._say(AM_GONE, key, self.am_seen)
        self._am_active = active

    async def poll(self, client: httpx.AsyncClient) -> None:
        """One look at the sidecar and Alertmanager; a failed look is counted and the next one tries again."""
        try:
            mine = (await client.get(f"{self.sidecar_url}/v1/alerts", timeout=5)).json()
            am = None
            if self.alertmanager_url:
                am = (await client.get(f"{self.alertmanager_url}/api/v2/alerts", timeout=5)).json()
            self.observe(mine, am)
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            self.polls_failed += 1
