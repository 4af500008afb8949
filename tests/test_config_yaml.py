"""The config file's YAML reader is bounded: alias bombs, self-referencing aliases, deep nesting and blank
tokens are ConfigErrors with a line or a field path, found in bounded time and memory."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.cli import main
from sidecar.config import load_config_text
from sidecar.configyaml import MAX_ALIASES, MAX_EXPANDED_NODES, load_yaml
from sidecar.errors import ConfigError


def _laughs(levels: int, fan: int = 9) -> str:
    """The billion-laughs document: level i is a list of ``fan`` aliases of level i-1 (fan**levels values)."""
    lines = ["l0: &l0 [" + ", ".join(['"lol"'] * fan) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_in_bounded_time_and_memory() -> None:
    text = _laughs(9)  # 9**10 = 3.5 billion values once expanded, from 500 bytes
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ConfigError, match=r"line \d+ expands \(through aliases\) to more than"):
            load_config_text(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 5.0
    assert peak < 20 * 1024 * 1024, f"peak {peak} bytes"


def test_validate_exits_with_the_bound_on_a_bomb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bomb.yaml"
    f.write_text(_laughs(9))
    assert main(["validate", "--config", str(f)]) == 2
    assert "expands (through aliases)" in capsys.readouterr().err


def test_a_long_scalar_repeated_through_aliases_is_refused() -> None:
    big = "x" * (1024 * 1024)
    text = f"a: &a {big}\nb: [" + ", ".join(["*a"] * 40) + "]\n"
    with pytest.raises(ConfigError, match="MiB of text"):
        load_yaml(text)


def test_alias_count_is_bounded() -> None:
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(ConfigError, match=f"more than {MAX_ALIASES} aliases"):
        load_yaml(text)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: &x [*x]\n", 1),
        ("server:\n  x: &s\n    y: 1\n    z: *s\n", 4),
        ("a: &m\n  b:\n    - c\n    - <<: *m\n", 4),
    ],
)
def test_a_self_referencing_alias_is_a_config_error_naming_its_line(text: str, line: int) -> None:
    with pytest.raises(ConfigError, match=rf"\*\w+ \(line {line}\) refers to the node that contains it"):
        load_config_text(text)


def test_aliases_within_the_bounds_still_work() -> None:
    # An anchor reused is what aliases are for: shared labels, repeated settings.
    text = "alerting:\n  resend_delay_secs: &d 30\n  resolved_retention_secs: *d\n"
    cfg = load_config_text(text)
    assert cfg.alerting.resend_delay_secs == 30 and cfg.alerting.resolved_retention_secs == 30
    # A shared node is measured as expanded, and a document right under the bound passes.
    assert len(load_yaml(_laughs(3, fan=9))["l3"]) == 9
    assert MAX_EXPANDED_NODES > 9**4 + 9**3 + 9**2 + 9


def test_deep_nesting_names_its_line() -> None:
    with pytest.raises(ConfigError, match=r"nested more than \d+ levels deep \(line 2\)"):
        load_yaml("a: 1\nb: " + "[" * 300 + "]" * 300)


@pytest.mark.parametrize("field", ["push_token", "admin_token", "read_token"])
@pytest.mark.parametrize("blank", [" ", "   ", "\t", "\n"])
def test_a_whitespace_only_token_is_refused_naming_the_field(field: str, blank: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config_text(f"server:\n  {field}: {blank!r}\n".replace("'", '"'))
    assert err.value.path == f"server.{field}"
    assert "whitespace" in err.value.message


def test_an_empty_token_is_still_no_token_and_a_real_one_is_kept() -> None:
    assert load_config_text('server:\n  push_token: ""\n').server.push_token is not None
    cfg = load_config_text('server:\n  push_token: " s3cret "\n')
    assert cfg.server.push_token is not None and cfg.server.push_token.get_secret_value() == " s3cret "


# -- property: any document made of anchors and aliases loads or is a ConfigError, within bounds -----------
@st.composite
def _alias_documents(draw: st.DrawFn) -> str:
    """Documents of anchored lists and mappings whose items alias earlier anchors (or, sometimes, their own,
    or one not defined yet): fan-outs up to 30 over up to 12 levels reach far past every bound."""
    lines: list[str] = []
    for i in range(draw(st.integers(1, 12))):
        fan = draw(st.integers(1, 30))
        refs = [
            draw(st.sampled_from([f"*a{j}" for j in range(max(1, i + 2))] + ['"s"', "1", "{k: v}"])) for _ in range(fan)
        ]
        if draw(st.booleans()):
            body = "[" + ", ".join(refs) + "]"
        else:
            body = "{" + ", ".join(f"k{n}: {r}" for n, r in enumerate(refs)) + "}"
        lines.append(f"a{i}: &a{i} {body}")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(_alias_documents())
def test_any_alias_document_loads_bounded_or_is_a_config_error(text: str) -> None:
    t0 = time.perf_counter()
    try:
        load_config_text(text)
    except ConfigError as exc:
        assert str(exc)
    assert time.perf_counter() - t0 < 5.0


@settings(max_examples=150, deadline=None)
@given(_alias_documents())
def test_what_loads_expands_to_at_most_the_bound(text: str) -> None:
    try:
        data = load_yaml(text)
    except ConfigError:
        return
    seen = 0
    stack = [data]
    while stack:  # walks the expansion itself: a shared node counts every time it is reached
        cur = stack.pop()
        seen += 1
        assert seen <= MAX_EXPANDED_NODES
        if isinstance(cur, dict):
            stack.extend(cur.keys())
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"alertmanager": {"urls": ["http://am:9093"], "bearer_token": "  "}}, "alerting.alertmanager.bearer_token"),
        (
            {"audit": {"elasticsearch": {"url": "http://es:9200", "api_key": "\t"}}},
            "alerting.audit.elasticsearch.api_key",
        ),
    ],
)
def test_a_whitespace_only_outgoing_credential_is_refused_naming_the_field(section: dict, path: str) -> None:
    from sidecar.config import parse_config

    with pytest.raises(ConfigError) as err:
        parse_config({"alerting": section})
    assert err.value.path == path and "whitespace" in err.value.message
