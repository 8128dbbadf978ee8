"""Write small GGUF files for tests (real format, written with the `gguf` package)."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 32,
        "max_position_embeddings": 256, "tie_word_embeddings": False, "torch_dtype": "float16"}


def write_gguf(path: Path, s, quant: str) -> None:
    """Write every tensor of ``s`` the way llama-quantize would for ``quant`` (types from recommender.model.quant)."""
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


# ------------------------------------------------------------------------------------------------------------------
# Raw GGUF bytes, for hostile headers the gguf package refuses to write (counts of 2^32, wrong value types ...)
# ------------------------------------------------------------------------------------------------------------------
U32, I32, F32, BOOL, STR, ARR, U64 = 4, 5, 6, 7, 8, 9, 10


def _gguf_value(vtype: int, value) -> bytes:
    import struct

    if vtype == STR:
        b = value.encode() if isinstance(value, str) else value
        return struct.pack("<Q", len(b)) + b
    if vtype == ARR:
        sub, items, count = value if len(value) == 3 else (*value, None)
        if sub in _SCALAR:  # one pack for the whole array (a 2^24-item array took minutes item by item)
            body = struct.pack(f"<{len(items)}{_SCALAR[sub]}", *items)
        else:
            body = b"".join(_gguf_value(sub, v) for v in items)
        return struct.pack("<IQ", sub, len(items) if count is None else count) + body
    return struct.pack("<" + _SCALAR[vtype], value)


_SCALAR = {U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q"}


def raw_gguf(kv: list[tuple[str, int, object]], tensors: tuple = (), n_tensors: int | None = None,
             n_kv: int | None = None, version: int = 3) -> bytes:
    """A GGUF header with exactly these key/values (key, GGUF type, value) and tensor infos
    (name, shape, ggml type, offset); counts can be overridden to lie."""
    import struct

    out = [b"GGUF", struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                                len(kv) if n_kv is None else n_kv)]
    for key, vtype, value in kv:
        out += [_gguf_value(STR, key), struct.pack("<I", vtype), _gguf_value(vtype, value)]
    for name, shape, ttype, offset in tensors:
        out += [_gguf_value(STR, name), struct.pack("<I", len(shape)), b"".join(struct.pack("<Q", d) for d in shape),
                struct.pack("<IQ", ttype, offset)]
    data = b"".join(out)
    return data + b"\0" * ((-len(data)) % 32)


def llama_kv(**over) -> list[tuple[str, int, object]]:
    """The keys of a tiny llama GGUF (no tensors); ``over`` replaces values: block_count=(U32, 2**32 - 1)."""
    base = {"general.architecture": (STR, "llama"), "general.name": (STR, "tiny-raw"),
            "llama.block_count": (U32, 2), "llama.embedding_length": (U32, 64), "llama.feed_forward_length": (U32, 96),
            "llama.attention.head_count": (U32, 4), "llama.attention.head_count_kv": (U32, 2),
            "llama.context_length": (U32, 256), "llama.vocab_size": (U32, 32)}
    base.update(over)
    return [(k, t, v) for k, (t, v) in base.items() if t is not None]
