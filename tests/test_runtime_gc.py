"""``runtime.gc_threshold``: the one place the process's garbage collector is set (``tune_gc``), and bad values
refused at load naming the field."""

from __future__ import annotations

import gc

import pytest

from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.runtime import RuntimeConfig, tune_gc


def test_tune_gc_freezes_start_up_and_sets_the_configured_thresholds():
    before = gc.get_threshold()
    try:
        tune_gc(parse_config({"runtime": {"gc_threshold": [20_000, 15, 50]}}).runtime)
        assert gc.get_threshold() == (20_000, 15, 50)
        assert gc.get_freeze_count() > 0
        tune_gc()
        assert gc.get_threshold() == RuntimeConfig().gc_threshold == (50_000, 20, 100)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


@pytest.mark.parametrize("bad", [[0, 10, 10], [99, 10, 10], [50_000, 0, 10], [50_000, 10, 1001], [700, 10], "x"])
def test_a_bad_threshold_is_a_config_error_naming_the_field(bad):
    with pytest.raises(ConfigError, match=r"runtime\.gc_threshold"):
        parse_config({"runtime": {"gc_threshold": bad}})


def test_what_was_frozen_is_freed_at_exit_so_no_sketch_is_reported_leaked():
    """A KLL sketch held by a cycle frozen at start-up: without the unfreeze at exit, datasketches' nanobind
    prints 'leaked instance ...' lines for it when the interpreter shuts down."""
    import subprocess
    import sys

    code = (
        "from sidecar.runtime import tune_gc\n"
        "from sidecar.checks.stats.sketch import new_kll\n"
        "a = {'sketch': new_kll(200)}; a['self'] = a; del a\n"
        "b = {'sketch': new_kll(200)}; b['self'] = b\n"
        "tune_gc()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "leaked" not in out.stderr, out.stderr[:500]
