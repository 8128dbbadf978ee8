#!/usr/bin/env bash
# Round 5 on the lent H200 (issue 25; round 4's layout: bench/h200_round4.sh with round 5's items): held-out rows for MoE batched decode and MoE partial offload, on MoE models of
# other shapes than Qwen3-30B-A3B (the only MoE with batched rows so far), with llama.cpp's C++ tools over synthetic
# (random-weight) GGUFs written by the project's writer (recommender/probes/synthetic.py, seed 0). Same build and
# layout as bench/h200_round4.sh. Random router weights spread the tokens over the experts about evenly; real routing is
# skewed, so at B > 1 a real model may touch fewer distinct experts per step than these files do (the rows are an upper
# bound on the expert reads there); at B = 1 a token reads top-k experts either way.
#   B. batched decode: llama-batched-bench -ngl 99 -fa on -c 45056 -npp 512 -ntg 128 -npl 1,2,4,8,16,32,64 -t 2 on
#      Qwen1.5-MoE-A2.7B-Chat, DeepSeek-V2-Lite, Qwen3.6-35B-A3B, Mixtral-8x7B-v0.1 (all Q4_K_M)
#   O. partial offload: llama-bench -ngl N -fa 1 -p 512 -n 64 -r 2 -t 16 on Qwen1.5-MoE-A2.7B-Chat (N = 25/18/12/6 of
#      24 blocks + output) and Mixtral-8x7B-v0.1 (N = 33/24/16/8 of 32 + output), as bench/h200_offload.sh did
#   K. gemma-4-E4B (a Gemma-4 E-model) llama-bench -ngl 99 -fa 1 -p 512 -n 128 -d 0,8192 -r 2, if the vendored
#      llama.cpp loads it
# Usage on the device, in the checkout root: bash bench/h200_round5.sh start 570 ; bash bench/h200_round5.sh collect 300
set -uo pipefail
mode=${1:-start}
wait_s=${2:-560}
CODE=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$PWD
W=/tmp/r5; R=$W/res; M=$W/models
export PYTHONUNBUFFERED=1 PYTHONPATH=$CODE:/tmp/site
log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - $(cat $W/t0 2>/dev/null || date +%s) ))s] $*" | tee -a $W/pipeline.log >&2; }
now_ms() { date +%s%3N; }
event() { echo "{\"item\": \"$1\", \"start_ms\": $2, \"end_ms\": $3, \"rc\": $4}" >> $R/events.jsonl; }

writer() {  # files in GPU order; each waits for disk room (the GPU side deletes a file after its last use)
  python3 - $M >> $R/synth.jsonl 2>> $R/synth.log <<'PY'
import json, shutil, sys, time
from pathlib import Path
from recommender.model.arch import spec_from_config
from recommender.probes.synthetic import build_synthetic_gguf
from recommender.model.quant import weights_bytes
out = Path(sys.argv[1])
items = [("Qwen/Qwen1.5-MoE-A2.7B-Chat", "Q4_K_M"), ("deepseek-ai/DeepSeek-V2-Lite", "Q4_K_M"),
         ("Qwen/Qwen3.6-35B-A3B", "Q4_K_M"), ("mistralai/Mixtral-8x7B-v0.1", "Q4_K_M"), ("google/gemma-4-E4B", "Q4_K_M")]
for mid, q in items:
    cfg = json.loads((Path("sources/configs") / (mid.replace("/", "__") + ".json")).read_text())
    spec = spec_from_config(cfg, mid)
    need = weights_bytes(spec, q) * 1.05 + 3e9
    while shutil.disk_usage(out).free < need:
        time.sleep(1)
    path = out / f"{mid.split('/')[1]}-{q}.gguf"
    t = time.time()
    try:
        build_synthetic_gguf(spec, q, Path(str(path) + ".part"))
        Path(str(path) + ".part").rename(path)
        print(json.dumps({"model_id": mid, "quant": q, "file": path.name, "file_bytes": path.stat().st_size,
                          "tensor_bytes": weights_bytes(spec, q), "write_s": round(time.time() - t, 1),
                          "writer": "recommender.probes.synthetic", "seed": 0}), flush=True)
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"model_id": mid, "quant": q, "error": repr(e)}), flush=True)
        (out / (path.name + ".failed")).touch()
PY
  touch $W/writer-done
}

wait_file() {  # $1 path; 0 when present, 1 when the writer gave up on it
  while [ ! -f "$1" ]; do
    [ -e "$1.failed" ] && return 1
    [ -e $W/writer-done ] && [ ! -f "$1" ] && return 1
    sleep 1
  done
}

bench() {  # $1 tag, $2 file, rest: llama-bench args
  local tag=$1 f=$2; shift 2
  local s=$(now_ms)
  echo "# cmd: llama-bench -m $(basename $f) -ngl 99 -t 2 -o jsonl $*" > $R/bench-$tag.log
  timeout 300 $B/llama-bench -m $f -ngl 99 -t 2 -o jsonl "$@" > $R/bench-$tag.jsonl 2>> $R/bench-$tag.log
  local rc=$?
  event bench-$tag $s $(now_ms) $rc
  log "bench $tag rc=$rc $(( ($(now_ms) - s) / 1000 )) s: $(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print("p%sn%sd%s %s %.0f+-%.0f" % (d["n_prompt"], d["n_gen"], d["n_depth"], d.get("type_k"), d["avg_ts"], d["stddev_ts"]), end="; ")
' $R/bench-$tag.jsonl 2>/dev/null)"
}

offload() {  # $1 tag, $2 file, $3 n_gpu_layers
  local tag=$1 f=$2 ngl=$3 s=$(now_ms)
  echo "# cmd: llama-bench -m $(basename $f) -ngl $ngl -fa 1 -p 512 -n 64 -r 2 -t 16 -o jsonl" > $R/offload-$tag-$ngl.log
  timeout 200 $B/llama-bench -m $f -ngl $ngl -fa 1 -p 512 -n 64 -r 2 -t 16 -o jsonl > $R/offload-$tag-$ngl.jsonl \
    2>> $R/offload-$tag-$ngl.log
  local rc=$?
  event offload-$tag-$ngl $s $(now_ms) $rc
  log "offload $tag ngl $ngl rc=$rc $(( ($(now_ms) - s) / 1000 )) s: $(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print("p%sn%s %.1f" % (d["n_prompt"], d["n_gen"], d["avg_ts"]), end="; ")
' $R/offload-$tag-$ngl.jsonl 2>/dev/null)"
}

batched() {  # $1 tag, $2 file
  local tag=$1 f=$2 s=$(now_ms)
  echo "# cmd: llama-batched-bench -m $(basename $f) -ngl 99 -fa on -c 45056 -npp 512 -ntg 128 -npl 1,2,4,8,16,32,64 -t 2 --output-format jsonl" > $R/batched-$tag.log
  timeout 300 $B/llama-batched-bench -m $f -ngl 99 -fa on -c 45056 -npp 512 -ntg 128 -npl 1,2,4,8,16,32,64 -t 2 \
    --output-format jsonl > $R/batched-$tag.jsonl 2>> $R/batched-$tag.log
  local rc=$?
  event batched-$tag $s $(now_ms) $rc
  log "batched $tag rc=$rc $(( ($(now_ms) - s) / 1000 )) s: $(grep -c . $R/batched-$tag.jsonl) lines"
}

gpu_worker() {
  while [ ! -e $W/built ]; do [ -e $W/build-failed ] && { log "no CUDA build"; return; }; sleep 2; done
  local f n
  f=$M/Qwen1.5-MoE-A2.7B-Chat-Q4_K_M.gguf; wait_file $f && { batched Qwen1.5-MoE-A2.7B-Chat-Q4_K_M $f
    for n in 25 18 12 6; do offload Qwen1.5-MoE-A2.7B-Chat-Q4_K_M $f $n; done; rm -f $f; }
  f=$M/DeepSeek-V2-Lite-Q4_K_M.gguf; wait_file $f && { batched DeepSeek-V2-Lite-Q4_K_M $f; rm -f $f; }
  f=$M/Qwen3.6-35B-A3B-Q4_K_M.gguf; wait_file $f && { batched Qwen3.6-35B-A3B-Q4_K_M $f; rm -f $f; }
  f=$M/Mixtral-8x7B-v0.1-Q4_K_M.gguf; wait_file $f && { batched Mixtral-8x7B-v0.1-Q4_K_M $f
    for n in 33 24 16 8; do offload Mixtral-8x7B-v0.1-Q4_K_M $f $n; done; rm -f $f; }
  f=$M/gemma-4-E4B-Q4_K_M.gguf; wait_file $f && { bench gemma-4-E4B-Q4_K_M $f -fa 1 -p 512 -n 128 -d 0,8192 -r 2; rm -f $f; }
}

pipeline() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/gpu.txt 2>&1
  nproc > $R/host.txt; df -h $W >> $R/host.txt; free -g >> $R/host.txt
  python3 $CODE/bench/h200_gpumem.py $R/gpumem.txt & local sampler=$!
  writer & local p_w=$!
  local t=$(date +%s)
  (cmake -S $SRC -B $W/build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release \
     && cmake --build $W/build -j15 --target llama-bench llama-batched-bench) > $R/build.log 2>&1
  local rc=$?
  log "build rc=$rc in $(( $(date +%s) - t )) s"
  [ $rc = 0 ] && touch $W/built || touch $W/build-failed
  gpu_worker
  kill $p_w 2>/dev/null
  kill $sampler
  log "pipeline done"
  touch $W/done
}

pack() {
  mkdir -p $OUT
  tar czf $OUT/results.tgz -C $W res 2>/dev/null
  cp $W/pipeline.log $OUT/ 2>/dev/null
}

case $mode in
  start)
    if [ ! -e $W/t0 ]; then
      mkdir -p $R $M
      date +%s > $W/t0
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $ROOT/.device/whl/*.whl \
        > $R/pip.log 2>&1 || { echo "pip install failed"; tail $R/pip.log; }
      tar xzf $ROOT/.device/llama_cpp_python.tar.gz -C $W
      SRC=$(ls -d $W/llama_cpp_python-*/vendor/llama.cpp); echo $SRC > $W/src
      log "start: code $CODE, llama.cpp $SRC"
      python3 -c 'import os, sys
if os.fork(): sys.exit(0)
os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' bash "$0" pipeline < /dev/null > $W/pipeline.out 2>&1
    fi
    ;&
  collect)
    end=$(( $(date +%s) + wait_s ))
    while [ $(date +%s) -lt $end ] && [ ! -e $W/done ]; do sleep 3; done
    pack
    tail -30 $W/pipeline.log
    tail -5 $W/pipeline.out
    tail -3 $R/synth.log 2>/dev/null
    df -h $W | tail -1
    ;;
  pipeline)
    SRC=$(cat $W/src); B=$W/build/bin
    pipeline
    ;;
esac
