#!/usr/bin/env bash
# One call on the lent H200 (see ../shared/device/README.md): set up, build llama-cpp-python with CUDA unless a
# build is carried in .device/llama_cpp_cuda.tgz.part*, then run the GPU matrix within a time budget.
# Usage (on the device): bash bench/h200_run.sh BUDGET_SECONDS [extra gpu_matrix.py args]
set -uo pipefail
budget=${1:-240}; shift || true
t0=$(date +%s)
if ls .device/llama_cpp_cuda.tgz.part* >/dev/null 2>&1; then
  mkdir -p /tmp/site && cat .device/llama_cpp_cuda.tgz.part* | tar xzf - -C /tmp/site
fi
source .device/setup.sh || { echo "setup failed"; exit 1; }
export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
python3 -c "import llama_cpp; print('llama_cpp', llama_cpp.__version__, 'gpu offload', llama_cpp.llama_supports_gpu_offload())" || exit 1
if [ "${SHIP_BUILD:-1}" = 1 ] && ! ls .device/llama_cpp_cuda.tgz.part* >/dev/null 2>&1; then  # ship the build back
  (cd /tmp/site && tar czf - llama_cpp llama_cpp_python-*.dist-info 2>/dev/null) | split -b 15M - "$OUT/llama_cpp_cuda.tgz.part"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
df -h /tmp | tail -1
left=$(( budget - ($(date +%s) - t0) ))
echo "setup took $(( $(date +%s) - t0 )) s; measuring for $left s"
python3 bench/gpu_matrix.py --out "$OUT/${MATRIX_OUT:-h200.jsonl}" --budget "$left" "$@" 2>&1 | tee "$OUT/matrix.log"
