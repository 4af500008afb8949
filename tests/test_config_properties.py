"""Property tests: whatever a config file holds, loading it either succeeds or names a field; never a crash."""

from __future__ import annotations

import contextlib

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.config import SidecarConfig, load_config_text, parse_config
from sidecar.errors import ConfigError

# Keys a real file would use (so values reach the validators), plus noise.
_KEYS = st.sampled_from(
    [
        *SidecarConfig.model_fields,
        "server",
        "port",
        "host",
        "checks",
        "drift",
        "business",
        "enabled",
        "window_secs",
        "threshold",
        "urls",
        "interval_secs",
        "max_body_bytes",
        "x",
        "",
        "treshold",
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.just("${env:NOPE_NOT_SET}"),
    st.just("${env:HOME:-x}"),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_any_mapping_validates_or_names_a_field(data: dict[str, object]) -> None:
    try:
        parse_config(data)
    except ConfigError as exc:
        assert str(exc)  # a message, with the path in it when the problem has one


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_loads_or_is_a_config_error(text: str) -> None:
    with contextlib.suppress(ConfigError):
        load_config_text(text)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_yaml_of_a_mapping_behaves_as_the_mapping(data: dict[str, object]) -> None:
    try:
        text = yaml.safe_dump(data)
    except yaml.YAMLError:
        return
    outcomes = []
    for load in (lambda: parse_config(yaml.safe_load(text)), lambda: load_config_text(text)):
        try:
            outcomes.append(load().model_dump())
        except ConfigError as exc:
            outcomes.append(("error", exc.path))
    assert outcomes[0] == outcomes[1]


def test_deep_nesting_is_a_config_error_not_a_recursion_crash() -> None:
    text = "server: " + "[" * 5000 + "]" * 5000
    with pytest.raises(ConfigError):
        load_config_text(text)
