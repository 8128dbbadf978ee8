# report script (helper h-cal, docs/benchmarks.md cal-v6 section); needs llama-cpp-python 0.3.36: PYTHONPATH=$PWD python bench/<this file>
"""Count the ggml graph nodes (by op) of one llama.cpp decode step, per architecture, on tiny-width CPU cuts
with the real layer count."""
import ctypes, json, os, sys, tempfile, collections
from pathlib import Path
sys.path.insert(0, os.getcwd())
sys.argv_saved = sys.argv
import importlib.util
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
CONFIGS = Path(os.getcwd()) / 'sources' / 'configs'
import llama_cpp, llama_cpp.llama_cpp as low
libdir = Path(llama_cpp.__file__).parent / "lib"
gb = ctypes.CDLL(str(libdir / "libggml-base.so"))
gb.ggml_op_desc.restype = ctypes.c_char_p; gb.ggml_op_desc.argtypes = [ctypes.c_void_p]
orig = low.llama_model_default_params
def params():
    p = orig(); p.use_extra_bufts = False; return p
low.llama_model_default_params = params
NOOP = {"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"}
def shrunk(name, layers=None, experts=4, **extra):
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}; cfg.pop("text_config")
    heads = cfg.get("num_attention_heads", 4); kv = cfg.get("num_key_value_heads", heads)
    small = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
             "num_key_value_heads": 4 if kv == heads else 2, "vocab_size": 4096, "max_position_embeddings": 4096}
    if layers: small["num_hidden_layers"] = layers
    if "head_dim" in cfg: small["head_dim"] = 64
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if cfg.get(key):
            small[key] = experts; small["num_experts_per_tok"] = min(2, experts); small["moe_intermediate_size"] = 256
    cfg.update(small); cfg.update(extra)
    return spec_from_config(cfg, "test/" + name.split("__", 1)[-1] + "-tiny")
counts = collections.Counter()
@low.ggml_backend_sched_eval_callback
def cb(t, ask, ud):
    if ask:
        counts[gb.ggml_op_desc(t).decode()] += 1
    return False
Q=dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64)
N=dict(mamba_num_heads=8, mamba_head_dim=32, n_groups=2, ssm_state_size=32)
DS=dict(kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64, q_lora_rank=None, num_key_value_heads=4)
CASES = {
 "Qwen/Qwen2.5-1.5B": ("Qwen__Qwen2.5-1.5B", {}),
 "Qwen/Qwen2.5-7B": ("Qwen__Qwen2.5-7B", {}),
 "Qwen/Qwen2.5-14B": ("Qwen__Qwen2.5-14B", {}),
 "Qwen/Qwen2.5-32B": ("Qwen__Qwen2.5-32B", {}),
 "Qwen/Qwen3-0.6B": ("Qwen__Qwen3-0.6B", {}),
 "Qwen/Qwen3-8B": ("Qwen__Qwen3-8B", {}),
 "Qwen/Qwen3-30B-A3B": ("Qwen__Qwen3-30B-A3B", dict(experts=8)),
 "Qwen/Qwen1.5-MoE-A2.7B-Chat": ("Qwen__Qwen1.5-MoE-A2.7B-Chat", dict(experts=8, shared_expert_intermediate_size=256)),
 "Qwen/Qwen3.5-9B": ("Qwen__Qwen3.5-9B", dict(**Q)),
 "Qwen/Qwen3.6-35B-A3B": ("Qwen__Qwen3.6-35B-A3B", dict(experts=8, shared_expert_intermediate_size=256, **Q)),
 "baichuan-inc/Baichuan2-7B-Chat": ("baichuan-inc__Baichuan2-7B-Chat", {}),
 "deepseek-ai/DeepSeek-V2-Lite": ("deepseek-ai__DeepSeek-V2-Lite", dict(experts=8, **DS)),
 "google/gemma-2-9b-it": ("google__gemma-2-9b-it", {}),
 "google/gemma-3-12b-it": ("google__gemma-3-12b-it", {}),
 "internlm/internlm2_5-7b-chat": ("internlm__internlm2_5-7b-chat", {}),
 "meta-llama/Llama-3.1-8B": ("meta-llama__Llama-3.1-8B", {}),
 "meta-llama/Llama-3.2-3B": ("meta-llama__Llama-3.2-3B", {}),
 "mistralai/Mixtral-8x7B-v0.1": ("mistralai__Mixtral-8x7B-v0.1", dict(experts=8)),
 "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", dict(experts=8, moe_shared_expert_intermediate_size=256, **N)),
}
only = sys.argv[1:]
out = {}
for mid, (cfgname, kw) in CASES.items():
    if only and not any(o in mid for o in only): continue
    try:
        spec = shrunk(cfgname, **kw)
        p = build_synthetic_gguf(spec, "Q8_0", Path(tempfile.gettempdir()) / "nodes.gguf")
        logf = tempfile.TemporaryFile(); saved = os.dup(2); os.dup2(logf.fileno(), 2)
        llm = llama_cpp.Llama(model_path=str(p), n_ctx=1024, n_gpu_layers=0, n_threads=2, verbose=False, swa_full=False, flash_attn=True)
        ctxp = llm._ctx  # set callback after creation is impossible; rebuild context params
        llm.close(); 
        cp = low.llama_context_default_params(); cp.n_ctx = 1024; cp.n_batch = 512; cp.n_ubatch = 512; cp.cb_eval = cb
        cp.flash_attn_type = 1; cp.n_threads = 2; cp.n_threads_batch = 2
        mp = params(); mp.n_gpu_layers = 0
        model = low.llama_model_load_from_file(str(p).encode(), mp)
        ctx = low.llama_init_from_model(model, cp)
        def decode(toks, pos0):
            b = low.llama_batch_init(len(toks), 0, 1)
            b.n_tokens = len(toks)
            for i, tk in enumerate(toks):
                b.token[i] = tk; b.pos[i] = pos0 + i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = i == len(toks) - 1
            rc = low.llama_decode(ctx, b); low.llama_batch_free(b); return rc
        decode([1, 2, 3, 4], 0)
        counts.clear()
        rc = decode([5], 4)
        os.dup2(saved, 2)
        ops = {k: v for k, v in counts.items()}
        kern = sum(v for k, v in ops.items() if k not in NOOP)
        out[mid] = {"layers": spec.num_layers, "nodes": sum(ops.values()), "kernels": kern, "ops": ops}
        print(json.dumps({mid: out[mid]}), flush=True)
        low.llama_free(ctx); low.llama_model_free(model)
    except Exception as e:
        try: os.dup2(saved, 2)
        except Exception: pass
        print(json.dumps({mid: {"error": repr(e)}}), flush=True)
