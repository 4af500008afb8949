"""The demo's config for its later steps: dry-run actions unless --act, and with --act a Triton the actions can
drive (explicit model-control mode, every demo model loaded); probes on every model a plain request can reach;
the demo's full repository, while the live tests' shared one keeps only ctr v1+v2 and fraud v1."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.cli import build_parser
from sidecar.config import parse_config
from sidecar.demo.config import demo_config
from sidecar.demo.run import demo_triton
from sidecar.demo.tritonserver import DEMO_MODELS, demo_full_repository, demo_model_repository

ARGS = ("http://127.0.0.1:8000", "http://127.0.0.1:8002/metrics", 9500)


def test_actions_only_plan_unless_asked_to_act(tmp_path: Path) -> None:
    dry = parse_config(demo_config(*ARGS, tmp_path))
    act = parse_config(demo_config(*ARGS, tmp_path, act=True))
    assert dry.actions.enabled and dry.actions.dry_run
    assert act.actions.enabled and not act.actions.dry_run
    assert dry.actions.models["fraud"].on_canary_worse == ["revert"]
    assert dry.checks.canary.pairs["fraud"].baseline == "1" and dry.checks.canary.pairs["fraud"].candidate == "2"
    # ctr's versions are two models on purpose: left out of the canary by name, not by a fake version pair.
    assert dry.checks.canary.exclude_models == ["ctr"] and "ctr" not in dry.checks.canary.pairs
    assert build_parser().parse_args(["demo", "--act"]).act and not build_parser().parse_args(["demo"]).act


def _versions(repo: Path) -> set[tuple[str, str]]:
    return {(m.name, v.name) for m in repo.iterdir() if m.is_dir() for v in m.iterdir() if v.name.isdigit()}


def test_the_demo_serves_more_than_the_shared_repository_it_builds_on(tmp_path: Path) -> None:
    full = demo_full_repository(tmp_path / "repo")
    assert _versions(demo_model_repository()) == {("ctr", "1"), ("ctr", "2"), ("fraud", "1")}  # the live tests'
    assert _versions(full) == {("ctr", "1"), ("ctr", "2"), ("fraud", "1"), ("fraud", "2"), ("chat", "1")}
    assert {p.name for p in full.iterdir()} == set(DEMO_MODELS)
    assert not list(full.rglob("__pycache__"))
    assert demo_full_repository(tmp_path / "repo") == full  # written again over the old copy


def test_every_model_but_the_streaming_one_is_probed(tmp_path: Path) -> None:
    cfg = parse_config(demo_config(*ARGS, tmp_path))
    assert cfg.probes.enabled
    probed = {(m, v) for m, c in cfg.probes.models.items() for v in c.versions}
    served = _versions(demo_full_repository(tmp_path / "repo"))
    assert probed == served - {("chat", "1")}  # decoupled: the probe's one plain request cannot reach it
    assert cfg.checks.goodput.enabled and set(cfg.checks.goodput.slos) == {"chat"}
    assert cfg.checks.tokens.enabled and cfg.checks.tokens.events


@pytest.mark.parametrize("act", [False, True])
def test_with_act_triton_runs_in_explicit_mode_with_every_model_loaded(tmp_path: Path, act: bool) -> None:
    pytest.importorskip("pytriton")
    cmd = demo_triton(tmp_path, 9500, act).command()
    explicit = [a for a in cmd if a.startswith("--model-control-mode") or a.startswith("--load-model")]
    expected = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in DEMO_MODELS)]
    assert explicit == (expected if act else [])
