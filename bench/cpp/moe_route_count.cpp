// Distinct routed experts per MoE layer in one prompt micro-batch, on the GPU (bench/h200_round7.sh).
// llama.cpp's scheduler copies only the experts a micro-batch uses from host-resident expert tensors
// (ggml-backend.cpp ggml_backend_sched_compute_splits, MUL_MAT_ID inputs), so the copied bytes depend on this count.
// Usage: moe_route_count FILE.gguf [n_tokens=512]   (all layers on the GPU; tokens std::rand() % n_vocab as llama-bench)
// Checked on the development CPU (2026-12-03), built against llama-cpp-python 0.3.36's libllama / headers: a 12-layer
// Qwen3-30B-A3B cut (expert width 64, Q8_0, the project's synthetic writer) gives 119, 41, 42, 34, 32, 34, 29, 25, 26,
// 21, 25, 8 distinct experts in layers 0-11 (bench/synthetic_routing.py, other random tokens, 48 layers: 123, 59, 45,
// 38, 34, 35, 27, 28, 24, 31, 21, 19). Not yet run on the GPU (bench/h200_round7.sh did not run).
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

static std::map<int, std::set<int>> used;

static bool cb(struct ggml_tensor * t, bool ask, void *) {
    if (strncmp(t->name, "ffn_moe_topk", 12) != 0) return false;
    if (ask) return true;
    const char * dash = strrchr(t->name, '-');
    const int il = dash ? atoi(dash + 1) : -1;
    std::vector<char> buf(ggml_nbytes(t));
    ggml_backend_tensor_get(t, buf.data(), 0, buf.size());
    for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
        for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
            used[il].insert(*(const int32_t *)(buf.data() + i1 * t->nb[1] + i0 * t->nb[0]));
    return true;
}

int main(int argc, char ** argv) {
    if (argc < 2) return 2;
    const int n = argc > 2 ? atoi(argv[2]) : 512;
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 999;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 3;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2 * n; cp.n_batch = n; cp.n_ubatch = n; cp.cb_eval = cb; cp.cb_eval_user_data = nullptr;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) return 4;
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<llama_token> tok(n);
    for (int i = 0; i < n; i++) tok[i] = std::rand() % nv;
    const int rc = llama_decode(ctx, llama_batch_get_one(tok.data(), n));
    printf("{\"file\": \"%s\", \"n_tokens\": %d, \"rc\": %d, \"distinct_experts_per_layer\": [", argv[1], n, rc);
    bool first = true;
    for (auto & kv : used) { printf("%s%zu", first ? "" : ", ", kv.second.size()); first = false; }
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}
