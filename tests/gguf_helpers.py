"""Write small GGUF files for tests (real format, written with the `gguf` package)."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 32,
        "max_position_embeddings": 256, "tie_word_embeddings": False, "torch_dtype": "float16"}


def write_gguf(path: Path, s, quant: str) -> None:
    """Write every tensor of ``s`` the way llama-quantize would for ``quant`` (types from recommender.quant)."""
    np = pytest.importorskip("numpy")
    gguf = pytest.importorskip("gguf")
    from recommender.model.quant import gguf_tensor_types

    arch = "qwen3moe" if s.num_experts else "llama"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny-test")
    w.add_block_count(s.num_layers)
    w.add_context_length(s.max_position_embeddings)
    w.add_embedding_length(s.hidden_size)
    w.add_feed_forward_length(s.intermediate_size)
    w.add_head_count(s.num_attention_heads)
    w.add_head_count_kv(s.num_kv_heads)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    if s.num_experts:
        w.add_expert_count(s.num_experts)
        w.add_expert_used_count(s.num_experts_per_tok)
        w.add_expert_feed_forward_length(s.moe_intermediate_size)
    w.add_file_type({"F16": 1, "Q8_0": 7}[quant])
    w.add_token_list([f"t{i}" for i in range(s.vocab_size)])
    rng = np.random.default_rng(0)
    for name, shape, ggml_type in gguf_tensor_types(s, quant):
        data = rng.standard_normal(tuple(reversed(shape))).astype(np.float32)  # numpy order: ne0 last
        qtype = getattr(gguf.GGMLQuantizationType, ggml_type)
        if ggml_type == "F32":
            w.add_tensor(name, data)
        elif ggml_type == "F16":
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
