# report script (helper h-cal, docs/benchmarks.md cal-v6 section); needs llama-cpp-python 0.3.36: PYTHONPATH=$PWD python bench/<this file>
"""Distinct routed experts per layer in one 512-token micro-batch of a synthetic (random-weight) GGUF: real hidden size,
expert count and top-k, shrunk expert width / vocab / layers (CPU)."""
import ctypes, json, os, sys, tempfile, collections
from pathlib import Path
sys.path.insert(0, os.getcwd())
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
import llama_cpp, llama_cpp.llama_cpp as low
CONFIGS = Path(os.getcwd()) / 'sources' / 'configs'
orig = low.llama_model_default_params
def params():
    p = orig(); p.use_extra_bufts = False; return p
def cut(name, layers, width, **extra):
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    cfg.update({"num_hidden_layers": layers, "vocab_size": 32000, "max_position_embeddings": 4096})
    for key in ("moe_intermediate_size", "intermediate_size"):
        if key in cfg: cfg[key] = width
    cfg.update(extra)
    return spec_from_config(cfg, "test/" + name.split("__", 1)[-1] + "-cut")
used = collections.defaultdict(set)
@low.ggml_backend_sched_eval_callback
def cb(t, ask, ud):
    name = ctypes.string_at(t + 256, 64).split(b"\0")[0].decode()
    if not name.startswith("ffn_moe_topk"):
        return False
    if ask: return True
    ne = (ctypes.c_int64 * 4).from_address(t + 16); nb = (ctypes.c_size_t * 4).from_address(t + 48)
    data = ctypes.c_void_p.from_address(t + 248).value
    for i1 in range(ne[1]):
        for i0 in range(ne[0]):
            used[name].add(ctypes.c_int32.from_address(data + i1 * nb[1] + i0 * nb[0]).value)
    return True
CASES = {"qwen3moe-real": ("Qwen__Qwen3-30B-A3B", 12, 768, {}), "mixtral-real4": ("mistralai__Mixtral-8x7B-v0.1", 5, 14336, {}), "qwen2moe-real": ("Qwen__Qwen1.5-MoE-A2.7B-Chat", 12, 1408, {"shared_expert_intermediate_size": 5632}),
         "qwen3moe": ("Qwen__Qwen3-30B-A3B", 12, 64, {}),
         # every layer (sources/measurements/synthetic-moe-routing.json, 2026-12-03): Qwen3-30B-A3B at width 64
         "qwen3moe48": ("Qwen__Qwen3-30B-A3B", 48, 64, {}),
         "mixtral": ("mistralai__Mixtral-8x7B-v0.1", 12, 64, {}),
         "qwen2moe": ("Qwen__Qwen1.5-MoE-A2.7B-Chat", 12, 64, {"shared_expert_intermediate_size": 64}),
         "deepseek2": ("deepseek-ai__DeepSeek-V2-Lite", 12, 64, {})}
import random
for label in sys.argv[1:]:
    name, layers, width, extra = CASES[label]
    spec = cut(name, layers, width, **extra)
    p = build_synthetic_gguf(spec, "Q8_0", Path(tempfile.gettempdir()) / "route.gguf")
    cp = low.llama_context_default_params(); cp.n_ctx = 1024; cp.n_batch = 512; cp.n_ubatch = 512; cp.cb_eval = cb
    cp.n_threads = 2; cp.n_threads_batch = 2
    mp = params(); mp.n_gpu_layers = 0
    logf = tempfile.TemporaryFile(); saved = os.dup(2); os.dup2(logf.fileno(), 2)
    model = low.llama_model_load_from_file(str(p).encode(), mp); ctx = low.llama_init_from_model(model, cp)
    os.dup2(saved, 2)
    rng = random.Random(0); n = 512
    b = low.llama_batch_init(n, 0, 1); b.n_tokens = n
    for i in range(n):
        b.token[i] = rng.randrange(32000); b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = i == n - 1
    used.clear(); rc = low.llama_decode(ctx, b)
    per = sorted((int(k.split("-")[-1]), len(v)) for k, v in used.items())
    print(json.dumps({"case": label, "experts": spec.num_experts, "top_k": spec.num_experts_per_tok, "rc": rc,
                      "distinct_experts_per_layer": [c for _, c in per]}), flush=True)
    low.llama_batch_free(b); low.llama_free(ctx); low.llama_model_free(model)
