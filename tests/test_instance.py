"""One sidecar per port and per store: a second one fails first, in one line, touching nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sidecar.errors import ConfigError, StoreError
from sidecar.instance import StoreLock, bind_listener

ROOT = Path(__file__).resolve().parents[1]


def test_a_busy_port_is_a_config_error_naming_server_port() -> None:
    first = bind_listener("127.0.0.1", 0)
    try:
        with pytest.raises(ConfigError) as e:
            bind_listener("127.0.0.1", first.getsockname()[1])
        assert e.value.path == "server.port" and "already in use" in str(e.value)
    finally:
        first.close()


def test_a_second_lock_on_one_store_names_the_holder(tmp_path: Path) -> None:
    store = str(tmp_path / "state.sqlite")
    with StoreLock(store):
        with pytest.raises(StoreError) as e:
            StoreLock(store).acquire()
        assert store in str(e.value) and "pid" in str(e.value)
    StoreLock(store).acquire()  # released with the first: a killed sidecar leaves no stale lock


def test_a_second_sidecar_on_a_busy_port_exits_before_touching_its_store(tmp_path: Path) -> None:
    busy = bind_listener("127.0.0.1", 0)
    try:
        store = tmp_path / "second.sqlite"
        cfg = tmp_path / "sidecar.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "server": {"host": "127.0.0.1", "port": busy.getsockname()[1]},
                    "triton": {"enabled": False},
                    "gpu": {"enabled": False},
                    "store": {"path": str(store)},
                }
            )
        )
        r = subprocess.run(
            [sys.executable, "-m", "sidecar.cli", "run", "--config", str(cfg)],
            cwd=ROOT,
            capture_output=True,
            timeout=60,
            text=True,
        )
    finally:
        busy.close()
    assert r.returncode == 2
    assert "server.port" in r.stderr and "Traceback" not in r.stderr
    assert "listening on" not in r.stderr  # never claimed before the port was ours
    assert not store.exists() and not Path(f"{store}.lock").exists()


def test_connections_accepted_on_the_bound_port_have_nagle_off_on_the_standard_loop() -> None:
    # asyncio turns TCP_NODELAY on only for sockets whose proto is IPPROTO_TCP; a listener made with proto 0
    # gave accepted connections Nagle, and a response written in two parts (head, body) then waited for the
    # client's delayed ACK: ~45 ms for every 51 KB OTLP JSON export on `sidecar run` (bench/bench_otlp.py).
    import asyncio

    async def main() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class P(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                s = transport.get_extra_info("socket")
                seen.set_result(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        sock = bind_listener("127.0.0.1", 0)
        server = await asyncio.get_running_loop().create_server(P, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 5)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(main()) != 0
