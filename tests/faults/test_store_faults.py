"""The embedded store's disk fills up or turns read-only while the sidecar runs, or is read-only at start.

The disk is a real, tiny tmpfs mounted for the test and filled to its last byte (SQLite answers SQLITE_FULL,
"database or disk is full", exactly as on a full volume). A mounted filesystem cannot be remounted read-only
while SQLite holds it open for writing, so read-only at run time is SQLite's own ``PRAGMA query_only`` (every
write then fails with SQLITE_READONLY, as on a read-only volume); read-only at start is a tmpfs mounted ``ro``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import yaml
from alerting_helpers import make_service
from faultkit import ROOT, Behaviour, StandIn
from test_alertmanager_faults import _cfg, _fire, _firing, _value

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import free_port
from sidecar.service import Service
from sidecar.store import Store


class TinyDisk:
    def __init__(self, path: Path, options: str = "size=1m") -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.decode().strip()}")
        self.filler = path / "filler"

    def fill(self) -> None:
        """Write until ENOSPC, down to single bytes, so the next page SQLite needs does not fit."""
        with self.filler.open("ab", buffering=0) as f:
            for chunk in (1 << 16, 4096, 512, 1):
                while True:
                    try:
                        f.write(b"\0" * chunk)
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC
                        break
        assert os.statvfs(self.path).f_bavail == 0

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[TinyDisk]:
    d = TinyDisk(tmp_path / "disk")
    try:
        yield d
    finally:
        d.unmount()


def _read_only(store: Store, on: bool) -> None:
    # The store's own connection: the pragma applies per connection (see the module docstring).
    store._conn.execute(f"PRAGMA query_only = {'ON' if on else 'OFF'}")


Fault = Callable[[TinyDisk, Store, bool], None]


def _disk_full(d: TinyDisk, _: Store, on: bool) -> None:
    d.fill() if on else d.free()


def _ro(_: TinyDisk, store: Store, on: bool) -> None:
    _read_only(store, on)


FAULTS = pytest.mark.parametrize("fault", [_disk_full, _ro], ids=["disk_full", "read_only"])


def _service(tmp_path: Path, disk: TinyDisk, clock: FakeClock, am: StandIn) -> Service:
    return make_service(
        tmp_path,
        _cfg(am.url),
        clock=clock,
        transport=httpx.AsyncHTTPTransport(),
        store=Store(disk.path / "state.sqlite"),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time() - 300)


@FAULTS
async def test_store_fault_while_an_alert_fires_is_survived_and_counted(
    tmp_path: Path, disk: TinyDisk, clock: FakeClock, stand_in: StandIn, fault: Fault
) -> None:
    svc = _service(tmp_path, disk, clock, stand_in)
    try:
        fault(disk, svc.store, True)
        _fire(svc, clock)  # evaluation rounds do not raise; the book fires
        # The notice could not be queued: counted by the book, which retries it the next round.
        assert _value(svc, "sidecar_alert_notices_unqueued_total") >= 1
        reason = "disk_full" if fault is _disk_full else "read_only"  # counted with SQLite's reason
        assert _value(svc, "sidecar_audit_errors_total", reason=reason) >= 1  # the "fired" row was not written
        # Reads still work: /v1/alerts, /metrics and /readyz answer.
        app = create_app(svc, manage_lifecycle=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            assert [a["labels"]["model"] for a in (await c.get("/v1/alerts")).json()] == ["asr"]
            assert (await c.get("/metrics")).status_code == 200
        fault(disk, svc.store, False)
        svc.evaluate_once(clock.now())
        assert _firing(svc) == ["asr"]
    finally:
        await svc.shutdown()
        svc.store.close()


@FAULTS
async def test_a_notice_lost_to_a_store_fault_is_queued_once_the_store_recovers(
    tmp_path: Path, disk: TinyDisk, clock: FakeClock, stand_in: StandIn, fault: Fault
) -> None:
    ok = stand_in.set(Behaviour(status=200, body=b"", content_type="application/json"))
    svc = _service(tmp_path, disk, clock, stand_in)
    try:
        fault(disk, svc.store, True)
        _fire(svc, clock)
        fault(disk, svc.store, False)
        clock.advance(60)
        svc.evaluate_once(clock.now())  # one evaluation interval after the store recovered
        await svc.component("alertmanager").flush_all()
        assert [n["labels"]["model"] for b in ok.bodies for n in orjson.loads(b)] == ["asr"]
    finally:
        await svc.shutdown()
        svc.store.close()


@FAULTS
async def test_a_change_posted_while_the_store_is_broken_gets_a_counted_500(
    tmp_path: Path, disk: TinyDisk, clock: FakeClock, stand_in: StandIn, fault: Fault
) -> None:
    svc = _service(tmp_path, disk, clock, stand_in)
    try:
        fault(disk, svc.store, True)
        app = create_app(svc, manage_lifecycle=False)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.post("/v1/changes", json={"what": "deploy v2", "model": "asr"})
            # The change log failed on the batch: the push endpoints' one answer (sidecar.pushfail).
            assert r.status_code == 500 and r.json()["failed_subscribers"] == ["changes"]
            assert _value(svc, "sidecar_push_subscriber_failures_total", endpoint="/v1/changes") == 1
            fault(disk, svc.store, False)
            assert (await c.post("/v1/changes", json={"what": "deploy v2", "model": "asr"})).status_code == 201
    finally:
        await svc.shutdown()
        svc.store.close()


def _start_on_read_only_store(tmp_path: Path) -> tuple[int, str]:
    ro = TinyDisk(tmp_path / "ro", options="size=1m,ro")
    try:
        cfg = {
            "server": {"host": "127.0.0.1", "port": free_port()},
            "gpu": {"enabled": False},
            "store": {"path": str(ro.path / "state.sqlite")},
        }
        path = tmp_path / "sidecar.yaml"
        path.write_text(yaml.safe_dump(cfg))
        r = subprocess.run(
            [sys.executable, "-m", "sidecar.cli", "run", "--config", str(path)],
            cwd=ROOT,
            capture_output=True,
            timeout=60,
        )
        return r.returncode, (r.stdout + r.stderr).decode(errors="replace")
    finally:
        with contextlib.suppress(Exception):
            ro.unmount()


def test_a_read_only_store_at_start_exits_non_zero(tmp_path: Path) -> None:
    rc, out = _start_on_read_only_store(tmp_path)
    assert rc != 0, out
    assert "Read-only file system" in out


def test_a_read_only_store_at_start_is_named_in_one_line(tmp_path: Path) -> None:
    rc, out = _start_on_read_only_store(tmp_path)
    assert rc != 0
    assert "Traceback" not in out
    assert "store.path" in out and str(tmp_path / "ro" / "state.sqlite") in out
