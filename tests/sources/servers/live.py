"""Shared by the ``test_<server>_live.py`` modules: a real model server from its own virtualenv, the client's own
tally of what it sent, and the sidecar's ``servers:`` source reading the server's metrics around that traffic.

Each server is installed by ``.ci/servers.sh`` into ``.servers/<name>/`` (its pinned dependencies clash with the
project's). A missing venv skips the module outside CI and fails it in CI (``CI`` set), where the script ran.
The server runs as a subprocess in its own session on free loopback ports and is waited for by polling its
readiness route; its log is kept and its tail shown when it fails to come up. The sidecar scrapes once before
the traffic and once after (a fake clock 10 s on), so its totals and interval figures cover exactly that
traffic; the raw expositions of both scrapes are kept and read again with ``prometheus_client``'s own parser
for the comparison.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_until

from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import free_port
from sidecar.polled import ManualTicker
from sidecar.sources.servers.config import ServingTargetConfig
from sidecar.sources.servers.export import ServingExport
from sidecar.sources.servers.source import ServerSource
from sidecar.sources.servers.telemetry import ServerTelemetry

__all__ = [
    "Observed",
    "ServerProcess",
    "Tally",
    "bucket_of",
    "client",
    "free_port",
    "observe",
    "raw_buckets",
    "raw_value",
    "server_venv",
]

ROOT = Path(__file__).resolve().parents[3]
SERVERS = ROOT / ".servers"
T = TypeVar("T")


def server_venv(name: str) -> Path:
    """``.servers/<name>``, installed by .ci/servers.sh; skipped when absent (failed in CI, which installs it)."""
    venv = SERVERS / name
    if not (venv / ".installed").is_file():
        msg = f".servers/{name} is not installed: bash .ci/servers.sh installs it"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return venv


class ServerProcess:
    """One server subprocess in its own session, its output in ``log``; ``stop`` ends its whole group."""

    def __init__(self, argv: Sequence[str], *, cwd: Path, log: Path, env: Mapping[str, str] | None = None) -> None:
        self.argv, self.cwd, self.log = list(argv), cwd, log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, ready_url: str, timeout_s: float) -> None:
        """Start, and wait until ``ready_url`` answers 200."""
        self.start_when(lambda: httpx.get(ready_url, timeout=2).status_code == 200, timeout_s, what=ready_url)

    def start_when(self, ready: Callable[[], bool], timeout_s: float, *, what: str = "the server") -> None:
        """Start, and wait until ``ready()`` holds (an HTTP error means not yet); fail with the log's tail."""
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"exited with {proc.returncode}")
            return ready()

        try:
            ok = wait_until(up, timeout_s, interval_s=0.2, ignore=(httpx.HTTPError,))
        except RuntimeError as exc:
            pytest.fail(f"{self.argv[0]} {exc}:\n{self.log_tail()}")
        if not ok:
            pytest.fail(f"{what} not ready in {timeout_s} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-n:])

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM to the process group this Popen made, SIGKILL after ``timeout_s``; then SIGKILL whatever is left
        of its session (Ray's actors and BentoML's workers put themselves in groups of their own)."""
        proc = self.proc
        if proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                continue
        for pid in _session_members(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _session_members(sid: int) -> list[int]:
    """The processes of session ``sid``: the server started it (start_new_session), so they are its own."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.getsid(int(entry.name)) == sid:
                    out.append(int(entry.name))
    return out


def client(base: str, timeout_s: float = 30.0) -> httpx.Client:
    """The test's HTTP client: one connection per request. A kept-alive connection that the server closed while
    idle (uvicorn's 5 s keep-alive, on a loaded host) is a reset on the next request: seen with MLServer and
    KServe, and no part of what is tested."""
    return httpx.Client(base_url=base, timeout=timeout_s, headers={"connection": "close"})


@dataclass
class Tally:
    """What the client sent and saw: requests by outcome and each request's round trip in seconds."""

    ok: int = 0
    failed: int = 0
    seconds: list[float] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return self.ok + self.failed

    def send(self, call: Callable[[], httpx.Response], *, expect_ok: bool) -> httpx.Response:
        t0 = time.perf_counter()
        resp = call()
        self.seconds.append(time.perf_counter() - t0)
        good = resp.status_code < 400
        assert good == expect_ok, f"{resp.status_code} {resp.text[:300]}"
        if good:
            self.ok += 1
        else:
            self.failed += 1
        return resp


@dataclass
class Observed:
    """The sidecar's registry after a scrape before and one after the traffic, and both raw expositions."""

    registry: CollectorRegistry
    before: str
    after: str
    ready_before: str  # /readyz's line after the scrape before the traffic
    readiness: str
    server: str

    def sidecar(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, {"server": self.server, **labels})


def raw_value(text: str, sample: str, **labels: str) -> float:
    """One sample of an exposition read with ``prometheus_client``'s parser (not the sidecar's); 0 when absent."""
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def raw_buckets(text: str, family: str, **labels: str) -> dict[float, float]:
    """A histogram's cumulative buckets (upper bound -> count) summed over the series matching ``labels``."""
    out: dict[float, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == family + "_bucket" and all(s.labels.get(k) == v for k, v in labels.items()):
                le = float(s.labels["le"])
                out[le] = out.get(le, 0.0) + float(s.value)
    return out


def bucket_of(after: Mapping[float, float], before: Mapping[float, float], rank: float) -> tuple[float, float]:
    """The (lower, upper) bounds of the bucket in which the interval's cumulative count first reaches ``rank``."""
    lower = 0.0
    for le in sorted(after):
        if after[le] - before.get(le, 0.0) >= rank:
            return lower, le
        lower = le
    raise AssertionError(f"no bucket reaches {rank}")


def observe(
    server: str,
    metrics_url: str,
    drive: Callable[[], T],
    *,
    profile: str = "auto",
    settled: Callable[[str, T], bool] | None = None,
) -> tuple[Observed, T]:
    """Scrape ``metrics_url`` through a ``servers:`` source, run ``drive`` (the traffic), scrape again 10 s later
    (on the fake clock). ``settled(exposition, what drive returned)``: for a server that reports its metrics on an
    interval (Ray), the exposition is polled until it holds, before the second scrape."""
    return asyncio.run(_observe(server, metrics_url, drive, profile, settled))


async def _observe(
    server: str, url: str, drive: Callable[[], T], profile: str, settled: Callable[[str, T], bool] | None
) -> tuple[Observed, T]:
    registry, clock = CollectorRegistry(), FakeClock()
    config = ServingTargetConfig.model_validate({"name": server, "url": url, "profile": profile})
    async with httpx.AsyncClient() as http:
        source = ServerSource(
            config,
            registry=registry,
            clock=clock,
            http=http,
            export=ServingExport(registry),
            telemetry=ServerTelemetry(registry),
            ticker=ManualTicker,
        )
        before = (await http.get(url)).text
        assert await source.scrape_once(), source.readiness().detail
        ready_before = source.readiness().detail
        got = await asyncio.to_thread(drive)
        if settled is not None:
            check = settled

            def ready() -> bool:
                return check(httpx.get(url, timeout=5).text, got)

            assert await asyncio.to_thread(wait_until, ready, 60, interval_s=0.25), f"{url} did not settle"
        clock.advance(10)
        assert await source.scrape_once(), source.readiness().detail
        after = (await http.get(url)).text
    if capture := os.environ.get("SIDECAR_CAPTURE_DIR"):  # how tests/data/servers/*-real.prom were written
        Path(capture, f"{server}.prom").write_text(after)
    return Observed(registry, before, after, ready_before, source.readiness().detail, server), got
