"""Sample the GPU's used memory every 50 ms (NVML) until killed: one line "epoch_ms used_bytes" per sample.

    python3 bench/h200_gpumem.py OUT.txt [GPU_INDEX]

The same quantity as `nvidia-smi --query-gpu=memory.used -lms 50`, with epoch timestamps so that windows logged by
bench/h200_llamabench.sh can be matched to it.
"""

import sys
import time

import pynvml

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
with open(sys.argv[1], "a", buffering=1) as f:
    while True:
        f.write(f"{int(time.time() * 1000)} {pynvml.nvmlDeviceGetMemoryInfo(h).used}\n")
        time.sleep(0.05)
