"""What the demo will cause, stated up front and checked: every alert, when it fires, whether it recovers.

``EXPECTED`` is what the banner prints. ``replay`` runs the demo's scenario (same seed, same rate, scores from
the demo models' own ``score`` functions) through the real drift and business checks and the alert book on a
fake clock, in seconds instead of twelve minutes; ``tests/demo/test_demo_story.py`` holds ``EXPECTED`` to
what ``replay`` produces, so the banner cannot promise an alert the demo does not cause or hide one it does.
The live demo runs on real time and a real Triton, so its times differ from the replay's by a scrape or an
evaluation interval.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["EXPECTED", "DemoAlert", "Transition", "replay"]


@dataclass(frozen=True)
class DemoAlert:
    check: str  # the check that raises it (drift or a business check's name)
    model: str
    feature: str | None  # drift alerts: the feature; business alerts: None
    fires_after_secs: float  # about when it first fires
    resolves_after_secs: float | None  # about when it resolves for good; None: still firing when the demo ends
    why: str

    def describe(self) -> str:
        what = f"drift of {self.model} '{self.feature}'" if self.feature else f"{self.check} on {self.model}"
        end = (
            f"resolves ~+{self.resolves_after_secs / 60:.0f} min"
            if self.resolves_after_secs is not None
            else "stays firing"
        )
        return f"{what}: fires ~+{self.fires_after_secs / 60:.1f} min, {end} ({self.why})"


# Times are the replay's (tests/demo/test_demo_story.py holds them to it within a tolerance).
EXPECTED: tuple[DemoAlert, ...] = (
    DemoAlert("drift", "ctr", "clicks_7d", 280, None, "the input itself shifts by 1 sd at +3 min and stays shifted"),
    DemoAlert(
        "drift",
        "ctr",
        "_score",
        340,
        None,
        "the CTR score follows clicks_7d; on version 2 it clears while the income shift pulls scores "
        "back down and drifts again once income recovers",
    ),
    DemoAlert(
        "ctr_mean_down",
        "ctr",
        None,
        415,
        555,
        "the income shift (after the posted pipeline change) lowers predicted CTR by more than 15%",
    ),
    DemoAlert("drift", "ctr", "income", 460, 700, "income shifts by 1.5 sd from +6 to +9 min, then returns"),
)


@dataclass(frozen=True)
class Transition:
    at_secs: float
    check: str
    model: str
    version: str
    feature: str | None
    state: str  # pending | firing | inactive


def _load_model(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"demo_model_{path.parent.parent.name}_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay(seconds: int = 720, rate_per_s: int = 20, seed: int = 7) -> list[Transition]:
    """The demo's alert transitions, replayed on a fake clock through the real checks and alert book."""
    import numpy as np

    from sidecar.clock import FakeClock
    from sidecar.component import Batch
    from sidecar.config import parse_config
    from sidecar.demo.run import demo_config
    from sidecar.demo.scenario import DemoScenario
    from sidecar.demo.tritonserver import demo_model_repository
    from sidecar.model import Event
    from sidecar.service import Service
    from sidecar.store import Store

    repo = demo_model_repository()
    models = {(m, v): _load_model(repo / m / v / "model.py") for m, v in (("ctr", "1"), ("ctr", "2"), ("fraud", "1"))}
    with tempfile.TemporaryDirectory(prefix="sidecar-demo-replay-") as tmp:
        wd = Path(tmp)
        raw: dict[str, Any] = demo_config("http://127.0.0.1:1", "http://127.0.0.1:1/metrics", 0, wd, None)
        raw["triton"]["enabled"] = False
        raw["traces"]["enabled"] = False
        raw["gpu"] = {"enabled": False}
        clock = FakeClock()
        store = Store(wd / "replay.sqlite")
        svc = Service(parse_config(raw), clock=clock, store=store)
        try:
            for check in svc.checks():  # the checks subscribe to events when started; nothing else is needed
                asyncio.run(check.start())  # type: ignore[attr-defined]
            book = svc.component("alert_book")
            scenario = DemoScenario(seed=seed)
            interval = int(svc.config.checks.eval_interval_secs)
            t0 = clock.now()
            seen: dict[tuple[str, str, str, str | None], str] = {}
            out: list[Transition] = []
            for sec in range(seconds):
                t = clock.now() - t0
                events = []
                for i in range(rate_per_s):
                    req = scenario.request(t + i / rate_per_s)
                    x = np.array([req.inputs], dtype=np.float32)
                    if req.model == "fraud" and x[0, 0] < 0:
                        continue  # the fraud model fails it: no score, no event
                    score = float(models[(req.model, req.version)].score(x).reshape(-1)[0])
                    events.append(
                        Event(
                            model=req.model,
                            version=req.version,
                            timestamp=clock.now(),
                            features=req.features,
                            score=score,
                        )
                    )
                svc.bus.publish(Batch(kind="events", source="replay", items=tuple(events)))
                if sec % interval == 0:
                    svc.evaluate_once(clock.now())
                    for a in list(book.alerts.values()):
                        lab = a.labels
                        key = (lab.get("check", ""), lab.get("model", ""), lab.get("version", ""), lab.get("feature"))
                        if seen.get(key) != a.state:
                            seen[key] = a.state
                            out.append(Transition(t, *key, a.state))
                clock.advance(1.0)
            return out
        finally:
            store.close()
