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

from typing import NamedTuple, Optional

from pydantic import Field


from recommender.core.engines import engine_spec
from recommender.core.errors import UserError
from recommender.core.records import HardwareProfile, ModelSpec, Provenance, Strict, Variant
from recommender.model.arch import gguf_arch, mtp_tensor_skipped
from recommender.model.quant import QUANTS, weights_breakdown
from recommender.predict import constants as C
from recommender.predict.counts import (  # noqa: F401  (engine-free arithmetic, named here for its callers)
    MEMO_MAX_ENTRIES, RECURRENT_STATE_BYTES, any_true, attention_layers, clear_memos, compressed, decode_flops,
    indexer_key_elements_per_token, is_array,
    maximum, minimum, per_model, per_record, power, prefill_flops, prefill_flops_parts, recurrent_state_bytes,
    round_int, round_up, to_int, where)
from recommender.predict.engines import rules_for
from recommender.predict.engines.llama_cpp import (  # noqa: F401  (llama.cpp's terms, named here for their callers)
    dsv4_kv_elements, family_speed, llama_cpp_batch_columns_ms, llama_cpp_compute_buffer, llama_cpp_flash_attn, llama_cpp_latency_terms,
    mmq_rate, moe_llama_cpp_terms, prefill_peak, speed_family)


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


class EstimateArrays:
    """An Estimate's terms for arrays of configurations (``estimate`` with array arguments): the same names, numpy
    arrays (one element per configuration) where Estimate has numbers, no bases. None where a figure is unknown for
    every row (the profile lacks it)."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)


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


def _family(quant: str) -> str:

    return QUANTS[quant].family


class VariantBytes(NamedTuple):
    """Byte sums of one variant's tensors (llama.cpp GGUF names, :func:`recommender.model.quant.weights_breakdown`):
    what memory and speed need of the file, tensor by tensor. ``catalog build`` stores them in the variants table
    (migration 4) and the catalog offers them through :func:`seed_variant_source`, so a question does not type every tensor
    of every model again (issue 26: about 290,000 ``gguf_tensor_type`` calls per fresh process)."""

    total_bytes: int
    embedding_bytes: int  # token_embd + Gemma-4's per-layer table (input-layer lookups, kept in host memory)
    expert_bytes: int  # routed-expert tensors (``_exps.``)
    output_bytes: int  # outside the blocks, less the token embeddings (output.weight, output_norm.weight)
    ple_bytes: int  # Gemma-4's per_layer_token_embd.weight (0 for other models)
    mtp_bytes: int  # multi-token-prediction blocks after the trunk (blk.{num_layers}...)
    mtp_expert_bytes: int  # the routed-expert tensors of those blocks


_INPUT_TABLES = ("token_embd.weight", "per_layer_token_embd.weight")
_BYTES_CACHE: dict[tuple, VariantBytes] = {}
# Catalogs' stored sums, asked only when a variant's sums are first needed (a question reads ~1,000 of the 7,700
# variants: handing every row over at read time cost more than the lookups), as weak references to each catalog's
# ``(spec, quant) -> VariantBytes or None`` method, so a closed catalog's rows are not kept alive here.
_SEED_SOURCES: list = []


def variant_bytes_key(spec: ModelSpec, quant: str) -> tuple:
    return spec.id, spec.params_total, spec.num_layers, spec.hidden_size, quant


def variant_byte_sums(spec: ModelSpec, quant: str) -> VariantBytes:
    """:class:`VariantBytes` of one variant: from the catalog when it was seeded, else tensor by tensor (cached)."""
    key = variant_bytes_key(spec, quant)
    hit = _BYTES_CACHE.get(key)
    if hit is None:
        for ref in tuple(_SEED_SOURCES):  # the first live catalog that stored them
            source = ref()
            if source is None:
                _SEED_SOURCES.remove(ref)
                continue
            hit = source(spec, quant)
            if hit is not None:
                _BYTES_CACHE[key] = hit
                return hit
        trunk = tuple(f"blk.{i}." for i in range(spec.num_layers, spec.num_layers + (spec.nextn_layers or 0)))
        arch = gguf_arch(spec)
        total = embd = experts = outside = ple = mtp = mtp_experts = 0
        for name, _type, nbytes in weights_breakdown(spec, quant):
            total += nbytes
            is_expert = "_exps." in name
            if is_expert:
                experts += nbytes
            if name in _INPUT_TABLES:
                embd += nbytes
                if name == "per_layer_token_embd.weight":
                    ple += nbytes
            elif not name.startswith("blk."):
                outside += nbytes
            elif trunk and name.startswith(trunk) and mtp_tensor_skipped(arch, name):
                mtp += nbytes
                mtp_experts += nbytes if is_expert else 0
        hit = _BYTES_CACHE[key] = VariantBytes(total, embd, experts, outside, ple, mtp, mtp_experts)
    return hit


def seed_variant_source(source) -> None:
    """A catalog's stored sums (``catalog build`` stores them; the shipped catalog's test rebuilds it and compares),
    asked when a variant's sums are first needed: ``source`` is a weak reference (``weakref.WeakMethod``) to a
    ``(spec, quant) -> VariantBytes | None`` that answers only for exactly the spec it holds. Sources are asked in the
    order they were added; sums already known (computed, or taken from an earlier source) are not asked again."""
    _SEED_SOURCES.append(source)


def variant_bytes(spec: ModelSpec, quant: str) -> tuple[int, int, int]:
    """(total, token-embedding, routed-expert) bytes of one variant, tensor by tensor (cached per run)."""
    return variant_byte_sums(spec, quant)[:3]


def tied_output_bytes(spec: ModelSpec, quant: str, embd_bytes: int) -> int:
    """Bytes of the output projection a tied model loads from token_embd: the input-layer bytes (``embd_bytes``,
    :func:`variant_bytes`) less Gemma-4's per-layer-embedding table, which is input-only (a lookup, LLM_TENSOR_LAYER_INPUT
    in src/llama-arch.cpp, so llama.cpp keeps it in host memory with token_embd)."""
    if is_array(embd_bytes):  # one row per configuration (module docstring of counts: array-agnostic)
        return maximum(embd_bytes - per_model(_ple_bytes, spec, quant), 0)
    if not spec.per_layer_input_size:
        return embd_bytes
    return max(embd_bytes - _ple_bytes(spec, quant), 0)


def _ple_bytes(spec: ModelSpec, quant: str) -> int:
    """Bytes of Gemma-4's per-layer-embedding table (0 for a model without one)."""
    return variant_byte_sums(spec, quant).ple_bytes if spec.per_layer_input_size else 0


def output_bytes(spec: ModelSpec, quant: str) -> int:
    """Bytes of the tensors outside the repeating blocks other than the token embedding (output.weight,
    output_norm.weight): llama.cpp's "output layer", on the GPU only when every layer is offloaded."""
    return variant_byte_sums(spec, quant).output_bytes


def mtp_bytes(spec: ModelSpec, quant: str) -> tuple[int, int]:
    """Bytes of the multi-token-prediction blocks a GGUF carries after the trunk (blk.{num_layers}...; Qwen3-Next /
    Qwen3.5 / Nemotron-3-Super): part of the file, but llama.cpp does not load them unless asked for MTP drafting
    (src/models/qwen35.cpp, qwen3next.cpp, nemotron-h.cpp: mtp_flags = TENSOR_SKIP without load_mtp, which
    llama_model_default_params leaves false), so they take no memory and are not read per token. Returns (total,
    routed-expert) bytes of those blocks. Step-3.5 / 3.7 (src/models/step35.cpp) skips only part of each block
    (recommender.model.arch.mtp_tensor_skipped): its MTP blocks' q/k norms, attention gate, dense MLP and own output
    head are loaded, so they count as resident weights; Hy3 (src/models/hy-v3.cpp) skips its block's attention, norms
    and nextn.* tensors but loads the block's FFN."""
    if not spec.nextn_layers:
        return 0, 0
    sums = variant_byte_sums(spec, quant)
    return sums.mtp_bytes, sums.mtp_expert_bytes


# ------------------------------------------------------------------------------------------------------------
# KV cache
# ------------------------------------------------------------------------------------------------------------
def kv_elements_per_token_per_layer(spec: ModelSpec, engine: str) -> int:
    """K and V elements one token adds to one layer's cache on ``engine`` (its rules: the MLA latent or full heads)."""
    return rules_for(engine).kv_elements_per_token_per_layer(spec)


def _split_kv_elements(spec: ModelSpec) -> tuple[int, int]:
    """(full-attention, sliding-window) layers' K + V elements per token for a model with per-layer head sizes
    (Gemma-4: global_head_dim x num_global_key_value_heads on full layers, head_dim x num_key_value_heads on sliding
    ones; llama.cpp caches V even where V = K, src/llama-kv-cache.cpp sizes it by n_embd_v_gqa(il))."""
    return (2 * where(spec.full_num_kv_heads, spec.full_num_kv_heads, spec.num_kv_heads) * spec.full_head_dim,
            2 * spec.num_kv_heads * spec.head_dim)


class LlamaCppOnly(UserError, ValueError):
    """A model whose memory is modelled for llama.cpp only, asked for another engine: a per-engine refusal the CLI
    prints as an error with its hint (a ValueError too, for the callers that catch one)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, hint="ask for --engine llama.cpp with a GGUF quantization (Q4_K_M, Q8_0, ...)")


def _llama_cpp_only(spec: ModelSpec, engine: str) -> None:
    """Caches modelled from llama.cpp's own (quant.LLAMA_CPP_ONLY_ARCHS) - DeepSeek-V4's compressed caches
    (src/llama-kv-cache-dsv4.cpp), DeepSeek sparse attention's indexer key cache (src/llama-kv-cache-dsa.cpp): an
    engine that loads GGUF files (its record's file_format) runs them; the others are refused."""
    if engine_spec(engine).file_format == "gguf":
        return
    if compressed(spec):
        raise LlamaCppOnly(f"{spec.id}: DeepSeek-V4's compressed caches are modelled for llama.cpp only, not {engine}")
    if spec.num_indexer_layers:
        raise LlamaCppOnly(f"{spec.id}: DeepSeek sparse attention's indexer key cache is modelled for llama.cpp "
                           f"only, not {engine}")


@per_record
def kv_bytes_per_token(spec: ModelSpec, engine: str = "llama.cpp", kv_dtype: str = "f16") -> int:
    if compressed(spec):
        # DeepSeek-V4: the growth of its compressed caches per token (1/4 of a head_dim + indexer row on each CSA
        # layer, 1/128 of a head_dim row on each HCA layer); the sliding-window part does not grow
        _llama_cpp_only(spec, engine)
        pat = spec.compress_pattern
        head = spec.head_dim * max(spec.num_kv_heads, 1)
        per = pat.count("C") * (head + spec.indexer_head_dim) / 4 + pat.count("H") * head / 128
        return int(round(per * C.KV_DTYPE_BYTES[kv_dtype]))
    if is_array(spec.full_head_dim):
        full_el, swa_el = _split_kv_elements(spec)
        full_layers = attention_layers(spec) - spec.num_swa_layers
        split = round_int((full_el * full_layers + swa_el * spec.num_swa_layers) * C.KV_DTYPE_BYTES[kv_dtype])
        per_layer = kv_elements_per_token_per_layer(spec, engine) * C.KV_DTYPE_BYTES[kv_dtype]
        idx = indexer_key_elements_per_token(spec) * C.KV_DTYPE_BYTES[kv_dtype]
        return where(spec.full_head_dim, split, round_int(per_layer * attention_layers(spec) + idx))
    if spec.full_head_dim:
        full_el, swa_el = _split_kv_elements(spec)
        full_layers = attention_layers(spec) - spec.num_swa_layers
        return int(round((full_el * full_layers + swa_el * spec.num_swa_layers) * C.KV_DTYPE_BYTES[kv_dtype]))
    _llama_cpp_only(spec, engine)
    per_layer = kv_elements_per_token_per_layer(spec, engine) * C.KV_DTYPE_BYTES[kv_dtype]
    idx = indexer_key_elements_per_token(spec) * C.KV_DTYPE_BYTES[kv_dtype]  # DSA indexer keys (0 without)
    return int(round(per_layer * attention_layers(spec) + idx))


@per_record
def kv_cache_bytes(spec: ModelSpec, context_tokens: int, batch: int, engine: str = "llama.cpp",
                   kv_dtype: str = "f16") -> int:
    """Cache for `batch` sequences of `context_tokens` each; sliding-window layers keep at most the window."""
    if compressed(spec):
        _llama_cpp_only(spec, engine)
        return int(round(dsv4_kv_elements(spec, context_tokens) * C.KV_DTYPE_BYTES[kv_dtype] * batch)) \
            + recurrent_state_bytes(spec, batch)
    per_layer_token = kv_elements_per_token_per_layer(spec, engine) * C.KV_DTYPE_BYTES[kv_dtype]
    ctx, swa_tokens = rules_for(engine).kv_cache_tokens(spec, context_tokens)  # the engine's padding
    full_layers = attention_layers(spec) - spec.num_swa_layers
    if is_array(spec.full_head_dim, ctx):  # one row per configuration: both forms, each row takes its own
        full_el, swa_el = _split_kv_elements(spec)
        split = round_int((full_el * full_layers * ctx + swa_el * spec.num_swa_layers * swa_tokens)
                          * C.KV_DTYPE_BYTES[kv_dtype] * batch)
        plain = round_int((per_layer_token * (full_layers * ctx + spec.num_swa_layers * swa_tokens)
                           + indexer_key_elements_per_token(spec) * C.KV_DTYPE_BYTES[kv_dtype] * ctx) * batch)
        return where(spec.full_head_dim, split, plain) + recurrent_state_bytes(spec, batch)
    if spec.full_head_dim:  # Gemma-4: per-layer head sizes (KV-shared layers are not in attention_layers)
        full_el, swa_el = _split_kv_elements(spec)
        elements = full_el * full_layers * ctx + swa_el * spec.num_swa_layers * swa_tokens
        return int(round(elements * C.KV_DTYPE_BYTES[kv_dtype] * batch)) + recurrent_state_bytes(spec, batch)
    tokens = full_layers * ctx + spec.num_swa_layers * swa_tokens
    _llama_cpp_only(spec, engine)
    # DSA: the indexer key cache has the main cache's cells (llama_kv_cache_dsa: one kv_size for kv_mla and kv_lid)
    idx = indexer_key_elements_per_token(spec) * C.KV_DTYPE_BYTES[kv_dtype] * ctx
    return int(round((per_layer_token * tokens + idx) * batch)) + recurrent_state_bytes(spec, batch)


def fixed_step_ms(spec: ModelSpec, engine: str, family: str) -> tuple[float, float, str]:
    """(decode ms, prefill ms, basis) a step takes beyond its bytes and FLOPs terms: the engine's per-token and
    per-prefill overheads and its fixed per-step work (rules_for(engine).fixed_step_ms). Every GPU of a split runs
    all of them once per step (tensor parallel: every layer's GEMMs, smaller; layer/pipeline: each its layers', in
    turn)."""
    return rules_for(engine).fixed_step_ms(spec, family)


def quantized_kv_decode_ms(spec: ModelSpec, engine: str, kv_dtype: str, hw: HardwareProfile, context_tokens: int,
                           batch: int) -> tuple[Optional[float], str]:
    """Decode ms/token an engine spends on a quantized KV cache in place of its bytes' read time, and its basis;
    (None, '') where its rules have no such term."""
    return rules_for(engine).quantized_kv_decode_ms(spec, kv_dtype, hw, context_tokens, batch)


# ------------------------------------------------------------------------------------------------------------
# The estimate
# ------------------------------------------------------------------------------------------------------------
def _runtime_overhead(engine: str, hw: HardwareProfile) -> tuple[int, str]:
    if hw.backend == "metal":
        return int(C.METAL_CONTEXT_BYTES.value), "METAL_CONTEXT_BYTES"
    if hw.backend == "cpu":
        return 0, "none (CPU: no device context)"
    return rules_for(engine).runtime_overhead(hw)


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
    r = rules_for(engine)  # an engine without rules is refused here
    kv_dtype = kv_dtype or C.ENGINE_KV_DTYPES[engine][0]
    if kv_dtype not in C.ENGINE_KV_DTYPES[engine]:
        raise ValueError(f"KV dtype {kv_dtype} is not one {engine} offers ({', '.join(C.ENGINE_KV_DTYPES[engine])})")
    # arrays (recommender.predict.vector): one element per configuration; gpu_layers then holds 1..num_layers
    vec = is_array(context_tokens, spec.num_layers, gpu_layers)
    n_layers = maximum(spec.num_layers, 1)
    if not vec and gpu_layers is not None and gpu_layers > n_layers:
        gpu_layers = None
    if gpu_layers is not None:
        if not r.spec.partial_offload or hw.backend == "metal":
            raise ValueError("partial offload (gpu_layers) is modelled for llama.cpp on a discrete GPU only")
        if not vec and gpu_layers < 0:
            raise ValueError(f"gpu_layers must be >= 0, not {gpu_layers}")
    if prompt_tokens is None:
        prompt_tokens = maximum(context_tokens - output_tokens, 1)
    if variant is not None:
        wbytes, embd_b, expert_b = variant.weights_bytes, variant.embedding_bytes, variant.expert_bytes
        weights_provenance = variant.weights_bytes_provenance
    else:
        (wbytes, embd_b, expert_b), weights_provenance = per_model(variant_bytes, spec, quant), "estimated"
    host = 0
    if r.host_embeddings(hw):
        # llama.cpp keeps the input embedding table in host memory (its input layer is assigned to the CPU);
        # a tied output projection is loaded on the GPU as well.
        host = embd_b
    resident = wbytes
    if r.skips_mtp_blocks() and any_true(spec.nextn_layers):
        mtp_total, mtp_experts = per_model(mtp_bytes, spec, quant)  # MTP blocks: in the file, not loaded
        resident, expert_b = wbytes - mtp_total, maximum(expert_b - mtp_experts, 0)
    tied = where(spec.tie_word_embeddings, tied_output_bytes(spec, quant, embd_b), 0)
    gpu_weights = resident - host + (tied if any_true(host) else 0)
    kv_pt = kv_bytes_per_token(spec, engine, kv_dtype)
    kv_total = kv_cache_bytes(spec, context_tokens, batch, engine, kv_dtype)
    gpu_frac = 1.0  # share of the repeating layers (and of their KV cache) on the GPU
    host_layer_bytes = 0  # weights of the layers left on the host (output layer included)
    if gpu_layers is not None:
        # llama.cpp n_gpu_layers = g (llama-model.cpp: i_gpu_start = n_layer + 1 - g): blocks i_gpu_start..n_layer-1
        # and the output layer (index n_layer) on the GPU, i.e. g - 1 blocks plus the output layer for 1 <= g <=
        # n_layer; measured on the H200 with llama-cpp-python 0.3.36 (CUDA0 KV buffer 13/28 of the cache at g = 14).
        # Each block's KV cache lives with its block (offload_kqv). Blocks are taken as equal in size.
        out_b = per_model(output_bytes, spec, quant)
        # a tied output projection is loaded where the output layer is (see `host` above)
        out_b = out_b + tied
        blocks = maximum(resident - embd_b - per_model(output_bytes, spec, quant), 0)
        gpu_blocks = maximum(gpu_layers - 1, 0)
        gpu_frac = gpu_blocks / n_layers
        out_gpu = where(gpu_layers >= 1, out_b, 0)
        gpu_weights = to_int(blocks * gpu_frac) + out_gpu
        host_layer_bytes = blocks - to_int(blocks * gpu_frac) + (out_b - out_gpu)
        host = embd_b + host_layer_bytes - where(out_gpu, 0, tied)
    kv_gpu = round_int(kv_total * gpu_frac)
    compute, compute_basis = r.compute_buffer(spec, quant, hw, context_tokens, prompt_tokens, batch)
    runtime, runtime_basis = _runtime_overhead(engine, hw)
    total = gpu_weights + kv_gpu + compute + runtime
    return Memory(kv_dtype, gpu_layers, prompt_tokens, n_layers, wbytes, embd_b, expert_b, weights_provenance, host,
                  gpu_weights, kv_pt, kv_total, gpu_frac, host_layer_bytes, kv_gpu, compute, compute_basis, runtime,
                  runtime_basis, total)


def check_load_mode(mode: str, name: str = "llama.cpp load mode") -> str:
    """``mode`` when it is one of llama.cpp's load modes (constants.LLAMA_CPP_LOAD_MODES), else a UserError naming
    ``name`` (the option the user typed, for the CLI)."""
    if mode not in C.LLAMA_CPP_LOAD_MODES:
        raise UserError(f"unknown {name} {mode!r}", hint=f"one of {', '.join(C.LLAMA_CPP_LOAD_MODES)}")
    return mode


def routed_copy_fraction(spec: ModelSpec, moe, ub_tokens, gpu_layers: Optional[int],
                         routed_experts_used: Optional[tuple[float, ...]] = None, vec: bool = False):
    """Share of a host-resident routed-expert tensor one prompt micro-batch of ``ub_tokens`` copies to the GPU, and
    why: ggml's scheduler copies only the experts the micro-batch routes to (ggml-backend.cpp
    ggml_backend_sched_compute_splits). Independent routing, E(1-(1-k/E)^T) of E, unless ``routed_experts_used``
    gives the measured count per layer (the host holds layers 0 .. n_host-1: llama.cpp offloads the last blocks)."""
    if not any_true(moe):
        return 0.0, ""
    if routed_experts_used is not None and not vec:
        n_host = spec.num_layers - max((gpu_layers or 1) - 1, 0) if gpu_layers is not None else spec.num_layers
        used = routed_experts_used[:max(n_host, 1)]
        mean = sum(used) / len(used)
        return mean / spec.num_experts, f"measured {mean:.1f} of {spec.num_experts} experts per host layer"
    e, k = where(moe, spec.num_experts, 1), spec.num_experts_per_tok
    return 1 - (1 - k / e) ** ub_tokens, "E(1-(1-k/E)^T) per micro-batch of T tokens"


def estimate(spec: ModelSpec, quant: str, engine: str, hw: HardwareProfile, *, context_tokens: int,
             batch: int = 1, prompt_tokens: Optional[int] = None, output_tokens: int = 256,
             kv_dtype: Optional[str] = None, variant: Optional[Variant] = None,
             gpu_layers: Optional[int] = None, mem: Optional[Memory] = None,
             kernel_factors: bool = True, load_mode: str = C.LLAMA_CPP_DEFAULT_LOAD_MODE,
             routed_experts_used: Optional[tuple[float, ...]] = None) -> Estimate:
    """Estimate memory and latency of one candidate configuration on one GPU.

    ``variant`` (a catalog row) supplies the weight bytes, measured or estimated; without it they are computed
    tensor by tensor. ``gpu_layers`` (llama.cpp only) is llama.cpp's n_gpu_layers: the output layer counts as one
    layer and is offloaded first, then the last gpu_layers - 1 repeating blocks (docs/estimates.md §6.7). None, or
    num_layers + 1 or more, means every block and the output layer on the GPU. ``mem``: ``memory()`` of these same
    arguments, when the caller has it already (recommend's memory-first pre-pass). ``kernel_factors=False``: without
    llama.cpp's per-type kernel speeds (constants.QUANT_KERNEL_SPEEDS; bench/quant_kernels.py derives them).
    ``load_mode`` (llama.cpp partial offload): "mmap" (llama.cpp's default: host layers' weights stay in the mapped,
    pageable file pages) or "none" (--no-mmap / -lm none: read into the GPU backend's pinned host buffer); the prompt's
    host-to-GPU weight copies run at HOST_TO_GPU_COPY_BYTES_PER_S or HOST_TO_GPU_PINNED_COPY_BYTES_PER_S.
    ``routed_experts_used``: measured distinct routed experts per layer (layer 0 first) in one prompt micro-batch, for
    a file whose router is known not to spread tokens as a trained one does (the random-weight benchmark files); by
    default a micro-batch's T tokens use E(1-(1-k/E)^T) of E experts per layer."""
    check_load_mode(load_mode)
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
    # arrays (recommender.predict.vector): one element per configuration, the same formulas; the bases (text) are
    # written for a single configuration only
    vec = is_array(context_tokens, prompt_tokens, spec.num_layers, gpu_weights)

    # --- memory -----------------------------------------------------------------------------------------
    if not vec:
        basis["memory"] = (f"weights on GPU + KV ({kv_dtype}) + compute buffer [{compute_basis}] + runtime "
                           f"[{runtime_basis}]")
    if gpu_layers is not None and not vec:
        basis["offload"] = (f"llama.cpp n_gpu_layers={gpu_layers}: the output layer and {max(gpu_layers - 1, 0)} of "
                            f"{n_layers} blocks (with their share of the KV cache) on the GPU, the rest in host RAM")
    elif any_true(host) and not vec:
        basis["host_weights_bytes"] = "llama.cpp token embeddings stay in host RAM"
    r = rules_for(engine)
    notes += r.memory_notes(hw)

    # --- latency ----------------------------------------------------------------------------------------
    bw = hw.memory_bandwidth_bytes_per_s
    peak, peak_name, mfu_key = r.prefill_peak_of(hw, family)  # llama.cpp: INT8 for its GGUF prompt kernels (MMQ)
    eff_c = r.decode_efficiency(family)
    mfu_c = r.prefill_mfu(mfu_key)
    ovh_dec, ovh_pre, fixed_why = r.fixed_step_ms(spec, family)
    if fixed_why:
        basis["fixed_step"] = fixed_why
    fam = r.latency_terms(hw, family)  # per-GPU-family fits (llama.cpp), else None
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
            mfu_c = r.prefill_mfu("gguf")
    if hw.backend == "cpu":
        cpu = r.cpu_terms(hw)  # llama.cpp: a CPU's measured (or stated) bandwidth and matmul rate, not a GPU's peaks
        if cpu is not None:
            eff_c, peak, peak_name, mfu_c = cpu
        else:  # the GPU-fitted efficiencies of these engines do not hold on a CPU: calibrated or unknown
            bw = 0.0
    if not vec:
        basis["decode"] = (f"bytes/({hw.name} bandwidth x {eff_c.value}) + {ovh_dec:.3f} ms "
                           f"[efficiency: {eff_c.source}]")

    # bytes read per decode step: every GPU-resident weight once (routed experts: only those the batch
    # touches), plus the KV cache of every sequence at its mean length during generation.
    host_weights_read = host_layer_bytes
    host_expert = 0.0  # routed-expert bytes in host RAM (partial offload of an MoE)
    moe = spec.is_moe & (expert_b > 0) if vec else spec.is_moe and expert_b
    if any_true(moe):
        e, k = where(moe, spec.num_experts, 1), spec.num_experts_per_tok
        touched = e * (1 - power(1 - k / e, batch))  # expected distinct experts per layer for `batch` tokens
        # the experts live with their blocks: gpu_frac of them on the GPU, the rest (partial offload) in host RAM;
        # on either side a step reads only the experts its tokens touch
        gpu_expert = expert_b * gpu_frac
        step_weights = where(moe, gpu_weights - gpu_expert + gpu_expert * touched / e, gpu_weights)
        host_expert = where(moe, expert_b - gpu_expert, 0.0)
        host_weights_read = where(moe, host_layer_bytes - host_expert + host_expert * touched / e, host_layer_bytes)
        if not vec:
            basis["moe"] = f"expected distinct experts per step = E(1-(1-k/E)^batch) = {touched:.2f} of {e}"
    else:
        step_weights = gpu_weights
    mean_ctx = minimum(prompt_tokens + output_tokens / 2, context_tokens)
    kv_read = where(mean_ctx >= 1, kv_cache_bytes(spec, to_int(mean_ctx), batch, engine, kv_dtype), 0) if vec else (
        kv_cache_bytes(spec, int(mean_ctx), batch, engine, kv_dtype) if mean_ctx >= 1 else 0)
    step_bytes = to_int(step_weights + kv_read * gpu_frac)
    host_step = to_int(host_weights_read + kv_read * (1 - gpu_frac))
    pre_mm, pre_attn = prefill_flops_parts(spec, prompt_tokens, batch)
    pre_flops = pre_mm + pre_attn
    host_dec_ms = host_pre_ms = 0.0
    if any_true(host_step):
        # decode: the host layers are read from host RAM, one step after the GPU's (sequential layers)
        host_dec_ms = host_step / (C.HOST_MEMORY_BANDWIDTH.value * C.HOST_DECODE_BW_EFFICIENCY.value) * 1e3
        # prefill: every micro-batch of >= GGML_CUDA_OFFLOAD_MIN_BATCH tokens copies the host layers' weights to the
        # GPU over PCIe and multiplies there; smaller micro-batches run on the CPU (not modelled: prompts are longer).
        # Of a host-resident expert tensor only the experts the micro-batch routes to are copied (ggml-backend.cpp
        # ggml_backend_sched_compute_splits, MUL_MAT_ID inputs). The copy rate is the load mode's: mmap'd pages are
        # pageable (staged by the driver), -lm none puts them in cudaMallocHost memory (llama-model.cpp
        # make_cpu_buft_list; llama-model-loader.cpp "avoid using a host buffer when using mmap").
        ubatches = r.offload_copies(prompt_tokens * batch)
        host_dense = maximum(host_layer_bytes - host_expert, 0.0)
        ub_tokens = minimum(prompt_tokens * batch, r.offload_ubatch_tokens())
        used_frac, used_why = routed_copy_fraction(spec, moe, ub_tokens, gpu_layers, routed_experts_used, vec)
        pinned = load_mode == "none"
        rate = C.HOST_TO_GPU_PINNED_COPY_BYTES_PER_S if pinned else C.HOST_TO_GPU_COPY_BYTES_PER_S
        host_copy = host_dense + host_expert * used_frac
        host_pre_ms = host_copy / rate.value * ubatches * 1e3
        if not vec:
            experts = (f" (routed experts {host_expert / 1e9:.2f} GB x {used_frac:.2f} used: {used_why})"
                       if host_expert else "")
            rate_name = "HOST_TO_GPU_PINNED_COPY_BYTES_PER_S" if pinned else "HOST_TO_GPU_COPY_BYTES_PER_S"
            basis["offload_latency"] = (f"decode + host bytes/(HOST_MEMORY_BANDWIDTH x HOST_DECODE_BW_EFFICIENCY) = "
                                        f"{host_dec_ms:.2f} ms; prefill + {host_copy / 1e9:.2f} GB of host weights"
                                        f"{experts} x {ubatches} micro-batches at {rate_name} "
                                        f"{rate.value / 1e9:.1f} GB/s (load mode {load_mode}) = {host_pre_ms:.1f} ms "
                                        f"[{C.HOST_MEMORY_BANDWIDTH.source}; {rate.source}]")

    ttft = tpot = None
    kvq_gpu_ms = cols_gpu_ms = 0.0
    intervals: dict[str, tuple[float, float]] = {}
    kernel = r.kernel_factors(quant, family, hw) if kernel_factors else None
    pre_mfu_c = mfu_c  # the prompt kernels' MFU (a GGUF type's own on the GPU its kernels were measured on)
    if kernel is not None:
        pre_mfu_c = C.Const(mfu_c.value * kernel["prefill_factor"], mfu_c.unit, mfu_c.source)
        basis["kernel"] = (f"{quant} kernels: weights read time x {kernel['decode_factor']} (one sequence), prompt "
                           f"MFU x {kernel['prefill_factor']} [{C.QUANT_KERNEL_SOURCE}]")
    if bw:
        one = batch == 1  # an array of batches (recommender.predict.vector): each row its own
        mem_ms = step_bytes / (bw * eff_c.value) * 1e3
        if kernel is not None and any_true(one):  # the weights' read time at this type's (single-sequence, tg128)
            # kernel speed, the KV cache's as before; batched decode runs other kernels (MMQ), not measured per type
            kv_part = to_int(kv_read * gpu_frac)
            typed_ms = ((step_bytes - kv_part) * kernel["decode_factor"] + kv_part) / (bw * eff_c.value) * 1e3
            mem_ms = where(one, typed_ms, mem_ms) if is_array(one) and not one.all() else typed_ms
        kvq_ms, why = r.quantized_kv_decode_ms(spec, kv_dtype, hw, to_int(mean_ctx), batch)
        if why:
            mem_ms += kvq_ms * gpu_frac - kv_read * gpu_frac / (bw * eff_c.value) * 1e3
            kvq_gpu_ms = kvq_ms * gpu_frac
            basis["kv_decode"] = why
        comp_ms = decode_flops(spec, to_int(mean_ctx), batch) / (peak * mfu_c.value) * 1e3 if peak else 0.0
        moe_dec_ms, moe_pre_f, moe_why = r.moe_terms(spec)
        if moe_why:
            basis["moe_latency"] = moe_why
        cols_ms, cols_why = r.batch_columns_ms(spec, family, hw, batch, peak * mfu_c.value
                                                       if peak else None)
        if cols_why:  # llama.cpp batched decode on CUDA: weights once + every sequence's KV + its columns
            basis["batch_decode"] = cols_why
            cols_gpu_ms = cols_ms * gpu_frac
            tpot = mem_ms + cols_ms * gpu_frac + ovh_dec + host_dec_ms + moe_dec_ms
            if is_array(batch):  # an array of batches: NaN columns where the step is a roofline (batch 1)
                roof = cols_ms != cols_ms
                if roof.any():
                    cols_gpu_ms = where(roof, 0.0, cols_gpu_ms)
                    tpot = where(roof, maximum(mem_ms, comp_ms) + ovh_dec + host_dec_ms + moe_dec_ms, tpot)
        else:
            tpot = maximum(mem_ms, comp_ms) + ovh_dec + host_dec_ms + moe_dec_ms
        if dec_interval and vec:  # rows with host layers have none (their spread is not the family's)
            intervals["tpot_ms"] = (where(host_dec_ms, float("nan"), tpot * dec_interval[0]),
                                    where(host_dec_ms, float("nan"), tpot * dec_interval[1]))
        elif dec_interval and not host_dec_ms:
            intervals["tpot_ms"] = (tpot * dec_interval[0], tpot * dec_interval[1])
        if peak:
            pre_ms = (pre_mm * moe_pre_f + pre_attn) / (peak * pre_mfu_c.value) * 1e3
            ttft = maximum(pre_ms, gpu_weights / (bw * eff_c.value) * 1e3) + ovh_pre + host_pre_ms
            if pre_interval and vec:
                intervals["ttft_ms"] = (where(host_pre_ms, float("nan"), ttft * pre_interval[0]),
                                        where(host_pre_ms, float("nan"), ttft * pre_interval[1]))
            elif pre_interval and not host_pre_ms:
                intervals["ttft_ms"] = (ttft * pre_interval[0], ttft * pre_interval[1])
            if not vec:
                basis["prefill"] = (f"max(FLOPs/({hw.name} {peak_name} x MFU {pre_mfu_c.value}), weights/(bandwidth x "
                                    f"{eff_c.value})) + {ovh_pre:g} ms "
                                    f"[MFU: {pre_mfu_c.source}]")
        else:
            notes.append(f"TTFT unknown: the {hw.name} profile has no sourced FP16 (or INT8) peak figure")
    else:
        notes.append(f"latency unknown: the {hw.name} profile has no sourced memory bandwidth")

    if vec:  # arrays: the terms by Estimate's field names, no record (recommender.predict.vector builds them)
        return EstimateArrays(
            model=spec.id, quant=quant, engine=engine, hardware=hw.name, context_tokens=context_tokens, batch=batch,
            prompt_tokens=prompt_tokens, output_tokens=output_tokens, kv_dtype=kv_dtype, gpu_layers=gpu_layers,
            weights_bytes=wbytes, weights_gpu_bytes=gpu_weights, host_weights_bytes=host, kv_bytes_per_token=kv_pt,
            kv_cache_bytes=kv_total, compute_buffer_bytes=compute, runtime_overhead_bytes=runtime,
            overhead_bytes=compute + runtime, total_vram_bytes=total, ttft_ms=ttft, tpot_ms=tpot,
            decode_bytes_per_step=step_bytes, decode_kv_bytes_per_step=to_int(kv_read * gpu_frac),
            host_bytes_per_step=host_step, prefill_flops=pre_flops, prefill_attention_flops=pre_attn,
            decode_kv_quant_ms=kvq_gpu_ms, decode_columns_ms=cols_gpu_ms, hardware_bandwidth_bytes_per_s=bw or 0.0,
            notes=notes, intervals=intervals)
    # trusted (model_construct without its per-field overhead): every field is computed above from validated records
    return Estimate.trusted(
        model=spec.id, quant=quant, engine=engine, hardware=hw.name, context_tokens=context_tokens, batch=batch,
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, kv_dtype=kv_dtype, gpu_layers=gpu_layers,
        weights_bytes=wbytes,
        weights_gpu_bytes=gpu_weights, host_weights_bytes=host, kv_bytes_per_token=kv_pt, kv_cache_bytes=kv_total,
        compute_buffer_bytes=compute, runtime_overhead_bytes=runtime, overhead_bytes=compute + runtime,
        total_vram_bytes=total, ttft_ms=ttft, tpot_ms=tpot, decode_bytes_per_step=step_bytes,
        decode_kv_bytes_per_step=to_int(kv_read * gpu_frac), host_bytes_per_step=host_step, prefill_flops=pre_flops,
        prefill_attention_flops=pre_attn, decode_kv_quant_ms=kvq_gpu_ms, decode_columns_ms=cols_gpu_ms,
        weights_bytes_provenance=weights_provenance,
        hardware_bandwidth_bytes_per_s=bw or 0.0, basis=basis, notes=notes, intervals=intervals)
