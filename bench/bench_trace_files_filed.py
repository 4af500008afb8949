"""CPU per traced request of the trace-file path as it is, against the code as it was when issue 31 was filed, run as
it was: both trees' own source and trace hub reading the same Triton 2.51 trace files, in alternating processes.

    .venv/bin/python bench/bench_trace_files_filed.py [--requests 20000] [--per-file 1000] [--per-poll 6]
        [--repeat 3] [--filed-rev 0db8cbb] [--ours-rev REV] [--max-traces 5000] [--cpu 0]

``bench_trace_files.py`` compares ours with frozen copies of the former reader and hub inside one process; this one
needs no copy: ``git archive`` of ``--filed-rev`` (default 0db8cbb, the commit the issue's 70 us were measured on:
docs/reliability-measured.md) puts that tree's ``sidecar/`` in a temporary folder, and ``bench/trace_read_once.py``
runs once per tree and round with ``PYTHONPATH`` set to it (the same installed libraries). Input: the recorded files
of the demo's ``ctr`` model (tests/data/traces/) replicated with fresh ids to ``--requests`` requests, cut into
files of ``--per-file`` requests' records as Triton's ``log-frequency`` rotates them (a request may straddle two
files); ``--per-poll`` files appear before each poll (6: about a second of Triton's files at 6,000 traced
requests/s, as a live sidecar polling every second sees them; 0: every file before the first poll). The trace store
keeps ``--max-traces`` traces (the config's default 5,000: at 20,000 requests it evicts, as a live sidecar's does).
Each process counts its own CPU time of the polls (reading, publishing, the trace hub's store and stage histograms),
with the collector as that tree's ``sidecar run`` sets it. Prints the median (min) us per traced request of each,
the ratio per round and of the medians, and what the issue's target (70 -> 25 us, a 2.8x cut) comes to against the
filed tree's figure on this host.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from trace_files_before import replicated, templates_of  # noqa: E402

DATA = ROOT / "tests" / "data" / "traces"


def write_files(folder: Path, n_requests: int, per_file: int) -> int:
    """The replicated requests' records cut into ``trace.json.K`` files; returns the number of files."""
    files = [(DATA / "trace-file-triton-mode.json").read_bytes(), (DATA / "trace-file-tensors.json").read_bytes()]
    records = orjson.loads(replicated(templates_of(*files), n_requests))
    step = max(1, len(records) * per_file // n_requests)
    folder.mkdir(parents=True)
    k = 0
    for k, i in enumerate(range(0, len(records), step)):
        (folder / f"trace.json.{k}").write_bytes(orjson.dumps(records[i : i + step]))
    (folder / "last_ns").write_text(str(max(t["ns"] for r in records for t in r.get("timestamps", ()))))
    return k + 1


def tree_of(rev: str, into: Path, name: str) -> Path:
    """``sidecar/`` and ``exporters/`` (the packages) of ``rev`` extracted into ``into/name``."""
    archive = into / f"{name}.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "sidecar", "exporters"], stdout=f, check=True)
    tree = into / name
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def read_once(
    tree: Path, files: Path, work: Path, n: int, per_poll: int, max_traces: int, cpu: str | None
) -> dict[str, float]:
    script = str(ROOT / "bench" / "trace_read_once.py")
    cmd = [sys.executable, script, str(files), str(work), str(n), str(per_poll), str(max_traces)]
    if cpu is not None:
        cmd = ["taskset", "-c", cpu, *cmd]
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def input_args() -> argparse.ArgumentParser:
    """The options that say what is read and how often (shared with bench/profile_trace_files.py)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--per-file", type=int, default=1000)
    ap.add_argument("--per-poll", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    return ap


def main() -> None:
    ap = input_args()
    ap.add_argument("--filed-rev", default="0db8cbb")
    ap.add_argument("--max-traces", type=int, default=5000, help="traces.max_traces (default: the config's)")
    ap.add_argument("--ours-rev", default=None, help="a commit for 'ours' instead of the working tree")
    ap.add_argument("--cpu", default=None, help="pin both processes to this CPU (taskset -c)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        n_files = write_files(t / "files", args.requests, args.per_file)
        ours = tree_of(args.ours_rev, t, "ours") if args.ours_rev else ROOT
        trees = {"as filed": tree_of(args.filed_rev, t, "filed"), "ours": ours}
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"{args.requests} requests in {n_files} files of ~{args.per_file} requests, {args.per_poll or n_files} "
            f"files a poll, max_traces {args.max_traces}; as filed = {args.filed_rev}, "
            f"ours = {args.ours_rev or 'the working tree'}; "
            f"load average {load}"
        )
        got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
        for _ in range(args.repeat):
            for label, tree in trees.items():
                got[label].append(
                    read_once(tree, t / "files", t / "work", args.requests, args.per_poll, args.max_traces, args.cpu)
                )
    spans = {k: {int(r["spans"]) for r in v} for k, v in got.items()}
    if spans["as filed"] != spans["ours"]:
        print(f"spans differ: {spans}")
    us = {k: [r["us_per_request"] for r in v] for k, v in got.items()}
    med = {k: statistics.median(v) for k, v in us.items()}
    print("us of CPU per traced request (reader + trace hub), median (min):")
    for k in trees:
        print(
            f"  {k:9s} {med[k]:7.2f} ({min(us[k]):6.2f})  collector {got[k][0]['gc']}, {got[k][0]['polls']:.0f} polls"
        )
    rounds = [a / b for a, b in zip(us["as filed"], us["ours"], strict=True)]
    print(
        f"as filed / ours: {med['as filed'] / med['ours']:.2f}x (rounds {', '.join(f'{r:.2f}' for r in rounds)}); "
        f"the issue's 70 -> 25 us is a 2.80x cut: {med['as filed'] / 2.8:.1f} us here"
    )


if __name__ == "__main__":
    main()
