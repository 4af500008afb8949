"""Under the default (multiscale) method the drift page says how much evidence holds, in blocks, not empty cells,
in the words the alerts use (the renderer's)."""

from __future__ import annotations

from sidecar.alerting.render.drift import blocks_text


def test_multiscale_evidence_is_stated_in_blocks() -> None:
    facts = {"looks_drifting": 2, "looks": 3, "sustained_looks": 2, "scale_secs": 60.0}
    assert blocks_text(facts) == "2 of the last 3 60s blocks (need 2)"


def test_window_findings_have_no_block_evidence() -> None:
    assert blocks_text({"held_secs": 600.0, "sustained_secs": 600.0}) == ""
