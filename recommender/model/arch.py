"""Model architecture: config.json / GGUF header -> ModelSpec -> the weight tensors llama.cpp would store.

Pure functions; nothing heavy is imported at module import time (``gguf`` is imported inside ``spec_from_gguf``).

Tensor names and shapes follow llama.cpp's GGUF conventions (names from ``src/llama-arch.cpp`` LLM_TENSOR_NAMES,
shapes from the per-architecture ``create_tensor`` calls in ``src/models/<arch>.cpp`` of ggml-org/llama.cpp).
Shapes are in ggml order: ``ne0`` (the input / contiguous dimension) first, then rows, then experts.

Parameter counts (``param_counts``) are the sum of the elements of those tensors, a tied embedding counted once.

Not in the inventory: the RoPE helper tables the GGUF converter adds for some rope scalings (``rope_freqs.weight``
{head_dim/2} F32 for Llama-3 "llama3" scaling, ``rope_factors_long/short.weight`` for Phi-3 "longrope"). They are
not parameters and weigh at most a few hundred bytes; ``spec_from_gguf`` skips them when counting parameters.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, Optional

from pydantic import BaseModel, ConfigDict


from recommender.core.errors import UserError
from recommender.core.gguf_header import read_header
from recommender.core.limits import check_config, guard_parse
from recommender.core.records import ModelSpec, TensorInfo

# ----------------------------------------------------------------------------------------------------------------
# config.json -> ModelSpec
# ----------------------------------------------------------------------------------------------------------------

# HF model_type -> llama.cpp GGUF architecture name (``general.architecture``), from convert_hf_to_gguf.py's
# ``@ModelBase.register`` classes (ggml-org/llama.cpp, the copy vendored in llama-cpp-python 0.3.36): Mistral and
# Mixtral are converted as "llama". Only model types whose tensors ``raw_inventory_of`` lists exactly are here;
# every other model type is refused (``UnsupportedArchitecture``) rather than sized as something it is not.
# Multimodal entries (qwen3_vl_text, qwen2_5_vl, mistral3, phi3_v, voxtral's llama text model) size the language
# model only: the vision / audio encoder is a separate mmproj file in llama.cpp and is not counted.
GGUF_ARCH = {
    "llama": "llama", "mistral": "llama", "mixtral": "llama",
    "qwen2": "qwen2", "qwen2_moe": "qwen2moe", "qwen3": "qwen3", "qwen3_moe": "qwen3moe",
    "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3", "gemma3_text": "gemma3",
    "phi3": "phi3", "internlm2": "internlm2", "baichuan": "baichuan", "minicpm": "minicpm",
    "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2",
    # added with the 155-model catalog (src/models/<arch>.cpp of the vendored llama.cpp for each layout)
    "kimi_k2": "deepseek2",  # Kimi-K2 is DeepSeek-V3's layout (convert_hf_to_gguf.py KimiK2 -> DeepseekV2Model)
    "gpt_oss": "gpt-oss", "llama4_text": "llama4", "ernie4_5_moe": "ernie4_5-moe",
    "qwen3_vl_text": "qwen3vl", "qwen3_vl_moe_text": "qwen3vlmoe", "qwen2_5_vl": "qwen2vl",
    "qwen2_5_vl_text": "qwen2vl", "mistral3": "mistral3", "ministral3": "mistral3", "phi3_v": "phi3",
    "olmo2": "olmo2", "cohere": "command-r", "granite": "granite", "stablelm": "stablelm", "exaone4": "exaone4",
    "qwen3_next": "qwen3next",
    # OLMo-3: the OLMo-2 layout plus sliding-window layers; the converter writes it as "olmo2" with the window and
    # a per-layer pattern from layer_types (conversion/olmo.py Olmo2Model registers Olmo3ForCausalLM), and
    # src/models/olmo2.cpp then runs the windowed layers in the SWA cache (load_swa_pattern, default pattern 4)
    "olmo3": "olmo2",
    # Qwen3.5 / 3.6: Qwen3-Next's Gated DeltaNet hybrid with separate beta / alpha projections, dense (qwen35) or MoE
    # with a gated shared expert (qwen35moe) (conversion/qwen.py Qwen3_5TextModel / Qwen3_5MoeTextModel,
    # src/models/qwen35.cpp / qwen35moe.cpp)
    "qwen3_5_text": "qwen35", "qwen3_5_moe_text": "qwen35moe",
    # Nemotron-H / Nemotron-3: Mamba-2 / attention / MLP-or-MoE layers by hybrid_override_pattern
    # (conversion/nemotron.py NemotronHModel: "nemotron_h_moe" when the config has experts, src/models/nemotron-h.cpp)
    "nemotron_h": "nemotron_h",
    # GLM-4.7-Flash: DeepSeek-V2's MLA + MoE layout (conversion/glm.py Glm4MoeLiteModel(DeepseekV2Model), "deepseek2";
    # its MTP layers only when the config states num_nextn_predict_layers, which this code then refuses)
    "glm4_moe_lite": "deepseek2",
    # MiniMax-M2 / M2.x: full-width q/k RMSNorms, every layer MoE with a router bias, no shared expert
    # (conversion/minimax.py MiniMaxM2Model, src/models/minimax-m2.cpp); the checkpoints' MTP modules are not converted
    "minimax_m2": "minimax-m2",
    # LFM2 / LFM2.5 (the text model of LFM2-VL too): gated short-convolution layers and GQA layers with q/k norms by
    # layer_types (conversion/lfm2.py LFM2Model, src/models/lfm2.cpp)
    "lfm2": "lfm2",
    # Gemma-4 (31B, 26B-A4B, E4B, E2B): per-layer head sizes (global_head_dim on the full layers), sliding-window
    # layers by layer_types, KV-shared trailing layers, per-layer embeddings, dense MLP + routed experts (26B-A4B)
    # (conversion/gemma.py Gemma4Model, src/models/gemma4.cpp; the KV reuse in src/llama-model.cpp create_memory)
    "gemma4_text": "gemma4",
    # EXAONE-4.5: the EXAONE-4.0 text layout plus num_nextn_predict_layers MTP blocks (conversion/exaone.py
    # Exaone4_5_TextModel(Exaone4Model), MODEL_ARCH.EXAONE4; src/models/exaone4.cpp keeps them TENSOR_SKIP); the
    # vision tower goes to the mmproj file
    "exaone4_5_text": "exaone4",
    # DeepSeek-V4 (Flash / Pro): sliding-window attention over one 512-wide K=V head with per-layer compressed KV
    # (ratio 4 with the lightning indexer, ratio 128 without), grouped low-rank output projection, hyper-connections,
    # hash-routed leading MoE layers, routed experts written as MXFP4 by the converter (conversion/deepseek.py
    # DeepseekV4Model, src/models/deepseek4.cpp, src/llama-kv-cache-dsv4.cpp); its MTP block goes to a separate file
    "deepseek_v4": "deepseek4",
    # DeepSeek-V3.2 / GLM-5.x: DeepSeek-V3's MLA + MoE layout plus the DSA lightning indexer on every layer (GLM-5.2:
    # on the indexer_types "full" layers only) and the MTP block the converter appends unless --no-mtp
    # (conversion/deepseek.py DeepseekV32Model, conversion/glm.py GlmMoeDsaModel; src/models/deepseek32.cpp,
    # glm-dsa.cpp; the indexer key cache in src/llama-kv-cache-dsa.cpp)
    "deepseek_v32": "deepseek32", "glm_moe_dsa": "glm-dsa",
    # Step-3.5 / Step-3.7-Flash: GQA with more query heads on the sliding-window layers (attention_other_setting),
    # q/k norms, a head-wise attention gate, leading dense layers then MoE with one shared expert and a router bias,
    # and num_nextn_predict_layers MTP blocks the converter appends unless --no-mtp (conversion/step3.py Step35Model
    # registers Step3p5ForCausalLM and Step3p7ForConditionalGeneration; src/models/step35.cpp). step3p5 is the text
    # model type (the Step-3.7 wrapper's text_config); step3p7 is ai-dynamo/aiconfigurator's flat form of it
    "step3p5": "step35", "step3p7": "step35",
    # Hy3 / Hy3-preview (Tencent Hunyuan 3): GQA with per-head q/k RMSNorms, first_k_dense_replace dense layers, then
    # MoE layers with a sigmoid router + expert-selection bias (exp_probs_b) and one ungated shared expert
    # (num_shared_experts x moe_intermediate_size wide), and the MTP block the converter appends unless --no-mtp
    # (conversion/hunyuan.py HYV3Model, src/models/hy-v3.cpp: a full decoder block plus nextn.eh_proj / enorm / hnorm /
    # shared_head_norm, TENSOR_SKIP without load_mtp)
    "hy_v3": "hy_v3",
}
# and the reverse, for GGUF files
_MODEL_TYPE_OF_GGUF_ARCH = {
    "llama": "llama", "qwen2": "qwen2", "qwen2moe": "qwen2_moe", "qwen3": "qwen3", "qwen3moe": "qwen3_moe",
    "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3_text", "phi3": "phi3", "internlm2": "internlm2",
    "baichuan": "baichuan", "minicpm": "minicpm", "deepseek2": "deepseek_v2", "gpt-oss": "gpt_oss",
    "llama4": "llama4_text", "ernie4_5-moe": "ernie4_5_moe", "qwen3vl": "qwen3_vl_text",
    "qwen3vlmoe": "qwen3_vl_moe_text", "qwen2vl": "qwen2_5_vl", "mistral3": "mistral3", "olmo2": "olmo2",
    "command-r": "cohere", "granite": "granite", "stablelm": "stablelm", "exaone4": "exaone4",
    "qwen3next": "qwen3_next", "minimax-m2": "minimax_m2", "lfm2": "lfm2", "qwen35": "qwen3_5_text", "qwen35moe": "qwen3_5_moe_text", "nemotron_h": "nemotron_h",
    "nemotron_h_moe": "nemotron_h", "gemma4": "gemma4_text", "deepseek4": "deepseek_v4",
    "deepseek32": "deepseek_v32", "glm-dsa": "glm_moe_dsa", "step35": "step3p5", "hy_v3": "hy_v3",
}

# Model types seen in real configs whose weights or memory this code cannot size correctly, and why. A config of
# any type outside GGUF_ARCH is refused; these get a specific reason.
UNSUPPORTED_REASONS = {
    "nemotron-nas": "per-layer block_configs (layers of different widths, some without attention) are not modelled",
    "mllama_text_model": "interleaved cross-attention layers (Llama-3.2-Vision) are not modelled",
    "mimo": "MiMo's multi-token-prediction layers are not modelled",
    "mimo_v2_flash": "MiMo-V2's hybrid sliding-window attention with differing head sizes and MTP layers are not "
                     "modelled",
    "bailing_moe": "Ling / Bailing MoE layout (grouped routing, fused qkv) is not modelled",
    "minicpmv": "MiniCPM-V's language model layout is not read from this config",
    "glm4v": "GLM-4V's text model (glm4 post-norms, fused gate/up) is not modelled",
    "chatglm": "ChatGLM's fused qkv / gate-up layout and its config keys are not modelled",
    "minicpm3": "MiniCPM3's multi-head latent attention config (no v_head_dim) is not modelled",
    "kimi_linear": "Kimi Delta Attention layers (their conv / delta-rule state) and the MLA layers between them are "
                   "not modelled",
    "minimax_m3": "MiniMax-M3's sparse-attention indexer and its leading dense layers are not modelled",
}
# What the refused types are in the vendored llama.cpp of llama-cpp-python 0.3.36 (src/llama-arch.cpp; conversion/ of
# convert_hf_to_gguf.py): the engine runs these, only the sizing here is missing -- the refusal says so, so a user
# knows llama.cpp itself would load the model. A refused type not listed here has no llama.cpp architecture there.
_LLAMA_CPP_ARCH_OF_REFUSED = {
    "nemotron-nas": "deci", "gemma4_text": "gemma4", "deepseek_v32": "deepseek32",
    "mimo_v2_flash": "mimo2", "bailing_moe": "bailingmoe", "chatglm": "chatglm", "minicpm3": "minicpm3",
    "kimi_linear": "kimi-linear", "glm_moe_dsa": "glm-dsa", "deepseek_v4": "deepseek4", "minimax_m3": "minimax-m3",
    "MiniCPM3ForCausalLM": "minicpm3", "glm4v": "glm4",
}


def refusal_reason(model_type: str) -> str:
    """Why a model type is not sized, and whether llama.cpp 0.3.36 could run it (per engine: none is planned)."""
    reason = UNSUPPORTED_REASONS.get(model_type, "its tensor layout is not modelled")
    arch = _LLAMA_CPP_ARCH_OF_REFUSED.get(model_type)
    engine = (f"llama.cpp 0.3.36 has it (architecture {arch!r}) but no engine is planned until it is sized"
              if arch else "llama.cpp 0.3.36 has no architecture for it either")
    return f"{reason}; {engine}"


# transformers model classes -> model_type, for configs that name only "architectures"
_MODEL_TYPE_OF_ARCHITECTURE = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                               "MixtralForCausalLM": "mixtral", "Qwen2ForCausalLM": "qwen2",
                               "Qwen3ForCausalLM": "qwen3", "Gemma2ForCausalLM": "gemma2", "Phi3ForCausalLM": "phi3"}


class UnsupportedArchitecture(UserError):
    """A config of an architecture whose tensors / memory this code cannot size correctly (never sized anyway)."""


# Library defaults for keys a config.json may omit, from the transformers configuration classes (the values the
# model actually loads with). Only keys that real published config.json files are known to omit are listed.
#  - gemma3_text: transformers src/transformers/models/gemma3/configuration_gemma3.py, Gemma3TextConfig.__init__
#    (the HF gemma-3-4b/12b/27b config.json text_config omits heads, kv heads, head_dim, vocab_size).
#  - gemma / gemma2: GemmaConfig / Gemma2Config (tie_word_embeddings=True, head_dim=256).
#  - tie_word_embeddings defaults: False for LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config, Qwen3Config,
#    Qwen3MoeConfig, Phi3Config, DeepseekV2Config; InternLM2 / Baichuan remote code: False.
LIBRARY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"vocab_size": 262_208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131_072, "sliding_window": 4096, "sliding_window_pattern": 6},
    "gemma2": {"head_dim": 256, "sliding_window": 4096, "max_position_embeddings": 8192},
    "gemma": {"head_dim": 256},
}
# Gemma*Config(tie_word_embeddings=True); CohereConfig(tie_word_embeddings=True)
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text", "gemma4_text", "cohere", "lfm2"}  # + Lfm2Config(tie_word_embeddings=True)

# Qwen2 always has q/k/v biases (modeling_qwen2.py: bias=True); StableLM-2 when use_qkv_bias (read below)
_QKV_BIAS_TYPES = {"qwen2", "qwen2_moe", "qwen2_5_vl", "qwen2_5_vl_text"}
_QK_NORM_TYPES = {"gemma4_text", "lfm2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "gemma3", "gemma3_text", "qwen3_vl_text", "qwen3_vl_moe_text", "olmo2",
                  "olmo3", "exaone4", "exaone4_5_text", "hy_v3"}
_POST_NORM_TYPES = {"gemma2", "gemma3", "gemma3_text"}  # post_attention_norm + post_ffw_norm per layer

# GGUF layout quirks: Phi-3 keeps HF's fused qkv_proj and gate_up_proj (llama.cpp src/models/phi3.cpp:
# attn_qkv {n_embd, n_embd + 2*n_embd_gqa}, ffn_up {n_embd, 2*n_ff}, no ffn_gate). InternLM2 (wqkv) and Baichuan
# (W_pack) are fused in HF but convert_hf_to_gguf.py splits them into attn_q / attn_k / attn_v.
_FUSED_QKV_GGUF = {"phi3"}
_FUSED_GATE_UP_GGUF = {"phi3"}


def _bad(msg: str, hint: str = "give a Hugging Face config.json (the file next to the model weights)") -> UserError:
    return UserError(msg, hint=hint)


def _first(d: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def _as_int(value: Any, key: str, model_id: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or int(value) != value or value < 0:
        raise _bad(f"config for {model_id}: {key} must be a non-negative integer, got {value!r}")
    return int(value)


@guard_parse("config.json")
def spec_from_config(config: dict, model_id: str, source: str = "", source_kind: str = "",
                     license: Optional[str] = None, notes: Optional[str] = None) -> ModelSpec:
    """Parse a Hugging Face ``config.json`` dict into a ModelSpec (text model only for multimodal wrappers)."""
    check_config(config, model_id)  # depth, finite numbers, bounds (recommender/core/limits.py)
    if not isinstance(config, dict):
        raise _bad(f"config for {model_id} is not a JSON object (got {type(config).__name__})")
    text = config.get("text_config")
    if isinstance(text, dict) and ("hidden_size" not in config or "num_hidden_layers" not in config):
        # multimodal wrapper (Gemma3ForConditionalGeneration, ...): the language model's fields live in text_config
        cfg = {**{k: v for k, v in config.items() if k in ("torch_dtype", "tie_word_embeddings")}, **text}
    else:
        cfg = config
    archs = config.get("architectures")
    model_type = str(_first(cfg, "model_type", default="") or config.get("model_type") or "")
    architecture = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else model_type
    if not model_type and architecture in _MODEL_TYPE_OF_ARCHITECTURE:
        model_type = _MODEL_TYPE_OF_ARCHITECTURE[architecture]  # a config that names only its transformers class
    if not architecture:
        raise UnsupportedArchitecture(f"config for {model_id} names no architecture (no 'architectures' and no "
                                      "'model_type')", hint="give the config.json as published with the weights")
    if model_type not in GGUF_ARCH:
        reason = refusal_reason(model_type)
        raise UnsupportedArchitecture(
            f"config for {model_id}: model type {model_type or architecture!r} is not supported ({reason})",
            hint=f"supported model types: {', '.join(sorted(GGUF_ARCH))}")

    used_defaults: list[str] = []
    defaults = LIBRARY_DEFAULTS.get(model_type, {})
    if model_type == "nemotron_h" and isinstance(cfg.get("layers_block_type"), list) \
            and cfg.get("num_hidden_layers") is None:
        # Nemotron-3-Ultra lists its layers by name only (conversion/nemotron.py: num_hidden_layers = its length)
        cfg = {**cfg, "num_hidden_layers": len(cfg["layers_block_type"])}

    def get(*keys: str, required: bool = True, default: Any = None) -> Any:
        v = _first(cfg, *keys)
        if v is None and keys[0] in defaults:
            v = defaults[keys[0]]
            used_defaults.append(f"{keys[0]}={v}")
        if v is None:
            if required:
                raise _bad(f"config for {model_id} has no {keys[0]}")
            return default
        return v

    hidden = _as_int(get("hidden_size", "n_embd", "d_model"), "hidden_size", model_id)
    n_layers = _as_int(get("num_hidden_layers", "n_layer", "num_layers", "n_layers"), "num_hidden_layers", model_id)
    n_heads = _as_int(get("num_attention_heads", "n_head", "num_heads"), "num_attention_heads", model_id)
    vocab = _as_int(get("vocab_size", "padded_vocab_size"), "vocab_size", model_id)
    if hidden == 0 or n_layers == 0 or n_heads == 0 or vocab == 0:
        raise _bad(f"config for {model_id}: hidden_size, num_hidden_layers, num_attention_heads and vocab_size "
                   "must be positive")
    # num_attention_groups: Step-3.5's name for it (conversion/step3.py Step35Model reads it)
    n_kv = _as_int(get("num_key_value_heads", "num_kv_heads", "multi_query_group_num", "num_attention_groups",
                       required=False,
                       default=n_heads), "num_key_value_heads", model_id)
    head_dim = get("head_dim", "attention_head_dim", required=False)
    head_dim = _as_int(head_dim, "head_dim", model_id) if head_dim else hidden // n_heads
    max_pos = _as_int(get("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                          required=False, default=0), "max_position_embeddings", model_id)

    # Mixture of experts
    n_experts = _as_int(get("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
                            required=False, default=0), "num_experts", model_id)
    # gpt-oss names it experts_per_token (as well as num_experts_per_tok), ERNIE-4.5 moe_k
    top_k = _as_int(get("num_experts_per_tok", "moe_top_k", "experts_per_token", "moe_k", "top_k_experts",
                        required=False, default=0)
                    if n_experts else 0, "num_experts_per_tok", model_id)
    dense_ff = get("intermediate_size", "ffn_hidden_size", "n_inner", required=not n_experts, default=0)
    dense_ff = _as_int(dense_ff, "intermediate_size", model_id)
    moe_ff = n_shared = shared_ff = first_dense = 0
    moe_step = 1
    if n_experts:
        moe_ff = _as_int(get("moe_intermediate_size", required=False, default=dense_ff), "moe_intermediate_size",
                         model_id)
        if model_type == "llama4_text":
            # transformers Llama4TextConfig: experts and the one shared expert are intermediate_size wide; the dense
            # layers (when interleave_moe_layer_step > 1) are intermediate_size_mlp wide; layer i is MoE when
            # (i + 1) % step == 0 (moe_layers = range(step - 1, L, step); llama.cpp src/models/llama4.cpp the same)
            moe_ff = dense_ff
            n_shared, shared_ff = 1, dense_ff
            moe_step = _as_int(get("interleave_moe_layer_step", required=False, default=1), "interleave_moe_layer_step",
                               model_id) or 1
            dense_ff = _as_int(get("intermediate_size_mlp", required=moe_step > 1, default=0), "intermediate_size_mlp",
                               model_id) if moe_step > 1 else 0
        elif model_type == "ernie4_5_moe":
            # modeling_ernie4_5_moe.py: layers >= moe_layer_start_index with (i + 1) % moe_layer_interval == 0 are MoE;
            # the shared experts are one MLP of moe_intermediate_size * moe_num_shared_experts
            # (llama.cpp src/models/ernie4-5-moe.cpp: n_layer_dense_lead, n_moe_layer_step, n_ff_shexp)
            n_shared = _as_int(get("moe_num_shared_experts", required=False, default=0), "moe_num_shared_experts",
                               model_id)
            shared_ff = moe_ff * n_shared
            first_dense = min(n_layers, _as_int(get("moe_layer_start_index", required=False, default=0),
                                                "moe_layer_start_index", model_id))
            moe_step = _as_int(get("moe_layer_interval", required=False, default=1), "moe_layer_interval",
                               model_id) or 1
            end = get("moe_layer_end_index", required=False)
            if end is not None and end not in (-1, n_layers - 1):
                raise UnsupportedArchitecture(f"config for {model_id}: moe_layer_end_index {end} is not modelled")
        elif model_type.startswith("deepseek") or model_type in ("kimi_k2", "glm4_moe_lite", "glm_moe_dsa"):
            # DeepSeek-V2 modeling_deepseek.py: shared experts are one MLP of width moe_intermediate_size * n_shared
            n_shared = _as_int(get("n_shared_experts", required=False, default=0), "n_shared_experts", model_id)
            shared_ff = moe_ff * n_shared
            first_dense = min(n_layers, _as_int(get("first_k_dense_replace", required=False, default=0),
                                                "first_k_dense_replace", model_id))
            if (get("moe_layer_freq", required=False, default=1) or 1) != 1:
                raise _bad(f"config for {model_id}: moe_layer_freq != 1 is not supported",
                           hint="only DeepSeek-V2/V3 layouts with an MoE block in every layer after "
                                "first_k_dense_replace are modelled")
        elif model_type == "hy_v3":
            # HYV3Config / conversion/hunyuan.py HYV3Model: expert_shared_feed_forward_length = moe_intermediate_size x
            # num_shared_experts (default 1); the leading first_k_dense_replace layers are dense (src/models/hy-v3.cpp
            # tells them apart by the tensors present)
            n_shared = _as_int(get("num_shared_experts", required=False, default=1), "num_shared_experts", model_id)
            shared_ff = moe_ff * n_shared
            first_dense = min(n_layers, _as_int(get("first_k_dense_replace", required=False, default=0),
                                                "first_k_dense_replace", model_id))
            kinds = cfg.get("mlp_layer_types")
            if kinds is not None and kinds != ["dense"] * first_dense + ["sparse"] * (n_layers - first_dense):
                raise UnsupportedArchitecture(f"config for {model_id}: mlp_layer_types other than first_k_dense_replace "
                                              "dense layers followed by MoE layers are not modelled")
            if cfg.get("qk_norm") is False:
                raise UnsupportedArchitecture(f"config for {model_id}: hy_v3 without qk_norm is not modelled "
                                              "(src/models/hy-v3.cpp requires attn_q_norm / attn_k_norm)")
        elif model_type == "gemma4_text":
            # Gemma4TextDecoderLayer: every layer keeps its dense MLP (intermediate_size) next to the routed experts
            # (moe_intermediate_size); llama.cpp gemma4.cpp loads both (ffn_gate/up/down + ffn_gate_up_exps)
            if not cfg.get("enable_moe_block"):
                raise _bad(f"config for {model_id}: gemma4 num_experts set without enable_moe_block")
            moe_ff = _as_int(get("moe_intermediate_size", "expert_intermediate_size"), "moe_intermediate_size",
                             model_id)
        elif model_type == "nemotron_h":
            # NemotronHConfig: n_shared_experts of moe_shared_expert_intermediate_size (conversion/nemotron.py writes
            # expert_shared_feed_forward_length = moe_shared_expert_intermediate_size)
            n_shared = _as_int(get("n_shared_experts", required=False, default=0), "n_shared_experts", model_id)
            shared_ff = _as_int(get("moe_shared_expert_intermediate_size", required=False, default=0),
                                "moe_shared_expert_intermediate_size", model_id) if n_shared else 0
        elif model_type in _STEP35_TYPES:
            # one shared expert share_expert_dim wide, leading dense layers (moe_layers_enum / first_k_dense_replace)
            first_dense = _step35_first_moe_layer(cfg, get, model_id, n_layers)
            shared_ff = _as_int(get("share_expert_dim", required=False, default=0) or 0, "share_expert_dim", model_id)
            n_shared = 1 if shared_ff else 0
        elif get("shared_expert_intermediate_size", required=False):
            n_shared = 1  # Qwen2-MoE: one shared expert of shared_expert_intermediate_size
            shared_ff = _as_int(get("shared_expert_intermediate_size"), "shared_expert_intermediate_size", model_id)
        if get("mlp_only_layers", required=False) or (get("decoder_sparse_step", required=False, default=1) or 1) != 1:
            raise _bad(f"config for {model_id}: mixed dense/MoE layers (mlp_only_layers / decoder_sparse_step) "
                       "are not supported", hint="only models with an MoE block in every layer are modelled")
        if not first_dense and moe_step == 1 and model_type != "gemma4_text":
            dense_ff = 0  # every layer is MoE: there is no dense MLP width
        if not top_k:
            raise _bad(f"config for {model_id}: MoE config without num_experts_per_tok")

    # Multi-head latent attention (DeepSeek-V2/V3)
    kv_lora = _as_int(get("kv_lora_rank", required=False, default=0), "kv_lora_rank", model_id)
    q_lora = qk_rope = qk_nope = v_head = 0
    if kv_lora:
        q_lora = _as_int(get("q_lora_rank", required=False, default=0), "q_lora_rank", model_id)
        qk_rope = _as_int(get("qk_rope_head_dim"), "qk_rope_head_dim", model_id)
        qk_nope = _as_int(get("qk_nope_head_dim"), "qk_nope_head_dim", model_id)
        v_head = _as_int(get("v_head_dim"), "v_head_dim", model_id)

    if model_type == "deepseek_v4":
        # no kv_lora_rank (one 512-wide K = V head per layer, not MLA's latent); the query still goes through q_lora
        q_lora = _as_int(get("q_lora_rank"), "q_lora_rank", model_id)
        qk_rope = _as_int(get("qk_rope_head_dim"), "qk_rope_head_dim", model_id)

    # Sliding-window attention
    window = get("sliding_window", required=False)
    n_swa = 0
    layer_types = cfg.get("layer_types")
    if model_type == "llama4_text" and get("attention_chunk_size", required=False):
        # Llama-4 chunked local attention on the RoPE layers (transformers Llama4TextConfig: no_rope_layers, default
        # every no_rope_layer_interval = 4th layer global); llama.cpp runs it in the sliding-window cache
        # (src/models/llama4.cpp: LLAMA_SWA_TYPE_CHUNKED, n_swa = attention_chunk_size, pattern 4)
        window = get("attention_chunk_size")
        no_rope = cfg.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == n_layers:
            n_swa = sum(1 for x in no_rope if x)  # 1 = uses RoPE = chunked
        else:
            interval = _as_int(get("no_rope_layer_interval", required=False, default=4), "no_rope_layer_interval",
                               model_id) or 4
            n_swa = n_layers - n_layers // interval
    elif isinstance(layer_types, list) and layer_types:
        n_swa = sum(1 for t in layer_types if t == "sliding_attention")
    elif window:
        if model_type == "gemma2":
            # modeling_gemma2.py: is_sliding = not bool(layer_idx % 2) -> even layers are local
            n_swa = (n_layers + 1) // 2
        elif model_type in ("gemma3", "gemma3_text"):
            # modeling_gemma3.py: is_sliding = bool((layer_idx + 1) % sliding_window_pattern)
            pattern = _as_int(get("sliding_window_pattern", required=False, default=6), "sliding_window_pattern",
                              model_id)
            n_swa = n_layers - (n_layers // pattern if pattern else 0)
        elif "use_sliding_window" in cfg:
            # Qwen2/Qwen3: layers >= max_window_layers use the window, only if use_sliding_window
            if cfg.get("use_sliding_window"):
                n_swa = n_layers - min(n_layers, int(cfg.get("max_window_layers") or 0))
        else:
            n_swa = n_layers  # Mistral-7B-v0.1 style: every layer
    window = _as_int(window, "sliding_window", model_id) if window else None
    if not n_swa or (window and max_pos and window >= max_pos):
        # a window at least as long as the context changes nothing (Phi-3.5: 262144 > 131072)
        window, n_swa = None, 0

    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = model_type in _TIED_BY_DEFAULT
        if model_type in _TIED_BY_DEFAULT:
            used_defaults.append("tie_word_embeddings=True")
    bias = cfg.get("attention_bias", cfg.get("bias", cfg.get("use_qkv_bias", False)))
    dtype = _first(cfg, "torch_dtype", "dtype")

    linear: dict[str, Any] = {}
    if model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        # transformers Qwen3NextConfig; the MTP block: convert_hf_to_gguf.py keeps it unless --no-mtp, and the
        # Qwen3-Next config does not state mtp_num_hidden_layers (the converter counts the checkpoint's mtp.* layers:
        # one for the published Qwen3-Next-80B-A3B checkpoints)
        linear = {k: _as_int(get(c), c, model_id) for k, c in (
            ("full_attention_interval", "full_attention_interval"), ("linear_num_key_heads", "linear_num_key_heads"),
            ("linear_num_value_heads", "linear_num_value_heads"), ("linear_key_head_dim", "linear_key_head_dim"),
            ("linear_value_head_dim", "linear_value_head_dim"), ("linear_conv_kernel", "linear_conv_kernel_dim"))}
        if not linear["full_attention_interval"]:
            raise _bad(f"config for {model_id}: full_attention_interval must be positive")
        linear["nextn_layers"] = _as_int(get("mtp_num_hidden_layers", required=False, default=1), "mtp_num_hidden_layers",
                                         model_id)
        if n_shared == 0 and shared_ff:
            n_shared = 1
        if model_type != "qwen3_next":
            _check_interval_layer_types(layer_types, linear["full_attention_interval"], n_layers, model_id)
            if linear["linear_key_head_dim"] != linear["linear_value_head_dim"]:
                # src/models/qwen35.cpp sizes both from ssm_d_state (head_v_dim = head_k_dim)
                raise UnsupportedArchitecture(f"config for {model_id}: Gated DeltaNet key and value head sizes differ "
                                              "(llama.cpp's qwen35 layout assumes equal sizes)")
    elif model_type == "nemotron_h":
        linear, dense_ff = _nemotron_h_fields(cfg, get, model_id, n_layers, n_experts, dense_ff)
    elif model_type == "lfm2":
        linear, dense_ff = _lfm2_fields(cfg, get, model_id, n_layers, dense_ff)
    elif model_type == "gemma4_text":
        linear, n_swa = _gemma4_fields(cfg, get, model_id, n_layers, n_kv)
    elif model_type == "deepseek_v4":
        linear = _deepseek_v4_fields(cfg, get, model_id, n_layers)
    elif model_type in ("deepseek_v32", "glm_moe_dsa"):
        linear = _dsa_fields(cfg, get, model_id, n_layers, kv_lora)
    elif model_type in _STEP35_TYPES:
        linear, n_swa = _step35_fields(cfg, get, model_id, n_layers, n_heads, n_kv, head_dim,
                                       wrapped=config.get("model_type") == "step3p7" and cfg is not config)
    elif model_type in ("exaone4_5_text", "hy_v3"):
        linear = {"nextn_layers": _as_int(get("num_nextn_predict_layers", required=False, default=0) or 0,
                                          "num_nextn_predict_layers", model_id)}
    step_qk_norm = bool(linear.pop("qk_norm", False))
    if used_defaults:
        extra = f"library defaults used for keys absent from config.json: {', '.join(used_defaults)}"
        notes = f"{notes}; {extra}" if notes else extra
    spec = ModelSpec(
        id=model_id, architecture=architecture, model_type=model_type, hidden_size=hidden, num_layers=n_layers,
        num_attention_heads=n_heads, num_kv_heads=n_kv, head_dim=head_dim, intermediate_size=dense_ff,
        vocab_size=vocab, max_position_embeddings=max_pos, tie_word_embeddings=bool(tie),
        torch_dtype=str(dtype) if dtype else None,
        attention_bias=model_type in _QKV_BIAS_TYPES or bool(bias),
        qk_norm=model_type in _QK_NORM_TYPES or bool(cfg.get("use_qk_norm")) or step_qk_norm,
        extra_norms_per_layer=2 if model_type in _POST_NORM_TYPES else 0,
        sliding_window=window, num_swa_layers=n_swa,
        num_experts=n_experts, num_experts_per_tok=top_k, moe_intermediate_size=moe_ff,
        num_shared_experts=n_shared, shared_expert_intermediate_size=shared_ff, first_k_dense_layers=first_dense,
        kv_lora_rank=kv_lora, q_lora_rank=q_lora, qk_rope_head_dim=qk_rope, qk_nope_head_dim=qk_nope,
        v_head_dim=v_head, moe_layer_step=moe_step, **linear, source=source, source_kind=source_kind, license=license,
        notes=notes,
    )
    total, active = param_counts(spec)
    return spec.model_copy(update={"params_total": total, "params_active": active})


def _gemma4_fields(cfg: dict, get: Any, model_id: str, n_layers: int, n_kv: int) -> tuple[dict[str, Any], int]:
    """Gemma-4's per-layer fields, as conversion/gemma.py Gemma4Model writes them for llama.cpp: head size
    global_head_dim (key/value_length) on the full layers and head_dim (key_length_swa) on the sliding ones;
    head_count_kv per layer = num_global_key_value_heads on full layers when the config states it (else
    num_key_value_heads everywhere); the last num_kv_shared_layers layers own no KV (src/llama-model.cpp: KV reuse
    for il >= n_layer_kv_from_start). Returns the fields and the sliding-window layers among the KV-owning ones."""
    types = cfg.get("layer_types")
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in ("sliding_attention", "full_attention") for t in types):
        raise _bad(f"config for {model_id}: gemma4 needs layer_types with one sliding_attention / full_attention "
                   "entry per layer")
    pattern = "".join("S" if t == "sliding_attention" else "F" for t in types)
    ple_vocab = cfg.get("vocab_size_per_layer_input")
    if ple_vocab is not None and ple_vocab != cfg.get("vocab_size"):
        # gemma4.cpp: per_layer_token_embd is {n_embd_per_layer * n_layer, n_vocab}
        raise UnsupportedArchitecture(f"config for {model_id}: vocab_size_per_layer_input != vocab_size is not "
                                      "modelled (llama.cpp sizes the per-layer table by n_vocab)")
    shared = _as_int(get("num_kv_shared_layers", required=False, default=0), "num_kv_shared_layers", model_id)
    if not 0 <= shared < n_layers or set(pattern[:n_layers - shared]) != set(pattern):
        # transformers Gemma4TextConfig.kv_sharing_modes: every reused layer type needs a producing layer
        raise _bad(f"config for {model_id}: num_kv_shared_layers {shared} leaves a layer type without its own KV")
    full_hd = _as_int(get("global_head_dim"), "global_head_dim", model_id)
    full_kv = _as_int(get("num_global_key_value_heads", required=False, default=0) or 0,
                      "num_global_key_value_heads", model_id)
    fields = {"attn_layer_types": pattern, "full_head_dim": full_hd, "full_num_kv_heads": full_kv or n_kv,
              "kv_shared_layers": shared, "attention_k_eq_v": bool(cfg.get("attention_k_eq_v")),
              "per_layer_input_size": _as_int(get("hidden_size_per_layer_input", required=False, default=0) or 0,
                                              "hidden_size_per_layer_input", model_id),
              "double_wide_mlp": bool(cfg.get("use_double_wide_mlp"))}
    return fields, pattern[:n_layers - shared].count("S")


_DSV4_RATIO_LETTER = {0: "W", 4: "C", 128: "H"}  # src/models/deepseek4.cpp accepts only these ratios


def _deepseek_v4_fields(cfg: dict, get: Any, model_id: str, n_layers: int) -> dict[str, Any]:
    """DeepSeek-V4's own fields (transformers-style DeepseekV4 config.json keys, as conversion/deepseek.py
    DeepseekV4Model writes them to GGUF): compress_ratios (one per trunk layer, then the MTP layers'), o_groups /
    o_lora_rank, hc_mult, index_n_heads / index_head_dim, num_hash_layers. The MTP block is not in the GGUF the
    converter writes by default (it goes to a separate mtp-*.gguf with --mtp), so nextn_layers stays 0."""
    ratios = cfg.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n_layers or \
            any(r not in _DSV4_RATIO_LETTER for r in ratios[:n_layers]):
        raise UnsupportedArchitecture(f"config for {model_id}: DeepSeek-V4 needs compress_ratios (0, 4 or 128) for "
                                      f"each of its {n_layers} layers")
    fields = {"compress_pattern": "".join(_DSV4_RATIO_LETTER[r] for r in ratios[:n_layers])}
    for field, key in (("o_groups", "o_groups"), ("o_lora_rank", "o_lora_rank"), ("hyper_connections", "hc_mult"),
                       ("indexer_heads", "index_n_heads"), ("indexer_head_dim", "index_head_dim"),
                       ("indexer_top_k", "index_topk"), ("hash_layers", "num_hash_layers")):
        fields[field] = _as_int(get(key), key, model_id)
    if not fields["o_groups"] or not fields["hyper_connections"]:
        raise _bad(f"config for {model_id}: o_groups and hc_mult must be positive")
    if cfg.get("scoring_func", "sqrtsoftplus") != "sqrtsoftplus":
        # src/models/deepseek4.cpp load_arch_hparams: "DeepSeek-V4 loader currently expects sqrtsoftplus MoE scoring"
        raise UnsupportedArchitecture(f"config for {model_id}: DeepSeek-V4 scoring_func other than sqrtsoftplus")
    return fields


def _dsa_fields(cfg: dict, get: Any, model_id: str, n_layers: int, kv_lora: int) -> dict[str, Any]:
    """DeepSeek sparse attention's fields, as conversion/deepseek.py DeepseekV32Model / conversion/glm.py
    GlmMoeDsaModel write them: index_n_heads, index_head_dim, index_topk (attention.indexer.*), GLM-5.2's
    indexer_types ("full" / "shared" per trunk layer: attention.indexer.types; without it every layer is full, the
    loaders' default for files without the key and n_ctx_train < 2^20) and the appended MTP block
    (num_nextn_predict_layers, kept unless --no-mtp)."""
    if not kv_lora:
        # src/models/glm-dsa.cpp load_arch_tensors: "GLM_DSA architecture requires MLA" (deepseek32 the same layout)
        raise UnsupportedArchitecture(f"config for {model_id}: DeepSeek sparse attention without MLA (kv_lora_rank)")
    types = cfg.get("indexer_types")
    if types is None:
        pattern = "F" * n_layers
    elif isinstance(types, list) and len(types) == n_layers and set(types) <= {"full", "shared"} and \
            types[0] == "full":
        pattern = "".join("F" if t == "full" else "S" for t in types)
    else:
        # glm-dsa.cpp: a shared layer reuses the top-k of a previous full one (the first must be full)
        raise UnsupportedArchitecture(f"config for {model_id}: indexer_types needs full / shared for each of its "
                                      f"{n_layers} layers, the first full")
    fields = {"indexer_pattern": pattern}
    for field, key in (("indexer_heads", "index_n_heads"), ("indexer_head_dim", "index_head_dim"),
                       ("indexer_top_k", "index_topk")):
        fields[field] = _as_int(get(key), key, model_id)
    if not fields["indexer_heads"] or not fields["indexer_head_dim"]:
        raise _bad(f"config for {model_id}: index_n_heads and index_head_dim must be positive")
    fields["nextn_layers"] = _as_int(get("num_nextn_predict_layers", required=False, default=0) or 0,
                                     "num_nextn_predict_layers", model_id)
    return fields


_STEP35_TYPES = frozenset({"step3p5", "step3p7"})
_STEP_LAYER_TYPES = {"full_attention": "F", "sliding_attention": "S"}


def _step35_first_moe_layer(cfg: dict, get: Any, model_id: str, n_layers: int) -> int:
    """The first MoE layer of a Step-3.5 / 3.7 config: moe_layers_enum (the published configs: "3,4,...,44", the trunk
    layers with an MoE block; conversion/step3.py writes its first entry as leading_dense_block_count) or
    first_k_dense_replace (ai-dynamo/aiconfigurator's flat form). Only a contiguous MoE tail is modelled."""
    enum = cfg.get("moe_layers_enum")
    if enum is not None:
        items = enum.split(",") if isinstance(enum, str) else enum
        try:
            layers = sorted({int(str(x).strip()) for x in items if str(x).strip()})
        except ValueError:
            raise _bad(f"config for {model_id}: moe_layers_enum must list layer numbers") from None
        layers = [i for i in layers if i < n_layers]
        if not layers or layers != list(range(layers[0], n_layers)):
            raise UnsupportedArchitecture(f"config for {model_id}: MoE layers (moe_layers_enum) other than one "
                                          "contiguous run up to the last trunk layer are not modelled")
        return layers[0]
    first = get("first_k_dense_replace", required=False)
    if first is None:
        raise UnsupportedArchitecture(f"config for {model_id}: a Step-3.5 / 3.7 MoE config needs moe_layers_enum "
                                      "(or first_k_dense_replace) to say which layers are MoE")
    return min(n_layers, _as_int(first, "first_k_dense_replace", model_id))


def _step35_fields(cfg: dict, get: Any, model_id: str, n_layers: int, n_heads: int, n_kv: int, head_dim: int,
                   wrapped: bool) -> tuple[dict[str, Any], int]:
    """Step-3.5 / 3.7's per-layer attention, as conversion/step3.py Step35Model writes it for llama.cpp: layer_types
    (one per trunk layer, then possibly the MTP blocks'; the converter pads missing MTP entries with full_attention)
    gives the sliding layers, which take attention_other_setting's num_attention_heads / num_attention_groups (the
    base num_attention_heads / num_attention_groups elsewhere: head_count and head_count_kv per layer), one head_dim
    for all; the MTP blocks (num_nextn_predict_layers, kept unless --no-mtp). The head-wise gate (self_attn.g_proj ->
    attn_gate {n_embd, n_head(il)}) and the q/k norms: always for transformers' Step3p7 (Step3p7Attention builds
    q_norm, k_norm and g_proj unconditionally; the step3p7 wrapper and its flat form), else use_head_wise_attn_gate /
    use_qk_norm. Returns the fields and the number of sliding trunk layers."""
    types = cfg.get("layer_types")
    if not isinstance(types, list) or len(types) < n_layers or any(t not in _STEP_LAYER_TYPES for t in types):
        raise UnsupportedArchitecture(f"config for {model_id}: Step-3.5 / 3.7 needs layer_types (full_attention / "
                                      f"sliding_attention) for each of its {n_layers} layers")
    nextn = _as_int(get("num_nextn_predict_layers", required=False, default=0) or 0, "num_nextn_predict_layers",
                    model_id)
    padded = (list(types) + ["full_attention"] * (n_layers + nextn))[:n_layers + nextn]
    pattern = "".join(_STEP_LAYER_TYPES[t] for t in padded)
    swa_heads = n_heads
    if "S" in pattern:
        other = cfg.get("attention_other_setting")
        if not isinstance(other, dict):
            # conversion/step3.py would give the sliding layers num_attention_heads; the published Step-3.5 / 3.7
            # checkpoints state 96 there (64 on the full layers), so a config without the key is not sized
            raise UnsupportedArchitecture(
                f"config for {model_id}: Step-3.5 / 3.7 sliding-window layers without attention_other_setting: their "
                "query-head count is not stated (the published checkpoints' text_config has 96 on the sliding layers, "
                "64 on the full ones)")
        swa_heads = _as_int(other.get("num_attention_heads", n_heads), "attention_other_setting.num_attention_heads",
                            model_id)
        swa_kv = _as_int(other.get("num_attention_groups", n_kv), "attention_other_setting.num_attention_groups",
                         model_id)
        swa_hd = _as_int(other.get("head_dim", head_dim), "attention_other_setting.head_dim", model_id)
        if other.get("attention_type", "sliding_attention") != "sliding_attention" or swa_kv != n_kv \
                or swa_hd != head_dim or not swa_heads:
            raise UnsupportedArchitecture(f"config for {model_id}: attention_other_setting with other KV heads, head "
                                          "size or layer type than the sliding layers' query heads is not modelled")
    if cfg.get("use_moe_router_bias") is False:
        raise UnsupportedArchitecture(f"config for {model_id}: Step MoE without the router bias is not modelled")
    hf_step3p7 = wrapped or cfg.get("model_type") == "step3p7"
    fields = {"attn_layer_types": pattern, "swa_num_attention_heads": swa_heads if swa_heads != n_heads else 0,
              "head_wise_gate": hf_step3p7 or bool(cfg.get("use_head_wise_attn_gate")), "nextn_layers": nextn,
              "qk_norm": hf_step3p7 or bool(cfg.get("use_qk_norm"))}
    return fields, pattern[:n_layers].count("S")


def _check_interval_layer_types(layer_types: Any, interval: int, n_layers: int, model_id: str) -> None:
    """A config's layer_types, where it lists them, must be the full_attention_interval pattern (layer i full
    attention when (i + 1) % interval == 0): llama.cpp's qwen35 loader derives the layers from the interval."""
    if not isinstance(layer_types, list) or not layer_types:
        return
    want = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)]
    if list(layer_types) != want:
        raise UnsupportedArchitecture(f"config for {model_id}: layer_types is not the full_attention_interval "
                                      f"{interval} pattern (other linear / full layer orders are not modelled)")


_NEMOTRON_LAYER_KINDS = frozenset("M*-E")


def _lfm2_fields(cfg: dict, get: Any, model_id: str, n_layers: int, dense_ff: int) -> tuple[dict[str, Any], int]:
    """(ModelSpec fields, MLP width) of an LFM2 config: the layer kinds as a pattern (C = gated short convolution,
    * = attention) and conv_L_cache, and the MLP width the converter writes (conversion/lfm2.py
    _add_feed_forward_length: with block_auto_adjust_ff_dim, int(2/3 ff), times block_ffn_dim_multiplier, rounded up
    to block_multiple_of)."""
    kinds = cfg.get("layer_types")
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= {"conv", "full_attention"}:
        raise UnsupportedArchitecture(f"config for {model_id}: an LFM2 config needs layer_types, conv or "
                                      f"full_attention for each of its {n_layers} layers")
    ff = _as_int(get("block_ff_dim", "intermediate_size"), "block_ff_dim", model_id)
    if cfg.get("block_auto_adjust_ff_dim"):
        ff = int(2 * ff / 3)
        mult = cfg.get("block_ffn_dim_multiplier")
        if mult is not None:
            ff = int(float(mult) * ff)
        step = _as_int(get("block_multiple_of", required=False, default=256), "block_multiple_of", model_id) or 1
        ff = step * ((ff + step - 1) // step)
    pattern = "".join("C" if k == "conv" else "*" for k in kinds)
    return {"layer_pattern": pattern,
            "linear_conv_kernel": _as_int(get("conv_L_cache"), "conv_L_cache", model_id)}, ff or dense_ff


def _nemotron_h_fields(cfg: dict, get: Any, model_id: str, n_layers: int, n_experts: int,
                       dense_ff: int) -> tuple[dict[str, Any], int]:
    """(ModelSpec fields, dense MLP width) of a Nemotron-H config: the layer pattern and the Mamba-2 sizes in the
    linear_* fields (transformers / remote-code NemotronHConfig; conversion/nemotron.py and Mamba2Model write
    ssm_d_inner = mamba_num_heads x mamba_head_dim, ssm_dt_rank = mamba_num_heads, ssm_group_count = n_groups,
    ssm_state_size, ssm_conv_kernel)."""
    pattern = cfg.get("hybrid_override_pattern")
    names = cfg.get("layers_block_type")
    if pattern is None and isinstance(names, list):
        # the list form (Nemotron-3-Ultra; conversion/nemotron.py _SSM / _ATTN / _MLP_LAYER_TYPES)
        kind = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "moe": "E",
                "mlp": "-"}
        pattern = "".join(kind.get(str(x), "?") for x in names)
    if not isinstance(pattern, str) or len(pattern) != n_layers or not set(pattern) <= _NEMOTRON_LAYER_KINDS:
        raise UnsupportedArchitecture(f"config for {model_id}: a Nemotron-H config needs hybrid_override_pattern, "
                                      f"one of M * - E per layer ({n_layers} layers)")
    if ("E" in pattern) != bool(n_experts):
        raise UnsupportedArchitecture(f"config for {model_id}: MoE layers (E) and n_routed_experts disagree")
    heads = _as_int(get("mamba_num_heads"), "mamba_num_heads", model_id)
    head_dim = _as_int(get("mamba_head_dim"), "mamba_head_dim", model_id)
    groups = _as_int(get("n_groups"), "n_groups", model_id)
    if not heads or not head_dim or not groups or (heads * head_dim) % groups:
        raise _bad(f"config for {model_id}: mamba_num_heads x mamba_head_dim must be a positive multiple of n_groups")
    fields: dict[str, Any] = {
        "layer_pattern": pattern, "linear_num_key_heads": groups,
        "linear_key_head_dim": _as_int(get("ssm_state_size"), "ssm_state_size", model_id),
        "linear_num_value_heads": heads, "linear_value_head_dim": head_dim,
        "linear_conv_kernel": _as_int(get("conv_kernel", required=False, default=4), "conv_kernel", model_id),
        "moe_latent_size": _as_int(get("moe_latent_size", required=False, default=0), "moe_latent_size", model_id),
        # the converter keeps the MTP head (one block) of an MoE Nemotron-H unless --no-mtp
        "nextn_layers": _as_int(get("num_nextn_predict_layers", required=False, default=0),
                                "num_nextn_predict_layers", model_id) if n_experts else 0,
    }
    if fields["nextn_layers"] > 1:
        raise UnsupportedArchitecture(f"config for {model_id}: more than one MTP block is not converted by llama.cpp")
    if "-" in pattern:
        dense_ff = _as_int(get("intermediate_size"), "intermediate_size", model_id)
    return fields, dense_ff


# ----------------------------------------------------------------------------------------------------------------
# ModelSpec -> tensors (GGUF names)
# ----------------------------------------------------------------------------------------------------------------

# A raw tensor: (name, shape, layer or -1, expert_count): expert_count > 1 only for routed-expert tensors (whose
# last dimension is the expert), 1 for everything else (MLA's 3-D attn_k_b / attn_v_b included)
RawTensor = tuple[str, tuple[int, ...], int, int]


class ArchKey(NamedTuple):
    """The ModelSpec fields that decide the tensor inventory (hashable: the cache key of inventory and sizes)."""

    gguf_arch: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    attention_bias: bool
    qk_norm: bool
    extra_norms_per_layer: int
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    num_shared_experts: int
    shared_expert_intermediate_size: int
    first_k_dense_layers: int
    kv_lora_rank: int
    q_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    moe_layer_step: int = 1
    full_attention_interval: int = 0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    nextn_layers: int = 0
    layer_pattern: Optional[str] = None
    moe_latent_size: int = 0
    attn_layer_types: Optional[str] = None
    full_head_dim: int = 0
    full_num_kv_heads: int = 0
    kv_shared_layers: int = 0
    attention_k_eq_v: bool = False
    per_layer_input_size: int = 0
    double_wide_mlp: bool = False
    compress_pattern: Optional[str] = None
    o_groups: int = 0
    o_lora_rank: int = 0
    hyper_connections: int = 0
    indexer_heads: int = 0
    indexer_head_dim: int = 0
    hash_layers: int = 0
    indexer_pattern: Optional[str] = None
    swa_num_attention_heads: int = 0
    head_wise_gate: bool = False


def gguf_arch(spec: ModelSpec) -> str:
    """llama.cpp architecture name for a spec (GGUF ``general.architecture``)."""
    if spec.model_type == "nemotron_h" and spec.num_experts:
        return "nemotron_h_moe"  # conversion/nemotron.py: the MoE configs are converted as nemotron_h_moe
    if spec.model_type in GGUF_ARCH:
        return GGUF_ARCH[spec.model_type]
    if spec.source_kind == "gguf header":
        return spec.architecture
    # a spec stored before unsupported types were refused: the llama layout (never produced by spec_from_config now)
    return "llama"


_SPEC_FIELDS = ArchKey._fields[1:]  # every field after gguf_arch is the ModelSpec field of the same name


def arch_key(spec: ModelSpec) -> ArchKey:
    return ArchKey(gguf_arch(spec), *(getattr(spec, f) for f in _SPEC_FIELDS))


def raw_inventory(spec: ModelSpec) -> tuple[RawTensor, ...]:
    """Cached, plain-tuple form of ``tensor_inventory`` (fast path for recommender.model.quant)."""
    return raw_inventory_of(arch_key(spec))


def is_moe_layer(key: ArchKey, i: int) -> bool:
    """Layer i has a routed-expert block (DeepSeek first_k_dense_replace, Llama-4 / ERNIE-4.5 interleave step)."""
    step = key.moe_layer_step or 1
    return bool(key.num_experts) and i >= key.first_k_dense_layers and (i + 1) % step == 0


# Per-architecture layout differences (llama.cpp src/models/<arch>.cpp create_tensor calls)
_POST_NORM_ONLY = {"olmo2", "exaone4"}  # attn_post_norm + ffn_post_norm, no pre-norms (olmo2.cpp, exaone4.cpp)
_NO_FFN_NORM = {"command-r"}  # one attn_norm per layer, parallel attention + MLP (command-r.cpp)
_NORM_BIAS = {"stablelm"}  # LayerNorm with bias: attn_norm / ffn_norm / output_norm .bias (stablelm.cpp)
# attn_q_norm {n_head * head_dim}, attn_k_norm {n_head_kv * head_dim} (olmo2.cpp, minimax-m2.cpp)
_FULL_WIDTH_QK_NORM = {"olmo2", "minimax-m2"}
_ROUTER_BIAS = {"minimax-m2"}  # exp_probs_b.bias {n_expert} per MoE layer (minimax-m2.cpp)
# exp_probs_b {n_expert} without a .bias suffix: src/models/hy-v3.cpp asks tn(LLM_TENSOR_FFN_EXP_PROBS_B, i), and the
# converter maps the checkpoint's mlp.expert_bias (no .weight / .bias suffix) to it unchanged
_ROUTER_BIAS_BARE = {"hy_v3"}
_ALWAYS_TIED = {"command-r"}  # command-r.cpp: output = token_embd (TENSOR_DUPLICATED)


@lru_cache(maxsize=1024)
def raw_inventory_of(key: ArchKey) -> tuple[RawTensor, ...]:
    (arch, H, L, nh, nkv, hd, ff, V, tied, qkv_bias, qk_norm, extra_norms,
     E, _top_k, ff_exp, n_shared, ff_sh, first_dense, kv_lora, q_lora, qk_rope, qk_nope, v_hd, _step,
     full_every, lin_kh, lin_vh, lin_kd, lin_vd, conv_k, nextn, _pattern, _latent) = key[:33]
    if arch == "gemma4":
        return _gemma4_inventory(key)
    if arch == "deepseek4":
        return _deepseek4_inventory(key)
    if arch == "step35":
        return _step35_inventory(key)
    fused_qkv = arch in _FUSED_QKV_GGUF
    dsa = arch in DSA_ARCHS
    fused_up = arch in _FUSED_GATE_UP_GGUF
    gpt_oss = arch == "gpt-oss"
    out: list[RawTensor] = [("token_embd.weight", (H, V), -1, 1)]
    q_dim, kv_dim = nh * hd, nkv * hd
    next_ = arch in ("qwen3next", "qwen35", "qwen35moe")
    nemotron = arch in ("nemotron_h", "nemotron_h_moe")
    if arch == "lfm2":
        return _lfm2_inventory(key)
    for i in range(L + nextn):
        b = f"blk.{i}."
        t: list[tuple] = []  # (name, shape) or (name, shape, expert_count)
        if next_ or nemotron:
            t += _qwen3next_block(key, i, b) if next_ else _nemotron_h_block(key, i, b)
            out += [(x[0], x[1], i, x[2] if len(x) > 2 else 1) for x in t]
            continue
        if arch not in _POST_NORM_ONLY:
            t += [(b + "attn_norm.weight", (H,))]
            if arch in _NORM_BIAS:
                t += [(b + "attn_norm.bias", (H,))]
        if kv_lora:
            # llama.cpp src/models/deepseek2.cpp, the layout convert_hf_to_gguf.py writes today: kv_b_proj split
            # into attn_k_b {qk_nope, kv_lora, n_head} and attn_v_b {kv_lora, v_head, n_head} (3-D, not experts)
            q_width = nh * (qk_nope + qk_rope)
            if q_lora:
                t += [(b + "attn_q_a.weight", (H, q_lora)), (b + "attn_q_a_norm.weight", (q_lora,)),
                      (b + "attn_q_b.weight", (q_lora, q_width))]
            else:
                t += [(b + "attn_q.weight", (H, q_width))]
            t += [(b + "attn_kv_a_mqa.weight", (H, kv_lora + qk_rope)), (b + "attn_kv_a_norm.weight", (kv_lora,)),
                  (b + "attn_k_b.weight", (qk_nope, kv_lora, nh), 1), (b + "attn_v_b.weight", (kv_lora, v_hd, nh), 1),
                  (b + "attn_output.weight", (nh * v_hd, H))]
            if dsa and (i >= L or key.indexer_pattern[i] == "F"):
                t += _dsa_indexer(key, b)
        else:
            if fused_qkv:
                t += [(b + "attn_qkv.weight", (H, q_dim + 2 * kv_dim))]
                if qkv_bias:
                    t += [(b + "attn_qkv.bias", (q_dim + 2 * kv_dim,))]
            else:
                t += [(b + "attn_q.weight", (H, q_dim)), (b + "attn_k.weight", (H, kv_dim)),
                      (b + "attn_v.weight", (H, kv_dim))]
                if qkv_bias:
                    t += [(b + "attn_q.bias", (q_dim,)), (b + "attn_k.bias", (kv_dim,)), (b + "attn_v.bias", (kv_dim,))]
            if qk_norm:
                if arch in _FULL_WIDTH_QK_NORM:
                    t += [(b + "attn_q_norm.weight", (q_dim,)), (b + "attn_k_norm.weight", (kv_dim,))]
                else:
                    t += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
            t += [(b + "attn_output.weight", (q_dim, H))]
            if gpt_oss:
                # src/models/openai-moe.cpp: attn_output bias and the per-head attention sinks
                t += [(b + "attn_output.bias", (H,)), (b + "attn_sinks.weight", (nh,))]
        if extra_norms or arch in _POST_NORM_ONLY or gpt_oss:
            t += [(b + "post_attention_norm.weight", (H,))]  # gpt-oss: its pre-MLP norm (attn_post_norm)
        if arch not in _NO_FFN_NORM and arch not in _POST_NORM_ONLY and not gpt_oss:
            t += [(b + "ffn_norm.weight", (H,))]
            if arch in _NORM_BIAS:
                t += [(b + "ffn_norm.bias", (H,))]
        if is_moe_layer(key, i):
            t += [(b + "ffn_gate_inp.weight", (H, E)),
                  (b + "ffn_gate_exps.weight", (H, ff_exp, E), E), (b + "ffn_up_exps.weight", (H, ff_exp, E), E),
                  (b + "ffn_down_exps.weight", (ff_exp, H, E), E)]
            if arch in _ROUTER_BIAS:
                t += [(b + "exp_probs_b.bias", (E,))]
            elif arch in _ROUTER_BIAS_BARE:
                t += [(b + "exp_probs_b", (E,))]
            if gpt_oss:
                # router and expert biases (openai-moe.cpp): ffn_*_exps.bias {n_ff_exp or n_embd, n_expert}
                t += [(b + "ffn_gate_inp.bias", (E,)), (b + "ffn_gate_exps.bias", (ff_exp, E), E),
                      (b + "ffn_up_exps.bias", (ff_exp, E), E), (b + "ffn_down_exps.bias", (H, E), E)]
            if n_shared and ff_sh:
                if arch == "qwen2moe":
                    t += [(b + "ffn_gate_inp_shexp.weight", (H,))]
                t += [(b + "ffn_gate_shexp.weight", (H, ff_sh)), (b + "ffn_up_shexp.weight", (H, ff_sh)),
                      (b + "ffn_down_shexp.weight", (ff_sh, H))]
        elif fused_up:
            t += [(b + "ffn_up.weight", (H, 2 * ff)), (b + "ffn_down.weight", (ff, H))]
        else:
            t += [(b + "ffn_gate.weight", (H, ff)), (b + "ffn_up.weight", (H, ff)), (b + "ffn_down.weight", (ff, H))]
        if extra_norms or arch in _POST_NORM_ONLY:
            t += [(b + "post_ffw_norm.weight", (H,))]
        if i >= L and dsa:
            t += _dsa_nextn(key, b)
        if i >= L and arch in ("exaone4", "hy_v3"):
            # EXAONE-4.5 MTP block (src/models/exaone4.cpp is_nextn), Hy3's (hy-v3.cpp; its final_layernorm is
            # shared_head_norm): the trunk block plus eh_proj and three norms
            t += [(b + "nextn.eh_proj.weight", (2 * H, H)), (b + "nextn.enorm.weight", (H,)),
                  (b + "nextn.hnorm.weight", (H,)), (b + "nextn.shared_head_norm.weight", (H,))]
        out += [(x[0], x[1], i, x[2] if len(x) > 2 else 1) for x in t]
    out.append(("output_norm.weight", (H,), -1, 1))
    if arch in _NORM_BIAS:
        out.append(("output_norm.bias", (H,), -1, 1))
    if not tied and arch not in _ALWAYS_TIED:
        out.append(("output.weight", (H, V), -1, 1))
    return tuple(out)


# DeepSeek sparse attention (MLA + the lightning indexer): llama.cpp src/models/deepseek32.cpp, glm-dsa.cpp
DSA_ARCHS = frozenset({"deepseek32", "glm-dsa"})
# The MTP block of a DeepSeek-V3.2 checkpoint carries its own copies of the embedding and output head
# (model.layers.61.embed_tokens / shared_head.head: the DeepSeek-V3 report's 14B MTP weights beside the 671B trunk);
# the converter maps them to nextn.embed_tokens / nextn.shared_head_head (gguf-py tensor_mapping.py)
_NEXTN_OWN_HEAD = frozenset({"deepseek32"})


def _dsa_indexer(key: ArchKey, b: str) -> list[tuple]:
    """A layer's lightning indexer as src/models/deepseek32.cpp / glm-dsa.cpp load_arch_tensors create it:
    indexer.k_norm (LayerNorm weight + bias {idx_dim}), indexer.proj {n_embd, idx_heads} (the per-head weights; F32
    in the converter's file, conversion/base.py's F32 list), indexer.attn_k {n_embd, idx_dim}, indexer.attn_q_b
    {q_lora, idx_heads x idx_dim}."""
    H, q_lora, h, d = key.hidden_size, key.q_lora_rank, key.indexer_heads, key.indexer_head_dim
    return [(b + "indexer.k_norm.weight", (d,)), (b + "indexer.k_norm.bias", (d,)),
            (b + "indexer.proj.weight", (H, h)), (b + "indexer.attn_k.weight", (H, d)),
            (b + "indexer.attn_q_b.weight", (q_lora, h * d))]


def _dsa_nextn(key: ArchKey, b: str) -> list[tuple]:
    """The MTP block's own tensors (deepseek32.cpp / glm-dsa.cpp, i >= n_layer): eh_proj {2 n_embd, n_embd}, enorm,
    hnorm, shared_head_norm, and on DeepSeek-V3.2 its embedding / head copies (_NEXTN_OWN_HEAD)."""
    H, V = key.hidden_size, key.vocab_size
    t = [(b + "nextn.eh_proj.weight", (2 * H, H)), (b + "nextn.enorm.weight", (H,)),
         (b + "nextn.hnorm.weight", (H,)), (b + "nextn.shared_head_norm.weight", (H,))]
    if key.gguf_arch in _NEXTN_OWN_HEAD:
        t += [(b + "nextn.embed_tokens.weight", (H, V)), (b + "nextn.shared_head_head.weight", (H, V))]
    return t


def _deepseek4_inventory(key: ArchKey) -> tuple[RawTensor, ...]:
    """DeepSeek-V4 as src/models/deepseek4.cpp load_arch_tensors creates it (tensor names from gguf-py constants.py,
    written by conversion/deepseek.py DeepseekV4Model; no MTP block: the converter leaves it to a separate file).
    Per layer: attn_norm, attn_sinks {n_head}, the low-rank query (attn_q_a {n_embd, q_lora}, attn_q_a_norm, attn_q_b
    {q_lora, n_head x head}), one K = V head (attn_kv {n_embd, head}, attn_kv_a_norm {head}), the grouped low-rank
    output (attn_output_a {n_head x head / o_groups, o_groups x o_lora}: the checkpoint's 2-D wo_a, which the loader
    reshapes to {.., o_lora, o_groups} (TENSOR_ALLOW_RESHAPE); attn_output_b {o_groups x o_lora, n_embd}),
    the hyper-connection mixers (hc_attn_* / hc_ffn_*: fn {hc x n_embd, (2 + hc) x hc}, base {(2 + hc) x hc}, scale
    {3}), the KV compressor of a ratio-4 / ratio-128 layer (attn_compressor_kv / _gate {n_embd, coff x head} with coff
    2 for ratio 4 (overlapping windows) else 1, _ape {coff x head, ratio}, _norm {head}) and, on ratio-4 layers, the
    lightning indexer (indexer.proj {n_embd, idx_heads}, indexer.attn_q_b {q_lora, idx_heads x idx_dim}, its
    compressor {n_embd, 2 idx_dim} x 2, ape {2 idx_dim, 4}, norm {idx_dim}); the MoE block: router ffn_gate_inp, a
    token-id -> expert-id table ffn_gate_tid2eid {top_k, n_vocab} (I32) on the first hash_layers layers and the router
    bias exp_probs_b {n_expert} on the others, ffn_norm, routed experts and one shared expert of n_ff_exp x
    n_shared. Output: output_hc_fn {hc x n_embd, hc}, output_hc_base {hc}, output_hc_scale {1}."""
    H, L, nh, hd, V, E = key.hidden_size, key.num_layers, key.num_attention_heads, key.head_dim, key.vocab_size, \
        key.num_experts
    q_lora, ff_exp, hc = key.q_lora_rank, key.moe_intermediate_size, key.hyper_connections
    hc_dim, hc_mix = hc * H, (2 + hc) * hc
    idx_h, idx_d = key.indexer_heads, key.indexer_head_dim
    out: list[RawTensor] = [("token_embd.weight", (H, V), -1, 1)]
    pattern = key.compress_pattern or "W" * L
    for i in range(L):
        b = f"blk.{i}."
        t: list[tuple] = [
            (b + "attn_norm.weight", (H,)), (b + "attn_sinks.weight", (nh,)),
            (b + "attn_q_a.weight", (H, q_lora)), (b + "attn_q_a_norm.weight", (q_lora,)),
            (b + "attn_q_b.weight", (q_lora, nh * hd)), (b + "attn_kv.weight", (H, hd)),
            (b + "attn_kv_a_norm.weight", (hd,)),
            (b + "attn_output_a.weight", (nh * hd // key.o_groups, key.o_groups * key.o_lora_rank)),
            (b + "attn_output_b.weight", (key.o_groups * key.o_lora_rank, H))]
        for part in ("attn", "ffn"):
            t += [(b + f"hc_{part}_fn.weight", (hc_dim, hc_mix)), (b + f"hc_{part}_base.weight", (hc_mix,)),
                  (b + f"hc_{part}_scale.weight", (3,))]
        kind = pattern[i]
        if kind != "W":
            ratio, coff = (4, 2) if kind == "C" else (128, 1)
            t += [(b + "attn_compressor_kv.weight", (H, coff * hd)), (b + "attn_compressor_gate.weight", (H, coff * hd)),
                  (b + "attn_compressor_ape.weight", (coff * hd, ratio)), (b + "attn_compressor_norm.weight", (hd,))]
            if kind == "C":
                t += [(b + "indexer.proj.weight", (H, idx_h)), (b + "indexer.attn_q_b.weight", (q_lora, idx_h * idx_d)),
                      (b + "indexer_compressor_kv.weight", (H, 2 * idx_d)),
                      (b + "indexer_compressor_gate.weight", (H, 2 * idx_d)),
                      (b + "indexer_compressor_ape.weight", (2 * idx_d, ratio)),
                      (b + "indexer_compressor_norm.weight", (idx_d,))]
        t += [(b + "ffn_gate_inp.weight", (H, E))]
        t += [(b + "ffn_gate_tid2eid.weight", (key.num_experts_per_tok, V))] if i < key.hash_layers \
            else [(b + "exp_probs_b.bias", (E,))]
        t += [(b + "ffn_norm.weight", (H,)),
              (b + "ffn_gate_exps.weight", (H, ff_exp, E), E), (b + "ffn_down_exps.weight", (ff_exp, H, E), E),
              (b + "ffn_up_exps.weight", (H, ff_exp, E), E)]
        sh = ff_exp * max(key.num_shared_experts, 0)
        if sh:
            t += [(b + "ffn_gate_shexp.weight", (H, sh)), (b + "ffn_down_shexp.weight", (sh, H)),
                  (b + "ffn_up_shexp.weight", (H, sh))]
        out += [(x[0], x[1], i, x[2] if len(x) > 2 else 1) for x in t]
    out += [("output_norm.weight", (H,), -1, 1), ("output.weight", (H, V), -1, 1),
            ("output_hc_fn.weight", (hc_dim, hc), -1, 1), ("output_hc_base.weight", (hc,), -1, 1),
            ("output_hc_scale.weight", (1,), -1, 1)]
    return tuple(out)


def _step35_inventory(key: ArchKey) -> tuple[RawTensor, ...]:
    """Step-3.5 / 3.7 as src/models/step35.cpp load_arch_tensors creates it (conversion/step3.py Step35Model writes
    it). Per layer il, with n_head(il) the sliding layers' attention_other_setting heads on S layers of
    attn_layer_types and num_attention_heads on F layers: attn_norm, attn_q_norm / attn_k_norm {head_dim}, attn_q
    {n_embd, head_dim x n_head(il)}, attn_k / attn_v {n_embd, head_dim x n_head_kv}, attn_output, the head-wise gate
    attn_gate {n_embd, n_head(il)} (self_attn.g_proj), ffn_norm; a dense MLP on the leading layers, else the router
    ffn_gate_inp, its bias exp_probs_b {n_expert} (moe.router_bias), the routed experts and the shared expert
    (share_expert_dim). Layers >= num_layers are the MTP blocks (load_block_mtp): the same attention (their
    layer_types entry; full_attention where the config lists none), a dense MLP (they are not in moe_layers_enum:
    a published Step-3.7-Flash MTP layer holds 17 tensors, e.g. the tcclaviger/Step-3.7-Flash-240REAP card's 51 for
    three), eh_proj {2 n_embd, n_embd}, enorm, hnorm and the layer's own head (transformer.shared_head.norm / .output
    -> nextn.shared_head_norm, nextn.shared_head_head {n_embd, n_vocab}). Not listed: rope_freqs.weight (the llama3
    rope-scaling table, {rotary dims / 2} F32, not a parameter)."""
    H, L, nh, nkv, hd, ff, V, E = (key.hidden_size, key.num_layers, key.num_attention_heads, key.num_kv_heads,
                                   key.head_dim, key.intermediate_size, key.vocab_size, key.num_experts)
    ff_exp, ff_sh, types = key.moe_intermediate_size, key.shared_expert_intermediate_size, key.attn_layer_types or ""
    out: list[RawTensor] = [("token_embd.weight", (H, V), -1, 1)]
    for i in range(L + key.nextn_layers):
        b = f"blk.{i}."
        heads = (key.swa_num_attention_heads or nh) if types[i:i + 1] == "S" else nh
        t: list[tuple] = [(b + "attn_norm.weight", (H,))]
        if key.qk_norm:
            t += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        t += [(b + "attn_q.weight", (H, heads * hd)), (b + "attn_k.weight", (H, nkv * hd)),
              (b + "attn_v.weight", (H, nkv * hd)), (b + "attn_output.weight", (heads * hd, H))]
        if key.head_wise_gate:
            t += [(b + "attn_gate.weight", (H, heads))]
        t += [(b + "ffn_norm.weight", (H,))]
        if i < L and is_moe_layer(key, i):
            t += [(b + "ffn_gate_inp.weight", (H, E)), (b + "exp_probs_b.bias", (E,)),
                  (b + "ffn_gate_exps.weight", (H, ff_exp, E), E), (b + "ffn_down_exps.weight", (ff_exp, H, E), E),
                  (b + "ffn_up_exps.weight", (H, ff_exp, E), E)]
            if ff_sh:
                t += [(b + "ffn_gate_shexp.weight", (H, ff_sh)), (b + "ffn_up_shexp.weight", (H, ff_sh)),
                      (b + "ffn_down_shexp.weight", (ff_sh, H))]
        else:
            t += [(b + "ffn_gate.weight", (H, ff)), (b + "ffn_down.weight", (ff, H)), (b + "ffn_up.weight", (H, ff))]
        if i >= L:
            t += [(b + "nextn.eh_proj.weight", (2 * H, H)), (b + "nextn.enorm.weight", (H,)),
                  (b + "nextn.hnorm.weight", (H,)), (b + "nextn.shared_head_head.weight", (H, V)),
                  (b + "nextn.shared_head_norm.weight", (H,))]
        out += [(x[0], x[1], i, x[2] if len(x) > 2 else 1) for x in t]
    out += [("output_norm.weight", (H,), -1, 1)]
    if not key.tie_word_embeddings:
        out += [("output.weight", (H, V), -1, 1)]
    return tuple(out)


# src/models/step35.cpp load_block_mtp: of an MTP block only the tensors created with mtp_flags are TENSOR_SKIP
# without load_mtp (llama_model_default_params leaves it false); the ones created TENSOR_NOT_REQUIRED -- q/k norms, the
# attention gate, the dense MLP, the layer's own head -- are loaded (measured: the CPU model buffer of a synthetic
# cut is the file less exactly these, tests/probes/test_synthetic.py test_step35_cut_caches_and_weights_are_llama_cpps)
_STEP35_MTP_SKIPPED = ("attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                       "ffn_norm.weight", "nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight")


def mtp_tensor_skipped(gguf_architecture: str, name: str) -> bool:
    """Whether llama.cpp leaves an MTP-block tensor (blk.{i >= num_layers}.*) unloaded without load_mtp: every one on
    qwen3next / qwen35 / nemotron-h / deepseek32 / glm-dsa / exaone4 (mtp_flags on the whole block), only the
    _STEP35_MTP_SKIPPED ones on step35, all but the FFN on hy_v3: src/models/hy-v3.cpp creates the block's attention,
    norms and nextn.* tensors with the skip flags but its FFN (dense or router, exp_probs_b, routed and shared experts)
    with TENSOR_NOT_REQUIRED, so those load without load_mtp (tests/probes/test_synthetic.py
    test_hy_v3_cut_caches_and_weights_are_llama_cpps)."""
    part = name.split(".", 2)[-1]
    if gguf_architecture == "step35":
        return part in _STEP35_MTP_SKIPPED
    if gguf_architecture == "hy_v3":
        return not ((part.startswith("ffn_") and not part.startswith("ffn_norm")) or part.startswith("exp_probs_b"))
    return True


def _qwen3next_block(key: ArchKey, i: int, b: str) -> list[tuple]:
    """One Qwen3-Next / Qwen3.5 block. Qwen3.5 (src/models/qwen35.cpp, qwen35moe.cpp) differs from Qwen3-Next in
    the DeltaNet gates (ssm_beta and ssm_alpha {n_embd, n_v_heads} in place of the fused ssm_ba) and, for the dense
    qwen35, a plain gated MLP in place of the MoE block; its MTP block is the same full-attention block plus eh_proj,
    enorm, hnorm and shared_head_norm.

    Qwen3-Next as convert_hf_to_gguf.py (conversion/qwen.py Qwen3NextModel) writes it and
    src/models/qwen3next.cpp loads it: full attention with a gated q (attn_q is 2 x n_head x head_dim wide) every
    full_attention_interval-th layer, Gated DeltaNet layers otherwise (attn_qkv + attn_gate from in_proj_qkvz,
    ssm_conv1d, ssm_dt / ssm_a per value head, ssm_ba from in_proj_ba, ssm_norm, ssm_out), an MoE block
    with a gated shared expert in every layer. Layers >= num_layers are the MTP (NextN) blocks the converter keeps by
    default: a full-attention block plus eh_proj, enorm, hnorm and shared_head_norm."""
    H, nh, nkv, hd, E = key.hidden_size, key.num_attention_heads, key.num_kv_heads, key.head_dim, key.num_experts
    ff_exp, ff_sh = key.moe_intermediate_size, key.shared_expert_intermediate_size
    mtp = i >= key.num_layers
    t: list[tuple] = [(b + "attn_norm.weight", (H,)), (b + "post_attention_norm.weight", (H,))]
    if mtp or (i + 1) % key.full_attention_interval == 0:
        t += [(b + "attn_q.weight", (H, 2 * nh * hd)), (b + "attn_k.weight", (H, nkv * hd)),
              (b + "attn_v.weight", (H, nkv * hd)), (b + "attn_output.weight", (nh * hd, H)),
              (b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
    else:
        key_dim, value_dim = key.linear_key_head_dim * key.linear_num_key_heads, \
            key.linear_value_head_dim * key.linear_num_value_heads
        t += [(b + "attn_qkv.weight", (H, 2 * key_dim + value_dim)), (b + "attn_gate.weight", (H, value_dim)),
              (b + "ssm_conv1d.weight", (key.linear_conv_kernel, 2 * key_dim + value_dim)),
              (b + "ssm_dt.bias", (key.linear_num_value_heads,)), (b + "ssm_a", (key.linear_num_value_heads,))]
        if key.gguf_arch == "qwen3next":
            t += [(b + "ssm_ba.weight", (H, 2 * key.linear_num_value_heads))]
        else:
            t += [(b + "ssm_beta.weight", (H, key.linear_num_value_heads)),
                  (b + "ssm_alpha.weight", (H, key.linear_num_value_heads))]
        t += [(b + "ssm_norm.weight", (key.linear_value_head_dim,)), (b + "ssm_out.weight", (value_dim, H))]
    if not E:  # qwen35: dense gated MLP
        t += [(b + "ffn_gate.weight", (H, key.intermediate_size)), (b + "ffn_up.weight", (H, key.intermediate_size)),
              (b + "ffn_down.weight", (key.intermediate_size, H))]
    else:
        t += [(b + "ffn_gate_inp.weight", (H, E)), (b + "ffn_gate_exps.weight", (H, ff_exp, E), E),
          (b + "ffn_up_exps.weight", (H, ff_exp, E), E), (b + "ffn_down_exps.weight", (ff_exp, H, E), E),
          (b + "ffn_gate_inp_shexp.weight", (H,)), (b + "ffn_gate_shexp.weight", (H, ff_sh)),
          (b + "ffn_up_shexp.weight", (H, ff_sh)), (b + "ffn_down_shexp.weight", (ff_sh, H))]
    if mtp:
        t += [(b + "nextn.eh_proj.weight", (2 * H, H)), (b + "nextn.enorm.weight", (H,)),
              (b + "nextn.hnorm.weight", (H,)), (b + "nextn.shared_head_norm.weight", (H,))]
    return t


def _nemotron_h_block(key: ArchKey, i: int, b: str) -> list[tuple]:
    """One Nemotron-H block as src/models/nemotron-h.cpp loads it (conversion/nemotron.py NemotronHModel writes it):
    every block is one attn_norm and ONE mixer by the layer pattern --
    M: Mamba-2 (ssm_in {n_embd, 2 d_inner + 2 n_group d_state + n_head}, ssm_conv1d {d_conv, d_inner + 2 n_group
       d_state} and its bias, ssm_dt.bias / ssm_a / ssm_d per head, ssm_norm {d_inner / n_group, n_group}, ssm_out);
    *: attention (attn_q / k / v / output, no bias, no q/k norm);
    -: a relu^2 MLP without gate (ffn_up, ffn_down);
    E: MoE: router ffn_gate_inp + its bias ffn_exp_probs_b, ungated routed experts (ffn_up_exps / ffn_down_exps; with
       a latent size, ffn_latent_down / ffn_latent_up around them and the experts moe_latent_size wide), an ungated
       shared expert (ffn_up_shexp / ffn_down_shexp).
    Blocks after the trunk are the MTP head (Nemotron-3-Super): eh_proj, enorm, hnorm, shared_head_norm, an attention
    sub-layer and an MoE sub-layer with attn_post_norm between them."""
    H, nh, nkv, hd, E = key.hidden_size, key.num_attention_heads, key.num_kv_heads, key.head_dim, key.num_experts
    d_state, n_group = key.linear_key_head_dim, key.linear_num_key_heads
    n_head, d_inner = key.linear_num_value_heads, key.linear_num_value_heads * key.linear_value_head_dim
    mtp = i >= key.num_layers
    kind = "*E" if mtp else key.layer_pattern[i]
    t: list[tuple] = []
    if mtp:
        t += [(b + "nextn.enorm.weight", (H,)), (b + "nextn.hnorm.weight", (H,)),
              (b + "nextn.eh_proj.weight", (2 * H, H)), (b + "nextn.shared_head_norm.weight", (H,))]
    t += [(b + "attn_norm.weight", (H,))]
    if "M" in kind:
        conv = d_inner + 2 * n_group * d_state
        t += [(b + "ssm_in.weight", (H, 2 * d_inner + 2 * n_group * d_state + n_head)),
              (b + "ssm_conv1d.weight", (key.linear_conv_kernel, conv)), (b + "ssm_conv1d.bias", (conv,)),
              (b + "ssm_dt.bias", (n_head,)), (b + "ssm_a", (1, n_head)), (b + "ssm_d", (1, n_head)),
              (b + "ssm_norm.weight", (d_inner // n_group, n_group)), (b + "ssm_out.weight", (d_inner, H))]
    if "*" in kind:
        t += [(b + "attn_q.weight", (H, nh * hd)), (b + "attn_k.weight", (H, nkv * hd)),
              (b + "attn_v.weight", (H, nkv * hd)), (b + "attn_output.weight", (nh * hd, H))]
    if "-" in kind:
        ff = key.intermediate_size
        t += [(b + "ffn_up.weight", (H, ff)), (b + "ffn_down.weight", (ff, H))]
    if "E" in kind:
        if mtp:
            t += [(b + "post_attention_norm.weight", (H,))]
        lat = key.moe_latent_size or H
        ff_exp, ff_sh = key.moe_intermediate_size, key.shared_expert_intermediate_size
        t += [(b + "ffn_gate_inp.weight", (H, E)), (b + "exp_probs_b.bias", (E,))]
        if key.moe_latent_size:
            t += [(b + "ffn_latent_down.weight", (H, lat)), (b + "ffn_latent_up.weight", (lat, H))]
        t += [(b + "ffn_down_exps.weight", (ff_exp, lat, E), E), (b + "ffn_up_exps.weight", (lat, ff_exp, E), E),
              (b + "ffn_down_shexp.weight", (ff_sh, H)), (b + "ffn_up_shexp.weight", (H, ff_sh))]
    return t


def _gemma4_inventory(key: ArchKey) -> tuple[RawTensor, ...]:
    """Gemma-4 tensors as src/models/gemma4.cpp load_arch_tensors creates them from a conversion/gemma.py GGUF.

    Per layer i (F = full attention, S = sliding, from attn_layer_types): head size full_head_dim on F layers and
    head_dim on S layers; KV heads full_num_kv_heads on F layers; layers i >= L - kv_shared_layers have no attn_k /
    attn_v / attn_k_norm (HF Gemma4TextAttention builds no k/v projections for them); F layers of an
    attention_k_eq_v model have no attn_v (HF v_proj None, gemma4.cpp wv TENSOR_NOT_REQUIRED). Every layer has the
    dense MLP (2 x intermediate_size wide on KV-shared layers with use_double_wide_mlp); MoE layers add the router
    (+ its scale), three norms, ffn_gate_up_exps and ffn_down_exps (+ the per-expert scale). The per-layer-embedding
    table per_layer_token_embd {ple x L, V} and its projections when per_layer_input_size > 0. Not listed: the
    rope_freqs table (not a parameter, {full_head_dim / 2} F32)."""
    H, L, nh, nkv, hd, ff, V = (key.hidden_size, key.num_layers, key.num_attention_heads, key.num_kv_heads,
                                key.head_dim, key.intermediate_size, key.vocab_size)
    E, ff_exp, ple, types = key.num_experts, key.moe_intermediate_size, key.per_layer_input_size, key.attn_layer_types
    out: list[RawTensor] = [("token_embd.weight", (H, V), -1, 1)]
    if ple:
        out += [("per_layer_token_embd.weight", (ple * L, V), -1, 1), ("per_layer_model_proj.weight", (H, ple * L), -1, 1),
                ("per_layer_proj_norm.weight", (ple,), -1, 1)]
    first_shared = L - key.kv_shared_layers
    for i in range(L):
        b = f"blk.{i}."
        full = types[i] == "F"
        d = key.full_head_dim if full else hd
        kv = (key.full_num_kv_heads or nkv) if full else nkv
        has_kv = i < first_shared
        t: list[tuple] = [(b + "attn_norm.weight", (H,)), (b + "attn_q.weight", (H, nh * d))]
        if has_kv:
            t += [(b + "attn_k.weight", (H, kv * d))]
            if not (full and key.attention_k_eq_v):
                t += [(b + "attn_v.weight", (H, kv * d))]
        t += [(b + "attn_output.weight", (nh * d, H)), (b + "attn_q_norm.weight", (d,))]
        if has_kv:
            t += [(b + "attn_k_norm.weight", (d,))]
        t += [(b + "post_attention_norm.weight", (H,)), (b + "layer_output_scale.weight", (1,))]
        f = ff * 2 if key.double_wide_mlp and not has_kv else ff
        t += [(b + "ffn_norm.weight", (H,)), (b + "ffn_gate.weight", (H, f)), (b + "ffn_up.weight", (H, f)),
              (b + "ffn_down.weight", (f, H)), (b + "post_ffw_norm.weight", (H,))]
        if E:
            t += [(b + "ffn_gate_inp.weight", (H, E)), (b + "ffn_gate_inp.scale", (H,)),
                  (b + "pre_ffw_norm_2.weight", (H,)), (b + "post_ffw_norm_1.weight", (H,)),
                  (b + "post_ffw_norm_2.weight", (H,)),
                  (b + "ffn_gate_up_exps.weight", (H, 2 * ff_exp, E), E), (b + "ffn_down_exps.weight", (ff_exp, H, E), E),
                  (b + "ffn_down_exps.scale", (E,))]
        if ple:
            t += [(b + "inp_gate.weight", (H, ple)), (b + "proj.weight", (ple, H)), (b + "post_norm.weight", (H,))]
        out += [(x[0], x[1], i, x[2] if len(x) > 2 else 1) for x in t]
    out.append(("output_norm.weight", (H,), -1, 1))
    if not key.tie_word_embeddings:
        out.append(("output.weight", (H, V), -1, 1))
    return tuple(out)


def _lfm2_inventory(key: ArchKey) -> tuple[RawTensor, ...]:
    """LFM2 as src/models/lfm2.cpp loads it: per layer attn_norm (the operator norm), ffn_norm and a gated MLP; a
    conv layer has shortconv.conv {L_cache, n_embd}, shortconv.in_proj {n_embd, 3 n_embd} and shortconv.out_proj; an
    attention layer q / k / v / output with per-head q / k norms. The final norm is named token_embd_norm (llama.cpp's
    LLM_TENSOR_OUTPUT_NORM_LFM2); the output projection is the tied embedding unless the checkpoint has its own."""
    H, nh, nkv, hd, ff, V = (key.hidden_size, key.num_attention_heads, key.num_kv_heads, key.head_dim,
                             key.intermediate_size, key.vocab_size)
    out: list[RawTensor] = [("token_embd.weight", (H, V), -1, 1)]
    for i, kind in enumerate(key.layer_pattern or ""):
        b = f"blk.{i}."
        t = [(b + "attn_norm.weight", (H,)), (b + "ffn_norm.weight", (H,)), (b + "ffn_gate.weight", (H, ff)),
             (b + "ffn_up.weight", (H, ff)), (b + "ffn_down.weight", (ff, H))]
        if kind == "*":
            t += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,)),
                  (b + "attn_q.weight", (H, nh * hd)), (b + "attn_k.weight", (H, nkv * hd)),
                  (b + "attn_v.weight", (H, nkv * hd)), (b + "attn_output.weight", (nh * hd, H))]
        else:
            t += [(b + "shortconv.conv.weight", (key.linear_conv_kernel, H)),
                  (b + "shortconv.in_proj.weight", (H, 3 * H)), (b + "shortconv.out_proj.weight", (H, H))]
        out += [(n, sh, i, 1) for n, sh in t]
    out.append(("token_embd_norm.weight", (H,), -1, 1))
    if not key.tie_word_embeddings:
        out.append(("output.weight", (H, V), -1, 1))
    return tuple(out)


def tensor_inventory(spec: ModelSpec) -> list[TensorInfo]:
    """Every weight tensor of the model as llama.cpp's GGUF names it, shapes in ggml order (ne0 first)."""
    return [TensorInfo.model_construct(name=n, shape=s, layer=None if layer < 0 else layer, expert_count=e)
            for n, s, layer, e in raw_inventory(spec)]


def is_parameter(name: str) -> bool:
    """False for tensors the GGUF converter adds that are not trained parameters (RoPE frequency tables)."""
    return not name.startswith(("rope_freqs", "rope_factors_"))


def param_counts(spec: ModelSpec) -> tuple[int, int]:
    """(total, active-per-token) parameter counts from the tensor inventory.

    Active = total minus the routed experts a token does not use: for every stacked expert tensor, only
    ``num_experts_per_tok`` of its ``num_experts`` slices count. Embeddings, attention, router, shared experts and
    norms are always active. For dense models active == total.
    """
    return _param_counts(arch_key(spec))


@lru_cache(maxsize=1024)
def _param_counts(key: ArchKey) -> tuple[int, int]:
    top_k = key.num_experts_per_tok
    total = active = 0
    for name, shape, _layer, experts in raw_inventory_of(key):
        if not is_parameter(name):
            continue
        n = 1
        for d in shape:
            n *= d
        total += n
        if name == "per_layer_token_embd.weight":
            continue  # Gemma-4 E-models: read as a gather (one row per token), not a matmul; outside "effective"
        active += n if experts <= 1 else n // experts * min(top_k, experts)
    return total, active


# ----------------------------------------------------------------------------------------------------------------
# GGUF header -> ModelSpec
# ----------------------------------------------------------------------------------------------------------------

class GgufTensor(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # schemas built on first use: cold start

    name: str
    shape: tuple[int, ...]  # ggml order (ne0 first)
    ggml_type: str  # "Q4_K", "F32", ...
    n_bytes: int
    offset: int  # from the start of the tensor data section


class GgufFileInfo(BaseModel):
    """What a GGUF header says about the file (nothing here comes from reading tensor data)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # schemas built on first use: cold start

    path: str
    file_bytes: int
    gguf_version: int
    architecture: str
    name: Optional[str] = None
    file_type: Optional[int] = None  # general.file_type (llama_ftype)
    file_type_name: Optional[str] = None  # "MOSTLY_Q4_K_M", ...
    alignment: int = 32
    data_offset: int  # bytes before the tensor data: header + metadata (tokenizer) + padding
    tensor_data_bytes: int  # sum of the tensors' own bytes
    tensor_count: int
    tensors: list[GgufTensor]

    @property
    def metadata_bytes(self) -> int:
        return self.data_offset


_GGUF_HINT = "give a complete .gguf file (re-download it if it was cut short)"


def read_gguf_header(path: str | os.PathLike) -> GgufFileInfo:
    """Parse a GGUF header (recommender.core.gguf_header: the metadata and tensor infos; tensor data is not read)."""
    return _read_gguf(path)[0]


def _read_gguf(path: str | os.PathLike) -> tuple[GgufFileInfo, Any]:
    """(GgufFileInfo, the GgufHeader it came from). Arrays outside ``tokenizer.*`` are kept (per-layer values)."""

    p = Path(path)
    if not p.is_file():
        raise UserError(f"no such GGUF file: {p}", hint="give the path of a .gguf file")
    size = p.stat().st_size
    try:
        import gguf  # noqa: PLC0415  (ggml type names and block sizes)
    except ImportError as e:  # pragma: no cover - gguf is a dependency
        raise UserError("the 'gguf' package is not installed", hint="pip install gguf") from e
    with open(p, "rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        raise UserError(f"{p.name} is not a GGUF file (magic {magic!r}, expected b'GGUF')",
                        hint="give a llama.cpp .gguf file")
    try:
        header = read_header(p, keep_arrays=lambda key: not key.startswith("tokenizer."))
        tensors = []
        for name, shape, type_id, offset in header.tensors:
            qtype = gguf.GGMLQuantizationType(type_id)
            block, type_bytes = gguf.GGML_QUANT_SIZES[qtype]
            n = 1
            for d in shape:
                n *= d
            tensors.append(GgufTensor(name=name, shape=tuple(shape), ggml_type=qtype.name,
                                      n_bytes=n // block * type_bytes, offset=offset))
    except Exception as e:  # noqa: BLE001 - any parse failure is a bad file
        reason = (str(e).splitlines() or [type(e).__name__])[0][:160]
        raise UserError(f"cannot read {p.name} as GGUF ({size:,} bytes): the file is truncated or malformed",
                        hint=f"re-download or re-convert it (the header reader said: {reason})") from None
    end = max((header.data_offset + t.offset + t.n_bytes for t in tensors), default=header.data_offset)
    if end > size:
        raise UserError(f"{p.name} is truncated: its header describes {end:,} bytes but the file has {size:,}",
                        hint=_GGUF_HINT)
    arch = header.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise UserError(f"{p.name}: GGUF header has no general.architecture", hint=_GGUF_HINT)
    ftype = header.get("general.file_type")
    ftype_name = None
    if isinstance(ftype, int):
        try:
            ftype_name = gguf.LlamaFileType(ftype).name
        except ValueError:
            ftype_name = None
    return GgufFileInfo(path=str(p), file_bytes=size, gguf_version=header.version, architecture=arch,
                        name=header.get("general.name"), file_type=ftype if isinstance(ftype, int) else None,
                        file_type_name=ftype_name, alignment=header.alignment,
                        data_offset=header.data_offset, tensor_data_bytes=sum(t.n_bytes for t in tensors),
                        tensor_count=len(tensors), tensors=tensors), header


def _hybrid_fields_from_gguf(arch: str, kv: Any, block_count: int, n_experts: int, fname: str) -> dict[str, Any]:
    """ModelSpec fields of a hybrid GGUF's recurrent layers, from the keys its converter writes: the ssm.* sizes
    (Qwen3-Next / Qwen3.5: conversion/qwen.py; Nemotron-H: conversion/mamba.py + nemotron.py), the MTP block count,
    and the layer kinds -- Qwen3-Next / Qwen3.5 by full_attention_interval (llama.cpp's default 4), Nemotron-H from the
    per-layer head_count_kv / feed_forward_length arrays (attention where kv heads > 0, MLP / MoE where ff > 0, Mamba-2
    where both are 0: src/models/nemotron-h.cpp load_arch_hparams). {} for other architectures."""
    if arch == "lfm2":  # conversion/lfm2.py: head_count_kv 0 on the conv layers, shortconv.l_cache
        kv_heads, l_cache = kv("attention.head_count_kv"), kv("shortconv.l_cache")
        if not isinstance(kv_heads, list) or len(kv_heads) != block_count or not isinstance(l_cache, int):
            raise UserError(f"{fname}: an LFM2 GGUF needs per-layer head_count_kv and shortconv.l_cache",
                            hint=_GGUF_HINT)
        return {"layer_pattern": "".join("*" if h else "C" for h in kv_heads), "linear_conv_kernel": l_cache}
    if arch == "step35":
        # conversion/step3.py Step35Model: per-block head_count and sliding_window_pattern (MTP blocks included)
        heads, swa = kv("attention.head_count"), kv("attention.sliding_window_pattern")
        if not isinstance(heads, list) or not isinstance(swa, list) or len(heads) != block_count \
                or len(swa) != block_count:
            raise UserError(f"{fname}: a step35 GGUF needs per-block attention.head_count and "
                            "attention.sliding_window_pattern", hint=_GGUF_HINT)
        types = "".join("S" if x else "F" for x in swa)
        full = {h for h, t in zip(heads, types) if t == "F"}
        windowed = {h for h, t in zip(heads, types) if t == "S"}
        if len(full) > 1 or len(windowed) > 1:
            raise UserError(f"{fname}: step35 head counts that differ within a layer type are not modelled",
                            hint=_GGUF_HINT)
        return {"attn_layer_types": types, "nextn_layers": int(kv("nextn_predict_layers", 0) or 0),
                "num_attention_heads": min(full or windowed), "swa_num_attention_heads": min(windowed or full)}
    if arch in DSA_ARCHS:
        # conversion/deepseek.py DeepseekV32Model / glm.py GlmMoeDsaModel: attention.indexer.* and nextn_predict_layers
        nextn = int(kv("nextn_predict_layers", 0) or 0)
        vals = {f: kv(f"attention.indexer.{k}") for f, k in (("indexer_heads", "head_count"),
                                                             ("indexer_head_dim", "key_length"),
                                                             ("indexer_top_k", "top_k"))}
        if not all(isinstance(v, int) and v > 0 for v in vals.values()):
            raise UserError(f"{fname}: a {arch} GGUF needs attention.indexer.head_count / key_length / top_k",
                            hint=_GGUF_HINT)
        types = kv("attention.indexer.types")
        trunk = block_count - nextn
        if isinstance(types, list) and len(types) >= trunk:
            pattern = "".join("F" if t else "S" for t in types[:trunk])
        elif arch == "glm-dsa" and int(kv("context_length", 0) or 0) >= 1 << 20:
            # glm-dsa.cpp load_arch_hparams: a GLM-5.2 file without the key gets GLM_5_2_DEFAULT_INDEXER_TYPES
            # (full on layers 0, 1 and every 4th from 2, shared between)
            pattern = "".join("F" if i < 2 or (i - 2) % 4 == 0 else "S" for i in range(trunk))
        else:
            pattern = "F" * trunk
        return {**vals, "indexer_pattern": pattern, "nextn_layers": nextn}
    if arch == "hy_v3":  # conversion/hunyuan.py HYV3Model: the appended MTP block(s), nextn_predict_layers
        nextn = int(kv("nextn_predict_layers", 0) or 0)
        return {"nextn_layers": nextn} if nextn else {}
    if arch not in ("qwen3next", "qwen35", "qwen35moe", "nemotron_h", "nemotron_h_moe"):
        return {}

    def num(key: str, default: Optional[int] = None) -> int:
        v = kv(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise UserError(f"{fname}: GGUF header lacks {arch}.{key}", hint=_GGUF_HINT)
        return v

    heads, inner = num("ssm.time_step_rank"), num("ssm.inner_size")
    nextn = num("nextn_predict_layers", 0)
    out: dict[str, Any] = {
        "linear_conv_kernel": num("ssm.conv_kernel"), "linear_key_head_dim": num("ssm.state_size"),
        "linear_num_key_heads": num("ssm.group_count"), "linear_num_value_heads": heads,
        "linear_value_head_dim": inner // heads if heads else 0, "nextn_layers": nextn}
    trunk = block_count - nextn
    if arch.startswith("qwen3"):
        out["full_attention_interval"] = num("full_attention_interval", 4) or 4
        return out
    kv_heads, ffs = kv("attention.head_count_kv"), kv("feed_forward_length")
    if not isinstance(kv_heads, list) or not isinstance(ffs, list) or len(kv_heads) < trunk or len(ffs) < trunk:
        raise UserError(f"{fname}: a Nemotron-H GGUF needs per-layer head_count_kv and feed_forward_length arrays",
                        hint=_GGUF_HINT)
    out["layer_pattern"] = "".join("*" if kv_heads[i] else ("E" if n_experts else "-") if ffs[i] else "M"
                                   for i in range(trunk))
    out["moe_latent_size"] = num("moe_latent_size", 0)
    return out


@guard_parse("the GGUF header")
def spec_from_gguf(path: str | os.PathLike) -> tuple[ModelSpec, GgufFileInfo]:
    """Read a .gguf header and return (ModelSpec, GgufFileInfo). Raises UserError on a bad / truncated file."""
    info, header = _read_gguf(path)
    p = Path(path)
    arch = info.architecture
    shapes = {t.name: t.shape for t in info.tensors}

    def kv(key: str, default: Any = None) -> Any:
        v = header.get(f"{arch}.{key}")
        return default if v is None else v

    def need_int(key: str) -> int:
        v = kv(key)
        if isinstance(v, list):  # per-layer arrays (e.g. head_count_kv on some archs): take the largest
            v = max(v) if v else None
        if not isinstance(v, int) or isinstance(v, bool):
            raise UserError(f"{p.name}: GGUF header lacks {arch}.{key}", hint=_GGUF_HINT)
        return v

    H = need_int("embedding_length")
    L = need_int("block_count")
    nh = need_int("attention.head_count")
    nkv_raw = kv("attention.head_count_kv", nh)
    nkv = max(nkv_raw) if isinstance(nkv_raw, list) and nkv_raw else int(nkv_raw)
    ctx = int(kv("context_length", 0) or 0)

    vocab = header.array_len("tokenizer.ggml.tokens") or int(kv("vocab_size", 0) or 0)
    if not vocab and "token_embd.weight" in shapes:
        vocab = shapes["token_embd.weight"][1]

    E = int(kv("expert_count", 0) or 0)
    top_k = int(kv("expert_used_count", 0) or 0) if E else 0
    ff = int(kv("feed_forward_length", 0) or 0) if not isinstance(kv("feed_forward_length"), list) \
        else max(kv("feed_forward_length"))
    ff_exp = int(kv("expert_feed_forward_length", 0) or 0)
    n_shared = int(kv("expert_shared_count", 0) or 0)
    ff_sh = int(kv("expert_shared_feed_forward_length", 0) or 0)
    first_dense = int(kv("leading_dense_block_count", 0) or 0)
    if arch == "hy_v3" and E:
        # conversion/hunyuan.py HYV3Model writes no leading_dense_block_count: src/models/hy-v3.cpp tells the dense
        # layers by their tensors (no ffn_gate_inp)
        first_dense = next((i for i in range(L) if f"blk.{i}.ffn_gate_inp.weight" in shapes), 0)
    if E:
        if not ff_exp:
            ff_exp = shapes.get(f"blk.{first_dense}.ffn_down_exps.weight", (ff,))[0] or ff
        if n_shared and not ff_sh:
            ff_sh = shapes.get(f"blk.{first_dense}.ffn_down_shexp.weight", (0,))[0] or ff_exp * n_shared
        if not n_shared and f"blk.{first_dense}.ffn_down_shexp.weight" in shapes:
            n_shared = 1
            ff_sh = shapes[f"blk.{first_dense}.ffn_down_shexp.weight"][0]
        elif n_shared and f"blk.{first_dense}.ffn_down_shexp.weight" in shapes:
            ff_sh = shapes[f"blk.{first_dense}.ffn_down_shexp.weight"][0]
        if not first_dense:
            ff = 0

    kv_lora = int(kv("attention.kv_lora_rank", 0) or 0)
    q_lora = int(kv("attention.q_lora_rank", 0) or 0) if kv_lora else 0
    key_len = int(kv("attention.key_length", 0) or 0)
    val_len = int(kv("attention.value_length", 0) or 0)
    qk_rope = qk_nope = v_hd = 0
    if kv_lora:
        # GGUFs written for MLA absorption (llama.cpp 2025+) store the per-head sizes in key_length_mla /
        # value_length_mla and the latent sizes (kv_lora_rank + rope, kv_lora_rank) in key_length / value_length.
        key_mla = int(kv("attention.key_length_mla", 0) or 0)
        val_mla = int(kv("attention.value_length_mla", 0) or 0)
        qk_rope = int(kv("rope.dimension_count", 0) or 0)
        qk_nope = ((key_mla or key_len) - qk_rope) if (key_mla or key_len) else 0
        v_hd = val_mla or val_len
        head_dim = H // nh
    else:
        head_dim = key_len or H // nh

    window = kv("attention.sliding_window")
    window = int(window) if isinstance(window, int) and window > 0 else None
    n_swa = 0
    if window:
        pattern = kv("attention.sliding_window_pattern")
        if isinstance(pattern, list):
            n_swa = sum(1 for x in pattern if x)
        elif arch == "gemma2":
            n_swa = (L + 1) // 2
        elif arch == "gemma3":
            pat = int(pattern) if isinstance(pattern, int) and pattern > 0 else 6
            n_swa = L - L // pat
        else:
            n_swa = L
        if ctx and window >= ctx:
            window, n_swa = None, 0

    hybrid = _hybrid_fields_from_gguf(arch, kv, L, E, p.name)
    if hybrid:
        L = L - hybrid.get("nextn_layers", 0)  # block_count counts the MTP blocks the converter appends
    if arch == "step35":
        nh = hybrid.pop("num_attention_heads")
        if hybrid["swa_num_attention_heads"] == nh:
            hybrid["swa_num_attention_heads"] = 0
        n_swa = hybrid["attn_layer_types"][:L].count("S") if window else 0
        hybrid["head_wise_gate"] = "blk.0.attn_gate.weight" in shapes
        head_dim = key_len or H // nh
        if arch.startswith("nemotron_h") and E:
            ff = ff if "-" in hybrid["layer_pattern"] else 0
    blk0 = {n[len("blk.0."):] for n in shapes if n.startswith("blk.0.")}
    attention_bias = "attn_q.bias" in blk0 or "attn_qkv.bias" in blk0
    qk_norm = "attn_q_norm.weight" in blk0
    extra_norms = sum(1 for n in ("post_attention_norm.weight", "post_ffw_norm.weight") if n in blk0)
    if not ff and not E:
        ff = shapes.get("blk.0.ffn_down.weight", (0,))[0]
    model_type = _MODEL_TYPE_OF_GGUF_ARCH.get(arch, arch)
    name = info.name or p.stem
    spec = ModelSpec(
        id=name, architecture=arch, model_type=model_type, hidden_size=H, num_layers=L, num_attention_heads=nh,
        num_kv_heads=nkv, head_dim=head_dim, intermediate_size=ff, vocab_size=vocab, max_position_embeddings=ctx,
        tie_word_embeddings="output.weight" not in shapes, torch_dtype=None, attention_bias=attention_bias,
        qk_norm=qk_norm, extra_norms_per_layer=extra_norms, sliding_window=window, num_swa_layers=n_swa,
        num_experts=E, num_experts_per_tok=top_k, moe_intermediate_size=ff_exp if E else 0,
        num_shared_experts=n_shared, shared_expert_intermediate_size=ff_sh, first_k_dense_layers=first_dense,
        kv_lora_rank=kv_lora, q_lora_rank=q_lora, qk_rope_head_dim=qk_rope, qk_nope_head_dim=qk_nope,
        v_head_dim=v_hd, **hybrid, source=str(p.resolve()), source_kind="gguf header",
        notes=f"GGUF file type {info.file_type_name or info.file_type}; general.name {info.name!r}",
    )
    # parameters straight from the header's tensor shapes (exact for this file)
    total = active = 0
    for t in info.tensors:
        if not is_parameter(t.name):
            continue
        n = 1
        for d in t.shape:
            n *= d
        total += n
        if "_exps." in t.name and len(t.shape) >= 2 and E and t.shape[-1] == E:
            active += n // E * min(top_k, E)
        else:
            active += n
    return spec.model_copy(update={"params_total": total, "params_active": active}), info
