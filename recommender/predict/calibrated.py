"""Calibrated figures: the fitted terms (recommender.predict.fit) applied to an analytical estimate.

Prediction is plain Python (no scikit-learn), so ``recommend`` starts fast.
"""

from __future__ import annotations

import math
from typing import Literal, Optional

from pydantic import Field

from recommender.core.records import Figure, HardwareProfile, ModelSpec, Strict
from recommender.model.quant import QUANTS
from recommender.predict.analytical import Estimate, estimate, kv_cache_bytes

CALIBRATION_VERSION = "cal-v2"  # v2: TPOT features carry the quantized-KV and batched-column regimes
# Feature scales for hardware with no sourced bandwidth / peak (a CPU host): the per-hardware fit absorbs the scale,
# so these only keep the features of the order of milliseconds.
NOMINAL_BANDWIDTH_BYTES_PER_S = 100e9
NOMINAL_PEAK_FLOPS_PER_S = 1e12
LLAMA_CPP_N_UBATCH = 512  # llama.cpp prompt micro-batch (constants.LLAMA_CPP_N_UBATCH)

FittedMetric = Literal["tpot_ms", "ttft_ms", "total_vram_bytes"]
METRICS: tuple[FittedMetric, ...] = ("tpot_ms", "ttft_ms", "total_vram_bytes")
MEASURED_FIELD = {"tpot_ms": "tpot_ms", "ttft_ms": "ttft_ms", "total_vram_bytes": "peak_vram_bytes"}


class Term(Strict):
    engine: str
    hardware: str  # hardware key (recommend.hardware_key)
    metric: FittedMetric
    kind: Literal["linear", "scale"]
    features: list[str] = Field(default_factory=list)
    coef: list[float] = Field(default_factory=list)
    scale: float = 1.0
    n_rows: int
    models: list[str]
    interval: list[float]  # [low, high] quantiles of held-out relative errors (predicted - measured) / measured
    basis: str


class CalibrationSet(Strict):
    version: str = CALIBRATION_VERSION
    fitted_at: str
    fitted_by: str  # sklearn version
    terms: list[Term]

    def index(self) -> dict[tuple[str, str, str], Term]:
        return {(t.engine, t.hardware, t.metric): t for t in self.terms}


# --------------------------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------------------------
def kernel_class(quant: str) -> str:
    """Quantizations whose kernels read weights alike (one efficiency coefficient each): the kernel class of the
    quantization's record (recommender.model.quant.QUANTS); a name outside the table is a class of its own."""
    spec = QUANTS.get(quant)
    return spec.kernel_class if spec is not None else quant.lower()


def _scales(hw: HardwareProfile, quant: str) -> tuple[float, float, float]:
    bw = hw.memory_bandwidth_bytes_per_s or NOMINAL_BANDWIDTH_BYTES_PER_S  # a CPU comes in as nominal_cpu(...)
    peak = hw.fp16_flops_per_s or NOMINAL_PEAK_FLOPS_PER_S
    peak_q = hw.int8_ops_per_s if (kernel_class(quant) != "float" and hw.int8_ops_per_s) else peak
    return bw, peak, peak_q


def features(metric: FittedMetric, est: Estimate, spec: ModelSpec, hw: HardwareProfile) -> dict[str, float]:
    """The named features of one configuration for one metric (module docstring)."""
    bw, peak, peak_q = _scales(hw, est.quant)
    cls = kernel_class(est.quant)
    b = est.batch
    if metric == "tpot_ms":
        weights = est.decode_bytes_per_step - est.decode_kv_bytes_per_step
        x = {f"weights/bw:{cls}": weights / bw * 1e3, "layers": float(spec.num_layers), "1 ms": 1.0,
             "layers*(batch-1)": float(spec.num_layers * (b - 1)),
             "(batch-1)*2N/peak": (b - 1) * 2.0 * (spec.params_active or spec.params_total) / peak_q * 1e3}
        # the kernel regimes the analytical path knows (llama.cpp on CUDA), kept as features so that calibration
        # does not undo them: a quantized KV cache decodes at its attention kernels' speed (per query head, not per
        # byte: analytical.quantized_kv_decode_ms) in place of its bytes' read time; a batched step adds its columns'
        # mul_mat_vec_q / MMQ time (analytical.llama_cpp_batch_columns_ms)
        if est.decode_kv_quant_ms:
            x["kv quant ms"] = est.decode_kv_quant_ms
        else:
            x["kv/bw"] = est.decode_kv_bytes_per_step / bw * 1e3
        if est.decode_columns_ms:
            x["columns ms"] = est.decode_columns_ms
        return x
    if metric == "ttft_ms":
        tokens = est.prompt_tokens * b
        chunks = math.ceil(tokens / LLAMA_CPP_N_UBATCH) if est.engine == "llama.cpp" else 1
        mm = est.prefill_flops - est.prefill_attention_flops
        return {f"matmul/peak:{cls}": mm / peak_q * 1e3, "attention/peak": est.prefill_attention_flops / peak * 1e3,
                "layers*ubatches": float(spec.num_layers * chunks),
                "ubatches*weights/bw": chunks * est.weights_gpu_bytes / bw * 1e3, "1 ms": 1.0}
    held = kv_cache_bytes(spec, min(est.prompt_tokens + est.output_tokens, est.context_tokens), b, est.engine,
                          est.kv_dtype)
    return {"weights_gpu": float(est.weights_gpu_bytes), "kv_cache": float(est.kv_cache_bytes),
            "kv_held": float(held), "compute_buffer": float(est.compute_buffer_bytes), "1 byte": 1.0}


def nominal_cpu(hw: HardwareProfile) -> HardwareProfile:
    """A CPU profile with the NOMINAL_* scales in place of the figures no source gives (calibration only: the
    fitted coefficients absorb the scale; never shown as an estimate)."""
    return hw.model_copy(update={"memory_bandwidth_bytes_per_s": NOMINAL_BANDWIDTH_BYTES_PER_S,
                                 "fp16_flops_per_s": NOMINAL_PEAK_FLOPS_PER_S})


def _predict_linear(names: list[str], coef: list[float], x: dict[str, float]) -> Optional[float]:
    known = set(names)
    if any(v and k not in known for k, v in x.items()):
        return None  # a kernel class this hardware has no measured rows for
    return sum(c * x.get(n, 0.0) for n, c in zip(names, coef))


def predict_term(t: Term, x: dict[str, float], analytic: Optional[float]) -> Optional[float]:
    if t.kind == "scale":
        return None if analytic is None else analytic * t.scale
    p = _predict_linear(t.features, t.coef, x)
    return p if p is not None and p > 0 else None


# --------------------------------------------------------------------------------------------------------------
# Applying a calibration to an estimate
# --------------------------------------------------------------------------------------------------------------
META_KEY = "calibration"


def load_calibrator(catalog) -> "Calibrator":
    """The calibrations stored in a catalog: the user overlay's (this machine) first, then the shipped one."""
    sets, stale = [], 0
    for v in catalog.meta_values(META_KEY):
        try:
            cs = CalibrationSet.model_validate_json(v)
        except ValueError:
            stale += 1
            continue
        if cs.version != CALIBRATION_VERSION:
            stale += 1
            continue
        sets.append(cs)
    return Calibrator(sets, stale)


class Calibrator:
    """Looks up terms by (engine, hardware key, metric); user (machine) terms win over shipped ones."""

    def __init__(self, sets: list[CalibrationSet], stale: int = 0) -> None:
        self.stale = stale  # stored calibrations of another version or schema, ignored
        self.terms: dict[tuple[str, str, str], Term] = {}
        for s in reversed(sets):  # later (shipped) first, earlier (user) overrides
            self.terms.update(s.index())
        self._pairs = {(engine, hardware) for engine, hardware, _m in self.terms}  # has() runs once per candidate

    def has(self, engine: str, hardware: str) -> bool:
        return (engine, hardware) in self._pairs

    def figures(self, est: Estimate, spec: ModelSpec, hw: HardwareProfile, hw_key: str) -> dict[str, Figure]:
        """The calibrated figures (TTFT, TPOT, peak memory) of one analytical estimate on this hardware, each with
        its term's basis and interval; a metric without a term (or a kernel class the term never saw) is left out."""
        base, fhw = est, hw
        if hw.backend == "cpu":  # features and scale terms use the nominal CPU scale the rows were fitted with
            fhw = nominal_cpu(hw)
            base = estimate(spec, est.quant, est.engine, fhw, context_tokens=est.context_tokens,
                            batch=est.batch, prompt_tokens=est.prompt_tokens, output_tokens=est.output_tokens,
                            kv_dtype=est.kv_dtype)
        out: dict[str, Figure] = {}
        for metric in METRICS:
            t = self.terms.get((est.engine, hw_key, metric))
            if t is None or (metric == "total_vram_bytes" and hw.backend == "cpu"):
                continue
            val = predict_term(t, features(metric, base, spec, fhw), getattr(base, metric))
            if val is None:
                continue
            # held-out relative errors e = (predicted - measured) / measured, so measured = predicted / (1 + e)
            lo, hi = t.interval
            interval = (val / (1 + hi), val / (1 + lo) if lo > -1 else math.inf)
            if metric == "total_vram_bytes":
                val = int(round(val))
            out[metric] = Figure(value=val, unit="bytes" if metric == "total_vram_bytes" else "ms",
                                 provenance="calibrated", basis=t.basis, interval=interval)
        return out
