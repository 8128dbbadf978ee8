"""The engine protocol, the metric definitions every engine shares, and the engine registry.

An engine is one module with one class implementing :class:`Engine` — ``load(settings)``, ``measure(shape)``,
``unload()`` — registered by name in :data:`ENGINES`. Adding an engine touches its own module and this registry.

Metrics follow vLLM's benchmark definitions (vllm/benchmarks/serve.py), for every engine alike:
  TTFT  time from submitting the request(s) to the first output token of a sequence
  ITL   gaps between consecutive output tokens of a sequence
  TPOT  (E2E - TTFT) / (n_out - 1)       per sequence, excluding the first token
  E2E   time from submission to the last output token
  decode tok/s  = 1000 / TPOT            per sequence
  prefill tok/s = batch x prompt_tokens / TTFT
  throughput    = batch x n_out / E2E    output tokens per second over all sequences
"""

from __future__ import annotations

import importlib
import statistics
from typing import Any, Optional, Protocol

from pydantic import BaseModel, ConfigDict, Field


from recommender.core.engines import resolve_engine
from recommender.core.errors import UserError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoadSettings(_Strict):
    model_path: str
    context_tokens: int  # per sequence
    batch: int = 1  # concurrent sequences the context must hold
    kv_dtype: str = "f16"
    gpu_layers: int = -1  # -1 = all layers on the GPU (engines without partial offload ignore it)
    threads: Optional[int] = None
    extra: dict[str, Any] = Field(default_factory=dict)  # engine-specific, recorded with the row


class RequestShape(_Strict):
    prompt_tokens: int
    output_tokens: int
    batch: int = 1
    seed: int = 0


class RunTiming(_Strict):
    """One repeat: per sequence, the time (ms since submission) each output token became available.

    An engine that cannot see every token (vLLM's offline API) gives [first, last] per sequence and the number of
    tokens each sequence produced in ``n_tokens``; TPOT is then (last - first)/(n - 1) and no ITL is reported."""

    token_times_ms: list[list[float]]  # [sequence][token] -> ms since submission
    n_tokens: Optional[list[int]] = None  # tokens per sequence, when token_times_ms holds only first and last
    peak_engine_bytes: Optional[int] = None  # what the engine itself reports, when it does


class EngineInfo(_Strict):
    name: str
    version: str
    backend: str  # "cuda", "cpu", "metal", ...
    details: dict[str, Any] = Field(default_factory=dict)


class Engine(Protocol):
    name: str
    extra: str  # the pip extra that installs it

    def load(self, settings: LoadSettings) -> EngineInfo: ...

    def measure(self, shape: RequestShape) -> RunTiming: ...

    def unload(self) -> None: ...


# --------------------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------------------
# name (as recommender.core.engines.ENGINES spells it): (module, class, pip extra)
ENGINES: dict[str, tuple[str, str, str]] = {
    "llama.cpp": ("evaluators.llama_cpp", "LlamaCppEngine", "llama"),
    "transformers": ("evaluators.transformers_engine", "TransformersEngine", "transformers"),
    "vllm": ("evaluators.vllm_engine", "VllmEngine", "vllm"),
}


def engine_name(name: str) -> str:
    """A registered engine name (same names and aliases as the planner, recommender.core.engines), or a plugin given
    as 'package.module:Class' (used as is)."""
    if ":" in name:
        return name
    return resolve_engine(name)


def get_engine(name: str) -> Engine:
    """Instantiate an engine by name; a missing package gives a one-line hint naming the extra to install."""
    key = engine_name(name)
    if ":" in key:
        module, cls = key.split(":", 1)
        extra = "?"
    else:
        module, cls, extra = ENGINES[key]
    try:
        mod = importlib.import_module(module)
        return getattr(mod, cls)()
    except ImportError as e:
        raise UserError(f"engine {key} is not installed ({e.name or e})",
                        hint=f"pip install 'llm-recommender[{extra}]'") from None


# --------------------------------------------------------------------------------------------------------------
# Metrics (shared by every engine)
# --------------------------------------------------------------------------------------------------------------
class RepeatMetrics(_Strict):
    ttft_ms: float
    tpot_ms: Optional[float]
    e2e_ms: float
    itl_ms: list[float]
    decode_tokens_per_s: Optional[float]
    prefill_tokens_per_s: float
    throughput_tokens_per_s: float


def repeat_metrics(t: RunTiming, shape: RequestShape) -> RepeatMetrics:
    """Metrics of one repeat, averaged over its sequences (each sequence by the definitions above)."""
    ttfts, tpots, e2es, itls = [], [], [], []
    counts = t.n_tokens or [len(seq) for seq in t.token_times_ms]
    for seq, n in zip(t.token_times_ms, counts):
        if not seq:
            raise ValueError("a sequence produced no token")
        ttfts.append(seq[0])
        e2es.append(seq[-1])
        if n > 1:
            tpots.append((seq[-1] - seq[0]) / (n - 1))
        if len(seq) == n:  # every token's time is known
            itls += [b - a for a, b in zip(seq, seq[1:])]
    ttft = statistics.fmean(ttfts)
    tpot = statistics.fmean(tpots) if tpots else None
    e2e = max(e2es)
    n_out = sum(counts)
    return RepeatMetrics(ttft_ms=ttft, tpot_ms=tpot, e2e_ms=e2e, itl_ms=itls,
                         decode_tokens_per_s=1000.0 / tpot if tpot else None,
                         prefill_tokens_per_s=shape.batch * shape.prompt_tokens / (max(ttfts) / 1000.0),
                         throughput_tokens_per_s=n_out / (e2e / 1000.0))


def median_spread(values: list[float]) -> dict[str, float]:
    """Median and spread (min, max, relative half-range) of repeated measurements."""
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {"median": med, "min": lo, "max": hi, "rel_spread": (hi - lo) / (2 * med) if med else 0.0}


# A later repeat slower than the first by more than this fraction signals drift (thermal throttling, memory
# pressure, another process): the row is kept and flagged, as seed 001 §2.5 asks for repeated runs to be checked.
DRIFT_THRESHOLD = 0.10


def drift(values: list[float]) -> float:
    """Relative change of the last repeat against the first (positive = getting slower)."""
    return (values[-1] - values[0]) / values[0] if len(values) > 1 and values[0] else 0.0
