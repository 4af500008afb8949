"""What the demo will cause, stated up front and checked: every alert, when it fires, whether it recovers.

``EXPECTED`` is what the banner prints. ``replay`` runs the demo's scenario (same seed, same rate, scores from
the demo models' own ``score`` functions, latencies and token times from their own ``delay_secs`` and
``token_times``: ``stand_in``) through the real checks (drift, business, goodput, canary), the actions layer
(dry-run) and the alert book on a fake clock, in seconds instead of twelve minutes;
``tests/demo/test_demo_story.py`` holds ``EXPECTED`` to
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

from sidecar.demo.business_demo import REGRESSION_END_SECS, REGRESSION_START_SECS
from sidecar.demo.drift_demo import SHIFT_AFTER_SECS
from sidecar.demo.goodput_demo import GOODPUT_TTFT_MS
from sidecar.demo.scenario import CANARY_SECS, LLM_MODEL, PROMPT_CHANGE_SECS, SYSTEM_PROMPT_TOKENS

__all__ = [
    "EXPECTED",
    "STAND_IN_OVERHEAD_SECS",
    "DemoAlert",
    "Transition",
    "clock_text",
    "promises",
    "replay",
    "stand_in",
]

# What a request costs the demo's stand-in for Triton (replay and the accelerated test) beyond the model's
# own scripted delay: a few milliseconds, as on a real Triton on loopback.
STAND_IN_OVERHEAD_SECS = 0.002


def clock_text(secs: float) -> str:
    """``+4:40``: a time since the demo started, as every line the demo prints shows it."""
    s = max(0, int(secs))
    return f"+{s // 60}:{s % 60:02d}"


def _mins(secs: float) -> str:
    return f"{secs / 60:g}"


@dataclass(frozen=True)
class DemoAlert:
    """One promise of the banner: an alert, the scenario step it follows, and how soon it fires (and resolves)."""

    check: str  # the check that raises it (drift or a business check's name)
    model: str
    feature: str | None  # drift alerts: the feature; business alerts: None
    alertname: str
    step_secs: float  # the scenario step that causes it (seconds from the start)
    fires_within_secs: float  # the promise: it fires at most this long after that step
    fires_after_secs: float  # when the replay first fires it (seconds from the start)
    why: str
    end_step_secs: float | None = None  # the step that ends its cause; None: the cause lasts to the end
    resolves_within_secs: float | None = None  # the promise: resolved (every version) this long after end_step
    resolves_after_secs: float | None = None  # when the replay resolves it for good
    may_flap: bool = False  # a borderline signal: a version may clear and fire again (said in the banner)
    seen_in: str = "replay"  # where fires_after_secs (and resolves_after_secs) were seen

    def subject(self) -> str:
        """``FeatureDrifting ctr clicks_7d`` (drift alerts fire per version)."""
        return " ".join(p for p in (self.alertname, self.model, self.feature) if p)

    def promise(self) -> str:
        """What the banner says will happen, in one line (the promise table repeats it)."""
        fires = f"fires within ~{_mins(self.fires_within_secs)} min of the {_step_name(self.step_secs)}"
        if self.end_step_secs is not None and self.resolves_within_secs is not None:
            end = f"resolves within ~{_mins(self.resolves_within_secs)} min of the {_step_name(self.end_step_secs)}"
        elif self.may_flap:
            end = "then mostly firing, but a version may clear and fire again"
        else:
            end = "stays firing"
        return f"{self.subject()}: {fires}, {end}"

    def describe(self) -> str:
        """The banner's line: the promise, the replay's times, and why."""
        replay = f"{self.seen_in}: fires {clock_text(self.fires_after_secs)}"
        if self.resolves_after_secs is not None:
            replay += f", resolves {clock_text(self.resolves_after_secs)}"
        return f"{self.promise()} ({replay}); {self.why}"


def _step_name(at_secs: float) -> str:
    return f"{clock_text(at_secs)} step"


_SHIFT = SHIFT_AFTER_SECS
_INCOME_ON, _INCOME_OFF = REGRESSION_START_SECS, REGRESSION_END_SECS

# Times are the replay's (tests/demo/test_demo_story.py holds the promises to it); the promised windows leave
# room for the live demo's real time (block alignment, a scrape and an evaluation interval, the watcher's poll).
EXPECTED: tuple[DemoAlert, ...] = (
    DemoAlert(
        "drift", "ctr", "clicks_7d", "FeatureDrifting", _SHIFT, 240, 280,
        "the input itself shifts by 1 sd at +3 min and stays shifted",
    ),
    DemoAlert(
        "drift", "ctr", "_score", "FeatureDrifting", _SHIFT, 300, 340,
        "a borderline signal, so flapping between versions is expected, not a fault: clicks_7d lifts the "
        "score only slightly, and from +6 to +9 min the income shift pulls it back the other way, so a "
        "one-minute block can look like the reference on one version and not the other",
        may_flap=True,
    ),
    DemoAlert(
        "ctr_mean_down", "ctr", None, "CtrMeanDown", _INCOME_ON, 150, 415,
        "the income shift (after the posted pipeline change) lowers predicted CTR by more than 15%",
        end_step_secs=_INCOME_OFF, resolves_within_secs=150, resolves_after_secs=555,
    ),
    DemoAlert(
        "drift", "ctr", "income", "FeatureDrifting", _INCOME_ON, 240, 460,
        "income shifts by 1.5 sd from +6 to +9 min, then returns",
        end_step_secs=_INCOME_OFF, resolves_within_secs=210, resolves_after_secs=700,
    ),
    DemoAlert(
        "goodput_burn", LLM_MODEL, None, "GoodputBurn", PROMPT_CHANGE_SECS, 150, 375,
        f"after the recorded prompt-template change every prompt is {SYSTEM_PROMPT_TOKENS} tokens longer, so time "
        f"to first token goes from ~140 to ~540 ms, past the {GOODPUT_TTFT_MS:g} ms SLO; the change is in the "
        "alert's annotation",
    ),
    DemoAlert(
        "token_length_drift", LLM_MODEL, None, "TokenLengthDrift", PROMPT_CHANGE_SECS, 180, 400,
        f"the same {SYSTEM_PROMPT_TOKENS} more prompt tokens move chat's prompt lengths (tokens_in of its events) "
        "out of the buckets of its first two minutes",
    ),
    DemoAlert(
        "canary", "fraud", None, "CanaryVersionWorse", CANARY_SECS, 240, 590,
        "fraud v2 is slower at P99 (about 7% of its requests take 300 ms more, against 1% at 250 ms on v1)",
    ),
    DemoAlert(
        "actions", "fraud", None, "ActionPlanned", CANARY_SECS, 270, 595,
        "the worse canary verdict triggers the configured revert of fraud to v1; dry-run (the default) shows "
        "the plan on / and prints it here, and sends nothing (sidecar demo --act carries it out)",
    ),
)  # fmt: skip


_REAL_ACT = "a real --act run"  # these are not replayed (the replay has no Triton to act on): docs/demo.md
_ACT_WHY = (
    "the worse canary verdict triggers the configured revert of fraud to v1, and --act carries it out: Triton "
    "(explicit model-control mode) loads fraud with only v1, so requests still addressed to v2 fail from then on"
)

# What --act adds or changes: the revert is done, not planned; the verdict still stands on v2's last values at the
# next evaluation and the revert's hold stops a second one, which the actions layer says once (ActionHeld, info:
# the guard rail working, not a failure). The probe leaves v2, which the revert unloaded, alone while the hold
# lasts (``fraud v2 not probed: reverted by action <id>, held`` on /): no ModelProbeFailing is promised.
_ACT: tuple[DemoAlert, ...] = (
    DemoAlert("actions", "fraud", None, "ActionTaken", CANARY_SECS, 270, 556, _ACT_WHY, seen_in=_REAL_ACT),
    DemoAlert(
        "actions", "fraud", None, "ActionHeld", CANARY_SECS, 270, 560,
        "the next evaluation still finds fraud v2 worse (its last values are in the window) and the revert's hold "
        "stops a second revert until an operator clears it (POST /admin/actions/clear): said once, not a failure",
        seen_in=_REAL_ACT,
    ),
)  # fmt: skip


def promises(act: bool = False) -> tuple[DemoAlert, ...]:
    """What the banner promises: ``EXPECTED`` (held to the replay), or with ``--act`` the same with the revert
    done instead of planned, and what doing it causes (``_ACT``, seen in a real run, not replayed)."""
    if not act:
        return EXPECTED
    return tuple(a for a in EXPECTED if a.alertname != "ActionPlanned") + _ACT


@dataclass(frozen=True)
class Transition:
    at_secs: float
    check: str
    model: str
    version: str
    feature: str | None
    state: str  # pending | firing | inactive


def stand_in() -> tuple[dict[tuple[str, str], ModuleType], ModuleType]:
    """The demo models as modules (``score``, ``delay_secs``, ``token_times``), for what stands in for Triton:
    the classic models by (model, version), and the streaming one."""
    from sidecar.demo.tritonserver import demo_model_file

    pairs = (("ctr", "1"), ("ctr", "2"), ("fraud", "1"), ("fraud", "2"))
    return {(m, v): _load_model(demo_model_file(m, v)) for m, v in pairs}, _load_model(demo_model_file("chat", "1"))


def _load_model(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"demo_model_{path.parent.parent.name}_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay(
    seconds: int = 720, rate_per_s: int = 20, seed: int = 7, clock_start: float = 1_700_000_000.0
) -> list[Transition]:
    """The demo's alert transitions, replayed on a fake clock through the real checks and alert book."""
    import numpy as np

    from sidecar.clock import FakeClock
    from sidecar.component import Batch
    from sidecar.config import parse_config
    from sidecar.demo.config import demo_config
    from sidecar.demo.scenario import DemoScenario
    from sidecar.demo.streams import stream_fields
    from sidecar.model import Event
    from sidecar.service import Service
    from sidecar.store import Store

    models, chat = stand_in()
    with tempfile.TemporaryDirectory(prefix="sidecar-demo-replay-") as tmp:
        wd = Path(tmp)
        raw: dict[str, Any] = demo_config("http://127.0.0.1:1", "http://127.0.0.1:1/metrics", 0, wd, None)
        raw["triton"]["enabled"] = False
        raw["traces"]["enabled"] = False
        raw["gpu"] = {"enabled": False}
        raw["probes"]["enabled"] = False
        clock = FakeClock(clock_start)
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
                llm = scenario.llm_request(t)
                events = []
                for i in range(rate_per_s):
                    req = scenario.request(t + i / rate_per_s)
                    x = np.array([req.inputs], dtype=np.float32)
                    if req.model == "fraud" and x[0, 0] < 0:
                        continue  # the fraud model fails it: no score, no event
                    model = models[(req.model, req.version)]
                    score = float(model.score(x).reshape(-1)[0])
                    delay = getattr(model, "delay_secs", lambda _x: 0.0)(x) + STAND_IN_OVERHEAD_SECS
                    events.append(
                        Event(
                            model=req.model,
                            version=req.version,
                            timestamp=clock.now(),
                            features=req.features,
                            score=score,
                            fields={"latency_ms": round(delay * 1000.0, 3)},
                        )
                    )
                stamps = [STAND_IN_OVERHEAD_SECS + s for s in chat.token_times(llm.prompt_tokens, llm.max_tokens)]
                fields = stream_fields(llm.prompt_tokens, 0.0, stamps, stamps[-1] + STAND_IN_OVERHEAD_SECS)
                events.append(Event(model=llm.model, version=llm.version, timestamp=clock.now(), fields=fields))
                svc.bus.publish(Batch(kind="events", source="replay", items=tuple(events), received_at=clock.now()))
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
