"""What decoding one OTLP body gave: the accepted span records and the per-span refusals (partial success)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sidecar.model import Span
from sidecar.records import MODEL_ATTR, VERSION_ATTR, Record, to_span

__all__ = ["DecodeResult", "hex_ids", "model_of"]

_ZERO16 = bytes(16)
_ZERO8 = bytes(8)
_fromhex = bytes.fromhex


@dataclass
class DecodeResult:
    records: list[Record] = field(default_factory=list)
    rejected: int = 0
    first_error: str = ""
    # Stored text cut to traces.limits.max_value_chars, by field (sidecar.sources.otlp.limits).
    truncations: dict[str, int] = field(default_factory=dict)

    @property
    def spans(self) -> list[Span]:
        """The accepted spans as frozen ``Span`` objects (built on each call; the hot path never asks)."""
        return [to_span(r) for r in self.records]

    def truncated(self, fld: str) -> None:
        self.truncations[fld] = self.truncations.get(fld, 0) + 1

    def reject(self, why: str) -> None:
        self.rejected += 1
        if not self.first_error:
            self.first_error = why


def model_of(attrs: tuple[tuple[str, object], ...]) -> tuple[str, str] | None:
    """(model, version) from a span's decoded JSON attributes, as both JSON paths read them."""
    name = version = None
    for k, v in attrs:
        if k == MODEL_ATTR:
            name = v
        elif k == VERSION_ATTR:
            version = v
    if name is None:
        return None
    return str(name), "" if version is None else str(version)


def hex_ids(tid: str, sid: str, pid: str | None) -> tuple[bytes, bytes, bytes | None]:
    """Trace, span and parent ids from OTLP JSON's hex, the one rule both JSON paths apply: 32 and 16 hex digits,
    a parent empty or 16 digits, neither id all zero. Raises ValueError (TypeError for a non-string)."""
    if len(tid) != 32 or len(sid) != 16:
        raise ValueError
    t = _fromhex(tid)
    s = _fromhex(sid)
    p = None
    if pid:
        if len(pid) != 16:
            raise ValueError
        p = _fromhex(pid)
    if t == _ZERO16 or s == _ZERO8:
        raise ValueError
    return t, s, p
