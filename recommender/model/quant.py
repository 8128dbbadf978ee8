"""Quantization formats and the bytes a model's weights take in each, tensor by tensor.

Pure and fast (no numpy, no gguf import): the per-tensor rules run on the plain-tuple inventory from
``recommender.arch.raw_inventory`` and results are cached per (architecture, quantization).

GGUF sizes reproduce llama.cpp's ``llama-quantize``: the per-tensor type choice of ``llama_tensor_get_type``
(ggml-org/llama.cpp, ``src/llama-quant.cpp``) and the ggml block sizes (``ggml/src/ggml-common.h``), on a source
GGUF made by ``convert_hf_to_gguf.py`` (1-D tensors and the MoE router kept in F32). AWQ / GPTQ / FP8 sizes follow the
tensors those checkpoints store (see the layout functions below).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional


from recommender.core.errors import UserError
from recommender.core.fuzzy import resolve
from recommender.core.records import ModelSpec, QuantSpec
from recommender.model.arch import arch_key, raw_inventory_of

RULES_VERSION = "q1"  # bump when a size rule changes (the catalog digest includes it)

# ----------------------------------------------------------------------------------------------------------------
# Catalog quantizations
# ----------------------------------------------------------------------------------------------------------------
LLAMA_CPP = "llama.cpp"
VLLM = "vllm"
TRANSFORMERS = "transformers"

QUANTS: dict[str, QuantSpec] = {q.name: q for q in (
    QuantSpec(name="F16", family="float", engines=[LLAMA_CPP, VLLM, TRANSFORMERS], nominal_bits=16,
              description="IEEE half precision, unquantized"),
    QuantSpec(name="BF16", family="float", engines=[LLAMA_CPP, VLLM, TRANSFORMERS], nominal_bits=16,
              description="bfloat16, unquantized (the dtype most checkpoints ship in)"),
    QuantSpec(name="Q8_0", family="gguf", engines=[LLAMA_CPP], nominal_bits=8.5,
              description="GGUF 8-bit, blocks of 32 with an fp16 scale"),
    QuantSpec(name="Q6_K", family="gguf", engines=[LLAMA_CPP], nominal_bits=6.5625,
              description="GGUF 6-bit k-quant (256-element super-blocks)"),
    QuantSpec(name="Q5_K_M", family="gguf", engines=[LLAMA_CPP], nominal_bits=5.5,
              description="GGUF 5-bit k-quant mix: Q5_K, with Q6_K for output and half the attn_v / ffn_down"),
    QuantSpec(name="Q4_K_M", family="gguf", engines=[LLAMA_CPP], nominal_bits=4.5,
              description="GGUF 4-bit k-quant mix: Q4_K, with Q6_K for output and half the attn_v / ffn_down"),
    QuantSpec(name="Q4_0", family="gguf", engines=[LLAMA_CPP], nominal_bits=4.5,
              description="GGUF legacy 4-bit, blocks of 32 with an fp16 scale"),
    QuantSpec(name="Q4_1", family="gguf", engines=[LLAMA_CPP], nominal_bits=5.0,
              description="GGUF legacy 4-bit, blocks of 32 with fp16 scale and min"),
    QuantSpec(name="AWQ-4bit", family="awq", engines=[VLLM, TRANSFORMERS], nominal_bits=4.0,
              description="AutoAWQ GEMM, 4-bit weights, group size 128, fp16 scales and packed zeros"),
    QuantSpec(name="GPTQ-4bit", family="gptq", engines=[VLLM, TRANSFORMERS], nominal_bits=4.0,
              description="GPTQ 4-bit, group size 128, fp16 scales, packed zeros and g_idx"),
    QuantSpec(name="FP8", family="fp8", engines=[VLLM], nominal_bits=8.0,
              description="FP8 E4M3 weights with per-output-channel scales (llm-compressor FP8_DYNAMIC)"),
)}
CATALOG_QUANTS: tuple[str, ...] = tuple(QUANTS)

QUANT_ALIASES = {
    "fp16": "F16", "float16": "F16", "half": "F16", "f16": "F16",
    "bfloat16": "BF16", "bf16": "BF16",
    "q8": "Q8_0", "q8-0": "Q8_0", "int8-gguf": "Q8_0",
    "q6": "Q6_K", "q6k": "Q6_K", "q6-k": "Q6_K",
    # llama-quantize accepts Q4_K / Q5_K as aliases of Q4_K_M / Q5_K_M (tools/quantize/quantize.cpp QUANT_OPTIONS)
    "q5_k": "Q5_K_M", "q5km": "Q5_K_M", "q5-k-m": "Q5_K_M", "q5": "Q5_K_M",
    "q4_k": "Q4_K_M", "q4km": "Q4_K_M", "q4-k-m": "Q4_K_M", "q4": "Q4_K_M",
    "q4-0": "Q4_0", "q4-1": "Q4_1",
    "awq": "AWQ-4bit", "awq4": "AWQ-4bit", "awq-int4": "AWQ-4bit", "awq_4bit": "AWQ-4bit", "awq-w4a16": "AWQ-4bit",
    "gptq": "GPTQ-4bit", "gptq4": "GPTQ-4bit", "gptq-int4": "GPTQ-4bit", "gptq_4bit": "GPTQ-4bit",
    "fp8": "FP8", "f8": "FP8", "fp8-dynamic": "FP8", "w8a8-fp8": "FP8", "fp8_e4m3": "FP8",
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
# gguf-py's GGML_QUANT_SIZES (gguf/constants.py), which tests/test_quant.py checks them against.
# ----------------------------------------------------------------------------------------------------------------
QK4_0 = 32  # ggml-common.h #define QK4_0 32 (also QK4_1, QK5_0, QK5_1, QK8_0)
QK_K = 256  # ggml-common.h #define QK_K 256 (k-quant super-block)
F32_BYTES = 4
F16_BYTES = 2
BF16_BYTES = 2
Q4_0_BLOCK_BYTES = 18  # block_q4_0: fp16 d + 32/2 nibbles
Q4_1_BLOCK_BYTES = 20  # block_q4_1: fp16 d, fp16 m + 32/2 nibbles
Q5_0_BLOCK_BYTES = 22  # block_q5_0: fp16 d + uint32 qh + 32/2 nibbles
Q5_1_BLOCK_BYTES = 24  # block_q5_1: fp16 d, fp16 m + uint32 qh + 32/2
Q8_0_BLOCK_BYTES = 34  # block_q8_0: fp16 d + 32 int8
Q4_K_BLOCK_BYTES = 144  # block_q4_K: 2 fp16 + K_SCALE_SIZE (12) + 256/2
Q5_K_BLOCK_BYTES = 176  # block_q5_K: 2 fp16 + 12 + 256/8 + 256/2
Q6_K_BLOCK_BYTES = 210  # block_q6_K: fp16 d + 256/16 scales + 3*256/4

GGML_BLOCK: dict[str, tuple[int, int]] = {
    "F32": (1, F32_BYTES), "F16": (1, F16_BYTES), "BF16": (1, BF16_BYTES),
    "Q4_0": (QK4_0, Q4_0_BLOCK_BYTES), "Q4_1": (QK4_0, Q4_1_BLOCK_BYTES),
    "Q5_0": (QK4_0, Q5_0_BLOCK_BYTES), "Q5_1": (QK4_0, Q5_1_BLOCK_BYTES), "Q8_0": (QK4_0, Q8_0_BLOCK_BYTES),
    "Q4_K": (QK_K, Q4_K_BLOCK_BYTES), "Q5_K": (QK_K, Q5_K_BLOCK_BYTES), "Q6_K": (QK_K, Q6_K_BLOCK_BYTES),
}

# llama_ftype -> default ggml type: src/llama-quant.cpp, llama_ftype_get_default_type (older: the switch at the top
# of llama_model_quantize_impl)
FTYPE_DEFAULT_TYPE = {"F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K_M": "Q5_K",
                      "Q4_K_M": "Q4_K", "Q4_0": "Q4_0", "Q4_1": "Q4_1"}

# gguf-py LlamaFileType names (general.file_type) of the catalog's GGUF quantizations
_FILE_TYPE_TO_QUANT = {"MOSTLY_F16": "F16", "MOSTLY_BF16": "BF16", "MOSTLY_Q8_0": "Q8_0", "MOSTLY_Q6_K": "Q6_K",
                       "MOSTLY_Q5_K_M": "Q5_K_M", "MOSTLY_Q4_K_M": "Q4_K_M", "MOSTLY_Q4_0": "Q4_0",
                       "MOSTLY_Q4_1": "Q4_1"}


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
    # src/llama-quant.cpp, llama_tensor_get_type(_impl): lambda use_more_bits
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def _allows_quantization(name: str, shape: tuple[int, ...]) -> bool:
    # src/llama-quant.cpp: tensor_allows_quantization (older: the `quantize &= ...` block in
    # llama_model_quantize_impl): only 2-D/3-D tensors ending in "weight", never norms, never the MoE router.
    if len(shape) < 2 or not name.endswith("weight"):
        return False
    return "_norm.weight" not in name and "ffn_gate_inp.weight" not in name


def _is_70b(key) -> bool:  # key: recommender.arch.ArchKey
    # llama.cpp hparams -> LLM_TYPE_70B: src/models/llama.cpp (80 layers and n_head != n_head_kv),
    # src/models/qwen2.cpp (80 layers). Used by the attn_v rule below.
    if key.num_layers != 80:
        return False
    return key.gguf_arch == "qwen2" or (key.gguf_arch == "llama" and key.num_attention_heads != key.num_kv_heads)


def _fallback(ggml_type: str, ne0: int) -> str:
    # src/llama-quant.cpp: tensor_type_fallback (older: convert_incompatible_tensor at the end of
    # llama_tensor_get_type): a row length that is not a multiple of the block size demotes the type.
    blck = GGML_BLOCK[ggml_type][0]
    if ne0 % blck == 0:
        return ggml_type
    new = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}.get(ggml_type, "F16")
    if ne0 % GGML_BLOCK[new][0] != 0:
        new = "F16"  # "must use F16 due to unusual shape"
    return new


def gguf_tensor_type(name: str, shape: tuple[int, ...], layer: int, ftype: str, *, n_layers: int, n_expert: int,
                     has_output: bool, is_70b: bool) -> str:
    """ggml type llama-quantize gives one tensor for a target ftype (F16, BF16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0,
    Q4_1). Mirrors ggml-org/llama.cpp src/llama-quant.cpp, llama_tensor_get_type, restricted to these ftypes, for a
    run without an importance matrix, --pure or tensor-type overrides.

    Rule set: llama.cpp as of 2024-2025, the name.find() branches of llama_tensor_get_type (the releases that made
    the public GGUF files this project compares with). Checked against two versions of the source: that one (a
    stored fork copy) and the later tensor_category refactor (ggml-org/llama.cpp at 007dbbf3, and the copy vendored
    in llama-cpp-python 0.3.36). The refactor routes attn_qkv / attn_kv_b through the attn_v rule
    (category_is_attn_v) instead of the attn_qkv rule kept here; sizes differ only for Phi-3 attn_qkv and MLA
    attn_kv_b. All other rules used here are identical in both.
    """
    if not _allows_quantization(name, shape):
        # not quantized: stays as convert_hf_to_gguf.py wrote it. 1-D tensors are F32 (its n_dims <= 1 rule) and
        # the router ffn_gate_inp is forced to F32 (MODEL_TENSOR.FFN_GATE_INP in its F32 list).
        return "F32"
    default = FTYPE_DEFAULT_TYPE[ftype]
    if default in ("F16", "BF16"):
        return default  # ggml_is_quantized(default_type) is false: no per-tensor rules
    t = default
    if name == "output.weight" or (not has_output and name == "token_embd.weight"):
        # output (and a tied token_embd): Q8_0 if ne0 is not a multiple of the default type's block, else Q6_K
        # (unless the default is already Q8_0)
        if shape[0] % GGML_BLOCK[t][0] != 0:
            t = "Q8_0"
        elif t != "Q8_0":
            t = "Q6_K"
    elif name == "token_embd.weight":
        pass  # untied token_embd: only IQ*/TQ* ftypes change it
    elif "attn_v.weight" in name:
        if ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(layer, n_layers):
            t = "Q6_K"
        if is_70b and t in ("Q3_K", "Q4_K"):
            t = "Q5_K"  # "In the 70B model we have 8 heads sharing the same attn_v weights"
        if n_expert == 8:
            t = "Q8_0"  # "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
    elif "attn_k.weight" in name:
        if n_expert == 8:
            t = "Q8_0"
    elif "ffn_down" in name:
        # i_layer: the ffn_down counter, or (n_expert > 1) the layer parsed from "blk.%d." -- the layer either way
        if ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(layer, n_layers):
            t = "Q6_K"
    elif "attn_output.weight" in name:
        if n_expert == 8 and ftype == "Q4_K_M":
            t = "Q5_K"
    elif "attn_qkv.weight" in name:
        if ftype == "Q4_K_M":
            t = "Q5_K"
        elif ftype == "Q5_K_M":
            t = "Q6_K"
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


def _gptq_layout(in_f: int, out_f: int) -> list[tuple[str, str, int]]:
    """AutoGPTQ / GPTQModel QuantLinear: qweight int32 [in/8, out], qzeros int32 [in/g, out/8], scales fp16
    [in/g, out], g_idx int32 [in]."""
    groups = _ceil_div(in_f, GROUP_SIZE)
    return [("qweight", "I32", _ceil_div(in_f, PACK_4BIT_PER_INT32) * out_f * INT32_BYTES),
            ("qzeros", "I32", groups * _ceil_div(out_f, PACK_4BIT_PER_INT32) * INT32_BYTES),
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
    2 bytes per element (HF checkpoint layout). Names are llama.cpp GGUF names (``recommender.arch``).
    """
    q = resolve_quant(quant) if quant not in QUANTS else quant

    hf_layout = QUANTS[q].family == "float" and engine not in (None, LLAMA_CPP)
    return list(_breakdown(arch_key(spec), q, hf_layout))


def weights_bytes(spec: ModelSpec, quant: str, engine: Optional[str] = None) -> int:
    """Total bytes of the model's weights in one quantization (sum of ``weights_breakdown``)."""
    q = resolve_quant(quant) if quant not in QUANTS else quant

    hf_layout = QUANTS[q].family == "float" and engine not in (None, LLAMA_CPP)
    return _total(arch_key(spec), q, hf_layout)


def gguf_tensor_types(spec: ModelSpec, quant: str) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, ggml type) of every tensor of the GGUF file llama-quantize would write."""
    q = resolve_quant(quant) if quant not in QUANTS else quant
    if q not in FTYPE_DEFAULT_TYPE:
        raise UserError(f"{q} is not a GGUF quantization", hint=f"GGUF types: {', '.join(FTYPE_DEFAULT_TYPE)}")

    return list(_gguf_types(arch_key(spec), q))


@lru_cache(maxsize=4096)
def _gguf_types(key, ftype: str) -> tuple[tuple[str, tuple[int, ...], str], ...]:

    inv = raw_inventory_of(key)
    has_output = any(n == "output.weight" for n, _s, _l, _e in inv)
    is70 = _is_70b(key)
    return tuple((n, s, gguf_tensor_type(n, s, layer, ftype, n_layers=key.num_layers, n_expert=key.num_experts,
                                         has_output=has_output, is_70b=is70)) for n, s, layer, _e in inv)


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
            dtype, width = ("BF16", BF16_BYTES) if fam == "fp8" else ("F16", F16_BYTES)
            out.append((name, dtype, n * width))
            continue
        in_f, out_f = shape[0], shape[1]
        experts = shape[2] if len(shape) == 3 else 1
        stem = _stem(name)
        if fam == "fp8":
            out.append((stem + ".weight", "F8_E4M3", n * FP8_BYTES))
            out.append((stem + ".weight_scale", "F32", out_f * experts * FP8_SCALE_BYTES))
            continue
        layout = _awq_layout(in_f, out_f) if fam == "awq" else _gptq_layout(in_f, out_f)
        out += [(f"{stem}.{part}", dtype, nbytes * experts) for part, dtype, nbytes in layout]
    return tuple(out)


@lru_cache(maxsize=4096)
def _total(key, q: str, hf_layout: bool) -> int:
    return sum(b for _n, _t, b in _breakdown(key, q, hf_layout))


def gguf_file_quant(info) -> str:  # info: recommender.arch.GgufFileInfo
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
    for ggml_type, _n in sorted(counts.items(), key=lambda kv: -kv[1]):
        for quant, default in FTYPE_DEFAULT_TYPE.items():
            if default == ggml_type and not quant.endswith("_M"):
                return quant
        if ggml_type in ("Q4_K", "Q5_K"):
            return {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}[ggml_type]
    raise UserError("cannot tell the quantization of this GGUF file (no general.file_type and no known tensor types)",
                    hint=f"catalog GGUF types: {', '.join(FTYPE_DEFAULT_TYPE)}")
