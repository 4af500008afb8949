"""Many ``sidecar run`` processes for the price of one start-up: a parent process imports the sidecar and builds
its Service once from a sample config (the checks import scipy, pandas and friends lazily, so building one is what
loads them), then forks a child per sidecar that runs ``sidecar.cli.main(["run", "--config", ...])``: the same
code as the console script, each child its own process with its own port, store and state, minus the ~4 CPU
seconds each process spent importing (measured: 1.1 s of imports, 2.9 s building the Service, for the fleet
test's config). A test that starts eight sidecars on two shared cores waited for 32 CPU seconds of imports.

The parent forks only while it runs a single thread (checked), so no lock is inherited held; it runs with one
BLAS/OpenMP thread (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS), so no native thread pool exists to be forked either.
Children are reaped by the parent (SIGCHLD ignored there, default again in each child), so a handle sees its
child gone once it exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from waiting import wait_until

__all__ = ["ForkedSidecar", "SidecarForks"]

_PARENT = r"""
import json, os, signal, sys, threading
from sidecar import cli
from sidecar.app import create_app
from sidecar.config import parse_config
from sidecar.httpserver import uvicorn_server
from sidecar.instance import StoreLock, bind_listener
from sidecar.runtime import run, tune_gc
from sidecar.service import Service

raw = json.loads(open(sys.argv[1]).read())
raw["server"]["port"] = 0
raw["store"] = {"path": sys.argv[2]}
cfg = parse_config(raw)
svc = Service(cfg)
uvicorn_server(create_app(svc), cfg.server, registry=svc.registry)
store = getattr(svc, "store", None)
if store is not None:
    store.close()
del svc, store
if threading.active_count() != 1:
    print("error: threads running after the warm-up: " + repr(threading.enumerate()), flush=True)
    sys.exit(1)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
print("ready", flush=True)
for line in sys.stdin:
    config, log = line.rstrip("\n").split("\t")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            sys.stdin.close()
            code = cli.main(["run", "--config", config])
        finally:
            os._exit(code)
    print(pid, flush=True)
"""


class ForkedSidecar:
    """A forked ``sidecar run``: the part of ``subprocess.Popen`` the tests use (terminate, kill, wait)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> None:
        if not wait_until(lambda: not self.alive(), timeout):
            raise subprocess.TimeoutExpired(f"sidecar pid {self.pid}", timeout)


class SidecarForks:
    """The parent: ``start(config, log)`` forks one sidecar and returns its handle; ``close()`` ends the parent
    (not its children: each handle stops its own)."""

    def __init__(self, sample_config: Path, workdir: Path) -> None:
        log = (workdir / "sidecar-forks.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _PARENT, str(sample_config), str(workdir / "sidecar-forks-warmup.sqlite")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        )
        log.close()
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().strip()
        if first != "ready":
            self.close()
            raise RuntimeError(f"the sidecar fork parent did not start: {first!r}; see {workdir / 'sidecar-forks.log'}")

    def start(self, config: Path, log: Path) -> ForkedSidecar:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{config}\t{log}\n")
        self.proc.stdin.flush()
        return ForkedSidecar(int(self.proc.stdout.readline()))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
