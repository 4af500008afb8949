"""A bounded coverage-guided fuzz run (atheris) of every parser target in this folder.

Each ``fuzz_<name>.py`` beside this file is a self-contained atheris target: ``TestOneInput(data: bytes)``
feeds the bytes to one parser and fails (raises anything but the parser's documented refusal) on a crash,
hang or wrong kind of error. Here each runs in its own process for a bounded number of executions and time,
so CI always spends the same, small, budget; a failure prints the crashing input, which becomes a regression
test. ``SIDECAR_FUZZ_RUNS`` / ``SIDECAR_FUZZ_SECS`` raise the budget for a longer run by hand.

The run is seeded (``SIDECAR_FUZZ_SEED``, 1 unless set; 0 lets libFuzzer pick one): with a random seed a
shallow bug that one run in twenty finds fails CI once in twenty, on whatever change happens to be landing.
Seeded, a slower machine runs a prefix of the same inputs, so a run that passed here passes in CI; long
random runs by hand (``SIDECAR_FUZZ_SEED=0 SIDECAR_FUZZ_SECS=300``) look for new bugs.
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
SEED = int(os.environ.get("SIDECAR_FUZZ_SEED", "1"))


@pytest.mark.parametrize("target", TARGETS, ids=[p.stem for p in TARGETS])
def test_fuzz_target_survives_a_bounded_run(target: Path, tmp_path: Path) -> None:
    corpus = HERE / "corpus" / target.stem.removeprefix("fuzz_")
    args = [
        sys.executable,
        str(target),
        f"-runs={RUNS}",
        f"-max_total_time={SECS}",
        "-timeout=10",
        f"-seed={SEED}",
        f"-artifact_prefix={tmp_path}/",
    ]
    # libFuzzer writes new inputs into its first corpus folder: give it a copy, so a run leaves the seeds alone.
    work = tmp_path / "corpus"
    if corpus.is_dir():
        shutil.copytree(corpus, work)
    else:
        work.mkdir()
    seeds = [str(work)]
    # Hash randomisation changes set and dict order, so coverage, so the inputs libFuzzer goes on to make.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        args + seeds, capture_output=True, text=True, timeout=SECS + 120, cwd=HERE.parent.parent, env=env
    )
    out = proc.stdout + proc.stderr
    # atheris prints the Python traceback on stdout, libFuzzer its progress on stderr: show the traceback
    # first, since thousands of progress lines would otherwise push it out of the message.
    uncaught = out.find("=== Uncaught Python exception")
    why = out[uncaught : uncaught + 3000] + "\n...\n" if uncaught >= 0 else ""
    assert proc.returncode == 0, f"{target.name} found a failure:\n{why}{out[-1500:]}"
    done = re.findall(r"Done (\d+) runs", out) or re.findall(r"#(\d+)\s+DONE", out)
    assert done and int(done[-1]) > 0, f"{target.name} ran no input:\n{out[-2000:]}"
    print(f"{target.stem}: {done[-1]} executions, no failure")
