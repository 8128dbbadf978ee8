#!/usr/bin/env bash
# llama.cpp partial offload (llama-bench -ngl N) on the lent H200 host, dense against MoE: the measurements that check
# docs/estimates.md section 6.7 (estimate-v4: an MoE step reads only the experts its token touches, on the GPU and in
# host RAM alike). Synthetic (random-weight) GGUFs of real shapes from the project's writer (bench/h200_synth.py).
#
# One batch of work longer than a device call: `start` launches it as its own process session and returns after
# WAIT_S seconds; `collect WAIT_S` (next call, same warm machine) waits for the rest. Everything is under $H2O_WORK
# (/tmp/h2o); each call copies res/ to $OUT.
#
# Usage, on the device, in the checkout root holding .device/ (../shared/device/prepare.sh --llama 0.3.36):
#   bash bench/h200_offload.sh start 560
#   bash bench/h200_offload.sh collect 560
# What it runs: pip-installs the carried wheels; builds llama-bench (CUDA, sm_90) from the llama-cpp-python sdist's
# llama.cpp while the writer makes Qwen2.5-7B Q4_K_M (dense, 28 blocks) and Qwen3-30B-A3B Q4_K_M (MoE, 48 blocks,
# 128 experts, 8 per token); then llama-bench -fa 1 -p 512 -n 64 -r 2 -t 16 at four -ngl values each (every layer,
# about 3/4, 1/2 and 1/4 of the blocks); a host-memory copy bandwidth figure (numpy, one and 16 threads).
set -uo pipefail
mode=${1:-start}
wait_s=${2:-560}
CODE=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$PWD
W=${H2O_WORK:-/tmp/h2o}
R=$W/res
M=$W/models
export PYTHONPATH=$CODE:/tmp/site PYTHONUNBUFFERED=1
log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - $(cat $W/t0) ))s] $*" | tee -a $R/pipeline.log >&2; }

pipeline() {
  SRC=$(ls -d $W/llama_cpp_python-*/vendor/llama.cpp)
  ( cmake -S $SRC -B $W/build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release \
    && cmake --build $W/build -j14 --target llama-bench ) > $R/build.log 2>&1 &
  bpid=$!
  python3 $CODE/bench/h200_synth.py $M Qwen/Qwen2.5-7B:Q4_K_M Qwen/Qwen3-30B-A3B:Q4_K_M >> $R/synth.jsonl \
    2>> $R/synth.log
  log "synthetic files written: $(ls $M | tr '\n' ' ')"
  python3 - >> $R/host_bandwidth.json 2>> $R/synth.log <<'PY'
import json, os, threading, time
import numpy as np
n = 1 << 28  # 2 GiB of float64
a, b = np.ones(n), np.empty(n)
def copy(lo, hi):
    np.copyto(b[lo:hi], a[lo:hi])
for threads in (1, 16):
    best = 0.0
    for _ in range(3):
        parts = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
        ts = [threading.Thread(target=copy, args=p) for p in parts]
        t0 = time.perf_counter()
        [t.start() for t in ts]; [t.join() for t in ts]
        dt = time.perf_counter() - t0
        best = max(best, 2 * a.nbytes / dt)  # read + write
    print(json.dumps({"threads": threads, "copy_bytes_per_s": best, "cpus": os.cpu_count()}))
PY
  wait $bpid; log "build rc=$?"
  B=$W/build/bin/llama-bench
  for spec in "Qwen2.5-7B 29 22 15 8" "Qwen3-30B-A3B 49 37 25 13"; do
    set -- $spec; name=$1; shift
    for ngl in "$@"; do
      echo "# llama-bench -m $name-Q4_K_M.gguf -ngl $ngl -fa 1 -p 512 -n 64 -r 2 -t 16 -o jsonl" >> $R/bench.log
      $B -m $M/$name-Q4_K_M.gguf -ngl $ngl -fa 1 -p 512 -n 64 -r 2 -t 16 -o jsonl >> $R/bench.jsonl 2>> $R/bench.log
      log "$name ngl $ngl rc=$?"
    done
  done
  rm -f $M/*.gguf
  log "done"; touch $W/done
}

case $mode in
  start)
    mkdir -p $R $M; date +%s > $W/t0
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $ROOT/${H2O_DEVICE:-.device}/whl/*.whl \
      > $R/pip.log 2>&1 || { echo "pip install failed"; cat $R/pip.log; }
    tar xzf $ROOT/${H2O_DEVICE:-.device}/llama_cpp_python.tar.gz -C $W
    python3 -c 'import os, sys
if os.fork(): sys.exit(0)
os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' bash "$0" pipeline < /dev/null > $W/pipeline.out 2>&1
    ;&
  collect)
    end=$(( $(date +%s) + wait_s ))
    while [ $(date +%s) -lt $end ] && [ ! -e $W/done ]; do sleep 5; done
    cp $R/* ${OUT:-/tmp}/ 2>/dev/null
    tail -20 $R/pipeline.log; tail -5 $W/pipeline.out
    ;;
  pipeline) pipeline ;;
esac
