"""Validation of event documents into ``sidecar.model.Event``, with errors that name the field.

Hand-written rather than a pydantic model because each error must name the event's index and the exact field
(``events[3].features.age``), a batch must be partially accepted, and this path handles ~10k events a
request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sidecar.errors import EventError
from sidecar.model import Event, FeatureValue
from sidecar.sources.events.config import EventsConfig
from sidecar.timerange import check_unix_seconds, renderable

__all__ = ["EventError", "Rejection", "parse_event", "parse_events", "plain_event"]

_KNOWN = {
    "model",
    "version",
    "timestamp",
    "features",
    "score",
    "prediction_class",
    "label",
    "trace_id",
    "request_id",
    "user_id",
    "fields",
}
_HEX = set("0123456789abcdef")


@dataclass(frozen=True)
class Rejection:
    index: int
    field: str
    error: str

    def as_dict(self) -> dict[str, object]:
        return {"index": self.index, "field": self.field, "error": self.error}


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _name(v: object, field: str, cfg: EventsConfig) -> str:
    if not isinstance(v, str) or not v:
        raise EventError(field, "must be a non-empty string")
    if len(v) > cfg.max_name_length:
        raise EventError(field, f"longer than {cfg.max_name_length} characters")
    return v


def _short_str(v: object, field: str, cfg: EventsConfig) -> str:
    if not isinstance(v, str):
        raise EventError(field, "must be a string")
    if len(v) > cfg.max_string_length:
        raise EventError(field, f"longer than {cfg.max_string_length} characters")
    return v


def _finite(v: object, field: str) -> float:
    if not _is_number(v):
        raise EventError(field, "must be a number")
    try:
        f = float(v)  # type: ignore[arg-type]
    except OverflowError:  # an int beyond float's range (only from a caller that is not JSON)
        raise EventError(field, "must be finite (a number within float range)") from None
    if not math.isfinite(f):
        raise EventError(field, "must be finite")
    return f


def _timestamp(v: object, field: str, cfg: EventsConfig, now: float) -> float:
    if v is None:
        return now
    if isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
            # Without an offset a time is UTC: never the machine's zone, so a result does not depend on it.
            ts = (dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).timestamp()
        except (ValueError, OverflowError):
            raise EventError(field, "must be Unix seconds or an RFC 3339 time") from None
    else:
        ts = _finite(v, field)
    if ts > now + cfg.max_future_skew_secs:
        raise EventError(field, f"is {ts - now:.0f}s in the future (Unix seconds expected, not milliseconds?)")
    if ts < now - cfg.max_age_secs:
        raise EventError(field, f"is older than max_age_secs ({cfg.max_age_secs:.0f}s)")
    # Also the absolute range, whatever the clock says: a stored time outside it breaks whatever renders it.
    if (why := check_unix_seconds(ts)) is not None:
        raise EventError(field, why)
    return ts


def parse_event(doc: object, field: str, cfg: EventsConfig, now: float) -> Event:
    """One event document -> Event; raises EventError naming the field (``field`` is its path prefix)."""
    if not isinstance(doc, Mapping):
        raise EventError(field, "must be a JSON object")
    for k in doc:
        if k not in _KNOWN:
            raise EventError(f"{field}.{k}", "unknown field")
    model = _name(doc.get("model"), f"{field}.model", cfg)
    ver = doc.get("version")
    if ver is None:
        version = cfg.default_version
    elif isinstance(ver, int) and not isinstance(ver, bool):
        version = str(ver)
    else:
        version = _name(ver, f"{field}.version", cfg)
    ts = _timestamp(doc.get("timestamp"), f"{field}.timestamp", cfg, now)
    feats_raw = doc.get("features", {})
    if not isinstance(feats_raw, Mapping):
        raise EventError(f"{field}.features", "must be an object of name -> number, string or null")
    if len(feats_raw) > cfg.max_features_per_event:
        raise EventError(f"{field}.features", f"more than {cfg.max_features_per_event} features")
    features: dict[str, float | str | None] = {}
    for k, v in feats_raw.items():
        fpath = f"{field}.features.{k}"
        _name(k, fpath, cfg)
        if v is None:
            features[k] = None
        elif _is_number(v):
            features[k] = _finite(v, fpath)
        elif isinstance(v, str):
            features[k] = _short_str(v, fpath, cfg)
        else:
            raise EventError(fpath, "must be a number, a string or null")
    score = doc.get("score")
    score_f = None if score is None else _finite(score, f"{field}.score")
    pc = doc.get("prediction_class")
    if pc is not None and _is_number(pc):
        pc = str(pc)
    pclass = None if pc is None else _short_str(pc, f"{field}.prediction_class", cfg)
    label = doc.get("label")
    if label is not None:
        if _is_number(label):
            label = _finite(label, f"{field}.label")
        elif isinstance(label, str):
            label = _short_str(label, f"{field}.label", cfg)
        else:
            raise EventError(f"{field}.label", "must be a number, a string or null")
    trace_id = doc.get("trace_id")
    if trace_id is not None:
        tid = _short_str(trace_id, f"{field}.trace_id", cfg).lower()
        if len(tid) != 32 or not set(tid) <= _HEX:
            raise EventError(f"{field}.trace_id", "must be 32 hex characters (a W3C trace id)")
        trace_id = tid
    ids = {}
    for key in ("request_id", "user_id"):
        v = doc.get(key)
        ids[key] = None if v is None else _short_str(v, f"{field}.{key}", cfg)
    fields_raw = doc.get("fields", {})
    if not isinstance(fields_raw, Mapping):
        raise EventError(f"{field}.fields", "must be an object of name -> number")
    if len(fields_raw) > cfg.max_features_per_event:
        raise EventError(f"{field}.fields", f"more than {cfg.max_features_per_event} fields")
    fields = {_name(k, f"{field}.fields.{k}", cfg): _finite(v, f"{field}.fields.{k}") for k, v in fields_raw.items()}
    return Event(
        model=model,
        version=version,
        timestamp=ts,
        features=features,
        score=score_f,
        prediction_class=pclass,
        label=label,
        trace_id=trace_id,
        request_id=ids["request_id"],
        user_id=ids["user_id"],
        fields=fields,
    )


# ---- the common shape, without a per-field call ----------------------------------------------------------
# ``plain_event`` restates the rules above for documents of the usual shape (a dict; numbers as floats or ints,
# strings, nulls; a numeric or absent time) and only ever accepts: whatever it is not sure of, it hands to
# ``parse_event`` (None), which says what is wrong. tests/sources/events/test_events_properties.py holds it to
# give what ``parse_event`` gives on every generated document it accepts.

_STR_NONE = {str, type(None)}


def _plain_names(d: dict[Any, Any], cfg: EventsConfig, seen: list[set[str]] | None = None) -> bool:
    """Every key a name within bounds. ``seen`` holds the last set of names found good (a batch's events
    mostly share theirs): the same set again needs no second look at each name."""
    if not d:
        return True
    if seen and d.keys() == seen[0]:
        return True
    ok = set(map(type, d)) == {str} and min(map(len, d)) > 0 and max(map(len, d)) <= cfg.max_name_length
    if ok and seen is not None:
        seen[:] = [set(d)]
    return ok


def _plain_numbers(d: dict[Any, Any]) -> dict[str, float] | None:
    """A copy with every value a finite float, or None (not all finite numbers, or not only floats and ints)."""
    vals = d.values()
    types = set(map(type, vals))
    if types == {float} or not types:
        return dict(d) if math.isfinite(sum(vals)) else None  # a NaN or an inf makes the sum one too
    if not types <= {float, int}:
        return None
    try:
        out = {k: float(v) for k, v in d.items()}
    except OverflowError:
        return None
    return out if math.isfinite(sum(out.values())) else None


def _plain_features(
    d: dict[Any, Any], cfg: EventsConfig, seen: list[set[str]] | None
) -> dict[str, FeatureValue] | None:
    if len(d) > cfg.max_features_per_event or not _plain_names(d, cfg, seen):
        return None
    nums = _plain_numbers(d)
    if nums is not None:
        return nums  # type: ignore[return-value]
    out: dict[str, FeatureValue] = {}
    limit = cfg.max_string_length
    for k, v in d.items():
        t = type(v)
        if t is float or t is int:
            try:
                f = float(v)
            except OverflowError:
                return None
            if not math.isfinite(f):
                return None
            out[k] = f
        elif t is str:
            if len(v) > limit:
                return None
            out[k] = v
        elif v is None:
            out[k] = None
        else:
            return None
    return out


def _plain_number(v: object) -> float | None:
    if type(v) is float:
        return v if math.isfinite(v) else None
    if type(v) is int and -(2**53) <= v <= 2**53:
        return float(v)
    return None


def plain_event(doc: object, cfg: EventsConfig, now: float, seen: list[set[str]] | None = None) -> Event | None:
    """The event ``parse_event`` would give for a document of the usual shape; None for any other document
    (which may still be valid: ``parse_event`` decides). ``seen``: the last feature names found good, kept
    by the caller over a batch."""
    if type(doc) is not dict or not doc.keys() <= _KNOWN:
        return None
    get = doc.get
    model = get("model")
    if type(model) is not str or not 0 < len(model) <= cfg.max_name_length:
        return None
    ver = get("version")
    if ver is None:
        version = cfg.default_version
    elif type(ver) is str and 0 < len(ver) <= cfg.max_name_length:
        version = ver
    else:
        return None
    raw_ts = get("timestamp")
    if raw_ts is None:
        ts = now
    elif (t := _plain_number(raw_ts)) is not None and now - cfg.max_age_secs <= t <= now + cfg.max_future_skew_secs:
        if not renderable(t):
            return None
        ts = t
    else:
        return None
    features: dict[str, FeatureValue] = {}
    if "features" in doc:
        fr = doc["features"]
        if type(fr) is not dict or (feats := _plain_features(fr, cfg, seen)) is None:
            return None
        features = feats
    score = get("score")
    if score is not None and (score := _plain_number(score)) is None:
        return None
    limit = cfg.max_string_length
    strs = (get("prediction_class"), get("request_id"), get("user_id"))
    if not set(map(type, strs)) <= _STR_NONE or any(v is not None and len(v) > limit for v in strs):
        return None
    label = get("label")
    if label is not None:
        if type(label) is str:
            if len(label) > limit:
                return None
        elif (label := _plain_number(label)) is None:
            return None
    trace_id = get("trace_id")
    if trace_id is not None:
        if type(trace_id) is not str or len(trace_id) != 32 or len(trace_id) > limit:
            return None
        if not set(trace_id := trace_id.lower()) <= _HEX:
            return None
    fields: dict[str, float] = {}
    if "fields" in doc:
        fr = doc["fields"]
        if type(fr) is not dict or len(fr) > cfg.max_features_per_event or not _plain_names(fr, cfg):
            return None
        if (nums := _plain_numbers(fr)) is None:
            return None
        fields = nums
    return Event(
        model=model,
        version=version,
        timestamp=ts,
        features=features,
        score=score,
        prediction_class=strs[0],
        label=label,
        trace_id=trace_id,
        request_id=strs[1],
        user_id=strs[2],
        fields=fields,
    )


def parse_events(
    docs: list[Any], cfg: EventsConfig, now: float, prefix: str = "events"
) -> tuple[list[Event], list[Rejection]]:
    """Every valid event and every rejection (index and field) of a batch; nothing valid is lost."""
    ok: list[Event] = []
    bad: list[Rejection] = []
    seen: list[set[str]] = []
    for i, doc in enumerate(docs):
        if (ev := plain_event(doc, cfg, now, seen)) is not None:
            ok.append(ev)
            continue
        try:
            ok.append(parse_event(doc, f"{prefix}[{i}]", cfg, now))
        except EventError as exc:
            bad.append(Rejection(i, exc.field, exc.message))
    return ok, bad
