"""llama.cpp's own KV / recurrent-state / compute / model buffers against the estimate, on few-layer CPU cuts of the
2026 architecture kinds (sources/measurements/cpu-llamacpp-buffers-2026-archs.csv; the same cuts tests/probes/test_synthetic.py
checks). Needs llama-cpp-python 0.3.36. Usage: NCTX=4096 MMAP=0 [CASES=label-part] python bench/cpu_arch_buffers.py > rows.jsonl"""
import json, os, re, sys, tempfile
from pathlib import Path
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
CONFIGS=Path(__file__).resolve().parents[1] / 'sources' / 'configs'
def shrunk(name, layers=2, experts=4, **extra):
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}; cfg.pop("text_config")
    heads = cfg.get("num_attention_heads", 4); kv = cfg.get("num_key_value_heads", heads)
    small = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
             "num_key_value_heads": 4 if kv == heads else 2, "num_hidden_layers": layers, "vocab_size": 4096,
             "max_position_embeddings": 4096}
    if "head_dim" in cfg: small["head_dim"] = 64
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if cfg.get(key):
            small[key] = experts; small["num_experts_per_tok"] = min(2, experts); small["moe_intermediate_size"] = 256
    if isinstance(cfg.get("layer_types"), list): small["layer_types"] = cfg["layer_types"][:layers]
    cfg.update(small); cfg.update(extra)
    return spec_from_config(cfg, "test/" + name.split("__", 1)[-1] + "-tiny")
import llama_cpp, llama_cpp.llama_cpp as low
orig = low.llama_model_default_params
def params():
    p = orig(); p.use_extra_bufts = False; return p
low.llama_model_default_params = params
from recommender.predict.analytical import kv_cache_bytes, recurrent_state_bytes, llama_cpp_compute_buffer, mtp_bytes
from recommender.model.quant import weights_bytes
Q=dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64)
# the cuts of tests/probes/test_synthetic.py test_dsa_cut_caches_and_weights_are_llama_cpps
DSA=dict(kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64, q_lora_rank=128, index_n_heads=4,
         index_head_dim=64, first_k_dense_replace=1, num_key_value_heads=4)
N=dict(mamba_num_heads=8, mamba_head_dim=32, n_groups=2, ssm_state_size=32)
cases = [
 ("baseline dense (qwen3)", shrunk("Qwen__Qwen3-8B", layers=4)),
 ("hybrid linear attn (qwen35)", shrunk("Qwen__Qwen3.5-27B", layers=4, experts=8, **Q)),
 ("hybrid linear attn MoE (qwen35moe)", shrunk("Qwen__Qwen3.6-35B-A3B", layers=4, experts=8, shared_expert_intermediate_size=256, **Q)),
 ("Mamba-2 hybrid MoE (nemotron_h_moe)", shrunk("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", layers=6, experts=8, hybrid_override_pattern="MEM*EM", moe_shared_expert_intermediate_size=256, **N)),
 ("Mamba-2 hybrid dense (nemotron_h)", shrunk("nvidia__Nemotron-H-56B-Base-8K", layers=6, hybrid_override_pattern="M-M*-M", intermediate_size=512, **N)),
 ("MoE, full-width qk norm (minimax-m2)", shrunk("MiniMaxAI__MiniMax-M2.5", layers=2, experts=8)),
 ("short conv hybrid (lfm2)", shrunk("LiquidAI__LFM2.5-VL-1.6B", layers=4, layer_types=["conv","conv","full_attention","conv"], block_ff_dim=768)),
 ("MLA MoE (GLM-4.7-Flash, deepseek2)", shrunk("zai-org__GLM-4.7-Flash", layers=2, experts=8)),
 ("compressed sliding-window attention + hyper-connections MoE (DeepSeek-V4, deepseek4)",
  shrunk("deepseek-ai__DeepSeek-V4-Flash", layers=5, experts=8, num_key_value_heads=1, head_dim=128,
         qk_rope_head_dim=64, q_lora_rank=128, o_lora_rank=64, o_groups=2, index_n_heads=4, index_head_dim=64,
         num_hash_layers=1, compress_ratios=[0, 4, 128, 4, 128, 0])),
 ("MLA + DSA lightning indexer MoE (DeepSeek-V3.2, deepseek32)", shrunk("deepseek-ai__DeepSeek-V3.2", layers=3, experts=8, **DSA)),
 ("MLA + DSA lightning indexer MoE (GLM-5, glm-dsa)", shrunk("zai-org__GLM-5", layers=3, experts=8, **DSA)),
 ("MLA + DSA lightning indexer MoE, shared indexers (GLM-5.2, glm-dsa)",
  shrunk("zai-org__GLM-5.2", layers=6, experts=8, indexer_types=["full", "full", "shared", "shared", "full", "shared"], **DSA)),
 # the cut of tests/probes/test_synthetic.py test_step35_cut_caches_and_weights_are_llama_cpps
 ("per-layer-type GQA + head-wise gate MoE, 3 MTP blocks (Step-3.7-Flash, step35)",
  shrunk("stepfun-ai__Step-3.7-Flash", layers=5, experts=8, share_expert_dim=256, first_k_dense_replace=1, sliding_window=128,
         attention_other_setting={"attention_type": "sliding_attention", "num_attention_heads": 6, "num_attention_groups": 2, "head_dim": 64})),
 # the cut of tests/probes/test_synthetic.py test_hy_v3_cut_caches_and_weights_are_llama_cpps (CASES=hy_v3)
 ("MoE, router bias + shared expert, MTP block with its FFN loaded (Hy3, hy_v3)",
  shrunk("tencent__Hy3", layers=3, experts=8, num_key_value_heads=2, expert_hidden_dim=256)),
]
if os.environ.get("CASES"):  # CASES=deepseek4 runs the cases whose label contains it
    cases = [c for c in cases if os.environ["CASES"] in c[0]]
n_ctx = int(os.environ.get("NCTX", "4096"))
for label, spec in cases:
    p = build_synthetic_gguf(spec, "Q8_0", Path(tempfile.gettempdir()) / "arch-buffers.gguf")
    # llama.cpp's log goes to a file, not a pipe: a log longer than the pipe buffer (DeepSeek-V4's per-cache lines)
    # would block the writer before anything reads it
    logf = tempfile.TemporaryFile(); saved = os.dup(2); os.dup2(logf.fileno(), 2)
    llm = llama_cpp.Llama(model_path=str(p), n_ctx=n_ctx, n_gpu_layers=0, n_threads=2, verbose=True, swa_full=False, flash_attn=True, use_mmap=os.environ.get("MMAP","1")=="1")
    llm.eval([1,2,3]); llm.close(); os.dup2(saved, 2)
    logf.seek(0); log = logf.read().decode(errors="replace"); logf.close()
    MiB = 2**20
    kv = sum(float(x) for x in re.findall(r"KV buffer size =\s*([0-9.]+) MiB", log)) * MiB
    rs = sum(float(x) for x in re.findall(r"(?:RS|DSV4 \w+ state) buffer size =\s*([0-9.]+) MiB", log)) * MiB
    cb = max([float(x) for x in re.findall(r"CPU compute buffer size =\s*([0-9.]+) MiB", log)] or [0]) * MiB
    mb = sum(float(x) for x in re.findall(r"CPU(?:_Mapped)? model buffer size =\s*([0-9.]+) MiB", log)) * MiB
    st = recurrent_state_bytes(spec, 1); okv = kv_cache_bytes(spec, n_ctx, 1) - st
    ocb = llama_cpp_compute_buffer(spec, n_ctx, True)[0]
    wb = weights_bytes(spec, "Q8_0"); mt = mtp_bytes(spec, "Q8_0")[0]
    def e(a, b): return f"{(a-b)/b*100:+.2f}%" if b else ("0" if not a else "n/a")
    print(json.dumps({"kind": label, "n_ctx": n_ctx, "kv_ours_MiB": round(okv/MiB,3), "kv_llama_MiB": round(kv/MiB,3), "kv_err": e(okv,kv),
        "rs_ours_MiB": round(st/MiB,3), "rs_llama_MiB": round(rs/MiB,3), "rs_err": e(st,rs),
        "compute_ours_MiB": round(ocb/MiB,3), "compute_llama_cpu_MiB": round(cb/MiB,3), "compute_err": e(ocb,cb),
        "weights_file_MiB": round(wb/MiB,3), "mtp_MiB": round(mt/MiB,3), "model_buffer_llama_MiB": round(mb/MiB,3)}), flush=True)
