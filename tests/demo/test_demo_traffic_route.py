"""After a revert unloads a version, the demo's client follows what a router told of it would do: the first
answer saying the version is not serving sends that version's share unversioned (Triton serves the held version),
each request is reported under the version that answered, and the named version is tried again every
REROUTE_SECS. A version that fails for another reason (a rejected input) keeps being addressed by name."""

from __future__ import annotations

import json

import httpx

from sidecar.demo.scenario import DemoRequest
from sidecar.demo.traffic import REROUTE_SECS, Traffic


class FakeTimer:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _triton(paths: list[str], serving: set[str]) -> httpx.MockTransport:
    """Triton after a revert of fraud to v1 (explicit model control): v2 is unloaded."""

    def handle(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        parts = request.url.path.split("/")
        version = parts[5] if "versions" in parts else max(serving)
        amount = json.loads(request.content)["inputs"][0]["data"][0]
        if version not in serving:
            return httpx.Response(
                400, json={"error": f"Request for unknown model: 'fraud' version {version} is not at ready state"}
            )
        if amount < 0:
            return httpx.Response(400, json={"error": "negative amount"})
        return httpx.Response(
            200, json={"model_name": "fraud", "model_version": version, "outputs": [{"name": "score", "data": [0.2]}]}
        )

    return httpx.MockTransport(handle)


async def test_requests_for_an_unloaded_version_go_unversioned_until_it_serves_again() -> None:
    timer = FakeTimer()
    paths: list[str] = []
    serving = {"1"}
    traffic = Traffic("http://triton", timer=timer)
    v2 = DemoRequest(model="fraud", version="2", inputs=[10.0, 0.5, 0.5], features={})
    async with httpx.AsyncClient(transport=_triton(paths, serving)) as client:
        statuses = [await traffic._infer(client, v2) for _ in range(100)]
        # One failure (the answer that says v2 is not serving), then every request reaches the held v1.
        assert statuses == [400] + [200] * 99
        assert paths[0] == "/v2/models/fraud/versions/2/infer" and set(paths[1:]) == {"/v2/models/fraud/infer"}
        assert traffic.stats.failed == {"fraud:2": 1} and traffic.stats.ok == {"fraud:1": 99}
        # REROUTE_SECS later v2 is tried by name again: still unloaded, one more failure, then unversioned again.
        timer.t += REROUTE_SECS
        assert [await traffic._infer(client, v2) for _ in range(3)] == [400, 200, 200]
        # Reloaded (an operator cleared the hold and a deploy loaded it): by name again, reported as v2.
        serving.add("2")
        timer.t += REROUTE_SECS
        assert [await traffic._infer(client, v2) for _ in range(3)] == [200] * 3
        assert paths[-3:] == ["/v2/models/fraud/versions/2/infer"] * 3 and traffic.stats.ok["fraud:2"] == 3


async def test_a_rejected_input_is_not_taken_for_an_unloaded_version() -> None:
    paths: list[str] = []
    traffic = Traffic("http://triton", timer=FakeTimer())
    bad = DemoRequest(model="fraud", version="2", inputs=[-5.0, 0.5, 0.5], features={})
    async with httpx.AsyncClient(transport=_triton(paths, {"1", "2"})) as client:
        assert [await traffic._infer(client, bad) for _ in range(5)] == [400] * 5
    assert set(paths) == {"/v2/models/fraud/versions/2/infer"}
