"""The upgrade guard: a family gone after a restart, or replaced by its new name, is a finding naming both."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.polled import ManualTicker
from sidecar.sources.servers.config import ServingTargetConfig
from sidecar.sources.servers.export import ServingExport
from sidecar.sources.servers.schema import DistName
from sidecar.sources.servers.source import ServerSource
from sidecar.sources.servers.telemetry import ServerTelemetry


class Target:
    def __init__(self, text: str) -> None:
        self.text = text

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=self.text, headers={"content-type": "text/plain"})


def _source(target: Target, reg: CollectorRegistry, clock: FakeClock) -> ServerSource:
    return ServerSource(
        ServingTargetConfig(name="llm", url="http://llm/metrics"),
        registry=reg,
        clock=clock,
        http=httpx.AsyncClient(transport=httpx.MockTransport(target)),
        export=ServingExport(reg),
        telemetry=ServerTelemetry(reg),
        ticker=ManualTicker,
    )


async def test_an_upgrade_that_renames_families_is_a_finding_naming_both(fixture_text: Callable[[str], str]) -> None:
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(fixture_text("vllm-0.8.prom"))
    src = _source(target, reg, clock)
    await src.scrape_once()
    assert src.evaluate(clock.now()) == []
    clock.advance(10)
    target.text = fixture_text("vllm-current.prom")  # restarted into the release with the new names
    await src.scrape_once()
    found = {f.labels["family"]: f for f in src.evaluate(clock.now())}
    itl = found["vllm:time_per_output_token_seconds"]
    assert itl.active and itl.kind == "diagnosis"
    assert itl.facts["diagnosis"] == "server_family_renamed"
    problem = str(itl.facts["problem"])
    assert "vllm:inter_token_latency_seconds" in problem and str(DistName.INTER_TOKEN_LATENCY) in problem
    assert found["vllm:gpu_cache_usage_perc"].facts["replacement"] == "vllm:kv_cache_usage_perc"
    # The SLIs did not go flat: inter-token latency is read from the new name.
    assert src.last is not None and DistName.INTER_TOKEN_LATENCY in next(iter(src.last.models.values())).dists
    labels = {"server": "llm", "change": "renamed"}
    assert reg.get_sample_value("sidecar_server_family_changes_total", labels) == 2


async def test_a_family_gone_without_replacement_says_what_breaks_until_it_returns(
    fixture_text: Callable[[str], str],
) -> None:
    full = fixture_text("vllm-current.prom")
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(full)
    src = _source(target, reg, clock)
    await src.scrape_once()
    clock.advance(10)
    target.text = "".join(line + "\n" for line in full.splitlines() if "time_to_first_token" not in line)
    await src.scrape_once()
    (gone,) = src.evaluate(clock.now())
    assert gone.active and gone.labels["family"] == "vllm:time_to_first_token_seconds"
    assert gone.facts["diagnosis"] == "server_family_gone"
    assert "gen_ai.server.time_to_first_token is no longer reported" in str(gone.facts["problem"])
    assert src.evaluate(clock.now())[0].active  # it stands while the family is missing
    clock.advance(10)
    target.text = full
    await src.scrape_once()
    (back,) = src.evaluate(clock.now())
    assert not back.active and back.labels["family"] == "vllm:time_to_first_token_seconds"
    assert src.evaluate(clock.now()) == []
