"""Analytical memory and latency estimates (pure functions, no I/O).

Memory (bytes, on the GPU):   weights resident on the GPU + KV cache + compute/activation buffers + runtime overhead
Latency (ms):                 prefill = max(FLOPs / (peak x MFU), weight bytes / (bandwidth x efficiency))
                                        + fixed overhead
                              decode  = max(bytes read per step / (bandwidth x efficiency), FLOPs / (peak x MFU))
                                        + per-token overhead
Every constant comes from recommender.predict.constants with its source; docs/estimates.md derives each term.
TTFT and TPOT as vLLM's benchmarks define them (time to the first output token; (E2E - TTFT)/(n_out - 1)). The figures
derived from them (E2E, decode rate, throughput) and the calibrated and measured figures that replace them are the
Predictor's (recommender.predict.predictor): this module only computes the analytical terms.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional, TypeVar

from pydantic import Field


from recommender.core.records import HardwareProfile, ModelSpec, Provenance, Strict, Variant
from recommender.model.quant import QUANTS, weights_breakdown
from recommender.predict import constants as C


class RunShape(Strict):
    """The configuration a figure is for: model, quantization, engine, hardware and the run's shape (the leading
    fields of both the analytical Estimate and the Predictor's Prediction)."""

    model: str
    quant: str
    engine: str
    hardware: str
    context_tokens: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    kv_dtype: str
    gpu_layers: Optional[int] = None  # repeating layers on the GPU (llama.cpp partial offload); None = every layer


class Estimate(RunShape):
    weights_bytes: int  # the whole variant (file size of the tensors)
    weights_gpu_bytes: int  # resident on the GPU
    host_weights_bytes: int  # kept in host RAM (llama.cpp: token embeddings; with partial offload the host layers)
    kv_bytes_per_token: int  # per token of context, every layer storing it (sliding-window layers included)
    kv_cache_bytes: int  # for context_tokens x batch, sliding windows and padding respected
    compute_buffer_bytes: int
    runtime_overhead_bytes: int
    overhead_bytes: int  # compute_buffer_bytes + runtime_overhead_bytes
    total_vram_bytes: int
    ttft_ms: Optional[float]  # None: the profile lacks the figure the formula needs (notes say which)
    tpot_ms: Optional[float]
    decode_bytes_per_step: int  # bytes read from GPU memory per decode step (weights touched + KV of every sequence)
    decode_kv_bytes_per_step: int = 0  # the KV-cache part of decode_bytes_per_step
    host_bytes_per_step: int = 0  # bytes read from host RAM per decode step (partial offload: host layers + their KV)
    prefill_flops: float  # FLOPs of the prefill of prompt_tokens x batch
    prefill_attention_flops: float = 0.0  # the attention (QK^T, AV) part of prefill_flops
    # ms of tpot_ms that the analytical model gives to llama.cpp's kernel regimes (the calibration's features keep
    # them): a quantized KV cache's attention (quantized_kv_decode_ms, GPU share) and a batched step's columns
    # (llama_cpp_batch_columns_ms); 0 where the regime does not apply
    decode_kv_quant_ms: float = 0.0
    decode_columns_ms: float = 0.0
    weights_bytes_provenance: Provenance = "estimated"  # the variant's: measured for a file that was read
    hardware_bandwidth_bytes_per_s: float = 0.0  # the profile's (0: not sourced)
    basis: dict[str, str]
    notes: list[str] = Field(default_factory=list)
    # ms: the GPU family's spread (constants.FamilySpeed intervals) around ttft_ms / tpot_ms, where the family has one
    intervals: dict[str, tuple[float, float]] = Field(default_factory=dict)


_F = TypeVar("_F", bound=Callable)
_MEMOS: list[dict] = []
MEMO_MAX_ENTRIES = 65_536  # per memo: a long process (tune, the test suite) starts it again past this


def per_record(fn: _F) -> _F:
    """A memo of a pure function of a record (its first argument: a ModelSpec or HardwareProfile) and other hashable
    positional arguments. recommend asks the same per-model and per-GPU terms for each of ~10,000 configurations.
    The record is keyed by identity and held by the memo (so its id is not reused while it is in it): records are
    values, never changed once built. Calls with keyword arguments are computed as usual. clear_memos() empties
    every memo (bench/gpu_loo.py after it replaces the family fits these terms read)."""
    memo: dict[tuple, tuple] = {}
    _MEMOS.append(memo)

    @functools.wraps(fn)
    def memoized(record, *args, **kwargs):
        if kwargs:
            return fn(record, *args, **kwargs)
        key = (id(record), *args)
        hit = memo.get(key)
        if hit is not None and hit[0] is record:
            return hit[1]
        if len(memo) >= MEMO_MAX_ENTRIES:
            memo.clear()
        value = fn(record, *args)
        memo[key] = (record, value)
        return value

    return memoized  # type: ignore[return-value]


def clear_memos() -> None:
    for memo in _MEMOS:
        memo.clear()


def _family(quant: str) -> str:

    return QUANTS[quant].family


def _const(table: dict[str, C.Const] | dict, key: str) -> C.Const:
    return table.get(key) or table["*"]


_BREAKDOWN_CACHE: dict[tuple, tuple[int, int, int]] = {}


def variant_bytes(spec: ModelSpec, quant: str) -> tuple[int, int, int]:
    """(total, token-embedding, routed-expert) bytes of one variant, tensor by tensor (cached per run)."""
    key = (spec.id, spec.params_total, spec.num_layers, spec.hidden_size, quant)
    hit = _BREAKDOWN_CACHE.get(key)
    if hit is None:

        total = embd = experts = 0
        for name, _type, nbytes in weights_breakdown(spec, quant):
            total += nbytes
            if name == "token_embd.weight":
                embd = nbytes
            if "_exps." in name:
                experts += nbytes
        hit = _BREAKDOWN_CACHE[key] = (total, embd, experts)
    return hit


_OUTSIDE_CACHE: dict[tuple, int] = {}


def output_bytes(spec: ModelSpec, quant: str) -> int:
    """Bytes of the tensors outside the repeating blocks other than the token embedding (output.weight,
    output_norm.weight): llama.cpp's "output layer", on the GPU only when every layer is offloaded."""
    key = (spec.id, spec.params_total, spec.num_layers, spec.hidden_size, quant)
    hit = _OUTSIDE_CACHE.get(key)
    if hit is None:

        hit = _OUTSIDE_CACHE[key] = sum(n for name, _t, n in weights_breakdown(spec, quant)
                                        if not name.startswith("blk.") and name != "token_embd.weight")
    return hit


_MTP_CACHE: dict[tuple, tuple[int, int]] = {}


def mtp_bytes(spec: ModelSpec, quant: str) -> tuple[int, int]:
    """Bytes of the multi-token-prediction blocks a GGUF carries after the trunk (blk.{num_layers}...; Qwen3-Next /
    Qwen3.5 / Nemotron-3-Super): part of the file, but llama.cpp does not load them unless asked for MTP drafting
    (src/models/qwen35.cpp, qwen3next.cpp, nemotron-h.cpp: mtp_flags = TENSOR_SKIP without load_mtp, which
    llama_model_default_params leaves false), so they take no memory and are not read per token. Returns (total,
    routed-expert) bytes of those blocks."""
    if not spec.nextn_layers:
        return 0, 0
    key = (spec.id, spec.params_total, spec.num_layers, spec.hidden_size, quant)
    hit = _MTP_CACHE.get(key)
    if hit is None:
        trunk = tuple(f"blk.{i}." for i in range(spec.num_layers, spec.num_layers + spec.nextn_layers))
        rows = [(name, n) for name, _t, n in weights_breakdown(spec, quant) if name.startswith(trunk)]
        hit = _MTP_CACHE[key] = (sum(n for _name, n in rows), sum(n for name, n in rows if "_exps." in name))
    return hit


# ------------------------------------------------------------------------------------------------------------
# KV cache
# ------------------------------------------------------------------------------------------------------------
def kv_elements_per_token_per_layer(spec: ModelSpec, engine: str) -> int:
    """K and V elements one token adds to one layer's cache.

    Standard / grouped-query attention: 2 x kv_heads x head_dim (the GQA-aware formula).
    MLA (DeepSeek-V2): vLLM and llama.cpp cache the compressed latent, kv_lora_rank + qk_rope_head_dim per token
    (DeepSeek-V2 paper, sec. 2.1.2); transformers' eager cache stores full per-head K (nope+rope) and V.
    """
    if spec.is_mla:
        if engine == "transformers":
            return spec.num_attention_heads * (spec.qk_nope_head_dim + spec.qk_rope_head_dim + spec.v_head_dim)
        return spec.kv_lora_rank + spec.qk_rope_head_dim
    return 2 * spec.num_kv_heads * spec.head_dim


@per_record
def kv_bytes_per_token(spec: ModelSpec, engine: str = "llama.cpp", kv_dtype: str = "f16") -> int:
    per_layer = kv_elements_per_token_per_layer(spec, engine) * C.KV_DTYPE_BYTES[kv_dtype]
    return int(round(per_layer * attention_layers(spec)))


def _round_up(n: int, multiple: int) -> int:
    """n rounded up to a multiple (ggml's GGML_PAD)."""
    return -(-n // multiple) * multiple


@per_record
def kv_cache_bytes(spec: ModelSpec, context_tokens: int, batch: int, engine: str = "llama.cpp",
                   kv_dtype: str = "f16") -> int:
    """Cache for `batch` sequences of `context_tokens` each; sliding-window layers keep at most the window."""
    per_layer_token = kv_elements_per_token_per_layer(spec, engine) * C.KV_DTYPE_BYTES[kv_dtype]
    ctx = context_tokens
    swa_tokens = min(ctx, spec.sliding_window or ctx)
    if engine == "llama.cpp":
        pad = int(C.LLAMA_CPP_CTX_PAD.value)
        ctx = _round_up(ctx, pad)
        if spec.num_swa_layers and spec.sliding_window:
            # llama_kv_cache_iswa (src/llama-kv-cache-iswa.cpp): size_swa = GGML_PAD(min(size_base, n_swa + n_ubatch),
            # 256) cells per sequence stream (kv_unified off, the default): the window plus one micro-batch
            swa_tokens = min(ctx, _round_up(spec.sliding_window + int(C.LLAMA_CPP_N_UBATCH.value), pad))
    full_layers = attention_layers(spec) - spec.num_swa_layers
    tokens = full_layers * ctx + spec.num_swa_layers * swa_tokens
    return int(round(per_layer_token * tokens * batch)) + recurrent_state_bytes(spec, batch)


def attention_layers(spec: ModelSpec) -> int:
    """Layers that keep a KV cache: all of them, less the linear-attention layers of a hybrid (Qwen3-Next / Qwen3.5
    Gated DeltaNet) and the Mamba-2 and MLP-only layers of a Nemotron-H pattern (ModelSpec.num_attention_layers)."""
    return spec.num_attention_layers


# llama.cpp keeps recurrent states in F32 (llama_context: type_r / type_s default GGML_TYPE_F32)
RECURRENT_STATE_BYTES = 4


def recurrent_state_bytes(spec: ModelSpec, batch: int) -> int:
    """Fixed per-sequence state of the linear-attention layers of a hybrid model, independent of context length.

    llama.cpp src/llama-hparams.cpp: conv state n_embd_r = (d_conv - 1) x (d_inner + 2 x n_group x d_state) and
    delta-rule state n_embd_s = d_state x d_inner per layer and sequence, with (Qwen3-Next, conversion/qwen.py)
    d_state = linear_key_head_dim, n_group = linear_num_key_heads, d_inner = linear_value_head_dim x
    linear_num_value_heads, d_conv = linear_conv_kernel_dim; F32. Mamba-2 layers (Nemotron-H, src/models/
    nemotron-h.cpp) hold the same two states with d_state = ssm_state_size, n_group = n_groups, d_inner =
    mamba_num_heads x mamba_head_dim (the spec's linear_* fields), checked against llama.cpp's RS buffer in
    tests/test_synthetic.py.
    """
    n = spec.num_linear_attn_layers
    if not n:
        return 0
    if spec.layer_pattern and "C" in spec.layer_pattern:
        # LFM2 short convolutions (src/llama-hparams.cpp n_embd_r: n_embd x (L_cache - 1); no n_embd_s state)
        return n * max(spec.linear_conv_kernel - 1, 0) * spec.hidden_size * RECURRENT_STATE_BYTES * batch
    d_inner = spec.linear_value_head_dim * spec.linear_num_value_heads
    d_state, n_group = spec.linear_key_head_dim, spec.linear_num_key_heads
    conv = max(spec.linear_conv_kernel - 1, 0) * (d_inner + 2 * n_group * d_state)
    state = d_state * d_inner
    return n * (conv + state) * RECURRENT_STATE_BYTES * batch


# ------------------------------------------------------------------------------------------------------------
# FLOPs
# ------------------------------------------------------------------------------------------------------------
def _dense_matmul_params(spec: ModelSpec, embd_params: int) -> int:
    """Parameters touched by matmuls for one token (active experts only; the embedding lookup is not a matmul)."""
    return max(spec.params_active or spec.params_total, 1) - embd_params


def _causal_pairs(p: int, window: Optional[int]) -> float:
    """(query, key) pairs of causal attention over p tokens; with a sliding window each query sees at most w keys."""
    if not window or p <= window:
        return p * (p + 1) / 2
    return window * (window + 1) / 2 + (p - window) * window


def _heads_dim(spec: ModelSpec) -> int:
    return spec.num_attention_heads * (spec.qk_nope_head_dim + spec.qk_rope_head_dim if spec.is_mla
                                       else spec.head_dim)


@per_record
def prefill_flops_parts(spec: ModelSpec, prompt_tokens: int, batch: int) -> tuple[float, float]:
    """(matmul, attention) FLOPs of a prefill of ``prompt_tokens`` x ``batch``.

    Matmuls: 2 x params x tokens (Kaplan et al. 2020, C_forward ~ 2N per token). Attention: QK^T and AV cost
    2 FLOPs x head_dim for each (query, key) pair and head -> 4 x pairs x heads x head_dim per layer, pairs counted
    causally (and within the window on sliding-window layers). The output projection runs for the last token only
    (llama.cpp and vLLM compute logits of the last position)."""
    embd = spec.vocab_size * spec.hidden_size
    out_proj = 0 if spec.tie_word_embeddings else embd
    matmul = _dense_matmul_params(spec, embd) - out_proj
    full = attention_layers(spec) - spec.num_swa_layers
    pairs = full * _causal_pairs(prompt_tokens, None) + spec.num_swa_layers * _causal_pairs(prompt_tokens,
                                                                                            spec.sliding_window)
    attn = 4.0 * _heads_dim(spec) * pairs
    return batch * (2.0 * matmul * prompt_tokens + 2.0 * spec.vocab_size * spec.hidden_size), batch * attn


def prefill_flops(spec: ModelSpec, prompt_tokens: int, batch: int) -> float:
    """All FLOPs of a prefill (:func:`prefill_flops_parts`, summed)."""
    return sum(prefill_flops_parts(spec, prompt_tokens, batch))


@per_record
def decode_flops(spec: ModelSpec, context_tokens: int, batch: int) -> float:
    """One decode step: 2 x active params plus attention over the cached context (the window on SWA layers)."""
    embd = spec.vocab_size * spec.hidden_size
    matmul = _dense_matmul_params(spec, embd) + (embd if spec.tie_word_embeddings else 0)
    full = attention_layers(spec) - spec.num_swa_layers
    keys = full * context_tokens + spec.num_swa_layers * min(context_tokens, spec.sliding_window or context_tokens)
    return batch * (2.0 * matmul + 4.0 * _heads_dim(spec) * keys)


# ------------------------------------------------------------------------------------------------------------
# llama.cpp speed per GPU family (constants.FAMILY_SPEEDS, fitted by bench/gpu_loo.py)
# ------------------------------------------------------------------------------------------------------------
_ROCM_ARCH = ((r"\binstinct\b|\bmi\d", "cdna"), (r"radeon vii", "gcn5"), (r"\b(rx|w|pro w) ?6\d{3}", "rdna2"),
              (r"\b(rx|w|pro w) ?7\d{3}", "rdna3"), (r"\b(rx ?9\d{3}|r9700)", "rdna4"))

# Intel Arc by architecture: A-series (Alchemist) is Xe-HPG, B-series (Battlemage) Xe2-HPG (sources/gpus/
# make_profiles.py)
_INTEL_ARCH = ((r"\barc (pro )?a\d", "xe-hpg"), (r"\barc (pro )?b\d", "xe2"))


def speed_family(hw: HardwareProfile) -> tuple[str, ...]:
    """The GPU families a profile belongs to, most specific first: CUDA by compute capability (one architecture and
    memory class: 8.0 is the HBM A100/A30, 8.6 the GDDR Ampere cards, 8.7 Jetson Orin...), Metal by tier (base, Pro,
    Max, Ultra), ROCm by architecture (RDNA2/3/4, CDNA, GCN5), Vulkan/SYCL by architecture (Intel Arc Xe-HPG, Xe2)
    and vendor; then the backend."""
    import re

    name = hw.name.lower()
    if hw.backend == "cuda":
        return ((f"cuda:{hw.compute_capability}",) if hw.compute_capability else ()) + ("cuda",)
    if hw.backend == "metal":
        tier = next((t for t in ("ultra", "max", "pro") if re.search(rf"\b{t}\b", name)), "base")
        return (f"metal:{tier}", "metal")
    if hw.backend == "rocm":
        arch = next((a for pat, a in _ROCM_ARCH if re.search(pat, name)), None)
        return ((f"rocm:{arch}",) if arch else ()) + ("rocm",)
    if hw.backend in ("vulkan", "sycl"):
        arch = next((a for pat, a in _INTEL_ARCH if re.search(pat, name)), None) if hw.vendor == "Intel" else None
        return (((f"{hw.backend}:intel-{arch}",) if arch else ()) + (f"{hw.backend}:{hw.vendor.lower()}", hw.backend))
    return ()


def family_speed(hw: HardwareProfile, term: str) -> Optional[tuple[str, C.FamilySpeed]]:
    """(family, fit) of the most specific family of ``hw`` that has a fit of ``term`` ('decode' or 'prefill'; a
    prefill fit against the kind of peak this profile has)."""
    kind = prefill_peak(hw)[2]
    for fam in speed_family(hw):
        fit = C.FAMILY_SPEEDS.get(fam)
        if fit is not None and (term == "decode" or (kind and kind in (fit.prefill_mfu or {}))):
            return fam, fit
    return None


def mmq_rate(hw: HardwareProfile) -> Optional[float]:
    """The int8 rate (ops/s) llama.cpp's quantized prompt kernels (MMQ, int8 mma.sync) are measured against on a CUDA
    GPU with int8 tensor cores: SMs x boost clock x LLAMA_CPP_MMQ_INT8_OPS_PER_CLOCK_PER_SM, at most the profile's INT8
    peak (constants.py explains why the tensor peak of GA100/Hopper/GB100 SMs is not reached). SMs x clock: the FP32
    vector rate / (2 x FP32 lanes per SM), else the INT8 peak / one SM's INT8 tensor rate. None: no int8 tensor cores
    (compute capability below 7.5; a 7.5 card without an INT8 figure is a GTX 16, which has none) or no figure to
    derive SMs x clock from."""
    cc = hw.compute_capability
    if hw.backend != "cuda" or not cc:
        return None
    ccf = float(cc)
    if ccf < 7.5 or (ccf < 8.0 and not hw.int8_ops_per_s):
        return None
    lanes = C.CUDA_FP32_LANES_PER_SM.get(cc)
    if hw.fp32_flops_per_s and lanes:
        sm_hz = hw.fp32_flops_per_s / (2 * lanes)
    elif hw.int8_ops_per_s:
        sm_hz = hw.int8_ops_per_s / C.CUDA_INT8_TENSOR_OPS_PER_CLOCK_PER_SM.get(
            cc, C.LLAMA_CPP_MMQ_INT8_OPS_PER_CLOCK_PER_SM.value)
    else:
        return None
    rate = sm_hz * C.LLAMA_CPP_MMQ_INT8_OPS_PER_CLOCK_PER_SM.value
    return min(rate, hw.int8_ops_per_s) if hw.int8_ops_per_s else rate


def prefill_peak(hw: HardwareProfile) -> tuple[Optional[float], str, str]:
    """(peak, label, kind) llama.cpp's GGUF prompt kernels are measured against: on CUDA GPUs with int8 tensor cores
    the MMQ rate (:func:`mmq_rate`), else dense FP16, else, on GPUs without tensor cores, the FP32 vector rate."""
    mmq = mmq_rate(hw)
    if mmq:
        return mmq, "MMQ INT8 rate (SMs x clock x 2048)", "int8"
    if hw.fp16_flops_per_s:
        return hw.fp16_flops_per_s, "FP16 peak", "fp16"
    if hw.fp32_flops_per_s:
        return hw.fp32_flops_per_s, "FP32 vector peak", "fp32"
    return None, "", ""


@per_record
def llama_cpp_latency_terms(hw: HardwareProfile, family: str) -> Optional[dict]:
    """llama.cpp's decode efficiency, per-token overhead, prefill MFU and peak on ``hw`` from its GPU family, with the
    family's intervals; None when no family of the profile has a fit (the single constants are used then). The
    prefill terms are for GGUF-quantized weights (the scoreboards'); 16-bit weights keep the FP16 constants."""
    dec = family_speed(hw, "decode")
    if dec is None:
        return None
    fam, fit = dec
    eff = fit.decode_efficiency
    if family == "float":  # F16/BF16 weights: the scoreboards are GGUF-quantized; the PR #4766 F16/GGUF ratio
        eff *= C.DECODE_BW_EFFICIENCY["llama.cpp"]["float"].value / C.DECODE_BW_EFFICIENCY["llama.cpp"]["gguf"].value
    out = {"decode_family": fam, "efficiency": eff, "overhead_ms": fit.decode_overhead_ms,
           "decode_interval": fit.decode_interval, "decode_source": f"family {fam}: {fit.source}", "mfu": None}
    pre = family_speed(hw, "prefill") if family == "gguf" else None
    peak, peak_name, kind = prefill_peak(hw)
    if pre is not None and peak:
        pfam, pfit = pre
        out.update(prefill_family=pfam, mfu=pfit.prefill_mfu[kind], peak=peak, peak_name=peak_name,
                   prefill_interval=pfit.prefill_interval, prefill_source=f"family {pfam}: {pfit.source}")
    return out


def quantized_kv_decode_ms(spec: ModelSpec, engine: str, kv_dtype: str, hw: HardwareProfile, context_tokens: int,
                           batch: int) -> tuple[Optional[float], str]:
    """Decode ms/token llama.cpp spends on a quantized (q8_0/q4_0) KV cache of ``context_tokens`` per sequence, in
    place of its bytes' read time (constants KV_QUANT_*: measured, per query head and cached token), and its basis;
    (None, '') for an f16 cache or another engine."""
    if engine != "llama.cpp" or kv_dtype not in ("q8_0", "q4_0"):
        return None, ""
    full = spec.num_layers - spec.num_swa_layers
    keys = full * context_tokens + spec.num_swa_layers * min(context_tokens, spec.sliding_window or context_tokens)
    elements = keys * spec.num_attention_heads * spec.head_dim * batch
    scale = (C.KV_QUANT_REFERENCE_FP32_FLOPS_PER_S.value / hw.fp32_flops_per_s) if hw.fp32_flops_per_s else 1.0
    ms = (C.KV_QUANT_DECODE_MS_PER_LAYER.value * spec.num_layers
          + C.KV_QUANT_ATTN_MS_PER_ELEMENT.value * elements * scale)
    return ms, (f"{kv_dtype} cache: {C.KV_QUANT_DECODE_MS_PER_LAYER.value} ms x {spec.num_layers} layers + "
                f"{C.KV_QUANT_ATTN_MS_PER_ELEMENT.value:g} ms x {elements:,} (tokens x layers x query heads x "
                f"head_dim) x {scale:.2f} (H200 FP32 / this GPU's) = {ms:.3f} ms in place of its bytes' read time "
                f"[{C.KV_QUANT_DECODE_MS_PER_LAYER.source}]")


def llama_cpp_batch_columns_ms(spec: ModelSpec, engine: str, family: str, hw: HardwareProfile, batch: int,
                               matrix_rate: Optional[float]) -> tuple[float, str]:
    """(ms, basis) a llama.cpp decode step of ``batch`` sequences spends multiplying its columns, beyond the weights it
    reads once and every sequence's KV cache (the memory terms); (0, '') at batch 1 (the family's decode fit holds
    all of it), for another engine or backend, or 16-bit weights. ROCm runs the same kernels (HIP), but no batched
    ROCm row has been checked and its FP32 figures count RDNA3's dual issue: it keeps the max(memory, compute).

    llama.cpp's CUDA backend picks the kernel by the number of columns (ggml-cuda.cu ggml_cuda_mul_mat: quantized
    weights and at most LLAMA_CPP_MMVQ_MAX_BATCH columns -> mul_mat_vec_q, else the MMQ matrix kernels):
    - up to 8 columns, mul_mat_vec_q reads each weight block once and computes one dot product per column on the CUDA
      cores (dp4a): each column beyond the first adds 2 x matmul params / (LLAMA_CPP_MMVQ_FP32_FRACTION x the FP32
      vector rate);
    - above 8, MMQ computes every column at the prompt rate (the family's prefill MFU x the MMQ rate), 2 x matmul
      params / that rate per column.
    A profile without an FP32 figure takes the MMQ term at every batch. The column time adds to the memory time
    rather than hiding behind it (a roofline max): measured steps grow from batch 1 by about this time at every batch
    (H200 and DGX Spark batched-bench rows; bench/gpu_loo.py)."""
    if engine != "llama.cpp" or batch <= 1 or family != "gguf" or hw.backend != "cuda":
        return 0.0, ""
    col_flops = decode_flops(spec, 0, 1)  # 2 x matmul params (output projection included) per column
    if batch <= C.LLAMA_CPP_MMVQ_MAX_BATCH.value and hw.fp32_flops_per_s:
        rate = C.LLAMA_CPP_MMVQ_FP32_FRACTION.value * hw.fp32_flops_per_s
        ms = (batch - 1) * col_flops / rate * 1e3
        return ms, (f"batch {batch} <= {int(C.LLAMA_CPP_MMVQ_MAX_BATCH.value)}: mul_mat_vec_q, + {batch - 1} columns x "
                    f"{col_flops:.3g} FLOP / ({C.LLAMA_CPP_MMVQ_FP32_FRACTION.value} x FP32 {hw.fp32_flops_per_s:.3g} "
                    f"FLOP/s) = {ms:.2f} ms [{C.LLAMA_CPP_MMVQ_FP32_FRACTION.source}]")
    if not matrix_rate:
        return 0.0, ""
    ms = batch * col_flops / matrix_rate * 1e3
    return ms, (f"batch {batch}: MMQ, {batch} columns x {col_flops:.3g} FLOP / the prompt rate {matrix_rate:.3g} "
                f"FLOP/s = {ms:.2f} ms")


def moe_llama_cpp_terms(spec: ModelSpec, engine: str) -> tuple[float, float, str]:
    """(extra decode ms/token, prefill matmul factor, basis) of an MoE model on llama.cpp (constants MOE_*); (0, 1, '')
    for a dense model or another engine."""
    if engine != "llama.cpp" or not spec.is_moe:
        return 0.0, 1.0, ""
    layers = spec.num_layers  # every layer of the models in the catalog is an MoE layer (no dense-first layers kept)
    extra = C.MOE_DECODE_MS_PER_LAYER.value * layers
    f = C.MOE_PREFILL_MATMUL_FACTOR.value
    return extra, f, (f"MoE: decode + {C.MOE_DECODE_MS_PER_LAYER.value} ms x {layers} layers = +{extra:.2f} ms; "
                      f"prefill matmul time x {f} [{C.MOE_DECODE_MS_PER_LAYER.source}]")


def fixed_step_ms(spec: ModelSpec, engine: str, family: str) -> tuple[float, float, str]:
    """(decode ms, prefill ms) a step takes beyond its bytes and FLOPs terms: the engine's per-token and per-prefill
    overheads, plus on vLLM the fixed time of every decode GEMM (VLLM_DECODE_GEMM_FIXED_MS x GEMMs per step) and the
    per-layer prefill dispatch (VLLM_PREFILL_MS_PER_LAYER); and its basis. Every GPU of a split runs all of them
    once per step (tensor parallel: every layer's GEMMs, smaller; layer/pipeline: each its layers', in turn)."""
    dec, pre = C.DECODE_OVERHEAD_MS[engine].value, C.PREFILL_OVERHEAD_MS[engine].value
    if engine != "vllm":
        return dec, pre, ""
    layers = max(spec.num_layers, 1)
    per_layer = int(C.VLLM_GEMMS_PER_LAYER.value) + (1 if spec.is_moe else 0)
    gemms = per_layer * layers + 1  # + the LM head
    t0 = C.VLLM_DECODE_GEMM_FIXED_MS.get(family)
    gemm_ms = t0.value * gemms if t0 else 0.0
    layer_ms = C.VLLM_PREFILL_MS_PER_LAYER.value * layers
    return dec + gemm_ms, pre + layer_ms, (
        (f"decode + {gemms} GEMMs x {t0.value * 1e3:.2f} us = {gemm_ms:.3f} ms [{t0.source}]; " if t0 else "")
        + f"prefill + {C.VLLM_PREFILL_MS_PER_LAYER.value} ms x {layers} layers = {layer_ms:.1f} ms "
          f"[{C.VLLM_PREFILL_MS_PER_LAYER.source}]")


# ------------------------------------------------------------------------------------------------------------
# The estimate
# ------------------------------------------------------------------------------------------------------------
def _runtime_overhead(engine: str, hw: HardwareProfile) -> tuple[int, str]:
    if hw.backend == "metal":
        return int(C.METAL_CONTEXT_BYTES.value), "METAL_CONTEXT_BYTES"
    if hw.backend == "cpu":
        return 0, "none (CPU: no device context)"
    base = int(C.CUDA_CONTEXT_BYTES.value)
    if engine == "vllm":
        return base + int(C.VLLM_CUDA_GRAPH_BYTES.value), "CUDA_CONTEXT_BYTES + VLLM_CUDA_GRAPH_BYTES"
    if engine == "llama.cpp" and hw.backend == "cuda":
        return base + int(C.LLAMA_CPP_CUDA_RUN_EXTRA_BYTES.value), "CUDA_CONTEXT_BYTES + LLAMA_CPP_CUDA_RUN_EXTRA_BYTES"
    return base, "CUDA_CONTEXT_BYTES"


def llama_cpp_flash_attn(hw: HardwareProfile) -> bool:
    """Whether llama.cpp runs this GPU with flash attention (its default ``-fa auto`` enables it where the backend has
    FA kernels): CUDA from compute capability 6.0, ROCm and Metal; assumed off on CUDA below 6.0 and on Vulkan/SYCL,
    whose FA paths depend on cooperative-matrix extensions (llama.cpp ggml-vulkan: coopmat2)."""
    if hw.backend == "cuda":
        return not hw.compute_capability or float(hw.compute_capability) >= 6.0
    return hw.backend in ("rocm", "metal", "cpu")


def llama_cpp_compute_buffer(spec: ModelSpec, context_tokens: int, flash_attn: bool) -> tuple[int, str]:
    """llama.cpp's GPU compute buffer (bytes), the largest set of intermediates its graph allocator keeps at once for
    one micro-batch of LLAMA_CPP_N_UBATCH tokens, f32:

    - logits n_vocab x n_ubatch (the output layer) plus the n_embd x n_ubatch residual stream kept beside them: with
      flash attention this is the buffer llama.cpp reports (exact to the MiB on the shipped H200 rows, test_estimate_
      reference);
    - without flash attention the attention scores KQ = n_kv x n_ubatch x n_head (softmax in place) are materialized
      per layer, so the buffer grows with the context: max(logits, KQ) + the residual stream.
    n_kv is the context padded to LLAMA_CPP_CTX_PAD (one sequence stream; kv_unified off)."""
    ub = int(C.LLAMA_CPP_N_UBATCH.value)
    logits = spec.vocab_size * ub * C.F32_BYTES
    resid = spec.hidden_size * ub * C.F32_BYTES
    if flash_attn:
        return logits + resid, "(n_vocab + n_embd) x LLAMA_CPP_N_UBATCH x 4 B (logits + residual, flash attention)"
    n_kv = _round_up(context_tokens, int(C.LLAMA_CPP_CTX_PAD.value))
    kq = n_kv * ub * spec.num_attention_heads * C.F32_BYTES
    return (max(logits, kq) + resid,
            f"max(logits, KQ = n_kv {n_kv} x n_ubatch x n_head x 4 B) + n_embd x n_ubatch x 4 B (no flash attention)")


def _compute_buffer(spec: ModelSpec, engine: str, quant: str, prompt_tokens: int, batch: int) -> tuple[int, str]:
    act_bytes = 2  # activations in f16/bf16
    if engine == "llama.cpp":
        # logits of one micro-batch dominate llama.cpp's compute buffer: n_vocab x n_ubatch x f32
        ub = int(C.LLAMA_CPP_N_UBATCH.value)
        return (spec.vocab_size * ub * C.F32_BYTES,
                "n_vocab x LLAMA_CPP_N_UBATCH x 4 B (logits of one micro-batch)")
    width = max(spec.intermediate_size, spec.moe_intermediate_size * max(spec.num_experts_per_tok, 1))
    if engine == "vllm":
        tokens = int(C.VLLM_MAX_NUM_BATCHED_TOKENS.value)
        return (tokens * width * int(C.TORCH_ACTIVATION_COPIES.value) * act_bytes,
                "VLLM_MAX_NUM_BATCHED_TOKENS x intermediate x TORCH_ACTIVATION_COPIES x 2 B (profiling run peak)")
    tokens = prompt_tokens * batch
    return (tokens * width * int(C.TORCH_ACTIVATION_COPIES.value) * act_bytes
            + batch * spec.vocab_size * C.F32_BYTES,
            "prompt x batch x intermediate x TORCH_ACTIVATION_COPIES x 2 B + last-token logits (f32)")


class Memory(NamedTuple):
    """The memory terms of one configuration (estimate's first half; recommend's memory-first pre-pass reads only
    these): bytes, and the bases of the compute buffer and the runtime overhead."""

    kv_dtype: str
    gpu_layers: Optional[int]
    prompt_tokens: int
    n_layers: int
    weights_bytes: int
    embd_bytes: int
    expert_bytes: int
    provenance: Provenance
    host_bytes: int
    gpu_weights_bytes: int
    kv_bytes_per_token: int
    kv_total_bytes: int
    gpu_frac: float
    host_layer_bytes: int
    kv_gpu_bytes: int
    compute_bytes: int
    compute_basis: str
    runtime_bytes: int
    runtime_basis: str
    total_bytes: int


def memory(spec: ModelSpec, quant: str, engine: str, hw: HardwareProfile, *, context_tokens: int, batch: int = 1,
           prompt_tokens: Optional[int] = None, output_tokens: int = 256, kv_dtype: Optional[str] = None,
           variant: Optional[Variant] = None, gpu_layers: Optional[int] = None) -> Memory:
    """GPU memory of one configuration (the arguments as ``estimate``): weights on the GPU + KV cache + compute
    buffer + runtime overhead. ``estimate`` computes its memory figures here, so the two never differ."""
    kv_dtype = kv_dtype or C.ENGINE_KV_DTYPES[engine][0]
    if kv_dtype not in C.ENGINE_KV_DTYPES[engine]:
        raise ValueError(f"KV dtype {kv_dtype} is not one {engine} offers ({', '.join(C.ENGINE_KV_DTYPES[engine])})")
    n_layers = max(spec.num_layers, 1)
    if gpu_layers is not None and gpu_layers > n_layers:
        gpu_layers = None
    if gpu_layers is not None:
        if engine != "llama.cpp" or hw.backend == "metal":
            raise ValueError("partial offload (gpu_layers) is modelled for llama.cpp on a discrete GPU only")
        if gpu_layers < 0:
            raise ValueError(f"gpu_layers must be >= 0, not {gpu_layers}")
    if prompt_tokens is None:
        prompt_tokens = max(context_tokens - output_tokens, 1)
    if variant is not None:
        wbytes, embd_b, expert_b = variant.weights_bytes, variant.embedding_bytes, variant.expert_bytes
        weights_provenance = variant.weights_bytes_provenance
    else:
        (wbytes, embd_b, expert_b), weights_provenance = variant_bytes(spec, quant), "estimated"
    host = 0
    if engine == "llama.cpp" and hw.backend not in ("metal", "cpu"):
        # llama.cpp keeps the input embedding table in host memory (its input layer is assigned to the CPU);
        # a tied output projection is loaded on the GPU as well.
        host = embd_b
    resident = wbytes
    if engine == "llama.cpp" and spec.nextn_layers:
        mtp_total, mtp_experts = mtp_bytes(spec, quant)  # MTP blocks: in the file, not loaded
        resident, expert_b = wbytes - mtp_total, max(expert_b - mtp_experts, 0)
    gpu_weights = resident - host + (embd_b if host and spec.tie_word_embeddings else 0)
    kv_pt = kv_bytes_per_token(spec, engine, kv_dtype)
    kv_total = kv_cache_bytes(spec, context_tokens, batch, engine, kv_dtype)
    gpu_frac = 1.0  # share of the repeating layers (and of their KV cache) on the GPU
    host_layer_bytes = 0  # weights of the layers left on the host (output layer included)
    if gpu_layers is not None:
        # llama.cpp n_gpu_layers = g (llama-model.cpp: i_gpu_start = n_layer + 1 - g): blocks i_gpu_start..n_layer-1
        # and the output layer (index n_layer) on the GPU, i.e. g - 1 blocks plus the output layer for 1 <= g <=
        # n_layer; measured on the H200 with llama-cpp-python 0.3.36 (CUDA0 KV buffer 13/28 of the cache at g = 14).
        # Each block's KV cache lives with its block (offload_kqv). Blocks are taken as equal in size.
        out_b = output_bytes(spec, quant)
        if spec.tie_word_embeddings:
            out_b += embd_b  # a tied output projection is loaded where the output layer is (see `host` above)
        blocks = max(resident - embd_b - output_bytes(spec, quant), 0)
        gpu_blocks = max(gpu_layers - 1, 0)
        gpu_frac = gpu_blocks / n_layers
        out_gpu = out_b if gpu_layers >= 1 else 0
        gpu_weights = int(blocks * gpu_frac) + out_gpu
        host_layer_bytes = blocks - int(blocks * gpu_frac) + (out_b - out_gpu)
        host = embd_b + host_layer_bytes - (embd_b if spec.tie_word_embeddings and not out_gpu else 0)
    kv_gpu = int(round(kv_total * gpu_frac))
    compute, compute_basis = (llama_cpp_compute_buffer(spec, context_tokens, llama_cpp_flash_attn(hw))
                              if engine == "llama.cpp" else _compute_buffer(spec, engine, quant, prompt_tokens, batch))
    runtime, runtime_basis = _runtime_overhead(engine, hw)
    total = gpu_weights + kv_gpu + compute + runtime
    return Memory(kv_dtype, gpu_layers, prompt_tokens, n_layers, wbytes, embd_b, expert_b, weights_provenance, host,
                  gpu_weights, kv_pt, kv_total, gpu_frac, host_layer_bytes, kv_gpu, compute, compute_basis, runtime,
                  runtime_basis, total)


def estimate(spec: ModelSpec, quant: str, engine: str, hw: HardwareProfile, *, context_tokens: int,
             batch: int = 1, prompt_tokens: Optional[int] = None, output_tokens: int = 256,
             kv_dtype: Optional[str] = None, variant: Optional[Variant] = None,
             gpu_layers: Optional[int] = None, mem: Optional[Memory] = None,
             kernel_factors: bool = True) -> Estimate:
    """Estimate memory and latency of one candidate configuration on one GPU.

    ``variant`` (a catalog row) supplies the weight bytes, measured or estimated; without it they are computed
    tensor by tensor. ``gpu_layers`` (llama.cpp only) is llama.cpp's n_gpu_layers: the output layer counts as one
    layer and is offloaded first, then the last gpu_layers - 1 repeating blocks (docs/estimates.md §6.7). None, or
    num_layers + 1 or more, means every block and the output layer on the GPU. ``mem``: ``memory()`` of these same
    arguments, when the caller has it already (recommend's memory-first pre-pass). ``kernel_factors=False``: without
    llama.cpp's per-type kernel speeds (constants.QUANT_KERNEL_SPEEDS; bench/quant_kernels.py derives them)."""
    m = mem or memory(spec, quant, engine, hw, context_tokens=context_tokens, batch=batch,
                      prompt_tokens=prompt_tokens, output_tokens=output_tokens, kv_dtype=kv_dtype, variant=variant,
                      gpu_layers=gpu_layers)
    kv_dtype, gpu_layers, prompt_tokens, n_layers = m.kv_dtype, m.gpu_layers, m.prompt_tokens, m.n_layers
    wbytes, expert_b, weights_provenance = m.weights_bytes, m.expert_bytes, m.provenance
    host, gpu_weights, kv_pt, kv_total = m.host_bytes, m.gpu_weights_bytes, m.kv_bytes_per_token, m.kv_total_bytes
    gpu_frac, host_layer_bytes = m.gpu_frac, m.host_layer_bytes
    compute, compute_basis, runtime, runtime_basis = m.compute_bytes, m.compute_basis, m.runtime_bytes, m.runtime_basis
    total = m.total_bytes
    family = _family(quant)
    notes: list[str] = []
    basis: dict[str, str] = {"formula": C.ESTIMATE_FORMULA_VERSION}

    # --- memory -----------------------------------------------------------------------------------------
    basis["memory"] = (f"weights on GPU + KV ({kv_dtype}) + compute buffer [{compute_basis}] + runtime "
                       f"[{runtime_basis}]")
    if gpu_layers is not None:
        basis["offload"] = (f"llama.cpp n_gpu_layers={gpu_layers}: the output layer and {max(gpu_layers - 1, 0)} of "
                            f"{n_layers} blocks (with their share of the KV cache) on the GPU, the rest in host RAM")
    elif host:
        basis["host_weights_bytes"] = "llama.cpp token embeddings stay in host RAM"
    if engine == "vllm":
        reserve = int(hw.memory_bytes * C.VLLM_GPU_MEMORY_UTILIZATION.value)
        notes.append(f"vLLM reserves gpu_memory_utilization={C.VLLM_GPU_MEMORY_UTILIZATION.value} of the GPU "
                     f"({reserve / 1024**3:.1f} GiB) at start and fills the rest with KV cache; total_vram_bytes is "
                     f"what this configuration needs. Cap it with kv_cache_memory_bytes or gpu_memory_utilization.")

    # --- latency ----------------------------------------------------------------------------------------
    bw = hw.memory_bandwidth_bytes_per_s
    peak, peak_name = hw.fp16_flops_per_s, "FP16 peak"
    mfu_key = family
    if engine == "llama.cpp" and family == "gguf" and hw.int8_ops_per_s:
        # llama.cpp multiplies quantized weights with int8 tensor-core kernels (MMQ) during prompt processing
        peak, peak_name, mfu_key = hw.int8_ops_per_s, "INT8 peak", "gguf-int8"
    eff_c = _const(C.DECODE_BW_EFFICIENCY[engine], family if family in C.DECODE_BW_EFFICIENCY[engine] else "float")
    mfu_c = _const(C.PREFILL_MFU[engine], mfu_key if mfu_key in C.PREFILL_MFU[engine] else "*")
    ovh_dec, ovh_pre, fixed_why = fixed_step_ms(spec, engine, family)
    if fixed_why:
        basis["fixed_step"] = fixed_why
    fam = llama_cpp_latency_terms(hw, family) if engine == "llama.cpp" and family in ("gguf", "float") else None
    dec_interval = pre_interval = None
    if fam is not None:
        eff_c = C.Const(round(fam["efficiency"], 4), "fraction of bandwidth", fam["decode_source"])
        ovh_dec, dec_interval = fam["overhead_ms"], fam["decode_interval"]
        if fam["mfu"] is not None:
            peak, peak_name = fam["peak"], fam["peak_name"]
            mfu_c = C.Const(fam["mfu"], f"fraction of {peak_name}", fam["prefill_source"])
            pre_interval = fam["prefill_interval"]
        elif family == "gguf" and hw.int8_ops_per_s:
            peak, peak_name = hw.fp16_flops_per_s, "FP16 peak"  # the single constants' GGUF MFU is against FP16
            mfu_c = _const(C.PREFILL_MFU[engine], "gguf")
    if hw.backend == "cpu":
        if engine == "llama.cpp":  # a CPU's measured (or stated) bandwidth and matmul rate, not a GPU's peaks
            eff_c = C.CPU_DECODE_BW_EFFICIENCY
            peak, peak_name = hw.fp16_flops_per_s or hw.fp32_flops_per_s, "matmul rate"
            mfu_c = C.CPU_MATMUL_FRACTION
        else:  # the GPU-fitted efficiencies of these engines do not hold on a CPU: calibrated or unknown
            bw = 0.0
    basis["decode"] = (f"bytes/({hw.name} bandwidth x {eff_c.value}) + {ovh_dec:.3f} ms "
                       f"[efficiency: {eff_c.source}]")

    # bytes read per decode step: every GPU-resident weight once (routed experts: only those the batch
    # touches), plus the KV cache of every sequence at its mean length during generation.
    host_weights_read = host_layer_bytes
    if spec.is_moe and expert_b:
        e, k = spec.num_experts, spec.num_experts_per_tok
        touched = e * (1 - (1 - k / e) ** batch)  # expected distinct experts per layer for `batch` tokens
        # the experts live with their blocks: gpu_frac of them on the GPU, the rest (partial offload) in host RAM;
        # on either side a step reads only the experts its tokens touch
        gpu_expert = expert_b * gpu_frac
        step_weights = gpu_weights - gpu_expert + gpu_expert * touched / e
        host_expert = expert_b - gpu_expert
        host_weights_read = host_layer_bytes - host_expert + host_expert * touched / e
        basis["moe"] = f"expected distinct experts per step = E(1-(1-k/E)^batch) = {touched:.2f} of {e}"
    else:
        step_weights = gpu_weights
    mean_ctx = min(prompt_tokens + output_tokens / 2, context_tokens)
    kv_read = kv_cache_bytes(spec, int(mean_ctx), batch, engine, kv_dtype) if mean_ctx >= 1 else 0
    step_bytes = int(step_weights + kv_read * gpu_frac)
    host_step = int(host_weights_read + kv_read * (1 - gpu_frac))
    pre_mm, pre_attn = prefill_flops_parts(spec, prompt_tokens, batch)
    pre_flops = pre_mm + pre_attn
    host_dec_ms = host_pre_ms = 0.0
    if host_step:
        # decode: the host layers are read from host RAM, one step after the GPU's (sequential layers)
        host_dec_ms = host_step / (C.HOST_MEMORY_BANDWIDTH.value * C.HOST_DECODE_BW_EFFICIENCY.value) * 1e3
        # prefill: every micro-batch of >= GGML_CUDA_OFFLOAD_MIN_BATCH tokens copies the host layers' weights to the
        # GPU over PCIe and multiplies there; smaller micro-batches run on the CPU (not modelled: prompts are longer)
        n_tok, ub = prompt_tokens * batch, int(C.LLAMA_CPP_N_UBATCH.value)
        ubatches = n_tok // ub + (1 if n_tok % ub >= C.GGML_CUDA_OFFLOAD_MIN_BATCH.value else 0)
        host_pre_ms = host_layer_bytes * ubatches / C.HOST_TO_GPU_COPY_BYTES_PER_S.value * 1e3
        basis["offload_latency"] = (f"decode + host bytes/(HOST_MEMORY_BANDWIDTH x HOST_DECODE_BW_EFFICIENCY) = "
                                    f"{host_dec_ms:.2f} ms; prefill + host layer bytes x {ubatches} micro-batches / "
                                    f"HOST_TO_GPU_COPY_BYTES_PER_S = {host_pre_ms:.1f} ms [{C.HOST_MEMORY_BANDWIDTH.source}]")

    ttft = tpot = None
    kvq_gpu_ms = cols_gpu_ms = 0.0
    intervals: dict[str, tuple[float, float]] = {}
    kernel = (C.QUANT_KERNEL_SPEEDS.get(quant) if kernel_factors and engine == "llama.cpp" and family == "gguf"
              and hw.name in C.QUANT_KERNEL_HARDWARE else None)
    pre_mfu_c = mfu_c  # the prompt kernels' MFU (a GGUF type's own on the GPU its kernels were measured on)
    if kernel is not None:
        pre_mfu_c = C.Const(mfu_c.value * kernel["prefill_factor"], mfu_c.unit, mfu_c.source)
        basis["kernel"] = (f"{quant} kernels: weights read time x {kernel['decode_factor']} (one sequence), prompt "
                           f"MFU x {kernel['prefill_factor']} [{C.QUANT_KERNEL_SOURCE}]")
    if bw:
        if kernel is not None and batch == 1:  # the weights' read time at this type's (single-sequence, tg128)
            # kernel speed, the KV cache's as before; batched decode runs other kernels (MMQ), not measured per type
            kv_part = int(kv_read * gpu_frac)
            mem_ms = ((step_bytes - kv_part) * kernel["decode_factor"] + kv_part) / (bw * eff_c.value) * 1e3
        else:
            mem_ms = step_bytes / (bw * eff_c.value) * 1e3
        kvq_ms, why = quantized_kv_decode_ms(spec, engine, kv_dtype, hw, int(mean_ctx), batch)
        if why:
            mem_ms += kvq_ms * gpu_frac - kv_read * gpu_frac / (bw * eff_c.value) * 1e3
            kvq_gpu_ms = kvq_ms * gpu_frac
            basis["kv_decode"] = why
        comp_ms = decode_flops(spec, int(mean_ctx), batch) / (peak * mfu_c.value) * 1e3 if peak else 0.0
        moe_dec_ms, moe_pre_f, moe_why = moe_llama_cpp_terms(spec, engine)
        if moe_why:
            basis["moe_latency"] = moe_why
        cols_ms, cols_why = llama_cpp_batch_columns_ms(spec, engine, family, hw, batch, peak * mfu_c.value
                                                       if peak else None)
        if cols_why:  # llama.cpp batched decode on CUDA: weights once + every sequence's KV + its columns
            basis["batch_decode"] = cols_why
            cols_gpu_ms = cols_ms * gpu_frac
            tpot = mem_ms + cols_ms * gpu_frac + ovh_dec + host_dec_ms + moe_dec_ms
        else:
            tpot = max(mem_ms, comp_ms) + ovh_dec + host_dec_ms + moe_dec_ms
        if dec_interval and not host_dec_ms:
            intervals["tpot_ms"] = (tpot * dec_interval[0], tpot * dec_interval[1])
        if peak:
            pre_ms = (pre_mm * moe_pre_f + pre_attn) / (peak * pre_mfu_c.value) * 1e3
            ttft = max(pre_ms, gpu_weights / (bw * eff_c.value) * 1e3) + ovh_pre + host_pre_ms
            if pre_interval and not host_pre_ms:
                intervals["ttft_ms"] = (ttft * pre_interval[0], ttft * pre_interval[1])
            basis["prefill"] = (f"max(FLOPs/({hw.name} {peak_name} x MFU {pre_mfu_c.value}), weights/(bandwidth x "
                                f"{eff_c.value})) + {ovh_pre:g} ms "
                                f"[MFU: {pre_mfu_c.source}]")
        else:
            notes.append(f"TTFT unknown: the {hw.name} profile has no sourced FP16 (or INT8) peak figure")
    else:
        notes.append(f"latency unknown: the {hw.name} profile has no sourced memory bandwidth")

    # trusted (model_construct without its per-field overhead): every field is computed above from validated records
    return Estimate.trusted(
        model=spec.id, quant=quant, engine=engine, hardware=hw.name, context_tokens=context_tokens, batch=batch,
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, kv_dtype=kv_dtype, gpu_layers=gpu_layers,
        weights_bytes=wbytes,
        weights_gpu_bytes=gpu_weights, host_weights_bytes=host, kv_bytes_per_token=kv_pt, kv_cache_bytes=kv_total,
        compute_buffer_bytes=compute, runtime_overhead_bytes=runtime, overhead_bytes=compute + runtime,
        total_vram_bytes=total, ttft_ms=ttft, tpot_ms=tpot, decode_bytes_per_step=step_bytes,
        decode_kv_bytes_per_step=int(kv_read * gpu_frac), host_bytes_per_step=host_step, prefill_flops=pre_flops,
        prefill_attention_flops=pre_attn, decode_kv_quant_ms=kvq_gpu_ms, decode_columns_ms=cols_gpu_ms,
        weights_bytes_provenance=weights_provenance,
        hardware_bandwidth_bytes_per_s=bw or 0.0, basis=basis, notes=notes, intervals=intervals)
