"""Detection quality of the token-length drift check on simulated vLLM token histograms (not a test; run from the
repository root: ``.venv/bin/python tests/checks/tokens/tokens_quality.py``). Figures quoted in docs/drift.md.

Prompts lognormal (median 300 tokens, sigma 0.6), generations lognormal (median 150), 600 requests per 5-minute
window read in three scrapes, vLLM's 1-2-5 buckets up to 2000 (max_model_len 4096), the defaults otherwise
(pinned reference of 2000 requests, checks.drift's budget of 1/30 false alarms per day).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_tokens import FakeServer, _by, _check, _run


def _looks(reg: CollectorRegistry, result: str) -> float:
    return sum(
        reg.get_sample_value(
            "sidecar_token_drift_looks_total",
            {"server": "vllm", "model": "chat", "version": "", "tokens": d, "result": result},
        )
        or 0
        for d in ("input", "output")
    )


def main() -> None:
    t0 = time.process_time()
    for floor in (0.1, 0.0):
        alarms = drifted = looks = 0.0
        level = 0.0
        for seed in range(20):
            srv = FakeServer(seed=100 + seed)
            chk, reg = _check(srv, psi_effect_floor=floor)
            level = chk.level
            res = _run(chk, srv, windows=288, start=0)
            for i, found in enumerate(res):
                starts = [f for f in found if f.active and i and not _by(res[i - 1], f.labels["tokens"]).active]
                alarms += len(starts)
            drifted += _looks(reg, "drifted")
            looks += _looks(reg, "drifted") + _looks(reg, "quiet")
        print(
            f"no shift, psi_effect_floor {floor}: 20 series x 288 windows (one day each): {alarms:.0f} findings, "
            f"{drifted:.0f} drifted of {looks:.0f} tested direction-windows (per-window level {level:.4f})"
        )
    for scale in (1.3, 1.15):
        det = []
        for seed in range(20):
            srv = FakeServer(seed=200 + seed)
            chk, _ = _check(srv)
            _run(chk, srv, windows=8, start=0)
            active = [_by(found, "input").active for found in _run(chk, srv, windows=6, start=8, prompt_scale=scale)]
            det.append(active.index(True) + 1 if True in active else None)
        print(f"prompts x{scale}: windows until the finding is active, 20 seeds: {det}")
    print(f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
