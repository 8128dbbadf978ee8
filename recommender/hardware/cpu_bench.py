"""This machine's CPU, measured: memory bandwidth and a matrix-multiply rate in a few seconds (numpy), cached per host.

No published figure exists for an arbitrary CPU and its RAM (how many channels are populated, at which speed, is not
visible from /proc), so `recommend --gpu cpu` measures them once and keeps the result (``cache_root()/cpu-bench``,
keyed by the host fingerprint: CPU model, core count and RAM size):

- bandwidth: every physical core copies its own slice of a ``BANDWIDTH_BYTES`` buffer into another (numpy.copyto
  releases the GIL, so the threads run in parallel); bytes moved = read + write, the STREAM "copy" convention; the
  best of ``REPEATS`` passes (the least disturbed by other processes);
- matmul: a float32 ``MATMUL_N`` x ``MATMUL_N`` product through numpy's BLAS (2 n^3 FLOP), best of ``REPEATS``.

Both are achieved rates, not theoretical peaks. The result is a plain dict of measured figures with their basis; the
hardware profile built from it (profiles.cpu_profile) labels every figure "measured".
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Optional

from recommender.core.paths import caches_off, private_cache_dir

BENCH_VERSION = 1  # of the method; a cached result of another version is measured again
BANDWIDTH_BYTES = 512 * 1024 * 1024  # per buffer (two buffers): far beyond any CPU cache
MATMUL_N = 1024
REPEATS = 4
ENV_OFF = "RECOMMENDER_CPU_BENCH"  # "off": never measure (tests, scripted runs): latency stays unknown


def _copy_bandwidth(threads: int, nbytes: int = BANDWIDTH_BYTES, repeats: int = REPEATS) -> float:
    import numpy as np

    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch every page once (first-touch page faults are not bandwidth)
    bounds = np.linspace(0, src.size, threads + 1).astype(int)

    def part(i):
        np.copyto(dst[bounds[i]:bounds[i + 1]], src[bounds[i]:bounds[i + 1]])

    best = 0.0
    for _ in range(repeats):
        ts = [threading.Thread(target=part, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.perf_counter() - t0
        best = max(best, 2 * src.nbytes / dt)
    return best


def _matmul_rate(n: int = MATMUL_N, repeats: int = REPEATS) -> float:
    import numpy as np

    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = a.T.copy()
    a @ b  # warm the BLAS threads
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0))
    return best


def measure(threads: int) -> dict:
    """Measure now (a few seconds). Returns {memory_bandwidth_bytes_per_s, fp32_flops_per_s, basis, measured_at}."""
    import numpy as np

    t0 = time.perf_counter()
    bw = _copy_bandwidth(max(1, threads))
    flops = _matmul_rate()
    return {
        "version": BENCH_VERSION,
        "memory_bandwidth_bytes_per_s": bw,
        "fp32_flops_per_s": flops,
        "basis": (f"measured here by recommender.hardware.cpu_bench v{BENCH_VERSION} (numpy {np.__version__}): "
                  f"copy {BANDWIDTH_BYTES // 2**20} MiB on {max(1, threads)} thread(s), read + write bytes / time, "
                  f"best of {REPEATS} = {bw / 1e9:.1f} GB/s; float32 {MATMUL_N}x{MATMUL_N} matmul (BLAS), 2n^3 / "
                  f"time, best of {REPEATS} = {flops / 1e9:.1f} GFLOP/s; took {time.perf_counter() - t0:.1f} s"),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _cache_file(fingerprint: str):
    if caches_off():
        return None
    d = private_cache_dir("cpu-bench")
    return None if d is None else d / f"{fingerprint}.json"


def cached_or_measure(fingerprint: str, threads: int) -> Optional[dict]:
    """This host's measured figures: from the cache when measured before with this method, else measured now and
    cached. None when measuring is turned off (``RECOMMENDER_CPU_BENCH=off``) or numpy is missing."""
    if os.environ.get(ENV_OFF, "").lower() in ("0", "off", "no", "false"):
        return None
    f = _cache_file(fingerprint)
    if f is not None and f.is_file():
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            if data.get("version") == BENCH_VERSION and data.get("memory_bandwidth_bytes_per_s", 0) > 0:
                return data
        except (OSError, ValueError):
            pass
    try:
        data = measure(threads)
    except (ImportError, MemoryError):
        return None
    if f is not None:
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, f)
        except OSError:
            tmp.unlink(missing_ok=True)
    return data
