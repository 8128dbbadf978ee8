"""Run one probe in a child process with a timeout; a crash, an OOM kill or a hang becomes a failed result.

Parent: ``run_probe(job)`` starts the ``evaluators.worker`` module (isolated from the cwd: evaluators/spawn.py)
with the job as JSON on stdin and reads one JSON result from its stdout. Child (:func:`child_main`): samples memory
in a thread (GPU: NVML used memory of the device; always: peak RSS), loads the engine, warms up, runs the repeats,
and reports raw per-repeat timings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Optional

from pydantic import Field


from evaluators.base import (
    _Strict,
    drift,
    DRIFT_THRESHOLD,
    get_engine,
    LoadSettings,
    median_spread,
    repeat_metrics,
    RequestShape,
)
from evaluators.spawn import worker_argv, worker_env

NVML_SAMPLE_S = 0.01  # memory sampling period (10 ms)
STDERR_TAIL_CHARS = 2000
WARMUP_PROMPT_TOKENS = 256  # the warm-up request is short: it initializes, it is not measured
WARMUP_OUTPUT_TOKENS = 8


class ProbeJob(_Strict):
    engine: str
    load: LoadSettings
    shape: RequestShape
    repeats: int = 3
    warmup: int = 1
    gpu_index: int = 0


class ProbeResult(_Strict):
    status: str  # "ok" | "failed"
    failure_reason: Optional[str] = None
    engine: Optional[dict[str, Any]] = None  # EngineInfo
    repeats: list[dict[str, Any]] = Field(default_factory=list)  # per-repeat metrics (raw)
    summary: dict[str, Any] = Field(default_factory=dict)  # medians and spreads
    peak_gpu_used_bytes: Optional[int] = None  # NVML used memory, peak during the probe minus before load
    gpu_baseline_bytes: Optional[int] = None
    peak_rss_bytes: Optional[int] = None
    wall_s: float = 0.0


# ---------------------------------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------------------------------
def _describe_exit(rc: int, stderr: str) -> str:
    if rc < 0:
        sig = signal.Signals(-rc).name
        hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if sig == "SIGKILL" else ""
        return f"probe process killed by {sig}{hint}"
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return f"probe process exited with code {rc}: {lines[-1] if lines else 'no message'}"


def run_probe(job: ProbeJob, timeout_s: float = 600.0, env: Optional[dict[str, str]] = None) -> ProbeResult:
    t0 = time.perf_counter()
    cmd = worker_argv("evaluators.worker")  # isolated from the cwd (evaluators/spawn.py)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=worker_env(env), start_new_session=True)
    try:
        out, err = proc.communicate(job.model_dump_json(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return ProbeResult(status="failed", failure_reason=f"timed out after {timeout_s:.0f} s (hang or too slow)",
                           wall_s=time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return ProbeResult(status="failed", failure_reason=_describe_exit(proc.returncode, err[-STDERR_TAIL_CHARS:]),
                           wall_s=wall)
    try:
        res = ProbeResult.model_validate_json(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return ProbeResult(status="failed", failure_reason="probe process printed no result", wall_s=wall)
    res.wall_s = wall
    return res


# ---------------------------------------------------------------------------------------------------------------
# child side
# ---------------------------------------------------------------------------------------------------------------
class GpuMemorySampler:
    """Peak NVML 'used' memory of one GPU, sampled in a thread. No GPU or no NVML: stays None."""

    def __init__(self, index: int = 0) -> None:
        self.handle = None
        self.peak: Optional[int] = None
        self.baseline: Optional[int] = None
        self._stop = threading.Event()
        try:
            import pynvml  # noqa: PLC0415

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.baseline = self._used()
        except Exception:  # noqa: BLE001 - no driver / no GPU / no package: CPU probe
            self.handle = None

    def _used(self) -> int:
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def start(self) -> "GpuMemorySampler":
        if self.handle is not None:
            self.peak = self.baseline
            threading.Thread(target=self._run, daemon=True).start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak or 0, self._used())
            time.sleep(NVML_SAMPLE_S)

    def stop(self) -> Optional[int]:
        self._stop.set()
        if self.handle is None:
            return None
        self.peak = max(self.peak or 0, self._used())
        return self.peak - (self.baseline or 0)


def peak_rss_bytes() -> int:
    import resource  # noqa: PLC0415

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def _percentile(values: list[float], q: float) -> Optional[float]:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    f = int(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def execute(job: ProbeJob) -> ProbeResult:
    sampler = GpuMemorySampler(job.gpu_index).start()
    engine = get_engine(job.engine)
    info = engine.load(job.load)
    for _ in range(job.warmup):  # kernels, graphs and allocator pools initialized before anything is timed
        warm = job.shape.model_copy(update={"prompt_tokens": min(job.shape.prompt_tokens, WARMUP_PROMPT_TOKENS),
                                            "output_tokens": min(job.shape.output_tokens, WARMUP_OUTPUT_TOKENS)})
        engine.measure(warm)
    reps = []
    for i in range(job.repeats):
        timing = engine.measure(job.shape.model_copy(update={"seed": job.shape.seed + i}))
        m = repeat_metrics(timing, job.shape)
        reps.append({"ttft_ms": m.ttft_ms, "tpot_ms": m.tpot_ms, "e2e_ms": m.e2e_ms,
                     "decode_tokens_per_s": m.decode_tokens_per_s, "prefill_tokens_per_s": m.prefill_tokens_per_s,
                     "throughput_tokens_per_s": m.throughput_tokens_per_s,
                     "itl_ms_p50": _percentile(m.itl_ms, 0.5), "itl_ms_p90": _percentile(m.itl_ms, 0.9),
                     "itl_ms_p99": _percentile(m.itl_ms, 0.99), "n_itl": len(m.itl_ms),
                     "engine_peak_bytes": timing.peak_engine_bytes})
    gpu_peak = sampler.stop()
    engine.unload()
    summary: dict[str, Any] = {}
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "decode_tokens_per_s", "prefill_tokens_per_s",
                "throughput_tokens_per_s", "itl_ms_p50"):
        vals = [r[key] for r in reps if r[key] is not None]
        if vals:
            summary[key] = median_spread(vals)
    e2e = [r["e2e_ms"] for r in reps]
    summary["drift"] = drift(e2e)
    summary["drift_flag"] = abs(summary["drift"]) > DRIFT_THRESHOLD
    return ProbeResult(status="ok", engine=info.model_dump(), repeats=reps, summary=summary,
                       peak_gpu_used_bytes=gpu_peak, gpu_baseline_bytes=sampler.baseline,
                       peak_rss_bytes=peak_rss_bytes())


def child_main() -> None:
    job = ProbeJob.model_validate_json(sys.stdin.read())
    try:
        res = execute(job)
    except Exception as e:  # noqa: BLE001 - any engine error becomes a failed row, reported by the parent
        msg = str(e).strip().splitlines()
        res = ProbeResult(status="failed", failure_reason=f"{type(e).__name__}: {msg[0] if msg else ''}"[:500],
                          peak_rss_bytes=peak_rss_bytes())
    sys.stdout.write("\n" + res.model_dump_json() + "\n")
    sys.stdout.flush()
