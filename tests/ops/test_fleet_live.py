"""Fleet drift on real engines: eight `sidecar run` processes on loopback ports each take a disjoint share of
one event stream; a real Prometheus 2.42 scrapes them and evaluates the generated fleet rules; it remote-writes
through vmagent to a real VictoriaMetrics where vmalert evaluates the same rule file; both notify a real
Alertmanager. The merged n equals the events sent, and D and PSI equal one process binning the union, to 1e-9,
on both engines. The sidecars are forked from one parent that imported the sidecar once
(tests/helpers/sidecar_forks.py): each runs ``sidecar run``'s own main, without paying the imports again.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from module_http import close_module_http, module_http  # noqa: F401 (an autouse fixture)
from prometheus_client import CollectorRegistry
from scipy import stats as sps
from sidecar_forks import ForkedSidecar, SidecarForks
from waiting import wait_until

from sidecar.checks.business.config import BusinessCheckConfig
from sidecar.checks.drift.config import DriftConfig, ReferenceConfig
from sidecar.checks.drift.datafile import load_reference_file
from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import binned_statistics, histogram_quantile
from sidecar.checks.fleet.business import FleetBusiness
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
W = "30m"  # the generated rules' window: every series here is born inside it, so each counts whole
BW = "1h"  # the business checks' window in the generated rules
BUSINESS_BINS = 100
BUSINESS: dict[str, Any] = {  # the two classic checks, absolute, so that they decide without a week of baseline
    "ctr_mean": {"field": "label", "aggregate": "mean", "threshold": 0.05, "model": "ctr"},
    "fraud_p95": {"field": "score", "aggregate": "quantile", "quantile": 0.95, "threshold": 0.9},
}


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


def _events(n: int = EVENTS, seed: int = 28) -> list[dict[str, Any]]:
    """One stream: x shifted by 0.3 sd against the reference, 2% of x missing, countries re-weighted; a click
    label (12%) and a score from the reference's own distribution (the business checks' fields)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = None if i % 50 == 0 else rng.gauss(0.3, 1.0)
        c = rng.choices(CATS, weights=[0.3, 0.3, 0.2, 0.1, 0.1])[0] if i % 97 else "xx"
        label, score = float(rng.random() < 0.12), rng.random()
        out.append({"model": "ctr", "version": "2", "features": {"x": x, "c": c}, "label": label, "score": score})
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
            "fleet": {"enabled": True, "bins": 20, "business_bins": BUSINESS_BINS},
            "business": {"enabled": True, "checks": BUSINESS},
        },
    }


class _FileRefs:
    """The reference file as every sidecar's drift check loads it (the same reader, the same defaults)."""

    def __init__(self, path: Path) -> None:
        kinds: dict[str, FeatureKind] = {"x": "numeric", "c": "categorical", "_score": "numeric"}
        refs = load_reference_file(path, created_at=0.0, max_rows=DriftConfig().max_reference_samples, kinds=kinds)
        self.refs = {("ctr", "*", k): r for k, r in refs.items()}
        self.path = path

    def spec_for(self, model: str) -> ReferenceConfig:
        return ReferenceConfig(mode="file", path=str(self.path))

    def frozen_references(self) -> dict[tuple[str, str, str], Reference]:
        return dict(self.refs)


class _Flusher:
    """Asks VictoriaMetrics to make what it ingested searchable now (``/internal/force_flush``) five times a second.

    VictoriaMetrics 1.79 makes a new sample searchable about 10 s after it arrives (measured: a sample imported into
    an empty store, polled). vmalert's recording rules read each other's results back, five deep for PSI, so that
    delay made every fleet figure on VictoriaMetrics about a minute late; flushed, each step takes about a second.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="vm-force-flush", daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=5) as c:
            while not self.stopping.wait(0.2):
                with contextlib.suppress(httpx.HTTPError):  # not up yet, or stopping: the next tick asks again
                    c.get(f"{self.url}/internal/force_flush")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)


class _Procs:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes] | ForkedSidecar] = []
        self.forks: SidecarForks | None = None

    def start(self, name: str, args: list[str]) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))

    def start_sidecar(self, name: str, config: Path) -> None:
        """``sidecar run --config config``, forked from one parent that imported the sidecar once (each process
        of its own paid about 4 CPU seconds to import and build: 36 s of the eight's start on one core)."""
        if self.forks is None:
            self.forks = SidecarForks(config, self.tmp)
        self.procs.append(self.forks.start(config, self.tmp / f"{name}.log"))

    def stop(self) -> None:
        """Kill every process: their data lives in the module's temporary directory, so nothing needs a graceful
        shutdown (which took about 10 s for these thirteen processes)."""
        for p in reversed(self.procs):
            p.kill()
        for p in self.procs:
            p.wait(10)
        if self.forks is not None:
            self.forks.close()


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
    ss = rng.uniform(size=5000)
    ref.write_text("x,c,_score\n" + "".join(f"{x!r},{c},{s!r}\n" for x, c, s in zip(xs, cs, ss, strict=True)))
    rules = write(tmp / "rules", FleetRulesOptions(interval_secs=1, for_secs=1, mismatch_for_secs=1))
    ports = [free_port() for _ in range(SIDECARS)]
    procs = _Procs(tmp)
    prom_port, vm_port, vmagent_port, vmalert_port, am_port = (free_port() for _ in range(5))
    flusher = _Flusher(f"http://127.0.0.1:{vm_port}")
    try:
        for i, p in enumerate(ports):
            (tmp / f"sidecar{i}.yaml").write_text(json.dumps(_sidecar_cfg(p, tmp, i, ref)))  # JSON is YAML
            procs.start_sidecar(f"sidecar{i}", tmp / f"sidecar{i}.yaml")
        # The engines start while the sidecars import (their first scrapes of a sidecar not yet up just fail).
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
                "-search.latencyOffset=200ms",  # not 0: VictoriaMetrics before 1.88 cannot take 0 (its issue 1390)
                "-search.disableCache",
            ],
        )
        flusher.start()
        # Prometheus -> vmagent -> VictoriaMetrics: vmagent takes Prometheus' remote write and forwards it.
        procs.start(
            "vmagent",
            [
                vmagent,
                f"-httpListenAddr=127.0.0.1:{vmagent_port}",
                f"-remoteWrite.url=http://127.0.0.1:{vm_port}/api/v1/write",
                f"-remoteWrite.tmpDataPath={tmp / 'vmagent'}",
                "-remoteWrite.flushInterval=200ms",  # not 1 s: VictoriaMetrics sees data sooner
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
                    "queue_config": {"batch_send_deadline": "200ms"},  # not 5 s: VictoriaMetrics sees data sooner
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
                "-remoteWrite.flushInterval=200ms",
                f"-notifier.url=http://127.0.0.1:{am_port}",
                "-evaluationInterval=1s",
                # How far back VictoriaMetrics looks for a rule's input (default 5m): a record vmalert stopped
                # writing (a sidecar gone, a reference rolled) would otherwise be read for five minutes.
                "-datasource.queryStep=5s",
                "-external.label=engine=vmalert",
                f"-httpListenAddr=127.0.0.1:{vmalert_port}",
            ],
        )
        for p in ports:
            _wait(
                lambda p=p: module_http().get(f"http://127.0.0.1:{p}/healthz", timeout=2).status_code == 200,
                240,
                "a sidecar",
            )
        stream = _events()
        with httpx.Client(timeout=30) as c:
            for i, p in enumerate(ports):
                share = stream[i::SIDECARS]
                r = c.post(f"http://127.0.0.1:{p}/v1/events", json={"events": share})
                assert r.status_code == 200, r.text
        yield {
            "procs": procs,
            "ports": ports,
            "shares": {i: stream[i::SIDECARS] for i in range(SIDECARS)},
            "prom": f"http://127.0.0.1:{prom_port}",
            "vm": f"http://127.0.0.1:{vm_port}",
            "am": f"http://127.0.0.1:{am_port}",
            "ref": ref,
            "stream": stream,
            "tmp": tmp,
            "ref_x": xs,
        }
    finally:
        flusher.stop()
        procs.stop()


def _items(events: list[dict[str, Any]]) -> tuple[Event, ...]:
    return tuple(Event(e["model"], e["version"], 0.0, e["features"], e["score"], label=e["label"]) for e in events)


def _one_process(
    f: dict[str, Any], events: list[dict[str, Any]] | None = None, ref: Path | None = None
) -> dict[str, tuple[str, int, float, float]]:
    """The union of the stream (or of ``events``) binned by one process: per feature (ref_id, n, D, PSI)."""
    one = FleetBins(
        FleetConfig(enabled=True, bins=20),
        references=_FileRefs(ref or f["ref"]),
        registry=CollectorRegistry(),
        clock=FakeClock(),
    )
    items = _items(f["stream"] if events is None else events)
    one.observe(Batch(kind="events", source="test", items=items))
    out = {}
    for (_, _, feature), fb, counts, _, _ in one.snapshot():
        n, d, psi = binned_statistics(fb.kind, fb.ref_cdf, counts)
        out[feature] = (fb.ref_id, n, d, psi)
    return out


def _instant(base: str, expr: str) -> dict[str, float]:
    """feature -> value of an instant query (one series per feature)."""
    r = module_http().get(f"{base}/api/v1/query", params={"query": expr}, timeout=10).json()
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
        # vmalert's chained records lag each other by a flush or more, so n can be new while D is not yet:
        # wait until every figure is the one process's (a wrong merge never gets there and times out).
        ok = (
            got["n_x"].get("x") == want["x"][1]
            and got["n_c"].get("c") == want["c"][1]
            and abs(got["d"].get("x", math.inf) - want["x"][2]) <= 1e-9
            and abs(got["psi_x"].get("x", math.inf) - want["x"][3]) <= 1e-9
            and abs(got["psi_c"].get("c", math.inf) - want["c"][3]) <= 1e-9
        )
        return got if ok else None

    return _wait(look, 180, f"{base} to hold n, D and PSI of every event sent")  # type: ignore[no-any-return]


def _check(
    got: dict[str, dict[str, float]], want: dict[str, tuple[str, int, float, float]], whole: bool = True
) -> None:
    assert got["n_x"]["x"] == want["x"][1] and got["n_c"]["c"] == want["c"][1]
    if whole:
        assert want["x"][1] == sum(1 for i in range(EVENTS) if i % 50) and want["c"][1] == EVENTS  # missing x left
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
    r = module_http().get(f"{fleet['prom']}/api/v1/query", params={"query": "sidecar_fleet_reference_size"}).json()
    ids = {(s["metric"]["instance"], s["metric"]["feature"], s["metric"]["ref_id"]) for s in r["data"]["result"]}
    assert {(f, i) for _, f, i in ids} == {(k, want[k][0]) for k in ("x", "c", "_score")}
    assert len(ids) == 3 * SIDECARS
    # Every sidecar contributed, all under the one reference id.
    reps = _instant(fleet["prom"], f"sidecar:fleet_feature_replicas:{W}")
    assert reps == {"x": SIDECARS, "_score": SIDECARS}


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
        alerts = module_http().get(f"{fleet['am']}/api/v2/alerts", timeout=10).json()
        mine = [a for a in alerts if a["labels"].get("alertname") == "FleetFeatureDrifting"]
        seen = {(a["labels"].get("engine"), a["labels"]["feature"], a["labels"].get("test")) for a in mine}
        return mine if seen == expected else None

    alerts = _wait(fleet_alerts, 120, "FleetFeatureDrifting (ks on x, chi2 on c) from both engines in Alertmanager")
    for a in alerts:
        assert a["labels"]["model"] == "ctr"
        assert "instance" not in a["labels"] and "job" not in a["labels"]


def _panel_query(base: str, expr: str) -> dict[str, Any]:
    q = re.sub(r"\$\{?(instance|model|version|feature)\}?", ".*", expr.replace("$__rate_interval", "10s"))
    r: dict[str, Any] = module_http().get(f"{base}/api/v1/query", params={"query": q}, timeout=10).json()
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
    # No unbinned value in this fleet: that panel is only checked as a valid query.
    assert empty == ["Values not binned"]

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
        for feature in {s["metric"]["feature"] for s in rows}:
            total = sum(float(s["value"][1]) for s in rows if s["metric"]["feature"] == feature)
            assert abs(total - 1.0) <= 1e-9, feature


def _one_business(f: dict[str, Any], events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The business counters of one process over the union: CTR mean, and the fraud score's merged bins and p95."""
    one = FleetBusiness(
        FleetConfig(enabled=True, business_bins=BUSINESS_BINS),
        checks={k: BusinessCheckConfig(**v) for k, v in BUSINESS.items()},
        references=_FileRefs(f["ref"]),
        registry=CollectorRegistry(),
        clock=FakeClock(),
    )
    one.observe(Batch(kind="events", source="test", items=_items(f["stream"] if events is None else events)))
    got = {k[0]: s for k, s in one.snapshot()}
    ctr, fraud = got["ctr_mean"], got["fraud_p95"]
    assert fraud.bins is not None and fraud.counts is not None
    cum = [float(c) for c in np.cumsum(fraud.counts)]
    return {
        "n": {"ctr_mean": ctr.events, "fraud_p95": int(cum[-1])},
        "mean": ctr.total / ctr.events,
        "cum": dict(zip(fraud.bins.labels, cum, strict=True)),
        "p95": histogram_quantile(0.95, [float(le) for le in fraud.bins.labels], cum),
        "ref_id": fraud.bins.ref_id,
    }


def _series(base: str, expr: str, key: str) -> dict[str, tuple[dict[str, str], float]]:
    """label ``key`` -> (labels, value) of an instant query, one series per value of ``key``."""
    r = module_http().get(f"{base}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert r["status"] == "success", r
    res = r["data"]["result"]
    out = {s["metric"][key]: (s["metric"], float(s["value"][1])) for s in res}
    assert len(out) == len(res), f"{expr}: more than one series per {key}: {res}"
    return out


@pytest.mark.parametrize("engine", ["prometheus", "vmalert"])
def test_both_engines_merge_the_business_checks_as_one_process_over_the_union(
    fleet: dict[str, Any], engine: str
) -> None:
    want = _one_business(fleet)
    base, sel = (fleet["prom"], "") if engine == "prometheus" else (fleet["vm"], 'engine="vmalert"')

    def look() -> dict[str, Any] | None:
        n = {k: v for k, (_, v) in _series(base, f"sidecar:fleet_business_n:delta{BW}{{{sel}}}", "check").items()}
        values = _series(base, f"sidecar:fleet_business_value:{BW}{{{sel}}}", "check")
        now = {k: v for k, (_, v) in values.items()}
        ok = abs(now.get("ctr_mean", math.inf) - want["mean"]) <= 1e-9
        return n if n == want["n"] and ok and abs(now.get("fraud_p95", math.inf) - want["p95"]) <= 1e-9 else None

    _wait(look, 180, f"{engine}: the merged business counts of every event sent")
    values = _series(base, f"sidecar:fleet_business_value:{BW}{{{sel}}}", "check")
    assert abs(values["ctr_mean"][1] - want["mean"]) <= 1e-9 and abs(want["mean"] - 0.12) < 0.02
    labels, p95 = values["fraud_p95"]
    assert labels["ref_id"] == want["ref_id"] and abs(p95 - want["p95"]) <= 1e-9
    sep = ", " if sel else ""
    buckets = _series(base, f'sidecar:fleet_business_bucket:delta{BW}{{check="fraud_p95"{sep}{sel}}}', "le")
    assert {le: v for le, (_, v) in buckets.items()} == want["cum"]  # every bin exactly
    reps = _series(base, f"sidecar:fleet_business_replicas:{BW}{{{sel}}}", "check")
    assert {k: v for k, (_, v) in reps.items()} == {"ctr_mean": SIDECARS, "fraud_p95": SIDECARS}


def test_both_engines_notify_one_fleet_business_alert_per_check_without_instance(fleet: dict[str, Any]) -> None:
    expected = {(e, c) for e in ("prometheus", "vmalert") for c in BUSINESS}

    def alerts() -> list[dict[str, Any]] | None:
        got = module_http().get(f"{fleet['am']}/api/v2/alerts", timeout=10).json()
        mine = [a for a in got if a["labels"].get("alertname") == "FleetBusinessCheckBreached"]
        return mine if {(a["labels"].get("engine"), a["labels"]["check"]) for a in mine} == expected else None

    for a in _wait(alerts, 120, "FleetBusinessCheckBreached for ctr_mean and fraud_p95 from both engines"):
        assert "instance" not in a["labels"] and "job" not in a["labels"] and a["labels"]["model"] == "ctr"


# Bad input on the same engines: these run in this order, after the tests above, each on what the last left.


def _firing(base: str, alertname: str) -> set[str]:
    q = f'ALERTS{{alertname="{alertname}", alertstate="firing"}}'
    r = module_http().get(f"{base}/api/v1/query", params={"query": q}, timeout=10).json()
    return {s["metric"]["feature"] for s in r["data"]["result"]}


def _both_engines_equal(f: dict[str, Any], want: dict[str, tuple[str, int, float, float]], replicas: int) -> None:
    for base, engine in ((f["prom"], "prometheus"), (f["vm"], "vmalert")):
        _check(_converged(base, engine, want), want, whole=False)
    assert _instant(f["prom"], f'sidecar:fleet_feature_replicas:{W}{{feature="x"}}') == {"x": replicas}


def test_a_sidecar_that_stops_reporting_leaves_the_sums_and_the_verdict_stays_true(fleet: dict[str, Any]) -> None:
    last = fleet["procs"].procs[SIDECARS - 1]  # the sidecars were started first, in order
    last.terminate()
    last.wait(15)
    alive = [e for i in range(SIDECARS - 1) for e in fleet["shares"][i]]
    want = _one_process(fleet, alive)
    # Its series go stale at the first failed scrape: n falls by its share, D and PSI are those of the rest.
    _both_engines_equal(fleet, want, SIDECARS - 1)
    assert _firing(fleet["prom"], "FleetFeatureDrifting") == {"x", "c"}  # still the drifting ones, no other


def test_a_restarted_sidecar_is_left_out_of_the_window_that_holds_its_reset(fleet: dict[str, Any]) -> None:
    i, port = SIDECARS - 2, fleet["ports"][SIDECARS - 2]
    proc = fleet["procs"].procs[i]
    proc.terminate()
    proc.wait(15)
    fleet["procs"].start_sidecar(f"sidecar{i}-again", fleet["tmp"] / f"sidecar{i}.yaml")
    url = f"http://127.0.0.1:{port}"
    _wait(lambda: module_http().get(f"{url}/healthz", timeout=2).status_code == 200, 90, "the restarted sidecar")
    r = module_http().post(f"{url}/v1/events", json={"events": _events(200, seed=7)}, timeout=30)
    assert r.status_code == 200, r.text
    # Its counters start again from 0 (a reset inside the window): half a sidecar is never mixed in.
    want = _one_process(fleet, [e for k in range(SIDECARS - 2) for e in fleet["shares"][k]])
    _both_engines_equal(fleet, want, SIDECARS - 2)


def test_a_reference_rollout_flags_the_mismatch_and_never_merges_bins_of_two_edges(fleet: dict[str, Any]) -> None:
    rng = np.random.default_rng(6)
    new_ref = fleet["tmp"] / "reference-v2.csv"  # the shift accepted: the new reference is the shifted x
    xs, cs, ss = rng.normal(0.3, 1.0, size=5000), rng.choice(CATS, size=5000), rng.uniform(size=5000)
    new_ref.write_text("x,c,_score\n" + "".join(f"{x!r},{c},{s!r}\n" for x, c, s in zip(xs, cs, ss, strict=True)))
    rolled = (0, 1, 2)
    fresh = _events(300, seed=11)
    old_id = _one_process(fleet)["x"][0]
    for i in rolled:  # the rollout reaches three sidecars of the six still counted
        url = f"http://127.0.0.1:{fleet['ports'][i]}"
        r = module_http().put(
            f"{url}/admin/drift/references/ctr", json={"mode": "file", "path": str(new_ref)}, timeout=30
        )
        assert r.status_code == 200, r.text
        _wait(lambda url=url: old_id not in module_http().get(f"{url}/metrics", timeout=5).text, 30, "the new bins")
        r = module_http().post(f"{url}/v1/events", json={"events": fresh[i::3]}, timeout=30)
        assert r.status_code == 200, r.text
    want_new = _one_process(fleet, fresh, ref=new_ref)
    want_old = _one_process(fleet, [e for k in range(3, SIDECARS - 2) for e in fleet["shares"][k]])
    assert want_new["x"][0] != old_id == want_old["x"][0]
    for base, sel in ((fleet["prom"], ""), (fleet["vm"], ', engine="vmalert"')):

        def split(base: str = base, sel: str = sel) -> bool:
            """One n per reference id, and each id's D and PSI its own sidecars' against its own edges."""
            got = {
                what: {k: v for k, (_, v) in _series(base, f'{rec}{{feature="x"{sel}}}', "ref_id").items()}
                for what, rec in (
                    ("n", f"sidecar:fleet_feature_n:delta{W}"),
                    ("d", f"sidecar:fleet_feature_ks_d:{W}"),
                    ("psi", f"sidecar:fleet_feature_psi:{W}"),
                )
            }
            if got["n"] != {old_id: want_old["x"][1], want_new["x"][0]: want_new["x"][1]}:
                return False
            return all(
                abs(got["d"].get(rid, math.inf) - wd) <= 1e-9 and abs(got["psi"].get(rid, math.inf) - wp) <= 1e-9
                for rid, _, wd, wp in (want_old["x"], want_new["x"])
            )

        _wait(split, 180, f"{base}: n, D and PSI per reference id, each of its own sidecars and edges")
    _wait(lambda: "x" in _firing(fleet["prom"], "FleetReferenceMismatch"), 60, "FleetReferenceMismatch on x")
