"""What each series is compared with: a file, a version's first events (pinned), or last week (rolling).

``reference_for`` answers a ``Reference`` or the reason there is none yet; the reason becomes an
insufficient-data finding. Not thread-safe on its own: the check's lock guards every call.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from sidecar.checks.drift.config import DriftConfig, ReferenceConfig
from sidecar.checks.drift.datafile import load_reference_file
from sidecar.checks.drift.persistence import DriftStore, key
from sidecar.checks.drift.references import Reference
from sidecar.checks.drift.registry import ModelKey, SeriesKey
from sidecar.checks.stats.windows import FeatureKind, FeatureWindow, pack, unpack
from sidecar.errors import ConfigError

__all__ = ["NoReference", "Pinned", "References"]

_PIN_BUCKET_SECS = 1e18  # one bucket for a pinned collector: it is bounded by event count, not time


@dataclass(frozen=True)
class NoReference:
    """Why a series has no reference yet: a reason code and its numbers (rendered in sidecar/alerting/)."""

    reason: str  # collecting | waiting_for_version | absent_from_pin | not_in_file | no_history | no_traffic_last_week
    facts: dict[str, float | int | str | None] = field(default_factory=dict)


@dataclass
class Pinned:
    """The collector of a version's first ``target`` events, frozen into references once full."""

    target: int
    events: int = 0
    windows: dict[str, FeatureWindow] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        feats = sorted(self.windows)
        return pack(
            {"events": self.events, "target": self.target, "features": feats},
            [self.windows[f].to_bytes() for f in feats],
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Pinned:
        h, blobs = unpack(data)
        pin = cls(int(h["target"]), int(h["events"]))
        for f, b in zip(h["features"], blobs, strict=True):
            pin.windows[f] = FeatureWindow.from_bytes(b)
        return pin


def _centred(c: float, h: float) -> tuple[float, float]:
    """The history buckets (of ``h`` seconds) whose union is centred nearest to the moment ``c``.

    A reference that ends, or is centred, away from the block's moment carries a seasonal cycle's slope as a
    shift (a 30-minute offset on a daily cycle of +-0.5 sd is ~0.07 sd). One bucket when ``c`` lies in its
    middle half, else the two around the nearest boundary: the centre is then never more than h/4 away and a
    cycle's first-order term cancels."""
    u = c / h - math.floor(c / h)
    if 0.25 <= u < 0.75:
        lo = math.floor(c / h) * h
        return lo + 1e-6 * h, lo + h - 1e-6 * h
    b = round(c / h) * h
    return b - h + 1e-6 * h, b + h - 1e-6 * h


class References:
    def __init__(self, cfg: DriftConfig, store: DriftStore, log: logging.Logger) -> None:
        self.cfg = cfg
        self.store = store
        self.log = log
        self.refs: dict[SeriesKey, Reference] = {}
        self.pinned: dict[ModelKey, Pinned] = {}
        self.history: dict[SeriesKey, FeatureWindow] = {}
        self.overrides: dict[str, ReferenceConfig] = {}
        # The latest rolling reference built per series and the bucket span it came from: a block's centred
        # span stays the same for many blocks in a row, and week-old buckets no longer change.
        self._built: dict[SeriesKey, tuple[tuple[float, float], Reference]] = {}

    def spec_for(self, model: str) -> ReferenceConfig:
        if model in self.overrides:
            return self.overrides[model]
        m = self.cfg.models.get(model)
        return m.reference if m is not None and m.reference is not None else self.cfg.reference

    # ---- pinned ----------------------------------------------------------------------------------
    def pin_collector(self, model: str, version: str, spec: ReferenceConfig) -> Pinned | None:
        """The collector one event of ``model``/``version`` feeds (counted), or None once frozen."""
        pin_ver = spec.pinned_version or version
        if pin_ver != version or (model, pin_ver, "") in self.refs:
            return None
        pin = self.pinned.get((model, pin_ver))
        if pin is None:
            pin = self.pinned[(model, pin_ver)] = Pinned(spec.pinned_events)
        pin.events += 1
        return pin

    def pin_window(self, pin: Pinned, feature: str, kind: FeatureKind) -> FeatureWindow:
        pw = pin.windows.get(feature)
        if pw is None:
            c = self.cfg
            pw = pin.windows[feature] = FeatureWindow(
                kind,
                bucket_secs=_PIN_BUCKET_SECS,
                n_buckets=1,
                exact_cap=c.max_reference_samples + 1,
                kll_k=c.kll_k,
                max_categories=c.max_categories,
            )
        return pw

    def freeze_pin(self, model: str, version: str, pin: Pinned, now: float) -> None:
        for feature, w in pin.windows.items():
            ref = Reference.from_snapshot(w.snapshot(), f"pinned:{version}", now)
            self.refs[(model, version, feature)] = ref
            self.store.save("drift.ref", key(model, version, feature), ref.to_bytes())
        # A marker so later events of this version skip the collector even for features seen only later.
        self.refs[(model, version, "")] = Reference("numeric", 0, 0, f"pinned:{version}", now)
        self.store.save("drift.ref", key(model, version, ""), self.refs[(model, version, "")].to_bytes())
        self.pinned.pop((model, version), None)
        self.store.delete("drift.pinned", key(model, version))
        self.log.info("drift reference for %s pinned to version %s's first %d events", model, version, pin.events)

    # ---- rolling ---------------------------------------------------------------------------------
    def history_window(self, k: SeriesKey, kind: FeatureKind, spec: ReferenceConfig) -> FeatureWindow:
        hist = self.history.get(k)
        if hist is None:
            c = self.cfg
            hours = math.ceil((spec.rolling_offset_secs + c.longest_secs) / 3600.0) + 2
            # Hourly buckets held as sketches only (exact_cap small): a week of history must stay bounded.
            hist = self.history[k] = FeatureWindow(
                kind, bucket_secs=3600.0, n_buckets=hours, exact_cap=256, kll_k=c.kll_k, max_categories=c.max_categories
            )
        return hist

    # ---- file ------------------------------------------------------------------------------------
    def load_files(self, now: float, kinds: dict[tuple[str, str], FeatureKind], only_model: str | None = None) -> None:
        models = [only_model] if only_model else sorted(set(self.cfg.models) | set(self.overrides))
        for model in models:
            spec = self.spec_for(model)
            if spec.mode != "file" or not spec.path:
                continue
            mcfg = self.cfg.models.get(model)
            declared: dict[str, FeatureKind] = dict(mcfg.features) if mcfg is not None else {}
            try:
                refs = load_reference_file(
                    spec.path, created_at=now, max_rows=self.cfg.max_reference_samples, kinds=declared
                )
            except (OSError, ValueError) as exc:
                raise ConfigError(f"checks.drift.models.{model}.reference.path", str(exc)) from None
            for feature, ref in refs.items():
                self.refs[(model, "*", feature)] = ref
                kinds.setdefault((model, feature), ref.kind)

    # ---- queries ---------------------------------------------------------------------------------
    def reference_for(
        self, model: str, version: str, feature: str, now: float, block: tuple[float, float] | None = None
    ) -> Reference | NoReference:
        """The reference, or why there is none yet. ``block`` (method 'multiscale'): the current block, whose
        rolling reference is centred on the same moment one offset earlier (see ``_centred``)."""
        spec = self.spec_for(model)
        if spec.mode == "file":
            return self.refs.get((model, "*", feature)) or NoReference("not_in_file", {"path": spec.path})
        if spec.mode == "pinned":
            ver = spec.pinned_version or version
            ref = self.refs.get((model, ver, feature))
            if ref is not None:
                return ref
            pin = self.pinned.get((model, ver))
            if pin is not None:
                return NoReference("collecting", {"collected": pin.events, "target": pin.target, "ref_version": ver})
            if (model, ver, "") in self.refs:
                return NoReference("absent_from_pin", {"ref_version": ver})
            return NoReference("waiting_for_version", {"ref_version": ver})
        hist = self.history.get((model, version, feature))
        if hist is None:
            return NoReference("no_history")
        if block is not None:
            span = _centred((block[0] + block[1]) / 2 - spec.rolling_offset_secs, hist.bucket_secs)
            k = (model, version, feature)
            built = self._built.get(k)
            if built is not None and built[0] == span:
                return built[1]
            # Both hours or none: one side alone is off-centre again (the first hour after history began).
            if not hist.covers(*span):
                return NoReference("no_traffic_last_week")
            snap = hist.snapshot(*span)
            ref = Reference.from_snapshot(snap, "rolling", now)
            self._built[k] = (span, ref)
            return ref
        else:
            end = now - spec.rolling_offset_secs
            snap = hist.snapshot(end - self.cfg.window_secs, end)
        if snap.total == 0:
            return NoReference("no_traffic_last_week")
        return Reference.from_snapshot(snap, "rolling", now)

    def describe(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for (model, ver, feature), ref in sorted(self.refs.items()):
            if feature:
                out.append(
                    {
                        "model": model,
                        "version": ver,
                        "feature": feature,
                        "kind": ref.kind,
                        "source": ref.source,
                        "n": ref.n,
                        "missing": ref.missing,
                        "created_at": ref.created_at,
                    }
                )
        for (model, ver), pin in sorted(self.pinned.items()):
            out.append({"model": model, "version": ver, "collecting": pin.events, "target": pin.target})
        return out

    def reset_model(self, model: str) -> None:
        """Drops a model's references and collectors (its reference spec changed)."""
        for bk in [bk for bk in self._built if bk[0] == model]:
            del self._built[bk]
        for k in [k for k in self.refs if k[0] == model]:
            del self.refs[k]
            self.store.delete("drift.ref", key(*k))
        for pk in [k for k in self.pinned if k[0] == model]:
            del self.pinned[pk]
            self.store.delete("drift.pinned", key(*pk))

    def drop_history(self, k: SeriesKey) -> None:
        self._built.pop(k, None)
        if self.history.pop(k, None) is not None:
            self.store.delete("drift.history", key(*k))

    def drop_collector(self, mv: ModelKey) -> None:
        """Drops an unfinished pinned collector; frozen references stay (a returning version keeps its own)."""
        if self.pinned.pop(mv, None) is not None:
            self.store.delete("drift.pinned", key(*mv))

    def persist_rows(self) -> list[tuple[str, str, bytes]]:
        rows = [("drift.history", key(*hk), hist.to_bytes()) for hk, hist in self.history.items()]
        rows += [("drift.pinned", key(*mv), pin.to_bytes()) for mv, pin in self.pinned.items()]
        return rows
