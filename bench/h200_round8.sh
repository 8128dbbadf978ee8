#!/usr/bin/env bash
# Issue 25, round 8 on the lent H200: held-out decode rows for models with no H200 row yet, with llama.cpp's own C++
# tools (vendored in llama-cpp-python 0.3.36, built for sm_90) over synthetic (random-weight, seed 0) Q4_K_M GGUFs
# of the real shapes written by the project's writer (recommender/probes/synthetic.py), as rounds 4-7 did.
#   B. batched decode: llama-batched-bench -ngl 99 -fa on -c 45056 -npp 512 -ntg 128 -npl 1,2,4,8,16,32,64 -t 2
#      (bench/h200_round4.sh's layout)
#   K. KV cache sweep: llama-bench -ngl 99 -t 2 -fa 1 -ctk T -ctv T -p 0 -n 128 -d 4096,16384,32768 -r 2 for
#      T = f16, q8_0, q4_0 (decode only: the calibration fits tg at a depth, bench/h200_csv_rows.py; no pp512 at depth)
# Models, in this order: Qwen/Qwen3-14B (qwen3, dense), zai-org/GLM-4.7-Flash (deepseek2 layout: MLA + 64 routed
# experts, top-4; f16 cache only: flash attention over MLA's 576/512-wide heads has CUDA kernels for F16 caches
# only, ggml-cuda/fattn.cu, so a quantized cache would put the op on the CPU), google/gemma-3-4b-it (gemma3:
# 5 of 6 layers sliding-window 1024, head_dim 256), mistralai/Ministral-3-3B-2512 (mistral3), microsoft/phi-4
# (phi3, fused QKV), Qwen/Qwen3.5-4B (qwen35 hybrid). Each loads in the vendored llama.cpp (checked on a 4-layer
# CPU cut of each before the run, llama-cpp-python 0.3.36).
# Resumable: every finished item leaves $W/res/<item>.done; a second call on the same (still warm) machine reuses the
# build and the written files and runs the items not yet done. Each call stops starting items when fewer than the
# item's planned seconds are left of BUDGET_S, and returns every result so far ($OUT/res.tgz, $OUT/run.log).
# Usage on the device, in the checkout root, .device carried: bash bench/h200_round8.sh BUDGET_S
set -uo pipefail
budget=${1:-540}
CODE=$PWD
W=/tmp/r8; R=$W/res; M=$W/models
mkdir -p "$R" "$M"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s); deadline=$(( t0 + budget ))
log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - t0 ))s] $*" | tee -a "$R/run.log" >&2; }
now_ms() { date +%s%3N; }
event() { echo "{\"item\": \"$1\", \"start_ms\": $2, \"end_ms\": $3, \"rc\": $4}" >> "$R/events.jsonl"; }
log "call start, budget $budget s"

if [ ! -e $W/pip-done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/whl/*.whl > "$R/pip.log" 2>&1 \
    && touch $W/pip-done || { log "pip install failed"; tail -5 "$R/pip.log"; }
fi
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$CODE
[ -n "$(ls -d $W/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null)" ] || tar xzf .device/llama_cpp_python.tar.gz -C $W
SRC=$(ls -d $W/llama_cpp_python-*/vendor/llama.cpp | head -1)
BIN=$SRC/build/bin
BUILD=""
if [ ! -x "$BIN/llama-bench" ] || [ ! -x "$BIN/llama-batched-bench" ]; then
  log "build start ($SRC)"
  ( cd "$SRC" && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release > "$R/build.log" 2>&1 \
    && cmake --build build -j15 --target llama-bench llama-batched-bench >> "$R/build.log" 2>&1 ) &
  BUILD=$!
else
  log "build present"
fi
[ -s "$R/gpu.txt" ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$R/gpu.txt" 2>&1
[ -s "$R/host.txt" ] || { nproc > "$R/host.txt"; df -h $W >> "$R/host.txt"; free -g >> "$R/host.txt"; }
python3 bench/h200_gpumem.py "$R/gpumem.txt" & SAMPLER=$!

# model tag -> HF id; items: tag:kind[:kv]:planned_s (kind B = batched, K = KV sweep)
declare -A MID=([Qwen3-14B]=Qwen/Qwen3-14B [GLM-4.7-Flash]=zai-org/GLM-4.7-Flash [gemma-3-4b-it]=google/gemma-3-4b-it
                [Ministral-3-3B-2512]=mistralai/Ministral-3-3B-2512 [phi-4]=microsoft/phi-4 [Qwen3.5-4B]=Qwen/Qwen3.5-4B)
ITEMS="Qwen3-14B:B:60 Qwen3-14B:K:f16:50 Qwen3-14B:K:q8_0:50 Qwen3-14B:K:q4_0:50
GLM-4.7-Flash:B:80 GLM-4.7-Flash:K:f16:70
gemma-3-4b-it:B:30 gemma-3-4b-it:K:f16:30 gemma-3-4b-it:K:q8_0:30 gemma-3-4b-it:K:q4_0:30
Ministral-3-3B-2512:B:30 Ministral-3-3B-2512:K:f16:30 Ministral-3-3B-2512:K:q8_0:30 Ministral-3-3B-2512:K:q4_0:30
phi-4:B:60 phi-4:K:f16:50 phi-4:K:q8_0:50 phi-4:K:q4_0:50
Qwen3.5-4B:B:40 Qwen3.5-4B:K:f16:40 Qwen3.5-4B:K:q8_0:40 Qwen3.5-4B:K:q4_0:40"
item_name() { local a=(${1//:/ }); [ "${a[1]}" = B ] && echo "batched-${a[0]}-Q4_K_M" || echo "bench-kv-${a[0]}-Q4_K_M-${a[2]}"; }
pending_models() { local it seen=""; for it in $ITEMS; do [ -e "$R/$(item_name $it).done" ] && continue
  local m=${it%%:*}; case " $seen " in *" $m "*) ;; *) seen="$seen $m";; esac; done; echo $seen; }

PENDING=$(pending_models)
log "pending models: $PENDING"
python3 - "$M" $(for m in $PENDING; do echo "${MID[$m]}"; done) >> "$R/synth.jsonl" 2>> "$R/synth.log" <<'PY' &
import json, shutil, sys, time
from pathlib import Path
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
from recommender.model.quant import weights_bytes
out = Path(sys.argv[1])
for mid in sys.argv[2:]:
    path = out / f"{mid.split('/')[1]}-Q4_K_M.gguf"
    if path.exists():
        continue
    cfg = json.loads((Path("sources/configs") / (mid.replace("/", "__") + ".json")).read_text())
    spec = spec_from_config(cfg, mid)
    while shutil.disk_usage(out).free < weights_bytes(spec, "Q4_K_M") * 1.05 + 4e9:
        time.sleep(1)
    t = time.time()
    try:
        build_synthetic_gguf(spec, "Q4_K_M", Path(str(path) + ".part"))
        Path(str(path) + ".part").rename(path)
        print(json.dumps({"model_id": mid, "quant": "Q4_K_M", "file": path.name, "file_bytes": path.stat().st_size,
                          "tensor_bytes": weights_bytes(spec, "Q4_K_M"), "write_s": round(time.time() - t, 1),
                          "writer": "recommender.probes.synthetic", "seed": 0}), flush=True)
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"model_id": mid, "quant": "Q4_K_M", "error": repr(e)}), flush=True)
        (out / (path.name + ".failed")).touch()
PY
WRITER=$!

if [ -n "$BUILD" ]; then wait $BUILD; rc=$?; log "build rc=$rc"; [ $rc -eq 0 ] || { tail -20 "$R/build.log"; }; fi

wait_file() {  # 0 when the file is there, 1 when the writer gave up on it or is gone without it
  while [ ! -f "$1" ]; do
    [ -e "$1.failed" ] && return 1
    kill -0 $WRITER 2>/dev/null || { [ -f "$1" ] && return 0 || return 1; }
    [ $(date +%s) -ge $deadline ] && return 1
    sleep 1
  done
}

last_use() {  # 0 when no later pending item uses model $1
  local it found=0
  for it in $ITEMS; do
    [ "$it" = "$2" ] && { found=1; continue; }
    [ $found = 1 ] && [ "${it%%:*}" = "$1" ] && [ ! -e "$R/$(item_name $it).done" ] && return 1
  done
  return 0
}

stopped=""
for it in $ITEMS; do
  name=$(item_name $it); [ -e "$R/$name.done" ] && continue
  a=(${it//:/ }); m=${a[0]}; planned=${a[-1]}
  if [ -n "$stopped" ] || [ $(( $(date +%s) + planned )) -gt $deadline ]; then stopped=1; log "deferred $name"; continue; fi
  f=$M/$m-Q4_K_M.gguf
  wait_file "$f" || { log "no file for $m"; continue; }
  s=$(now_ms)
  if [ "${a[1]}" = B ]; then
    echo "# cmd: llama-batched-bench -m $(basename $f) -ngl 99 -fa on -c 45056 -npp 512 -ntg 128 -npl 1,2,4,8,16,32,64 -t 2 --output-format jsonl" > "$R/$name.log"
    timeout 150 "$BIN/llama-batched-bench" -m "$f" -ngl 99 -fa on -c 45056 -npp 512 -ntg 128 -npl 1,2,4,8,16,32,64 -t 2 \
      --output-format jsonl > "$R/$name.jsonl" 2>> "$R/$name.log"
  else
    kv=${a[2]}
    echo "# cmd: llama-bench -m $(basename $f) -ngl 99 -t 2 -o jsonl -fa 1 -ctk $kv -ctv $kv -p 0 -n 128 -d 4096,16384,32768 -r 2" > "$R/$name.log"
    timeout 150 "$BIN/llama-bench" -m "$f" -ngl 99 -t 2 -o jsonl -fa 1 -ctk $kv -ctv $kv -p 0 -n 128 \
      -d 4096,16384,32768 -r 2 > "$R/$name.jsonl" 2>> "$R/$name.log"
  fi
  rc=$?
  event "$name" $s $(now_ms) $rc
  touch "$R/$name.done"
  log "$name rc=$rc $(( ($(now_ms) - s) / 1000 )) s, $(grep -c . "$R/$name.jsonl") lines"
  last_use "$m" "$it" && rm -f "$f"
done
kill $WRITER $SAMPLER 2>/dev/null
wait $WRITER $SAMPLER 2>/dev/null
df -h $W | tail -1 >> "$R/run.log"
log "call end ($( [ -n "$stopped" ] && echo 'items deferred' || echo 'all items done'))"
tar czf "$OUT/res.tgz" -C $W res
cp "$R/run.log" "$OUT/run.log"
tail -3 "$R/synth.log" 2>/dev/null
