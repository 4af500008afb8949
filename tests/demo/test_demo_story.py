"""The demo's banner promises exactly the alerts its scenario causes, at about the times it says."""

from __future__ import annotations

import pytest

from sidecar.demo.story import EXPECTED, Transition, replay

TOLERANCE_SECS = 90  # the live demo runs on real time: a scrape and an evaluation interval either way
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
    # "Resolves" means before the demo ends, not before some other alert's later transition: with the
    # multiscale method the income alert's resolution is the replay's last transition.
    end = DEMO_SECS
    for a in EXPECTED:
        mine = [t for t in transitions if _key(t) == (a.check, a.model, a.feature)]
        first = min(t.at_secs for t in mine if t.state == "firing")
        assert abs(first - a.fires_after_secs) <= TOLERANCE_SECS, (a, first)
        last_state = {t.version: t.state for t in mine}  # per version, the last transition wins
        if a.resolves_after_secs is None:
            assert "firing" in last_state.values(), (a, mine)
        else:
            assert set(last_state.values()) == {"inactive"}, (a, mine)
            resolved = max(t.at_secs for t in mine if t.state == "inactive")
            assert abs(resolved - a.resolves_after_secs) <= TOLERANCE_SECS, (a, resolved)
            assert resolved < end
