"""The one serving SLI schema every server profile maps onto (frozen, typed, per model/version).

A profile turns a server's own families, types, units and labels into a ``ServingSnapshot``; the derivation
downstream (``derive.py``) and the exported series know no server. Names follow the OpenTelemetry GenAI semantic
conventions where one exists (``gen_ai.server.time_to_first_token``, ``gen_ai.server.time_per_output_token``,
``gen_ai.server.request.duration``, token usage split by ``gen_ai.token.type``); the others are the sidecar's own.

Units are normalised here: durations in seconds, sizes in requests or tokens, the KV-cache usage as a 0..1 ratio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "OUTCOMES",
    "Counter",
    "Dist",
    "DistName",
    "Gauge",
    "ModelKey",
    "ModelServing",
    "Refusal",
    "ServingSnapshot",
]

ModelKey = tuple[str, str]  # (model, version); version is "" where the server has none

# Requests by outcome: a closed set, so the outcome label stays bounded whatever a server writes.
OUTCOMES = ("success", "failure", "aborted", "other")


class DistName(StrEnum):
    """Distributions (histogram or sum/count pairs), in seconds unless the name says otherwise."""

    REQUEST_DURATION = "gen_ai.server.request.duration"  # end-to-end, as the server measures it
    QUEUE_DURATION = "queue.duration"  # waiting before execution
    COMPUTE_DURATION = "compute.duration"  # executing (inference, prefill + decode for an LLM)
    FIRST_RESPONSE = "first_response.duration"  # Triton: to the first response (a chunk, not a token)
    TIME_TO_FIRST_TOKEN = "gen_ai.server.time_to_first_token"
    INTER_TOKEN_LATENCY = "inter_token_latency"  # per decode step that emitted tokens (see docs/servers.md)
    TIME_PER_OUTPUT_TOKEN = "gen_ai.server.time_per_output_token"  # per request: decode time / (tokens - 1)
    BATCH_SIZE = "batch.size"  # in requests (or inferences) per execution, not seconds
    # Tokens per finished request (gen_ai.client.token.usage's split by gen_ai.token.type, observed by the server):
    # what the token-length drift check (checks.tokens) tests, bucket by bucket.
    INPUT_TOKENS_PER_REQUEST = "request.input_tokens"
    OUTPUT_TOKENS_PER_REQUEST = "request.output_tokens"


class Counter(StrEnum):
    """Cumulative counts (reset-corrected downstream)."""

    INPUT_TOKENS = "gen_ai.usage.input_tokens"  # prompt tokens (gen_ai.token.type=input)
    OUTPUT_TOKENS = "gen_ai.usage.output_tokens"  # generated tokens (gen_ai.token.type=output)
    PREEMPTIONS = "preemptions"


class Gauge(StrEnum):
    """Instantaneous values."""

    IN_FLIGHT = "requests.in_flight"  # being executed
    WAITING = "requests.waiting"  # queued, not yet executing
    KV_CACHE_USAGE = "kv_cache.usage"  # 0..1


@dataclass(frozen=True, slots=True)
class Dist:
    """A cumulative distribution: ``buckets`` are ``(upper bound, cumulative count)`` in the base unit, sorted,
    the last bound ``inf``; empty when the server gives only a sum and a count."""

    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...] = ()


def _frozen(m: Mapping[str, float] | None = None) -> Mapping[str, float]:
    return MappingProxyType(dict(m or {}))


@dataclass(frozen=True, slots=True)
class ModelServing:
    """One model/version's serving figures from one scrape; only what the server exposes is present."""

    requests: Mapping[str, float] = field(default_factory=_frozen)  # outcome -> cumulative count
    counters: Mapping[str, float] = field(default_factory=_frozen)  # Counter -> cumulative value
    gauges: Mapping[str, float] = field(default_factory=_frozen)  # Gauge -> value
    dists: Mapping[str, Dist] = field(default_factory=lambda: MappingProxyType({}))  # DistName -> Dist


@dataclass(frozen=True, slots=True)
class Refusal:
    """A family the mapping refused in one scrape, with a bounded ``reason`` and a line for people."""

    family: str
    reason: str  # wrong_type | unit | non_finite | negative | labels | too_many_models
    detail: str


@dataclass(frozen=True, slots=True)
class ServingSnapshot:
    """What one scrape of one server says, in the schema's terms."""

    server: str
    profile: str
    taken_at: float  # monotonic seconds
    models: Mapping[ModelKey, ModelServing]
    families: frozenset[str]  # the profile's families present and accepted in this scrape
    refused: tuple[Refusal, ...] = ()
    models_refused: int = 0
