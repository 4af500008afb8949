"""One exception tree: every exception class the sidecar defines descends from ``SidecarError``
(``sidecar/errors.py`` draws the tree), so a caller can catch the sidecar's own failures in one place and
nothing the sidecar raises on purpose is mistaken for a bug."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import exporters
import sidecar
from sidecar import errors
from sidecar.errors import SidecarError


def _modules() -> list[str]:
    names = []
    for pkg in (sidecar, exporters):
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
            if "model_repository" not in info.name:
                names.append(info.name)
    return names


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        try:
            mod = importlib.import_module(name)
        except ImportError as exc:  # an optional extra that is not installed (never the case in CI)
            pytest.skip(f"{name} cannot be imported here: {exc}")
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return found


def test_every_exception_the_sidecar_defines_is_in_the_tree() -> None:
    classes = _exception_classes()
    assert len(classes) >= 15, "the scan found too few exception classes to be looking at the code"
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, SidecarError))
    assert outside == [], "exceptions outside sidecar/errors.py's tree: " + ", ".join(outside)


def test_the_tree_in_the_docstring_names_every_class_in_errors() -> None:
    doc = errors.__doc__ or ""
    defined = [n for n, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)]
    assert sorted(defined) == sorted(errors.__all__)
    missing = [n for n in defined if n not in doc]
    assert missing == [], f"classes the docstring's tree does not draw: {missing}"


def test_every_class_in_errors_is_used_somewhere() -> None:
    """No dead branch: each class of the tree is raised, caught or subclassed outside errors.py."""
    import pathlib

    root = pathlib.Path(sidecar.__file__).parent.parent
    text = "\n".join(
        p.read_text()
        for d in ("sidecar", "exporters")
        for p in (root / d).rglob("*.py")
        if p.name != "errors.py" and "model_repository" not in p.parts
    )
    bases = {b.__name__ for _, c in inspect.getmembers(errors, inspect.isclass) for b in c.__bases__}
    unused = [n for n in errors.__all__ if n != "SidecarError" and n not in text and n not in bases]
    assert unused == [], f"dead exception classes: {unused}"
