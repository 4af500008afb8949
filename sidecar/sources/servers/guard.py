"""The upgrade guard: when a family the profile relied on disappears from a server's exposition (a restart into
a new release), or its replacement appears, say so, naming both and what it breaks, instead of letting the SLIs
go flat without a word.

Compared scrape to scrape (only good scrapes mapped with the same profile): a family gone whose rename
(``Profile.renames``) is present is ``renamed`` (the profile reads the new name, the SLIs continue; the finding
is informational and stands for ``renamed_hold_secs``); a family gone without one is ``gone`` (its SLIs are no
longer reported; the finding stands until it comes back). Findings are ``diagnosis`` findings, so the one
renderer words them. Bounded: one entry per family of the profile.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sidecar.facts import DiagnosisFacts
from sidecar.model import Finding
from sidecar.sources.servers.profile import Profile

__all__ = ["FamilyChange", "FamilyGuard"]


@dataclass(frozen=True, slots=True)
class FamilyChange:
    change: str  # gone | renamed
    family: str  # the family that disappeared
    replacement: str | None  # the family that replaced it
    breaks: str  # the SLIs it fed
    problem: str
    action: str
    since: float  # wall-clock seconds


class FamilyGuard:
    def __init__(self, server: str, *, check: str, renamed_hold_secs: float = 3600.0) -> None:
        self.server = server
        self.check = check
        self.renamed_hold_secs = renamed_hold_secs
        self._prev: tuple[str, frozenset[str]] | None = None
        self.active: dict[str, FamilyChange] = {}
        self._resolved: set[str] = set()
        # observe() runs on the scrape loop, findings() in the evaluation worker thread.
        self._lock = threading.Lock()

    def observe(self, profile: Profile, families: frozenset[str], now: float) -> list[FamilyChange]:
        """Compare with the previous good scrape; returns the changes first seen now (for counters and logs)."""
        with self._lock:
            return self._observe(profile, families, now)

    def _observe(self, profile: Profile, families: frozenset[str], now: float) -> list[FamilyChange]:
        prev = self._prev
        self._prev = (profile.name, families)
        for fam in [f for f in self.active if f in families]:  # it came back
            del self.active[fam]
            self._resolved.add(fam)
        if prev is None or prev[0] != profile.name:
            return []
        gone = prev[1] - families
        new: list[FamilyChange] = []
        for fam in sorted(gone):
            replacement = next((n for o, n in profile.renames if o == fam and n in families), None)
            replacement = replacement or next((o for o, n in profile.renames if n == fam and o in families), None)
            breaks = profile.what_breaks(fam)
            if replacement:
                change = FamilyChange(
                    "renamed",
                    fam,
                    replacement,
                    breaks,
                    f"{self.server}: {fam} disappeared and {replacement} appeared (a server upgrade or restart); "
                    f"{breaks} is now read from {replacement}",
                    "check dashboards and rules that query the old name",
                    now,
                )
            else:
                change = FamilyChange(
                    "gone",
                    fam,
                    None,
                    breaks,
                    f"{self.server}: {fam} disappeared from the exposition; {breaks} is no longer reported",
                    "check the server's release notes for the family's new name or the flag that turns it on",
                    now,
                )
            self.active[fam] = change
            self._resolved.discard(fam)
            new.append(change)
        return new

    def findings(self, now: float) -> list[Finding]:
        with self._lock:
            return self._findings(now)

    def _findings(self, now: float) -> list[Finding]:
        out: list[Finding] = []
        for fam, c in list(self.active.items()):
            if c.change == "renamed" and now - c.since > self.renamed_hold_secs:
                del self.active[fam]
                self._resolved.add(fam)
                continue
            out.append(self._finding(fam, c.change, True, now, c))
        for fam in sorted(self._resolved):
            out.append(self._finding(fam, "", False, now, None))
        self._resolved.clear()
        return out

    def _finding(self, fam: str, change: str, active: bool, now: float, c: FamilyChange | None) -> Finding:
        code = f"server_family_{change}" if change else "server_family"
        return Finding(
            check=self.check,
            kind="diagnosis",
            labels={"diagnosis": "server_family", "server": self.server, "family": fam},
            active=active,
            value=1.0 if active else 0.0,
            evaluated_at=now,
            summary="" if active else f"{self.server}: {fam} is back",
            facts=DiagnosisFacts(
                diagnosis=code,
                problem=c.problem if c else "",
                action=c.action if c else "",
                extra={"server": self.server, "family": fam, "replacement": (c.replacement or "") if c else ""},
            ),
        )
