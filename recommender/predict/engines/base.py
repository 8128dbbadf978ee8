"""The protocol every engine's planning rules follow (one module per engine in this package).

The estimator (recommender.predict.analytical, .split) asks an engine's rules for every engine-dependent term and
never compares an engine's name. The terms whose numbers an engine must state itself are abstract: an engine
without them cannot be built, and an engine without a rules module is refused (``rules_for``), never given another
engine's numbers. The optional terms below (kernel factors, MoE routing, quantized-KV attention, batched columns,
partial offload, multi-GPU) default to "no such term" (an engine that has none adds nothing for them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional

from recommender.core.engines import EngineSpec, engine_spec
from recommender.core.records import HardwareProfile, ModelSpec
from recommender.predict import constants as C
from recommender.predict import counts


class EngineRules(ABC):
    """One engine's rules: memory terms, speed terms and multi-GPU terms."""

    name: str  # its EngineSpec name (recommender.core.engines)

    @property
    def spec(self) -> EngineSpec:
        return engine_spec(self.name)

    # --- memory ------------------------------------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self, spec: ModelSpec) -> int:
        """K and V elements one token adds to one layer's cache: GQA-aware, the MLA latent where the engine caches
        it (counts.kv_elements_per_token_per_layer); an engine that caches MLA's full heads overrides this."""
        return counts.kv_elements_per_token_per_layer(spec, mla_latent=True)

    @abstractmethod
    def kv_cache_tokens(self, spec: ModelSpec, context_tokens: int) -> tuple[int, int]:
        """(cells per sequence of a full-attention layer, cells of a sliding-window layer): the context with the
        engine's padding."""

    @abstractmethod
    def compute_buffer(self, spec: ModelSpec, quant: str, hw: HardwareProfile, context_tokens: int,
                       prompt_tokens: int, batch: int) -> tuple[int, str]:
        """(bytes, basis) of the engine's activation / compute buffers on the GPU."""

    @abstractmethod
    def runtime_overhead(self, hw: HardwareProfile) -> tuple[int, str]:
        """(bytes, basis) the engine's process holds on a GPU beyond weights, KV cache and compute buffer."""

    def host_embeddings(self, hw: HardwareProfile) -> bool:
        """Whether the token-embedding table stays in host RAM (llama.cpp on a discrete GPU)."""
        return False

    def skips_mtp_blocks(self) -> bool:
        """Whether the engine leaves a checkpoint's multi-token-prediction blocks unloaded (analytical.mtp_bytes)."""
        return False

    def memory_notes(self, hw: HardwareProfile) -> list[str]:
        """Notes on how the engine takes GPU memory (vLLM's up-front reservation)."""
        return []

    # --- speed -------------------------------------------------------------------------------------------------
    @abstractmethod
    def decode_efficiency(self, family: str) -> C.Const:
        """Fraction of memory bandwidth a decode step reaches with weights of this quantization family."""

    @abstractmethod
    def prefill_mfu(self, key: str) -> C.Const:
        """Fraction of the peak (``prefill_peak``'s) a prefill reaches; ``key`` is the family (or 'gguf-int8')."""

    def prefill_peak_of(self, hw: HardwareProfile, family: str) -> tuple[Optional[float], str, str]:
        """(peak, its label, the MFU key) a prefill of this family is measured against: dense FP16 by default."""
        return hw.fp16_flops_per_s, "FP16 peak", family

    @abstractmethod
    def fixed_step_ms(self, spec: ModelSpec, family: str) -> tuple[float, float, str]:
        """(decode ms, prefill ms, basis) a step costs beyond its bytes and FLOPs terms (host work, launches)."""

    def cpu_terms(self, hw: HardwareProfile) -> Optional[tuple[C.Const, Optional[float], str, C.Const]]:
        """(decode efficiency, matmul peak, its label, its fraction) on a CPU host; None: the engine's GPU-fitted
        terms do not hold on a CPU (its figures are calibrated or unknown there)."""
        return None

    def latency_terms(self, hw: HardwareProfile, family: str) -> Optional[dict]:
        """Per-GPU-family fits replacing decode_efficiency / prefill_mfu (llama.cpp); None: the constants hold."""
        return None

    def kernel_factors(self, quant: str, family: str, hw: HardwareProfile) -> Optional[dict]:
        """Measured per-quant kernel speed factors ({'decode_factor', 'prefill_factor'}) on this GPU, or None."""
        return None

    def quantized_kv_decode_ms(self, spec: ModelSpec, kv_dtype: str, hw: HardwareProfile, context_tokens: int,
                               batch: int) -> tuple[Optional[float], str]:
        """Decode ms a quantized KV cache takes in place of its bytes' read time; (None, '') when not modelled."""
        return None, ""

    def batch_columns_ms(self, spec: ModelSpec, family: str, hw: HardwareProfile, batch: int,
                         matrix_rate: Optional[float]) -> tuple[float, str]:
        """ms a batched decode step spends on its columns beyond the memory terms; (0, '') when it is a roofline."""
        return 0.0, ""

    def moe_terms(self, spec: ModelSpec) -> tuple[float, float, str]:
        """(extra decode ms, prefill matmul factor, basis) of an MoE model; (0, 1, '') when none are measured."""
        return 0.0, 1.0, ""

    def prefill_chunks(self, tokens: int) -> int:
        """Steps a prefill of ``tokens`` runs in (llama.cpp: micro-batches); 1: the whole prompt at once."""
        return 1

    def offload_ubatch_tokens(self) -> int:
        """Tokens of one prompt micro-batch (partial offload: each copies the host layers' weights once)."""
        raise NotImplementedError(f"{self.name} has no partial offload (EngineSpec.partial_offload)")

    def offload_copies(self, tokens: int) -> int:
        """Host-to-GPU copies of the host layers' weights a prefill of ``tokens`` makes (partial offload)."""
        raise NotImplementedError(f"{self.name} has no partial offload (EngineSpec.partial_offload)")

    # --- several GPUs (predict.split) ----------------------------------------------------------------------------
    def default_plan_mode(self, spec: ModelSpec, count: int, homogeneous: bool) -> Optional[str]:
        """The split mode the engine uses by default over ``count`` GPUs; None: no multi-GPU plan."""
        return None

    def split_runtime_overhead(self, hw: HardwareProfile, n: int) -> int:
        """Bytes of the runtime one device ``hw`` of a split over ``n`` GPUs holds (its CUDA context, graphs)."""
        return int(C.CUDA_CONTEXT_BYTES.value)

    def split_budget(self, memory_bytes: int) -> tuple[int, bool]:
        """(bytes one device of a split may use, whether the rest of that budget becomes KV blocks)."""
        return memory_bytes, False

    def split_compute_buffer(self, spec: ModelSpec, mode: str, output_layer: bool, base_compute: int) -> int:
        """A device's compute buffer in a layer / pipeline / row split (tensor parallelism shards the one-GPU
        buffer); by default the one-GPU buffer on every device."""
        return base_compute

    # the terms of the split modes an engine has (EngineSpec.split_modes): an engine without the mode never gets here
    def split_hop(self) -> tuple[float, int]:
        """(latency ms, bytes per activation element) of one hand-off between the devices of a layer / pipeline
        split."""
        raise NotImplementedError(f"{self.name} has no layer or pipeline split")

    def split_device_step_ms(self) -> float:
        """ms each device of a layer / pipeline split adds to a decode step beyond its share and the hops; 0 unless
        an engine's rules measure it."""
        return 0.0

    def row_syncs(self, n_layer: int) -> tuple[int, float]:
        """(synchronizations per token, ms each) of a row split."""
        raise NotImplementedError(f"{self.name} has no row split")

    def allreduce(self) -> tuple[int, int]:
        """(all-reduces per layer, bytes per activation element) of tensor parallelism."""
        raise NotImplementedError(f"{self.name} has no tensor parallelism")

    def allreduce_ms(self, nbytes: float, n: int, link_bytes_per_s: float, nvlink: bool) -> float:
        raise NotImplementedError(f"{self.name} has no tensor parallelism")
