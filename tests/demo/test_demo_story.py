"""The demo's banner promises exactly the alerts its scenario causes, at about the times it says."""

from __future__ import annotations

import pytest

from sidecar.demo.promises import judge
from sidecar.demo.story import EXPECTED, Transition, promises, replay
from sidecar.demo.watch import AlertWatcher

TOLERANCE_SECS = 90  # the replay's times printed in the banner: held to the replay this closely
DEMO_SECS = 720  # the demo's twelve minutes, replayed


@pytest.fixture(scope="module")
def transitions() -> list[Transition]:
    return replay(seconds=DEMO_SECS)


def _key(t: Transition) -> tuple[str, str, str | None]:
    return t.check, t.model, t.feature


def test_every_alert_the_scenario_causes_is_announced_and_nothing_else(transitions: list[Transition]) -> None:
    fired = {_key(t) for t in transitions if t.state == "firing"}
    announced = {(a.check, a.model, a.feature) for a in EXPECTED}
    assert fired == announced


def test_each_alert_fires_and_recovers_when_the_banner_says(transitions: list[Transition]) -> None:
    for a in EXPECTED:
        mine = [t for t in transitions if _key(t) == (a.check, a.model, a.feature)]
        first = min(t.at_secs for t in mine if t.state == "firing")
        assert abs(first - a.fires_after_secs) <= TOLERANCE_SECS, (a, first)
        assert a.step_secs < first <= a.step_secs + a.fires_within_secs, (a, first)
        last_state = {t.version: t.state for t in mine}  # per version, the last transition wins
        if a.end_step_secs is None:
            if not a.may_flap:  # "stays firing": no version ever clears
                assert all(t.state != "inactive" for t in mine), (a, mine)
            assert "firing" in last_state.values(), (a, mine)
        else:
            assert a.resolves_within_secs is not None and a.resolves_after_secs is not None
            assert set(last_state.values()) == {"inactive"}, (a, mine)
            resolved = max(t.at_secs for t in mine if t.state == "inactive")
            assert abs(resolved - a.resolves_after_secs) <= TOLERANCE_SECS, (a, resolved)
            assert a.end_step_secs < resolved <= a.end_step_secs + a.resolves_within_secs


def test_a_flapping_alert_is_said_to_flap_in_the_banner(transitions: list[Transition]) -> None:
    for a in EXPECTED:
        cleared_then_fired = any(
            t.state == "inactive"
            and any(u.state == "firing" and u.version == t.version and u.at_secs > t.at_secs for u in transitions
                    if _key(u) == _key(t))
            for t in transitions
            if _key(t) == (a.check, a.model, a.feature)
        )  # fmt: skip
        if cleared_then_fired:
            assert a.may_flap and "flapping" in a.describe(), a


def test_with_act_the_banner_promises_the_revert_done_and_what_doing_it_causes() -> None:
    dry, act = promises(False), promises(True)
    assert dry == EXPECTED
    names = [a.alertname for a in act]
    assert "ActionPlanned" not in names and {"ActionTaken", "ActionHeld"} <= set(names)
    assert "ModelProbeFailing" not in names  # the reverted v2 is not probed while the revert holds
    assert [a for a in act if a.seen_in == "replay"] == [a for a in EXPECTED if a.alertname != "ActionPlanned"]
    assert all("(a real --act run: fires +9:" in a.describe() for a in act if a.seen_in != "replay")


def test_an_action_promise_is_judged_by_its_own_alert_name_only() -> None:
    [planned] = [a for a in EXPECTED if a.alertname == "ActionPlanned"]
    w = AlertWatcher("http://s", None, out=lambda _ln: None, clock=lambda: 600.0)
    taken = {"alertname": "ActionTaken", "check": "actions", "model": "fraud", "action": "revert", "action_id": "a"}
    w.observe([{"labels": taken, "state": "firing"}], None)
    assert judge(planned, w, 780.0).verdict == "broken"  # an ActionTaken does not keep a promise of a plan
    [done] = [a for a in promises(True) if a.alertname == "ActionTaken"]
    assert judge(done, w, 780.0).verdict == "kept"
