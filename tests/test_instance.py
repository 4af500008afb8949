"""One sidecar per port and per store: a second one fails first, in one line, touching nothing."""

from __future__ import annotations

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
        cfg.write_text(yaml.safe_dump({"server": {"host": "127.0.0.1", "port": busy.getsockname()[1]},
                                       "triton": {"enabled": False}, "gpu": {"enabled": False},
                                       "store": {"path": str(store)}}))
        r = subprocess.run([sys.executable, "-m", "sidecar.cli", "run", "--config", str(cfg)], cwd=ROOT,
                           capture_output=True, timeout=60, text=True)
    finally:
        busy.close()
    assert r.returncode == 2
    assert "server.port" in r.stderr and "Traceback" not in r.stderr
    assert "listening on" not in r.stderr  # never claimed before the port was ours
    assert not store.exists() and not Path(f"{store}.lock").exists()
