"""Quantization formats and the bytes a model's weights take in each, tensor by tensor.

Pure and fast (no numpy, no gguf import): the per-tensor rules run on the plain-tuple inventory from
``recommender.model.arch.raw_inventory`` and results are cached per (architecture, quantization).

GGUF sizes reproduce llama.cpp's ``llama-quantize``: the per-tensor type choice of ``llama_tensor_get_type``
(ggml-org/llama.cpp, ``src/llama-quant.cpp``) and the ggml block sizes (``ggml/src/ggml-common.h``), on a source
GGUF made by ``convert_hf_to_gguf.py`` (1-D tensors and the MoE router kept in F32). AWQ / GPTQ / FP8 sizes follow the
tensors those checkpoints store (see the layout functions below).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional


from recommender.core.engines import engine_spec, engines_running
from recommender.core.errors import UserError
from recommender.core.fuzzy import resolve
from recommender.core.records import ModelSpec, QuantSpec
from recommender.model.arch import DSA_ARCHS, arch_key, raw_inventory_of

RULES_VERSION = "q2"  # bump when a size rule changes (the catalog digest includes it)

# ----------------------------------------------------------------------------------------------------------------
# Catalog quantizations
# ----------------------------------------------------------------------------------------------------------------
# The table's records are literals of this file: built without validation at import (cold start), and validated by
# tests/model/test_quant.py (test_quant_table_validates). A quantization is its record: everything else that lists
# quantizations (the GGUF ftypes below, the calibration's kernel classes, the quality build's cost rows) reads it.
# The engines of a quantization are those whose record (recommender.core.engines.ENGINE_SPECS) runs its family.


def _spec(**kw) -> QuantSpec:
    return QuantSpec.trusted(engines=engines_running(kw["family"]), **kw)


# (kernel class, quality family) of the GGUF kinds: the kernels that read their weights alike
# (recommender.predict.calibrated fits one coefficient per kernel class) and the family label of their row in
# sources/quality/quant_quality.csv (the cost fit groups llama.cpp's KLD ladder by it)
K_QUANT = ("kquant", "gguf k-quant")
I_QUANT = ("iquant", "gguf i-quant")
LEGACY = ("legacy", "gguf legacy")


def _gguf(name: str, bits: float, ggml_type: str, kind: tuple[str, str], desc: str,
          file_type: Optional[str] = None) -> QuantSpec:
    return _spec(name=name, family="gguf", nominal_bits=bits, description=desc,
                 kernel_class=kind[0], quality_family=kind[1], ggml_type=ggml_type,
                 gguf_file_type=file_type or f"MOSTLY_{name}")


# GGUF file types: llama-quantize's ftypes (tools/quantize/quantize.cpp QUANT_OPTIONS of the llama.cpp vendored in
# llama-cpp-python 0.3.36); nominal bits = bits per weight of the default tensor type (ggml block bytes x 8 / block
# elements). The size of a real file comes from the per-tensor rules below, not from these. ggml_type: the ftype's
# default tensor type (src/llama-quant.cpp, llama_ftype_get_default_type); gguf_file_type: gguf-py's LlamaFileType
# name (general.file_type; MXFP4 is LLAMA_FTYPE_MOSTLY_MXFP4_MOE).
QUANTS: dict[str, QuantSpec] = {q.name: q for q in (
    _spec(name="F16", family="float", nominal_bits=16,
          description="IEEE half precision, unquantized",
          kernel_class="float", quality_family="float", ggml_type="F16", gguf_file_type="MOSTLY_F16"),
    _spec(name="BF16", family="float", nominal_bits=16,
          description="bfloat16, unquantized (the dtype most checkpoints ship in)",
          kernel_class="float", quality_family="float", ggml_type="BF16", gguf_file_type="MOSTLY_BF16"),
    _gguf("Q8_0", 8.5, "Q8_0", ("q8_0", LEGACY[1]), "GGUF 8-bit, blocks of 32 with an fp16 scale"),
    _gguf("Q6_K", 6.5625, "Q6_K", K_QUANT, "GGUF 6-bit k-quant (256-element super-blocks)"),
    _gguf("Q5_K_M", 5.5, "Q5_K", K_QUANT,
          "GGUF 5-bit k-quant mix: Q5_K, with Q6_K for output and half the attn_v / ffn_down"),
    _gguf("Q5_K_S", 5.5, "Q5_K", K_QUANT, "GGUF 5-bit k-quant: Q5_K, Q6_K output"),
    _gguf("Q4_K_M", 4.5, "Q4_K", K_QUANT,
          "GGUF 4-bit k-quant mix: Q4_K, with Q6_K for output and half the attn_v / ffn_down"),
    _gguf("Q4_K_S", 4.5, "Q4_K", K_QUANT,
          "GGUF 4-bit k-quant: Q4_K, Q5_K for the first attn_v / first eighth of ffn_down"),
    _gguf("Q3_K_L", 3.4375, "Q3_K", K_QUANT, "GGUF 3-bit k-quant mix: Q3_K, Q5_K attn_v / attn_output / ffn_down"),
    _gguf("Q3_K_M", 3.4375, "Q3_K", K_QUANT,
          "GGUF 3-bit k-quant mix: Q3_K, Q4_K/Q5_K attn_v, Q4_K attn_output / most ffn_down"),
    _gguf("Q3_K_S", 3.4375, "Q3_K", K_QUANT, "GGUF 3-bit k-quant: Q3_K throughout, Q6_K output"),
    _gguf("Q2_K", 2.625, "Q2_K", K_QUANT,
          "GGUF 2-bit k-quant mix: Q2_K, Q3_K ffn_down / attn_output, Q3_K/Q4_K attn_v"),
    _gguf("Q5_1", 6.0, "Q5_1", LEGACY, "GGUF legacy 5-bit, blocks of 32 with fp16 scale and min"),
    _gguf("Q5_0", 5.5, "Q5_0", LEGACY, "GGUF legacy 5-bit, blocks of 32 with an fp16 scale"),
    _gguf("Q4_1", 5.0, "Q4_1", LEGACY, "GGUF legacy 4-bit, blocks of 32 with fp16 scale and min"),
    _gguf("Q4_0", 4.5, "Q4_0", LEGACY, "GGUF legacy 4-bit, blocks of 32 with an fp16 scale"),
    _gguf("IQ4_XS", 4.25, "IQ4_XS", I_QUANT, "GGUF i-quant 4.25 bpw (non-linear grid, 256-element super-blocks)"),
    _gguf("IQ4_NL", 4.5, "IQ4_NL", I_QUANT, "GGUF i-quant 4.5 bpw non-linear, blocks of 32"),
    _gguf("IQ3_M", 3.4375, "IQ3_S", I_QUANT,
          "GGUF i-quant 3-bit mix: IQ3_S, Q4_K attn_v / attn_output / first ffn_down"),
    _gguf("IQ3_S", 3.4375, "IQ3_S", I_QUANT, "GGUF i-quant 3.44 bpw"),
    _gguf("IQ3_XS", 3.4375, "IQ3_S", I_QUANT,
          "GGUF i-quant 3-bit mix: IQ3_S with IQ3_XXS attn_q / attn_k / middle ffn_gate, ffn_up"),
    _gguf("IQ3_XXS", 3.0625, "IQ3_XXS", I_QUANT, "GGUF i-quant 3.06 bpw (needs an importance matrix)"),
    _gguf("IQ2_M", 2.5625, "IQ2_S", I_QUANT, "GGUF i-quant 2-bit mix: IQ2_S (needs an importance matrix)"),
    _gguf("IQ2_S", 2.3125, "IQ2_XS", I_QUANT, "GGUF i-quant 2-bit mix: IQ2_XS (needs an importance matrix)"),
    _gguf("IQ2_XS", 2.3125, "IQ2_XS", I_QUANT, "GGUF i-quant 2.31 bpw (needs an importance matrix)"),
    _gguf("IQ2_XXS", 2.0625, "IQ2_XXS", I_QUANT, "GGUF i-quant 2.06 bpw (needs an importance matrix)"),
    _gguf("IQ1_M", 1.75, "IQ1_M", I_QUANT, "GGUF i-quant 1.75 bpw (needs an importance matrix)"),
    _gguf("IQ1_S", 1.5625, "IQ1_S", I_QUANT, "GGUF i-quant 1.56 bpw (needs an importance matrix)"),
    _gguf("MXFP4", 4.25, "MXFP4", ("mxfp4", "gguf / vLLM microscaling fp4"),
          "GGUF MXFP4_MOE: routed-expert tensors in MXFP4 (OCP microscaling, blocks of 32 with an E8M0 scale), "
          "every other quantizable tensor Q8_0 (gpt-oss's native format)", file_type="MOSTLY_MXFP4_MOE"),
    # kernel class of the formats below: their own (no other format shares their kernels)
    _spec(name="AWQ-4bit", family="awq", nominal_bits=4.0,
          description="AutoAWQ GEMM, 4-bit weights, group size 128, fp16 scales and packed zeros",
          kernel_class="awq-4bit", quality_family="vLLM/transformers AWQ int4 g128"),
    _spec(name="GPTQ-4bit", family="gptq", nominal_bits=4.0,
          description="GPTQ 4-bit, group size 128, fp16 scales, packed zeros and g_idx",
          kernel_class="gptq-4bit", quality_family="vLLM/transformers GPTQ int4 g128"),
    _spec(name="GPTQ-8bit", family="gptq", nominal_bits=8.0,
          description="GPTQ 8-bit, group size 128, fp16 scales, packed zeros and g_idx",
          kernel_class="gptq-8bit", quality_family="vLLM/transformers GPTQ int8 g128"),
    _spec(name="FP8", family="fp8", nominal_bits=8.0,
          description="FP8 E4M3 weights with per-output-channel scales (llm-compressor FP8_DYNAMIC)",
          kernel_class="fp8", quality_family="vLLM W8A8 fp8"),
    _spec(name="INT8-W8A8", family="int8", nominal_bits=8.0,
          description="INT8 weights with per-output-channel scales, dynamic per-token INT8 activations "
                      "(llm-compressor W8A8 / compressed-tensors)",
          kernel_class="int8-w8a8", quality_family="vLLM W8A8 int8"),
    _spec(name="BNB-NF4", family="bnb", nominal_bits=4.5,
          description="bitsandbytes 4-bit NormalFloat, blocks of 64 with an fp32 absmax (no double quant)",
          kernel_class="bnb-nf4", quality_family="transformers bitsandbytes"),
    _spec(name="BNB-INT8", family="bnb", nominal_bits=8.0,
          description="bitsandbytes LLM.int8(): int8 weights with an fp32 scale per output row",
          kernel_class="bnb-int8", quality_family="transformers bitsandbytes"),
)}
CATALOG_QUANTS: tuple[str, ...] = tuple(QUANTS)

QUANT_ALIASES = {
    "fp16": "F16", "float16": "F16", "half": "F16", "f16": "F16",
    "bfloat16": "BF16", "bf16": "BF16",
    "q8": "Q8_0", "q8-0": "Q8_0", "int8-gguf": "Q8_0",
    "q6": "Q6_K", "q6k": "Q6_K", "q6-k": "Q6_K",
    # llama-quantize accepts Q4_K / Q5_K / Q3_K as aliases of Q4_K_M / Q5_K_M / Q3_K_M (tools/quantize/quantize.cpp)
    "q5_k": "Q5_K_M", "q5km": "Q5_K_M", "q5-k-m": "Q5_K_M", "q5": "Q5_K_M", "q5ks": "Q5_K_S",
    "q4_k": "Q4_K_M", "q4km": "Q4_K_M", "q4-k-m": "Q4_K_M", "q4": "Q4_K_M", "q4ks": "Q4_K_S",
    "q3_k": "Q3_K_M", "q3km": "Q3_K_M", "q3": "Q3_K_M", "q3ks": "Q3_K_S", "q3kl": "Q3_K_L", "q2": "Q2_K",
    "q4-0": "Q4_0", "q4-1": "Q4_1", "q5-0": "Q5_0", "q5-1": "Q5_1",
    "mxfp4_moe": "MXFP4", "mxfp4-moe": "MXFP4",
    "awq": "AWQ-4bit", "awq4": "AWQ-4bit", "awq-int4": "AWQ-4bit", "awq_4bit": "AWQ-4bit", "awq-w4a16": "AWQ-4bit",
    "gptq": "GPTQ-4bit", "gptq4": "GPTQ-4bit", "gptq-int4": "GPTQ-4bit", "gptq_4bit": "GPTQ-4bit",
    "gptq8": "GPTQ-8bit", "gptq-int8": "GPTQ-8bit", "gptq_8bit": "GPTQ-8bit",
    "fp8": "FP8", "f8": "FP8", "fp8-dynamic": "FP8", "w8a8-fp8": "FP8", "fp8_e4m3": "FP8",
    "int8": "INT8-W8A8", "w8a8": "INT8-W8A8", "w8a8-int8": "INT8-W8A8", "int8_w8a8": "INT8-W8A8",
    "nf4": "BNB-NF4", "bnb-4bit": "BNB-NF4", "bnb4": "BNB-NF4", "bitsandbytes-nf4": "BNB-NF4",
    "bnb-8bit": "BNB-INT8", "bnb8": "BNB-INT8", "llm.int8": "BNB-INT8", "bitsandbytes-int8": "BNB-INT8",
}


def resolve_quant(name: str) -> str:
    """Canonical quantization name for a user's spelling ('q4_k_m', 'fp16', 'awq' ...); UserError if unknown."""

    return resolve(name, QUANTS, "quantization", aliases=QUANT_ALIASES,
                   hint_cmd=f"quantizations: {', '.join(QUANTS)}")


def get_quant(name: str) -> QuantSpec:
    return QUANTS[resolve_quant(name)]


# ----------------------------------------------------------------------------------------------------------------
# ggml storage types: (elements per block, bytes per block)
# Source: ggml-org/llama.cpp ggml/src/ggml-common.h (block_* structs and their static_asserts); the same numbers are
# gguf-py's GGML_QUANT_SIZES (gguf/constants.py), which tests/model/test_quant.py checks them against.
# ----------------------------------------------------------------------------------------------------------------
QK4_0 = 32  # ggml-common.h #define QK4_0 32 (also QK4_1, QK5_0, QK5_1, QK8_0)
QK_K = 256  # ggml-common.h #define QK_K 256 (k-quant super-block)
F32_BYTES = 4
INT32_BYTES_GGML = 4  # GGML_TYPE_I32 (DeepSeek-V4's token-id -> expert-id table)
F16_BYTES = 2
BF16_BYTES = 2
Q4_0_BLOCK_BYTES = 18  # block_q4_0: fp16 d + 32/2 nibbles
Q4_1_BLOCK_BYTES = 20  # block_q4_1: fp16 d, fp16 m + 32/2 nibbles
Q5_0_BLOCK_BYTES = 22  # block_q5_0: fp16 d + uint32 qh + 32/2 nibbles
Q5_1_BLOCK_BYTES = 24  # block_q5_1: fp16 d, fp16 m + uint32 qh + 32/2
Q8_0_BLOCK_BYTES = 34  # block_q8_0: fp16 d + 32 int8
Q2_K_BLOCK_BYTES = 84  # block_q2_K: 256/16 scales + 256/4 qs + 2 fp16
Q3_K_BLOCK_BYTES = 110  # block_q3_K: 256/8 hmask + 256/4 qs + 12 scales + fp16 d
Q4_K_BLOCK_BYTES = 144  # block_q4_K: 2 fp16 + K_SCALE_SIZE (12) + 256/2
Q5_K_BLOCK_BYTES = 176  # block_q5_K: 2 fp16 + 12 + 256/8 + 256/2
Q6_K_BLOCK_BYTES = 210  # block_q6_K: fp16 d + 256/16 scales + 3*256/4
IQ1_S_BLOCK_BYTES = 50  # block_iq1_s: fp16 d + 256/8 qs + 256/32 uint16 qh
IQ1_M_BLOCK_BYTES = 56  # block_iq1_m: 256/8 qs + 256/16 qh + 256/32 scales
IQ2_XXS_BLOCK_BYTES = 66  # block_iq2_xxs: fp16 d + 256/8 uint16 qs
IQ2_XS_BLOCK_BYTES = 74  # block_iq2_xs: fp16 d + 256/8 uint16 qs + 256/32 scales
IQ2_S_BLOCK_BYTES = 82  # block_iq2_s: fp16 d + 256/4 qs + 256/32 qh + 256/32 scales
IQ3_XXS_BLOCK_BYTES = 98  # block_iq3_xxs: fp16 d + 3*256/8 qs
IQ3_S_BLOCK_BYTES = 110  # block_iq3_s: fp16 d + 256/4 qs + 256/32 qh + 256/8 signs + 4 scales
IQ4_NL_BLOCK_BYTES = 18  # block_iq4_nl: fp16 d + 32/2 nibbles
IQ4_XS_BLOCK_BYTES = 136  # block_iq4_xs: fp16 d + uint16 scales_h + 256/64 scales_l + 256/2 nibbles
MXFP4_BLOCK_BYTES = 17  # block_mxfp4: uint8 e (E8M0 scale) + 32/2 nibbles (QK_MXFP4 32)

GGML_BLOCK: dict[str, tuple[int, int]] = {
    "F32": (1, F32_BYTES), "F16": (1, F16_BYTES), "BF16": (1, BF16_BYTES), "I32": (1, INT32_BYTES_GGML),
    "Q4_0": (QK4_0, Q4_0_BLOCK_BYTES), "Q4_1": (QK4_0, Q4_1_BLOCK_BYTES),
    "Q5_0": (QK4_0, Q5_0_BLOCK_BYTES), "Q5_1": (QK4_0, Q5_1_BLOCK_BYTES), "Q8_0": (QK4_0, Q8_0_BLOCK_BYTES),
    "Q2_K": (QK_K, Q2_K_BLOCK_BYTES), "Q3_K": (QK_K, Q3_K_BLOCK_BYTES),
    "Q4_K": (QK_K, Q4_K_BLOCK_BYTES), "Q5_K": (QK_K, Q5_K_BLOCK_BYTES), "Q6_K": (QK_K, Q6_K_BLOCK_BYTES),
    "IQ1_S": (QK_K, IQ1_S_BLOCK_BYTES), "IQ1_M": (QK_K, IQ1_M_BLOCK_BYTES),
    "IQ2_XXS": (QK_K, IQ2_XXS_BLOCK_BYTES), "IQ2_XS": (QK_K, IQ2_XS_BLOCK_BYTES), "IQ2_S": (QK_K, IQ2_S_BLOCK_BYTES),
    "IQ3_XXS": (QK_K, IQ3_XXS_BLOCK_BYTES), "IQ3_S": (QK_K, IQ3_S_BLOCK_BYTES),
    "IQ4_NL": (QK4_0, IQ4_NL_BLOCK_BYTES), "IQ4_XS": (QK_K, IQ4_XS_BLOCK_BYTES),
    "MXFP4": (QK4_0, MXFP4_BLOCK_BYTES),
}

# llama_ftype -> default ggml type (the GGUF records of the table above; F16 / BF16 are GGUF ftypes too)
FTYPE_DEFAULT_TYPE = {q.name: q.ggml_type for q in QUANTS.values() if q.ggml_type}
GGUF_QUANTS: tuple[str, ...] = tuple(FTYPE_DEFAULT_TYPE)

# The I-quants are sized as made with an importance matrix (llama-quantize refuses IQ1_S/IQ1_M/IQ2_* without one,
# and the published I-quant files -- bartowski, unsloth -- are imatrix quants); every other type as made without one
# (llama-quantize's default). An imatrix changes tensor types only for Q4_0 / Q5_0 (first eighth of ffn_down ->
# Q4_1 / Q5_1), IQ3_XXS (attn_v, ffn_down) and IQ4_NL / IQ4_XS (first eighth of ffn_down stays IQ4 instead of Q5_K).
IMATRIX_BY_DEFAULT = frozenset(q for q in FTYPE_DEFAULT_TYPE if q.startswith("IQ"))

# gguf-py LlamaFileType names (general.file_type) -> catalog quantization
_FILE_TYPE_TO_QUANT = {q.gguf_file_type: q.name for q in QUANTS.values() if q.gguf_file_type}


def ggml_nbytes(ggml_type: str, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor: ggml_row_size(type, ne0) * rows (ggml.c ggml_nbytes for contiguous tensors)."""
    blck, size = GGML_BLOCK[ggml_type]
    rows = 1
    for d in shape[1:]:
        rows *= d
    return shape[0] // blck * size * rows


# ----------------------------------------------------------------------------------------------------------------
# llama.cpp per-tensor type choice
# ----------------------------------------------------------------------------------------------------------------
def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    # src/llama-quant.cpp, llama_tensor_get_type_impl: lambda use_more_bits
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


# src/llama-quant.cpp tensor_allows_quantization: substrings that keep a 2-D/3-D "...weight" tensor as it is
_NEVER_QUANTIZED = ("_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
                    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
                    "indexer.q_proj.weight", "attn_rel_b.weight")


def _allows_quantization(name: str, shape: tuple[int, ...]) -> bool:
    # src/llama-quant.cpp: tensor_allows_quantization: only 2-D/3-D tensors ending in "weight", never norms, the MoE
    # router or the small tables listed above.
    return len(shape) >= 2 and _name_allows_quantization(name)


@lru_cache(maxsize=None)
def _name_allows_quantization(name: str) -> bool:
    """The name part of _allows_quantization, once per tensor name (the same names recur in every model: tune sizes
    thousands of model x quantization files)."""
    return name.endswith("weight") and not any(x in name for x in _NEVER_QUANTIZED)


def _is_70b(key) -> bool:  # key: recommender.model.arch.ArchKey
    # llama.cpp hparams -> LLM_TYPE_70B: src/models/llama.cpp (80 layers and n_head != n_head_kv),
    # src/models/qwen2.cpp (80 layers). Used by the attn_v rule below.
    if key.num_layers != 80:
        return False
    return key.gguf_arch == "qwen2" or (key.gguf_arch == "llama" and key.num_attention_heads != key.num_kv_heads)


# tensor_type_fallback: a row length that is not a multiple of the block size demotes the type
_FALLBACK = {"IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL", "IQ2_S": "IQ4_NL",
             "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q2_K": "Q4_0", "Q3_K": "Q4_0",
             "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def _fallback(ggml_type: str, ne0: int) -> str:
    # src/llama-quant.cpp: tensor_type_fallback. A 32-block type that does not fit has no smaller block: F16.
    blck = GGML_BLOCK[ggml_type][0]
    if ne0 % blck == 0:
        return ggml_type
    new = _FALLBACK.get(ggml_type, ggml_type)
    if ne0 % GGML_BLOCK[new][0] != 0:
        new = "F16"  # "must use F16 due to unusual shape"
    return new


def _category(name: str) -> str:
    """src/llama-quant.cpp tensor_get_category (first match wins, substring tests as there)."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for sub, cat in (("attn_qkv.weight", "attn_qkv"), ("attn_kv_b.weight", "attn_kv_b"), ("attn_v.weight", "attn_v"),
                     ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"), ("attn_output.weight", "attn_output"),
                     ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"), ("ffn_down", "ffn_down")):
        if sub in name:
            return cat
    return "other"


_ATTN_V_LIKE = ("attn_v", "attn_qkv", "attn_kv_b")  # category_is_attn_v
_IQ2_FAMILY = ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")
_IQ2_S_M = ("IQ2_S", "IQ2_M")
_8E_ATTN_OUT = ("Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M",
                "IQ4_XS")


class _QuantState:
    """quantize_state_impl's counters: attn_v-like tensors seen / total, ffn_down / gate / up seen."""

    def __init__(self, n_attention_wv: int, n_layer: int) -> None:
        self.n_attention_wv, self.n_layer = n_attention_wv, n_layer
        self.i_attention_wv = self.i_ffn_down = self.i_ffn_gate = self.i_ffn_up = 0


def _impl_type(t: str, name: str, shape: tuple[int, ...], layer: int, ftype: str, qs: _QuantState, *,
               n_expert: int, n_gqa: int, has_output: bool, is_70b: bool, imatrix: bool) -> str:
    """llama_tensor_get_type_impl of the vendored llama.cpp, for a run without --pure, tensor-type overrides or
    output / token-embedding type options. ``t`` is the ftype's default type; returns the tensor's type before
    the shape fallback. Architecture-specific branches for Falcon, GLM5-next and Bailing-MoE-3 are left out (no
    catalog model has those architectures)."""
    cat = _category(name)
    n_layer = qs.n_layer
    n_exp1 = max(1, n_expert)

    def layer_of(counter: int) -> int:  # layer_info: the counter, or for MoE models the layer in the name
        return layer if n_exp1 > 1 else counter

    if cat == "output" or (not has_output and cat == "token_embd"):
        if ftype == "MXFP4":
            return "Q8_0"
        if shape[0] % GGML_BLOCK[t][0] != 0:
            return "Q8_0"
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"):
            return "Q5_K"
        return t if t == "Q8_0" else "Q6_K"
    if ftype == "MXFP4":
        # "MoE tensors -> MXFP4, other tensors -> Q8_0" (tensor->ne[2] > 1)
        return "MXFP4" if len(shape) >= 3 and shape[2] > 1 else "Q8_0"
    if cat == "token_embd":
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return "Q2_K"
        if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return "IQ3_S"
        return t
    if ftype in _IQ2_FAMILY:
        if cat in _ATTN_V_LIKE:
            if n_gqa >= 4 or n_expert >= 4:
                t = "Q4_K"
            else:
                t = "IQ3_S" if ftype in _IQ2_S_M else "Q2_K"
            qs.i_attention_wv += 1
        elif n_expert == 8 and cat == "attn_k":
            t = "Q4_K"
        elif cat == "ffn_down":
            if qs.i_ffn_down < n_layer // 8:
                t = "IQ3_S" if ftype in _IQ2_S_M else "Q2_K"
            qs.i_ffn_down += 1
        elif cat == "attn_output":
            if n_expert == 8:
                t = "Q5_K"
            elif ftype in ("IQ1_S", "IQ1_M"):
                t = "IQ2_XXS"
            elif ftype in _IQ2_S_M:
                t = "IQ3_S"
        return t
    if cat in _ATTN_V_LIKE:
        i_wv = qs.i_attention_wv
        if ftype == "Q2_K":
            t = "Q4_K" if n_gqa >= 4 else "Q3_K"
        elif ftype == "IQ3_XXS":
            t = "Q4_K" if n_gqa >= 4 else ("IQ3_S" if not imatrix else "IQ3_XXS")
        elif ftype in ("IQ3_XS", "IQ3_S") and n_gqa >= 4:
            t = "Q4_K"
        elif ftype == "IQ3_M":
            t = "Q4_K"
        elif ftype == "Q3_K_M":
            t = "Q5_K" if i_wv < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            t = "Q5_K"
        elif ftype in ("IQ4_NL", "IQ4_XS") and n_gqa >= 4:
            t = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i_wv, qs.n_attention_wv):
            t = "Q6_K"
        elif ftype == "Q4_K_S" and i_wv < 4:
            t = "Q5_K"
        if is_70b and t in ("Q3_K", "Q4_K"):
            t = "Q5_K"  # "In the 70B model we have 8 heads sharing the same attn_v weights"
        if n_expert == 8:
            t = "Q8_0"  # "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
        qs.i_attention_wv += 1
        return t
    if cat == "attn_k":
        if n_expert == 8:
            return "Q8_0"
        if ftype == "IQ3_XS":
            return "IQ3_XXS"
        if ftype == "IQ3_XXS":
            return "IQ2_S"
        return t
    if cat == "attn_q":
        if ftype == "IQ3_XS":
            return "IQ3_XXS"
        if ftype == "IQ3_XXS":
            return "IQ2_S"
        return t
    if cat == "ffn_down":
        i = layer_of(qs.i_ffn_down)
        if ftype == "Q2_K":
            t = "Q3_K"
        elif ftype == "IQ3_XXS" and not imatrix:
            t = "Q4_K" if i < n_layer // 8 else "Q3_K"
        elif ftype == "Q3_K_M":
            # arch != FALCON || use_more_bits -> Q4_K (always Q4_K outside Falcon)
            t = "Q5_K" if i < n_layer // 16 else "Q4_K"
        elif ftype == "IQ3_M" and (i < n_layer // 8 or (n_expert == 8 and _use_more_bits(i, n_layer))):
            t = "Q4_K"
        elif ftype == "Q3_K_L":
            t = "Q5_K"
        elif ftype == "Q4_K_M":
            if _use_more_bits(i, n_layer):
                t = "Q6_K"
        elif i < n_layer // 8 and ftype in ("IQ4_NL", "IQ4_XS") and not imatrix:
            t = "Q5_K"
        elif ftype == "Q5_K_M" and _use_more_bits(i, n_layer):
            t = "Q6_K"
        elif ftype == "Q4_K_S" and i < n_layer // 8:
            t = "Q5_K"
        elif ftype in ("Q4_0", "Q5_0") and imatrix and i < n_layer // 8:
            t = "Q4_1" if ftype == "Q4_0" else "Q5_1"
        qs.i_ffn_down += 1
        return t
    if cat == "attn_output":
        if n_expert == 8:
            return "Q5_K" if ftype in _8E_ATTN_OUT else t
        return {"Q2_K": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K", "IQ3_M": "Q4_K"}.get(ftype, t)
    if cat in ("ffn_gate", "ffn_up"):
        counter = qs.i_ffn_gate if cat == "ffn_gate" else qs.i_ffn_up
        i = layer_of(counter)
        if ftype == "IQ3_XS" and n_layer // 8 <= i < 7 * n_layer // 8:
            t = "IQ3_XXS"
        if cat == "ffn_gate":
            qs.i_ffn_gate += 1
        else:
            qs.i_ffn_up += 1
        return t
    return t


def gguf_tensor_type(name: str, shape: tuple[int, ...], layer: int, ftype: str, *, n_layers: int, n_expert: int,
                     has_output: bool, is_70b: bool, n_gqa: int = 1, imatrix: Optional[bool] = None,
                     state: Optional[_QuantState] = None) -> str:
    """ggml type llama-quantize gives one tensor for a target ftype: ggml-org/llama.cpp src/llama-quant.cpp
    (the copy vendored in llama-cpp-python 0.3.36), llama_tensor_get_type -> llama_tensor_get_type_impl ->
    tensor_type_fallback, for a run without --pure or tensor-type overrides. ``state`` carries the counters across
    a file's tensors (``_gguf_types`` passes one); without it the tensor is typed as the first of its kind.
    """
    if not _allows_quantization(name, shape):
        # not quantized: stays as convert_hf_to_gguf.py wrote it. 1-D tensors are F32 (its n_dims <= 1 rule) and
        # the router ffn_gate_inp is forced to F32 (MODEL_TENSOR.FFN_GATE_INP in its F32 list); DeepSeek-V4's hash
        # routing table is I32 (conversion/deepseek.py _write_hash_routing_tensors: to(torch.int32)).
        return "I32" if "ffn_gate_tid2eid" in name else "F32"
    default = FTYPE_DEFAULT_TYPE[ftype]
    if default in ("F16", "BF16"):
        if name.endswith("indexer.proj.weight"):
            return "F32"  # conversion/base.py: MODEL_TENSOR.INDEXER_PROJ in its F32 list ("DSA indexer weights")
        return default  # ggml_is_quantized(default_type) is false: no per-tensor rules
    if imatrix is None:
        imatrix = ftype in IMATRIX_BY_DEFAULT
    qs = state or _QuantState(1, n_layers)
    t = _impl_type(default, name, shape, layer, ftype, qs, n_expert=n_expert, n_gqa=n_gqa, has_output=has_output,
                   is_70b=is_70b, imatrix=imatrix)
    return _fallback(t, shape[0])


# ----------------------------------------------------------------------------------------------------------------
# AWQ / GPTQ / FP8 / unquantized HF layouts
# ----------------------------------------------------------------------------------------------------------------
AWQ_GPTQ_BITS = 4
GROUP_SIZE = 128  # q_group_size / group_size of the AWQ and GPTQ checkpoints modelled here
INT32_BYTES = 4
PACK_4BIT_PER_INT32 = 32 // AWQ_GPTQ_BITS  # 8 nibbles per int32
FP8_BYTES = 1
FP8_SCALE_BYTES = 4  # vLLM keeps per-channel weight scales in float32 (w8a8_utils create_per_channel_scale_param)
INT8_BYTES = 1
# bitsandbytes (bitsandbytes/functional.py quantize_4bit, transformers BitsAndBytesConfig defaults): NF4 packs two
# 4-bit codes per byte with one float32 absmax per block of 64 (bnb_4bit_use_double_quant=False); LLM.int8() stores
# int8 weights with one float32 scale (SCB) per output row.
BNB_4BIT_BLOCK = 64
BNB_ABSMAX_BYTES = 4
BNB_INT8_SCALE_BYTES = 4


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _awq_layout(in_f: int, out_f: int) -> list[tuple[str, str, int]]:
    """AutoAWQ WQLinear_GEMM (awq/modules/linear/gemm.py): qweight int32 [in, out/8], qzeros int32 [in/g, out/8],
    scales fp16 [in/g, out]."""
    groups = _ceil_div(in_f, GROUP_SIZE)
    packed_out = _ceil_div(out_f, PACK_4BIT_PER_INT32)
    return [("qweight", "I32", in_f * packed_out * INT32_BYTES),
            ("qzeros", "I32", groups * packed_out * INT32_BYTES),
            ("scales", "F16", groups * out_f * F16_BYTES)]


def _gptq_layout(in_f: int, out_f: int, bits: int = AWQ_GPTQ_BITS) -> list[tuple[str, str, int]]:
    """AutoGPTQ / GPTQModel QuantLinear: qweight int32 [in*bits/32, out], qzeros int32 [in/g, out*bits/32], scales
    fp16 [in/g, out], g_idx int32 [in] (8-bit: 4 values per int32)."""
    groups = _ceil_div(in_f, GROUP_SIZE)
    per_int32 = 32 // bits
    return [("qweight", "I32", _ceil_div(in_f, per_int32) * out_f * INT32_BYTES),
            ("qzeros", "I32", groups * _ceil_div(out_f, per_int32) * INT32_BYTES),
            ("scales", "F16", groups * out_f * F16_BYTES),
            ("g_idx", "I32", in_f * INT32_BYTES)]


def _is_quantized_linear(name: str, shape: tuple[int, ...]) -> bool:
    """The nn.Linear weights AWQ / GPTQ / FP8 quantize: every 2-D/3-D layer weight except embeddings, lm_head and the
    MoE router (AutoAWQ modules_to_not_convert ["gate"], llm-compressor ignore ["lm_head", "re:.*mlp.gate$"])."""
    return (len(shape) >= 2 and name.startswith("blk.") and name.endswith(".weight")
            and "ffn_gate_inp" not in name and not name.endswith("_norm.weight"))


def _stem(name: str) -> str:
    return name.removesuffix(".weight")


# ----------------------------------------------------------------------------------------------------------------
# Public: breakdown and totals
# ----------------------------------------------------------------------------------------------------------------
def weights_breakdown(spec: ModelSpec, quant: str, engine: Optional[str] = None) -> list[tuple[str, str, int]]:
    """Every stored weight tensor as (name, storage type, bytes).

    GGUF quantizations (and F16 / BF16 for llama.cpp): one row per GGUF tensor with its ggml type.
    AWQ / GPTQ: a quantized linear becomes ``<stem>.qweight``, ``.qzeros``, ``.scales`` (GPTQ also ``.g_idx``);
    embeddings, lm_head, norms, biases and the router stay fp16. FP8: ``<stem>.weight`` (F8_E4M3) and
    ``<stem>.weight_scale`` (F32 per output channel); the rest bf16. F16 / BF16 for vllm / transformers: every tensor
    2 bytes per element (HF checkpoint layout). Names are llama.cpp GGUF names (``recommender.model.arch``).
    """
    q = resolve_quant(quant) if quant not in QUANTS else quant

    hf_layout = QUANTS[q].family == "float" and engine is not None and engine_spec(engine).file_format != "gguf"
    return list(_breakdown(arch_key(spec), q, hf_layout))


def weights_bytes(spec: ModelSpec, quant: str, engine: Optional[str] = None) -> int:
    """Total bytes of the model's weights in one quantization (sum of ``weights_breakdown``)."""
    q = resolve_quant(quant) if quant not in QUANTS else quant

    hf_layout = QUANTS[q].family == "float" and engine is not None and engine_spec(engine).file_format != "gguf"
    return _total(arch_key(spec), q, hf_layout)


def gguf_tensor_types(spec: ModelSpec, quant: str,
                      imatrix: Optional[bool] = None) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, ggml type) of every tensor of the GGUF file llama-quantize would write (``imatrix``: made with
    an importance matrix; default ``IMATRIX_BY_DEFAULT``)."""
    q = resolve_quant(quant) if quant not in QUANTS else quant
    if q not in FTYPE_DEFAULT_TYPE:
        raise UserError(f"{q} is not a GGUF quantization", hint=f"GGUF types: {', '.join(FTYPE_DEFAULT_TYPE)}")

    return list(_gguf_types(arch_key(spec), q, imatrix))


# Models whose checkpoint ships its routed experts in MXFP4 (gpt-oss): convert_hf_to_gguf.py writes those tensors
# as MXFP4 whatever --outtype is (GptOssModel repacks the checkpoint's blocks), so the F16 / BF16 / Q8_0 files keep
# them in MXFP4 (the published gpt-oss-20b Q8_0 and MXFP4 files differ by 1,312 bytes). Requantizing them to another
# type from MXFP4 is what llama-quantize would do for the other ftypes; the published files of those types use
# their own recipes, so the catalog offers only these four for such models.
# DeepSeek-V4 the same: conversion/deepseek.py DeepseekV4Model._write_mxfp4_expert_tensor repacks the checkpoint's
# FP4 routed experts to MXFP4 for every output type (prepare_tensors sets MOSTLY_MXFP4_MOE).
MXFP4_NATIVE_ARCHS = frozenset({"gpt-oss", "deepseek4"})
MXFP4_NATIVE_QUANTS = ("MXFP4", "Q8_0", "F16", "BF16")


# Architectures sized for llama.cpp only: DeepSeek-V4's compressed KV caches are modelled from llama.cpp's own
# (src/llama-kv-cache-dsv4.cpp); vLLM's, SGLang's and transformers' caches for it, and its native FP8 + FP4-expert
# checkpoint layout on them, are not, so the catalog offers only GGUF quantizations, which no other engine here runs
# (the converter's Q8_0 / MXFP4 file keeps the experts in MXFP4; the other ftypes are llama-quantize's requantization
# of that file, sized by its per-tensor rules). A per-engine refusal, not a plan.
# DeepSeek-V3.2 / GLM-5.x (DeepSeek sparse attention) the same: the lightning indexer's key cache is sized from
# llama.cpp's (src/llama-kv-cache-dsa.cpp: a K-only cache of indexer_head_dim per token on each indexer layer, type_k);
# vLLM's (an FP8 key cache with per-block scales beside the MLA cache, sparse MLA kernels) and SGLang's are not.
LLAMA_CPP_ONLY_ARCHS = frozenset({"deepseek4"}) | DSA_ARCHS


def _mxfp4_native(key) -> bool:
    return key.gguf_arch in MXFP4_NATIVE_ARCHS


def quants_for(spec: ModelSpec) -> tuple[str, ...]:
    """The catalog quantizations one model is sized in (all of them, except the restriction above)."""
    key = arch_key(spec)
    if key.gguf_arch in LLAMA_CPP_ONLY_ARCHS:
        return tuple(q for q in CATALOG_QUANTS if QUANTS[q].family == "gguf")
    if _mxfp4_native(key):
        return tuple(q for q in CATALOG_QUANTS if q in MXFP4_NATIVE_QUANTS or QUANTS[q].family != "gguf")
    if not key.num_experts:
        # MXFP4_MOE only changes routed-expert tensors; for a dense model it is Q8_0 under another name
        return tuple(q for q in CATALOG_QUANTS if q != "MXFP4")
    return CATALOG_QUANTS


@lru_cache(maxsize=4096)
def _gguf_types(key, ftype: str, imatrix: Optional[bool] = None) -> tuple[tuple[str, tuple[int, ...], str], ...]:

    inv = raw_inventory_of(key)
    has_output = any(n == "output.weight" for n, _s, _l, _e in inv)
    is70 = _is_70b(key)
    # MLA GGUFs store head_count_kv = 1 (convert_hf_to_gguf.py DeepseekV2Model: MQA over the latent)
    n_kv = 1 if key.kv_lora_rank else max(1, key.num_kv_heads)
    n_gqa = key.num_attention_heads // n_kv
    n_wv = sum(1 for n, s, _l, _e in inv if _allows_quantization(n, s) and _category(n) in _ATTN_V_LIKE)
    state = _QuantState(n_wv, key.num_layers)
    native = _mxfp4_native(key) and ftype in MXFP4_NATIVE_QUANTS
    out = []
    for n, s, layer, experts in inv:
        if native and experts > 1 and n.endswith("_exps.weight"):
            out.append((n, s, "MXFP4"))  # as the converter wrote them (see MXFP4_NATIVE_ARCHS)
            continue
        out.append((n, s, gguf_tensor_type(n, s, layer, ftype, n_layers=key.num_layers, n_expert=key.num_experts,
                                           has_output=has_output, is_70b=is70, n_gqa=n_gqa, imatrix=imatrix,
                                           state=state)))
    return tuple(out)


@lru_cache(maxsize=4096)
def _breakdown(key, q: str, hf_layout: bool) -> tuple[tuple[str, str, int], ...]:

    fam = QUANTS[q].family
    if fam in ("gguf", "float") and not hf_layout:
        return tuple((n, t, ggml_nbytes(t, s)) for n, s, t in _gguf_types(key, q))
    out: list[tuple[str, str, int]] = []
    for name, shape, _layer, _e in raw_inventory_of(key):
        n = 1
        for d in shape:
            n *= d
        if fam == "float":
            out.append((name, q, n * 2))
            continue
        if not _is_quantized_linear(name, shape):
            dtype, width = ("BF16", BF16_BYTES) if fam in ("fp8", "int8", "bnb") else ("F16", F16_BYTES)
            out.append((name, dtype, n * width))
            continue
        in_f, out_f = shape[0], shape[1]
        experts = shape[2] if len(shape) == 3 else 1
        stem = _stem(name)
        if fam in ("fp8", "int8"):
            # compressed-tensors W8A8: weight (F8_E4M3 or I8) + weight_scale float32 per output channel
            out.append((stem + ".weight", "F8_E4M3" if fam == "fp8" else "I8", n * FP8_BYTES))
            out.append((stem + ".weight_scale", "F32", out_f * experts * FP8_SCALE_BYTES))
            continue
        if q == "BNB-NF4":
            out.append((stem + ".weight", "U8", _ceil_div(n, 2)))
            out.append((stem + ".weight.absmax", "F32", _ceil_div(n, BNB_4BIT_BLOCK) * BNB_ABSMAX_BYTES))
            continue
        if q == "BNB-INT8":
            out.append((stem + ".weight", "I8", n * INT8_BYTES))
            out.append((stem + ".SCB", "F32", out_f * experts * BNB_INT8_SCALE_BYTES))
            continue
        layout = (_awq_layout(in_f, out_f) if fam == "awq"
                  else _gptq_layout(in_f, out_f, 8 if q == "GPTQ-8bit" else AWQ_GPTQ_BITS))
        out += [(f"{stem}.{part}", dtype, nbytes * experts) for part, dtype, nbytes in layout]
    return tuple(out)


@lru_cache(maxsize=4096)
def _total(key, q: str, hf_layout: bool) -> int:
    return sum(b for _n, _t, b in _breakdown(key, q, hf_layout))


def gguf_file_quant(info) -> str:  # info: recommender.model.arch.GgufFileInfo
    """The catalog quantization a GGUF file is (from general.file_type, else its most common 2-D tensor type)."""
    name = _FILE_TYPE_TO_QUANT.get(info.file_type_name or "")
    if name:
        return name
    if info.file_type_name:
        raise UserError(f"GGUF file type {info.file_type_name.removeprefix('MOSTLY_')} is not one of the catalog "
                        "quantizations", hint=f"catalog GGUF types: {', '.join(FTYPE_DEFAULT_TYPE)}")
    counts: dict[str, int] = {}
    for t in info.tensors:
        if len(t.shape) >= 2:
            counts[t.ggml_type] = counts.get(t.ggml_type, 0) + t.n_bytes
    named = {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "Q3_K": "Q3_K_M", "IQ3_S": "IQ3_S", "IQ2_XS": "IQ2_XS"}
    for ggml_type, _n in sorted(counts.items(), key=lambda kv: -kv[1]):
        if ggml_type in named:
            return named[ggml_type]
        for quant, default in FTYPE_DEFAULT_TYPE.items():
            if default == ggml_type:
                return quant
    raise UserError("cannot tell the quantization of this GGUF file (no general.file_type and no known tensor types)",
                    hint=f"catalog GGUF types: {', '.join(FTYPE_DEFAULT_TYPE)}")
