"""SGLang's planning rules (``python -m sglang.launch_server``): its static memory reservation (``--mem-fraction-static``,
chosen from the GPU's memory by its server arguments), its token-granular KV pool (RadixAttention), its step terms
and its tensor parallelism (``--tp``). Planned only: no SGLang probe adapter in this project, so no row here is
measured and every speed term below is an assumption (labelled so in the estimate's basis) until calibration rows
exist.

Sources (SGLang's server arguments: github.com/sgl-project/sglang python/sglang/srt/server_args.py, ServerArgs and
ServerArgs._handle_gpu_memory_settings, read in its late-2025 form; docs.sglang.io "Server Arguments"):
- mem_fraction_static = (GPU memory - reserved) / GPU memory, the fraction for weights + the KV pool; the reserve
  (MiB) = 512 (attention-backend metadata) + 1.5 x max(chunked_prefill_size, 2048) (prefill activations)
  + 2 x cuda_graph_max_bs (CUDA graph buffers) + tp x pp / 8 x 1024, at least 10 GiB on a GPU above 60 GiB; 0.88 when
  the GPU's memory is not known;
- chunked_prefill_size and cuda_graph_max_bs by GPU memory: < 20 GiB 2048 / 8; < 35 GiB 2048 / 24 (80 at tp >= 4);
  < 60 GiB 4096 / 32 (160); < 90 GiB 8192 / 256 (512); < 160 GiB 8192 / 256 (512); else 16384 / 512;
- kv_cache_dtype 'auto' (the model's dtype) or fp8 (fp8_e5m2 / fp8_e4m3); the KV pool is token-granular (page size 1
  on the default FlashInfer / Triton attention backends), so no context padding; RadixAttention keeps finished
  requests' KV for prefix reuse (Zheng et al. 2024, "SGLang: Efficient Execution of Structured Language Model
  Programs", arXiv:2312.07104), which this planner does not credit (one request's prefix is never assumed cached).
"""

from __future__ import annotations

from typing import Optional

from recommender.core.records import HardwareProfile, ModelSpec
from recommender.predict.constants import MIB, Const
from recommender.predict.counts import is_array, maximum, minimum, tp_supported, where, window_or
from recommender.predict.engines import vllm as V
from recommender.predict.engines.base import EngineRules

_ARGS = ("sgl-project/sglang python/sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings")
GIB_MIB = 1024  # MiB per GiB (SGLang's gpu_mem is in MiB: get_device_memory_capacity)

# --- Memory: the reserve outside weights + KV pool (MiB, as server_args computes it) --------------------------------
SGLANG_METADATA_MIB = Const(512, "MiB", _ARGS + ": reserved_mem = 512, 'constant meta data (e.g., from attention "
                                               "backend)'")
SGLANG_ACTIVATION_MIB_PER_CHUNK_TOKEN = Const(1.5, "MiB per token of max(chunked_prefill_size, 2048)",
                                              _ARGS + ": reserved_mem += max(chunked_prefill_size, 2048) x 1.5, "
                                                      "'for activation during large prefill'")
SGLANG_MIN_CHUNK_TOKENS = Const(2048, "tokens", _ARGS + ": max(chunked_prefill_size, 2048)")
SGLANG_CUDA_GRAPH_MIB_PER_BS = Const(2, "MiB per captured batch size", _ARGS + ": reserved_mem += cuda_graph_max_bs x 2")
SGLANG_PARALLEL_MIB_PER_GPU = Const(1024 / 8, "MiB per tp x pp", _ARGS + ": reserved_mem += tp_size x pp_size / 8 x 1024")
SGLANG_LARGE_GPU_MIB = Const(60 * 1024, "MiB", _ARGS + ": 'if gpu_mem > 60 * 1024'")
SGLANG_LARGE_GPU_MIN_RESERVE_MIB = Const(10 * 1024, "MiB", _ARGS + ": reserved_mem = max(reserved_mem, 10 * 1024)")
# (GPU memory below, MiB) -> (chunked_prefill_size, cuda_graph_max_bs at tp < 4, at tp >= 4)
SGLANG_GPU_CLASSES: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),  # T4, 4080
    (35 * 1024, 2048, 24, 80),  # A10, 4090, 5090
    (60 * 1024, 4096, 32, 160),  # A100 40GB, L40
    (90 * 1024, 8192, 256, 512),  # H100, A100 80GB
    (160 * 1024, 8192, 256, 512),  # H20, H200
    (float("inf"), 16384, 512, 512),  # B200, MI300
)
SGLANG_GPU_CLASSES_SOURCE = _ARGS + ": chunked_prefill_size and cuda_graph_max_bs by GPU memory"

# --- Speed: assumptions until SGLang rows are measured ---------------------------------------------------------------
# SGLang runs the same kernel families as vLLM for the planner's quantizations (cuBLAS bf16 GEMMs, FlashInfer
# attention, Marlin for AWQ/GPTQ, CUTLASS / sgl-kernel FP8 and INT8 W8A8 GEMMs) and decodes in CUDA graphs, so its
# bandwidth and compute fractions are taken at vLLM's fitted values (recommender/predict/engines/vllm.py, fitted on
# aiconfigurator's measured vLLM GEMMs). Its per-step host work overlaps the GPU's (the overlap scheduler: lmsys.org
# blog 2024-12-04 "SGLang v0.4: Zero-Overhead Batch Scheduler"), so the per-token overhead is vLLM's assumed 1 ms at
# most: an assumption like it.
_SAME_KERNELS = "assumption: SGLang runs the same GEMM kernels as vLLM; vLLM's value "


def _as_sglang(c: Const) -> Const:
    return Const(c.value, c.unit, _SAME_KERNELS + f"({c.source})")


DECODE_BW_EFFICIENCY: dict[str, Const] = {k: _as_sglang(v) for k, v in V.DECODE_BW_EFFICIENCY.items()}
PREFILL_MFU: dict[str, Const] = {k: _as_sglang(v) for k, v in V.PREFILL_MFU.items()}
DECODE_GEMM_FIXED_MS: dict[str, Const] = {k: _as_sglang(v) for k, v in V.VLLM_DECODE_GEMM_FIXED_MS.items()}
DECODE_OVERHEAD_MS = Const(1.0, "ms/token", "assumption: vLLM's assumed scheduler + sampling step; SGLang's overlap "
                                            "scheduler hides its CPU work (lmsys.org blog 2024-12-04, SGLang v0.4), so "
                                            "at most this; to be fitted by calibration")
PREFILL_OVERHEAD_MS = Const(0.0, "ms", "none beyond SGLANG_PREFILL_MS_PER_LAYER")
SGLANG_PREFILL_MS_PER_LAYER = Const(V.VLLM_PREFILL_MS_PER_LAYER.value, "ms per layer per prefill step",
                                    "assumption: SGLang's prefill runs eagerly like vLLM's (piecewise CUDA graphs off "
                                    "by default); vLLM's measured dispatch cost (" + V.VLLM_PREFILL_MS_PER_LAYER.source
                                    + ")")


def gpu_class(memory_bytes: int, tp: int = 1) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang chooses on a GPU of this memory at this tensor parallelism."""
    mib = memory_bytes / MIB
    for below, chunk, bs_small_tp, bs_large_tp in SGLANG_GPU_CLASSES:
        if mib < below:
            return chunk, (bs_small_tp if tp < 4 else bs_large_tp)
    raise AssertionError("the last class is unbounded")


def reserve_mib(memory_bytes: int, tp: int = 1, pp: int = 1) -> tuple[float, float]:
    """(activation MiB, the rest of SGLang's reserve in MiB) outside weights + KV pool on one GPU, floored as SGLang
    floors it on GPUs above 60 GiB (the floor is added to the second part)."""
    chunk, bs = gpu_class(memory_bytes, tp)
    act = max(chunk, SGLANG_MIN_CHUNK_TOKENS.value) * SGLANG_ACTIVATION_MIB_PER_CHUNK_TOKEN.value
    rest = (SGLANG_METADATA_MIB.value + bs * SGLANG_CUDA_GRAPH_MIB_PER_BS.value
            + tp * pp * SGLANG_PARALLEL_MIB_PER_GPU.value)
    if memory_bytes / MIB > SGLANG_LARGE_GPU_MIB.value:
        rest = max(rest, SGLANG_LARGE_GPU_MIN_RESERVE_MIB.value - act)
    return act, rest


class SglangRules(EngineRules):
    name = "sglang"

    def kv_cache_tokens(self, spec: ModelSpec, context_tokens: int) -> tuple[int, int]:
        # token-granular pool (page size 1): no padding; sliding-window layers keep the window
        return context_tokens, minimum(context_tokens, window_or(spec, context_tokens))

    def compute_buffer(self, spec, quant, hw, context_tokens, prompt_tokens, batch):
        act, _ = reserve_mib(hw.memory_bytes)
        chunk, _bs = gpu_class(hw.memory_bytes)
        return int(act * MIB), (f"SGLang's activation reserve: 1.5 MiB x max(chunked_prefill_size {chunk}, 2048) "
                                f"[{SGLANG_ACTIVATION_MIB_PER_CHUNK_TOKEN.source}]")

    def runtime_overhead(self, hw: HardwareProfile) -> tuple[int, str]:
        _act, rest = reserve_mib(hw.memory_bytes)
        _chunk, bs = gpu_class(hw.memory_bytes)
        return int(rest * MIB), (f"SGLang's reserve beyond activations: 512 MiB metadata + 2 MiB x cuda_graph_max_bs "
                                 f"{bs} + 128 MiB x tp x pp (at least 10 GiB in all on a GPU above 60 GiB; the CUDA "
                                 f"context is inside it) [{_ARGS}]")

    def memory_notes(self, hw: HardwareProfile) -> list[str]:
        act, rest = reserve_mib(hw.memory_bytes)
        frac = round((hw.memory_bytes / MIB - act - rest) / (hw.memory_bytes / MIB), 3)
        return [f"SGLang sets mem_fraction_static={frac} on this GPU ({hw.memory_bytes * frac / 1024**3:.1f} GiB for "
                f"weights and its KV pool) and fills that pool with KV cache at start; total_vram_bytes is what this "
                f"configuration needs. RadixAttention reuses cached prefixes across requests (not credited here)."]

    def decode_efficiency(self, family: str) -> Const:
        return DECODE_BW_EFFICIENCY.get(family) or DECODE_BW_EFFICIENCY["float"]

    def prefill_mfu(self, key: str) -> Const:
        return PREFILL_MFU.get(key) or PREFILL_MFU["*"]

    def fixed_step_ms(self, spec: ModelSpec, family: str) -> tuple[float, float, str]:
        layers = maximum(spec.num_layers, 1)
        gemms = (int(V.VLLM_GEMMS_PER_LAYER.value) + where(spec.is_moe, 1, 0)) * layers + 1  # + the LM head
        t0 = DECODE_GEMM_FIXED_MS.get(family)
        gemm_ms = t0.value * gemms if t0 else 0.0
        layer_ms = SGLANG_PREFILL_MS_PER_LAYER.value * layers
        if is_array(layers):
            return DECODE_OVERHEAD_MS.value + gemm_ms, PREFILL_OVERHEAD_MS.value + layer_ms, "SGLang fixed step (arrays)"
        return DECODE_OVERHEAD_MS.value + gemm_ms, PREFILL_OVERHEAD_MS.value + layer_ms, (
            (f"decode + {gemms} GEMMs x {t0.value * 1e3:.2f} us = {gemm_ms:.3f} ms [{t0.source}]; " if t0 else "")
            + f"prefill + {SGLANG_PREFILL_MS_PER_LAYER.value} ms x {layers} layers = {layer_ms:.1f} ms "
              f"[{SGLANG_PREFILL_MS_PER_LAYER.source}]")

    # --- several GPUs: tensor parallelism (--tp) ---------------------------------------------------------------
    def default_plan_mode(self, spec: ModelSpec, count: int, homogeneous: bool) -> Optional[str]:
        return "tensor" if homogeneous and tp_supported(spec, count) is None else None

    def split_runtime_overhead(self, hw: HardwareProfile, n: int) -> int:
        _act, rest = reserve_mib(hw.memory_bytes, tp=n)
        return int(rest * MIB)

    def allreduce(self) -> tuple[int, int]:
        return V.ALLREDUCES_PER_LAYER, V.ACT_BYTES_VLLM

    def allreduce_ms(self, nbytes: float, n: int, link_bytes_per_s: float, nvlink: bool) -> float:
        # assumption: SGLang's custom all-reduce (sgl-kernel, derived from vLLM's) at vLLM's fitted latency and bus
        # efficiency (recommender/predict/engines/vllm.py VLLM_ALLREDUCE_*)
        return V.ring_allreduce_ms(nbytes, n, link_bytes_per_s, nvlink)


RULES = SglangRules()
