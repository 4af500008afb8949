"""The demo's running commentary: one line per alert transition (pending, firing, resolved, delivered).

It reads only what an operator could: the sidecar's ``GET /v1/alerts`` and, when the demo started one,
Alertmanager's ``GET /api/v2/alerts``; so the terminal tells the story the pages and Alertmanager show.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["AlertWatcher", "describe"]


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
        interval_s: float = 2.0,
        out: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sidecar_url = sidecar_url
        self.alertmanager_url = alertmanager_url
        self.interval_s = interval_s
        self.out = out
        self.clock = clock
        self._t0 = clock()
        self._states: dict[tuple[str, ...], str] = {}
        self._delivered: set[tuple[str, ...]] = set()
        self._names: dict[tuple[str, ...], str] = {}

    def _say(self, what: str, key: tuple[str, ...]) -> None:
        t = self.clock() - self._t0
        self.out(f"  [+{int(t // 60)}:{int(t % 60):02d}] {what:<26} {self._names.get(key, '?')}")

    def observe(self, sidecar_alerts: list[dict[str, Any]], am_alerts: list[dict[str, Any]] | None) -> None:
        """Print what changed since the last call."""
        for a in sidecar_alerts:
            key = _key(a["labels"])
            self._names[key] = describe(a["labels"])
            state = "resolved" if a.get("state") == "inactive" else str(a.get("state"))
            if self._states.get(key) != state and not (state == "resolved" and key not in self._states):
                self._say(state.upper(), key)
                if state != "firing":
                    self._delivered.discard(key)
            self._states[key] = state
        if am_alerts is None:
            return
        for a in am_alerts:
            key = _key(a.get("labels", {}))
            if key in self._states and key not in self._delivered and a.get("status", {}).get("state") == "active":
                self._delivered.add(key)
                self._say("delivered to Alertmanager", key)

    async def run(self, stop: asyncio.Event, client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            try:
                mine = (await client.get(f"{self.sidecar_url}/v1/alerts", timeout=5)).json()
                am = None
                if self.alertmanager_url:
                    am = (await client.get(f"{self.alertmanager_url}/api/v2/alerts", timeout=5)).json()
                self.observe(mine, am)
            except (httpx.HTTPError, ValueError):
                pass  # the next poll tries again; the demo's own status line says if the sidecar is down
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval_s)
