"""The servers: list in the one config file: names, URLs and profiles checked, errors naming the field."""

from __future__ import annotations

import pytest

from sidecar.config import parse_config
from sidecar.errors import ConfigError


def test_several_servers_each_with_a_name_url_and_profile() -> None:
    cfg = parse_config(
        {
            "servers": [
                {"name": "llama", "url": "http://vllm:8000/metrics"},
                {"name": "vision", "url": "http://triton:8002/metrics", "profile": "triton", "interval_secs": 5},
            ]
        }
    )
    assert [(s.name, s.profile, s.interval_secs) for s in cfg.servers] == [
        ("llama", "auto", 10.0),
        ("vision", "triton", 5.0),
    ]


@pytest.mark.parametrize(
    ("server", "path", "words"),
    [
        ({"name": "a", "url": "http://x/metrics", "profile": "ollama"}, "servers[0].profile", "unknown profile"),
        ({"name": "a", "url": "x:8000/metrics"}, "servers[0].url", "http://"),
        ({"name": "A B", "url": "http://x/metrics"}, "servers[0].name", "pattern"),
        ({"name": "a", "url": "http://x/metrics", "interval_secs": 0}, "servers[0].interval_secs", "greater"),
    ],
)
def test_bad_server_entries_name_the_field(server: dict[str, object], path: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"servers": [server]})
    assert err.value.path == path and words in str(err.value)


def test_two_servers_of_one_name_are_refused() -> None:
    one = {"name": "a", "url": "http://x/metrics"}
    with pytest.raises(ConfigError, match="used twice"):
        parse_config({"servers": [one, one]})
