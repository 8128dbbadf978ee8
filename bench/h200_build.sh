# Sourced by the bench/h200_*.sh scripts that time llama.cpp's own llama-bench on the lent H200 (in the checkout root
# there, .device/ from ../shared/device/prepare.sh --llama 0.3.36 carried): sets OUT and log(), installs the carried
# wheels into /tmp/site (PYTHONPATH: them and the checkout, for the synthetic writer), unpacks the llama-cpp-python
# sdist and starts the CUDA build (sm_90) of its vendored llama-bench in the background: SRC is that llama.cpp, BUILD
# the build's pid (wait $BUILD; the binary is $SRC/build/bin/llama-bench, the log /tmp/cmake.log).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
log() { echo "[+$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/run.log" >&2; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
tar xzf .device/llama_cpp_python.tar.gz -C /tmp
SRC=$(ls -d /tmp/llama_cpp_python-*/vendor/llama.cpp)
log "build start ($SRC)"
( cd "$SRC" && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release >/tmp/cmake.log 2>&1 \
  && cmake --build build -j14 --target llama-bench >>/tmp/cmake.log 2>&1 ) &
BUILD=$!
