"""One sidecar per port and per store.

``sidecar run`` binds its port before it builds anything, so a second instance on a busy port exits at once
instead of starting its components (and writing to the shared store) first; then it takes an exclusive lock
beside the store, so two sidecars on different ports never evaluate and deliver from the same state.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from pathlib import Path
from types import TracebackType

from sidecar.errors import ConfigError, StoreError

__all__ = ["StoreLock", "bind_listener"]


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a ConfigError naming ``server.port`` when it cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError("server.host", f"cannot resolve {host!r}: {exc.strerror}") from None
    family, kind, proto, _, addr = infos[0]
    # The proto from getaddrinfo (IPPROTO_TCP), not 0: asyncio turns Nagle off only on accepted sockets whose
    # proto says TCP, and with Nagle on a response written head-then-body waits for the client's delayed ACK.
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError("server.port", f"{host}:{port} is already in use (another sidecar?)") from None
        raise ConfigError("server.host", f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(False)
    return sock


class StoreLock:
    """An exclusive ``flock`` on ``<store>.lock`` held for the life of the process.

    flock (not a pid file) so a sidecar killed with -9 never leaves a stale lock: the kernel drops it with
    the file descriptor. The holder's pid is written into the file only to name it in the refusal.
    """

    def __init__(self, store_path: str) -> None:
        self.path = Path(f"{store_path}.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(
                str(self.path)[: -len(".lock")],
                f"cannot create its lock file {self.path} ({exc.strerror}); the store's folder must "
                "be writable by the sidecar",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(
                str(self.path)[: -len(".lock")],
                f"in use by another sidecar (pid {holder}); give each sidecar its own store.path",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
