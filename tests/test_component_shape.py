"""Every component has one shape: ``X(config, *, collaborators)``, a ``Role``, the lifecycle and its say in
/readyz and routing; the wiring (sidecar/wiring/) does every bus subscription, and only the polled base runs a
``Periodic``. The components checked are the ones the service builds from a config that turns every area on.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest

from sidecar.clock import FakeClock
from sidecar.component import Context, Role
from sidecar.config import parse_config
from sidecar.service import Factory, Service, default_factories
from sidecar.store import Store

ROOT = Path(__file__).resolve().parents[1]
# Modules that may construct ``Periodic`` (the polled base and the loop itself) and call ``.subscribe(``.
MAY_RUN_PERIODIC = {"sidecar/polled.py", "sidecar/periodic.py"}
MAY_SUBSCRIBE = ("sidecar/wiring/", "sidecar/service.py")
_CONTEXT = re.compile(r"\bContext\b")


def _every_area(tmp: Path) -> dict[str, Any]:
    off = "http://127.0.0.1:9"  # nothing is started, so nothing is called
    return {
        "triton": {"enabled": True, "http_url": off, "metrics_url": f"{off}/metrics"},
        "traces": {
            "enabled": True,
            "file": {"path": str(tmp / "spans.json")},
            "forward": {"endpoint": f"{off}/v1/traces"},
            "failure_join": {"metrics_url": f"{off}/metrics"},
        },
        "events": {
            "enabled": True,
            "jsonl": [{"path": str(tmp / "predictions.jsonl")}],
            # A path of its own: two trace-file readers, one per file.
            "triton_trace": {"enabled": True, "path": str(tmp / "tensors.json")},
        },
        "checks": {
            "drift": {"enabled": True},
            "fleet": {"enabled": True},
            "business": {
                "enabled": True,
                "checks": {
                    "ctr_mean": {
                        "model": "ctr",
                        "field": "score",
                        "aggregate": "mean",
                        "window_secs": 60,
                        "baseline_secs": 600,
                        "threshold": 0.1,
                    }
                },
            },
            "canary": {"enabled": True},
            "output_sanity": {"enabled": True},
            "cold_start": {"enabled": True},
            "batching": {"enabled": True},
            "tracing_governor": {"enabled": True},
            "goodput": {"enabled": True},
            "tokens": {"enabled": True},
        },
        "alerting": {
            "enabled": True,
            "alertmanager": {"urls": [off]},
            "audit": {"enabled": True, "requests": {"enabled": True}},
            "changes": {"poll_repository": True},
        },
        "gpu": {"enabled": True, "nvml": {"enabled": True}, "dcgm": {"enabled": True}},
        "diagnose": {"enabled": True},
        "servers": [{"name": "vllm", "url": f"{off}/metrics"}],
        "edge": {"enabled": True, "source": {"http": True, "files": [{"path": str(tmp / "edge.jsonl")}]}},
        "probes": {
            "enabled": True,
            "models": {
                "ctr": {
                    "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0.5]}],
                    "outputs": [{"name": "score"}],
                }
            },
        },
        "actions": {"enabled": True},
        "webhooks": [{"name": "hook", "url": f"{off}/hook", "secret": "0123456789abcdef0123456789abcdef"}],
    }


class Built(NamedTuple):
    service: Service
    per_builder: dict[str, int]  # components each wiring builder returned


@pytest.fixture
def built(tmp_path: Path) -> Iterator[Built]:
    def no_network(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"a component called {request.url} while being built")

    # Each builder's output counted, so a builder that builds nothing here (an area this config leaves off) shows.
    per_builder: dict[str, int] = {}

    def counted(factory: Factory) -> Factory:
        def build(ctx: Context) -> list[Any]:
            out = factory(ctx)
            per_builder[f"{factory.__module__}.{factory.__qualname__}"] = len(out)
            return out

        return build

    store = Store(tmp_path / "state.sqlite")
    http = httpx.AsyncClient(transport=httpx.MockTransport(no_network))
    svc = Service(
        parse_config(_every_area(tmp_path)),
        clock=FakeClock(1_700_000_000.0),
        http=http,
        store=store,
        factories=[counted(f) for f in default_factories()],
    )
    try:
        yield Built(svc, per_builder)
    finally:
        store.close()


def _shape_errors(cls: type) -> list[str]:
    """What is wrong with ``cls.__init__`` against ``X(config, *, collaborators)``."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # without self
    errors = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) > 1:
        errors.append(f"{len(positional)} positional parameters {positional} (at most its config)")
    errors += [f"*{p.name}" for p in params if p.kind is p.VAR_POSITIONAL]
    errors += [f"{p.name} typed Context" for p in params if _CONTEXT.search(str(p.annotation))]
    return errors


def test_every_component_has_a_role_the_lifecycle_and_the_constructor_shape(built: Built) -> None:
    comps = built.service.components
    names = [c.name for c in comps]
    # Every area is on: the check covers all of them (a component missing here would go unchecked).
    assert {
        "drift",
        "business",
        "canary",
        "events_http",
        "events_jsonl_0",
        "changes_http",
        "gpu",
        "gpu_nvml",
        "gpu_dcgm",
        "traces",
        "otlp_receiver",
        "otlp_forward",
        "trace_failure_join",
        "trace_file",
        "trace_file_1",
        "alert_book",
        "alertmanager",
        "audit",
        "status_pages",
        "drift_page",
        "runbooks",
        "triton_metrics",
        "triton_series",
        "server:vllm",
        "diagnose",
        "tracing_governor",
        "triton_model_api",
        "webhook_hook",
        "fleet",
        "edge_series",
        "edge_hit_ratio",
        "edge_tail",
        "edge_purges",
        "edge_http",
        "edge_file_0",
        "probe",
        "actions",
    } <= set(names)
    assert len(names) == len(set(names)), "component names must be unique"
    assert {c.role for c in comps} == set(Role)
    problems: dict[str, list[str]] = {}
    for comp in comps:
        errors = [] if isinstance(comp.role, Role) else [f"role {comp.role!r} is not a Role"]
        errors += [
            f"no {a}" for a in ("start", "shutdown", "readiness", "routes") if not callable(getattr(comp, a, None))
        ]
        errors += [] if isinstance(comp.name, str) and comp.name else ["no name"]
        errors += _shape_errors(type(comp))
        if errors:
            problems[f"{comp.name} ({type(comp).__module__}.{type(comp).__qualname__})"] = errors
    assert not problems, problems


def test_every_builder_builds_something_here(built: Built) -> None:
    """A new area must be turned on in ``_every_area``, or its components would go unchecked."""
    assert len(built.per_builder) == len(default_factories())
    assert [name for name, n in built.per_builder.items() if n == 0] == []


def test_the_shape_check_finds_a_component_built_from_the_context() -> None:
    class Located:
        def __init__(self, ctx: Context, cfg: object) -> None: ...

    class Shaped:
        def __init__(self, cfg: object, *, bus: object, clock: object) -> None: ...

    assert _shape_errors(Located) == [
        "2 positional parameters ['ctx', 'cfg'] (at most its config)",
        "ctx typed Context",
    ]
    assert _shape_errors(Shaped) == []


def test_the_wiring_subscribes_the_drift_check_before_anything_starts(built: Built) -> None:
    assert "drift" in built.service.bus.subscribers("events")


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for pkg in ("sidecar", "exporters"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "model_repository" in path.parts:
                continue
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _calls(tree: ast.Module, name: str) -> list[int]:
    """Lines calling ``name(...)`` or ``x.name(...)``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                out.append(node.lineno)
    return out


def test_only_the_polled_base_runs_a_periodic_loop() -> None:
    found = {
        rel: lines for rel, tree in _modules() if rel not in MAY_RUN_PERIODIC and (lines := _calls(tree, "Periodic"))
    }
    assert not found, f"construct a Polled component or take a ticker factory instead: {found}"


def test_only_the_wiring_subscribes_to_the_bus() -> None:
    found = {
        rel: lines
        for rel, tree in _modules()
        if not rel.startswith(MAY_SUBSCRIBE) and (lines := _calls(tree, "subscribe"))
    }
    assert not found, f"subscriptions belong in sidecar/wiring/: {found}"
