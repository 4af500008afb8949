"""Fleet drift on real engines: eight `sidecar run` processes on loopback ports each take a disjoint share of
one event stream; a real Prometheus 2.42 scrapes them and evaluates the generated fleet rules; it remote-writes
through vmagent to a real VictoriaMetrics where vmalert evaluates the same rule file; both notify a real
Alertmanager. The merged n equals the events sent, and D and PSI equal one process binning the union, to 1e-9,
on both engines.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from scipy import stats as sps
from waiting import wait_until

from sidecar.checks.drift.config import DriftConfig, ReferenceConfig
from sidecar.checks.drift.datafile import load_reference_file
from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import binned_statistics
from sidecar.checks.fleet.check import FleetBins
from sidecar.checks.fleet.config import FleetConfig
from sidecar.checks.stats.windows import FeatureKind
from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import free_port
from sidecar.fleet_rules import FleetRulesOptions, write
from sidecar.model import Batch, Event

pytestmark = [pytest.mark.prometheus, pytest.mark.alertmanager]

SIDECARS = 8
EVENTS = 4000
CATS = ["us", "de", "fr", "it", "es"]
SIDECAR = str(Path(sys.executable).with_name("sidecar"))  # the console script beside this interpreter
W = "30m"  # the generated rules' window: every series here is born inside it, so each counts whole


def _need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.fail(f"{binary} is not installed (.ci/setup installs it)")
    return path


def _wait(cond: Callable[[], Any], secs: float, what: str) -> Any:
    got = wait_until(cond, secs, interval_s=0.25, ignore=(httpx.HTTPError, LookupError, ValueError))
    if not got:
        raise AssertionError(f"timed out after {secs}s waiting for {what}")
    return got


def _events() -> list[dict[str, Any]]:
    """One stream: x shifted by 0.3 sd against the reference, 2% of x missing, countries re-weighted."""
    rng = random.Random(28)
    out = []
    for i in range(EVENTS):
        x = None if i % 50 == 0 else rng.gauss(0.3, 1.0)
        c = rng.choices(CATS, weights=[0.3, 0.3, 0.2, 0.1, 0.1])[0] if i % 97 else "xx"
        out.append({"model": "ctr", "version": "2", "features": {"x": x, "c": c}})
    return out


def _sidecar_cfg(port: int, tmp: Path, i: int, ref: Path) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"path": str(tmp / f"state{i}.sqlite")},
        "checks": {
            "eval_interval_secs": 1.0,
            "drift": {
                "enabled": True,
                "reference": {"mode": "file", "path": str(ref)},
                "models": {"ctr": {"features": {"x": "numeric", "c": "categorical"}}},
            },
            "fleet": {"enabled": True, "bins": 20},
        },
    }


class _FileRefs:
    """The reference file as every sidecar's drift check loads it (the same reader, the same defaults)."""

    def __init__(self, path: Path) -> None:
        kinds: dict[str, FeatureKind] = {"x": "numeric", "c": "categorical"}
        refs = load_reference_file(path, created_at=0.0, max_rows=DriftConfig().max_reference_samples, kinds=kinds)
        self.refs = {("ctr", "*", k): r for k, r in refs.items()}
        self.path = path

    def spec_for(self, model: str) -> ReferenceConfig:
        return ReferenceConfig(mode="file", path=str(self.path))

    def frozen_references(self) -> dict[tuple[str, str, str], Reference]:
        return dict(self.refs)


class _Procs:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, args: list[str]) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fleet-live")
    prometheus, vm, vmagent, vmalert, am = (
        _need(b) for b in ("prometheus", "victoria-metrics", "vmagent", "vmalert", "prometheus-alertmanager")
    )
    rng = np.random.default_rng(5)
    ref = tmp / "reference.csv"
    xs = rng.normal(size=5000)
    cs = rng.choice(CATS, size=5000, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    ref.write_text("x,c\n" + "".join(f"{x!r},{c}\n" for x, c in zip(xs, cs, strict=True)))
    rules = write(tmp / "rules", FleetRulesOptions(interval_secs=1, for_secs=1))
    ports = [free_port() for _ in range(SIDECARS)]
    procs = _Procs(tmp)
    prom_port, vm_port, vmagent_port, vmalert_port, am_port = (free_port() for _ in range(5))
    try:
        for i, p in enumerate(ports):
            (tmp / f"sidecar{i}.yaml").write_text(json.dumps(_sidecar_cfg(p, tmp, i, ref)))  # JSON is YAML
            procs.start(f"sidecar{i}", [SIDECAR, "run", "--config", str(tmp / f"sidecar{i}.yaml")])
        for p in ports:
            _wait(lambda p=p: httpx.get(f"http://127.0.0.1:{p}/healthz", timeout=2).status_code == 200, 90, "a sidecar")
        (tmp / "am.yml").write_text("route:\n  receiver: none\n  group_wait: 0s\nreceivers:\n  - name: none\n")
        procs.start(
            "alertmanager",
            [
                am,
                f"--config.file={tmp / 'am.yml'}",
                f"--storage.path={tmp / 'am'}",
                f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",
            ],
        )
        procs.start(
            "victoria-metrics",
            [
                vm,
                f"-storageDataPath={tmp / 'vm'}",
                f"-httpListenAddr=127.0.0.1:{vm_port}",
                "-search.latencyOffset=0s",
                "-search.disableCache",
            ],
        )
        # Prometheus -> vmagent -> VictoriaMetrics: vmagent takes Prometheus' remote write and forwards it.
        procs.start(
            "vmagent",
            [
                vmagent,
                f"-httpListenAddr=127.0.0.1:{vmagent_port}",
                f"-remoteWrite.url=http://127.0.0.1:{vm_port}/api/v1/write",
                f"-remoteWrite.tmpDataPath={tmp / 'vmagent'}",
            ],
        )
        cfg = {
            "global": {
                "scrape_interval": "1s",
                "evaluation_interval": "1s",
                "external_labels": {"engine": "prometheus"},
            },
            "rule_files": [str(rules)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
            # The raw series only: vmalert computes the fleet's own recording rules on VictoriaMetrics.
            "remote_write": [
                {
                    "url": f"http://127.0.0.1:{vmagent_port}/api/v1/write",
                    "write_relabel_configs": [
                        {"source_labels": ["__name__"], "regex": ".*:.*|ALERTS.*", "action": "drop"}
                    ],
                }
            ],
            "scrape_configs": [
                {"job_name": "sidecar", "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}]}
            ],
        }
        (tmp / "prometheus.yml").write_text(json.dumps(cfg))
        procs.start(
            "prometheus",
            [
                prometheus,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
        )
        procs.start(
            "vmalert",
            [
                vmalert,
                f"-rule={rules}",
                f"-datasource.url=http://127.0.0.1:{vm_port}",
                f"-remoteWrite.url=http://127.0.0.1:{vm_port}",
                "-remoteWrite.flushInterval=1s",
                f"-notifier.url=http://127.0.0.1:{am_port}",
                "-evaluationInterval=1s",
                "-external.label=engine=vmalert",
                f"-httpListenAddr=127.0.0.1:{vmalert_port}",
            ],
        )
        stream = _events()
        with httpx.Client(timeout=30) as c:
            for i, p in enumerate(ports):
                share = stream[i::SIDECARS]
                r = c.post(f"http://127.0.0.1:{p}/v1/events", json={"events": share})
                assert r.status_code == 200, r.text
        yield {
            "prom": f"http://127.0.0.1:{prom_port}",
            "vm": f"http://127.0.0.1:{vm_port}",
            "am": f"http://127.0.0.1:{am_port}",
            "ref": ref,
            "stream": stream,
            "tmp": tmp,
            "ref_x": xs,
        }
    finally:
        procs.stop()


def _one_process(f: dict[str, Any]) -> dict[str, tuple[str, int, float, float]]:
    """The union of the stream binned by one process: per feature (ref_id, n, D, PSI)."""
    one = FleetBins(
        FleetConfig(enabled=True, bins=20),
        references=_FileRefs(f["ref"]),
        registry=CollectorRegistry(),
        clock=FakeClock(),
    )
    items = tuple(Event(e["model"], e["version"], 0.0, e["features"]) for e in f["stream"])
    one.observe(Batch(kind="events", source="test", items=items))
    out = {}
    for (_, _, feature), fb, counts, _, _ in one.snapshot():
        n, d, psi = binned_statistics(fb.kind, fb.ref_cdf, counts)
        out[feature] = (fb.ref_id, n, d, psi)
    return out


def _instant(base: str, expr: str) -> dict[str, float]:
    """feature -> value of an instant query (one series per feature)."""
    r = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert r["status"] == "success", r
    res = r["data"]["result"]
    out = {s["metric"]["feature"]: float(s["value"][1]) for s in res}
    assert len(out) == len(res), f"{expr}: more than one series per feature: {res}"
    return out


def _converged(base: str, engine: str, want: dict[str, tuple[str, int, float, float]]) -> dict[str, dict[str, float]]:
    """The fleet figures one engine recorded (Prometheus' own, or vmalert's on VictoriaMetrics), once n is all."""
    sel = f'engine="{engine}"' if engine == "vmalert" else ""
    sep = "," if sel else ""

    def look() -> dict[str, dict[str, float]] | None:
        got = {
            "n_x": _instant(base, f'sidecar:fleet_feature_n:delta{W}{{feature="x"{sep}{sel}}}'),
            "n_c": _instant(base, f'sidecar:fleet_category_n:delta{W}{{feature="c"{sep}{sel}}}'),
            "d": _instant(base, f"sidecar:fleet_feature_ks_d:{W}{{{sel}}}"),
            "psi_x": _instant(base, f"sidecar:fleet_feature_psi:{W}{{{sel}}}"),
            "psi_c": _instant(base, f"sidecar:fleet_category_psi:{W}{{{sel}}}"),
        }
        ok = (
            got["n_x"].get("x") == want["x"][1]
            and got["n_c"].get("c") == want["c"][1]
            and "x" in got["d"]
            and "x" in got["psi_x"]
            and "c" in got["psi_c"]
        )
        return got if ok else None

    return _wait(look, 90, f"{base} to hold the merged n of every event sent")  # type: ignore[no-any-return]


def _check(got: dict[str, dict[str, float]], want: dict[str, tuple[str, int, float, float]]) -> None:
    assert got["n_x"]["x"] == want["x"][1] == sum(1 for i in range(EVENTS) if i % 50)  # missing x not counted
    assert got["n_c"]["c"] == want["c"][1] == EVENTS
    assert abs(got["d"]["x"] - want["x"][2]) <= 1e-9
    assert abs(got["psi_x"]["x"] - want["x"][3]) <= 1e-9
    assert abs(got["psi_c"]["c"] - want["c"][3]) <= 1e-9


def test_prometheus_merges_the_fleet_exactly(fleet: dict[str, Any]) -> None:
    want = _one_process(fleet)
    got = _converged(fleet["prom"], "prometheus", want)
    _check(got, want)
    # Binned D is a lower bound of the exact KS D of the union against the reference sample.
    xs = np.array([e["features"]["x"] for e in fleet["stream"] if e["features"]["x"] is not None])
    exact = sps.ks_2samp(xs, fleet["ref_x"]).statistic
    assert want["x"][2] <= exact + 1e-12 and exact - want["x"][2] <= 1 / 20 + 0.02
    # Every sidecar process made the same reference ids as the file read here: the content hash.
    r = httpx.get(f"{fleet['prom']}/api/v1/query", params={"query": "sidecar_fleet_reference_size"}, timeout=10).json()
    ids = {(s["metric"]["instance"], s["metric"]["feature"], s["metric"]["ref_id"]) for s in r["data"]["result"]}
    assert {(f, i) for _, f, i in ids} == {("x", want["x"][0]), ("c", want["c"][0])} and len(ids) == 2 * SIDECARS
    # Every sidecar contributed, all under the one reference id.
    reps = _instant(fleet["prom"], f"sidecar:fleet_feature_replicas:{W}")
    assert reps == {"x": SIDECARS, "c": SIDECARS} or reps == {"x": SIDECARS}


def test_victoriametrics_and_vmalert_compute_the_same(fleet: dict[str, Any]) -> None:
    want = _one_process(fleet)
    got = _converged(fleet["vm"], "vmalert", want)
    _check(got, want)
    # VictoriaMetrics holds no fleet figure but vmalert's: Prometheus' recorded series were not written to it.
    assert _instant(fleet["vm"], f'sidecar:fleet_feature_n:delta{W}{{engine!="vmalert"}}') == {}


def test_both_engines_notify_alertmanager_of_one_fleet_alert_without_instance(fleet: dict[str, Any]) -> None:
    # x (KS) and c (chi-square) drift; each engine sends its own alert for each.
    expected = {(e, f, t) for e in ("prometheus", "vmalert") for f, t in (("x", "ks"), ("c", "chi2"))}

    def fleet_alerts() -> list[dict[str, Any]] | None:
        alerts = httpx.get(f"{fleet['am']}/api/v2/alerts", timeout=10).json()
        mine = [a for a in alerts if a["labels"].get("alertname") == "FleetFeatureDrifting"]
        seen = {(a["labels"].get("engine"), a["labels"]["feature"], a["labels"].get("test")) for a in mine}
        return mine if seen == expected else None

    alerts = _wait(fleet_alerts, 120, "FleetFeatureDrifting (ks on x, chi2 on c) from both engines in Alertmanager")
    for a in alerts:
        assert a["labels"]["model"] == "ctr"
        assert "instance" not in a["labels"] and "job" not in a["labels"]


def _panel_query(base: str, expr: str) -> dict[str, Any]:
    q = re.sub(r"\$\{?(instance|model|version|feature)\}?", ".*", expr.replace("$__rate_interval", "10s"))
    r: dict[str, Any] = httpx.get(f"{base}/api/v1/query", params={"query": q}, timeout=10).json()
    assert r["status"] == "success", (q, r)
    return r


def test_every_fleet_dashboard_query_runs_on_both_engines_and_shows_the_fleet(fleet: dict[str, Any]) -> None:
    from dashboards.fleet import board

    _converged(fleet["prom"], "prometheus", _one_process(fleet))
    infos = board().infos
    empty = []
    for info in infos:
        results = [_panel_query(fleet["prom"], e)["data"]["result"] for e in info.exprs]
        for e in info.exprs:  # the same text is valid on VictoriaMetrics too
            _panel_query(fleet["vm"], e)
        if not any(results):
            empty.append(info.title)
    # No business check and no unbinned value in this fleet: those three panels are only checked as valid queries.
    assert empty == ["Values not binned", "Business value across replicas", "Replicas where a business condition holds"]

    def stat(title: str) -> float:
        (expr,) = next(i for i in infos if i.title == title).exprs
        (s,) = _panel_query(fleet["prom"], expr)["data"]["result"]
        return float(s["value"][1])

    assert stat("Fleet features over the critical value") == 1  # x drifts; c is categorical (chi-square)
    assert stat("Reference-id mismatches") == 0
    assert stat("Replicas in the verdict") == SIDECARS
    assert stat("Smallest fleet n") == sum(1 for i in range(EVENTS) if i % 50)
    # Each sidecar's share of n, per feature, adds up to 1 over the eight.
    share = next(i for i in infos if i.title == "Per-replica share of fleet n")
    for expr in share.exprs:
        rows = _panel_query(fleet["prom"], expr)["data"]["result"]
        assert len({s["metric"]["instance"] for s in rows}) == SIDECARS
        assert abs(sum(float(s["value"][1]) for s in rows) - 1.0) <= 1e-9
