"""The profiles, one line per server, and detection from the families an exposition holds.

Detection scores each profile by how many of its families are present (a Triton serving vLLM through its vLLM
backend holds both ``nv_*`` and ``vllm:*`` families and the Triton profile, which maps both, scores higher); a
profile with none present never matches. Ties go to the earlier line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from sidecar.sources.servers.bentoml import PROFILE as BENTOML
from sidecar.sources.servers.kserve import PROFILE as KSERVE
from sidecar.sources.servers.mlserver import PROFILE as MLSERVER
from sidecar.sources.servers.profile import Profile
from sidecar.sources.servers.rayserve import PROFILE as RAYSERVE
from sidecar.sources.servers.sglang import PROFILE as SGLANG
from sidecar.sources.servers.tfserving import PROFILE as TFSERVING
from sidecar.sources.servers.tgi import PROFILE as TGI
from sidecar.sources.servers.torchserve import PROFILE as TORCHSERVE
from sidecar.sources.servers.triton import PROFILE as TRITON
from sidecar.sources.servers.vllm import PROFILE as VLLM

__all__ = ["PROFILES", "detect", "family_names"]

PROFILES: Mapping[str, Profile] = MappingProxyType(
    {
        p.name: p
        for p in (
            TRITON,
            VLLM,
            SGLANG,
            TGI,
            TFSERVING,
            MLSERVER,
            BENTOML,
            KSERVE,
            RAYSERVE,
            TORCHSERVE,
        )
    }
)


def family_names(sample_names: Iterable[str], types: Mapping[str, str]) -> set[str]:
    """The family names present: declared ones, plus sample names with their suffixes stripped."""
    names = set(sample_names)  # a few hundred distinct names behind tens of thousands of samples
    out = set(types) | names
    for name in names:
        for suffix in ("_total", "_bucket", "_sum", "_count"):
            if name.endswith(suffix):
                out.add(name[: -len(suffix)])
    return out


def detect(families: set[str] | frozenset[str]) -> Profile | None:
    best: Profile | None = None
    best_score = 0
    for profile in PROFILES.values():
        score = len(profile.families & families)
        if score > best_score:
            best, best_score = profile, score
    return best
