"""Config of the token-length drift check (``checks.tokens``): where token lengths come from, the reference, the
window each look tests. The false-alarm budget is feature drift's (``checks.drift``), not a copy of it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["DEFAULT_EDGES", "TokenReferenceConfig", "TokensConfig"]

# 1-2-5 edges, the shape vLLM gives its own token histograms (build_1_2_5_buckets), up to 100k tokens.
DEFAULT_EDGES = tuple(float(m * 10**e) for e in range(6) for m in (1, 2, 5))[:-2]


class TokenReferenceConfig(StrictModel):
    mode: Literal["pinned", "file"] = Field(
        "pinned",
        description="'pinned': the first `pinned_requests` requests of a (server, model, version) after it "
        "appears make its reference; 'file': a reference file (`path`, JSON: docs/servers.md, 'Token-length "
        "drift'), e.g. one published from a known-good week, identified by its `id`.",
    )
    pinned_requests: int = Field(
        2000,
        ge=50,
        le=10_000_000,
        description="Mode 'pinned': requests that make the reference. From histograms a scrape's increase is "
        "taken whole, so the reference may hold up to one scrape interval more.",
    )
    pinned_version: str | None = Field(
        None,
        description="Mode 'pinned': compare every version with this version's reference (same server and "
        "model); default: each version with its own first requests.",
    )
    path: str | None = Field(None, description="Mode 'file': the reference file.")
    repin_on_edge_change: bool = Field(
        False,
        description="Mode 'pinned': when a version's histogram comes in other bucket edges than its stored "
        "reference (a restart with another max_model_len), capture a new reference from the next "
        "`pinned_requests` instead of refusing the test. Off: a shift that comes with the restart is not pinned "
        "as the new normal unseen.",
    )

    @model_validator(mode="after")
    def _check(self) -> TokenReferenceConfig:
        if self.mode == "file" and not self.path:
            raise ValueError("path: required when mode is 'file'")
        return self


class TokensConfig(StrictModel):
    enabled: bool = Field(
        False,
        description="Test prompt and generation token lengths per (server, model, version) for drift against a "
        "reference: chi-square and PSI on bucket counts, under checks.drift's false-alarm budget.",
    )
    histograms: bool = Field(
        True,
        description="Read the per-request token histograms the configured `servers:` export (vLLM, SGLang, TGI, "
        "Triton's vLLM and TensorRT-LLM backends); the test runs on their increase per window.",
    )
    events: bool = Field(
        True,
        description="Read per-request token counts from events' fields `tokens_in` and `tokens_out`, binned "
        "into `edges` (server label `events`), for servers that export no histogram.",
    )
    span_names: list[str] = Field(
        default_factory=lambda: ["llm_request"],
        max_length=16,
        description="Spans of these names count as requests too, from gen_ai.usage.prompt_tokens (or "
        "input_tokens) and completion_tokens (or output_tokens), model from gen_ai.response.model (or "
        "request.model), version ''; empty: spans are not read.",
    )
    edges: list[float] = Field(
        default_factory=lambda: list(DEFAULT_EDGES),
        min_length=1,
        max_length=64,
        description="Bucket upper edges (tokens, ascending) per-request counts from events and spans are binned "
        "into; a last open bucket is implied.",
    )
    window_secs: float = Field(
        300.0,
        ge=10,
        le=86_400,
        description="Each window's increase is tested once, when it ends (blocks aligned to multiples of it).",
    )
    min_requests: int = Field(
        200, ge=10, description="Fewer requests in a window (or the reference): no decision, no place in the last n."
    )
    psi_effect_floor: float = Field(
        0.1, ge=0, description="Smallest PSI that counts as drift, whatever the p-value (as checks.drift's)."
    )
    min_expected: float = Field(
        5.0,
        gt=0,
        le=100,
        description="Adjacent buckets are merged until each expects at least this many counts in both the "
        "window and the reference under no drift (chi-square's rule of thumb, on the pooled counts), so sparse "
        "tails do not make false alarms.",
    )
    reference: TokenReferenceConfig = Field(
        default_factory=TokenReferenceConfig, description="The reference of every model not named in `models`."
    )
    models: dict[str, TokenReferenceConfig] = Field(
        default_factory=dict, max_length=256, description="A reference per model name."
    )
    max_series: int = Field(
        200, gt=0, le=10_000, description="(server, model, version) series kept; more are refused and counted."
    )
    series_idle_secs: float = Field(
        86_400.0, gt=0, description="A series with no request for this long is forgotten (its slot freed)."
    )

    @model_validator(mode="after")
    def _check(self) -> TokensConfig:
        e = self.edges
        if any(x <= 0 for x in e) or sorted(set(e)) != e:
            raise ValueError("edges: must be positive, distinct and ascending")
        for where, spec in [("reference", self.reference), *((f"models.{m}", r) for m, r in self.models.items())]:
            if spec.mode == "pinned" and spec.pinned_requests < self.min_requests:
                raise ValueError(f"{where}.pinned_requests: below min_requests, so no window could ever be tested")
        if not (self.histograms or self.events or self.span_names):
            raise ValueError("histograms, events, span_names: at least one source of token lengths is needed")
        return self
