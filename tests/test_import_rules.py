"""The layering holds: data moves one way (sources -> bus -> processors/state/checks -> alerting -> exporters)
and each layer imports only what sits below it. The graph is read from the source (``ast``), so an import
inside a function or under ``TYPE_CHECKING`` counts too; a new forbidden edge fails here, naming the file.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sidecar", "exporters")

# (importer prefix, forbidden prefixes). ``sidecar.wiring`` builds and connects components, so it alone may
# import across layers; the CLI, the service, the app and the demo sit on top of everything.
RULES: list[tuple[str, tuple[str, ...]]] = [
    ("exporters", ("sidecar.checks", "sidecar.sources", "sidecar.alerting", "sidecar.pages", "sidecar.wiring")),
    ("sidecar.checks", ("sidecar.alerting", "sidecar.sources", "exporters", "sidecar.pages", "sidecar.wiring")),
    ("sidecar.sources", ("sidecar.checks", "sidecar.alerting", "exporters", "sidecar.pages", "sidecar.wiring")),
    ("sidecar.alerting", ("exporters", "sidecar.checks", "sidecar.sources", "sidecar.pages", "sidecar.wiring")),
    (
        "sidecar.processors",
        ("sidecar.checks", "sidecar.alerting", "sidecar.sources", "exporters", "sidecar.pages", "sidecar.wiring"),
    ),
    (
        "sidecar.state",
        ("sidecar.checks", "sidecar.alerting", "sidecar.sources", "exporters", "sidecar.pages", "sidecar.wiring"),
    ),
    ("sidecar.pages", ("sidecar.checks", "sidecar.sources", "exporters", "sidecar.wiring")),
    # Actions take findings and act through injected clients: they never read a check's insides (they never
    # decide), nor the sources, pages or exporters.
    ("sidecar.actions", ("sidecar.checks", "sidecar.sources", "exporters", "sidecar.pages", "sidecar.wiring")),
    # Diagnoses probe Triton and produce findings, like a check: the same rules.
    (
        "sidecar.diagnose",
        ("sidecar.alerting", "sidecar.sources", "exporters", "sidecar.pages", "sidecar.wiring", "sidecar.checks"),
    ),
]
# The allowed crossings: config models that nest other layers' sections the way the YAML tree does. The alerting
# config nests the exporters' sections (``exporters/config.py``, which imports only pydantic); the ``traces``
# section nests the configs of the span side's sources and its forwarder, each beside its component.
ALLOWED = {
    ("sidecar.alerting.config", "exporters.config"),
    ("sidecar.state.trace_config", "exporters.config"),
    ("sidecar.state.trace_config", "sidecar.sources.otlp.config"),
    ("sidecar.state.trace_config", "sidecar.sources.trace_files.config"),
    ("sidecar.state.trace_config", "sidecar.sources.triton_failures_config"),
}
# The data types depend on nothing of ours (records may use the model: both are the shared vocabulary).
DATA_TYPES = {
    "sidecar.facts": (),
    "sidecar.model": ("sidecar.facts",),
    "sidecar.records": ("sidecar.model",),
}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            # ``from sidecar import checks`` imports the subpackage itself.
            out.update(f"{target}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "model_repository" in path.parts:
                continue
            mod = _module(path)
            graph[mod] = _imports(path, mod)
    return graph


def _within(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def test_no_layer_imports_what_sits_above_it() -> None:
    bad = []
    for mod, targets in _graph().items():
        for importer, forbidden in RULES:
            if not _within(mod, importer):
                continue
            for t in sorted(targets):
                if any(mod == a and _within(t, b) for a, b in ALLOWED):
                    continue
                if any(_within(t, f) for f in forbidden):
                    bad.append(f"{mod} imports {t}")
    assert not bad, "forbidden import edges:\n" + "\n".join(bad)


def test_the_data_types_depend_on_nothing_of_ours() -> None:
    graph = _graph()
    bad = [
        f"{mod} imports {t}"
        for mod, allowed in DATA_TYPES.items()
        for t in sorted(graph[mod])
        if not any(_within(t, a) for a in allowed)
    ]
    assert not bad, "\n".join(bad)


def test_no_component_looks_another_up_by_name() -> None:
    offenders = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text()
            if "ctx.components" in text or "components.get(" in text:
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, "components looked up by name in: " + ", ".join(offenders)


def test_the_rules_see_real_edges() -> None:
    """Guards the test itself: a parser that found no edges would pass every rule above."""
    graph = _graph()
    assert "sidecar.model" in graph["sidecar.component"]
    assert any(_within(t, "sidecar.checks") for t in graph["sidecar.wiring.drift"])


def test_no_module_is_over_400_lines() -> None:
    # Issue 11: a module that grows past this does more than one thing; split it before it hides the flow.
    root = Path(__file__).resolve().parents[1]
    big = {
        str(p.relative_to(root)): n
        for p in [*root.joinpath("sidecar").rglob("*.py"), *root.joinpath("exporters").rglob("*.py")]
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert big == {}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    mods = set(graph)

    def owner(target: str) -> str | None:
        # ``from pkg import name`` may name a module or an attribute: the nearest module that exists.
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    edges = {m: {o for t in ts if (o := owner(t)) is not None and o != m} for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_there_are_no_import_cycles() -> None:
    """A cycle hidden behind a lazy import is still a cycle: every import counts, wherever it sits (issue 26)."""
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c.x"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
