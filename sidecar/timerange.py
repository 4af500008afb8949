"""The range every pushed Unix time must fall in, shared by every input path (events, changes).

Outside 2000-01-01 .. 2100-01-01 a value is a unit mistake (milliseconds, microseconds) or garbage; stored, it
would break every read that renders it as a date (``datetime`` stops at year 9999). Depends on nothing of ours.
"""

from __future__ import annotations

import math

__all__ = ["MAX_AT", "MIN_AT", "check_unix_seconds", "renderable"]

MIN_AT, MAX_AT = 946_684_800.0, 4_102_444_800.0


def renderable(ts: float) -> bool:
    return math.isfinite(ts) and MIN_AT <= ts <= MAX_AT


def check_unix_seconds(ts: float) -> str | None:
    """None when ``ts`` is a usable Unix time in seconds, else why not (for an error naming the field)."""
    if renderable(ts):
        return None
    hint = ""
    if math.isfinite(ts) and MAX_AT * 100 < ts < MAX_AT * 1e7:
        hint = " (this looks like milliseconds or microseconds: send seconds)"
    return f"must be Unix seconds between {MIN_AT:.0f} (2000-01-01) and {MAX_AT:.0f} (2100-01-01), got {ts!r}{hint}"
