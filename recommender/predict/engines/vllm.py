"""vLLM's planning rules: its memory reservation (gpu_memory_utilization, the profiling run's activations, CUDA
graphs), decode / prefill terms fitted on aiconfigurator's measured vLLM GEMMs, and its tensor / pipeline parallelism
(all-reduce and send latencies). The derivations are in docs/estimates.md."""

from __future__ import annotations

from typing import Optional

from recommender.core.records import HardwareProfile, ModelSpec
from recommender.predict import constants as C
from recommender.predict.constants import MIB, Const
from recommender.predict.counts import is_array, maximum, minimum, mlp_width, tp_supported, where, window_or
from recommender.predict.engines.base import EngineRules

# vLLM: fraction of GPU memory it reserves at start-up (weights + activations + KV cache fill it) and the token
# budget its profiling run uses for activations.
VLLM_GPU_MEMORY_UTILIZATION = Const(0.92, "fraction", "vLLM CacheConfig.gpu_memory_utilization default 0.92 "
                                                      "(docs.vllm.ai stable, vllm/config/cache.py; 0.9 in v0.9-v0.10)")
VLLM_MAX_NUM_BATCHED_TOKENS = Const(2048, "tokens", "vLLM V1 default max_num_batched_tokens for online serving "
                                                    "on GPUs below the H100 class (vllm/engine/arg_utils.py)")
VLLM_CUDA_GRAPH_BYTES = Const(512 * MIB, "bytes", "assumption: vLLM logs 'Graph capturing finished ... took "
                                                  "0.1-1 GiB' depending on model; to be fitted by calibration")

# --- Decode (per generated token) -----------------------------------------------------------------------------
# time/token = bytes read / (bandwidth x efficiency) + per-token overhead (kernel launches, sampling, host work).
_AIC_DECODE = ("fitted by bench/vllm_refit.py on ai-dynamo/aiconfigurator's measured vLLM 0.14 decode GEMMs (m = 1-8, "
               "sources/published_perf/aiconfigurator_gemm_decode.csv) as bytes / (bandwidth x efficiency) + "
               "VLLM_DECODE_GEMM_FIXED_MS; H200 SXM held out")
DECODE_BW_EFFICIENCY: dict[str, Const] = {
    "float": Const(0.8124, "fraction of bandwidth", _AIC_DECODE + "; bf16, fitted on H100 SXM and A100 SXM"),
    "awq": Const(0.5, "fraction of bandwidth", "assumption: Marlin 4-bit kernels; to be fitted by calibration"),
    "gptq": Const(0.5, "fraction of bandwidth", "assumption: Marlin 4-bit kernels; to be fitted by calibration"),
    "fp8": Const(0.8822, "fraction of bandwidth", _AIC_DECODE + "; fp8, fitted on H100 SXM"),
}
DECODE_OVERHEAD_MS = Const(1.0, "ms/token", "assumption: scheduler + sampling step; to be fitted by calibration")

# --- Prefill ----------------------------------------------------------------------------------------------------
# time = max(FLOPs / (peak x MFU), weight bytes / (bandwidth x decode efficiency)) + fixed overhead (dense FP16 peak)
_AIC_PREFILL = ("fitted by bench/vllm_refit.py on ai-dynamo/aiconfigurator's measured vLLM 0.14 prefill GEMMs (m = "
                "256-8192, sources/published_perf/aiconfigurator_gemm_prefill.csv); H200 SXM held out; GEMMs only: "
                "attention is taken at the same fraction")
PREFILL_MFU: dict[str, Const] = {
    "*": Const(0.4, "fraction of FP16 peak", "assumption (AWQ/GPTQ); to be fitted by calibration"),
    "float": Const(0.7881, "fraction of FP16 peak", _AIC_PREFILL + "; bf16, fitted on H100 SXM and A100 SXM"),
    "fp8": Const(0.8103, "fraction of FP16 peak", _AIC_PREFILL + "; fp8, fitted on H100 SXM"),
}
PREFILL_OVERHEAD_MS = Const(0.0, "ms", "none beyond VLLM_PREFILL_MS_PER_LAYER (which holds the per-step host work)")
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


# --- several GPUs (predict.split: tensor / pipeline parallelism) ------------------------------------------------
# vLLM all-reduce: the latency term of its custom all-reduce / NCCL ring, fitted on aiconfigurator's measured
# vLLM 0.14 custom_allreduce_perf tables (H100 SXM fit; H200 SXM and A100 SXM held out, bench/multigpu.py).
VLLM_ALLREDUCE_LATENCY_MS = Const(0.00449, "ms per all-reduce of 2 GPUs",
                                    "fitted by bench/multigpu.py on ai-dynamo/aiconfigurator "
                                    "systems/data/h100_sxm/comm/vllm/0.14.0/custom_allreduce_perf (CUDA-graph rows, "
                                    "messages <= 64 Ki bf16 elements, least squares a + b (n - 2)); copied to "
                                    "sources/published_perf/aiconfigurator_allreduce.csv")
VLLM_ALLREDUCE_LATENCY_PER_GPU_MS = Const(0.00014, "ms per all-reduce per GPU beyond 2",
                                            "fitted with VLLM_ALLREDUCE_LATENCY_MS (same rows)")
VLLM_ALLREDUCE_BUS_EFFICIENCY = Const(0.692, "fraction of the link's per-direction bandwidth",
                                        "fitted with VLLM_ALLREDUCE_LATENCY_MS on the same H100 SXM table, messages "
                                        ">= 4 Mi elements: median of bus bandwidth (2 (n-1)/n x bytes / time) over "
                                        "NVLink's 450 GB/s per direction")
PCIE_ALLREDUCE_LATENCY_MS = Const(0.030, "ms per all-reduce",
                                    "assumption: NCCL ring over PCIe through the host (vLLM turns its custom "
                                    "all-reduce off on PCIe-only machines of more than two GPUs); nccl-tests report "
                                    "tens of microseconds for small messages over PCIe; no published row checked")
VLLM_BLOCK_SIZE = Const(16, "tokens per KV block", "vLLM CacheConfig.block_size default 16 on CUDA")
ALLREDUCES_PER_LAYER = 2  # Megatron-LM tensor parallelism: after the attention output and the MLP down projection
ACT_BYTES_VLLM = 2  # bf16/f16 activations


def ring_allreduce_ms(nbytes: float, n: int, link_bytes_per_s: float, nvlink: bool) -> float:
    """One all-reduce of nbytes over n GPUs: latency + 2 (n-1)/n x bytes / (link bandwidth x bus efficiency)."""
    if n < 2:
        return 0.0
    if nvlink:
        lat = VLLM_ALLREDUCE_LATENCY_MS.value + VLLM_ALLREDUCE_LATENCY_PER_GPU_MS.value * (n - 2)
    else:
        lat = PCIE_ALLREDUCE_LATENCY_MS.value
    return lat + 2 * (n - 1) / n * nbytes / (link_bytes_per_s * VLLM_ALLREDUCE_BUS_EFFICIENCY.value) * 1e3


def vllm_fixed_step_ms(spec: ModelSpec, family: str, decode_ms: float, prefill_ms: float) -> tuple[float, float, str]:
    """(decode ms, prefill ms, basis): the per-token and per-prefill overheads plus the fixed time of every decode GEMM
    (VLLM_DECODE_GEMM_FIXED_MS x GEMMs per step) and the per-layer prefill dispatch (VLLM_PREFILL_MS_PER_LAYER). Every
    GPU of a split runs all of them once per step (tensor parallel: every layer's GEMMs, smaller; pipeline: each its
    layers', in turn)."""
    layers = maximum(spec.num_layers, 1)
    per_layer = int(VLLM_GEMMS_PER_LAYER.value) + where(spec.is_moe, 1, 0)
    gemms = per_layer * layers + 1  # + the LM head
    t0 = VLLM_DECODE_GEMM_FIXED_MS.get(family)
    gemm_ms = t0.value * gemms if t0 else 0.0
    layer_ms = VLLM_PREFILL_MS_PER_LAYER.value * layers
    if is_array(layers):
        return decode_ms + gemm_ms, prefill_ms + layer_ms, "vLLM fixed step (arrays)"
    return decode_ms + gemm_ms, prefill_ms + layer_ms, (
        (f"decode + {gemms} GEMMs x {t0.value * 1e3:.2f} us = {gemm_ms:.3f} ms [{t0.source}]; " if t0 else "")
        + f"prefill + {VLLM_PREFILL_MS_PER_LAYER.value} ms x {layers} layers = {layer_ms:.1f} ms "
          f"[{VLLM_PREFILL_MS_PER_LAYER.source}]")


class VllmRules(EngineRules):
    name = "vllm"
    # memory: the reservation and the profiling run (a subclass of another engine that shares vLLM's design names
    # its own figures here)
    gpu_memory_utilization = VLLM_GPU_MEMORY_UTILIZATION
    memory_flag = "gpu_memory_utilization"
    batched_tokens = VLLM_MAX_NUM_BATCHED_TOKENS
    graph_bytes = VLLM_CUDA_GRAPH_BYTES
    block_size = VLLM_BLOCK_SIZE

    def kv_cache_tokens(self, spec: ModelSpec, context_tokens: int) -> tuple[int, int]:
        return context_tokens, minimum(context_tokens, window_or(spec, context_tokens))

    def compute_buffer(self, spec, quant, hw, context_tokens, prompt_tokens, batch):
        act_bytes = 2  # activations in f16/bf16
        tokens = int(self.batched_tokens.value)
        return (tokens * mlp_width(spec) * int(C.TORCH_ACTIVATION_COPIES.value) * act_bytes,
                "VLLM_MAX_NUM_BATCHED_TOKENS x intermediate x TORCH_ACTIVATION_COPIES x 2 B (profiling run peak)")

    def runtime_overhead(self, hw: HardwareProfile) -> tuple[int, str]:
        return (int(C.CUDA_CONTEXT_BYTES.value) + int(self.graph_bytes.value),
                "CUDA_CONTEXT_BYTES + VLLM_CUDA_GRAPH_BYTES")

    def memory_notes(self, hw: HardwareProfile) -> list[str]:
        frac = self.gpu_memory_utilization.value
        reserve = int(hw.memory_bytes * frac)
        return [f"vLLM reserves gpu_memory_utilization={frac} of the GPU ({reserve / 1024**3:.1f} GiB) at start and "
                f"fills the rest with KV cache; total_vram_bytes is what this configuration needs. Cap it with "
                f"kv_cache_memory_bytes or gpu_memory_utilization."]

    def decode_efficiency(self, family: str) -> Const:
        return DECODE_BW_EFFICIENCY.get(family) or DECODE_BW_EFFICIENCY["float"]

    def prefill_mfu(self, key: str) -> Const:
        return PREFILL_MFU.get(key) or PREFILL_MFU["*"]

    def fixed_step_ms(self, spec: ModelSpec, family: str) -> tuple[float, float, str]:
        return vllm_fixed_step_ms(spec, family, DECODE_OVERHEAD_MS.value, PREFILL_OVERHEAD_MS.value)

    # --- several GPUs ------------------------------------------------------------------------------------------
    def default_plan_mode(self, spec: ModelSpec, count: int, homogeneous: bool) -> Optional[str]:
        """Tensor parallelism when the heads divide over identical GPUs, else pipeline parallelism."""
        if not homogeneous:
            return "pipeline"
        return "tensor" if tp_supported(spec, count) is None else "pipeline"

    def split_runtime_overhead(self, hw: HardwareProfile, n: int) -> int:
        return int(C.CUDA_CONTEXT_BYTES.value) + int(self.graph_bytes.value)

    def split_budget(self, memory_bytes: int) -> tuple[int, bool]:
        return int(memory_bytes * self.gpu_memory_utilization.value), True

    def split_hop(self) -> tuple[float, int]:
        """(latency ms, bytes per element) of one activation send between pipeline stages."""
        return PCIE_ALLREDUCE_LATENCY_MS.value, ACT_BYTES_VLLM

    def allreduce(self) -> tuple[int, int]:
        """(all-reduces per layer, bytes per activation element) of tensor parallelism."""
        return ALLREDUCES_PER_LAYER, ACT_BYTES_VLLM

    def allreduce_ms(self, nbytes: float, n: int, link_bytes_per_s: float, nvlink: bool) -> float:
        return ring_allreduce_ms(nbytes, n, link_bytes_per_s, nvlink)


RULES = VllmRules()
