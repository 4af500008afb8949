"""A bounded coverage-guided fuzz run (atheris) of every parser target in this folder.

Each ``fuzz_<name>.py`` beside this file is a self-contained atheris target: ``TestOneInput(data: bytes)``
feeds the bytes to one parser and fails (raises anything but the parser's documented refusal) on a crash,
hang or wrong kind of error. Here each runs in its own process for a bounded number of executions and time,
so CI always spends the same, small, budget; a failure prints the crashing input, which becomes a regression
test. ``SIDECAR_FUZZ_RUNS`` / ``SIDECAR_FUZZ_SECS`` raise the budget for a longer run by hand.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TARGETS = sorted(p for p in HERE.glob("fuzz_*.py"))
RUNS = int(os.environ.get("SIDECAR_FUZZ_RUNS", "15000"))
SECS = int(os.environ.get("SIDECAR_FUZZ_SECS", "10"))


@pytest.mark.parametrize("target", TARGETS, ids=[p.stem for p in TARGETS])
def test_fuzz_target_survives_a_bounded_run(target: Path, tmp_path: Path) -> None:
    corpus = HERE / "corpus" / target.stem.removeprefix("fuzz_")
    args = [sys.executable, str(target), f"-runs={RUNS}", f"-max_total_time={SECS}", "-timeout=10",
            f"-artifact_prefix={tmp_path}/"]
    # libFuzzer writes new inputs into its first corpus folder: give it a copy, so a run leaves the seeds alone.
    work = tmp_path / "corpus"
    if corpus.is_dir():
        shutil.copytree(corpus, work)
    else:
        work.mkdir()
    seeds = [str(work)]
    proc = subprocess.run(args + seeds, capture_output=True, text=True, timeout=SECS + 120,
                          cwd=HERE.parent.parent)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{target.name} found a failure:\n{out[-4000:]}"
    done = re.findall(r"Done (\d+) runs", out) or re.findall(r"#(\d+)\s+DONE", out)
    assert done and int(done[-1]) > 0, f"{target.name} ran no input:\n{out[-2000:]}"
    print(f"{target.stem}: {done[-1]} executions, no failure")
