"""The typed, frozen facts a finding carries: the evidence that made it what it is, one class per finding kind.

A check writes numbers and short tokens here, never prose; ``sidecar/alerting/render/`` is the one place that
turns them into words (alert annotations, pages, audit rows, webhook bodies), so every screen quotes the same
evidence. Each class is also a read-only mapping of its field names (``facts["q"]``, ``facts.get("q")``,
``dict(facts)``), so templates, JSON bodies and older readers see the same values; the keys of a class's
``extra`` mapping (per-rule or per-aspect numbers) read the same way.

Like ``sidecar.model``, this module depends on nothing of ours (``tests/test_import_rules.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar

__all__ = [
    "NO_FACTS",
    "BatchingFacts",
    "BusinessFacts",
    "CanaryFacts",
    "ColdStartFacts",
    "DiagnosisFacts",
    "DriftBlock",
    "DriftFacts",
    "DriftReference",
    "FactValue",
    "Facts",
    "OutputSanityFacts",
]

FactValue = float | int | str | None
_EMPTY: Mapping[str, FactValue] = MappingProxyType({})


class Facts(Mapping[str, Any]):
    """Base of every facts class: a frozen dataclass that reads as a mapping of its fields (and ``extra``)."""

    __slots__ = ()
    _names: ClassVar[tuple[str, ...]] = ()
    _index: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._names, cls._index = (), frozenset()  # filled on first use: the dataclass decorator runs after this

    def __post_init__(self) -> None:
        # Frozen all the way down: a plain dict handed in as ``extra`` is copied behind a read-only view.
        extra = getattr(self, "extra", None)
        if isinstance(extra, dict):
            object.__setattr__(self, "extra", MappingProxyType(dict(extra)))

    def _fields(self) -> tuple[str, ...]:
        cls = type(self)
        if not cls._names:
            cls._names = tuple(f.name for f in fields(self) if f.name != "extra")  # type: ignore[arg-type]
            cls._index = frozenset(cls._names)
        return cls._names

    def _extra(self) -> Mapping[str, Any]:
        extra = getattr(self, "extra", None)
        return extra if isinstance(extra, Mapping) else _EMPTY

    def __getitem__(self, key: str) -> Any:
        self._fields()
        if key in type(self)._index:
            return getattr(self, key)
        return self._extra()[key]

    def get(self, key: str, default: Any = None) -> Any:  # no KeyError raised and caught: renderers call it a lot
        self._fields()
        if key in type(self)._index:
            return getattr(self, key)
        return self._extra().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._fields()
        return key in type(self)._index or key in self._extra()

    def __iter__(self) -> Iterator[str]:
        names = self._fields()
        yield from names
        yield from (k for k in self._extra() if k not in type(self)._index)

    def __len__(self) -> int:
        index = type(self)._index
        return len(self._fields()) + sum(1 for k in self._extra() if k not in index)


@dataclass(frozen=True, slots=True, eq=False)
class _NoFacts(Facts):
    """A finding that carries no facts (one from a test, or a kind that writes its own text)."""


NO_FACTS: Facts = _NoFacts()


# ---- drift ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DriftReference:
    """The reference a drift test compared against: ``id`` names one frozen reference (source and when it
    froze), ``size`` its non-missing values, ``source`` ``file:<path>`` | ``pinned:<version>`` | ``rolling``."""

    id: str
    size: int
    source: str
    created_at: float | None = None


@dataclass(frozen=True, slots=True)
class DriftBlock:
    """One look: the current values of one block (method multiscale) or of the window (method window) tested
    against the reference. ``q`` is the Benjamini-Hochberg-adjusted p, held to ``level``."""

    start: float | None
    end: float
    n_cur: int
    n_ref: int
    statistic: float | None  # KS D, chi-square, or the missing ratio (test missing)
    effect: float | None  # KS D, PSI, or the rise of the missing ratio
    p_raw: float | None
    q: float | None
    level: float
    drifted: bool
    # A chi-square look's own degrees of freedom and new categories, so a block reads the same words later.
    dof: int | None = None
    unseen: str | None = None
    unseen_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class DriftFacts(Facts):
    """One drift finding. The flat figures (``statistic`` .. ``n_ref``) are the latest look, what /metrics
    exports now; ``evidence`` holds the looks that drifted and make the finding active (method multiscale:
    the drifting blocks among the last ``sustained_of`` of ``scale_secs``; method window: the window while
    its condition held for ``sustained_secs``), oldest first, and is empty while the finding is not active."""

    test: str  # ks | chi2 | missing
    decision: str  # multiscale | window
    floor: float
    condition: bool  # the latest look's condition (adjusted p below the level and effect at the floor)
    statistic: float | None = None
    p_raw: float | None = None
    q: float | None = None
    effect: float | None = None
    psi: float | None = None
    unseen_ratio: float | None = None
    n_cur: int = 0
    n_ref: int = 0
    missing_ratio: float | None = None
    ref_missing_ratio: float | None = None
    now: DriftBlock | None = None
    evidence: tuple[DriftBlock, ...] = ()
    reference: DriftReference | None = None
    # Method multiscale.
    scale_secs: float | None = None
    block_end: float | None = None
    level: float | None = None
    looks_drifting: int | None = None
    looks: int | None = None
    sustained_looks: int | None = None
    sustained_of: int | None = None
    # Method window.
    held_secs: float | None = None
    sustained_secs: float | None = None
    condition_since: float | None = None
    # Test details: KS method (exact | asymp | sketch), chi-square degrees of freedom, new categories.
    method: str | None = None
    dof: int | None = None
    unseen_count: int | None = None
    unseen: str | None = None
    insufficient: str | None = None  # a reason code; its numbers in ``extra``
    extra: Mapping[str, FactValue] = field(default_factory=lambda: _EMPTY)


# ---- business -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BusinessFacts(Facts):
    """A business-metric finding: the aggregate over ``window_secs`` (``events`` events) against the baseline
    over ``baseline_secs`` (a relative change) or a fixed threshold; the value, baseline and threshold are the
    finding's own ``value``, ``baseline`` and ``threshold``."""

    display_name: str
    aggregate: str  # mean | sum | rate | ratio | quantile
    compare: str  # relative | absolute
    direction: str  # up | down
    events: int
    window_secs: float
    quantile: float | None = None
    baseline_secs: float | None = None
    change: float | None = None  # relative change against the baseline
    version_scope: str = "version"  # version | all
    insufficient: str | None = None  # window | baseline
    min_events: int | None = None
    baseline_events: int | None = None
    baseline_coverage: float | None = None
    min_baseline_events: int | None = None
    min_baseline_coverage: float | None = None


# ---- verdicts ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CanaryFacts(Facts):
    """A canary verdict (``worse`` | ``ok`` | ``insufficient``): the aspects found worse (comma-separated) and,
    per aspect, its numbers in ``extra`` as ``<aspect>.<name>`` (base, cand, diff, q, n_base, n_cand, ...)."""

    verdict: str
    worse: str
    latency_source: str
    min_samples: int
    alpha: float
    min_intervals: int
    runbook: str
    extra: Mapping[str, FactValue] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class OutputSanityFacts(Facts):
    """An output-sanity finding: ``count`` of ``n`` outputs (of ``total`` events) failed ``test`` in the window;
    ``dominant`` the value a collapsed output sits on; ids of example requests and traces."""

    test: str  # nonfinite | all_zero | out_of_range | collapsed
    total: int
    n: int
    count: int
    ratio: float | None
    outputs: str
    min_samples: int
    runbook: str
    dominant: str | None = None
    range_min: float | None = None
    range_max: float | None = None
    sample_trace_ids: str = ""
    sample_request_ids: str = ""


@dataclass(frozen=True, slots=True)
class ColdStartFacts(Facts):
    """A cold-start finding: a load time (``phase`` loading | loaded) or the first requests' latency against
    the steady p99 (``phase`` first_requests)."""

    phase: str
    runbook: str
    load_secs: float | None = None
    max_load_secs: float | None = None
    lower_bound: str | None = None  # yes | no: Triton held the index request for the whole load
    first_requests: int | None = None
    first_mean_s: float | None = None
    factor: float | None = None
    steady_intervals: int | None = None
    steady_p99_s: float | None = None
    ratio: float | None = None


@dataclass(frozen=True, slots=True)
class BatchingFacts(Facts):
    """A batching-advisor finding: its ``verdict`` and the traffic and config it judged."""

    verdict: str
    rate: float
    fill: float
    queue_us: float
    delay_us: float | None
    target: int
    max_batch_size: int
    suggested_delay_us: float | None
    requests: int
    min_requests: int
    runbook: str


@dataclass(frozen=True, slots=True)
class DiagnosisFacts(Facts):
    """A diagnosis: its code, the rule's statement of the problem and of what to do, and the rule's numbers."""

    diagnosis: str
    problem: str = ""
    action: str = ""
    runbook: str = "Diagnosis.md"
    extra: Mapping[str, FactValue] = field(default_factory=lambda: _EMPTY)
