"""llama.cpp's planning rules (llama-cpp-python, llama-server, llama-bench): its KV padding, compute buffer, runtime
memory, decode / prefill terms (single constants and the per-GPU-family fits), quantized-KV attention, batched decode
columns, MoE routing, and its layer / row splits. The derivations are in docs/estimates.md."""

from __future__ import annotations

import re
from typing import Optional

from recommender.core.records import HardwareProfile, ModelSpec
from recommender.predict import constants as C
from recommender.predict.constants import MIB, Const
from recommender.predict.counts import (DSV4_RATIO, any_true, attention_head_width, attention_layers, decode_flops,
                                        is_array, maximum, minimum, moe_layers, per_model, per_record, round_up,
                                        where, window_or)
from recommender.predict.engines.base import EngineRules

# llama.cpp: physical micro-batch used for prompt processing (n_ubatch default 512, common/common.h) and the
# size of its compute graph buffer, which is dominated by the logits of one micro-batch (n_vocab x n_ubatch f32).
LLAMA_CPP_N_UBATCH = Const(512, "tokens", "llama.cpp common params: n_ubatch = 512 (default)")
LLAMA_CPP_CTX_PAD = Const(256, "tokens", "llama.cpp pads n_ctx of the KV cache to a multiple of 256 "
                                         "(llama_kv_cache get_padding with flash attention)")

# --- Decode (per generated token) and prefill: the single constants (GPUs without a family fit) ---------------------
# time/token = bytes read / (bandwidth x efficiency) + per-token overhead (kernel launches, sampling, host work).
_FIT = ("fitted by bench/fit_llamacpp.py on the llama.cpp CUDA scoreboard (ggml-org/llama.cpp discussion #15013, "
        "Llama-2-7B Q4_0, no flash attention; RTX 3060 12GB, 3090, 4080, 5090, RTX 6000 Ada; sources/published_perf)")
_PR4766 = ("fitted by bench/fit_llamacpp.py on ggml-org/llama.cpp PR #4766 (RTX 4090, 7B F16: tg128 61.03 t/s, "
           "pp512 11048 t/s) with the scoreboard's per-token overhead")
DECODE_BW_EFFICIENCY: dict[str, Const] = {
    "float": Const(0.873, "fraction of bandwidth", _PR4766),
    "gguf": Const(0.897, "fraction of bandwidth", _FIT),
}
DECODE_OVERHEAD_MS = Const(1.217, "ms/token", _FIT)
# Prefill against the dense FP16 (FP32-accumulate) peak; llama.cpp's quantized prompt kernels use int8 tensor cores, so
# the fraction can approach 1 on consumer cards. On H100/H200 the scoreboard shows far lower fractions (~0.13):
# llama.cpp does not use Hopper's wgmma instructions. Measured rows and calibration correct this per GPU.
PREFILL_MFU: dict[str, Const] = {
    "float": Const(0.875, "fraction of FP16 peak", _PR4766),
    "gguf-int8": Const(0.229, "fraction of INT8 peak", _FIT + "; median of the fit GPUs with a sourced INT8 peak"),
    "gguf": Const(0.917, "fraction of FP16 peak", _FIT + "; median of the fit GPUs with a sourced FP16 peak "
                                                         "(used when a profile has no INT8 figure)"),
}
PREFILL_OVERHEAD_MS = Const(0.0, "ms", "none beyond the MFU term (llama-bench pp512 times the prompt alone)")

# --- llama.cpp on CUDA: memory allocated after load -----------------------------------------------------------------
# NVML's peak during a run exceeds weights + KV + compute buffer + CUDA_CONTEXT_BYTES by 230-399 MiB (median 242) on
# every shipped H200 llama.cpp row (142 rows; bench/gpu_loo.py fit_check): memory llama.cpp's CUDA backend takes at the
# first decode (its CUDA graphs, USE_GRAPHS = 1 in the rows' system_info, and cuBLAS workspaces). The largest
# shortfall, rounded up, is added so that no measured row is predicted to need less than it did (a plan within it of
# the budget was a false "fit"); the cost is up to 170 MiB of over-prediction on the rows with the least extra.
LLAMA_CPP_CUDA_RUN_EXTRA_BYTES = Const(400 * MIB, "bytes",
                                       "measured: the largest shortfall (399 MiB) over the 142 shipped H200 llama.cpp "
                                       "rows (llama-cpp-python 0.3.36) of NVML peak - the modelled buffers - "
                                       "CUDA_CONTEXT_BYTES")

# --- several GPUs (predict.split: -sm layer / -sm row) ----------------------------------------------------------
# The latency of one activation hand-off between two GPUs in a llama.cpp layer split (cudaMemcpyPeerAsync of a few KB
# plus the event synchronization); the bytes' own transfer time is added from the link bandwidth.
LLAMA_CPP_HOP_MS = Const(0.143, "ms per device boundary per token",
                           "fitted by bench/multigpu.py on its fit rows of sources/published_perf/multigpu_llamacpp.csv "
                           "(XiongjieDai/GPU-Benchmarks-on-LLM-Inference, llama-bench tg512 of LLaMA-3-8B Q4_K_M and "
                           "F16 on 1, 2, 4 and 6 RTX 3090s): median over the 6 rows of (1/tg_n - 1/tg_1)/(n - 1) less "
                           "the transfer time (0.290, -0.142, 0.179, 0.049, 0.187, 0.106 ms)")
# The per-device part of a layer-split decode step: each device of a split runs its own share of the graph (the
# scheduler's split per backend: its launches, its copy-in of the activations, a stream synchronization before the next
# device starts), once per token whatever the hops' bytes. Fitted by bench/multigpu.py (split_step_fit) on the absolute
# figures of the 54 published tg512 rows on 2-8 identical GPUs (sources/published_perf/multigpu_llamacpp.csv), least
# squares on the relative time error; leave-one-GPU-type-out (11 types) it moves the absolute decode median from 11.9 % to
# 7.1 % (bias +8.6 -> +0.7 %). Much of what it carries is the single-GPU model's shortfall on that May-2024 build (the
# published 1-GPU rows decode 1-2.6 ms slower per token than the family fits predict): the n-GPU / 1-GPU ratio
# error goes from 1.9 % to 5.1 % median (31 held-out rows). Not applied to one GPU (no split, no per-device step).
LLAMA_CPP_SPLIT_DEVICE_STEP_MS = Const(0.281, "ms per device per token (layer split)",
                                       "fitted by bench/multigpu.py split_step_fit on the 54 tg512 rows of 2-8 GPUs "
                                       "of sources/published_perf/multigpu_llamacpp.csv (XiongjieDai/GPU-Benchmarks-"
                                       "on-LLM-Inference, May 2024): non-negative least squares of the relative time "
                                       "error; leave-one-GPU-type-out absolute decode median 7.1 %")
# llama.cpp row split: one synchronization (gather of the partial results on the main GPU) per split matrix
# multiplication; seven matrices per block (q, k, v, o, gate, up, down).
LLAMA_CPP_ROW_SYNC_MS = Const(0.056, "ms per split matmul per token",
                                "derived from one published pair, ikawrakow/ik_llama.cpp commit a719349982 (PR #1022, "
                                "its message): LLaMA-70B, mainline -sm row TG 19.3 t/s against -sm "
                                "layer 24.4 t/s, on the author's 2x RTX 3090 machine (named in the PR #1022 thread; "
                                "sources/published_perf/multigpu_row_split.csv; "
                                "the quantization is not stated): (1/19.3 - 1/24.4/2) s / (80 blocks x 7 matmuls) = "
                                "0.056 ms, taking row's bandwidth part as half the layer-split step; no held-out "
                                "check")
ROW_SPLIT_MATMULS_PER_BLOCK = 7
LLAMA_CPP_SPLIT_ACTIVATION_COPIES = Const(3, "tensors of n_ubatch x intermediate x f32",
                                            "assumption: the compute buffer of a device without the output layer "
                                            "holds the MLP's gate, up and product of one micro-batch; to be measured "
                                            "by the multi-GPU probe issue")
ACT_BYTES_LLAMA_CPP = C.F32_BYTES  # ggml hands activations between backends in f32


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
    GPU with int8 tensor cores: SMs x boost clock x C.LLAMA_CPP_MMQ_INT8_OPS_PER_CLOCK_PER_SM, at most the profile's INT8
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
        eff *= DECODE_BW_EFFICIENCY["float"].value / DECODE_BW_EFFICIENCY["gguf"].value
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
    # only the layers that keep a KV cache attend over it (a hybrid's linear-attention / Mamba layers do not:
    # counts.attention_layers), each query head over its head width (counts.attention_head_width: MLA's latent)
    layers = attention_layers(spec)
    full = layers - spec.num_swa_layers
    keys = full * context_tokens + spec.num_swa_layers * minimum(context_tokens, window_or(spec, context_tokens))
    elements = keys * spec.num_attention_heads * attention_head_width(spec) * batch
    scale = (C.KV_QUANT_REFERENCE_FP32_FLOPS_PER_S.value / hw.fp32_flops_per_s) if hw.fp32_flops_per_s else 1.0
    ms = (C.KV_QUANT_DECODE_MS_PER_LAYER.value * layers
          + C.KV_QUANT_ATTN_MS_PER_ELEMENT.value * elements * scale)
    if is_array(ms):
        return ms, f"{kv_dtype} cache (arrays)"
    return ms, (f"{kv_dtype} cache: {C.KV_QUANT_DECODE_MS_PER_LAYER.value} ms x {layers} layers + "
                f"{C.KV_QUANT_ATTN_MS_PER_ELEMENT.value:g} ms x {elements:,.0f} (tokens x layers x query heads x "
                f"head_dim) x {scale:.2f} (H200 FP32 / this GPU's) = {ms:.3f} ms in place of its bytes' read time "
                f"[{C.KV_QUANT_DECODE_MS_PER_LAYER.source}]")


def llama_cpp_batch_columns_ms(spec: ModelSpec, engine: str, family: str, hw: HardwareProfile, batch: int,
                               matrix_rate: Optional[float]) -> tuple[float, str]:
    """(ms, basis) a llama.cpp decode step of ``batch`` sequences spends multiplying its columns, beyond the weights it
    reads once and every sequence's KV cache (the memory terms); (0, '') at batch 1 (the family's decode fit holds
    all of it), for another engine or backend, or 16-bit weights. ROCm runs the same kernels (HIP), but no batched
    ROCm row has been checked and its FP32 figures count RDNA3's dual issue: it keeps the max(memory, compute).

    llama.cpp's CUDA backend picks the kernel by the number of columns (ggml-cuda.cu ggml_cuda_mul_mat: quantized
    weights and at most C.LLAMA_CPP_MMVQ_MAX_BATCH columns -> mul_mat_vec_q, else the MMQ matrix kernels):
    - up to 8 columns, mul_mat_vec_q reads each weight block once and computes one dot product per column on the CUDA
      cores (dp4a): each column beyond the first adds 2 x matmul params / (C.LLAMA_CPP_MMVQ_FP32_FRACTION x the FP32
      vector rate);
    - above 8, MMQ computes every column at the prompt rate (the family's prefill MFU x the MMQ rate), 2 x matmul
      params / that rate per column.
    A profile without an FP32 figure takes the MMQ term at every batch. The column time adds to the memory time
    rather than hiding behind it (a roofline max): measured steps grow from batch 1 by about this time at every batch
    (H200 and DGX Spark batched-bench rows; bench/gpu_loo.py)."""
    if engine != "llama.cpp" or family != "gguf" or hw.backend != "cuda":
        return 0.0, ""
    if is_array(batch):  # one batch per configuration: each row its own kernel, NaN where the step is a roofline
        return _batch_columns_arrays(spec, hw, batch, matrix_rate)
    if batch <= 1:
        return 0.0, ""
    col_flops = decode_flops(spec, 0, 1)  # 2 x matmul params (output projection included) per column
    if batch <= C.LLAMA_CPP_MMVQ_MAX_BATCH.value and hw.fp32_flops_per_s:
        rate = C.LLAMA_CPP_MMVQ_FP32_FRACTION.value * hw.fp32_flops_per_s
        ms = (batch - 1) * col_flops / rate * 1e3
        if is_array(ms):
            return ms, f"batch {batch}: mul_mat_vec_q (arrays)"
        return ms, (f"batch {batch} <= {int(C.LLAMA_CPP_MMVQ_MAX_BATCH.value)}: mul_mat_vec_q, + {batch - 1} columns x "
                    f"{col_flops:.3g} FLOP / ({C.LLAMA_CPP_MMVQ_FP32_FRACTION.value} x FP32 {hw.fp32_flops_per_s:.3g} "
                    f"FLOP/s) = {ms:.2f} ms [{C.LLAMA_CPP_MMVQ_FP32_FRACTION.source}]")
    if not matrix_rate:
        return 0.0, ""
    ms = batch * col_flops / matrix_rate * 1e3
    if is_array(ms):
        return ms, f"batch {batch}: MMQ (arrays)"
    return ms, (f"batch {batch}: MMQ, {batch} columns x {col_flops:.3g} FLOP / the prompt rate {matrix_rate:.3g} "
                f"FLOP/s = {ms:.2f} ms")


def _batch_columns_arrays(spec: ModelSpec, hw: HardwareProfile, batch, matrix_rate: Optional[float]):
    """llama_cpp_batch_columns_ms of llama.cpp GGUF on CUDA for an array of batches (one per configuration): the
    same kernel choice row by row, NaN where the scalar form returns (0, '') (batch 1, or MMQ without a matrix rate:
    the step is a roofline there)."""
    import numpy as np  # noqa: PLC0415  (numpy only where arrays are predicted)
    col_flops = decode_flops(spec, 0, 1)
    nan = float("nan")
    mmq = batch * col_flops / matrix_rate * 1e3 if matrix_rate else np.full(np.shape(batch), nan)
    if hw.fp32_flops_per_s:
        rate = C.LLAMA_CPP_MMVQ_FP32_FRACTION.value * hw.fp32_flops_per_s
        ms = np.where(batch <= C.LLAMA_CPP_MMVQ_MAX_BATCH.value, (batch - 1) * col_flops / rate * 1e3, mmq)
    else:
        ms = mmq
    return np.where(batch <= 1, nan, ms), "batch columns (arrays)"


def moe_llama_cpp_terms(spec: ModelSpec, engine: str) -> tuple[float, float, str]:
    """(extra decode ms/token, prefill matmul factor, basis) of an MoE model on llama.cpp (constants MOE_*); (0, 1, '')
    for a dense model or another engine."""
    if engine != "llama.cpp" or not any_true(spec.is_moe):
        return 0.0, 1.0, ""
    if is_array(spec.is_moe):  # one row per configuration: dense rows add nothing, their factor is 1
        layers = per_model(moe_layers, spec)
        return (C.MOE_DECODE_MS_PER_LAYER.value * layers, where(spec.is_moe, C.MOE_PREFILL_MATMUL_FACTOR.value, 1.0),
                "MoE (arrays)")
    layers = moe_layers(spec)  # the layers with an MoE block (a Mamba-2 hybrid's E letters, dense-first layers not)
    extra = C.MOE_DECODE_MS_PER_LAYER.value * layers
    f = C.MOE_PREFILL_MATMUL_FACTOR.value
    return extra, f, (f"MoE: decode + {C.MOE_DECODE_MS_PER_LAYER.value} ms x {layers} MoE layers = +{extra:.2f} ms; "
                      f"prefill matmul time x {f} [{C.MOE_DECODE_MS_PER_LAYER.source}]")


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
    ub = int(LLAMA_CPP_N_UBATCH.value)
    logits = spec.vocab_size * ub * C.F32_BYTES
    resid = spec.hidden_size * ub * C.F32_BYTES
    n_kv = round_up(context_tokens, int(LLAMA_CPP_CTX_PAD.value))
    dsa = dsa_compute_bytes(spec, n_kv)
    if flash_attn:
        return (logits + resid + dsa,
                "(n_vocab + n_embd) x LLAMA_CPP_N_UBATCH x 4 B (logits + residual, flash attention)")
    kq = n_kv * ub * spec.num_attention_heads * C.F32_BYTES
    if is_array(kq):
        return maximum(logits, kq) + resid + dsa, "max(logits, KQ) + n_embd x n_ubatch x 4 B (no flash attention)"
    return (max(logits, kq) + resid + dsa,
            f"max(logits, KQ = n_kv {n_kv} x n_ubatch x n_head x 4 B) + n_embd x n_ubatch x 4 B (no flash attention)")




def dsa_compute_bytes(spec: ModelSpec, n_kv):
    """What DeepSeek sparse attention (DeepSeek-V3.2 / GLM-5.x) adds to llama.cpp's compute buffer for one micro-batch,
    0 without an indexer:
    - per trunk layer a leaf of n_top_k x n_ubatch F32 zeros (src/llama-graph.cpp, build_attn for
      llm_graph_input_attn_k_dsa: ``zeros = ggml_new_tensor_4d(F32, 1, n_top_k, n_batch, ...)`` to unmask the top-k),
      with n_top_k = min(n_kv, index_topk) (src/models/glm-dsa.cpp / deepseek32.cpp); the graph allocator keeps every
      leaf for the whole graph (ggml/src/ggml-alloc.c ggml_gallocr_alloc_graph_impl: leafs are allocated first, never
      freed);
    - 2 x n_kv x n_ubatch x 4 B of context-sized intermediates (the indexer's scores and the top-k KQ mask): the growth
      llama.cpp's CPU compute buffer showed between n_ctx 2048 and 4096 on the DSA cuts (sources/measurements/
      cpu-llamacpp-buffers-2026-archs.csv), not read from the graph; not checked on a GPU."""
    ub = int(LLAMA_CPP_N_UBATCH.value)
    has = minimum(spec.num_indexer_layers, 1)
    top_k = minimum(n_kv, spec.indexer_top_k)
    return has * (spec.num_layers * top_k * ub * C.F32_BYTES + 2 * n_kv * ub * C.F32_BYTES)


def dsv4_kv_elements(spec: ModelSpec, context_tokens: int) -> int:
    """K elements of DeepSeek-V4's caches for one sequence (src/llama-kv-cache-dsv4.cpp llama_kv_cache_dsv4; K only:
    dsv4_make_k_only gives every cache MLA-style K-only storage): the raw cache is a sliding-window cache over every
    layer (set_swa_pattern(0)) of GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256) cells x head_dim; the CSA cache on the
    ratio-4 layers and the HCA cache on the ratio-128 layers GGML_PAD(ceil(n_ctx / ratio), 256) cells x head_dim; the
    lightning-indexer cache on the ratio-4 layers the CSA cell count x indexer_head_dim."""
    pad = int(LLAMA_CPP_CTX_PAD.value)
    ctx = round_up(context_tokens, pad)
    window = min(ctx, round_up(min(ctx, (spec.sliding_window or ctx) + int(LLAMA_CPP_N_UBATCH.value)), pad))
    pat = spec.compress_pattern or ""
    cells = {k: round_up(max(1, -(-ctx // r)), pad) for k, r in DSV4_RATIO.items()}
    head = spec.head_dim * max(spec.num_kv_heads, 1)
    return (len(pat) * window * head + pat.count("C") * cells["C"] * (head + spec.indexer_head_dim)
            + pat.count("H") * cells["H"] * head)


def llama_cpp_prefill_chunks(tokens: int) -> int:
    """Micro-batches of LLAMA_CPP_N_UBATCH a prefill of ``tokens`` runs in."""
    return -(-tokens // int(LLAMA_CPP_N_UBATCH.value))


class LlamaCppRules(EngineRules):
    name = "llama.cpp"

    def kv_cache_tokens(self, spec: ModelSpec, context_tokens: int) -> tuple[int, int]:
        pad = int(LLAMA_CPP_CTX_PAD.value)
        ctx = round_up(context_tokens, pad)
        swa = minimum(context_tokens, window_or(spec, context_tokens))
        if is_array(ctx, spec.sliding_window):
            iswa = minimum(ctx, round_up(spec.sliding_window + int(LLAMA_CPP_N_UBATCH.value), pad))
            return ctx, where((spec.num_swa_layers > 0) & (spec.sliding_window > 0), iswa, swa)
        if spec.num_swa_layers and spec.sliding_window:
            # llama_kv_cache_iswa (src/llama-kv-cache-iswa.cpp): size_swa = GGML_PAD(min(size_base, n_swa + n_ubatch),
            # 256) cells per sequence stream (kv_unified off, the default): the window plus one micro-batch
            swa = min(ctx, round_up(spec.sliding_window + int(LLAMA_CPP_N_UBATCH.value), pad))
        return ctx, swa

    def compute_buffer(self, spec, quant, hw, context_tokens, prompt_tokens, batch):
        return llama_cpp_compute_buffer(spec, context_tokens, llama_cpp_flash_attn(hw))

    def runtime_overhead(self, hw: HardwareProfile) -> tuple[int, str]:
        base = int(C.CUDA_CONTEXT_BYTES.value)
        if hw.backend == "cuda":
            return (base + int(LLAMA_CPP_CUDA_RUN_EXTRA_BYTES.value),
                    "CUDA_CONTEXT_BYTES + LLAMA_CPP_CUDA_RUN_EXTRA_BYTES")
        return base, "CUDA_CONTEXT_BYTES"

    def host_embeddings(self, hw: HardwareProfile) -> bool:
        # llama.cpp keeps the input embedding table in host memory (its input layer is assigned to the CPU)
        return hw.backend not in ("metal", "cpu")

    def cpu_terms(self, hw: HardwareProfile):
        # a CPU's measured (or stated) bandwidth and matmul rate (constants.CPU_*), not a GPU's peaks
        return (C.CPU_DECODE_BW_EFFICIENCY, hw.fp16_flops_per_s or hw.fp32_flops_per_s, "matmul rate",
                C.CPU_MATMUL_FRACTION)

    def skips_mtp_blocks(self) -> bool:
        # src/models/qwen35.cpp, qwen3next.cpp, nemotron-h.cpp: mtp_flags = TENSOR_SKIP without load_mtp, which
        # llama_model_default_params leaves false (analytical.mtp_bytes)
        return True

    def decode_efficiency(self, family: str) -> Const:
        return DECODE_BW_EFFICIENCY.get(family) or DECODE_BW_EFFICIENCY["float"]

    def prefill_mfu(self, key: str) -> Const:
        return PREFILL_MFU[key]

    def prefill_peak_of(self, hw: HardwareProfile, family: str) -> tuple[Optional[float], str, str]:
        if family == "gguf" and hw.int8_ops_per_s:
            # llama.cpp multiplies quantized weights with int8 tensor-core kernels (MMQ) during prompt processing
            return hw.int8_ops_per_s, "INT8 peak", "gguf-int8"
        return hw.fp16_flops_per_s, "FP16 peak", family

    def fixed_step_ms(self, spec: ModelSpec, family: str) -> tuple[float, float, str]:
        return DECODE_OVERHEAD_MS.value, PREFILL_OVERHEAD_MS.value, ""

    def latency_terms(self, hw: HardwareProfile, family: str) -> Optional[dict]:
        return llama_cpp_latency_terms(hw, family) if family in ("gguf", "float") else None

    def kernel_factors(self, quant: str, family: str, hw: HardwareProfile) -> Optional[dict]:
        if family != "gguf" or hw.name not in C.QUANT_KERNEL_HARDWARE:
            return None
        return C.QUANT_KERNEL_SPEEDS.get(quant)

    def quantized_kv_decode_ms(self, spec, kv_dtype, hw, context_tokens, batch):
        return quantized_kv_decode_ms(spec, self.name, kv_dtype, hw, context_tokens, batch)

    def batch_columns_ms(self, spec, family, hw, batch, matrix_rate):
        return llama_cpp_batch_columns_ms(spec, self.name, family, hw, batch, matrix_rate)

    def moe_terms(self, spec: ModelSpec) -> tuple[float, float, str]:
        return moe_llama_cpp_terms(spec, self.name)

    def prefill_chunks(self, tokens: int) -> int:
        return llama_cpp_prefill_chunks(tokens)

    def offload_ubatch_tokens(self) -> int:
        return int(LLAMA_CPP_N_UBATCH.value)

    def offload_copies(self, tokens: int) -> int:
        # partial offload: every micro-batch of >= GGML_CUDA_OFFLOAD_MIN_BATCH tokens copies the host layers' weights
        # to the GPU (ggml-cuda.cu ggml_backend_cuda_device_offload_op)
        ub = int(LLAMA_CPP_N_UBATCH.value)
        return tokens // ub + where(tokens % ub >= C.GGML_CUDA_OFFLOAD_MIN_BATCH.value, 1, 0)

    # --- several GPUs ------------------------------------------------------------------------------------------
    def default_plan_mode(self, spec: ModelSpec, count: int, homogeneous: bool) -> Optional[str]:
        return "layer"  # -sm layer, llama.cpp's default with several GPUs

    def split_compute_buffer(self, spec: ModelSpec, mode: str, output_layer: bool, base_compute: int) -> int:
        """A device's compute buffer in a split: logits of one micro-batch where the output layer is; elsewhere
        (layer split) the MLP intermediates of one micro-batch, (row split) nothing beyond the main GPU's."""
        logits = spec.vocab_size * int(LLAMA_CPP_N_UBATCH.value) * C.F32_BYTES
        if output_layer:
            return logits
        if mode == "row":
            return 0
        width = max(spec.intermediate_size, spec.moe_intermediate_size * max(spec.num_experts_per_tok, 1))
        return int(LLAMA_CPP_N_UBATCH.value) * width * C.F32_BYTES * int(LLAMA_CPP_SPLIT_ACTIVATION_COPIES.value)

    def split_hop(self) -> tuple[float, int]:
        """(latency ms, bytes per element) of one activation hand-off between the devices of a layer split."""
        return LLAMA_CPP_HOP_MS.value, ACT_BYTES_LLAMA_CPP

    def split_device_step_ms(self) -> float:
        """ms each device of a layer split adds to a decode step (LLAMA_CPP_SPLIT_DEVICE_STEP_MS)."""
        return LLAMA_CPP_SPLIT_DEVICE_STEP_MS.value

    def row_syncs(self, n_layer: int) -> tuple[int, float]:
        """(synchronizations per token, ms each) of a row split."""
        return n_layer * ROW_SPLIT_MATMULS_PER_BLOCK, LLAMA_CPP_ROW_SYNC_MS.value


RULES = LlamaCppRules()
