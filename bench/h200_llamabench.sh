#!/usr/bin/env bash
# llama.cpp's own C++ tools (llama-quantize, llama-imatrix, llama-bench, llama-batched-bench) on the lent H200, over
# synthetic (random-weight) GGUFs of real shapes written by the project's writer (recommender/probes/synthetic.py).
#
# The work outlives one 10-minute device call: `start` launches it as its own process session (setsid) and returns
# after WAIT_S seconds with what is done so far; each later call `collect WAIT_S` waits on the same machine (it stays
# warm for ~30 s between calls) and returns what is new. Everything written is under $H200_WORK (/tmp/h2); each call
# packs res/ into $OUT/results.tgz and copies the logs, so a lost machine loses only what was not yet collected.
#
# Usage, on the device, in the checkout root (the one holding .device/ from ../shared/device/prepare.sh --llama 0.3.36):
#   bash CODE/bench/h200_llamabench.sh start 560      # CODE: a copy of this project (recommender/, evaluators/,
#   bash CODE/bench/h200_llamabench.sh collect 570    #       sources/configs/, bench/), e.g. .h200code
#   bash CODE/bench/h200_llamabench.sh finish 560     # last call when device time runs out (see the mode below)
# Environment: H200_BUDGET_S (seconds from `start` after which no new long item starts; default 1450),
#              H200_QUANTS (space-separated llama-quantize types, default below), H200_SKIP_KV=1, H200_32B=1.
#
# What it runs (in this order of priority; GPU work is serial, quantization runs on the CPU beside it):
#   1. builds llama.cpp from the llama-cpp-python 0.3.36 sdist: a CPU-only build of llama-quantize + llama-imatrix
#      (quantizing needs no GPU, so it starts early), and the CUDA build (sm_90) of llama-bench + llama-batched-bench;
#   2. writes Qwen2.5-7B F16, Qwen2.5-7B Q4_K_M, Llama-3.1-8B Q4_K_M and Qwen2.5-7B Q8_0 with the project's writer;
#   3. llama-imatrix on the F16 file (random token text, 4 chunks of 128), needed by the very-low-bit I-quants;
#   4. llama-quantize F16 -> every type in QUANTS (two workers, 7 threads each, on cores 2-15), each file's tensor
#      inventory (bench/h200_gguf_types.py), then llama-bench -ngl 99 -fa 1 -p 512 -n 128 -r 3 on it (cores 0-1,
#      -t 2) and the file deleted;
#   5. llama-bench on the writer's own files at the shapes of the shipped Python-probe rows (-p 512,8192 -n 0 and
#      -p 0 -n 64 -d 512,8192, -r 3), for the C++ vs llama-cpp-python comparison;
#   6. long context x KV cache type: -d 0,8192,16384,32768,65536 -ctk/-ctv f16|q8_0|q4_0 -fa 1 -p 512 -n 128 -r 2 on
#      Qwen2.5-7B and Llama-3.1-8B Q4_K_M (writer files), filling GPU time while quantization runs;
#   7. llama-batched-bench -c 16384 -npp 512 -ntg 128 -npl 1,4,8,16 -fa on on Qwen2.5-7B Q4_K_M;
#   8. Qwen2.5-7B Q4_K_M once more after all quantization ended (a check of the CPU-contention effect on step 4).
# Long items (a quantization, a sweep) start only while H200_BUDGET_S has not run out; `finish` ends it at once.
# On 2026-12-01 (30 min of device time): start 555 / collect 565 / (inline) finish 560 with H200_BUDGET_S=1400; steps 1-6
# done except 8 I-quants, step 7 run by `finish`, step 8 not reached (see sources/measurements/README.md).
# GPU memory: bench/h200_gpumem.py samples NVML used memory every 50 ms for the whole run (res/gpumem.txt); every
# GPU item's start/end epoch ms is in res/events.jsonl.
set -uo pipefail
mode=${1:-start}
wait_s=${2:-560}
CODE=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$PWD
W=${H200_WORK:-/tmp/h2}
R=$W/res
M=$W/models
QUANTS=${H200_QUANTS:-"Q4_K_M Q8_0 Q4_0 Q5_K_M Q6_K Q3_K_M Q4_K_S Q5_K_S Q3_K_S Q3_K_L Q2_K IQ4_XS IQ4_NL Q4_1 Q5_0 Q5_1 BF16 IQ3_M IQ3_XXS IQ2_M IQ2_XXS IQ3_XS IQ2_XS IQ2_S IQ1_M IQ1_S"}
BASE_ID=${H200_BASE_ID:-Qwen/Qwen2.5-7B}; BASE=${BASE_ID#*/}              # quantized to every type
OTHER_ID=${H200_OTHER_ID:-meta-llama/Llama-3.1-8B}; OTHER=${OTHER_ID#*/}  # second architecture of the KV sweep
QCORES=${H200_QCORES:-2-15}; BCORES=${H200_BCORES:-0,1}  # quantize / imatrix cores; llama-bench cores
CUDA_FLAGS=${H200_CUDA_FLAGS:-"-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"}
NEEDS_IMATRIX=" IQ3_XXS IQ3_XS IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S "
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export PYTHONPATH=$CODE:/tmp/site

# util-linux tools may be missing on a bare image: fall back to plain runs / a mkdir lock
pin() { local cores=$1; shift; if command -v taskset >/dev/null; then taskset -c $cores "$@"; else "$@"; fi; }
pop_queue() {
  until mkdir $W/queue.lock 2>/dev/null; do sleep 0.2; done
  head -1 $W/queue; sed -i 1d $W/queue
  rmdir $W/queue.lock
}
log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - $(cat $W/t0 2>/dev/null || date +%s) ))s] $*" | tee -a $W/pipeline.log >&2; }
now_ms() { date +%s%3N; }
event() { echo "{\"item\": \"$1\", \"start_ms\": $2, \"end_ms\": $3, \"rc\": $4}" >> $R/events.jsonl; }
left_s() { echo $(( $(cat $W/deadline) - $(date +%s) )); }

build() {  # $1 name, $2 cmake -D flags, $3.. targets
  local name=$1 flags=$2; shift 2
  if [ -n "${H200_PREBUILT:-}" ]; then ln -sfn $H200_PREBUILT $W/build-$name; touch $W/built-$name; return; fi
  local t=$(date +%s)
  (cmake -S $SRC -B $W/build-$name $flags -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release && cmake --build $W/build-$name -j16 --target "$@") \
    > $R/build-$name.log 2>&1
  local rc=$?
  log "build-$name rc=$rc in $(( $(date +%s) - t )) s"
  [ $rc = 0 ] && touch $W/built-$name || touch $W/failed-$name
}

synth() {  # writer files, most needed first
  python3 $CODE/bench/h200_synth.py $M $BASE_ID:F16 >> $R/synth.jsonl 2>>$R/synth.log && touch $W/have-f16
  python3 $CODE/bench/h200_synth.py $M $BASE_ID:Q4_K_M $OTHER_ID:Q4_K_M $BASE_ID:Q8_0 \
    >> $R/synth.jsonl 2>>$R/synth.log
  touch $W/have-synth
  log "writer files: $(ls $M | tr '\n' ' ')"
}

imatrix() {
  while [ ! -e $W/built-cpu ] || [ ! -e $W/have-f16 ]; do [ -e $W/failed-cpu ] && return; sleep 2; done
  # MXFP4_MOE on a dense model, from the tensor types alone (--dry-run writes no file)
  $W/build-cpu/bin/llama-quantize --dry-run $M/$BASE-F16.gguf $W/mxfp4.gguf MXFP4_MOE > $R/quantize-MXFP4_MOE-dry-run.log 2>&1
  python3 - > $W/imatrix-text.txt <<'PY'
import random
random.seed(0)
words = "the of and to in is was for on that with as by at from his her it an were are which this be or".split()
print(" ".join(random.choice(words) for _ in range(40000)))
PY
  local t=$(date +%s)
  CUDA_VISIBLE_DEVICES=-1 pin $QCORES $W/build-cpu/bin/llama-imatrix -m $M/$BASE-F16.gguf -f $W/imatrix-text.txt \
    -o $W/imatrix.gguf -c 128 --chunks 4 -t 14 > $R/imatrix.log 2>&1
  log "imatrix rc=$? in $(( $(date +%s) - t )) s ($(stat -c %s $W/imatrix.gguf 2>/dev/null) bytes)"
  touch $W/imatrix-done
}

disk_free_gb() { df --output=avail -B1G $M | tail -1 | tr -d ' '; }

quant_worker() {  # $1 worker id; pops types from $W/queue
  while [ ! -e $W/built-cpu ] || [ ! -e $W/have-f16 ]; do [ -e $W/failed-cpu ] && return; sleep 2; done
  while true; do
    local t
    t=$(pop_queue)
    [ -z "$t" ] && break
    if [ "$(left_s)" -lt 150 ]; then log "quant $t skipped: time budget"; echo "{\"quant\": \"$t\", \"skipped\": \"time budget\"}" >> $R/quant-files.jsonl; continue; fi
    local need=8; case $t in BF16) need=18;; Q8_0|Q6_K|Q5_*) need=11;; esac
    while [ "$(disk_free_gb)" -lt $need ]; do sleep 3; done
    local imx=()
    if [[ $NEEDS_IMATRIX == *" $t "* ]]; then
      while [ ! -e $W/imatrix-done ]; do sleep 2; done
      [ -s $W/imatrix.gguf ] && imx=(--imatrix $W/imatrix.gguf)
    fi
    local out=$M/q-$t.gguf t0=$(now_ms)
    CUDA_VISIBLE_DEVICES=-1 pin $QCORES $W/build-cpu/bin/llama-quantize "${imx[@]}" $M/$BASE-F16.gguf $out.part $t 7 \
      > $R/quantize-$t.log 2>&1
    local rc=$?
    if [ $rc != 0 ] && grep -q "importance matrix" $R/quantize-$t.log && [ ${#imx[@]} = 0 ] && [ -s $W/imatrix.gguf ]; then
      log "quant $t needs an imatrix: again with it"
      imx=(--imatrix $W/imatrix.gguf); t0=$(now_ms)
      CUDA_VISIBLE_DEVICES=-1 pin $QCORES $W/build-cpu/bin/llama-quantize "${imx[@]}" $M/$BASE-F16.gguf $out.part $t 7 \
        > $R/quantize-$t.log 2>&1
      rc=$?
    fi
    local secs=$(( ($(now_ms) - t0) / 1000 ))
    if [ $rc = 0 ]; then
      python3 $CODE/bench/h200_gguf_types.py $out.part quant=$t quantize_seconds=$secs imatrix=$(( ${#imx[@]} > 0 )) worker=$1 \
        >> $R/quant-files.jsonl
      mv $out.part $out
      log "quant $t done in $secs s ($(stat -c %s $out) bytes)"
    else
      rm -f $out.part
      echo "{\"quant\": \"$t\", \"failed_rc\": $rc, \"quantize_seconds\": $secs}" >> $R/quant-files.jsonl
      log "quant $t FAILED rc=$rc: $(tail -2 $R/quantize-$t.log | tr '\n' ' ')"
    fi
  done
  touch $W/quant-done-$1
}

BENCH=""
bench() {  # $1 tag, rest: llama-bench args; jsonl to res/bench-TAG.jsonl
  local tag=$1; shift
  local s=$(now_ms)
  echo "# cmd: taskset -c $BCORES llama-bench -ngl 99 -t 2 -o jsonl $*" | sed "s#$M/##g" > $R/bench-$tag.log
  pin $BCORES $BENCH -ngl 99 -t 2 -o jsonl "$@" > $R/bench-$tag.jsonl 2>> $R/bench-$tag.log
  local rc=$?
  event "bench-$tag" $s $(now_ms) $rc
  log "bench $tag rc=$rc $(( ($(now_ms) - s) / 1000 )) s: $(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print("p%sn%sd%s %s %.0f+-%.0f" % (d["n_prompt"], d["n_gen"], d["n_depth"], d.get("type_k"), d["avg_ts"], d["stddev_ts"]), end="; ")
' $R/bench-$tag.jsonl 2>/dev/null)"
}

bench_ready_quants() {  # bench every finished quantized file, in queue order; returns 0 if one was benched
  local did=1 t
  for t in $QUANTS; do
    [ -e $M/q-$t.gguf ] || continue
    bench quant-$t -m $M/q-$t.gguf -fa 1 -p 512 -n 128 -r 3
    rm -f $M/q-$t.gguf
    did=0
  done
  return $did
}

KV_ITEMS="$BASE:f16 $BASE:q8_0 $BASE:q4_0 $OTHER:f16 $OTHER:q8_0 $OTHER:q4_0"
[ "${H200_SKIP_KV:-0}" = 1 ] && KV_ITEMS=""
kv_next() {  # runs the next long-context item; returns 1 when none is left
  local items=($KV_ITEMS)
  local i=$(cat $W/kv_i 2>/dev/null || echo 0)
  [ $i -ge ${#items[@]} ] && return 1
  echo $((i + 1)) > $W/kv_i
  local name=${items[$i]%%:*} kv=${items[$i]##*:}
  if [ "$(left_s)" -lt 150 ]; then log "kv $name $kv skipped: time budget"; return 0; fi
  bench kv-$name-$kv -m $M/$name-Q4_K_M.gguf -fa 1 -ctk $kv -ctv $kv -d 0,8192,16384,32768,65536 -p 512 -n 128 -r 2
  return 0
}

gpu_worker() {
  while [ ! -e $W/built-cuda ]; do [ -e $W/failed-cuda ] && { log "no CUDA build: GPU work skipped"; return; }; sleep 2; done
  BENCH=$W/build-cuda/bin/llama-bench
  while [ ! -e $W/have-synth ]; do sleep 2; done
  # C++ runtime on the files and shapes of the shipped llama-cpp-python rows (context 4096/32768, batch 1)
  local f
  [ "${H200_SKIP_PROBE:-0}" = 1 ] || for f in $BASE-Q4_K_M $OTHER-Q4_K_M $BASE-Q8_0 $BASE-F16; do
    [ -e $M/$f.gguf ] || continue
    bench probe-$f-pp -m $M/$f.gguf -fa 1 -p 512,8192 -n 0 -r 3
    bench probe-$f-tg -m $M/$f.gguf -fa 1 -p 0 -n 64 -d 512,8192 -r 3
    [ $f = $BASE-Q4_K_M ] && bench probe-$f-tg-q8kv -m $M/$f.gguf -fa 1 -ctk q8_0 -ctv q8_0 -p 0 -n 64 -d 512,8192 -r 3
    bench_ready_quants
  done
  rm -f $M/$BASE-Q8_0.gguf
  bench writer-$BASE-Q4_K_M -m $M/$BASE-Q4_K_M.gguf -fa 1 -p 512 -n 128 -r 3
  bench writer-$BASE-F16 -m $M/$BASE-F16.gguf -fa 1 -p 512 -n 128 -r 3
  while true; do
    bench_ready_quants && continue
    if [ -e $W/quant-done-1 ] && [ -e $W/quant-done-2 ]; then bench_ready_quants || break; fi
    kv_next && continue
    [ -e $W/failed-cpu ] && break
    sleep 2
  done
  while kv_next; do :; done
  if [ "$(left_s)" -gt 60 ]; then
    local s=$(now_ms)
    pin $BCORES $W/build-cuda/bin/llama-batched-bench -m $M/$BASE-Q4_K_M.gguf -ngl 99 -fa on -c 16384 \
      -npp 512 -ntg 128 -npl ${H200_NPL:-1,4,8,16} -t 2 --output-format jsonl > $R/batched-$BASE-Q4_K_M.jsonl \
      2> $R/batched-$BASE-Q4_K_M.log
    local rc=$?
    event batched-$BASE-Q4_K_M $s $(now_ms) $rc
    log "batched-bench done: $(grep -c . $R/batched-$BASE-Q4_K_M.jsonl) lines"
  fi
  [ "$(left_s)" -gt 30 ] && bench quiet-$BASE-Q4_K_M -m $M/$BASE-Q4_K_M.gguf -fa 1 -p 512 -n 128 -r 3
  if [ "${H200_32B:-0}" = 1 ] && [ "$(left_s)" -gt 150 ]; then
    rm -f $M/$BASE-F16.gguf $M/$OTHER-Q4_K_M.gguf
    python3 $CODE/bench/h200_synth.py $M Qwen/Qwen2.5-32B:Q4_K_M >> $R/synth.jsonl 2>>$R/synth.log &&
      bench writer-Qwen2.5-32B-Q4_K_M -m $M/Qwen2.5-32B-Q4_K_M.gguf -fa 1 -p 512 -n 128 -r 3
  fi
}

pack() {
  mkdir -p $OUT
  tar czf $OUT/results.tgz -C $W res 2>/dev/null
  cp $W/pipeline.log $OUT/ 2>/dev/null
}

pipeline() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/gpu.txt 2>&1
  nproc > $R/host.txt; df -h $W >> $R/host.txt; free -g >> $R/host.txt; uname -a >> $R/host.txt
  python3 $CODE/bench/h200_gpumem.py $R/gpumem.txt & local sampler=$!
  echo $QUANTS | tr ' ' '\n' > $W/queue
  synth & local p_synth=$!
  build cpu "-DGGML_CUDA=OFF" llama-quantize llama-imatrix & local p_cpu=$!
  build cuda "$CUDA_FLAGS" llama-bench llama-batched-bench & local p_cuda=$!
  imatrix & local p_imx=$!
  quant_worker 1 & local p_q1=$!
  quant_worker 2 & local p_q2=$!
  gpu_worker
  wait $p_synth $p_cpu $p_cuda $p_imx $p_q1 $p_q2
  kill $sampler
  log "pipeline done"
  touch $W/done
}

case $mode in
  start)
    if [ ! -e $W/t0 ]; then
      mkdir -p $R $M
      date +%s > $W/t0
      echo $(( $(date +%s) + ${H200_BUDGET_S:-1450} )) > $W/deadline
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $ROOT/.device/whl/*.whl \
        > $R/pip.log 2>&1 || { echo "pip install failed"; cat $R/pip.log; }
      tar xzf $ROOT/.device/llama_cpp_python.tar.gz -C $W
      SRC=$(ls -d $W/llama_cpp_python-*/vendor/llama.cpp)
      echo "$SRC" > $W/src
      export SRC
      log "start: code $CODE, llama.cpp $SRC, budget ${H200_BUDGET_S:-1450} s"
      # its own session, so that it outlives this call (python: setsid(1) may be missing)
      python3 -c 'import os, sys
if os.fork(): sys.exit(0)
os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' bash "$0" pipeline < /dev/null > $W/pipeline.out 2>&1
    fi
    ;&
  collect)
    end=$(( $(date +%s) + wait_s ))
    while [ $(date +%s) -lt $end ] && [ ! -e $W/done ]; do sleep 5; done
    pack
    tail -40 $W/pipeline.log
    tail -5 $W/pipeline.out
    df -h $W | tail -1
    ;;
  pipeline)
    SRC=$(cat $W/src)
    pipeline
    ;;
  finish)  # last call of a session whose device time runs out (what the 2026-12-01 run's third call did, inline):
    # no new quantization, no new long item; batched-bench now (the GPU sits idle while the last I-quants run);
    # wait up to WAIT_S for the running quantizations (the pipeline benches their files), the quiet re-run, pack.
    T0=$(date +%s); B=$W/build-cuda/bin
    echo $(( T0 - 1 )) > $W/deadline
    for t in $(cat $W/queue); do echo "{\"quant\": \"$t\", \"skipped\": \"device time budget\"}" >> $R/quant-files.jsonl; done
    : > $W/queue
    s=$(now_ms)
    echo "# cmd: taskset -c 0,1 llama-batched-bench -m $BASE-Q4_K_M.gguf -ngl 99 -fa on -c 16384 -npp 512 -ntg 128 -npl 1,4,8,16 -t 2 --output-format jsonl" > $R/batched-$BASE-Q4_K_M.log
    pin $BCORES $B/llama-batched-bench -m $M/$BASE-Q4_K_M.gguf -ngl 99 -fa on -c 16384 -npp 512 -ntg 128 -npl 1,4,8,16 \
      -t 2 --output-format jsonl > $R/batched-$BASE-Q4_K_M.jsonl 2>> $R/batched-$BASE-Q4_K_M.log
    rc=$?
    event batched-$BASE-Q4_K_M $s $(now_ms) $rc
    cat $R/batched-$BASE-Q4_K_M.jsonl
    while [ $(( $(date +%s) - T0 )) -lt $(( wait_s - 60 )) ] && ! { [ -e $W/quant-done-1 ] && [ -e $W/quant-done-2 ]; }; do sleep 3; done
    while [ $(( $(date +%s) - T0 )) -lt $(( wait_s - 45 )) ] && [ ! -e $W/done ]; do sleep 2; done
    if [ -e $W/quant-done-1 ] && [ -e $W/quant-done-2 ] && [ $(( $(date +%s) - T0 )) -lt $(( wait_s - 30 )) ]; then
      BENCH=$B/llama-bench
      bench quiet-$BASE-Q4_K_M -m $M/$BASE-Q4_K_M.gguf -fa 1 -p 512 -n 128 -r 3
    fi
    pack
    tail -20 $W/pipeline.log
    ;;
esac
