"""A cache purge as a change: the one text form of its ``what`` (``cache purge <scope> <pattern>``), written by
``POST /v1/changes`` for a posted ``purge`` and read back by the purge watch, and what a pattern covers.

A change whose ``what`` has this form is a purge whichever way it was posted. Depends on nothing of ours.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

__all__ = ["SCOPES", "Purge", "parse_purge", "purge_what"]

SCOPES = ("prefix", "exact", "glob")
_RE = re.compile(r"^cache purge (prefix|exact|glob) (\S+)$")


@dataclass(frozen=True, slots=True)
class Purge:
    pattern: str
    scope: str  # prefix | exact | glob

    def covers(self, path: str) -> bool:
        if self.scope == "prefix":
            return path.startswith(self.pattern)
        if self.scope == "exact":
            return path == self.pattern
        return fnmatch.fnmatchcase(path, self.pattern)


def purge_what(pattern: str, scope: str) -> str:
    return f"cache purge {scope} {pattern}"


def parse_purge(what: str) -> Purge | None:
    m = _RE.match(what)
    return Purge(pattern=m.group(2), scope=m.group(1)) if m else None
