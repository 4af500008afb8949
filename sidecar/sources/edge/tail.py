"""Reads the new complete lines of one appended-to file, surviving rotation and truncation (no parsing).

Rotation (the path now names a new inode) is noticed after the old file has been read to its end, so lines
written just before a rename are not lost; truncation (same inode, smaller size) restarts from the top. The read
position is saved in the store under ``namespace``, so a restart resumes where it stopped. Every read takes at most
``max_read_bytes``; an over-long line is skipped and counted, never buffered whole.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import IO

import orjson

from sidecar.store import Store

__all__ = ["LineTail"]


class LineTail:
    """``read()`` returns the complete lines appended since the last call; ``count(reason)`` is told of every
    skipped line (``line_too_long``) and I/O failure (``stat``, ``read``, ``truncated``, ``state``)."""

    def __init__(
        self,
        path: str,
        *,
        store: Store,
        namespace: str,
        max_line_bytes: int,
        max_read_bytes: int,
        start_at_end: bool,
        count: Callable[[str], None],
    ) -> None:
        self.path = path
        self.store, self.namespace = store, namespace
        self.max_line_bytes, self.max_read_bytes = max_line_bytes, max_read_bytes
        self.start_at_end = start_at_end
        self.count = count
        self._fh: IO[bytes] | None = None
        self._inode: int | None = None
        self._pos = 0
        self._buf = b""
        self._skipping = False
        self._first_open = True
        saved = self._load_pos()
        if saved is not None:
            self._inode, self._pos = saved
            self._first_open = False

    def _load_pos(self) -> tuple[int, int] | None:
        try:
            raw = self.store.get(self.namespace, self.path)
            if raw is None:
                return None
            doc = orjson.loads(raw)
            return int(doc["inode"]), int(doc["pos"])
        except Exception:
            self.count("state")
            return None

    def _save_pos(self) -> None:
        try:
            self.store.put(self.namespace, self.path, orjson.dumps({"inode": self._inode, "pos": self._pos}))
        except Exception:
            self.count("state")

    def _open(self, st: os.stat_result) -> None:
        self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open across reads on purpose
        ino = os.fstat(self._fh.fileno()).st_ino
        if self._inode == ino and self._pos <= st.st_size:
            self._fh.seek(self._pos)
        elif self._first_open and self.start_at_end:
            self._pos = self._fh.seek(0, os.SEEK_END)
        else:
            self._pos = 0
        self._first_open = False
        self._inode = ino
        self._buf, self._skipping = b"", False

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
        self._fh = None

    def _take(self, chunk: bytes) -> list[bytes]:
        parts = (self._buf + chunk).split(b"\n")
        self._buf = parts.pop()
        if not self._skipping and (not parts or max(map(len, parts)) <= self.max_line_bytes):
            out = parts  # the usual read: no line to skip (one C pass over the lengths)
        else:
            out = self._bounded(parts)
        if len(self._buf) > self.max_line_bytes:
            self.count("line_too_long")
            self._buf, self._skipping = b"", True
        return out

    def _bounded(self, parts: list[bytes]) -> list[bytes]:
        out: list[bytes] = []
        for p in parts:
            if self._skipping:
                self._skipping = False
                continue
            if len(p) > self.max_line_bytes:
                self.count("line_too_long")
                continue
            out.append(p)
        return out

    def read(self) -> list[bytes]:
        try:
            st: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            st = None
        except OSError:
            self.count("stat")
            return []
        try:
            if self._fh is None:
                if st is None:
                    return []
                self._open(st)
            assert self._fh is not None
            if st is not None and st.st_ino == self._inode and st.st_size < self._pos:
                self.count("truncated")
                self._fh.seek(0)
                self._pos, self._buf, self._skipping = 0, b"", False
            chunk = self._fh.read(self.max_read_bytes)
            self._pos += len(chunk)
            lines = self._take(chunk)
            if len(chunk) < self.max_read_bytes and (st is None or st.st_ino != self._inode):
                if self._buf:  # rotated away and read to its end: its last line had no newline
                    lines.extend(self._take(b"\n"))
                self.close()
                self._inode, self._pos = None, 0
        except OSError:
            self.count("read")
            self.close()
            return []
        if lines:
            self._save_pos()
        return lines
