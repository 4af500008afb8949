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
