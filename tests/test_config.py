from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.cli import main
from sidecar.config import load_config, parse_config
from sidecar.errors import ConfigError

EXAMPLE = Path(__file__).parent.parent / "sidecar.example.yaml"


def test_unknown_keys_are_rejected_with_their_path() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"triton": {"metrics_url": "http://x", "intervall_secs": 5}})
    assert str(err.value) == "triton.intervall_secs: unknown key; did you mean 'interval_secs'?"


def test_bad_values_name_the_field_path() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"triton": {"interval_secs": 0}})
    assert err.value.path == "triton.interval_secs"
    with pytest.raises(ConfigError) as err:
        parse_config({"server": {"port": "eighty"}})
    assert err.value.path == "server.port"


def test_env_substitution_with_default_and_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_HOST", "triton.internal")
    cfg = parse_config(
        {
            "triton": {
                "metrics_url": "http://${env:TRITON_HOST}:8002/metrics",
                "http_url": "http://${env:NOPE_NOT_SET:-localhost}:8000",
            }
        }
    )
    assert cfg.triton.metrics_url == "http://triton.internal:8002/metrics"
    assert cfg.triton.http_url == "http://localhost:8000"
    monkeypatch.delenv("TRITON_HOST")
    with pytest.raises(ConfigError) as err:
        parse_config({"server": {"push_token": "${env:TRITON_HOST}"}})
    assert err.value.path == "server.push_token" and "TRITON_HOST" in str(err.value)


def test_example_config_is_valid() -> None:
    cfg = load_config(EXAMPLE)
    assert cfg.triton.enabled


def test_validate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("server:\n  push_token: ${env:PUSH_TOKEN}\n")
    monkeypatch.setenv("PUSH_TOKEN", "hunter2")
    assert main(["validate", "--config", str(good), "--print"]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "hunter2" not in out and "**" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("triton:\n  timeout_secs: -1\n")
    assert main(["validate", "--config", str(bad)]) == 2
    assert "triton.timeout_secs" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("triton: [unclosed\n")
    assert main(["validate", "--config", str(broken)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["validate", "--config", str(tmp_path / "missing.yaml")]) == 2


def test_a_duplicate_key_at_any_depth_is_refused_naming_both_lines(tmp_path: Path) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text("server:\n  port: 9500\ntriton:\n  interval_secs: 5\n  interval_secs: 6\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert err.value.path == "triton.interval_secs"
    assert "line 4" in str(err.value) and "line 5" in str(err.value)
    f.write_text("server:\n  push_token: a\nserver:\n  admin_token: b\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert err.value.path == "server" and "line 1" in str(err.value) and "line 3" in str(err.value)


def test_a_mapping_or_list_used_as_a_key_is_a_config_error_not_a_crash() -> None:
    # Found by the CI fuzz run: a YAML key may itself be a mapping (`? {a: 1}`), which the duplicate check
    # could not hash; the loader raised TypeError instead of naming the line.
    from sidecar.config import load_config_text

    for text in ("triton:\n  {a: 1}: 5\n", "triton:\n  ? [a, b]\n  : 5\n", "{x: 1}: 2\n"):
        with pytest.raises(ConfigError) as err:
            load_config_text(text)
        assert "key must be a plain name" in str(err.value) and "line" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config_text("triton:\n  {a: 1}: 5\n")
    assert err.value.path == "triton"


def test_the_shipped_example_has_no_duplicate_key_and_keeps_its_eval_interval() -> None:
    cfg = load_config(EXAMPLE)  # the loader refuses duplicates, so this proves none is left
    assert cfg.checks.eval_interval_secs == 15  # the first `checks:` block used to be silently dropped
    assert cfg.checks.drift.enabled and cfg.checks.business.checks


def test_a_misspelt_key_is_named_with_the_key_it_probably_meant() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({"checks": {"drift": {"p_treshold": 0.1}}})
    assert e.value.path == "checks.drift.p_treshold" and "did you mean 'p_threshold'" in str(e.value)
    # Inside a dict of checks, the typo is reported before the "field required" it causes.
    with pytest.raises(ConfigError) as e:
        parse_config({"checks": {"business": {"enabled": True, "checks": {"x": {"field": "score", "treshold": 0.1}}}}})
    assert e.value.path == "checks.business.checks.x.treshold" and "'threshold'" in str(e.value)
    with pytest.raises(ConfigError) as e:
        parse_config({"server": {"zzz": 1}})
    assert "did you mean" not in str(e.value)


def test_validate_print_masks_passwords_in_urls_and_authorization_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "triton:\n  metrics_url: http://scraper:tritonpw@triton:8002/metrics\n"
        "alerting:\n  alertmanager:\n    urls: [http://am:ampw@am:9093]\n"
        "traces:\n  forward:\n    endpoint: http://collector:4318/v1/traces\n"
        "    headers: {Authorization: Bearer fwdsecret, X-Scope-OrgID: tenant1}\n"
    )
    assert main(["validate", "--config", str(cfg), "--print"]) == 0
    out = capsys.readouterr().out
    for secret in ("tritonpw", "ampw", "fwdsecret"):
        assert secret not in out
    assert "tenant1" in out and "http://scraper:***@triton:8002/metrics" in out
