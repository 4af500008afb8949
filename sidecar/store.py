"""The embedded SQLite store (WAL) shared by components that must survive a restart.

Each component owns its tables (prefixed with its name) and creates them itself; the store only serialises
access, because sqlite3 connections are not safe to share across threads without a lock.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sidecar.errors import StoreError

__all__ = ["Store", "error_reason"]


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        # sqlite3 says only "unable to open database file"; an operator needs the path and the likely cause.
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
            with self._lock:
                if self.path != ":memory:":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute("CREATE TABLE IF NOT EXISTS kv (ns TEXT, k TEXT, v BLOB, PRIMARY KEY (ns, k))")
        except (OSError, sqlite3.Error) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise StoreError(
                self.path,
                f"cannot open the store ({reason}); the file and its folder must be "
                "writable by the sidecar (SQLite also writes -wal and -shm files beside it)",
            ) from None
        self._closed = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows changed."""
        with self._lock:
            cur = self._conn.execute(sql, params)
            return cur.rowcount

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(sql, rows)
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The statements run in the block (by this thread) commit together or not at all: an exception rolls
        all of them back and propagates. Nested blocks are savepoints. The lock is held for the whole block,
        so keep it short and free of I/O other than the store's."""
        with self._lock:
            nested = self._conn.in_transaction
            self._conn.execute("SAVEPOINT sidecar_tx" if nested else "BEGIN IMMEDIATE")
            try:
                yield
                self._conn.execute("RELEASE sidecar_tx" if nested else "COMMIT")
            except BaseException:
                if nested:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK TO sidecar_tx")
                        self._conn.execute("RELEASE sidecar_tx")
                else:
                    self._rollback()
                raise

    def _rollback(self) -> None:
        # SQLite may have rolled the transaction back itself (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM do): a
        # second ROLLBACK would raise "cannot rollback - no transaction is active" and hide the real error
        # (say "database or disk is full") from the caller and its log. A COMMIT that failed leaves the
        # transaction open: rolled back here, so the next BEGIN does not nest inside it.
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._conn.execute(sql, params).fetchall())

    def put(self, ns: str, key: str, value: bytes | str) -> None:
        self.execute("INSERT OR REPLACE INTO kv (ns, k, v) VALUES (?, ?, ?)", (ns, key, value))

    def get(self, ns: str, key: str) -> bytes | str | None:
        rows = self.query("SELECT v FROM kv WHERE ns = ? AND k = ?", (ns, key))
        return rows[0][0] if rows else None

    def keys(self, ns: str) -> list[str]:
        return [r[0] for r in self.query("SELECT k FROM kv WHERE ns = ? ORDER BY k", (ns,))]

    def delete(self, ns: str, key: str) -> None:
        self.execute("DELETE FROM kv WHERE ns = ? AND k = ?", (ns, key))

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._conn.close()
                self._closed = True


# SQLite's primary result codes a failed write ends with, as bounded counter labels.
_REASONS = {
    sqlite3.SQLITE_FULL: "disk_full",
    sqlite3.SQLITE_READONLY: "read_only",
    sqlite3.SQLITE_BUSY: "busy",
    sqlite3.SQLITE_LOCKED: "busy",
    sqlite3.SQLITE_IOERR: "io",
    sqlite3.SQLITE_CORRUPT: "corrupt",
    sqlite3.SQLITE_NOTADB: "corrupt",
}


def error_reason(exc: BaseException) -> str:
    """A bounded label for why a store operation failed: disk_full, read_only, busy, io, corrupt or other."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and isinstance(code, int):
        return _REASONS.get(code & 0xFF, "other")
    return "other"
