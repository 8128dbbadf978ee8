"""Engine-free arithmetic of a model: KV elements, recurrent state, FLOPs, MLP width, tensor-parallel divisibility,
and the per-record memo the estimator's terms use. The engines' rules (recommender.predict.engines) and the
estimator (recommender.predict.analytical) import it; it knows no engine.

Array-agnostic (issue 26): every formula here and in the estimator takes plain numbers or numpy arrays alike (one
element per configuration; a model's fields as arrays through recommender.predict.vector.Columns). The branches that
depend on a configuration or a model go through :func:`where`, :func:`minimum`, :func:`maximum`, :func:`to_int`,
:func:`round_int` and :func:`per_model`: with plain numbers they are Python's own ``a if c else b``, ``min``, ``max``,
``int`` and ``int(round())``, so the per-row path computes exactly what it did; with arrays numpy's elementwise
counterparts. One formula, two kinds of input (tests/predict/test_vector.py checks they agree).
"""

from __future__ import annotations

import functools
from typing import Callable, Optional, TypeVar

from recommender.core.records import ModelSpec

_F = TypeVar("_F", bound=Callable)
_MEMOS: list[dict] = []
MEMO_MAX_ENTRIES = 65_536  # per memo: a long process (tune, the test suite) starts it again past this


def per_record(fn: _F) -> _F:
    """A memo of a pure function of a record (its first argument: a ModelSpec or HardwareProfile) and other hashable
    positional arguments. recommend asks the same per-model and per-GPU terms for each of ~10,000 configurations.
    The record is keyed by identity and held by the memo (so its id is not reused while it is in it): records are
    values, never changed once built. Calls with keyword arguments are computed as usual. clear_memos() empties
    every memo (bench/gpu_loo.py after it replaces the family fits these terms read)."""
    memo: dict[tuple, tuple] = {}
    _MEMOS.append(memo)

    @functools.wraps(fn)
    def memoized(record, *args, **kwargs):
        if kwargs:
            return fn(record, *args, **kwargs)
        if getattr(record, "map_rows", None) is not None or is_array(*args):
            return fn(record, *args)  # arrays of configurations (recommender.predict.vector): not memoized
        key = (id(record), *args)
        hit = memo.get(key)
        if hit is not None and hit[0] is record:
            return hit[1]
        if len(memo) >= MEMO_MAX_ENTRIES:
            memo.clear()
        value = fn(record, *args)
        memo[key] = (record, value)
        return value

    return memoized  # type: ignore[return-value]


def clear_memos() -> None:
    for memo in _MEMOS:
        memo.clear()


# --- array-agnostic primitives (module docstring) -----------------------------------------------------------------
def is_array(*xs) -> bool:
    """Whether any of ``xs`` is a numpy array (or numpy scalar): the elementwise forms are used then."""
    for x in xs:
        if hasattr(x, "shape"):
            return True
    return False


def compressed(spec) -> bool:
    """Whether ``spec`` has DeepSeek-V4's compressed attention (spec.compress_pattern: its caches, states and attention
    terms have their own forms). Its configurations are predicted one by one (rank.candidates leaves them out of the
    vectorized groups), so a columns record never holds one; one that does is refused rather than mispredicted."""
    m = getattr(spec, "map_rows", None)
    if m is None:
        return bool(spec.compress_pattern)
    if m(_has_compress_pattern).any():  # the records themselves: a columns field mixes strings and 0s as strings
        raise ValueError("DeepSeek-V4 (compressed attention) rows are predicted one by one, not as columns")
    return False


def _has_compress_pattern(spec) -> bool:
    return bool(spec.compress_pattern)


def where(cond, a, b):
    """``a if cond else b``, elementwise for arrays (both sides are computed then: keep them finite)."""
    if hasattr(cond, "shape") or hasattr(a, "shape") or hasattr(b, "shape"):
        import numpy as np  # noqa: PLC0415  (numpy only where arrays are predicted)
        return np.where(cond, a, b)
    return a if cond else b


def minimum(a, b):
    if hasattr(a, "shape") or hasattr(b, "shape"):
        import numpy as np  # noqa: PLC0415
        return np.minimum(a, b)
    return min(a, b)


def maximum(a, b):
    if hasattr(a, "shape") or hasattr(b, "shape"):
        import numpy as np  # noqa: PLC0415
        return np.maximum(a, b)
    return max(a, b)


def to_int(x):
    """``int(x)`` (toward zero), elementwise for arrays (int64)."""
    if is_array(x):
        import numpy as np  # noqa: PLC0415
        return np.trunc(x).astype(np.int64)
    return int(x)


def round_int(x):
    """``int(round(x))`` (half to even, as Python's round), elementwise for arrays (int64)."""
    if is_array(x):
        import numpy as np  # noqa: PLC0415
        return np.rint(x).astype(np.int64)
    return int(round(x))


def power(a, b):
    """``a ** b``; with an array of exponents (one batch per configuration), computed for each distinct exponent as
    with that one number (numpy's scalar-exponent forms: the figures of a row do not depend on its neighbours')."""
    if not is_array(b):
        return a ** b
    import numpy as np  # noqa: PLC0415
    vals = set(b.tolist())
    if len(vals) == 1:
        return a ** vals.pop()
    a = np.broadcast_to(a, np.shape(b))
    out = np.empty(np.shape(b), dtype=float)
    for v in sorted(vals):
        m = b == v
        out[m] = a[m] ** v
    return out


def any_true(x) -> bool:
    """``bool(x)`` of a number; whether any element is true (non-zero) for an array."""
    if is_array(x):
        import numpy as np  # noqa: PLC0415
        return bool(np.any(x))
    return bool(x)


def per_model(fn: Callable, record, *args):
    """``fn(record, *args)`` of a per-model (or per-variant) term that is no arithmetic of the record's fields (a
    pattern string counted, tensors summed): with a columns record (recommender.predict.vector.Columns) it is
    computed once per distinct record and spread over the rows."""
    m = getattr(record, "map_rows", None)
    if m is not None:
        return m(fn, *args)
    return fn(record, *args)


def kv_elements_per_token_per_layer(spec: ModelSpec, mla_latent: bool = True) -> int:
    """K and V elements one token adds to one layer's cache.

    Standard / grouped-query attention: 2 x kv_heads x head_dim (the GQA-aware formula).
    MLA (DeepSeek-V2): an engine that caches the compressed latent (vLLM, llama.cpp) stores kv_lora_rank +
    qk_rope_head_dim per token (DeepSeek-V2 paper, sec. 2.1.2); one that does not (transformers' eager cache,
    ``mla_latent=False``) stores full per-head K (nope+rope) and V.
    """
    if is_array(spec.num_kv_heads):
        mla = (spec.kv_lora_rank + spec.qk_rope_head_dim if mla_latent else
               spec.num_attention_heads * (spec.qk_nope_head_dim + spec.qk_rope_head_dim + spec.v_head_dim))
        return where(spec.is_mla, mla, 2 * spec.num_kv_heads * spec.head_dim)
    if spec.is_mla:
        if not mla_latent:
            return spec.num_attention_heads * (spec.qk_nope_head_dim + spec.qk_rope_head_dim + spec.v_head_dim)
        return spec.kv_lora_rank + spec.qk_rope_head_dim
    return 2 * spec.num_kv_heads * spec.head_dim


def round_up(n: int, multiple: int) -> int:
    """n rounded up to a multiple (ggml's GGML_PAD)."""
    return -(-n // multiple) * multiple


def attention_layers(spec: ModelSpec) -> int:
    """Layers that keep a KV cache: all of them, less the linear-attention layers of a hybrid (Qwen3-Next / Qwen3.5
    Gated DeltaNet) and the Mamba-2 and MLP-only layers of a Nemotron-H pattern (ModelSpec.num_attention_layers)."""
    return spec.num_attention_layers


def attention_head_width(spec: ModelSpec) -> float:
    """Elements one query head's decode attention works over per cached token, as head_dim counts them for
    multi-head / grouped-query attention (a K dot product of head_dim and a V accumulation of head_dim, halved).
    MLA as llama.cpp runs it (src/models/deepseek2.cpp: q_nope absorbed through wk_b, build_attn over the cached
    latent, wv_b after): K is the kv_lora_rank + qk_rope_head_dim latent, V the kv_lora_rank latent (a view of it),
    so (2 x kv_lora_rank + qk_rope_head_dim) / 2 per head, not the decompressed head_dim (GLM-4.7-Flash: 544 vs 64)."""
    return where(spec.kv_lora_rank > 0, (2.0 * spec.kv_lora_rank + spec.qk_rope_head_dim) / 2.0, 1.0 * spec.head_dim)


def indexer_key_elements_per_token(spec: ModelSpec) -> int:
    """Elements one token adds to DeepSeek sparse attention's lightning-indexer key cache, all layers together
    (DeepSeek-V3.2 / GLM-5.x): src/llama-kv-cache-dsa.cpp llama_kv_cache_dsa makes kv_lid, a llama_kv_cache over
    hparams with n_head_kv 1 and key size indexer_head_size, K only (MLA hparams: has_v = !is_mla in
    src/llama-kv-cache.cpp), of the main cache's type_k and cell count, on the layers src/llama-model.cpp
    create_memory's filter_lid keeps (the trunk layers; on glm-dsa those whose indexer is "full"). 0 without one."""
    return spec.num_indexer_layers * spec.indexer_head_dim


# llama.cpp keeps recurrent states in F32 (llama_context: type_r / type_s default GGML_TYPE_F32)
RECURRENT_STATE_BYTES = 4


def recurrent_state_bytes(spec: ModelSpec, batch: int) -> int:
    """Fixed per-sequence state of the linear-attention layers of a hybrid model, independent of context length.

    llama.cpp src/llama-hparams.cpp: conv state n_embd_r = (d_conv - 1) x (d_inner + 2 x n_group x d_state) and
    delta-rule state n_embd_s = d_state x d_inner per layer and sequence, with (Qwen3-Next, conversion/qwen.py)
    d_state = linear_key_head_dim, n_group = linear_num_key_heads, d_inner = linear_value_head_dim x
    linear_num_value_heads, d_conv = linear_conv_kernel_dim; F32. Mamba-2 layers (Nemotron-H, src/models/
    nemotron-h.cpp) hold the same two states with d_state = ssm_state_size, n_group = n_groups, d_inner =
    mamba_num_heads x mamba_head_dim (the spec's linear_* fields), checked against llama.cpp's RS buffer in
    tests/probes/test_synthetic.py.
    """
    return per_model(recurrent_state_bytes_per_sequence, spec) * batch


def recurrent_state_bytes_per_sequence(spec: ModelSpec) -> int:
    """:func:`recurrent_state_bytes` of one sequence."""
    if compressed(spec):
        return dsv4_state_bytes(spec, 1)
    n = spec.num_linear_attn_layers
    if not n:
        return 0
    if spec.layer_pattern and "C" in spec.layer_pattern:
        # LFM2 short convolutions (src/llama-hparams.cpp n_embd_r: n_embd x (L_cache - 1); no n_embd_s state)
        return n * max(spec.linear_conv_kernel - 1, 0) * spec.hidden_size * RECURRENT_STATE_BYTES
    d_inner = spec.linear_value_head_dim * spec.linear_num_value_heads
    d_state, n_group = spec.linear_key_head_dim, spec.linear_num_key_heads
    conv = max(spec.linear_conv_kernel - 1, 0) * (d_inner + 2 * n_group * d_state)
    state = d_state * d_inner
    return n * (conv + state) * RECURRENT_STATE_BYTES


# DeepSeek-V4 compression ratios (src/llama-kv-cache-dsv4.h DSV4_CSA_RATIO / DSV4_HCA_RATIO) by pattern letter
DSV4_RATIO = {"C": 4, "H": 128}


def dsv4_state_bytes(spec: ModelSpec, batch: int) -> int:
    """DeepSeek-V4's compressor states, fixed per sequence (src/llama-kv-cache-dsv4.cpp llama_dsv4_comp_state: per
    layer a kv and a score tensor, F32, n_embd_state x state_size per stream): CSA layers (ratio 4, overlapping
    windows) 2 x head_dim wide x 2 x 4 rows, HCA layers (ratio 128) head_dim x 128 rows, and the lightning indexer's
    on the CSA layers 2 x indexer_head_dim x 8 rows; one stream per sequence (n_rs_seq = 0: no speculative rollback
    planes)."""
    pat = spec.compress_pattern or ""
    n_csa, n_hca = pat.count("C"), pat.count("H")
    per_seq = 2 * (n_csa * 2 * spec.head_dim * 2 * DSV4_RATIO["C"] + n_hca * spec.head_dim * DSV4_RATIO["H"]
                   + n_csa * 2 * spec.indexer_head_dim * 2 * DSV4_RATIO["C"])
    return per_seq * RECURRENT_STATE_BYTES * batch


def moe_layers(spec: ModelSpec) -> int:
    """Layers with an MoE block: the E letters of a Mamba-2 hybrid's pattern (Nemotron-H / Nemotron-3), else layer i
    for i >= first_k_dense_layers with (i + 1) % moe_layer_step == 0 (the spec's moe_layer_step field); 0 for a
    dense model."""
    if not spec.is_moe:
        return 0
    if spec.layer_pattern and "E" in spec.layer_pattern:
        return spec.layer_pattern.count("E")
    step = max(spec.moe_layer_step, 1)
    return sum(1 for i in range(spec.first_k_dense_layers, spec.num_layers) if (i + 1) % step == 0)


def delta_rule_layers(spec: ModelSpec) -> int:
    """Linear-attention layers of the delta-rule kind (Qwen3-Next / Qwen3.5 / Qwen3.6 Gated DeltaNet, Kimi Delta
    Attention): llama.cpp builds each from its own chain of small ops per decode step (src/models/qwen35.cpp,
    qwen3next.cpp build_layer_attn_linear: the short convolution, q/k L2 norms, the gated delta rule, the gated norm),
    kernel launches the per-layer cost of an attention + MLP pair does not count. 0 for the Mamba-2 (M) and LFM2
    short-convolution (C) layers of a layer pattern, which are other ops, and for every other model."""
    if spec.layer_pattern and any(c in spec.layer_pattern for c in "MC"):
        return 0
    return spec.num_linear_attn_layers


def block_layers(spec: ModelSpec) -> float:
    """Repeating layers counted as attention + MLP pairs (the unit a per-layer kernel-launch cost is for): a Mamba-2
    hybrid's pattern letters are single blocks (M: a mixer, E / -: an MLP, *: attention; src/models/nemotron-h.cpp
    builds one of them per layer), so two of them make one such layer; every other layout has both per layer."""
    if spec.layer_pattern and any(c in spec.layer_pattern for c in "ME-"):
        return len(spec.layer_pattern) / 2
    return float(spec.num_layers)


# ------------------------------------------------------------------------------------------------------------
# FLOPs
# ------------------------------------------------------------------------------------------------------------
def _dense_matmul_params(spec: ModelSpec, embd_params: int) -> int:
    """Parameters touched by matmuls for one token (active experts only; the embedding lookup is not a matmul)."""
    return maximum(where(spec.params_active, spec.params_active, spec.params_total), 1) - embd_params


def _causal_pairs(p: int, window: Optional[int]) -> float:
    """(query, key) pairs of causal attention over p tokens; with a sliding window each query sees at most w keys."""
    if window is None:
        return p * (p + 1) / 2
    if is_array(p, window):
        return where((window == 0) | (p <= window), p * (p + 1) / 2, window * (window + 1) / 2 + (p - window) * window)
    if not window or p <= window:
        return p * (p + 1) / 2
    return window * (window + 1) / 2 + (p - window) * window


def _heads_dim(spec: ModelSpec) -> int:
    return spec.num_attention_heads * where(spec.is_mla, spec.qk_nope_head_dim + spec.qk_rope_head_dim,
                                            spec.head_dim)


@per_record
def prefill_flops_parts(spec: ModelSpec, prompt_tokens: int, batch: int) -> tuple[float, float]:
    """(matmul, attention) FLOPs of a prefill of ``prompt_tokens`` x ``batch``.

    Matmuls: 2 x params x tokens (Kaplan et al. 2020, C_forward ~ 2N per token). Attention: QK^T and AV cost
    2 FLOPs x head_dim for each (query, key) pair and head -> 4 x pairs x heads x head_dim per layer, pairs counted
    causally (and within the window on sliding-window layers). The output projection runs for the last token only
    (llama.cpp and vLLM compute logits of the last position)."""
    embd = spec.vocab_size * spec.hidden_size
    out_proj = where(spec.tie_word_embeddings, 0, embd)
    matmul = _dense_matmul_params(spec, embd) - out_proj
    full = attention_layers(spec) - spec.num_swa_layers
    pairs = full * _causal_pairs(prompt_tokens, None) + spec.num_swa_layers * _causal_pairs(prompt_tokens,
                                                                                            spec.sliding_window)
    attn = 4.0 * _heads_dim(spec) * pairs + _dsa_indexer_flops(spec) * _causal_pairs(prompt_tokens, None)
    if compressed(spec):
        attn += _dsv4_attention_flops(spec, prompt_tokens, prefill=True)
    return batch * (2.0 * matmul * prompt_tokens + 2.0 * spec.vocab_size * spec.hidden_size), batch * attn


def prefill_flops(spec: ModelSpec, prompt_tokens: int, batch: int) -> float:
    """All FLOPs of a prefill (:func:`prefill_flops_parts`, summed)."""
    return sum(prefill_flops_parts(spec, prompt_tokens, batch))


@per_record
def decode_flops(spec: ModelSpec, context_tokens: int, batch: int) -> float:
    """One decode step: 2 x active params plus attention over the cached context (the window on SWA layers)."""
    embd = spec.vocab_size * spec.hidden_size
    matmul = _dense_matmul_params(spec, embd) + where(spec.tie_word_embeddings, embd, 0)
    full = attention_layers(spec) - spec.num_swa_layers
    keys = full * context_tokens + spec.num_swa_layers * minimum(context_tokens, window_or(spec, context_tokens))
    extra = _dsv4_attention_flops(spec, context_tokens, prefill=False) if compressed(spec) else 0.0
    extra = extra + _dsa_indexer_flops(spec) * context_tokens
    return batch * (2.0 * matmul + 4.0 * _heads_dim(spec) * keys + extra)


def _dsa_indexer_flops(spec: ModelSpec):
    """FLOPs per (query, key) pair of DeepSeek sparse attention's lightning indexer, all its layers together: each
    full-indexer layer scores every cached key with index_n_heads dot products of index_head_dim (2 FLOPs each;
    src/models/deepseek32.cpp / glm-dsa.cpp ggml_lightning_indexer, or indexer_k x indexer_q). llama.cpp then runs
    the MLA attention over all cached keys with the top-k as a mask (src/llama-graph.cpp, build_attn for
    llm_graph_input_attn_k_dsa: kq_mask_top_k into build_attn_mha), so the attention term stays the dense one. 0
    without an indexer."""
    return 2.0 * spec.indexer_heads * spec.indexer_head_dim * spec.num_indexer_layers


def _dsv4_attention_flops(spec: ModelSpec, tokens: int, prefill: bool) -> float:
    """DeepSeek-V4's attention beyond the sliding window (counted above), per the layout of
    src/models/deepseek4.cpp: a CSA layer (ratio 4) attends its indexer's top-k (index_topk) of the n/4 compressed
    keys and its indexer scores all of them (index_n_heads x index_head_dim per key: 2 FLOPs each); an HCA layer
    (ratio 128) attends all n/128 compressed keys. For a query at position n; a prefill sums over n = 1..tokens
    (closed forms of the sums of min(n/4, k), n/4 and n/128). 4 FLOPs x heads x head_dim per attended key, as above."""
    pat = spec.compress_pattern or ""
    n_csa, n_hca = pat.count("C"), pat.count("H")
    k = spec.indexer_top_k or tokens
    r_csa, r_hca = DSV4_RATIO["C"], DSV4_RATIO["H"]
    if prefill:
        p = float(tokens)
        csa_keys = p * p / (2 * r_csa) if p <= r_csa * k else k * p - r_csa * k * k / 2
        scored, hca_keys = p * p / (2 * r_csa), p * p / (2 * r_hca)
    else:
        csa_keys, scored, hca_keys = min(tokens / r_csa, k), tokens / r_csa, tokens / r_hca
    return (4.0 * _heads_dim(spec) * (n_csa * csa_keys + n_hca * hca_keys)
            + 2.0 * spec.indexer_heads * spec.indexer_head_dim * n_csa * scored)


def window_or(spec: ModelSpec, context_tokens):
    """``spec.sliding_window or context_tokens``: the window of a sliding-window model, else the context."""
    return where(spec.sliding_window, spec.sliding_window, context_tokens) if is_array(spec.sliding_window) \
        else (spec.sliding_window or context_tokens)


def mlp_width(spec: ModelSpec) -> int:
    """Width of the widest MLP intermediate a token's forward holds: the dense intermediate, or the active experts'."""
    return maximum(spec.intermediate_size, spec.moe_intermediate_size * maximum(spec.num_experts_per_tok, 1))


def tp_supported(spec: ModelSpec, n: int) -> Optional[str]:
    """None when a tensor-parallel engine can shard this model n ways, else why not (vLLM and SGLang:
    num_attention_heads % tp == 0; KV heads divide by tp or tp by the KV heads, which are then replicated)."""
    if spec.num_attention_heads % n:
        return f"{spec.num_attention_heads} attention heads do not divide over {n} GPUs"
    if not spec.is_mla and spec.num_kv_heads % n and n % spec.num_kv_heads:
        return f"{spec.num_kv_heads} KV heads and {n} GPUs: neither divides the other"
    return None
