"""Calibrated figures: the fitted terms (recommender.predict.fit) applied to an analytical estimate.

Prediction is plain Python (no scikit-learn), so ``recommend`` starts fast.
"""

from __future__ import annotations

import math
from typing import Literal, Optional

from pydantic import Field

from recommender.core.records import Figure, HardwareProfile, ModelSpec, Strict
from recommender.model.quant import QUANTS
from recommender.predict import constants as C
from recommender.predict.analytical import Estimate, estimate, kv_cache_bytes, variant_bytes
from recommender.predict.counts import (any_true, attention_head_width, attention_layers, block_layers,
                                        delta_rule_layers, decode_flops, is_array, maximum, minimum, moe_layers,
                                        per_model, recurrent_state_bytes_per_sequence, where, window_or)
from recommender.predict.engines import rules_for

# v2: TPOT features carry the quantized-KV and batched-column regimes; v3: the MoE layers' routing time (fixed, the
# analytical constant), the matrix kernels' own weight pass and column time above 8 sequences, K-quants' extra
# per-column work, 16-bit weights' batched columns, per-sequence logits (copy; argmax where the engine samples),
# attention per query head; the layers x (batch - 1) and (batch - 1) x 2N/peak terms are gone (they extrapolated
# B = 32 / 64 linearly from B = 4 / 16); v4: an MoE model's routed experts above 8 sequences (mul_mat_id's MMQ: the
# touched experts' weight pass and one kernel per touched expert), fitted with round 5's four MoE shapes; v5: a
# hybrid's delta-rule (Gated DeltaNet) layers get a per-layer feature of their own (counts.delta_rule_layers: their
# op chain per step; Qwen3.5-9B / Qwen3.6-35B-A3B were 9-13 % too fast leave-one-model-out, now 0.4 / 6.2 %)
# v6: an MoE model's routed experts above 8 sequences compute MMQ tiles as wide as the batch for every touched expert
# ("moe mmq padded columns ms", in place of v4's "moe mmq expert weights/bw"; batch-64 decode 14.4 -> 9.5 % median
# leave-one-model-out, docs/benchmarks.md)
# v7 (issue 25, branch h25, H200 round 8's six models fitted): MLA's attention works over the cached latent
# (counts.attention_head_width), a quantized cache's attention time counts only the layers that keep a cache
# (engines.llama_cpp.quantized_kv_decode_ms), the first logits row's copy is a feature like the others ("logits ms"
# over every sequence), and a delta-rule hybrid's recurrent states get a per-sequence pass feature
# ("delta-rule states/bw"); docs/benchmarks.md, "Round 8"
CALIBRATION_VERSION = "cal-v7"
# Feature scales for hardware with no sourced bandwidth / peak (a CPU host): the per-hardware fit absorbs the scale,
# so these only keep the features of the order of milliseconds.
NOMINAL_BANDWIDTH_BYTES_PER_S = 100e9
NOMINAL_PEAK_FLOPS_PER_S = 1e12

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


# Features whose coefficient is not fitted but fixed at 1: the analytical path's own time for a regime too few measured
# models show for a fit to learn it (leave-one-model-out with one MoE model left none to learn it from): the MoE
# layers' routing and mul_mat_id time (constants.MOE_DECODE_MS_PER_LAYER x MoE layers, analytical.moe_llama_cpp_terms)
FIXED_FEATURES: frozenset[str] = frozenset({"moe ms"})
MOE_EXPERT_KERNEL_UNIT_MS = 1e-3  # "moe mmq expert kernels" counts expert kernels; its coefficient reads as us each
LOGIT_BYTES = 4  # llama.cpp's output logits are f32 (llama_get_logits: float *), one row of vocab_size per sequence


def _attention_elements(est: Estimate, spec: ModelSpec) -> float:
    """Cached tokens x attention layers x query heads x head width (counts.attention_head_width: head_dim, MLA's
    latent) of one decode step at the run's mean context (a sliding-window layer's window at most), every sequence:
    what flash attention's decode kernels compute over."""
    mean_ctx = minimum(est.prompt_tokens + est.output_tokens / 2, est.context_tokens)
    full = attention_layers(spec) - spec.num_swa_layers
    keys = full * mean_ctx + spec.num_swa_layers * minimum(mean_ctx, window_or(spec, mean_ctx))
    return keys * spec.num_attention_heads * attention_head_width(spec) * est.batch


def routed_expert_params(spec: ModelSpec) -> float:
    """Parameters of an MoE model's routed experts (their bytes at 2 bytes per parameter: analytical.variant_bytes)."""
    return variant_bytes(spec, "F16")[2] / 2.0


def features(metric: FittedMetric, est: Estimate, spec: ModelSpec, hw: HardwareProfile,
             samples: bool = True) -> dict[str, float]:
    """The named features of one configuration for one metric (module docstring). ``samples``: the engine picks
    each sequence's token on the host from its logits (a server, the project's probe); llama.cpp's llama-bench and
    llama-batched-bench decode without sampling (their rows pass False)."""
    bw, peak, peak_q = _scales(hw, est.quant)
    cls = kernel_class(est.quant)
    b = est.batch
    if metric == "tpot_ms":
        weights = est.decode_bytes_per_step - est.decode_kv_bytes_per_step
        # every feature in ms (a coefficient of 1 is the analytical figure); layers: attention + MLP pairs
        # (counts.block_layers), each with its kernel launches and host work per step
        x = {f"weights/bw:{cls}": weights / bw * 1e3, "layers": per_model(block_layers, spec), "1 ms": 1.0}
        # the kernel regimes the analytical path knows (llama.cpp on CUDA), kept as features so that calibration
        # does not undo them: a quantized KV cache decodes at its attention kernels' speed (per query head, not per
        # byte: analytical.quantized_kv_decode_ms) in place of its bytes' read time; an f16 cache's read time plus
        # its flash-attention work per query head (tokens x layers x query heads x head_dim x
        # C.KV_QUANT_ATTN_MS_PER_ELEMENT, the per-element time measured on quantized caches, as the scale): GQA
        # models with few KV heads read few bytes but compute every query head
        if any_true(est.decode_kv_quant_ms):
            x["kv quant ms"] = est.decode_kv_quant_ms
        else:
            x["kv/bw"] = est.decode_kv_bytes_per_step / bw * 1e3
            x["attn elements ms"] = _attention_elements(est, spec) * C.KV_QUANT_ATTN_MS_PER_ELEMENT.value
        if b > 1 and hw.backend == "cpu":
            # a CPU's batched step multiplies every column on its cores (compute bound): cal-v2's terms
            x["layers*(batch-1)"] = 1.0 * spec.num_layers * (b - 1)
            x["(batch-1)*2N/peak"] = (b - 1) * 2.0 * where(spec.params_active, spec.params_active,
                                                           spec.params_total) / peak_q * 1e3
        elif b > 1:
            # a batched step: up to C.LLAMA_CPP_MMVQ_MAX_BATCH sequences mul_mat_vec_q's columns (dot products on the
            # CUDA cores); above, the MMQ matrix kernels: their column time (analytical.llama_cpp_batch_columns_ms)
            # and their own pass over the weights (tiles dequantized to int8 in shared memory, whatever the number
            # of columns up to a tile: "matrix weights/bw")
            if any_true(est.decode_columns_ms):
                name = "columns ms" if b <= C.LLAMA_CPP_MMVQ_MAX_BATCH.value else "mmq columns ms"
                x[name] = est.decode_columns_ms
                if cls == "kquant":  # K-quants' per-column work beyond the others' (vec_dot_q4_K..q6_K unpack the
                    # super-block scales for every column: measured on the H200, B = 2-64 Q4_K_M vs Q8_0 rows)
                    x[name + ":kquant extra"] = est.decode_columns_ms
            if b > C.LLAMA_CPP_MMVQ_MAX_BATCH.value:
                x["matrix weights/bw"] = weights / bw * 1e3
            if cls == "float" and hw.fp32_flops_per_s and hw.fp16_flops_per_s:
                # 16-bit weights: ggml's mul_mat_vec (CUDA cores, the MMVQ fraction of the FP32 rate per column
                # beyond the first) up to 8 columns, else cuBLAS at the FP16 tensor peak (every column)
                col = decode_flops(spec, 0, 1)
                x["columns ms:float"] = ((b - 1) * col / (C.LLAMA_CPP_MMVQ_FP32_FRACTION.value * hw.fp32_flops_per_s)
                                         if b <= C.LLAMA_CPP_MMVQ_MAX_BATCH.value
                                         else b * col / hw.fp16_flops_per_s) * 1e3
            # the expert count of an MoE row, 0 for a dense one (arrays of configurations: both kinds of rows; a
            # dense row's MoE features are 0, as absent ones are for one configuration)
            e_moe = where(spec.is_moe, spec.num_experts, 0)
            if any_true(e_moe):
                # an MoE model's routed experts above C.LLAMA_CPP_MMVQ_MAX_BATCH sequences: mul_mat_id's MMQ runs one
                # matrix kernel per touched expert, over that expert's weights with its few columns (tokens x top-k /
                # experts each), so its weight pass and its per-expert tiles cost more than the dense MMQ pass that
                # "matrix weights/bw" prices: the touched experts' bytes / bandwidth (their own coefficient) and
                # touched experts x MoE layers (us per expert kernel). Touched experts E(1-(1-k/E)^B) as in
                # analytical.estimate. Fitted on the H200 batched rows of five MoE shapes (rounds 4 and 5: Qwen3-30B-
                # A3B, Qwen1.5-MoE-A2.7B, DeepSeek-V2-Lite, Qwen3.6-35B-A3B, Mixtral-8x7B; docs/benchmarks.md)
                e, k = where(e_moe, e_moe, 1), where(e_moe, spec.num_experts_per_tok, 0)  # dense rows: 1 and 0
                touched = e * (1 - (1 - k / e) ** b)  # 0 for a dense row
                mmq = float(b > C.LLAMA_CPP_MMVQ_MAX_BATCH.value)
                x["moe mmq expert kernels"] = (mmq * touched * per_model(moe_layers, spec)
                                               * MOE_EXPERT_KERNEL_UNIT_MS)
                # cal-v6: MMQ sizes its column tile for mul_mat_id by the number of tokens, not by the tokens an
                # expert gets (ggml-cuda/mmq.cu ggml_cuda_mul_mat_q: ncols_opt = ne12 on NVIDIA; only RDNA3/4 use
                # ne12 x n_expert_used / n_expert), so every touched expert computes a tile of J = roundup(B, 8)
                # (<= 128) columns whatever few of them are its own (mmq.cuh mul_mat_q_switch_J): the routed
                # experts' column time is that of touched / E x J columns over every routed weight, at the MMQ
                # rate of the dense columns (decode_columns_ms). Replaces cal-v4's "moe mmq expert weights/bw"
                # (the touched experts' weight pass), which the fit sets to ~0 beside it (docs/benchmarks.md)
                if any_true(est.decode_columns_ms) and mmq:
                    tile = min(-(-b // 8) * 8, 128)
                    cols = tile * maximum(1.0, -(-(b * k / where(e_moe, touched, 1)) // tile))  # one expert's tiles
                    col_flops = decode_flops(spec, 0, 1)
                    x["moe mmq padded columns ms"] = (est.decode_columns_ms * touched / e * cols * 2.0
                                                      * per_model(routed_expert_params, spec) / (b * col_flops))
        if hw.backend != "cpu":
            # every sequence's f32 logits row (vocab_size) copied to the host at the pageable copy rate, the first
            # one included (cal-v7; cal-v3..v6 counted the rows beyond the first, leaving the first to "1 ms"):
            # llama_decode copies each output row every step (llama-context.cpp decode: ggml_backend_tensor_get_async
            # of t_logits), so a 262K-entry vocabulary (gemma-3) copies 1 MB a token where Llama-3 copies 0.5 MB
            x["logits ms"] = (b * spec.vocab_size * LOGIT_BYTES / C.HOST_TO_GPU_COPY_BYTES_PER_S.value * 1e3)
        if samples:  # the host reads every sequence's logits row to pick its token (argmax, samplers)
            x["argmax ms"] = b * spec.vocab_size * LOGIT_BYTES / C.HOST_MEMORY_BANDWIDTH.value * 1e3
        delta = per_model(delta_rule_layers, spec)
        if any_true(delta):  # a hybrid's delta-rule layers: their own kernel launches per step (counts)
            x["delta-rule layers"] = 1.0 * delta
            # cal-v7: and every sequence's F32 recurrent state (counts.recurrent_state_bytes), which the step reads
            # and writes several times over: llama.cpp's autoregressive gated delta rule (src/models/delta-net-
            # base.cpp build_delta_net_autoregressive: s x exp(g), s^T k, the k (x) d outer product added to s,
            # s q) and the copy of the new state into the cache (ggml_cpy into ssm_states_all); kv/bw counts one
            # read of it. Its coefficient is the number of such passes at the weights' rate (fitted)
            states = where(delta > 0, per_model(recurrent_state_bytes_per_sequence, spec), 0)
            x["delta-rule states/bw"] = b * states / bw * 1e3
        moe_ms = rules_for(est.engine).moe_terms(spec)[0]
        if any_true(moe_ms):
            x["moe ms"] = moe_ms  # FIXED_FEATURES: coefficient 1
        return x
    if metric == "ttft_ms":
        tokens = est.prompt_tokens * b
        chunks = rules_for(est.engine).prefill_chunks(tokens)  # llama.cpp: micro-batches of n_ubatch
        mm = est.prefill_flops - est.prefill_attention_flops
        return {f"matmul/peak:{cls}": mm / peak_q * 1e3, "attention/peak": est.prefill_attention_flops / peak * 1e3,
                "layers*ubatches": 1.0 * spec.num_layers * chunks,
                "ubatches*weights/bw": chunks * est.weights_gpu_bytes / bw * 1e3, "1 ms": 1.0}
    held = kv_cache_bytes(spec, minimum(est.prompt_tokens + est.output_tokens, est.context_tokens), b, est.engine,
                          est.kv_dtype)
    return {"weights_gpu": 1.0 * est.weights_gpu_bytes, "kv_cache": 1.0 * est.kv_cache_bytes,
            "kv_held": 1.0 * held, "compute_buffer": 1.0 * est.compute_buffer_bytes, "1 byte": 1.0}


def nominal_cpu(hw: HardwareProfile) -> HardwareProfile:
    """A CPU profile with the NOMINAL_* scales in place of the figures no source gives (calibration only: the
    fitted coefficients absorb the scale; never shown as an estimate)."""
    return hw.model_copy(update={"memory_bandwidth_bytes_per_s": NOMINAL_BANDWIDTH_BYTES_PER_S,
                                 "fp16_flops_per_s": NOMINAL_PEAK_FLOPS_PER_S})


def _predict_linear(names: list[str], coef: list[float], x: dict[str, float]) -> Optional[float]:
    known = set(names)
    if any(is_array(v) for v in x.values()):  # arrays of configurations: NaN where a row has an unknown feature
        unknown = [v != 0 for k, v in x.items() if k not in known]
        p = sum(c * x.get(n, 0.0) for n, c in zip(names, coef))
        return where(sum(unknown) > 0, float("nan"), p) if unknown else p
    if any(v and k not in known for k, v in x.items()):
        return None  # a kernel class this hardware has no measured rows for
    return sum(c * x.get(n, 0.0) for n, c in zip(names, coef))


def predict_term(t: Term, x: dict[str, float], analytic: Optional[float]) -> Optional[float]:
    """The term's figure; None when it has none. With arrays of configurations NaN marks the rows without one."""
    if t.kind == "scale":
        return None if analytic is None else analytic * t.scale
    p = _predict_linear(t.features, t.coef, x)
    if is_array(p):
        return where(p > 0, p, float("nan"))
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
        out: dict[str, Figure] = {}
        for metric, (val, interval, t) in self.values(est, spec, hw, hw_key).items():
            if metric == "total_vram_bytes":
                val = int(round(val))
            out[metric] = Figure(value=val, unit="bytes" if metric == "total_vram_bytes" else "ms",
                                 provenance="calibrated", basis=t.basis, interval=interval)
        return out

    def values(self, est: Estimate, spec: ModelSpec, hw: HardwareProfile, hw_key: str) -> dict[str, tuple]:
        """metric -> (calibrated value, its interval, the term) of an analytical estimate on this hardware; a metric
        without a term (or a kernel class the term never saw) is left out. Array-agnostic: ``est`` may hold arrays of
        configurations (analytical.EstimateArrays, ``spec`` then a vector.Columns), the values are then arrays with
        NaN where a row has no calibrated figure."""
        base, fhw = est, hw
        if hw.backend == "cpu":  # features and scale terms use the nominal CPU scale the rows were fitted with
            fhw = nominal_cpu(hw)
            base = estimate(spec, est.quant, est.engine, fhw, context_tokens=est.context_tokens,
                            batch=est.batch, prompt_tokens=est.prompt_tokens, output_tokens=est.output_tokens,
                            kv_dtype=est.kv_dtype)
        out: dict[str, tuple] = {}
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
            out[metric] = (val, interval, t)
        return out
