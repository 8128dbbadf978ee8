"""Random-weight GGUF files with the exact architecture and per-tensor quantization of a catalog model.

Speed and memory of llama.cpp do not depend on the weight values (MoE routing aside: the router is random too, so
tokens spread over the experts), so such a file measures the architecture for real without downloading weights.

How a file is made (``build_synthetic_gguf``):

* tensor names, shapes (ggml order) and ggml types come from ``recommender.model.quant.gguf_tensor_types`` -- the types
  llama-quantize would choose for that quantization (k-quant mixes, row-size fallbacks, F32 norms and router);
* quantized tensors are written as ggml blocks directly (no F16 intermediate, no ``llama_model_quantize`` pass):
  random quant bits with small, finite f16 scales chosen so the dequantized weights have zero mean and a standard
  deviation of about 0.02 (block layouts of ggml-org/llama.cpp ``ggml/src/ggml-common.h``, the same ones gguf-py's
  ``gguf/quants.py`` dequantizes); F16 / BF16 / F32 matrices are normal(0, 0.02); norm weights are 1.0 (plus a
  little noise), biases normal(0, 0.02);
* data is streamed: for every ggml type one pool of valid random blocks (a few MiB, made once per file) is written
  cyclically from a random block offset, tensor after tensor -- memory stays at the pool sizes whatever the model
  size, and the time is the disk's write time (a 7B Q4_K_M file, 4.7 GB, in seconds);
* the header, metadata and tensor infos are written by ``gguf.GGUFWriter``; tensor data follows at the file's
  alignment (32 bytes), the same layout ``GGUFWriter.write_tensors_to_file`` produces;
* the file is written under a temporary name and renamed when complete, so a half-written file is never mistaken
  for a finished one.

Checked (tests/probes/test_synthetic.py and a sweep of every catalog config cut to 1-6 layers, at real widths): llama.cpp
(llama-cpp-python 0.3.36) loads the files with ``check_tensors`` on and returns finite logits for llama (SmolLM2,
Llama-3.x, Mistral, Mixtral), qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, internlm2, baichuan, minicpm and
deepseek2, at F16, Q8_0, Q6_K-bearing mixes Q4_K_M / Q5_K_M, and (SmolLM2) BF16, Q6_K, Q4_0, Q4_1.

Limits:

* what is measured is the tensor inventory of ``recommender.model.arch``: DeepSeek-V2/V3 / Kimi-K2 in the split MLA
  layout current converters write (``attn_k_b`` / ``attn_v_b``, ``key_length_mla``), so llama.cpp runs them with the
  compressed latent cache; RoPE helper tables (``rope_freqs``, Phi-3 ``rope_factors_*``) are not written (a few hundred bytes, no speed
  effect);
* weights repeat with the pool period (8 MiB per ggml type); the router is random too, so MoE routing spreads tokens
  over the experts but not with a trained model's skew;
* hyper-parameters outside ModelSpec (RoPE base and scaling, norm epsilon, soft-capping) are typical values, not the
  model's; none changes the work per token;
* token text is synthetic unless a llama.cpp vocab GGUF is given (``find_vocab_gguf``), so text prompts tokenize
  differently from the real model: probes should feed token ids.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path
from typing import Iterable, Optional


from evaluators.hf_config import hf_config_object
from recommender.core.errors import UserError
from recommender.core.gguf_header import ALIGNMENT, read_header
from recommender.core.records import ModelSpec
from recommender.model.arch import gguf_arch
from recommender.model.quant import GGML_BLOCK, ggml_nbytes, gguf_tensor_types, QUANTS, resolve_quant

log = logging.getLogger(__name__)

SYNTHETIC_VERSION = 1  # bump when the file layout / metadata written here changes (invalidates cached files)
WEIGHT_STD = 0.02  # standard deviation of the (dequantized) random matrix weights
POOL_BYTES = 8 << 20  # bytes of random data made per ggml type; tensors are written from it cyclically

# catalog quantization -> llama_ftype (gguf.LlamaFileType / llama.h), the general.file_type llama-quantize writes, for
# the types this writer makes (K-quants Q2_K/Q3_K and the I-quants need llama-quantize of a synthetic F16)
FILE_TYPE = {"F16": 1, "BF16": 32, "Q8_0": 7, "Q6_K": 18, "Q5_K_M": 17, "Q5_K_S": 16, "Q4_K_M": 15, "Q4_K_S": 14,
             "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9}
GGML_QNT_VERSION = 2  # ggml.h GGML_QNT_VERSION, written by llama-quantize as general.quantization_version

# Typical hyper-parameters of each architecture, for keys a ModelSpec does not carry. None of them changes the
# amount of work per token (they only move rotary frequencies, norm epsilons and logit caps).
_ROPE_FREQ_BASE = {"llama": 500_000.0, "qwen2": 1_000_000.0, "qwen2moe": 1_000_000.0, "qwen3": 1_000_000.0,
                   "qwen3moe": 1_000_000.0, "gemma3": 1_000_000.0}
_RMS_EPS = {"llama": 1e-5, "gemma": 1e-6, "gemma2": 1e-6, "gemma3": 1e-6, "phi3": 1e-5, "internlm2": 1e-5,
            "baichuan": 1e-6, "minicpm": 1e-5, "deepseek2": 1e-6}
DEFAULT_CONTEXT = 4096  # context_length when the spec has no max_position_embeddings

# tokenizer.ggml.token_type values (gguf.TokenType / llama.h llama_token_type)
_TT_NORMAL, _TT_UNKNOWN, _TT_CONTROL, _TT_UNUSED, _TT_BYTE = 1, 2, 3, 5, 6
# <unk>, <s>, </s>, the 256 byte tokens llama.cpp's SPM loader looks up (byte_to_token('\n')), and <|endoftext|>,
# which llama.cpp's vocab loader looks up for any model whose general.name contains "phi-3" / "phi3"
_SPM_SPECIAL = ("<unk>", "<s>", "</s>")
_SPM_EXTRA_CONTROL = ("<|endoftext|>",)
_SPM_MIN_VOCAB = len(_SPM_SPECIAL) + 256 + len(_SPM_EXTRA_CONTROL)


# ----------------------------------------------------------------------------------------------------------------
# Valid random blocks
# ----------------------------------------------------------------------------------------------------------------
def _f16(x):
    import numpy as np  # noqa: PLC0415

    return np.asarray(x, dtype=np.float32).astype(np.float16)


def _jitter(rng, n: int, base: float):
    """Per-block scales: base times a factor in [0.75, 1.25)."""
    return base * rng.uniform(0.75, 1.25, size=n)


def _pack_k_scales(sc, m):
    """Pack eight 6-bit scales and mins per super-block into the 12-byte K_SCALE_SIZE field (ggml-quants.c
    quantize_row_q4_K_ref; inverse of gguf-py's Q4_K.get_scale_min)."""
    import numpy as np  # noqa: PLC0415

    sc = sc.astype(np.uint8)
    m = m.astype(np.uint8)
    out = np.empty((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 0x3F) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (m[:, 0:4] & 0x3F) | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((m[:, 4:8] & 0x0F) << 4)
    return out


def random_blocks(ggml_type: str, n_blocks: int, rng, std: float = WEIGHT_STD):
    """``n_blocks`` valid random ggml blocks of ``ggml_type`` as a flat uint8 array (``n_blocks * block_bytes``).

    Layouts (ggml-common.h): Q4_0 {d f16, qs[16]}; Q4_1 {d, m f16, qs[16]}; Q5_0 {d f16, qh[4], qs[16]};
    Q5_1 {d, m f16, qh[4], qs[16]}; Q8_0 {d f16, qs[32] int8}; Q4_K {d, dmin f16, scales[12], qs[128]};
    Q5_K {d, dmin f16, scales[12], qh[32], qs[128]}; Q6_K {ql[128], qh[64], scales[16] int8, d f16}; MXFP4 {e E8M0,
    qs[16]} (the routed experts of a native-MXFP4 layout: gpt-oss, DeepSeek-V4).
    Quant bits are uniform random; scales are small finite f16 values and the offsets (m, dmin * min) cancel the
    mean of the unsigned quants, so dequantized values have mean ~0 and standard deviation ~``std``.
    F32 / F16 / BF16: normal(0, std) elements (``n_blocks`` elements).
    """
    import numpy as np  # noqa: PLC0415

    blck, nbytes = GGML_BLOCK[ggml_type]
    n = int(n_blocks)

    def u8(count: int):
        return rng.integers(0, 256, size=(n, count), dtype=np.uint8)

    def fields(*parts):
        return np.concatenate([p.reshape(n, -1).view(np.uint8) for p in parts], axis=1)

    uni4 = np.sqrt((16 * 16 - 1) / 12)  # std of a uniform 0..15 quant
    uni5 = np.sqrt((32 * 32 - 1) / 12)
    uni6 = np.sqrt((64 * 64 - 1) / 12)
    uni8 = np.sqrt((256 * 256 - 1) / 12)
    if ggml_type == "F32":
        out = rng.normal(0.0, std, size=n).astype(np.float32).view(np.uint8)
    elif ggml_type == "F16":
        out = rng.normal(0.0, std, size=n).astype(np.float16).view(np.uint8)
    elif ggml_type == "BF16":
        f = rng.normal(0.0, std, size=n).astype(np.float32)
        out = (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)  # truncation: fine for random values
    elif ggml_type == "Q8_0":
        out = fields(_f16(_jitter(rng, n, std / uni8)), u8(32))
    elif ggml_type == "Q4_0":  # y = d * (q - 8)
        out = fields(_f16(_jitter(rng, n, std / uni4)), u8(16))
    elif ggml_type == "Q4_1":  # y = d * q + m
        d = _jitter(rng, n, std / uni4)
        out = fields(_f16(d), _f16(-7.5 * d), u8(16))
    elif ggml_type == "Q5_0":  # y = d * (q - 16), q = 4 low bits | 1 high bit
        out = fields(_f16(_jitter(rng, n, std / uni5)), u8(4), u8(16))
    elif ggml_type == "Q5_1":
        d = _jitter(rng, n, std / uni5)
        out = fields(_f16(d), _f16(-15.5 * d), u8(4), u8(16))
    elif ggml_type in ("Q4_K", "Q5_K"):
        # y = d * sc * q - dmin * m per 32-element sub-block; m = sc and dmin = (qmax / 2) * d centre the quants
        sc = rng.integers(8, 32, size=(n, 8))
        sc_rms = float(np.sqrt(np.mean(np.arange(8, 32) ** 2)))
        if ggml_type == "Q4_K":
            d = _jitter(rng, n, std / (sc_rms * uni4))
            out = fields(_f16(d), _f16(7.5 * d), _pack_k_scales(sc, sc), u8(128))
        else:
            d = _jitter(rng, n, std / (sc_rms * uni5))
            out = fields(_f16(d), _f16(15.5 * d), _pack_k_scales(sc, sc), u8(32), u8(128))
    elif ggml_type == "Q6_K":  # y = d * scales[j] * (q - 32)
        mag = rng.integers(4, 16, size=(n, 16))
        sign = np.where(rng.integers(0, 2, size=(n, 16)) == 1, 1, -1)
        scales = (mag * sign).astype(np.int8)
        sc_rms = float(np.sqrt(np.mean(np.arange(4, 16) ** 2)))
        d = _jitter(rng, n, std / (sc_rms * uni6))
        out = fields(u8(128), u8(64), scales, _f16(d))
    elif ggml_type == "MXFP4":  # block_mxfp4 {e E8M0 scale, qs[16]}: y = 2^(e - 127) x kvalues_mxfp4[q] (|kv| <= 6)
        e = rng.integers(117, 121, size=(n, 1)).astype(np.uint8)  # 2^-10 .. 2^-7: |y| at most ~0.05
        out = fields(e, u8(16))
    else:
        raise ValueError(f"no random block generator for ggml type {ggml_type}")
    out = np.ascontiguousarray(out).reshape(-1)
    assert out.nbytes == n * nbytes and blck >= 1
    return out


class _Pools:
    """One pool of valid random blocks per ggml type, made on first use."""

    def __init__(self, rng, pool_bytes: int = POOL_BYTES):
        self.rng = rng
        self.pool_bytes = pool_bytes
        self.pools: dict[str, memoryview] = {}

    def get(self, ggml_type: str) -> tuple[memoryview, int]:
        _blck, nbytes = GGML_BLOCK[ggml_type]
        if ggml_type not in self.pools:
            n = max(1, self.pool_bytes // nbytes)
            self.pools[ggml_type] = memoryview(random_blocks(ggml_type, n, self.rng).tobytes())
        return self.pools[ggml_type], nbytes

    def write(self, fout, ggml_type: str, total: int) -> None:
        """Write ``total`` bytes of ``ggml_type`` blocks, cycling through the pool from a random block."""
        pool, unit = self.get(ggml_type)
        n_units = len(pool) // unit
        pos = int(self.rng.integers(0, n_units)) * unit
        left = total
        while left:
            take = min(left, len(pool) - pos)
            fout.write(pool[pos:pos + take])
            left -= take
            pos = 0


def _one_d_tensor(name: str, n: int, rng):
    """F32 data of a 1-D tensor: norms ~1.0, biases and gates normal(0, 0.02)."""
    import numpy as np  # noqa: PLC0415

    if name.endswith("norm.weight"):
        return (1.0 + rng.normal(0.0, WEIGHT_STD, size=n)).astype(np.float32)
    return rng.normal(0.0, WEIGHT_STD, size=n).astype(np.float32)


# ----------------------------------------------------------------------------------------------------------------
# Metadata
# ----------------------------------------------------------------------------------------------------------------
def _swa_pattern(spec: ModelSpec, default: int) -> int:
    """llama.cpp's sliding_window_pattern p (layer il uses the window unless il % p == p - 1) giving the spec's
    number of windowed layers: the architecture's default when it does, else the smallest that does."""
    L, n_swa = spec.num_layers, spec.num_swa_layers
    if L - L // default == n_swa:
        return default
    for p in range(2, L + 2):
        if L - L // p == n_swa:
            return p
    return default


def _add_arch_metadata(w, spec: ModelSpec, arch: str) -> None:
    hd = spec.head_dim
    w.add_vocab_size(spec.vocab_size)
    w.add_context_length(spec.max_position_embeddings or DEFAULT_CONTEXT)
    w.add_embedding_length(spec.hidden_size)
    w.add_block_count(spec.num_layers + spec.nextn_layers)  # the converter counts appended MTP blocks in
    nemotron = arch in ("nemotron_h", "nemotron_h_moe")
    if nemotron:
        # conversion/nemotron.py: per-layer arrays -- head_count_kv only on attention layers, feed_forward_length only on
        # MLP / MoE layers (llama.cpp marks a layer recurrent when both are 0); the MTP block has both
        pattern = spec.layer_pattern or ""
        kinds = list(pattern) + ["*E"] * spec.nextn_layers
        ff = spec.moe_intermediate_size if spec.num_experts else spec.intermediate_size
        w.add_feed_forward_length([ff if ("E" in k or "-" in k) else 0 for k in kinds])
    else:
        w.add_feed_forward_length(spec.intermediate_size or spec.moe_intermediate_size)
    step = arch == "step35"
    if step:
        # conversion/step3.py Step35Model: per-layer head_count / head_count_kv (attention_other_setting's heads on
        # the sliding layers, MTP blocks included) and the sliding-window pattern over every block
        types = spec.attn_layer_types or ""
        w.add_head_count([(spec.swa_num_attention_heads or spec.num_attention_heads) if c == "S"
                          else spec.num_attention_heads for c in types])
    else:
        w.add_head_count(spec.num_attention_heads)
    if arch == "lfm2":
        # conversion/lfm2.py: no KV heads on the short-convolution layers, their cache length
        w.add_head_count_kv([spec.num_kv_heads if k == "*" else 0 for k in spec.layer_pattern or ""])
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_rope_dimension_count(hd)
        w.add_shortconv_l_cache(spec.linear_conv_kernel)
    elif nemotron:
        w.add_head_count_kv([spec.num_kv_heads if "*" in k else 0 for k in kinds])
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_rope_dimension_count(hd)
        w.add_layer_norm_eps(1e-5)
    elif spec.is_mla:
        # the split MLA layout recommender.model.arch lists (attn_k_b / attn_v_b), with the keys convert_hf_to_gguf.py
        # writes for it (DeepseekV2Model.set_gguf_parameters): MQA over the latent -- one KV head whose key is
        # kv_lora_rank + rope wide and whose value is kv_lora_rank wide -- and the per-head sizes in *_mla. llama.cpp
        # then caches the compressed latent (hparams.is_mla(): n_embd_head_k_mla != 0).
        w.add_head_count_kv(1)
        w.add_key_length(spec.kv_lora_rank + spec.qk_rope_head_dim)
        w.add_value_length(spec.kv_lora_rank)
        w.add_key_length_mla(spec.qk_nope_head_dim + spec.qk_rope_head_dim)
        w.add_value_length_mla(spec.v_head_dim)
        w.add_rope_dimension_count(spec.qk_rope_head_dim)
        w.add_q_lora_rank(spec.q_lora_rank)
        w.add_kv_lora_rank(spec.kv_lora_rank)
    else:
        w.add_head_count_kv([spec.num_kv_heads] * len(types) if step else spec.num_kv_heads)
        w.add_key_length(hd)
        w.add_value_length(hd)
        # Qwen3-Next / Qwen3.5 partial_rotary_factor 0.25; DeepSeek-V4's rotary part: _add_deepseek4_metadata
        if arch != "deepseek4":
            w.add_rope_dimension_count(hd // 4 if arch in ("qwen3next", "qwen35", "qwen35moe") else hd)
    w.add_layer_norm_rms_eps(_RMS_EPS.get(arch, 1e-6))
    w.add_rope_freq_base(_ROPE_FREQ_BASE.get(arch, 10_000.0))
    if spec.num_experts:
        w.add_expert_count(spec.num_experts)
        w.add_expert_used_count(spec.num_experts_per_tok)
        w.add_expert_feed_forward_length(spec.moe_intermediate_size)
        if spec.num_shared_experts:
            w.add_expert_shared_count(spec.num_shared_experts)
            if spec.shared_expert_intermediate_size:
                w.add_expert_shared_feed_forward_length(spec.shared_expert_intermediate_size)
        if arch == "minimax-m2":
            w.add_uint32(f"{arch}.expert_gating_func", 2)  # sigmoid (config scoring_func; llama.cpp aborts without)
        if arch == "hy_v3":
            # conversion/hunyuan.py HYV3Model.set_gguf_parameters: sigmoid router, route_norm, router_scaling_factor
            w.add_uint32(f"{arch}.expert_gating_func", 2)
            w.add_expert_weights_norm(True)
            w.add_expert_weights_scale(2.826)
            if spec.nextn_layers:
                w.add_nextn_predict_layers(spec.nextn_layers)
        if nemotron:
            w.add_expert_weights_norm(True)  # NemotronHConfig norm_topk_prob, routed_scaling_factor
            w.add_expert_weights_scale(2.5)
            if spec.moe_latent_size:
                w.add_uint32(f"{arch}.moe_latent_size", spec.moe_latent_size)
        if arch in ("deepseek2", "deepseek32", "glm-dsa"):
            if not spec.num_shared_experts:
                w.add_expert_shared_count(0)  # required by llama.cpp's deepseek2 loader
            w.add_expert_weights_scale(1.0)
            w.add_leading_dense_block_count(spec.first_k_dense_layers)
    if step:
        _add_step35_metadata(w, spec, arch)
    if arch == "deepseek4":
        _add_deepseek4_metadata(w, spec, arch)
    if arch in ("deepseek32", "glm-dsa"):
        _add_dsa_metadata(w, spec, arch)
    if nemotron:
        # conversion/mamba.py Mamba2Model / granite.py GraniteHybridModel.set_gguf_parameters
        w.add_ssm_conv_kernel(spec.linear_conv_kernel)
        w.add_ssm_state_size(spec.linear_key_head_dim)
        w.add_ssm_group_count(spec.linear_num_key_heads)
        w.add_ssm_time_step_rank(spec.linear_num_value_heads)
        w.add_ssm_inner_size(spec.linear_value_head_dim * spec.linear_num_value_heads)
        if spec.nextn_layers:
            w.add_nextn_predict_layers(spec.nextn_layers)
    if arch in ("qwen3next", "qwen35", "qwen35moe"):
        # conversion/qwen.py Qwen3NextModel.set_gguf_parameters
        w.add_ssm_conv_kernel(spec.linear_conv_kernel)
        w.add_ssm_state_size(spec.linear_key_head_dim)
        w.add_ssm_group_count(spec.linear_num_key_heads)
        w.add_ssm_time_step_rank(spec.linear_num_value_heads)
        w.add_ssm_inner_size(spec.linear_value_head_dim * spec.linear_num_value_heads)
        w.add_full_attention_interval(spec.full_attention_interval)
        if spec.nextn_layers:
            w.add_nextn_predict_layers(spec.nextn_layers)
        if arch != "qwen3next":
            # required by the qwen35 / qwen35moe loaders (conversion/qwen.py _Qwen35MRopeMixin default [11, 11, 10, 0])
            w.add_rope_dimension_sections([11, 11, 10, 0])
    if arch == "gemma2":
        w.add_sliding_window(spec.sliding_window or 4096)
        if spec.num_swa_layers and spec.num_swa_layers != (spec.num_layers + 1) // 2:
            w.add_sliding_window_pattern(_swa_pattern(spec, 2))
        w.add_attn_logit_softcapping(50.0)  # Gemma-2 config attn_logit_softcapping / final_logit_softcapping
        w.add_final_logit_softcapping(30.0)
    elif arch == "gemma3" and spec.sliding_window and spec.num_swa_layers:
        w.add_sliding_window(spec.sliding_window)
        w.add_sliding_window_pattern(_swa_pattern(spec, 6))
        w.add_rope_freq_base_swa(10_000.0)
    elif arch == "olmo2" and spec.sliding_window and spec.num_swa_layers:
        # OLMo-3 (conversion/olmo.py Olmo2Model.set_gguf_parameters writes the window and the layer pattern;
        # src/models/olmo2.cpp load_swa_pattern(ml, 4): three windowed layers, then one full)
        w.add_sliding_window(spec.sliding_window)
        w.add_sliding_window_pattern(_swa_pattern(spec, 4))


def _add_step35_metadata(w, spec: ModelSpec, arch: str) -> None:
    """The keys conversion/step3.py Step35Model.set_gguf_parameters writes beside the generic ones (written above) and
    src/models/step35.cpp load_arch_hparams reads: the window, the per-block sliding pattern (required), the shared
    expert width, the leading dense blocks, the MTP block count, and the router scale / normalisation (the published
    configs' moe_router_scaling_factor 3.0, norm_expert_weight true; they change no tensor shape and no cache size)."""
    w.add_sliding_window(spec.sliding_window or 512)
    w.add_sliding_window_pattern([c == "S" for c in spec.attn_layer_types or ""])
    w.add_rope_freq_base_swa(10_000.0)
    if spec.num_experts:
        w.add_leading_dense_block_count(spec.first_k_dense_layers)
        w.add_expert_weights_scale(3.0)
        w.add_expert_weights_norm(True)
    if spec.nextn_layers:
        w.add_nextn_predict_layers(spec.nextn_layers)


def _add_deepseek4_metadata(w, spec: ModelSpec, arch: str) -> None:
    """The keys conversion/deepseek.py DeepseekV4Model.set_gguf_parameters writes and src/models/deepseek4.cpp
    load_arch_hparams reads (the generic ones -- heads, key / value length, experts -- are written above), by their
    names in the vendored gguf-py constants.py (written as plain keys: the installed gguf package may predate them).
    The ratios, groups, ranks and counts are the spec's; the others get the published DeepSeek-V4-Flash config.json's
    values (sources/configs/deepseek-ai__DeepSeek-V4-Flash.json: swiglu_limit 10, routed_scaling_factor 1.5,
    norm_topk_prob, index_topk 512, compress_rope_theta 160000, hc_sinkhorn_iters 20, hc_eps 1e-6); they change no
    tensor shape and no cache size."""
    ratio = {"W": 0, "C": 4, "H": 128}
    n = spec.num_layers
    u32, f32 = w.add_uint32, w.add_float32
    u32(f"{arch}.rope.dimension_count", spec.qk_rope_head_dim)
    u32(f"{arch}.attention.q_lora_rank", spec.q_lora_rank)
    u32(f"{arch}.attention.sliding_window", spec.sliding_window or 128)
    f32(f"{arch}.expert_weights_scale", 1.5)
    w.add_bool(f"{arch}.expert_weights_norm", True)
    u32(f"{arch}.expert_gating_func", DSV4_GATING_SQRTSOFTPLUS)
    w.add_array(f"{arch}.swiglu_clamp_exp", [10.0] * n)
    w.add_array(f"{arch}.swiglu_clamp_shexp", [10.0] * n)
    u32(f"{arch}.attention.indexer.head_count", spec.indexer_heads)
    u32(f"{arch}.attention.indexer.key_length", spec.indexer_head_dim)
    u32(f"{arch}.attention.indexer.top_k", 512)
    u32(f"{arch}.attention.output_group_count", spec.o_groups)
    u32(f"{arch}.attention.output_lora_rank", spec.o_lora_rank)
    w.add_array(f"{arch}.attention.compress_ratios", [ratio[c] for c in spec.compress_pattern or ""])
    f32(f"{arch}.attention.compress_rope_freq_base", 160_000.0)
    u32(f"{arch}.hyper_connection.count", spec.hyper_connections)
    u32(f"{arch}.hyper_connection.sinkhorn_iterations", 20)
    f32(f"{arch}.hyper_connection.epsilon", 1e-6)
    u32(f"{arch}.hash_layer_count", spec.hash_layers)
    u32(f"{arch}.embedding_length_out", spec.hidden_size * spec.hyper_connections)


def _add_dsa_metadata(w, spec: ModelSpec, arch: str) -> None:
    """The DeepSeek-sparse-attention keys conversion/deepseek.py DeepseekV32Model / conversion/glm.py GlmMoeDsaModel
    write beside DeepseekV2Model's (written above): attention.indexer.head_count / key_length / top_k, the MTP block
    count, GLM-5.2's indexer.types (written only where a layer is "shared", as the converter writes it only when the
    config lists them), and the sigmoid gating src/models/deepseek32.cpp requires (config scoring_func sigmoid)."""
    u32 = w.add_uint32
    u32(f"{arch}.attention.indexer.head_count", spec.indexer_heads)
    u32(f"{arch}.attention.indexer.key_length", spec.indexer_head_dim)
    u32(f"{arch}.attention.indexer.top_k", spec.indexer_top_k or 2048)
    if spec.indexer_pattern and "S" in spec.indexer_pattern:
        w.add_array(f"{arch}.attention.indexer.types", [c == "F" for c in spec.indexer_pattern])
    if spec.nextn_layers:
        w.add_nextn_predict_layers(spec.nextn_layers)
    u32(f"{arch}.expert_gating_func", 2)  # gguf-py ExpertGatingFuncType.SIGMOID
    w.add_bool(f"{arch}.expert_weights_norm", True)  # config norm_topk_prob


# gguf-py constants.py ExpertGatingFuncType.SQRTSOFTPLUS (LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS)
DSV4_GATING_SQRTSOFTPLUS = 4


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------------------------
def _copy_vocab(w, vocab_gguf: Path, vocab_size: int, gguf) -> Optional[str]:
    """Copy the tokenizer.* keys of a vocab-only GGUF; pad the token arrays with unused ``[PAD<i>]`` tokens up to
    ``vocab_size``. Returns a label of what was done, or None when the file has more tokens than ``vocab_size``."""
    header = read_header(vocab_gguf, keep_arrays=lambda key: key.startswith("tokenizer."))
    tokens = header.get("tokenizer.ggml.tokens")
    if not tokens:
        raise UserError(f"{vocab_gguf.name} has no tokenizer.ggml.tokens", hint="give a llama.cpp vocab GGUF")
    n = len(tokens)
    if n > vocab_size:
        return None
    pad = vocab_size - n
    for key, (value, vtype, sub) in header.kv.items():
        if not key.startswith("tokenizer."):
            continue
        if pad and key == "tokenizer.ggml.tokens":
            value = value + [f"[PAD{i}]" for i in range(n, vocab_size)]
        elif pad and key == "tokenizer.ggml.token_type":
            value = value + [_TT_UNUSED] * pad
        elif pad and key == "tokenizer.ggml.scores":
            value = value + [0.0] * pad
        w.add_key_value(key, value, gguf.GGUFValueType(vtype),
                        sub_type=None if sub is None else gguf.GGUFValueType(sub))
    return f"{vocab_gguf.name} ({n} tokens" + (f" + {pad} padding)" if pad else ")")


def _synthetic_vocab(w, vocab_size: int, gguf) -> str:
    """SentencePiece-style ("llama") vocab: <unk>, <s>, </s>, <0x00>..<0xFF> (BYTE), <|endoftext|> (CONTROL), then
    filler tokens ("\u2581t<i>", NORMAL), scores 0.
    Vocabularies too small for the byte tokens get tokenizer model "none" with ``{arch}.vocab_size`` dummy tokens."""
    if vocab_size < _SPM_MIN_VOCAB:
        w.add_tokenizer_model("none")
        return f"none ({vocab_size} dummy tokens)"
    tokens = [*_SPM_SPECIAL, *(f"<0x{b:02X}>" for b in range(256)), *_SPM_EXTRA_CONTROL]
    types = [_TT_UNKNOWN, _TT_CONTROL, _TT_CONTROL] + [_TT_BYTE] * 256 + [_TT_CONTROL] * len(_SPM_EXTRA_CONTROL)
    n_fill = vocab_size - len(tokens)
    tokens += [f"\u2581t{i}" for i in range(n_fill)]
    types += [_TT_NORMAL] * n_fill
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_key_value(gguf.Keys.Tokenizer.SCORES, [0.0] * vocab_size, gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.FLOAT32)
    w.add_key_value(gguf.Keys.Tokenizer.TOKEN_TYPE, types, gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.INT32)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    return f"synthetic-spm ({vocab_size} tokens)"


# ----------------------------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------------------------
def synthetic_name(spec: ModelSpec) -> str:
    """general.name of a synthetic file of ``spec``."""
    return "synthetic-" + spec.name


def build_synthetic_gguf(spec: ModelSpec, quant: str, out_path: Path, *, seed: int = 0,
                         vocab_gguf: Optional[Path] = None) -> Path:
    """Write a random-weight GGUF of ``spec`` in ``quant`` (F16, BF16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, Q4_1) to
    ``out_path`` and return the path.

    The tensors (names, shapes, ggml types) are exactly ``recommender.model.quant.gguf_tensor_types(spec, quant)``, so
    the tensor data section weighs ``recommender.model.quant.weights_bytes(spec, quant)``; the architecture metadata is
    what llama.cpp's loader needs for ``gguf_arch(spec)`` (block count, widths, head counts and sizes, experts,
    MLA ranks, Gemma sliding windows).

    Hyper-parameters a ModelSpec does not carry get typical values for the architecture: RMS-norm epsilon, RoPE
    frequency base (and the Gemma-3 local base), Gemma-2 logit soft-capping, DeepSeek expert weight scale, the
    rotary dimension (= head size). These values do not change the speed or memory of inference: they change no
    tensor shape and no amount of work per token.

    Tokenizer: with ``vocab_gguf`` (a llama.cpp vocab-only GGUF, e.g. ggml-vocab-qwen2.gguf) its ``tokenizer.*``
    keys are copied when it has at most ``spec.vocab_size`` tokens (the token list is padded with unused
    ``[PAD<i>]`` tokens up to ``spec.vocab_size``; llama.cpp takes a token list longer than the merges); otherwise
    a synthetic SentencePiece-style vocab is written. Token text does not matter for speed: probes feed token ids.

    The file also carries ``general.name`` = "synthetic-<model name>", ``recommender.synthetic`` = true,
    ``recommender.source_model`` = ``spec.id``, ``recommender.quant``, ``recommender.synthetic_version`` and
    ``recommender.vocab``. Memory use is a few MiB of random blocks per ggml type, whatever the model size; the
    file is written to a temporary name beside ``out_path`` and renamed when complete.
    """
    try:
        import gguf  # noqa: PLC0415
        import numpy as np  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - both are dependencies of the probe environment
        raise UserError("building a synthetic GGUF needs the 'gguf' and 'numpy' packages",
                        hint="pip install gguf numpy") from e
    q = quant if quant in QUANTS else resolve_quant(quant)
    if q not in FILE_TYPE:
        raise UserError(f"{q} is not a GGUF quantization", hint=f"GGUF types: {', '.join(FILE_TYPE)}")
    out_path = Path(out_path)
    arch = gguf_arch(spec)
    tensors = gguf_tensor_types(spec, q)
    data_bytes = sum(ggml_nbytes(t, s) for _n, s, t in tensors)

    out_path.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(out_path.parent).free
    need = data_bytes + (64 << 20)
    if free < need:
        raise UserError(f"not enough disk space for a synthetic {spec.name} {q} GGUF: it needs about "
                        f"{need / 2**30:.1f} GiB, {out_path.parent} has {free / 2**30:.1f} GiB free",
                        hint="free some space or give another cache directory")

    rng = np.random.default_rng(seed)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.partial")
    w = gguf.GGUFWriter(str(tmp), arch)
    try:
        w.add_name(synthetic_name(spec))
        w.add_file_type(FILE_TYPE[q])
        if QUANTS[q].family == "gguf":
            w.add_quantization_version(GGML_QNT_VERSION)
        w.add_bool("recommender.synthetic", True)
        w.add_string("recommender.source_model", spec.id)
        w.add_string("recommender.quant", q)
        w.add_uint32("recommender.synthetic_version", SYNTHETIC_VERSION)
        w.add_uint64("recommender.seed", seed)
        _add_arch_metadata(w, spec, arch)
        vocab_label = None
        if vocab_gguf is not None:
            vocab_label = _copy_vocab(w, Path(vocab_gguf), spec.vocab_size, gguf)
            if vocab_label is None:
                log.warning("%s has more tokens than %s's vocab_size %d: writing a synthetic vocab instead",
                            Path(vocab_gguf).name, spec.id, spec.vocab_size)
        if vocab_label is None:
            vocab_label = _synthetic_vocab(w, spec.vocab_size, gguf)
        w.add_string("recommender.vocab", vocab_label)

        for name, shape, ggml_type in tensors:
            qtype = gguf.GGMLQuantizationType[ggml_type]
            # numpy-order shape (ne0 last); a non-uint8 dtype tells GGUFWriter the shape is in elements
            w.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), ggml_nbytes(ggml_type, shape),
                              raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        fout = w.fout[0]
        pools = _Pools(rng)
        for name, shape, ggml_type in tensors:
            fout.write(b"\0" * ((-fout.tell()) % ALIGNMENT))
            nbytes = ggml_nbytes(ggml_type, shape)
            if len(shape) == 1:
                assert ggml_type == "F32", (name, ggml_type)
                fout.write(_one_d_tensor(name, shape[0], rng).tobytes())
            elif ggml_type == "I32":
                # DeepSeek-V4's token-id -> expert-id table: valid expert ids (random ones would index past the experts)
                fout.write(rng.integers(0, max(spec.num_experts, 1), size=nbytes // 4, dtype=np.int32).tobytes())
            else:
                pools.write(fout, ggml_type, nbytes)
        fout.write(b"\0" * ((-fout.tell()) % ALIGNMENT))
        w.close()
        os.replace(tmp, out_path)
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    return out_path


def _slug(model_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "__", model_id)


def synthetic_path(spec: ModelSpec, quant: str, cache_dir: Path) -> Path:
    """Where ``cached_synthetic_gguf`` keeps the file of (spec, quant)."""
    q = quant if quant in QUANTS else resolve_quant(quant)
    return Path(cache_dir) / f"{_slug(spec.id)}.{q}.synthetic.gguf"


def synthetic_file_matches(path: Path, spec: ModelSpec, quant: str, *, vocab_gguf: Optional[Path] = None) -> bool:
    """True when ``path`` is a complete synthetic GGUF of (spec, quant) made by this version of the builder: its
    header names the model, the quantization and the builder version, and lists exactly the expected tensors, and
    the file is long enough to hold them. With ``vocab_gguf``, the file must also carry that vocab."""
    try:
        import gguf  # noqa: PLC0415

        q = quant if quant in QUANTS else resolve_quant(quant)
        path = Path(path)
        if not path.is_file():
            return False
        h = read_header(path)
        if (h.get("general.name") != synthetic_name(spec) or h.get("recommender.source_model") != spec.id
                or h.get("recommender.quant") != q or h.get("recommender.synthetic_version") != SYNTHETIC_VERSION
                or h.get("general.architecture") != gguf_arch(spec)):
            return False
        if vocab_gguf is not None and not str(h.get("recommender.vocab") or "").startswith(Path(vocab_gguf).name):
            return False
        expected = [(n, tuple(s), t) for n, s, t in gguf_tensor_types(spec, q)]
        found = [(n, tuple(s), gguf.GGMLQuantizationType(t).name) for n, s, t, _o in h.tensors]
        if found != expected:
            return False
        end = max((h.data_offset + o + ggml_nbytes(t, s) for (_n, s, t), (_n2, _s2, _t2, o) in
                   zip(expected, h.tensors, strict=True)), default=0)
        return end <= h.file_bytes
    except Exception:  # noqa: BLE001 - unreadable / truncated / foreign file: rebuild it
        return False


def cached_synthetic_gguf(spec: ModelSpec, quant: str, cache_dir: Path, *, seed: int = 0,
                          vocab_gguf: Optional[Path] = None) -> Path:
    """The synthetic GGUF of (spec, quant) in ``cache_dir``: reused when its header matches
    (``synthetic_file_matches``), else (re)built with ``build_synthetic_gguf``."""
    path = synthetic_path(spec, quant, cache_dir)
    if synthetic_file_matches(path, spec, quant, vocab_gguf=vocab_gguf):
        return path
    return build_synthetic_gguf(spec, quant, path, seed=seed, vocab_gguf=vocab_gguf)


# llama.cpp vocab-only GGUFs that fit catalog families (tokenizer model, token count): Qwen2/2.5/3 (151,936 tokens,
# Qwen2.5 >= 7B pad to 152,064) and Llama-3 (128,256).
_VOCAB_FILES = (("qwen", "ggml-vocab-qwen2.gguf"), ("llama", "ggml-vocab-llama-bpe.gguf"))


def find_vocab_gguf(spec: ModelSpec, search_dirs: Iterable[Path] = ()) -> Optional[Path]:
    """A llama.cpp vocab-only GGUF for ``spec``'s family found in ``search_dirs`` (then ``$RECOMMENDER_VOCAB_DIR``
    and ``.device/vocab`` of the current directory), or None. Only files with a token count that fits are
    returned by ``build_synthetic_gguf`` anyway (it falls back to a synthetic vocab)."""
    dirs = [Path(d) for d in search_dirs]
    if os.environ.get("RECOMMENDER_VOCAB_DIR"):
        dirs.append(Path(os.environ["RECOMMENDER_VOCAB_DIR"]))
    dirs.append(Path.cwd() / ".device" / "vocab")
    mt = spec.model_type.lower()
    for family, fname in _VOCAB_FILES:
        if family == "qwen" and not mt.startswith("qwen"):
            continue
        if family == "llama" and not (mt == "llama" and spec.vocab_size == 128_256):
            continue
        for d in dirs:
            p = d / fname
            if p.is_file():
                return p
    return None


def build_synthetic_hf_folder(hf_config: dict, dtype: str, out_dir: Path) -> Path:
    """An HF model folder (config.json + safetensors) with random weights and the exact architecture of
    ``hf_config``, for engines that load folders (vLLM). Built with transformers' ``from_config`` in host memory (the
    model's full size in RAM while saving); reused when the folder is complete."""
    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file() and any(out_dir.glob("*.safetensors")) and (out_dir / ".complete").exists():
        return out_dir
    import torch  # noqa: PLC0415
    import transformers as tf  # noqa: PLC0415

    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(hf_config_object(hf_config), dtype=getattr(torch, dtype))
    tmp = out_dir.with_name(out_dir.name + ".partial")
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / ".complete").write_text("synthetic random weights, exact architecture\n")
    if out_dir.exists():
        import shutil  # noqa: PLC0415

        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir
