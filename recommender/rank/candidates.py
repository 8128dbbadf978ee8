"""Candidates: model x quant x engine x batch x context, each predicted (recommender.predict.Predictor), with its
quality figures and the hard limits it breaks."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from recommender.core.records import CatalogReader, HardwareProfile, ModelSpec
from recommender.hardware.profiles import load_profiles
from recommender.model.quant import QUANTS
from recommender.predict import constants as C
from recommender.predict.predictor import Config, Prediction, Predictor
from recommender.rank.quality import QualityIndex
from recommender.rank.query import LATENCY_FIELD, Query

QUALITY_FIGURES = ("zh_accuracy", "en_accuracy", "ppl_ratio")


class Candidate(Prediction):
    """A Prediction with the model's quality figures (zh_accuracy, en_accuracy, ppl_ratio join ``figures``), the
    constrained latency, and what ranking made of it."""

    rank: Optional[int] = None
    params_total: int
    params_active: int
    latency_ms: Optional[float]  # the constrained latency metric
    score: Optional[float] = None  # weighted normalized cost, lower is better
    score_parts: dict[str, float] = Field(default_factory=dict)
    excluded: list[str] = Field(default_factory=list)

    zh_accuracy = property(lambda self: self.figures["zh_accuracy"].value)
    en_accuracy = property(lambda self: self.figures["en_accuracy"].value)
    ppl_ratio = property(lambda self: self.figures["ppl_ratio"].value)


def _cc(hw: HardwareProfile) -> Optional[tuple[int, int]]:
    if not hw.compute_capability:
        return None
    major, _, minor = hw.compute_capability.partition(".")
    return int(major), int(minor or 0)


def engine_supported(engine: str, family: str, quant: str, hw: HardwareProfile) -> Optional[str]:
    """None when the engine can run this quantization on this hardware, else the reason it cannot."""
    if hw.backend == "metal" and engine != "llama.cpp":
        return f"{engine} has no Apple Metal backend"
    if hw.backend in ("vulkan", "sycl") and engine != "llama.cpp":
        return f"{engine} has no {hw.backend.upper()} backend (llama.cpp runs on {hw.name} through Vulkan or SYCL)"
    if hw.backend == "cpu" and family not in ("float", "gguf"):
        return f"{quant} kernels need a GPU (CPU planning covers GGUF and float weights)"
    cc = _cc(hw)
    keys = [(engine, "*"), (engine, family), ("*", quant.lower())]
    for key in keys:
        rule = C.MIN_COMPUTE_CAPABILITY.get(key)
        if rule and cc is not None and hw.backend == "cuda" and cc < rule[0]:
            return f"{quant} on {engine} needs compute capability >= {rule[0][0]}.{rule[0][1]} ({rule[1]})"
    return None


class CandidateBuilder:
    """Everything a candidate needs from the catalog, read once: the Predictor of the query's hardware (calibration
    and measured rows), quality and the hard limits of one query. ``enumerate_candidates`` (recommend) and
    ``recommender.search.tune`` (one configuration per trial, KV dtype and partial offload included) build candidates
    through it."""

    def __init__(self, catalog: CatalogReader, q: Query, predictor: Optional[Predictor] = None) -> None:
        self.q = q
        self.quality = QualityIndex(catalog)
        self.wanted = {catalog.resolve_model(m).id for m in q.models}
        self.models = catalog.models()
        self.variants = catalog.variants()
        self.predictor = predictor or Predictor.for_catalog(catalog, q.hardware, load_profiles(), self.models)
        self._fixed: dict[tuple, tuple] = {}

    def build(self, mid: str, quant: str, engine: str, ctx: int, batch: int, kv_dtype: Optional[str] = None,
              gpu_layers: Optional[int] = None) -> Candidate:
        q, hw, wl = self.q, self.q.hardware, self.q.workload
        spec: ModelSpec = self.models[mid]
        key = (mid, quant, engine)
        fixed = self._fixed.get(key)
        if fixed is None:  # per (model, quant, engine): quality and engine support (contexts x batches reuse them)
            fixed = self._fixed[key] = ({"zh_accuracy": self.quality.zh(mid, quant),
                                         "en_accuracy": self.quality.en(mid, quant),
                                         "ppl_ratio": self.quality.ppl_ratio(quant, mid)},
                                        engine_supported(engine, QUANTS[quant].family, quant, hw))
        quality, unsupported = fixed
        prompt = min(wl.prompt_tokens, max(ctx - wl.output_tokens, 1))
        c = self.predictor.predict(spec, Config(model=mid, quant=quant, engine=engine, context_tokens=ctx,
                                                batch=batch, prompt_tokens=prompt, output_tokens=wl.output_tokens,
                                                kv_dtype=kv_dtype, gpu_layers=gpu_layers),
                                   variant=self.variants[(mid, quant)], record=Candidate, figures=quality,
                                   params_total=spec.params_total, params_active=spec.params_active, rank=None,
                                   score=None, score_parts={}, latency_ms=None, excluded=[])
        lat = c.latency_ms = c.value(LATENCY_FIELD[q.latency_metric])
        vram = c.total_vram_bytes
        reasons = c.excluded
        if unsupported:
            reasons.append(unsupported)
        if ctx > spec.max_position_embeddings:
            reasons.append(f"context {ctx} exceeds the model's maximum of {spec.max_position_embeddings}")
        if vram > q.vram_bytes:
            reasons.append(f"needs {vram / 1024**3:.1f} GiB of GPU memory, budget is "
                           f"{q.vram_bytes / 1024**3:.1f} GiB")
        if q.max_latency_ms is not None:
            if lat is None:
                reasons.append(f"{q.latency_metric.upper()} unknown ({'; '.join(c.notes) or 'no data'}), "
                               f"so the latency limit cannot be checked")
            elif lat > q.max_latency_ms:
                reasons.append(f"{q.latency_metric.upper()} {lat:.0f} ms exceeds the limit of "
                               f"{q.max_latency_ms:.0f} ms")
        return c


def enumerate_candidates(catalog: CatalogReader, q: Query, builder: Optional[CandidateBuilder] = None) -> list[Candidate]:
    b = builder or CandidateBuilder(catalog, q)
    wl = q.workload
    wanted = b.wanted
    out: list[Candidate] = []
    for (mid, quant) in b.variants:
        if wanted and mid not in wanted:
            continue
        if q.quants and quant not in q.quants:
            continue
        qs = QUANTS.get(quant)
        if qs is None:
            continue
        for engine in qs.engines:
            if q.engines and engine not in q.engines:
                continue
            for ctx in wl.contexts:
                for batch in wl.batches:
                    out.append(b.build(mid, quant, engine, ctx, batch))
    return out
