"""Which trace-file readers the service builds from ``traces.file`` and ``events.triton_trace``: one per file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store


def _readers(tmp_path: Path, cfg: dict[str, Any]) -> list[tuple[str, str, bool, bool]]:
    c = parse_config({"store": {"path": str(tmp_path / "s.sqlite")}, **cfg})
    svc = Service(c, clock=FakeClock(), registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"))
    return [
        (x.name, Path(x.s.path).name, x.s.spans, x.s.tensors is not None)
        for x in svc.components
        if x.name.startswith("trace_file")
    ]


@pytest.mark.parametrize(
    ("traces", "tensors", "want"),
    [
        (
            {"enabled": True, "file": {"path": "t.json"}},
            {"enabled": True, "path": "t.json"},
            [("trace_file", "t.json", True, True)],
        ),  # the documented setup: one reader, both outputs
        (
            {"enabled": True, "file": {"path": "b.json"}},
            {"enabled": True, "path": "a.json"},
            [("trace_file", "b.json", True, False), ("trace_file_1", "a.json", False, True)],
        ),
        ({"enabled": True, "file": {"path": "b.json"}}, {"enabled": False}, [("trace_file", "b.json", True, False)]),
        (
            {"enabled": False, "file": {"path": "b.json"}},
            {"enabled": True, "path": "b.json"},
            [("trace_file", "b.json", False, True)],
        ),  # the span side off: events only
    ],
)
def test_each_trace_file_gets_exactly_one_reader(
    tmp_path: Path, traces: dict[str, Any], tensors: dict[str, Any], want: list[tuple[str, str, bool, bool]]
) -> None:
    def at(section: dict[str, Any]) -> dict[str, Any]:
        out = dict(section)
        if "path" in out:
            out["path"] = str(tmp_path / out["path"])
        if "file" in out:
            out["file"] = {**out["file"], "path": str(tmp_path / out["file"]["path"])}
        return out

    assert _readers(tmp_path, {"traces": at(traces), "events": {"triton_trace": at(tensors)}}) == want


def test_either_section_asking_for_delete_after_read_is_enough(tmp_path: Path) -> None:
    p = str(tmp_path / "t.json")
    c = parse_config(
        {
            "store": {"path": str(tmp_path / "s.sqlite")},
            "traces": {"enabled": True, "file": {"path": p, "poll_interval_secs": 3}},
            "events": {
                "triton_trace": {"enabled": True, "path": p, "delete_after_read": True, "poll_interval_secs": 0.5}
            },
        }
    )
    svc = Service(c, clock=FakeClock(), registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"))
    src = svc.component("trace_file")
    assert src.s.delete_after_read and src.s.poll_interval_secs == 0.5
