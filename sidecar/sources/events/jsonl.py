"""Tails a JSON Lines file of events the model server appends to, surviving rotation and truncation.

Rotation (the path now names a new inode) is noticed after the old file has been read to its end, so lines
written just before a rename are not lost; truncation (same inode, smaller size) restarts from the top. The
read position is saved in the store, so a restart resumes where it stopped instead of re-reading or skipping.
Every poll reads at most ``max_read_bytes``; an over-long line is skipped (counted), never buffered whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import IO

import orjson
from prometheus_client import CollectorRegistry

from sidecar.clock import Clock
from sidecar.component import Bus
from sidecar.model import Event, EventColumns
from sidecar.polled import TickerFactory
from sidecar.sources.events.columns import parse_columns
from sidecar.sources.events.config import EventsConfig, JsonlFileConfig
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.events.parse import EventError, parse_event
from sidecar.sources.events.polled import PolledEventSource
from sidecar.sources.events.typed import TypedDoor
from sidecar.store import Store

__all__ = ["JsonlTailer"]


class JsonlTailer(PolledEventSource):
    def __init__(
        self,
        cfg: JsonlFileConfig,
        *,
        events_cfg: EventsConfig,
        metrics: EventsMetrics,
        bus: Bus,
        clock: Clock,
        store: Store,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
        index: int = 0,
    ) -> None:
        self.name = f"events_jsonl_{index}"
        self.source = "jsonl"
        super().__init__(
            interval_secs=cfg.poll_interval_secs,
            metrics=metrics,
            bus=bus,
            clock=clock,
            store=store,
            registry=registry,
            logger=logger,
            ticker=ticker,
        )
        self.cfg = cfg
        self.events_cfg = events_cfg
        self.typed = TypedDoor(events_cfg)
        self._fh: IO[bytes] | None = None
        self._inode: int | None = None
        self._pos = 0
        self._buf = b""
        self._skipping = False  # inside an over-long line: drop bytes until its newline
        self._line_no = 0
        self._first_open = True
        saved = self._load_pos()
        if saved is not None:
            self._inode, self._pos = saved
            self._first_open = False

    # ---- position persistence ------------------------------------------------------------------------
    def _load_pos(self) -> tuple[int, int] | None:
        try:
            raw = self.store.get("events.jsonl", self.cfg.path)
            if raw is None:
                return None
            doc = orjson.loads(raw)
            return int(doc["inode"]), int(doc["pos"])
        except Exception:
            self.m.errors.labels(self.source, "state").inc()
            return None

    def _save_pos(self) -> None:
        try:
            self.store.put("events.jsonl", self.cfg.path, orjson.dumps({"inode": self._inode, "pos": self._pos}))
        except Exception:
            self.m.errors.labels(self.source, "state").inc()

    # ---- reading ---------------------------------------------------------------------------------------
    def _open(self, st: os.stat_result) -> None:
        self._fh = open(self.cfg.path, "rb")  # noqa: SIM115 - kept open across polls on purpose
        ino = os.fstat(self._fh.fileno()).st_ino
        if self._inode == ino and self._pos <= st.st_size:
            self._fh.seek(self._pos)  # resume after a restart
        elif self._first_open and self.cfg.start_at_end:
            self._pos = self._fh.seek(0, os.SEEK_END)
        else:
            self._pos = 0
        self._first_open = False
        self._inode = ino
        self._buf = b""
        self._skipping = False

    def _close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
        self._fh = None

    def _take_lines(self, chunk: bytes) -> list[bytes]:
        data = self._buf + chunk
        parts = data.split(b"\n")
        self._buf = parts.pop()
        out: list[bytes] = []
        for p in parts:
            if self._skipping:
                self._skipping = False
                continue
            if len(p) > self.cfg.max_line_bytes:
                self.m.rejected.labels(self.source, "line_too_long").inc()
                continue
            out.append(p)
        if len(self._buf) > self.cfg.max_line_bytes:
            self.m.rejected.labels(self.source, "line_too_long").inc()
            self._buf = b""
            self._skipping = True
        return out

    def read_once(self) -> list[Event] | list[EventColumns]:
        """Read what is new (blocking file I/O: the poll loop runs it in a thread)."""
        try:
            st: os.stat_result | None = os.stat(self.cfg.path)
        except FileNotFoundError:
            st = None
        except OSError:
            self.m.errors.labels(self.source, "stat").inc()
            return []
        lines: list[bytes] = []
        try:
            if self._fh is None:
                if st is None:
                    return []
                self._open(st)
            assert self._fh is not None
            if st is not None and st.st_ino == self._inode and st.st_size < self._pos:
                self.m.errors.labels(self.source, "truncated").inc()
                self._fh.seek(0)
                self._pos, self._buf, self._skipping = 0, b"", False
            chunk = self._fh.read(self.cfg.max_read_bytes)
            self._pos += len(chunk)
            lines = self._take_lines(chunk)
            at_eof = len(chunk) < self.cfg.max_read_bytes
            if at_eof and (st is None or st.st_ino != self._inode):
                # Rotated away and fully read: the next poll opens whatever the path names now.
                if self._buf:
                    lines.extend(self._take_lines(b"\n"))
                self._close()
                self._inode, self._pos = None, 0
        except OSError:
            self.m.errors.labels(self.source, "read").inc()
            self._close()
            return []
        now = self.clock.now()
        if lines and (cols := self.typed.lines(lines, now)) is not None:  # the common shape, decoded typed
            self._line_no += len(lines)
            self._save_pos()
            return cols
        docs: list[tuple[int, object]] = []
        for line in lines:
            self._line_no += 1
            if not line.strip():
                continue
            try:
                docs.append((self._line_no, orjson.loads(line)))
            except orjson.JSONDecodeError:
                self.m.rejected.labels(self.source, "not_json").inc()
        out: list[Event] | list[EventColumns] = []
        if docs:
            cols = parse_columns([d for _, d in docs], self.events_cfg, now)
            if cols is not None:
                self.typed.learn(cols)
            out = cols or self._one_by_one(docs, now)
        if lines:
            self._save_pos()
        return out

    def _one_by_one(self, docs: list[tuple[int, object]], now: float) -> list[Event]:
        """Lines not all of the common shape: each through the per-event door, a refusal counted and logged."""
        out: list[Event] = []
        for line_no, doc in docs:
            try:
                out.append(parse_event(doc, f"line {line_no}", self.events_cfg, now))
            except EventError as exc:
                self.m.rejected.labels(self.source, "invalid").inc()
                self.log.debug("rejected %s", exc)
        return out
