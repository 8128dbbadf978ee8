#!/usr/bin/env bash
# llama-bench on the lent H200 over synthetic (random-weight) GGUFs of one model of each architecture kind the writer
# learned in issue 22 (recommender/probes/synthetic.py): hybrid linear attention (Qwen3.5-9B: Gated DeltaNet + full
# attention), a 2026 MoE on the same hybrid (Qwen3.6-35B-A3B: 256 experts, 8 active, gated shared expert) and a
# Mamba-2 hybrid MoE (Nemotron-3-Nano-30B-A3B: Mamba-2 + MoE + 6 attention layers), all Q4_K_M, full widths.
#
# One device call (at most ~8 minutes): the CUDA build of llama-bench (sm_90) from the llama-cpp-python 0.3.36 sdist
# that ../shared/device/prepare.sh --llama 0.3.36 put in .device/, while the writer makes the three files; then
# llama-bench -ngl 99 -fa 1 -p 512 -n 128 -d 0,8192 -r 2 on each (jsonl), file deleted after its run.
# Usage on the device, in the checkout root: bash bench/h200_arch_kinds.sh   (writes $OUT/bench.jsonl, logs)
set -uo pipefail
M=/tmp/archm; mkdir -p $M
source bench/h200_build.sh  # OUT, log, wheels on PYTHONPATH, llama-bench build started: SRC, BUILD
# the writer runs beside the build; the third file (22 GB) waits until the first one was benched and deleted (disk: 64 GB)
python3 - "$M" > "$OUT/write.jsonl" 2>> "$OUT/run.log" <<'PY' &
import json, sys, time
from pathlib import Path
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
from recommender.model.quant import weights_bytes
out = Path(sys.argv[1])
for i, mid in enumerate(("Qwen/Qwen3.5-9B", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "Qwen/Qwen3.6-35B-A3B")):
    while i == 2 and (out / "Qwen3.5-9B.Q4_K_M.gguf").exists():
        time.sleep(1)
    cfg = json.loads((Path("sources/configs") / (mid.replace("/", "__") + ".json")).read_text())
    spec = spec_from_config(cfg, mid)
    t = time.time()
    p = build_synthetic_gguf(spec, "Q4_K_M", out / (mid.split("/")[1] + ".Q4_K_M.gguf"))
    print(json.dumps({"model": mid, "file": p.name, "file_bytes": p.stat().st_size,
                      "tensor_bytes": weights_bytes(spec, "Q4_K_M"), "write_s": round(time.time() - t, 1)}), flush=True)
PY
WRITER=$!
wait $BUILD; rc=$?
log "build rc=$rc"
tail -5 /tmp/cmake.log > "$OUT/cmake_tail.log"
[ $rc -eq 0 ] || exit 4
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
for f in $M/Qwen3.5-9B.Q4_K_M.gguf $M/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.Q4_K_M.gguf $M/Qwen3.6-35B-A3B.Q4_K_M.gguf; do
  while [ ! -f "$f" ] && kill -0 $WRITER 2>/dev/null; do sleep 1; done
  [ -f "$f" ] || { log "missing $f"; continue; }
  log "bench $(basename $f)"
  timeout 150 "$SRC/build/bin/llama-bench" -m "$f" -ngl 99 -fa 1 -p 512 -n 128 -d 0,8192 -r 2 -o jsonl \
    >> "$OUT/bench.jsonl" 2>> "$OUT/bench_err.log"
  log "rc=$? $(basename $f)"
  rm -f "$f"
done
wait $WRITER
log done
