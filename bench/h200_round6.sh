#!/usr/bin/env bash
# Issue 25 diagnostic (not fitted): llama.cpp's own llama-bench on the lent H200 over synthetic GGUFs of the models
# whose probe rows stay outside the 12 % P90 leave-one-model-out (Qwen2.5-1.5B F16 / Q4_0 +11-22 %, gemma-2-9b-it
# Q4_K_M / F16 +10-12 %) and one that sits inside (Qwen3-0.6B F16), in the probe rows' shape (prompt 512, 64 output
# tokens, all layers on the GPU, flash attention): does llama-bench read what the probe (llama-cpp-python) read, or is
# the outlier the probe's own per-token overhead? Compare tg64 with the probe rows' TPOT in
# sources/measurements/h200-llamacpp-synthetic*.jsonl.
# OFFLOAD=1: instead, Qwen3-30B-A3B Q4_K_M with 25 / 37 of 49 blocks on the GPU, llama-bench -lm mmap (the default "auto" maps, as
# the shipped offload rows ran) and -lm none (host weights read into ordinary memory): does the host-expert copy rate
# of the offload prefill depend on mmap (issue 25 item 4; compare sources/measurements/h200-partial-offload.csv)?
# Usage on the device, in the checkout root: bash bench/h200_round6.sh   (writes $OUT/bench.jsonl, logs)
set -uo pipefail
M=/tmp/r6; mkdir -p $M
source bench/h200_build.sh  # OUT, log, wheels on PYTHONPATH, llama-bench build started: SRC, BUILD
OFFLOAD=${OFFLOAD:-} python3 - "$M" > "$OUT/write.jsonl" 2>> "$OUT/run.log" <<'PY'
import json, sys, time
from pathlib import Path
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
from recommender.model.quant import weights_bytes
out = Path(sys.argv[1])
import os
models = (("Qwen/Qwen2.5-1.5B", "F16"), ("Qwen/Qwen2.5-1.5B", "Q4_0"), ("Qwen/Qwen3-0.6B", "F16"),
                   ("google/gemma-2-9b-it", "Q4_K_M"), ("google/gemma-2-9b-it", "F16"))
if os.environ.get("OFFLOAD"):
    models = (("Qwen/Qwen3-30B-A3B", "Q4_K_M"),)
for mid, quant in models:
    cfg = json.loads((Path("sources/configs") / (mid.replace("/", "__") + ".json")).read_text())
    spec = spec_from_config(cfg, mid)
    t = time.time()
    p = build_synthetic_gguf(spec, quant, out / (mid.split("/")[1] + f".{quant}.gguf"))
    print(json.dumps({"model": mid, "quant": quant, "file": p.name, "file_bytes": p.stat().st_size,
                      "tensor_bytes": weights_bytes(spec, quant), "write_s": round(time.time() - t, 1)}), flush=True)
PY
log "writer rc=$?"
wait $BUILD; rc=$?
log "build rc=$rc"
tail -5 /tmp/cmake.log > "$OUT/cmake_tail.log"
[ $rc -eq 0 ] || exit 4
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
for f in $M/*.gguf; do
  log "bench $(basename $f)"
  if [ -n "${OFFLOAD:-}" ]; then
    for lm in mmap none; do for ngl in 25 37; do
      timeout 100 "$SRC/build/bin/llama-bench" -m "$f" -ngl $ngl -lm $lm -fa 1 -p 512 -n 64 -r 2 -t 16 -o jsonl \
        >> "$OUT/bench.jsonl" 2>> "$OUT/bench_err.log"
    done; done
  else
    timeout 90 "$SRC/build/bin/llama-bench" -m "$f" -ngl 99 -fa 1 -p 512 -n 64 -r 3 -o jsonl \
      >> "$OUT/bench.jsonl" 2>> "$OUT/bench_err.log"
  fi
  log "rc=$? $(basename $f)"
  rm -f "$f"
done
log done
