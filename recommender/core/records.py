"""Pydantic records that cross a boundary (catalog <-> core <-> CLI <-> JSON).

Field names carry their units (``*_bytes``, ``*_ms``, ``*_per_s``); values are stored in base units
(bytes, milliseconds, bytes per second, FLOP/s).
"""

from __future__ import annotations

from dataclasses import dataclass
import copy
import math
import re
from typing import Any, Literal, Optional, Protocol, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from recommender.core.limits import (check_spec, MAX_CONTEXT, MAX_LAYERS, MAX_ROW_BATCH, MAX_ROW_BYTES, MAX_ROW_MS,
                                      MAX_ROW_TOKENS_PER_S, MIN_ROW_TPOT_MS)

from recommender.core.errors import UserError

# Version of the `--json` layout (docs/json.md): every JSON answer carries it as "schema_version". Bumped when a field
# changes meaning, moves or goes; adding a field does not bump it. v2: recommend's counts.feasible / excluded count the
# predicted configurations (counts.predicted; the best-first search of recommender.rank.recommend)
JSON_SCHEMA_VERSION = 2

Provenance = Literal["measured", "calibrated", "published", "estimated", "unknown"]
# base: a pretrained checkpoint (no chat tuning); instruct: chat/instruction tuned; hybrid: instruct with an optional
# thinking mode (Qwen3); reasoning: always thinks before answering (R1 distills, QwQ); classifier: tuned to label
# content, not to converse (Llama-Guard's safe / unsafe verdicts). instruct, hybrid and reasoning can chat.
Checkpoint = Literal["base", "instruct", "hybrid", "reasoning", "classifier"]
CHAT_CHECKPOINTS = ("instruct", "hybrid", "reasoning")
_INSTRUCT_TOKENS = ("instruct", "chat", "it", "sft", "dpo", "rlhf")
_REASONING_TOKENS = ("r1", "qwq", "thinking", "reasoning")


def checkpoint_from_name(model_id: str) -> Checkpoint:
    """The checkpoint kind a Hugging Face name states: '-Instruct', '-chat', '-it', '-sft' ... -> instruct; 'R1' /
    'QwQ' / 'Thinking' -> reasoning; otherwise base (the Hub convention: an unsuffixed repo holds the pretrained
    weights, e.g. Qwen/Qwen2.5-7B, meta-llama/Llama-3.1-8B). Qwen3 repos are the exception (hybrid, one repo for both),
    which the catalog states in sources/quality/models.csv; this rule is the fallback for a model it does not list."""
    tokens = [t for t in re.split(r"[-_./]", model_id.lower().rpartition("/")[2]) if t]
    if any(t in _REASONING_TOKENS for t in tokens):
        return "reasoning"
    if any(t in _INSTRUCT_TOKENS for t in tokens):
        return "instruct"
    return "base"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # schemas built on first use: cold start

    @classmethod
    def trusted(cls, **values: Any):
        """A record from values that are already checked (computed from validated records), as pydantic's
        ``model_construct`` makes it - the same ``__dict__`` (fields in declaration order, defaults filled in and
        mutable ones copied, factories called) and fields-set - without its per-field alias and default resolution,
        which was most of the time of the ~10,000 candidates a recommend builds. Only for models without aliases,
        post-init or private attributes (checked once per class)."""
        template, fresh, required = _TRUSTED_PLANS.get(cls) or _trusted_plan(cls)
        d = template.copy()  # every field in declaration order, immutable defaults filled in
        d.update(values)  # values overwrite in place: the order stays the declaration's
        if len(d) != len(template):  # names that are no field: left out, as model_construct does
            for name in values.keys() - template.keys():
                del d[name]
            fields_set = values.keys() & d.keys()
        else:
            fields_set = set(values)
        for name, factory, default in fresh:  # mutable defaults: a fresh copy, factories called
            if name not in values:
                d[name] = factory() if factory is not None else copy.deepcopy(default)
        if not values.keys() >= required:  # a required field not given stays absent
            for name in required - values.keys():
                del d[name]
        m = cls.__new__(cls)
        object.__setattr__(m, "__dict__", d)
        object.__setattr__(m, "__pydantic_fields_set__", fields_set)
        object.__setattr__(m, "__pydantic_extra__", None)
        object.__setattr__(m, "__pydantic_private__", None)
        return m


_TRUSTED_PLANS: dict[type, tuple] = {}
_IMMUTABLE = (type(None), bool, int, float, str, bytes, tuple, frozenset)


def _trusted_plan(cls) -> tuple:
    """(template, fresh, required) of ``cls`` for Strict.trusted: a dict of every field in declaration order holding
    its default where that is immutable; (name, default factory, default) of the fields whose default must be made
    anew for each record; the set of the required fields' names."""
    if cls.__pydantic_post_init__ or cls.__private_attributes__:
        raise TypeError(f"{cls.__name__} has a post-init or private attributes: use model_construct")
    template, fresh, required = {}, [], []
    for name, f in cls.model_fields.items():
        if f.alias is not None or f.validation_alias is not None or f.default_factory_takes_validated_data:
            raise TypeError(f"{cls.__name__}.{name} has an alias or a data-taking factory: use model_construct")
        template[name] = None
        if f.is_required():
            required.append(name)
        elif f.default_factory is not None or not isinstance(f.default, _IMMUTABLE):
            fresh.append((name, f.default_factory, f.default))
        else:
            template[name] = f.default
    _TRUSTED_PLANS[cls] = plan = (template, tuple(fresh), frozenset(required))
    return plan


class ModelSpec(Strict):
    """Architecture of one model, read from its config.json or GGUF header."""

    id: str  # HF id, e.g. "Qwen/Qwen2.5-7B"
    architecture: str  # e.g. "Qwen2ForCausalLM" (config "architectures"[0]) or GGUF general.architecture
    model_type: str  # config "model_type" (text model's, for multimodal wrappers)
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int  # per attention head (config head_dim, else hidden_size // num_attention_heads)
    intermediate_size: int  # dense MLP width (0 when every layer is MoE)
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    torch_dtype: Optional[str] = None
    attention_bias: bool = False  # q/k/v projections carry a bias (Qwen2)
    qk_norm: bool = False  # per-head q/k RMSNorm (Qwen3, Gemma-3)
    extra_norms_per_layer: int = 0  # norms beyond the usual two per layer (Gemma-2/3 post-norms: 2)
    # Sliding-window attention: how many of num_layers use a window, and its size in tokens.
    sliding_window: Optional[int] = None
    num_swa_layers: int = 0
    # Mixture of experts
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    first_k_dense_layers: int = 0  # DeepSeek "first_k_dense_replace": leading layers with a dense MLP
    # Multi-head latent attention (DeepSeek-V2/V3)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Layers with an MoE block: layer i (i >= first_k_dense_layers) is MoE when (i + 1) % moe_layer_step == 0
    # (Llama-4 interleave_moe_layer_step, ERNIE-4.5 moe_layer_interval); other layers use the dense MLP.
    moe_layer_step: int = 1
    # Hybrid linear attention (Qwen3-Next Gated DeltaNet): layer i is full attention when
    # (i + 1) % full_attention_interval == 0, every other layer is a linear-attention layer holding a fixed recurrent
    # state (conv + delta-rule state) instead of a growing KV cache. 0 = no linear layers.
    full_attention_interval: int = 0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    nextn_layers: int = 0  # multi-token-prediction blocks the GGUF converter appends after the trunk (weights only)
    # Mamba-2 hybrids (Nemotron-H / Nemotron-3): one character per trunk layer, the config's hybrid_override_pattern:
    # M = a Mamba-2 mixer (a fixed SSM + conv state; its sizes in the linear_* fields: linear_num_key_heads = n_groups,
    # linear_key_head_dim = ssm_state_size, linear_num_value_heads = mamba_num_heads, linear_value_head_dim =
    # mamba_head_dim, linear_conv_kernel = conv_kernel), * = attention (the only layers with a KV cache), - = a dense
    # MLP, E = an MoE block. LFM2 uses C = a gated short-convolution layer (a conv state of (linear_conv_kernel - 1) x
    # hidden_size) and * = attention, each with its MLP. None: every layer is attention + MLP (or the
    # full_attention_interval hybrid above).
    layer_pattern: Optional[str] = None
    moe_latent_size: int = 0  # Nemotron-3-Super latent MoE: the routed experts work in a moe_latent_size-wide space
    # Gemma-4 (llama.cpp src/models/gemma4.cpp, conversion/gemma.py Gemma4Model): one letter per layer, S = sliding
    # window, F = full attention (config layer_types); the full layers' own head size and KV-head count (0 = head_dim /
    # num_kv_heads); the last kv_shared_layers layers reuse an earlier layer's KV (no K/V weights, no cache of their
    # own: llama.cpp n_layer_kv_from_start); attention_k_eq_v: the full layers have no V projection (V = K); the
    # per-layer-embedding width (hidden_size_per_layer_input: a {width x layers, vocab} table read as a gather);
    # double_wide_mlp: the KV-shared layers' MLP is 2 x intermediate_size wide.
    attn_layer_types: Optional[str] = None
    full_head_dim: int = 0
    full_num_kv_heads: int = 0
    kv_shared_layers: int = 0
    attention_k_eq_v: bool = False
    per_layer_input_size: int = 0
    double_wide_mlp: bool = False
    # DeepSeek-V4 (llama.cpp src/models/deepseek4.cpp, conversion/deepseek.py DeepseekV4Model): one letter per layer
    # from the config's compress_ratios -- W = sliding window only (ratio 0), C = the window plus a 4x compressed KV
    # and its lightning-indexer keys (CSA, ratio 4), H = the window plus a 128x compressed KV (HCA, ratio 128); the
    # grouped low-rank output projection (o_groups, o_lora_rank), the hyper-connection count (hc_mult: the residual
    # stream is hc_mult x hidden_size wide), the indexer's heads and key size, and the leading hash-routed MoE layers
    # (a token-id -> expert-id table in place of the router bias).
    compress_pattern: Optional[str] = None
    o_groups: int = 0
    o_lora_rank: int = 0
    hyper_connections: int = 0
    indexer_heads: int = 0
    indexer_head_dim: int = 0
    indexer_top_k: int = 0  # compressed keys each query attends on a CSA layer (config index_topk)
    hash_layers: int = 0
    # DeepSeek sparse attention (DeepSeek-V3.2 deepseek32, GLM-5 glm-dsa: llama.cpp src/models/deepseek32.cpp,
    # glm-dsa.cpp; conversion/deepseek.py DeepseekV32Model, conversion/glm.py GlmMoeDsaModel): MLA plus a lightning
    # indexer (indexer_heads x indexer_head_dim queries, one indexer_head_dim key per token, index_topk keys kept).
    # One letter per trunk layer: F = the layer has its own indexer (its tensors and a key cache of indexer_head_dim
    # per token, llama_kv_cache_dsa's kv_lid), S = a "shared" layer reusing the previous full layer's top-k (GLM-5.2
    # indexer_types; no indexer tensors, no key cache). None: no DSA indexer.
    indexer_pattern: Optional[str] = None
    # Step-3.5 / 3.7 (llama.cpp src/models/step35.cpp): attn_layer_types holds one letter per layer, MTP blocks
    # included (S = sliding window, F = full attention); the sliding layers' query heads (config
    # attention_other_setting.num_attention_heads; 0 = num_attention_heads); a head-wise attention gate
    # (self_attn.g_proj: one sigmoid gate per query head, attn_gate {n_embd, n_head})
    swa_num_attention_heads: int = 0
    head_wise_gate: bool = False
    # Catalog facts from sources/configs/sources.csv (None for user-added models that do not state them); the
    # checkpoint kind is the field `checkpoint` below
    modality: Optional[str] = None  # text, vision, audio ... (only the text model is sized)
    release_date: Optional[str] = None
    structure: Optional[str] = None  # dense / MoE / MLA / sliding-window summary
    # Derived from the fields above (recommender.model.arch); not published numbers.
    params_total: int = 0
    params_active: int = 0
    # Where it came from
    source: str = ""  # file path / URL / repo@commit:path
    source_kind: str = ""
    license: Optional[str] = None
    notes: Optional[str] = None
    # What the weights were trained for (sources/configs/sources.csv `checkpoint`, else sources/quality/models.csv
    # `kind`, else the name: recommender.core.records.checkpoint_from_name); None for a spec read before it existed.
    checkpoint: Optional[Checkpoint] = None

    @model_validator(mode="after")
    def _possible(self) -> "ModelSpec":
        """Counts within bounds and an architecture that can exist (recommender/core/limits.py)."""
        return check_spec(self)

    @property
    def name(self) -> str:
        return self.id.split("/", 1)[-1]

    @property
    def checkpoint_kind(self) -> Checkpoint:
        return self.checkpoint or checkpoint_from_name(self.id)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_linear_attn_layers(self) -> int:
        """Trunk layers without a KV cache (linear attention); 0 for a plain transformer."""
        if self.layer_pattern:
            return self.layer_pattern.count("M") + self.layer_pattern.count("C")
        k = self.full_attention_interval
        return self.num_layers - self.num_layers // k if k else 0

    @property
    def num_indexer_layers(self) -> int:
        """Trunk layers with their own DSA lightning indexer (and its key cache); 0 without one."""
        return self.indexer_pattern.count("F") if self.indexer_pattern else 0

    @property
    def num_attention_layers(self) -> int:
        """Trunk layers with a KV cache: all of them, less the linear-attention / Mamba layers of a hybrid (and, in a
        Nemotron-H pattern, the MLP-only and MoE-only layers)."""
        if self.layer_pattern:
            return self.layer_pattern.count("*")
        return self.num_layers - self.num_linear_attn_layers - self.kv_shared_layers


class TensorInfo(Strict):
    """One weight tensor as llama.cpp names it (GGUF naming), shape as (ne0 = input dim, ne1 = rows, ...)."""

    name: str
    shape: tuple[int, ...]
    layer: Optional[int] = None
    expert_count: int = 1  # >1 for stacked MoE expert tensors (shape includes it)

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class QuantSpec(Strict):
    name: str  # "Q4_K_M", "F16", "AWQ-4bit", ...
    family: Literal["float", "gguf", "awq", "gptq", "fp8", "int8", "bnb"]
    engines: list[str]
    nominal_bits: float
    description: str = ""
    kernel_class: str  # formats whose kernels read weights alike share one (recommender.predict.calibrated)
    quality_family: str  # the family label of its row in sources/quality/quant_quality.csv
    ggml_type: Optional[str] = None  # GGUF: the ftype's default tensor type (llama_ftype_get_default_type)
    gguf_file_type: Optional[str] = None  # GGUF: gguf-py's LlamaFileType name (general.file_type)


class Variant(Strict):
    model_id: str
    quant: str
    weights_bytes: int
    embedding_bytes: int = 0  # token-embedding table (llama.cpp keeps it in host RAM)
    expert_bytes: int = 0  # routed-expert tensors of a MoE model (only the touched ones are read per token)
    # by the per-tensor rules, stored at `catalog build` (None: a row written before migration 4, computed when asked)
    output_bytes: Optional[int] = None  # output.weight + output_norm.weight (llama.cpp's output layer)
    ple_bytes: Optional[int] = None  # Gemma-4's per-layer-embedding table, part of embedding_bytes
    mtp_bytes: Optional[int] = None  # multi-token-prediction blocks in the file, not loaded by default
    mtp_expert_bytes: Optional[int] = None  # their routed-expert tensors
    weights_bytes_provenance: Provenance = "estimated"
    basis: str = ""  # formula version / per-tensor rule / file measured
    bits_per_weight: float = 0.0


@dataclass(frozen=True, slots=True)
class Figure:
    """A number a user sees, with its unit and where it came from: measured (a probe row), calibrated (a fitted term,
    with the 10-90 % interval of its held-out errors), published (a source), estimated (a formula, named in basis)
    or unknown (value None). A frozen dataclass (pydantic records hold and serialize it as any field): a recommend
    run makes some 17,000 of them, where a pydantic model's construction costs ten times as much."""

    value: Optional[Union[int, float]]  # bytes are whole numbers
    unit: str  # bytes | ms | tokens/s | fraction | ratio | %
    provenance: Provenance
    basis: str = ""  # formula version + constants, measurement id, or source URL
    interval: Optional[tuple[float, float]] = None  # [low, high] in the figure's unit (calibrated figures; estimated
    # llama.cpp TTFT/TPOT: the GPU family's leave-one-GPU-out spread)


class HardwareProfile(Strict):
    """A GPU (or other accelerator) a user can plan for. Every figure has a source."""

    name: str
    vendor: str
    aliases: list[str] = Field(default_factory=list)
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    fp16_flops_per_s: Optional[float] = None  # dense tensor-core FP16 (no sparsity)
    int8_ops_per_s: Optional[float] = None
    fp32_flops_per_s: Optional[float] = None  # FP32 vector (shaders x 2 x boost clock)
    compute_capability: Optional[str] = None
    backend: Literal["cuda", "rocm", "metal", "vulkan", "sycl", "cpu"] = "cuda"  # the llama.cpp backend it runs
    tdp_w: Optional[float] = None
    sources: dict[str, str] = Field(default_factory=dict)  # field name -> source URL / note
    notes: Optional[str] = None
    reliability: Literal["ok", "low"] = "ok"

    def with_memory(self, memory_bytes: int) -> "HardwareProfile":
        """The same profile with the user's memory figure (--vram), recorded as the memory source."""
        if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0:
            raise UserError(f"invalid GPU memory size {memory_bytes!r}",
                            hint="give a positive size, e.g. --vram 24GiB")
        gib = 1024**3
        note = (f"memory overridden by the user ({memory_bytes / gib:.2f} GiB; profile said "
                f"{self.memory_bytes / gib:.2f} GiB)")
        data = self.model_dump()
        data["memory_bytes"] = memory_bytes
        data["sources"] = {**self.sources, "memory_bytes": f"user override (--vram {memory_bytes / gib:.2f} GiB)"}
        data["notes"] = f"{self.notes}; {note}" if self.notes else note
        return HardwareProfile.model_validate(data)

    def with_bandwidth(self, bandwidth_bytes_per_s: float, typed: str) -> "HardwareProfile":
        """The same profile with the user's memory bandwidth (--bandwidth as ``typed``), recorded as its source."""
        data = self.model_dump()
        data["memory_bandwidth_bytes_per_s"] = float(bandwidth_bytes_per_s)
        data["sources"] = {**self.sources, "memory_bandwidth_bytes_per_s": f"user override (--bandwidth {typed})"}
        note = f"memory bandwidth stated by the user ({bandwidth_bytes_per_s / 1e9:.0f} GB/s)"
        data["notes"] = f"{self.notes}; {note}" if self.notes else note
        return HardwareProfile.model_validate(data)


class Workload(Strict):
    name: str
    description: str = ""
    prompt_tokens: int
    output_tokens: int
    contexts: list[int]  # context windows (tokens) to consider
    batches: list[int] = Field(default_factory=lambda: [1])
    language: Literal["en", "zh", "mixed", "code"] = "mixed"
    source: str = ""
    # What the score's task-accuracy term averages (docs/scoring.md): en = OLL v2 average scale, zh = C-Eval %.
    accuracy_tasks: list[Literal["en", "zh"]] = Field(default_factory=lambda: ["en", "zh"])
    chat: bool = True  # rank chat-tuned checkpoints only (base ones with --include-base or when named)
    # Latency anchors of the value function (docs/scoring.md): TTFT costs nothing up to min(comfort, limit / 2) and is
    # priced up to the limit; the limit is the default when the user gives no --max-latency.
    ttft_comfort_ms: float = 1000.0
    ttft_limit_ms: float = 10000.0
    # Decode speed (tokens/s) from which a faster stream costs nothing (what users of this workload run, with its
    # source in the preset); slower streams are priced down to reading speed (docs/scoring.md). None: twice reading.
    decode_comfort_tok_s: Optional[float] = None
    # serve: rank by goodput (requests/s meeting the TTFT and TPOT SLOs) at the best batch, not by one stream's
    # latency; target_concurrency users at the SLOs is the goodput that costs nothing.
    rank_by: Literal["latency", "goodput"] = "latency"
    target_concurrency: int = 1


class Measurement(Strict):
    """One probe run (filled by the performance-probe issue; the table exists from the start)."""

    id: str
    hardware_fingerprint: str
    hardware_name: str
    engine: str
    engine_version: str
    model_id: str
    quant: str
    batch: int
    context_tokens: int
    prompt_tokens: int
    output_tokens: int
    kv_dtype: str = "f16"
    gpu_layers: Optional[int] = None
    ttft_ms: Optional[float] = None
    tpot_ms: Optional[float] = None
    itl_ms_p50: Optional[float] = None
    decode_tokens_per_s: Optional[float] = None
    prefill_tokens_per_s: Optional[float] = None
    throughput_tokens_per_s: Optional[float] = None
    peak_vram_bytes: Optional[int] = None
    peak_rss_bytes: Optional[int] = None
    raw: dict[str, Any] = Field(default_factory=dict)  # per-repeat timings etc.
    status: Literal["ok", "failed"] = "ok"
    failure_reason: Optional[str] = None
    synthetic: bool = False
    provenance: Provenance = "measured"
    measured_at: str = ""  # ISO-8601

    @property
    def problems(self) -> list[str]:
        """Why this row cannot be a measurement (empty: it can). See measurement_problems."""
        return measurement_problems(self)


def measurement_problems(m: "Measurement") -> list[str]:
    """What makes a probe row impossible, in words (empty list: none). Counts are positive and bounded
    (recommender.core.limits), times finite, positive and bounded, and an ``ok`` row carries a decode figure no
    engine could beat (TPOT >= MIN_ROW_TPOT_MS) that agrees with its decode rate. A failed row needs only sane counts.
    A stored row with problems is skipped by the predictor (Catalog.measurements) and refused by the writer."""
    out: list[str] = []

    def count(name: str, low: int, high: float) -> None:
        v = getattr(m, name)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            out.append(f"{name} {v!r} is outside {low}..{int(high):,}")

    count("batch", 1, MAX_ROW_BATCH)
    count("context_tokens", 1, MAX_CONTEXT)
    count("prompt_tokens", 0, MAX_CONTEXT)
    count("output_tokens", 0, MAX_CONTEXT)
    if m.gpu_layers is not None:
        count("gpu_layers", -1, MAX_LAYERS + 1)
    for name in ("peak_vram_bytes", "peak_rss_bytes"):
        v = getattr(m, name)
        if v is not None and not 0 <= v <= MAX_ROW_BYTES:
            out.append(f"{name} {v!r} is outside 0..{MAX_ROW_BYTES:,}")
    if m.status != "ok":
        return out
    for name, low, high in (("ttft_ms", 0.0, MAX_ROW_MS), ("tpot_ms", MIN_ROW_TPOT_MS, MAX_ROW_MS),
                            ("itl_ms_p50", 0.0, MAX_ROW_MS), ("decode_tokens_per_s", 0.0, 1000.0 / MIN_ROW_TPOT_MS),
                            ("prefill_tokens_per_s", 0.0, MAX_ROW_TOKENS_PER_S),
                            ("throughput_tokens_per_s", 0.0, MAX_ROW_TOKENS_PER_S)):
        v = getattr(m, name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not low < v <= high \
                and not (v == low and name == "tpot_ms"):
            out.append(f"{name} {v!r} is outside ({low:g}, {high:g}]")
    if m.tpot_ms is None and m.decode_tokens_per_s is None:
        out.append("an ok row without a TPOT or decode rate")
    if not out and m.tpot_ms and m.decode_tokens_per_s:
        ratio = m.decode_tokens_per_s * m.tpot_ms / 1000.0  # 1 when the decode rate is 1000 / TPOT
        if not 0.2 <= ratio <= 5.0:  # medians of two figures of the same repeats: never a factor 5 apart
            out.append(f"decode_tokens_per_s {m.decode_tokens_per_s:g} disagrees with tpot_ms {m.tpot_ms:g} "
                       f"(1000 / TPOT = {1000.0 / m.tpot_ms:g})")
    return out


def check_measurement(m: "Measurement") -> "Measurement":
    """The row, or a UserError naming what is impossible about it (what writers call before storing it)."""
    problems = measurement_problems(m)
    if problems:
        raise UserError(f"refusing to store measurement {m.id} ({m.model_id} {m.quant} on {m.hardware_name}): "
                        + "; ".join(problems),
                        hint="the probe's figures are impossible: check the engine or server it measured")
    return m


class PublishedScore(Strict):
    model: str
    benchmark: str
    shots: Optional[str] = None
    score: float
    source_url: str
    source_note: str = ""
    flags: list[str] = Field(default_factory=list)  # THIRD-PARTY, SECONDARY, INFERRED


class AccuracyRow(Strict):
    """One task of one accuracy probe run (`recommender probe accuracy`): a measured score on a fixed item file."""

    id: str
    run_id: str  # rows of one invocation share it
    model_id: str
    quant: str
    variant: str  # the model file or folder name that was scored
    engine: str
    engine_version: str
    task: str  # ceval | cmmlu | mmlu
    shots: int
    items_file: str  # e.g. ceval-val-v1-50.jsonl
    items_version: str
    items_sha256: str
    n: int
    correct: int
    accuracy: Optional[float]  # fraction 0..1
    ci_low: Optional[float]  # 95 % interval (subject-stratified Wilson), fraction
    ci_high: Optional[float]
    chance: float
    flags: list[str] = Field(default_factory=list)  # chance, broken-logprobs, position-bias
    per_subject: dict[str, Any] = Field(default_factory=dict)
    raw: dict[str, Any] = Field(default_factory=dict)  # per-item picks and log-likelihoods, settings
    hardware_fingerprint: str
    hardware_name: str
    status: str  # ok | failed
    failure_reason: Optional[str] = None
    provenance: Provenance = "measured"
    measured_at: str


class PerplexityRow(Strict):
    """Bits per byte / perplexity (and KL against a reference variant) of one model on one shipped text."""

    id: str
    run_id: str
    model_id: str
    quant: str
    variant: str
    engine: str
    engine_version: str
    text_file: str
    text_sha256: str
    language: str
    tokens: Optional[int]
    bytes: Optional[int]
    nll_nats: Optional[float]
    bits_per_byte: Optional[float]
    perplexity: Optional[float]
    window_tokens: int
    kl_reference: Optional[str] = None  # variant the KL is measured against
    kl_mean: Optional[float] = None  # nats per token, KL(reference || this)
    kl_p99: Optional[float] = None
    top1_agreement: Optional[float] = None
    raw: dict[str, Any] = Field(default_factory=dict)
    hardware_fingerprint: str
    hardware_name: str
    status: str
    failure_reason: Optional[str] = None
    provenance: Provenance = "measured"
    measured_at: str


@dataclass(frozen=True)
class ScoreRow:
    """A published score of a model (or of its base/instruct sibling: ``relation``)."""

    source_model: str
    benchmark: str
    shots: Optional[str]
    score: float
    source_url: str
    source_note: str
    flags: tuple[str, ...]
    relation: str  # 'same' | 'sibling'


class CatalogReader(Protocol):
    """What the layers that rank and predict read from a catalog (recommender.catalog.store.Catalog implements it;
    they never import the catalog package, so reading and building catalogs stays its own room)."""

    def models(self) -> dict[str, ModelSpec]: ...
    def variants(self) -> dict[tuple[str, str], Variant]: ...
    def resolve_model(self, name: str) -> ModelSpec: ...
    def all_scores(self) -> list[tuple]: ...
    def scores_for(self, model_id: str) -> list[ScoreRow]: ...
    def measured_quality(self) -> tuple[list[dict], list[dict]]: ...
    def measured_hardware(self, status: Optional[str] = "ok") -> list[str]: ...
    def model_quality(self) -> dict[tuple[str, str], dict]: ...
    def quant_quality(self) -> dict[str, dict]: ...
    def measurements(self, model_id: Optional[str] = None, hardware: Optional[str] = None,
                     status: Optional[str] = None, hardware_names: Optional[list[str]] = None) -> list[Measurement]: ...
    def meta_values(self, key: str, user_only: bool = False) -> list[str]: ...
