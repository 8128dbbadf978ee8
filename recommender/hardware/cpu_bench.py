"""This machine's CPU, measured: memory bandwidth and a matrix-multiply rate in a few seconds (numpy), cached per host.

No published figure exists for an arbitrary CPU and its RAM (how many channels are populated, at which speed, is not
visible from /proc), so `recommend --gpu cpu` measures them once and keeps the result (``cache_root()/cpu-bench``,
keyed by the host fingerprint: CPU model, core count and RAM size):

- bandwidth: every physical core copies its own slice of a ``BANDWIDTH_BYTES`` buffer into another (numpy.copyto
  releases the GIL, so the threads run in parallel); bytes moved = read + write, the STREAM "copy" convention; the
  best of ``REPEATS`` passes (the least disturbed by other processes);
- matmul: a float32 ``MATMUL_N`` x ``MATMUL_N`` product through numpy's BLAS (2 n^3 FLOP), best of ``REPEATS``.

Both are achieved rates, not theoretical peaks. A shared machine (other processes on the same cores) gives the probe
threads only part of the wall time, and a wall-clock rate then measures the load, not the machine (this 2-core dev box
under ~6 sessions: 3.2 GB/s and 9.3 GFLOP/s by wall clock, against 14.7 GB/s that llama.cpp's own decode reached on a
quiet 2-core Xeon). So each pass also reads the CPU time its threads received (``time.thread_time`` per copy thread,
``time.process_time`` for the BLAS product) and the figure kept is the rate per CPU-second received x the cores: what
the cores do while they run the probe, i.e. the machine with its cores free. The wall-clock rate and the share of the
time the probe was on a CPU are kept beside it (basis, ``cpu_share``). The result is a plain dict of measured figures
with their basis; the hardware profile built from it (profiles.cpu_profile) labels every figure "measured".
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from typing import Optional

from recommender.core.paths import caches_off, private_cache_dir

BENCH_VERSION = 2  # of the method (2: rates per CPU-second received, not per wall second); a cached result of another version is measured again
BANDWIDTH_BYTES = 512 * 1024 * 1024  # per buffer (two buffers): far beyond any CPU cache
MATMUL_N = 1024
REPEATS = 4
BUSY_SHARE = 0.8  # below it the basis says the machine was busy (the wall-clock rate measured the load)
ENV_OFF = "RECOMMENDER_CPU_BENCH"  # "off": never measure (tests, scripted runs): latency stays unknown


def _copy_bandwidth(threads: int, nbytes: int = BANDWIDTH_BYTES, repeats: int = REPEATS) -> tuple[float, float]:
    """(bytes/s per CPU-second received x threads: the median of ``repeats`` passes, bytes/s by wall clock: the best)."""
    import numpy as np

    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch every page once (first-touch page faults are not bandwidth)
    bounds = np.linspace(0, src.size, threads + 1).astype(int)
    cpu = [0.0] * threads

    def part(i):
        t = time.thread_time()
        np.copyto(dst[bounds[i]:bounds[i + 1]], src[bounds[i]:bounds[i + 1]])
        cpu[i] = time.thread_time() - t

    rates, best_wall = [], 0.0
    for _ in range(repeats):
        ts = [threading.Thread(target=part, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.perf_counter() - t0
        on_cpu = max(sum(cpu) / threads, 1e-9)  # mean CPU time of a copy thread
        best_wall = max(best_wall, 2 * src.nbytes / dt)
        rates.append(2 * src.nbytes / min(on_cpu, dt))
    return statistics.median(rates), best_wall


def _matmul_rate(threads: int = 1, n: int = MATMUL_N, repeats: int = REPEATS) -> tuple[float, float]:
    """(FLOP/s per CPU-second received x ``threads`` cores: the median of ``repeats``, FLOP/s by wall clock: the best).
    The per-CPU-second rate is capped by the wall rate x threads (BLAS cannot use more cores than there are)."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = a.T.copy()
    a @ b  # warm the BLAS threads
    rates, best_wall = [], 0.0
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        a @ b
        dt, cpu = time.perf_counter() - t0, max(time.process_time() - c0, 1e-9)
        best_wall = max(best_wall, 2.0 * n ** 3 / dt)
        rates.append(min(2.0 * n ** 3 / cpu * threads, 2.0 * n ** 3 / dt * threads))
    return statistics.median(rates), best_wall


def measure(threads: int) -> dict:
    """Measure now (a few seconds). Returns {memory_bandwidth_bytes_per_s, fp32_flops_per_s (both per CPU-second
    received x the cores), wall_* (by wall clock), cpu_share, basis, measured_at}."""
    import numpy as np

    t0 = time.perf_counter()
    threads = max(1, threads)
    bw, bw_wall = _copy_bandwidth(threads)
    flops, flops_wall = _matmul_rate(threads)
    share = min(bw_wall / bw, 1.0) if bw else 1.0
    return {
        "version": BENCH_VERSION,
        "memory_bandwidth_bytes_per_s": bw,
        "fp32_flops_per_s": flops,
        "wall_memory_bandwidth_bytes_per_s": bw_wall,
        "wall_fp32_flops_per_s": flops_wall,
        "cpu_share": share,
        "basis": (f"measured here by recommender.hardware.cpu_bench v{BENCH_VERSION} (numpy {np.__version__}): "
                  f"copy {BANDWIDTH_BYTES // 2**20} MiB on {threads} thread(s), read + write bytes per CPU-second "
                  f"the threads received x {threads}, median of {REPEATS} = {bw / 1e9:.1f} GB/s (by wall clock "
                  f"{bw_wall / 1e9:.1f} GB/s: the probe was on a CPU {share:.0%} of the time"
                  f"{', the machine is busy' if share < BUSY_SHARE else ''}); float32 {MATMUL_N}x{MATMUL_N} matmul "
                  f"(BLAS), 2n^3 per CPU-second x {threads} cores, median of {REPEATS} = {flops / 1e9:.1f} GFLOP/s (by "
                  f"wall clock {flops_wall / 1e9:.1f}); took {time.perf_counter() - t0:.1f} s"),
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
