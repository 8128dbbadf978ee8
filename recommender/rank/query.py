"""A ranking question: limits, workload, hardware, weights and filters (built by the CLI from the options).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from recommender.core.records import HardwareProfile, Strict, Workload
from recommender.hardware.multi import MultiGpu
from recommender.predict.constants import LLAMA_CPP_DEFAULT_LOAD_MODE
from recommender.score.weighted import READING_TPOT_MS

LatencyMetric = Literal["ttft", "tpot", "e2e"]
LATENCY_FIELD = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms"}


class Query(Strict):
    vram_bytes: int
    max_latency_ms: Optional[float] = None
    latency_metric: LatencyMetric = "ttft"
    workload: Workload
    hardware: HardwareProfile  # the GPU; with several, the first of ``machine``
    machine: Optional[MultiGpu] = None  # several GPUs: every candidate is split over them (vram_bytes: their sum)
    weights: dict[str, float]
    normalization: Literal["value", "minmax", "zscore"] = "value"
    missing: Literal["worst", "mean"] = "worst"
    models: list[str] = Field(default_factory=list)  # restrict to these catalog ids
    engines: list[str] = Field(default_factory=list)
    quants: list[str] = Field(default_factory=list)
    variants: list[tuple[str, str]] = Field(default_factory=list)  # only these (model, quant) pairs (--installed)
    include_base: bool = False  # rank base checkpoints in a chat workload too
    per_model: int = 1  # best candidates kept per model (de-duplication)
    top: int = 10
    # host RAM partial offload may use (llama.cpp n_gpu_layers below all): None = no offload candidates
    host_ram_bytes: Optional[int] = None
    # llama.cpp's load mode for partial-offload plans: mmap (its default) or none (--no-mmap)
    load_mode: str = LLAMA_CPP_DEFAULT_LOAD_MODE
    # the task accuracy the score ranks on (recommender.rank.quality.ranked_accuracy): neutral = the point value,
    # moderate = its 16th percentile, averse = its 5th percentile
    risk: Literal["neutral", "moderate", "averse"] = "moderate"


def serve_slos(q: Query) -> tuple[float, float]:
    """(TTFT SLO ms, TPOT SLO ms) of a goodput query: the workload's comfortable TTFT and reading speed (the SLOs
    recommender.score.order.goodput_target sets its target at), or the user's --max-latency on the metric it
    limits."""
    ttft, tpot = q.workload.ttft_comfort_ms, READING_TPOT_MS
    if q.max_latency_ms is not None:
        if q.latency_metric == "ttft":
            ttft = q.max_latency_ms
        elif q.latency_metric == "tpot":
            tpot = q.max_latency_ms
    return ttft, tpot


def resolve_models(catalog, names: list[str]) -> list[str]:
    """The catalog ids of the models a query names (as typed: an id or a unique part of one), in order."""
    return [catalog.resolve_model(m).id for m in names]
