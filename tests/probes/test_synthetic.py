"""recommender.probes.synthetic: random-weight GGUFs with a catalog model's exact tensors, loaded and run by llama.cpp."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")


from recommender.model.arch import gguf_arch, read_gguf_header, spec_from_config
from recommender.model.quant import GGML_BLOCK, gguf_tensor_types, weights_bytes
from recommender.probes.synthetic import (
    build_synthetic_gguf,
    cached_synthetic_gguf,
    FILE_TYPE,
    find_vocab_gguf,
    random_blocks,
    read_header,
    synthetic_file_matches,
    synthetic_path,
)

CONFIGS = Path(__file__).resolve().parents[2] / "sources" / "configs"
TOKENS = [1, 2, 3]


def llama_cpp_log(path: Path, n_ctx: int, capfd, **kw) -> str:
    """Load a file in llama.cpp on the CPU, evaluate TOKENS, and return what llama.cpp logged (its buffer sizes)."""
    capfd.readouterr()
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_gpu_layers=0, n_threads=2, verbose=True, **kw)
    try:
        llm.eval(TOKENS)
    finally:
        llm.close()
    return capfd.readouterr().err


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def spec_of(name: str, **overrides):
    cfg = config(name)
    cfg.update(overrides)
    return spec_from_config(cfg, name.replace("__", "/", 1))


def shrunk(name: str, layers: int = 2, experts: int = 4, **extra):
    """A few-MB spec with the layout of a catalog config (same architecture, norms, biases, MoE / MLA / SWA
    structure) and small widths."""
    cfg = config(name)
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}
        cfg.pop("text_config")
    heads = cfg.get("num_attention_heads", 4)
    kv = cfg.get("num_key_value_heads", heads)
    small = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
             "num_key_value_heads": 4 if kv == heads else 2, "num_hidden_layers": layers, "vocab_size": 4096,
             "max_position_embeddings": 4096}
    if "head_dim" in cfg:
        small["head_dim"] = 64
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if cfg.get(key):
            small[key] = experts
            small["num_experts_per_tok"] = min(2, experts)
            small["moe_intermediate_size"] = 256
    if cfg.get("kv_lora_rank"):
        small.update(kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    if isinstance(cfg.get("layer_types"), list):
        small["layer_types"] = cfg["layer_types"][:layers]
    cfg.update(small)
    cfg.update(extra)
    return spec_from_config(cfg, "test/" + name.split("__", 1)[-1] + "-tiny")


@pytest.fixture(autouse=True)
def _safe_llama(monkeypatch):
    """Load models with llama.cpp's tensor validation on (``check_tensors``: every block's scales must be finite)
    and without the CPU "extra" buffer types: ggml's AMX kernels crash (SIGSEGV in ggml_backend_amx_mul_mat) on
    this VM for any quantized model, real ones included."""
    import llama_cpp.llama_cpp as low

    orig = low.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False
        p.check_tensors = True
        return p

    monkeypatch.setattr(low, "llama_model_default_params", params)


def run_llama(path: Path, n_vocab: int) -> np.ndarray:
    """Load with llama.cpp, evaluate TOKENS, return their logits (rows: tokens)."""
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_gpu_layers=0, n_threads=2, verbose=False,
                          logits_all=True)
    try:
        assert llm.n_vocab() == n_vocab
        llm.eval(TOKENS)
        return np.array(llm.scores[: len(TOKENS)], dtype=np.float32)
    finally:
        llm.close()


def assert_matches_gguf_reader(path: Path, info) -> None:
    """recommender.core.gguf_header (behind read_gguf_header) agrees with gguf-py's own GGUFReader, the reference."""
    ref = gguf.GGUFReader(str(path), "r")
    assert info.data_offset == int(ref.data_offset) and info.alignment == int(ref.alignment)
    assert [(t.name, t.shape, t.ggml_type, t.n_bytes, t.offset) for t in info.tensors] == \
        [(r.name, tuple(int(x) for x in r.shape), r.tensor_type.name, int(r.n_bytes),
          int(r.data_offset) - int(ref.data_offset)) for r in ref.tensors]
    assert info.gguf_version == int(ref.fields["GGUF.version"].contents())
    assert info.architecture == ref.fields["general.architecture"].contents()


def check_file(path: Path, spec, quant: str) -> None:
    info = read_gguf_header(path)
    assert info.tensor_data_bytes == weights_bytes(spec, quant)
    assert [(t.name, t.shape, t.ggml_type) for t in info.tensors] == \
        [(n, tuple(s), t) for n, s, t in gguf_tensor_types(spec, quant)]
    assert info.architecture == gguf_arch(spec)
    assert info.name == "synthetic-" + spec.name
    assert info.file_type == FILE_TYPE[quant]
    assert info.file_bytes - info.data_offset - info.tensor_data_bytes < 32 * (info.tensor_count + 1)  # padding only
    assert_matches_gguf_reader(path, info)
    header = read_header(path)
    assert header.get("recommender.synthetic") is True
    assert header.get("recommender.source_model") == spec.id
    assert header.get("recommender.quant") == quant


# ----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ggml_type", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K",
                                       "F16", "BF16", "F32"])
def test_random_blocks_are_valid(ggml_type):
    rng = np.random.default_rng(1)
    blck, nbytes = GGML_BLOCK[ggml_type]
    n = 2048 if blck > 1 else 65536
    raw = random_blocks(ggml_type, n, rng)
    assert raw.dtype == np.uint8 and raw.nbytes == n * nbytes
    qtype = gguf.GGMLQuantizationType[ggml_type]
    values = gguf.quants.dequantize(raw.reshape(1, -1), qtype) if blck > 1 or ggml_type == "BF16" else \
        raw.view({"F16": np.float16, "F32": np.float32}[ggml_type]).astype(np.float32)
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    assert values.size == n * blck
    assert np.isfinite(values).all()
    assert abs(values.mean()) < 0.003
    assert 0.012 < values.std() < 0.03, values.std()


SMOL = "HuggingFaceTB__SmolLM2-135M-Instruct"
QWEN3_30B = "Qwen__Qwen3-30B-A3B"


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0", "F16"])
def test_smollm2_runs_in_llama_cpp(tmp_path, quant):
    spec = spec_of(SMOL)
    path = build_synthetic_gguf(spec, quant, tmp_path / f"smol-{quant}.gguf")
    check_file(path, spec, quant)
    logits = run_llama(path, spec.vocab_size)
    assert np.isfinite(logits).all() and logits.std() > 0


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0", "F16"])
def test_tiny_moe_runs_in_llama_cpp(tmp_path, quant):
    spec = shrunk(QWEN3_30B, layers=2, experts=8)
    assert spec.num_experts == 8 and spec.num_experts_per_tok == 2 and gguf_arch(spec) == "qwen3moe"
    path = build_synthetic_gguf(spec, quant, tmp_path / f"moe-{quant}.gguf")
    assert path.stat().st_size < 20 << 20
    check_file(path, spec, quant)
    logits = run_llama(path, spec.vocab_size)
    assert np.isfinite(logits).all() and logits.std() > 0


@pytest.mark.parametrize("name,layers", [
    ("Qwen__Qwen2.5-1.5B", 2),  # qwen2: q/k/v biases, tied embeddings
    ("google__gemma-2-2b", 2),  # gemma2: post norms, sliding window, soft-capping
    ("google__gemma-3-1b-it", 6),  # gemma3: q/k norms, 5 local : 1 global layers
    ("microsoft__Phi-3.5-mini-instruct", 2),  # phi3: fused qkv and gate/up
    ("deepseek-ai__DeepSeek-V2-Lite", 2),  # deepseek2: MLA, one leading dense layer, shared experts
    ("mistralai__Mixtral-8x7B-v0.1", 2),  # llama with 8 experts
    ("internlm__internlm2_5-7b-chat", 2),
    ("baichuan-inc__Baichuan2-7B-Chat", 2),
    ("openbmb__MiniCPM-2B-sft-bf16", 2),
    ("MiniMaxAI__MiniMax-M2.5", 2),  # minimax-m2: full-width q/k norms, router bias, every layer MoE
    ("zai-org__GLM-4.7-Flash", 2),  # GLM-4.7-Flash: deepseek2 (MLA + q_lora, leading dense layer, shared expert)
    ("tencent__Hy3", 3),  # hy_v3: per-head q/k norms, leading dense layer, router bias, shared expert, MTP block
])
def test_other_architectures_run(tmp_path, name, layers):
    spec = shrunk(name, layers=layers, experts=8)
    path = build_synthetic_gguf(spec, "Q4_K_M", tmp_path / "m.gguf")
    check_file(path, spec, "Q4_K_M")
    logits = run_llama(path, spec.vocab_size)
    assert np.isfinite(logits).all()
    if gguf_arch(spec) == "gemma3":
        header = read_header(path)
        assert header.get("gemma3.attention.sliding_window") == 512
        assert header.get("gemma3.attention.sliding_window_pattern") == 6


def test_completion_on_token_ids(tmp_path):
    spec = shrunk(QWEN3_30B, layers=2, experts=8)
    path = build_synthetic_gguf(spec, "Q4_K_M", tmp_path / "moe.gguf", seed=3)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_gpu_layers=0, n_threads=2, verbose=False)
    try:
        out = llm.create_completion(TOKENS, max_tokens=4, temperature=0.0)
        assert out["usage"]["completion_tokens"] >= 1
        assert out["usage"]["prompt_tokens"] == len(TOKENS)
    finally:
        llm.close()


def test_same_seed_same_file_other_seed_other_weights(tmp_path):
    spec = shrunk(QWEN3_30B, layers=1, experts=4)
    a = build_synthetic_gguf(spec, "Q8_0", tmp_path / "a.gguf", seed=5).read_bytes()
    b = build_synthetic_gguf(spec, "Q8_0", tmp_path / "b.gguf", seed=5).read_bytes()
    c = build_synthetic_gguf(spec, "Q8_0", tmp_path / "c.gguf", seed=6).read_bytes()
    assert a == b
    assert len(a) == len(c) and a[-4096:] != c[-4096:]  # same layout, other weights


def test_no_partial_file_left_on_failure(tmp_path, monkeypatch):
    from recommender.probes import synthetic as syn

    spec = shrunk(QWEN3_30B, layers=1, experts=4)

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(syn._Pools, "write", boom)
    with pytest.raises(OSError):
        build_synthetic_gguf(spec, "Q8_0", tmp_path / "x.gguf")
    assert list(tmp_path.iterdir()) == []


def test_not_a_gguf_quant(tmp_path):
    from recommender.core.errors import UserError

    with pytest.raises(UserError):
        build_synthetic_gguf(shrunk(QWEN3_30B), "AWQ-4bit", tmp_path / "x.gguf")


def test_tiny_vocab_without_byte_tokens_loads(tmp_path):
    spec = shrunk("HuggingFaceTB__SmolLM2-135M-Instruct", layers=1, vocab_size=128)
    path = build_synthetic_gguf(spec, "F16", tmp_path / "tiny.gguf")
    check_file(path, spec, "F16")
    assert np.isfinite(run_llama(path, 128)).all()


# ----------------------------------------------------------------------------------------------------------------
def test_cache_reuses_matching_file_and_rebuilds_bad_one(tmp_path):
    spec = shrunk(QWEN3_30B, layers=1, experts=4)
    p1 = cached_synthetic_gguf(spec, "Q4_K_M", tmp_path)
    assert p1 == synthetic_path(spec, "Q4_K_M", tmp_path) and synthetic_file_matches(p1, spec, "Q4_K_M")
    stamp = p1.stat().st_mtime_ns, p1.stat().st_ino
    p2 = cached_synthetic_gguf(spec, "Q4_K_M", tmp_path)
    assert p2 == p1 and (p2.stat().st_mtime_ns, p2.stat().st_ino) == stamp  # reused, not rewritten

    # another quantization and another model are other files
    assert not synthetic_file_matches(p1, spec, "Q8_0")
    other = shrunk(QWEN3_30B, layers=2, experts=4)
    assert not synthetic_file_matches(p1, other, "Q4_K_M")
    assert cached_synthetic_gguf(spec, "Q8_0", tmp_path) != p1

    # a truncated file is rebuilt
    size = p1.stat().st_size
    with open(p1, "r+b") as f:
        f.truncate(size - 1000)
    assert not synthetic_file_matches(p1, spec, "Q4_K_M")
    p3 = cached_synthetic_gguf(spec, "Q4_K_M", tmp_path)
    assert p3.stat().st_size == size and synthetic_file_matches(p3, spec, "Q4_K_M")

    # garbage is rebuilt too
    p3.write_bytes(b"not a gguf")
    assert cached_synthetic_gguf(spec, "Q4_K_M", tmp_path).stat().st_size == size


# ----------------------------------------------------------------------------------------------------------------
# Real llama.cpp vocabularies (the vocab-only GGUFs of the llama-cpp-python sdist). Set RECOMMENDER_VOCAB_DIR to a
# folder holding ggml-vocab-qwen2.gguf, or run from a checkout whose .device/vocab has it (prepare.sh).
def _qwen2_vocab() -> Path | None:
    for d in (os.environ.get("RECOMMENDER_VOCAB_DIR"), Path.cwd() / ".device" / "vocab",
              Path(__file__).resolve().parents[2] / ".device" / "vocab"):
        if d and (Path(d) / "ggml-vocab-qwen2.gguf").is_file():
            return Path(d) / "ggml-vocab-qwen2.gguf"
    return None


def test_qwen3_06b_q4_k_m(tmp_path):
    """The real Qwen3-0.6B shapes at Q4_K_M (~400 MB), with Qwen's tokenizer when its vocab GGUF is at hand."""
    spec = spec_of("Qwen__Qwen3-0.6B")
    vocab = _qwen2_vocab()
    path = build_synthetic_gguf(spec, "Q4_K_M", tmp_path / "qwen3.gguf", vocab_gguf=vocab)
    check_file(path, spec, "Q4_K_M")
    logits = run_llama(path, spec.vocab_size)
    assert np.isfinite(logits).all() and logits.std() > 0
    if vocab is not None:
        header = read_header(path)
        assert header.get("tokenizer.ggml.model") == "gpt2" and header.get("tokenizer.ggml.pre") == "qwen2"
        assert header.get("recommender.vocab") == "ggml-vocab-qwen2.gguf (151936 tokens)"


def test_copied_vocab_is_padded_or_replaced(tmp_path):
    vocab = _qwen2_vocab()
    if vocab is None:
        pytest.skip("ggml-vocab-qwen2.gguf not found (set RECOMMENDER_VOCAB_DIR)")
    # Qwen2.5-7B has 152,064 embedding rows for 151,936 tokenizer entries: the token list is padded
    spec = shrunk("Qwen__Qwen2.5-7B", layers=1, vocab_size=152_064)
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "padded.gguf", vocab_gguf=vocab)
    header = read_header(path, keep_arrays=lambda key: key.startswith("tokenizer."))
    tokens = header.get("tokenizer.ggml.tokens")
    assert len(tokens) == 152_064 and tokens[-1] == "[PAD152063]"
    assert len(header.get("tokenizer.ggml.token_type")) == 152_064
    assert len(header.get("tokenizer.ggml.merges")) < 152_064
    assert header.get("recommender.vocab") == "ggml-vocab-qwen2.gguf (151936 tokens + 128 padding)"
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_gpu_layers=0, n_threads=2, verbose=False)
    try:
        assert llm.n_vocab() == 152_064
        ids = llm.tokenize(b"Hello world", add_bos=False)
        assert 0 < len(ids) <= 3 and llm.detokenize(ids) == b"Hello world"
        llm.eval(ids)
    finally:
        llm.close()

    # a vocab with more tokens than the model has rows cannot be used: a synthetic vocab is written instead
    small = shrunk("Qwen__Qwen2.5-7B", layers=1)
    path = build_synthetic_gguf(small, "Q8_0", tmp_path / "small.gguf", vocab_gguf=vocab)
    assert read_header(path).get("recommender.vocab").startswith("synthetic-spm")
    assert np.isfinite(run_llama(path, small.vocab_size)).all()


def test_find_vocab_gguf(tmp_path, monkeypatch):
    (tmp_path / "ggml-vocab-qwen2.gguf").write_bytes(b"GGUF")
    (tmp_path / "ggml-vocab-llama-bpe.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("RECOMMENDER_VOCAB_DIR", str(tmp_path))
    assert find_vocab_gguf(spec_of("Qwen__Qwen3-0.6B")).name == "ggml-vocab-qwen2.gguf"
    assert find_vocab_gguf(spec_of("meta-llama__Llama-3.1-8B")).name == "ggml-vocab-llama-bpe.gguf"
    assert find_vocab_gguf(spec_of("mistralai__Mistral-7B-v0.3")) is None  # SentencePiece 32768: no file fits
    assert find_vocab_gguf(spec_of("google__gemma-2-2b")) is None


def test_real_gguf_header_matches_gguf_reader():
    """The real SmolLM2 GGUF (49k-token vocab): the fast header reader gives what gguf-py's GGUFReader gives, and the
    model's vocabulary size is the length of its token list."""
    from conftest import smollm2_gguf_or_skip

    from recommender.model.arch import spec_from_gguf

    path = smollm2_gguf_or_skip()
    spec, info = spec_from_gguf(path)
    assert_matches_gguf_reader(path, info)
    ref = gguf.GGUFReader(str(path), "r")
    assert spec.vocab_size == len(ref.fields["tokenizer.ggml.tokens"].data) == 49152
    assert spec.num_layers == ref.fields["llama.block_count"].contents() == 30


def test_mla_cut_runs_with_the_compressed_latent_cache(tmp_path, capfd):
    """A 2-layer DeepSeek-V2-Lite cut in the split attn_k_b / attn_v_b layout: llama.cpp loads it as MLA and the KV
    buffer it reports is the latent cache recommender.predict.analytical sizes (kv_lora_rank + rope per token and
    layer), not the full per-head K/V a legacy attn_kv_b file gets."""
    from recommender.predict.analytical import kv_cache_bytes  # noqa: PLC0415

    spec = shrunk("deepseek-ai__DeepSeek-V2-Lite", layers=2, experts=8)
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "mla.gguf")
    names = {n for n, _s, _t in gguf_tensor_types(spec, "Q8_0")}
    assert "blk.0.attn_k_b.weight" in names and "blk.0.attn_kv_b.weight" not in names
    n_ctx = 512
    log = llama_cpp_log(path, n_ctx, capfd)
    import re  # noqa: PLC0415

    m = re.search(r"KV buffer size =\s*([0-9.]+) MiB", log)
    assert m, log[-2000:]
    reported = float(m.group(1)) * 2**20
    predicted = kv_cache_bytes(spec, n_ctx, 1, engine="llama.cpp")
    full_kv = 2 * spec.num_layers * n_ctx * spec.num_attention_heads * (spec.qk_nope_head_dim + spec.qk_rope_head_dim)
    assert abs(reported - predicted) <= 0.01 * 2**20, (reported, predicted)
    assert reported < full_kv / 2


def test_qwen3_next_cut_keeps_kv_only_in_full_attention_layers(tmp_path, capfd):
    """A 4-layer Qwen3-Next cut (3 Gated DeltaNet layers, 1 full-attention layer, plus the MTP block the converter
    keeps): llama.cpp caches K/V for the full-attention layer only and a fixed recurrent state for the linear ones;
    both buffers it reports are the estimate's (attention layers x context, n_embd_r + n_embd_s F32 per layer)."""
    from recommender.predict.analytical import kv_cache_bytes, recurrent_state_bytes  # noqa: PLC0415

    spec = shrunk("Qwen__Qwen3-Next-80B-A3B-Instruct", layers=4, experts=8, linear_num_key_heads=2,
                  linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64,
                  shared_expert_intermediate_size=256)
    assert (spec.num_linear_attn_layers, spec.nextn_layers) == (3, 1)
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "q3n.gguf")
    check_file(path, spec, "Q8_0")
    n_ctx = 512
    log = llama_cpp_log(path, n_ctx, capfd)
    import re  # noqa: PLC0415

    kv = re.search(r"KV buffer size =\s*([0-9.]+) MiB", log)
    rs = re.search(r"RS buffer size =\s*([0-9.]+) MiB", log)
    assert kv and rs, log[-2000:]
    state = recurrent_state_bytes(spec, 1)
    assert abs(float(kv.group(1)) * 2**20 - (kv_cache_bytes(spec, n_ctx, 1) - state)) <= 0.01 * 2**20
    assert abs(float(rs.group(1)) * 2**20 - state) <= 0.01 * 2**20


def test_olmo3_cut_keeps_only_the_window_in_its_sliding_layers(tmp_path, capfd):
    """A 4-layer OLMo-3.1-32B-Instruct cut (layer_types: 3 sliding, then 1 full; window 512): llama.cpp loads it as
    olmo2 with the sliding-window cache, and the KV buffers it reports (full + SWA) add up to the estimate, which is
    well under what the same cut would cache with every layer full."""
    import re  # noqa: PLC0415

    from recommender.predict.analytical import kv_cache_bytes  # noqa: PLC0415

    spec = shrunk("allenai__Olmo-3.1-32B-Instruct", layers=4, sliding_window=512)
    assert gguf_arch(spec) == "olmo2" and (spec.num_swa_layers, spec.sliding_window) == (3, 512)
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "olmo3.gguf")
    check_file(path, spec, "Q8_0")
    n_ctx = 4096
    # swa_full=False: llama.cpp's own default (llama-server / llama-cli), the configuration the estimate models
    log = llama_cpp_log(path, n_ctx, capfd, swa_full=False)
    sizes = [float(x) * 2**20 for x in re.findall(r"KV buffer size =\s*([0-9.]+) MiB", log)]
    assert len(sizes) == 2, log[-2000:]  # llama_kv_cache_iswa: the full-attention cache and the SWA cache
    reported = sum(sizes)
    predicted = kv_cache_bytes(spec, n_ctx, 1, engine="llama.cpp")
    all_full = kv_cache_bytes(spec.model_copy(update={"sliding_window": None, "num_swa_layers": 0}), n_ctx, 1)
    assert abs(reported - predicted) <= 0.01 * 2**20, (reported, predicted)
    assert reported < 0.5 * all_full


def _buffers(log: str) -> dict[str, float]:
    """Bytes of the KV (summed over the caches llama.cpp makes), recurrent-state and CPU compute buffers a log reports."""
    import re  # noqa: PLC0415

    kv = [float(x) * 2**20 for x in re.findall(r"KV buffer size =\s*([0-9.]+) MiB", log)]
    rs = [float(x) * 2**20 for x in re.findall(r"RS buffer size =\s*([0-9.]+) MiB", log)]
    cb = [float(x) * 2**20 for x in re.findall(r"CPU compute buffer size =\s*([0-9.]+) MiB", log)]
    return {"kv": sum(kv), "rs": sum(rs), "compute": max(cb) if cb else 0.0, "n_kv": len(kv), "n_rs": len(rs)}


QWEN35_SMALL = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64,
                    linear_value_head_dim=64)


@pytest.mark.parametrize("name,extra", [
    ("Qwen__Qwen3.5-27B", {}),  # qwen35: dense gated MLP
    ("Qwen__Qwen3.6-35B-A3B", {"shared_expert_intermediate_size": 256}),  # qwen35moe: 8 experts + gated shared
])
def test_qwen35_cut_keeps_kv_only_in_full_attention_layers(tmp_path, capfd, name, extra):
    """A 4-layer Qwen3.5 / 3.6 cut (3 Gated DeltaNet layers, 1 full-attention layer, plus the MTP block the converter
    keeps): llama.cpp loads it as qwen35 / qwen35moe, caches K/V for the full-attention layer only and holds a fixed
    recurrent state for the DeltaNet layers; both buffers are the estimate's to 0.01 MiB."""
    from recommender.predict.analytical import kv_cache_bytes, recurrent_state_bytes  # noqa: PLC0415

    import re  # noqa: PLC0415

    from recommender.predict.analytical import mtp_bytes  # noqa: PLC0415

    spec = shrunk(name, layers=4, experts=8, **QWEN35_SMALL, **extra)
    assert (spec.num_linear_attn_layers, spec.num_attention_layers, spec.nextn_layers) == (3, 1, 1)
    assert gguf_arch(spec) == ("qwen35moe" if spec.num_experts else "qwen35")
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "q35.gguf")
    check_file(path, spec, "Q8_0")
    n_ctx = 512
    log = llama_cpp_log(path, n_ctx, capfd, use_mmap=False)  # without mmap the model buffer holds what is loaded
    got = _buffers(log)
    state = recurrent_state_bytes(spec, 1)
    assert got["n_kv"] and got["n_rs"], got
    assert abs(got["kv"] - (kv_cache_bytes(spec, n_ctx, 1) - state)) <= 0.01 * 2**20, got
    assert abs(got["rs"] - state) <= 0.01 * 2**20, got
    # the MTP block is in the file but llama.cpp does not load it (TENSOR_SKIP without load_mtp)
    loaded = sum(float(x) for x in re.findall(r"CPU model buffer size =\s*([0-9.]+) MiB", log)) * 2**20
    mtp = mtp_bytes(spec, "Q8_0")[0]
    assert mtp > 0.1 * weights_bytes(spec, "Q8_0")
    assert abs(loaded - (weights_bytes(spec, "Q8_0") - mtp)) <= 0.01 * 2**20, (loaded, mtp)


NEMOTRON_SMALL = dict(mamba_num_heads=8, mamba_head_dim=32, n_groups=2, ssm_state_size=32)


@pytest.mark.parametrize("name,pattern,extra", [
    # Nemotron-3-Nano: Mamba-2, MoE (ungated experts + shared expert, router bias) and attention layers
    ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "MEM*EM", {"moe_shared_expert_intermediate_size": 256}),
    # Nemotron-H-56B: Mamba-2, relu^2 MLP and attention layers
    ("nvidia__Nemotron-H-56B-Base-8K", "M-M*-M", {"intermediate_size": 512}),
])
def test_nemotron_h_cut_keeps_kv_only_in_attention_layers(tmp_path, capfd, name, pattern, extra):
    """A 6-layer Nemotron-H cut: llama.cpp (nemotron_h / nemotron_h_moe) keeps K/V for the one attention layer and a
    Mamba-2 conv + SSM state for the three Mamba layers; the MLP / MoE layers hold neither. Both buffers are the
    estimate's (attention layers x context; (d_conv - 1)(d_inner + 2 n_group d_state) + d_state d_inner F32 per Mamba
    layer) to 0.01 MiB."""
    from recommender.predict.analytical import kv_cache_bytes, recurrent_state_bytes  # noqa: PLC0415

    spec = shrunk(name, layers=6, experts=8, hybrid_override_pattern=pattern, **NEMOTRON_SMALL, **extra)
    assert (spec.num_linear_attn_layers, spec.num_attention_layers) == (3, 1)
    assert gguf_arch(spec) == ("nemotron_h_moe" if spec.num_experts else "nemotron_h")
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "nh.gguf")
    check_file(path, spec, "Q8_0")
    n_ctx = 512
    got = _buffers(llama_cpp_log(path, n_ctx, capfd))
    state = recurrent_state_bytes(spec, 1)
    assert got["n_kv"] and got["n_rs"], got
    assert abs(got["kv"] - (kv_cache_bytes(spec, n_ctx, 1) - state)) <= 0.01 * 2**20, got
    assert abs(got["rs"] - state) <= 0.01 * 2**20, got



def test_lfm2_cut_keeps_kv_only_in_attention_layers(tmp_path, capfd):
    """A 4-layer LFM2 cut (conv, conv, attention, conv): llama.cpp (lfm2) caches K/V for the attention layer and holds
    a short-convolution state of (L_cache - 1) x n_embd F32 for each conv layer; both are the estimate's."""
    from recommender.predict.analytical import kv_cache_bytes, recurrent_state_bytes  # noqa: PLC0415

    spec = shrunk("LiquidAI__LFM2.5-VL-1.6B", layers=4, layer_types=["conv", "conv", "full_attention", "conv"],
                  block_ff_dim=768)
    assert (spec.num_linear_attn_layers, spec.num_attention_layers, gguf_arch(spec)) == (3, 1, "lfm2")
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "lfm2.gguf")
    check_file(path, spec, "Q8_0")
    n_ctx = 512
    got = _buffers(llama_cpp_log(path, n_ctx, capfd))
    state = recurrent_state_bytes(spec, 1)
    assert state == 3 * 2 * 256 * 4 and got["n_kv"] and got["n_rs"], got
    assert abs(got["kv"] - (kv_cache_bytes(spec, n_ctx, 1) - state)) <= 0.01 * 2**20, got
    assert abs(got["rs"] - state) <= 0.01 * 2**20, got


def test_deepseek_v4_cut_caches_are_llama_cpps(tmp_path, capfd):
    """A 5-layer DeepSeek-V4 cut (window-only, CSA, HCA, CSA, HCA layers): llama.cpp (deepseek4) loads the synthetic
    file and makes the caches recommender.predict sizes -- the sliding-window raw cache on every layer (n_swa 128 +
    n_ubatch padded to 256 cells), the 4x compressed cache and the indexer keys on the CSA layers, the 128x one on
    the HCA layers, and the F32 compressor states -- to the byte at llama.cpp's printed precision (2-decimal MiB)."""
    import re  # noqa: PLC0415

    from recommender.predict.analytical import kv_cache_bytes, recurrent_state_bytes  # noqa: PLC0415

    spec = shrunk("deepseek-ai__DeepSeek-V4-Flash", layers=5, experts=8, num_key_value_heads=1, head_dim=128,
                  qk_rope_head_dim=64, q_lora_rank=128, o_lora_rank=64, o_groups=2, index_n_heads=4,
                  index_head_dim=64, num_hash_layers=1, compress_ratios=[0, 4, 128, 4, 128, 0])
    assert gguf_arch(spec) == "deepseek4" and spec.compress_pattern == "WCHCH"
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "dsv4.gguf")
    check_file(path, spec, "Q8_0")
    n_ctx = 4096
    log = llama_cpp_log(path, n_ctx, capfd, swa_full=False)  # llama.cpp's own default, the one the estimate models
    kv = sum(float(x) for x in re.findall(r"KV buffer size =\s*([0-9.]+) MiB", log)) * 2**20
    st = sum(float(x) for x in re.findall(r"DSV4 \w+ state buffer size =\s*([0-9.]+) MiB", log)) * 2**20
    state = recurrent_state_bytes(spec, 1)
    assert "creating DSV4 CSA compressed KV cache" in log, log[-2000:]
    assert abs(kv - (kv_cache_bytes(spec, n_ctx, 1) - state)) <= 4 * 0.005 * 2**20  # four caches, each rounded
    assert abs(st - state) <= 3 * 0.005 * 2**20


DSA_SMALL = dict(kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64, q_lora_rank=128,
                 index_n_heads=4, index_head_dim=64, first_k_dense_replace=1)


@pytest.mark.parametrize("name,layers,extra,pattern", [
    ("deepseek-ai__DeepSeek-V3.2", 3, {}, "FFF"),  # deepseek32: an indexer on every layer + the MTP block
    ("zai-org__GLM-5", 3, {}, "FFF"),  # glm-dsa, GLM-5 / 5.1: every indexer full
    ("zai-org__GLM-5.2", 6, {"indexer_types": ["full", "full", "shared", "shared", "full", "shared"]}, "FFSSFS"),
])
def test_dsa_cut_caches_and_weights_are_llama_cpps(tmp_path, capfd, name, layers, extra, pattern):
    """A few-layer DeepSeek-V3.2 / GLM-5 cut (MLA + the DSA lightning indexer, one dense layer, MoE after, the MTP
    block the converter appends): llama.cpp (deepseek32 / glm-dsa) loads the synthetic file and makes the two caches
    of llama_kv_cache_dsa the estimate sizes -- the MLA latent on every trunk layer and the indexer keys
    (indexer_head_dim per token, type_k) on the layers with a full indexer -- and its model buffer is the file less the
    MTP block (TENSOR_SKIP without load_mtp), each to llama.cpp's printed precision (2-decimal MiB). Figures in
    sources/configs/README.md (DSA buffer check)."""
    import re  # noqa: PLC0415

    from recommender.predict.analytical import kv_cache_bytes, mtp_bytes  # noqa: PLC0415

    spec = shrunk(name, layers=layers, experts=8, **DSA_SMALL, **extra)
    assert gguf_arch(spec) in ("deepseek32", "glm-dsa") and spec.indexer_pattern == pattern and spec.nextn_layers == 1
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "dsa.gguf")
    check_file(path, spec, "Q8_0")
    from recommender.model.arch import arch_key, spec_from_gguf  # noqa: PLC0415

    back = spec_from_gguf(path)[0]  # the header read back: the same tensors (MLA files state one KV head)
    assert arch_key(back) == arch_key(spec)._replace(num_kv_heads=1) and back.params_total == spec.params_total
    n_ctx = 4096
    # no mmap: a mapped buffer spans the skipped MTP tensors too; flash attention as bench/cpu_arch_buffers.py runs it
    log = llama_cpp_log(path, n_ctx, capfd, use_mmap=False, flash_attn=True)
    kv = [float(x) * 2**20 for x in re.findall(r"KV buffer size =\s*([0-9.]+) MiB", log)]
    model = sum(float(x) for x in re.findall(r"CPU(?:_Mapped)? model buffer size =\s*([0-9.]+) MiB", log)) * 2**20
    assert "creating indexer KV cache" in log and len(kv) == 2, log[-2000:]
    mla, lid = kv
    assert abs(lid - pattern.count("F") * spec.indexer_head_dim * n_ctx * 2) <= 0.005 * 2**20  # f16 keys
    assert abs(sum(kv) - kv_cache_bytes(spec, n_ctx, 1)) <= 2 * 0.005 * 2**20
    resident = weights_bytes(spec, "Q8_0") - mtp_bytes(spec, "Q8_0")[0]
    assert abs(model - resident) <= 0.005 * 2**20 + 64 * 1024  # printed precision + per-tensor alignment padding
    # the compute buffer with the DSA terms (llama_cpp.dsa_compute_bytes): 36.5 / 48.5 MiB against llama.cpp's CPU
    # 37.03 / 49.03 (its CPU graph's own 0.53 MiB beyond the formula); 8.5 MiB without them
    from recommender.predict.analytical import llama_cpp_compute_buffer  # noqa: PLC0415

    cb = max(float(x) for x in re.findall(r"CPU compute buffer size =\s*([0-9.]+) MiB", log)) * 2**20
    assert 0 <= cb - llama_cpp_compute_buffer(spec, n_ctx, True)[0] <= 1 * 2**20


STEP_SMALL = dict(share_expert_dim=256, first_k_dense_replace=1, sliding_window=128,
                  attention_other_setting={"attention_type": "sliding_attention", "num_attention_heads": 6,
                                           "num_attention_groups": 2, "head_dim": 64})


def test_step35_cut_caches_and_weights_are_llama_cpps(tmp_path, capfd):
    """A 5-layer Step-3.7-Flash cut (full, 3 sliding, full; one dense layer, MoE with a shared expert after; the
    config's 3 MTP blocks; 6 query heads on the sliding layers, 4 on the full ones as 96 / 64 in the published
    checkpoint): llama.cpp (step35) loads the synthetic file with the per-layer head counts the estimate lists,
    makes the two caches of llama_kv_cache_iswa the estimate sizes -- the full layers' cache of n_ctx cells and the
    sliding layers' of GGML_PAD(n_swa + n_ubatch, 256) cells, none for the MTP blocks -- and its model buffer is the
    file less only the MTP tensors src/models/step35.cpp creates TENSOR_SKIP (attention projections, eh_proj, four
    norms: the MTP blocks' q/k norms, gate, dense MLP and own head stay loaded), each to llama.cpp's printed precision
    (2-decimal MiB). Figures in sources/configs/README.md (Step-3.7-Flash buffer check)."""
    import re  # noqa: PLC0415

    from recommender.model.arch import arch_key, spec_from_gguf  # noqa: PLC0415
    from recommender.predict.analytical import kv_cache_bytes, mtp_bytes  # noqa: PLC0415

    spec = shrunk("stepfun-ai__Step-3.7-Flash", layers=5, experts=8, **STEP_SMALL)
    assert gguf_arch(spec) == "step35" and spec.attn_layer_types == "FSSSF" + "FFF" and spec.nextn_layers == 3
    assert (spec.num_swa_layers, spec.swa_num_attention_heads, spec.head_wise_gate) == (3, 6, True)
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "step35.gguf")
    check_file(path, spec, "Q8_0")
    back = spec_from_gguf(path)[0]  # the header read back: the same tensors
    assert arch_key(back) == arch_key(spec) and back.params_total == spec.params_total
    n_ctx = 4096
    log = llama_cpp_log(path, n_ctx, capfd, use_mmap=False, flash_attn=True, swa_full=False)
    assert "n_head                = [4, 6, 6, 6, 4, 4, 4, 4]" in log, log[-2000:]
    kv = [float(x) * 2**20 for x in re.findall(r"KV buffer size =\s*([0-9.]+) MiB", log)]
    model = sum(float(x) for x in re.findall(r"CPU(?:_Mapped)? model buffer size =\s*([0-9.]+) MiB", log)) * 2**20
    assert "creating     SWA KV cache, size = 768 cells" in log and len(kv) == 2, log[-2000:]
    assert abs(kv[1] - 3 * 768 * 2 * 2 * 64 * 2) <= 0.005 * 2**20  # 3 sliding layers, K + V, 2 heads x 64, f16
    assert abs(sum(kv) - kv_cache_bytes(spec, n_ctx, 1)) <= 2 * 0.005 * 2**20
    skipped = mtp_bytes(spec, "Q8_0")[0]
    assert 0 < skipped < weights_bytes(spec, "Q8_0") - weights_bytes(spec.model_copy(update={"nextn_layers": 0}),
                                                                       "Q8_0")
    assert abs(model - (weights_bytes(spec, "Q8_0") - skipped)) <= 0.005 * 2**20 + 64 * 1024


def test_hy_v3_cut_caches_and_weights_are_llama_cpps(tmp_path, capfd):
    """A 3-layer Hy3 cut (tencent/Hy3's hy_v3 layout: one dense layer, then MoE with a router bias and one shared
    expert, per-head q/k norms, plus the MTP block the converter appends): llama.cpp (hy_v3) loads the synthetic file,
    caches K/V for the 3 trunk layers only (the MTP layer is filtered), and its model buffer is the file less the MTP
    block's attention, norms and nextn.* tensors -- src/models/hy-v3.cpp creates the block's FFN (router, exp_probs_b,
    routed and shared experts) with TENSOR_NOT_REQUIRED instead of the skip flags, so those load even without load_mtp
    (arch.mtp_tensor_skipped). Each to llama.cpp's printed precision (2-decimal MiB)."""
    import re  # noqa: PLC0415

    from recommender.model.quant import weights_breakdown  # noqa: PLC0415
    from recommender.predict.analytical import kv_cache_bytes, mtp_bytes, variant_byte_sums  # noqa: PLC0415

    spec = shrunk("tencent__Hy3", layers=3, experts=8, num_key_value_heads=2, expert_hidden_dim=256)
    assert gguf_arch(spec) == "hy_v3" and (spec.nextn_layers, spec.first_k_dense_layers) == (1, 1)
    assert spec.qk_norm and (spec.num_shared_experts, spec.shared_expert_intermediate_size) == (1, 256)
    path = build_synthetic_gguf(spec, "Q8_0", tmp_path / "hy3.gguf")
    check_file(path, spec, "Q8_0")
    from recommender.model.arch import arch_key, spec_from_gguf  # noqa: PLC0415

    back = spec_from_gguf(path)[0]  # the header read back (catalog add of a Hy3 GGUF): the same layout
    assert arch_key(back) == arch_key(spec) and back.params_total == spec.params_total
    n_ctx = 4096
    log = llama_cpp_log(path, n_ctx, capfd, use_mmap=False, flash_attn=True)
    kv = [float(x) * 2**20 for x in re.findall(r"KV buffer size =\s*([0-9.]+) MiB", log)]
    model = sum(float(x) for x in re.findall(r"CPU(?:_Mapped)? model buffer size =\s*([0-9.]+) MiB", log)) * 2**20
    assert len(kv) == 1 and "layer   3: filtered" in log, log[-2000:]
    assert abs(kv[0] - kv_cache_bytes(spec, n_ctx, 1)) <= 0.005 * 2**20
    skipped = mtp_bytes(spec, "Q8_0")[0]
    whole_block = sum(n for name, _t, n in weights_breakdown(spec, "Q8_0") if name.startswith("blk.3."))
    assert 0 < skipped < whole_block / 4  # attention + norms + nextn.*; the FFN (most of the block) stays loaded
    assert variant_byte_sums(spec, "Q8_0").mtp_expert_bytes == 0
    assert abs(model - (weights_bytes(spec, "Q8_0") - skipped)) <= 0.005 * 2**20 + 64 * 1024
    assert abs(model - (weights_bytes(spec, "Q8_0") - whole_block)) > 1 * 2**20  # skipping the whole block is wrong
