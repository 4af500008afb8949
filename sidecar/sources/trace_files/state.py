"""What the trace-file source remembers, in the store, so a restart resumes where the last read ended.

One row per followed PATH (namespace ``trace_files``): per file its identity (inode and a hash of its first
consumed bytes, so a name written again by a restarted Triton is told apart from the file read before), the
byte offset after the last complete record taken, whether the array was closed; and the requests seen only
partly (their records straddle the offset), so a restart neither loses nor repeats them.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import orjson

from sidecar.sources.trace_files.requests import Request
from sidecar.store import Store

__all__ = ["Checkpoint", "FileMark", "head_hash", "legacy_read_whole", "load", "rewritten", "save"]

NS = "trace_files"
LEGACY_TENSORS_NS = "events.tensors"  # the former tensors reader's "read whole" marks: ino:size:mtime
HEAD_BYTES = 256


def head_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


@dataclass
class FileMark:
    ino: int
    offset: int = 0
    head_len: int = 0
    head: str = ""
    closed: bool = False
    keep: bool = False  # a subscriber failed to take data read from it: never deleted automatically
    # In memory only: when the file last changed (for settling) and whether its damage was counted.
    size_seen: int = -1
    mtime_seen: int = -1
    changed_at: float = 0.0
    lenient_counted: bool = False
    held: int = 0  # bytes of a record still being written, after the offset

    def to_json(self) -> list[Any]:
        return [self.ino, self.offset, self.head_len, self.head, self.closed, self.keep]

    @classmethod
    def from_json(cls, v: list[Any]) -> FileMark:
        ino, offset, head_len, head, closed, keep = v
        return cls(int(ino), int(offset), int(head_len), str(head), bool(closed), bool(keep))


@dataclass
class Checkpoint:
    marks: dict[str, FileMark]
    pending: list[Request]
    # Finished files whose marks were let go to stay bounded: a file of rotation index <= floor_index whose
    # mtime is not newer than floor_mtime_ns was read before (a restarted Triton's new PATH.0 is newer).
    floor_index: int = -2
    floor_mtime_ns: int = 0


def _prefix(base: str) -> tuple[str, str]:
    return f"{base}|file|", f"{base}|meta"


def load(store: Store, base: str) -> Checkpoint:
    files, meta = _prefix(base)
    rows = store.query("SELECT k, v FROM kv WHERE ns = ? AND k >= ? AND k < ?", (NS, files, files + "\uffff"))
    marks = {str(k)[len(files) :]: FileMark.from_json(orjson.loads(v)) for k, v in rows}
    raw = store.get(NS, meta)
    if raw is None:
        return Checkpoint(marks, [])
    doc = orjson.loads(raw)
    return Checkpoint(marks, [Request.from_json(r) for r in doc["pending"]], int(doc["floor"][0]), int(doc["floor"][1]))


def save(store: Store, base: str, cp: Checkpoint, changed: set[str], gone: set[str]) -> None:
    """Write the marks of ``changed`` files and the pending requests in one transaction; forget ``gone``."""
    files, meta = _prefix(base)
    rows: list[tuple[str, str, bytes]] = [
        (NS, files + p, orjson.dumps(cp.marks[p].to_json())) for p in changed if p in cp.marks
    ]
    rows.append(
        (
            NS,
            meta,
            orjson.dumps(
                {"v": 1, "pending": [r.to_json() for r in cp.pending], "floor": [cp.floor_index, cp.floor_mtime_ns]}
            ),
        )
    )
    store.executemany("INSERT OR REPLACE INTO kv (ns, k, v) VALUES (?, ?, ?)", rows)
    for p in gone:
        store.delete(NS, files + p)


def rewritten(mark: FileMark, path: str, st: os.stat_result) -> bool:
    """Whether the file at ``path`` (stat ``st``) is not the one ``mark`` was read from: another inode, shorter
    than what was read, or its first bytes hash otherwise (a file truncated and written again)."""
    if st.st_ino != mark.ino or st.st_size < mark.offset:
        return True
    if not mark.head_len:
        return False
    try:
        with open(path, "rb") as f:
            return head_hash(f.read(mark.head_len)) != mark.head
    except OSError:
        return False


def legacy_read_whole(store: Store, path: str, ino: int, size: int, mtime_ns: int) -> bool:
    """Whether the former tensors reader had read this very file whole (an upgrade must not replay it)."""
    v = store.get(LEGACY_TENSORS_NS, path)
    sig = f"{ino}:{size}:{mtime_ns}"
    return v in (sig, sig.encode())
