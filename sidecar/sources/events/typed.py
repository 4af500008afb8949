"""The typed door: a body of the common shape decoded by msgspec straight into typed structs, then columns.

``columns.py`` checks a batch that ``orjson`` already turned into dicts; most of its cost is looking at each
value's Python type and copying the values into a matrix. This door skips both for the batches a source keeps
sending: once a batch of the common shape has gone through ``columns.py``, its feature names (every block's the
same) make a msgspec decoder whose types are the rules of the common shape, checked in C while decoding:

- an event is an object with only ``model`` (a string), ``version`` (a string, an integer or null),
  ``timestamp`` and ``score`` (a number or null) and ``features``, an object with exactly these names (in any
  order; a name twice: the last value, as ``orjson`` and so ``parse.py`` see it), each a number: not a bool,
  not null, not a string; an integer becomes the float ``float()`` gives;
- the body is a list of such events or ``{"events": [...]}`` (JSON), or one per line (JSON Lines; every line
  is decoded on its own, as ``media.decode_documents`` splits them).

What the decoder cannot say (name lengths, times inside ``max_age_secs`` .. ``max_future_skew_secs`` and
2000..2100, finite numbers, the batch bound) is checked as in ``columns.py``, with its helpers. Like
``columns.py``, this door only ever accepts: a body it is not sure of in any byte (a decode or type error, a
json-seq record, an integer version beyond 64 bits, a refused value) gives None, and the caller decodes the
body as before (``orjson``, then ``columns.py`` or ``parse_events``, which words every refusal). Held to
``parse_events`` by ``tests/sources/events/test_events_typed.py`` (hypothesis).

One difference from ``columns.py``: names in another order than the learned one are taken (the columns keep
the learned order; ``Event`` dicts compare equal whatever their order). It can only show where the drift check
meets ``max_series_per_model`` within one event's new features, which series it makes first.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from itertools import starmap
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
from msgspec.structs import astuple

from sidecar.model import EventColumns
from sidecar.sources.events.columns import good_names, times_in_range
from sidecar.sources.events.config import EventsConfig

__all__ = ["TypedDoor"]

MAX_DECODERS = 8  # feature-name sets whose decoders are kept
_INT64 = 2**63
# A type error in the first event's features (msgspec's path): another learned name set may take the body.
_FIRST_FEATURES = re.compile(r"- at `\$(\.events)?\[0\]\.features")
_MODEL, _VERSION = attrgetter("model"), attrgetter("version")
_TIME, _FEATURES, _SCORE = attrgetter("timestamp"), attrgetter("features"), attrgetter("score")


class _Decoders:
    """The decoders of one feature-name set: a body (list or wrapper), a line, and a row getter."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        slots = [f"f{i}" for i in range(len(names))]
        feats = msgspec.defstruct(
            "Features",
            [(s, float) for s in slots],
            rename=dict(zip(slots, names, strict=True)),
            forbid_unknown_fields=True,
            gc=False,
        )
        event = msgspec.defstruct(
            "Event",
            [
                ("model", str),
                ("version", str | int | None, None),
                ("timestamp", float | None, None),
                ("features", feats),
                ("score", float | None, None),
            ],
            kw_only=True,
            forbid_unknown_fields=True,
            gc=False,
        )
        wrapper = msgspec.defstruct("Events", [("events", list[event])], forbid_unknown_fields=True, gc=False)  # type: ignore[valid-type]
        self.body = msgspec.json.Decoder(wrapper | list[event])  # type: ignore[valid-type]
        self.line = msgspec.json.Decoder(event)
        self.pack: Callable[..., bytes] = struct.Struct(f"={len(names)}d").pack  # one event's values, as float64


def _floats_or_nan(values: list[Any], n: int) -> np.ndarray:
    """float64 of floats and Nones (NaN)."""
    try:
        return np.fromiter(values, dtype=np.float64, count=n)
    except TypeError:  # a None among them
        return np.array(values, dtype=np.float64)


class TypedDoor:
    """Decodes a body with the decoder of learned feature names, the one that last took a body first, another
    when the first event's features do not fit it (two models' batches in turn); None when not sure (see above).

    Not thread-safe: one per source (the endpoint runs on the event loop, a tailer in its poll thread)."""

    def __init__(self, cfg: EventsConfig) -> None:
        self.cfg = cfg
        self._decoders: dict[tuple[str, ...], _Decoders] = {}
        self._current: _Decoders | None = None

    def learn(self, blocks: Sequence[EventColumns]) -> None:
        """A batch ``columns.py`` accepted: when all its blocks have the same feature names, they are the next
        batch's guess."""
        names = {tuple(b.features) for b in blocks}
        if len(names) != 1:
            return
        (key,) = names
        if not key or (self._current is not None and self._current.names == key):
            return
        dec = self._decoders.pop(key, None)
        if dec is None:
            try:
                dec = _Decoders(key)
            except ValueError:  # msgspec takes no field name with a quote, a backslash or a control character
                return  # such names keep going the orjson way
        self._decoders[key] = dec  # most recent last
        while len(self._decoders) > MAX_DECODERS:
            del self._decoders[next(iter(self._decoders))]
        self._current = dec

    def _candidates(self) -> list[_Decoders]:
        """The last decoder that took a body first, then the others, most recently learned first."""
        cur = self._current
        return [] if cur is None else [cur, *(d for d in reversed(self._decoders.values()) if d is not cur)]

    def _by_first(self, first: bytes) -> _Decoders | None:
        """The first candidate whose line decoder takes ``first`` (a batch of one model has its names)."""
        for dec in self._candidates():
            try:
                dec.line.decode(first)
            except msgspec.DecodeError:
                continue
            return dec
        return None

    def body(self, body: bytes, json_lines: bool, now: float) -> list[EventColumns] | None:
        """A push body (JSON, or JSON Lines when ``json_lines``) as columns, or None."""
        if json_lines:
            if b"\x1e" in body:  # json-seq records: the caller's path drops the RS
                return None
            return self._lines([*filter(None, body.splitlines())], now, self.cfg.max_events_per_batch)
        for dec in self._candidates():
            try:
                got = dec.body.decode(body)
            except msgspec.ValidationError as exc:
                if _FIRST_FEATURES.search(str(exc)):
                    continue  # the first event has other names: maybe another learned set's
                return None
            except msgspec.DecodeError:  # not JSON at all
                return None
            return self._columns(dec, got if type(got) is list else got.events, now, self.cfg.max_events_per_batch)
        return None

    def lines(self, lines: list[bytes], now: float) -> list[EventColumns] | None:
        """The JSON Lines tailer's lines (split, none over-long) as columns, or None."""
        kept = [*filter(bytes.strip, lines)]
        return self._lines(kept, now, len(kept))  # a poll is bounded by max_read_bytes, not by a batch

    def _lines(self, lines: list[bytes], now: float, limit: int) -> list[EventColumns] | None:
        if not lines or (dec := self._by_first(lines[0])) is None:
            return None
        try:
            evs = [*map(dec.line.decode, lines)]
        except msgspec.DecodeError:  # malformed, or a type the common shape does not have (ValidationError)
            return None
        return self._columns(dec, evs, now, limit)

    def _columns(self, dec: _Decoders, evs: list[Any], now: float, limit: int) -> list[EventColumns] | None:
        cfg = self.cfg
        n = len(evs)
        if not 0 < n <= limit:
            return None
        self._current = dec  # tried first next time
        models, versions = [*map(_MODEL, evs)], [*map(_VERSION, evs)]
        one_m, one_v = set(models), set(versions)  # the usual batch: one model/version, no pair built per event
        if len(one_m) == len(one_v) == 1:
            pairs: Any = [(models[0], versions[0])]
        else:
            pairs = dict.fromkeys(zip(models, versions, strict=True))
        norm: dict[tuple[str, Any], tuple[str, str]] = {}
        for m, v in pairs:
            if type(v) is int and not -_INT64 <= v < _INT64:
                return None  # orjson reads such a literal as a float, which parse.py refuses as a version
            version = cfg.default_version if v is None else str(v) if type(v) is int else v
            if not good_names((m, version), cfg):
                return None
            norm[(m, v)] = (m, version)
        ts = _floats_or_nan([*map(_TIME, evs)], n)
        if np.isnan(ts).any():
            ts[np.isnan(ts)] = now  # no time: when received
        if not times_in_range(ts, cfg, now):
            return None
        # Each event's values as a tuple (in the learned order), packed as float64 bytes: the cheapest way here
        # from n * k Python floats to a matrix (np.fromiter or np.array over them cost 2-3x as much).
        raw = b"".join(starmap(dec.pack, map(astuple, map(_FEATURES, evs))))
        mat = np.frombuffer(raw, dtype=np.float64).reshape(n, len(dec.names))
        if not np.isfinite(mat).all():
            return None
        cols = np.ascontiguousarray(mat.T)
        raw_score = [*map(_SCORE, evs)]
        score = None if raw_score.count(None) == n else _floats_or_nan(raw_score, n)
        if len(set(norm.values())) == 1:
            ((model, version),) = set(norm.values())
            feats = dict(zip(dec.names, cols, strict=True))
            return [EventColumns(model=model, version=version, timestamps=ts, features=feats, score=score)]
        groups: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(models, versions, strict=True)):
            groups.setdefault(norm[key], []).append(i)
        out = []
        for (model, version), idx in groups.items():
            at = np.array(idx)
            feats = dict(zip(dec.names, np.ascontiguousarray(cols[:, at]), strict=True))
            sc = None if score is None or np.isnan(score[at]).all() else score[at]
            out.append(EventColumns(model, version, ts[at], feats, sc, positions=at))
        return out
