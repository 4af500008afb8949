"""Against a REAL Alertmanager 0.25 behind basic auth (its --web.config.file): a notice configured with
``user:password@`` in the URL arrives, the password never shows, and without credentials Alertmanager refuses."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import httpx
import pytest
from alerting_helpers import make_service
from prometheus_client import generate_latest
from waiting import wait_until

from sidecar.demo.tritonserver import free_port

pytestmark = pytest.mark.alertmanager

AM_BIN = "/usr/bin/prometheus-alertmanager"
USER, PASSWORD = "sidecar", "w3b-p4ss-only-here"


@pytest.fixture
def am_with_auth(tmp_path: Path) -> Iterator[str]:
    if not Path(AM_BIN).exists():
        pytest.fail("prometheus-alertmanager is not installed (Debian package prometheus-alertmanager)")
    port = free_port()
    (tmp_path / "am.yml").write_text("route:\n  receiver: none\nreceivers:\n  - name: none\n")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt()).decode()
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    log = tmp_path / "am.log"
    proc = subprocess.Popen(
        [
            AM_BIN,
            f"--config.file={tmp_path / 'am.yml'}",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--web.config.file={tmp_path / 'web.yml'}",
            "--cluster.listen-address=",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/-/ready", auth=(USER, PASSWORD), timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        if not wait_until(ready, 30, interval_s=0.1):
            pytest.fail(f"Alertmanager did not become ready: {log.read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _notice() -> dict[str, Any]:
    return {
        "labels": {"alertname": "AuthCheck", "severity": "low"},
        "annotations": {"summary": "s"},
        "startsAt": "2030-01-01T00:00:00.000Z",
        "endsAt": "2030-01-01T01:00:00.000Z",
    }


async def test_notice_reaches_an_alertmanager_behind_basic_auth_with_the_password_kept_out_of_sight(
    tmp_path: Path, am_with_auth: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = am_with_auth
    host = url.removeprefix("http://")
    assert httpx.post(f"{url}/api/v2/alerts", json=[_notice()], timeout=5).status_code == 401
    async with httpx.AsyncClient() as http:
        svc = make_service(
            tmp_path, {"alerting": {"enabled": True, "alertmanager": {"urls": [f"http://{USER}:{PASSWORD}@{host}"]}}}
        )
        am = svc.component("alertmanager")
        am.http = http  # the helper's client is a mock; this test talks to the real Alertmanager
        am.enqueue([_notice()])
        assert await am.flush_all() == {url: "empty"}
    got = httpx.get(f"{url}/api/v2/alerts", auth=(USER, PASSWORD), timeout=5).json()
    assert [a["labels"]["alertname"] for a in got] == ["AuthCheck"]
    _ok, details = svc.readiness()
    for text in (caplog.text, generate_latest(svc.registry).decode(), str(details)):
        assert PASSWORD not in text
