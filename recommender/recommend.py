"""Candidates (model x quant x engine x batch x context) -> estimates -> hard constraints -> score -> ranking."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from . import constants as C
from .catalog.store import Catalog
from .estimate import Estimate, estimate, overlay_measurement
from .quality import QualityIndex
from .score import score_rows
from .types import HardwareProfile, Measurement, Metric, ModelSpec, Strict, Workload

LatencyMetric = Literal["ttft", "tpot", "e2e"]
_LATENCY_FIELD = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms"}


class Query(Strict):
    vram_bytes: int
    max_latency_ms: Optional[float] = None
    latency_metric: LatencyMetric = "ttft"
    workload: Workload
    hardware: HardwareProfile
    weights: dict[str, float]
    normalization: Literal["minmax", "zscore"] = "minmax"
    missing: Literal["worst", "mean"] = "worst"
    models: list[str] = Field(default_factory=list)  # restrict to these catalog ids
    engines: list[str] = Field(default_factory=list)
    quants: list[str] = Field(default_factory=list)
    per_model: int = 1  # best candidates kept per model (de-duplication)
    top: int = 10


class Candidate(Estimate):
    rank: Optional[int] = None
    params_total: int
    params_active: int
    zh_accuracy: Optional[float]
    en_accuracy: Optional[float]
    ppl_ratio: Optional[float]
    quality: dict[str, Metric]
    latency_ms: Optional[float]  # the constrained latency metric
    score: Optional[float] = None  # weighted normalized cost, lower is better
    score_parts: dict[str, float] = Field(default_factory=dict)
    excluded: list[str] = Field(default_factory=list)


class Recommendation(Strict):
    query: Query
    candidates: list[Candidate]
    excluded: list[Candidate]  # strongest excluded candidates, with reasons
    counts: dict[str, int]
    notes: list[str] = Field(default_factory=list)


def _cc(hw: HardwareProfile) -> Optional[tuple[int, int]]:
    if not hw.compute_capability:
        return None
    major, _, minor = hw.compute_capability.partition(".")
    return int(major), int(minor or 0)


def engine_supported(engine: str, family: str, quant: str, hw: HardwareProfile) -> Optional[str]:
    """None when the engine can run this quantization on this hardware, else the reason it cannot."""
    if hw.backend == "metal" and engine != "llama.cpp":
        return f"{engine} has no Apple Metal backend"
    if hw.backend == "cpu" and family not in ("float", "gguf"):
        return f"{quant} kernels need a GPU (CPU planning covers GGUF and float weights)"
    cc = _cc(hw)
    keys = [(engine, "*"), (engine, family), ("*", quant.lower())]
    for key in keys:
        rule = C.MIN_COMPUTE_CAPABILITY.get(key)
        if rule and cc is not None and hw.backend == "cuda" and cc < rule[0]:
            return f"{quant} on {engine} needs compute capability >= {rule[0][0]}.{rule[0][1]} ({rule[1]})"
    return None


def measured_index(measurements: list[Measurement], profiles: list[HardwareProfile],
                   swa_models: frozenset[str] = frozenset()) -> dict[tuple, Measurement]:
    """ok rows by (profile name, model, quant, engine, batch, context, KV dtype). Rows arrive overlay first, newest
    first: the first row for a key wins. Rows taken with llama.cpp's swa_full (every layer caching the whole
    context) are left out: the estimates, like llama-server, keep only the window on sliding-window layers. A row's hardware is named as NVML reported it; it is filed under the shipped
    profile with that name (e.g. 'NVIDIA H200' -> 'H200 SXM') so planning with --gpu finds it too."""
    idx: dict[tuple, Measurement] = {}
    keys: dict[str, str] = {}  # hardware name -> key (a few names, many rows)
    for m in measurements:
        swa_full = m.raw.get("engine", {}).get("details", {}).get("swa_full")
        if m.status != "ok" or (swa_full and m.model_id in swa_models):
            continue  # a full-size sliding-window cache is not the configuration estimated
        if m.hardware_name not in keys:
            keys[m.hardware_name] = hardware_key(m.hardware_name, profiles)
        idx.setdefault((keys[m.hardware_name], m.model_id, m.quant, m.engine, m.batch, m.context_tokens,
                        m.kv_dtype), m)
    return idx


def hardware_key(name: str, profiles: list[HardwareProfile]) -> str:
    """One name per GPU model: a shipped profile's name when NVML's name matches one ('NVIDIA H200' -> 'h200 sxm'),
    so rows measured here are found whether one plans with --gpu or on this machine."""
    from .hardware import match_profile  # noqa: PLC0415

    prof = match_profile(name, profiles)
    return (prof.name if prof else name).lower()


def swa_models(models: dict[str, ModelSpec]) -> frozenset[str]:
    return frozenset(mid for mid, s in models.items() if s.num_swa_layers)


def refine_estimate(est: Estimate, spec: ModelSpec, hw: HardwareProfile, hw_key: str, calibrator,
                    measured: dict[tuple, Measurement]) -> Estimate:
    """Precedence measured > calibrated > estimated: the calibrated figures of this hardware's terms, then a measured
    row of exactly this configuration (``measured_index``) over them. Measured rows and calibration fits are taken with
    every layer on the GPU, so a partial-offload estimate stays as it is."""
    if est.gpu_layers is not None:
        return est
    if calibrator.has(est.engine, hw_key):
        est = calibrator.apply(est, spec, hw, hw_key)
    m = measured.get((hw_key, est.model, est.quant, est.engine, est.batch, est.context_tokens, est.kv_dtype))
    return overlay_measurement(est, m) if m is not None else est


class CandidateBuilder:
    """Everything a candidate needs from the catalog, read once: estimates, the measured-row overlay, quality and the
    hard constraints of one query. ``enumerate_candidates`` (recommend) and ``recommender.tune`` (one configuration
    per trial, KV dtype and partial offload included) build candidates through it."""

    def __init__(self, catalog: Catalog, q: Query, calibrator=None) -> None:
        from .hardware import load_profiles  # noqa: PLC0415

        if calibrator is None:
            from .calibration import load_calibrator  # noqa: PLC0415

            calibrator = load_calibrator(catalog)
        self.calibrator = calibrator

        self.q = q
        self.models = catalog.models()
        self.variants = catalog.variants()
        self.quality = QualityIndex(catalog)
        profiles = load_profiles()
        self.measured = measured_index(catalog.measurements(status="ok"), profiles, swa_models(self.models))
        self.hw_key = hardware_key(q.hardware.name, profiles)
        self._fixed: dict[tuple, tuple] = {}

    def build(self, mid: str, quant: str, engine: str, ctx: int, batch: int, kv_dtype: Optional[str] = None,
              gpu_layers: Optional[int] = None) -> Candidate:
        q, hw, wl = self.q, self.q.hardware, self.q.workload
        spec: ModelSpec = self.models[mid]
        variant = self.variants[(mid, quant)]
        key = (mid, quant, engine)
        fixed = self._fixed.get(key)
        if fixed is None:  # per (model, quant, engine): quality and engine support (contexts x batches reuse them)
            from .quant import QUANTS  # noqa: PLC0415

            fixed = self._fixed[key] = (self.quality.zh(mid, quant), self.quality.en(mid, quant),
                                        self.quality.ppl_ratio(quant, mid),
                                        engine_supported(engine, QUANTS[quant].family, quant, hw))
        zh, en, ppl, unsupported = fixed
        prompt = min(wl.prompt_tokens, max(ctx - wl.output_tokens, 1))
        est = estimate(spec, quant, engine, hw, context_tokens=ctx, batch=batch, prompt_tokens=prompt,
                       output_tokens=wl.output_tokens, variant=variant, kv_dtype=kv_dtype, gpu_layers=gpu_layers)
        est = refine_estimate(est, spec, hw, self.hw_key, self.calibrator, self.measured)
        lat = getattr(est, _LATENCY_FIELD[q.latency_metric])
        reasons = []
        if unsupported:
            reasons.append(unsupported)
        if ctx > spec.max_position_embeddings:
            reasons.append(f"context {ctx} exceeds the model's maximum of {spec.max_position_embeddings}")
        if est.total_vram_bytes > q.vram_bytes:
            reasons.append(f"needs {est.total_vram_bytes / 1024**3:.1f} GiB of GPU memory, budget is "
                           f"{q.vram_bytes / 1024**3:.1f} GiB")
        if q.max_latency_ms is not None:
            if lat is None:
                reasons.append(f"{q.latency_metric.upper()} unknown ({'; '.join(est.notes) or 'no data'}), "
                               f"so the latency limit cannot be checked")
            elif lat > q.max_latency_ms:
                reasons.append(f"{q.latency_metric.upper()} {lat:.0f} ms exceeds the limit of "
                               f"{q.max_latency_ms:.0f} ms")
        # model_construct: every field comes from validated records above (no second validation pass
        # over ~1,300 candidates: recommend's cold start matters); vars(est), not dict(est): half the cost
        return Candidate.model_construct(
            **vars(est), params_total=spec.params_total, params_active=spec.params_active,
            zh_accuracy=zh.value, en_accuracy=en.value, ppl_ratio=ppl.value,
            quality={"zh": zh, "en": en, "ppl": ppl}, latency_ms=lat, excluded=reasons, rank=None,
            score=None, score_parts={})


def enumerate_candidates(catalog: Catalog, q: Query, calibrator=None) -> list[Candidate]:
    from .quant import QUANTS  # noqa: PLC0415

    b = CandidateBuilder(catalog, q, calibrator)
    wl = q.workload
    wanted = set(q.models)
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


def _costs(c: Candidate) -> dict[str, Optional[float]]:
    return {
        "latency": c.latency_ms,
        "vram": float(c.total_vram_bytes),
        "ppl": c.ppl_ratio,
        "zh": None if c.zh_accuracy is None else 100.0 - c.zh_accuracy,
        "en": None if c.en_accuracy is None else 100.0 - c.en_accuracy,
    }


# Scores are rounded to this many decimals before sorting: closer ones tie and are ordered by latency (order_key).
SCORE_DECIMALS = 6


def _apply_scores(cands: list[Candidate], q: Query) -> None:
    scored = score_rows([_costs(c) for c in cands], q.weights, q.normalization, q.missing)
    for c, (s, parts) in zip(cands, scored):
        c.score = round(s, SCORE_DECIMALS)
        c.score_parts = {k: round(v, SCORE_DECIMALS) for k, v in parts.items()}


def _dedupe(cands: list[Candidate], per_model: int) -> list[Candidate]:
    seen: dict[str, int] = {}
    out = []
    for c in cands:
        n = seen.get(c.model, 0)
        if per_model <= 0 or n < per_model:
            out.append(c)
            seen[c.model] = n + 1
    return out


def order_key(score: Optional[float], c: Candidate) -> tuple:
    """Ranking order: (rounded) score, then latency, model, quant, engine."""
    return (score, c.latency_ms if c.latency_ms is not None else float("inf"), c.model, c.quant, c.engine)


def _order(c: Candidate) -> tuple:
    return order_key(c.score, c)


def recommend(catalog: Catalog, q: Query) -> Recommendation:
    from .calibration import load_calibrator  # noqa: PLC0415

    calibrator = load_calibrator(catalog)
    cands = enumerate_candidates(catalog, q, calibrator)
    feasible = [c for c in cands if not c.excluded]
    infeasible = [c for c in cands if c.excluded]
    _apply_scores(feasible, q)
    feasible.sort(key=_order)
    ranked = _dedupe(feasible, q.per_model)[: q.top]
    for i, c in enumerate(ranked, 1):
        c.rank = i
    # The strongest excluded candidates: score everything together (as if there were no limits) and keep the
    # best-scoring excluded ones, one per model, so --explain shows what the limits cost.
    strongest: list[Candidate] = []
    if infeasible:
        scored = score_rows([_costs(c) for c in cands], q.weights, q.normalization, q.missing)
        pool = sorted(((s, i) for i, (s, _) in enumerate(scored) if cands[i].excluded),
                      key=lambda si: (si[0], cands[si[1]].model, si[1]))
        seen: set[str] = set()
        for s, i in pool:
            if cands[i].model not in seen and len(strongest) < 5:
                seen.add(cands[i].model)
                strongest.append(cands[i].model_copy(update={
                    "score": round(s, 6), "score_parts": {k: round(v, 6) for k, v in scored[i][1].items()}}))
    notes = []
    if calibrator.stale:
        notes.append(f"{calibrator.stale} stored calibration(s) come from another version and were ignored: rerun "
                     f"`recommender calibrate` on that machine")
    for crit, w in q.weights.items():
        if w and feasible and all(v is None for v in (_costs(c)[crit] for c in feasible)):
            notes.append(f"no candidate has a value for '{crit}': its weight ({w:.2f}) did not affect the ranking")
    if not ranked:
        notes += no_fit_notes(infeasible)
    return Recommendation(query=q, candidates=ranked, excluded=strongest,
                          counts={"candidates": len(cands), "feasible": len(feasible), "excluded": len(infeasible),
                                  "models": len({c.model for c in cands})},
                          notes=notes)


def no_fit_notes(infeasible: list[Candidate]) -> list[str]:
    """The notes for a question nothing fits."""
    notes = ["no candidate satisfies the constraints"]
    if any("unknown" in r for c in infeasible for r in c.excluded):
        notes.append("some candidates have an unknown latency on this GPU profile (no sourced peak FLOP/s): "
                     "try --latency-metric tpot, or plan for a profile with that figure")
    return notes
