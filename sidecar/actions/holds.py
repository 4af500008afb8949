"""A revert's hold as the store keeps it (namespace ``actions``, key ``hold:<model>``): the version held, the
revert that made the hold, and whether the hold has been said (ActionHeld, once per hold), so a restart neither
forgets the hold nor says it again. One JSON record per model; a record of the older form (the version only, as
digits) reads as a hold not yet said, made by an unknown action."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["Hold", "decode_hold", "encode_hold"]


@dataclass(frozen=True)
class Hold:
    version: str  # the version the revert kept loaded
    action_id: str = ""  # the revert's id ("" when not known: a record of the older form)
    said: bool = False  # ActionHeld already recorded for this hold


def encode_hold(hold: Hold) -> str:
    return json.dumps(asdict(hold), sort_keys=True)


def decode_hold(raw: bytes | str | None) -> Hold | None:
    """The hold of a stored record; None for a record that is neither form (logged by the caller)."""
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else raw
    if text.isdigit():
        return Hold(version=text)
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not str(doc.get("version", "")).isdigit():
        return None
    return Hold(version=str(doc["version"]), action_id=str(doc.get("action_id", "")), said=doc.get("said") is True)
