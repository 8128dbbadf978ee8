#!/usr/bin/env bash
# Issue 25, round 7 (offload load mode): llama-bench partial offload of synthetic (random-weight, seed 0) Q4_K_M GGUFs
# on the lent H200 in both llama.cpp load modes, on one machine instance: -lm mmap (host layers' weights stay in the
# mmap'd, pageable file pages) and -lm none (read into llama.cpp's CPU buffer, which is the CUDA host buffer type,
# cudaMallocHost pinned memory, when a GPU is present: llama-model.cpp make_cpu_buft_list; llama-model-loader.cpp
# "avoid using a host buffer when using mmap"). Prefill copies host weights to the GPU per 512-token micro-batch, only
# the routed experts the micro-batch uses (ggml-backend.cpp ggml_backend_sched_compute_splits): bench/cpp/
# moe_route_count.cpp counts those experts per layer in the same files (all layers on the GPU, 512 random tokens).
# Models: Mixtral-8x7B-v0.1, Qwen1.5-MoE-A2.7B-Chat, Qwen2.5-7B (dense), Qwen3-30B-A3B, at the -ngl values of the
# shipped rows (sources/measurements/h200-partial-offload*.csv).
# Usage on the device, in the checkout root, .device carried: bash bench/h200_round7.sh  (writes $OUT/*.jsonl, run.log)
set -uo pipefail
M=/tmp/r7; mkdir -p $M
source bench/h200_build.sh  # OUT, log, wheels on PYTHONPATH, llama-bench build started: SRC, BUILD
python3 - "$M" > "$OUT/write.jsonl" 2>> "$OUT/run.log" <<'PY' &
import json, shutil, sys, time
from pathlib import Path
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
from recommender.model.quant import weights_bytes
out = Path(sys.argv[1])
for mid in ("mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen1.5-MoE-A2.7B-Chat", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-30B-A3B"):
    cfg = json.loads((Path("sources/configs") / (mid.replace("/", "__") + ".json")).read_text())
    spec = spec_from_config(cfg, mid)
    while shutil.disk_usage(out).free < weights_bytes(spec, "Q4_K_M") * 1.05 + 3e9:
        time.sleep(1)
    p = out / (mid.split("/")[1] + ".Q4_K_M.gguf")
    t = time.time()
    build_synthetic_gguf(spec, "Q4_K_M", Path(str(p) + ".part"))
    Path(str(p) + ".part").rename(p)
    print(json.dumps({"model": mid, "quant": "Q4_K_M", "file": p.name, "file_bytes": p.stat().st_size,
                      "tensor_bytes": weights_bytes(spec, "Q4_K_M"), "write_s": round(time.time() - t, 1),
                      "writer": "recommender.probes.synthetic", "seed": 0}), flush=True)
PY
WRITER=$!
wait $BUILD; rc=$?
log "build rc=$rc"
tail -5 /tmp/cmake.log > "$OUT/cmake_tail.log"
[ $rc -eq 0 ] || exit 4
LIB=$(dirname "$(find "$SRC/build" -name 'libllama.so' | head -1)")
g++ -O2 -std=c++17 bench/cpp/moe_route_count.cpp -I"$SRC/include" -I"$SRC/ggml/include" -L"$LIB" -lllama -lggml \
  -lggml-base -Wl,-rpath,"$LIB" -o /tmp/moe_route_count 2>> "$OUT/run.log"; log "route counter rc=$?"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
for item in Mixtral-8x7B-v0.1:33,24,16,8 Qwen1.5-MoE-A2.7B-Chat:25,18,12,6 Qwen2.5-7B:29,22,15,8 Qwen3-30B-A3B:49,37,25,13; do
  name=${item%%:*}; ngl=${item#*:}; f=$M/$name.Q4_K_M.gguf
  while [ ! -f "$f" ]; do kill -0 $WRITER 2>/dev/null || break; sleep 1; done
  [ -f "$f" ] || { log "no file $name"; continue; }
  log "bench $name"
  timeout 200 "$SRC/build/bin/llama-bench" -m "$f" -ngl $ngl -lm mmap,none -fa 1 -p 512 -n 64 -r 2 -t 16 -o jsonl \
    >> "$OUT/bench.jsonl" 2>> "$OUT/bench_err.log"
  log "bench rc=$? $name"
  case $name in Qwen2.5-7B) ;; *) timeout 60 /tmp/moe_route_count "$f" 512 >> "$OUT/routes.jsonl" 2>> "$OUT/route_err.log"
    log "routes rc=$? $name";; esac
  rm -f "$f"
done
log done
