"""The one place that turns a configuration into the figures a user sees.

    analytical terms (recommender.predict.analytical)
      -> calibrated figures: this hardware's fitted terms (recommender.predict.calibrated), with intervals
      -> measured figures: a probe row of exactly this configuration (same hardware, model, quant, engine, batch,
         context and KV dtype)

Every figure is a ``Figure`` (value, unit, provenance, basis, interval). The figures derived from TTFT and TPOT are
derived here and nowhere else, as vLLM's benchmarks define them:

    E2E = TTFT + (n_out - 1) x TPOT;  decode rate = 1000 / TPOT (per sequence);  throughput = batch x decode rate
    bandwidth utilization = bytes read per decode step x decode rate / memory bandwidth

A measured row's own decode rate and throughput (medians over its repeats) are shown as measured. Measured rows and
calibration fits are taken with every layer on the GPU, so a partial-offload configuration stays analytical.

``Predictor.predict`` serves recommend, estimate, tune and sensitivity; ``Predictor.for_measurement`` predicts exactly
what a measured row ran (its KV dtype included) without looking at that row, for calibration fitting, the error
benches and the probe's bandwidth share.
"""

from __future__ import annotations

from typing import Optional, Union

from pydantic import PrivateAttr

from recommender.core.records import Figure, HardwareProfile, Measurement, ModelSpec, Provenance, Strict, Variant
from recommender.hardware.profiles import hardware_key
from recommender.predict.analytical import Estimate, estimate
from recommender.predict.calibrated import Calibrator, load_calibrator

FIGURE_UNITS = {
    "weights_bytes": "bytes", "kv_cache_bytes": "bytes", "overhead_bytes": "bytes", "total_vram_bytes": "bytes",
    "ttft_ms": "ms", "tpot_ms": "ms", "e2e_ms": "ms", "decode_tokens_per_s": "tokens/s",
    "throughput_tokens_per_s": "tokens/s", "bandwidth_utilization": "fraction",
}
# The analytical breakdown shown beside the figures (always estimated: formulas of docs/estimates.md)
TERMS = ("weights_gpu_bytes", "host_weights_bytes", "kv_bytes_per_token", "compute_buffer_bytes",
         "runtime_overhead_bytes", "decode_bytes_per_step", "decode_kv_bytes_per_step", "host_bytes_per_step",
         "prefill_flops", "prefill_attention_flops")
DERIVED_BASIS = {
    "e2e_ms": "TTFT + (n_out - 1) x TPOT",
    "decode_tokens_per_s": "1000 / TPOT (per sequence)",
    "throughput_tokens_per_s": "batch x 1000 / TPOT",
    "bandwidth_utilization": "estimated bytes per decode step x decode rate / bandwidth",
}


class Config(Strict):
    """One configuration to predict (the candidate key without the model spec and hardware)."""

    model: str
    quant: str
    engine: str
    context_tokens: int
    batch: int = 1
    prompt_tokens: Optional[int] = None  # None: the context less the output
    output_tokens: int = 256
    kv_dtype: Optional[str] = None  # None: the engine's default
    gpu_layers: Optional[int] = None  # llama.cpp partial offload; None = every layer on the GPU


class Prediction(Strict):
    """The figures of one configuration on one hardware profile, and the analytical terms behind them."""

    model: str
    quant: str
    engine: str
    hardware: str
    context_tokens: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    kv_dtype: str
    gpu_layers: Optional[int] = None
    figures: dict[str, Figure]
    terms: dict[str, Union[int, float]]  # bytes are int, FLOPs float
    basis: dict[str, str]
    notes: list[str]
    _analysis: Optional[Estimate] = PrivateAttr(default=None)

    def value(self, name: str) -> Optional[float]:
        f = self.figures.get(name)
        return None if f is None else f.value

    @property
    def analysis(self) -> Estimate:
        """The analytical estimate the figures started from (not part of the JSON)."""
        return self._analysis

    @property
    def provenance(self) -> dict[str, Provenance]:
        return {k: f.provenance for k, f in self.figures.items()}

    @property
    def intervals(self) -> dict[str, tuple[float, float]]:
        return {k: f.interval for k, f in self.figures.items() if f.interval}

    # the figures by name, as values (None = unknown)
    weights_bytes = property(lambda self: self.figures["weights_bytes"].value)
    kv_cache_bytes = property(lambda self: self.figures["kv_cache_bytes"].value)
    overhead_bytes = property(lambda self: self.figures["overhead_bytes"].value)
    total_vram_bytes = property(lambda self: self.figures["total_vram_bytes"].value)
    ttft_ms = property(lambda self: self.figures["ttft_ms"].value)
    tpot_ms = property(lambda self: self.figures["tpot_ms"].value)
    e2e_ms = property(lambda self: self.figures["e2e_ms"].value)
    decode_tokens_per_s = property(lambda self: self.figures["decode_tokens_per_s"].value)
    throughput_tokens_per_s = property(lambda self: self.figures["throughput_tokens_per_s"].value)
    bandwidth_utilization = property(lambda self: self.figures["bandwidth_utilization"].value)
    # the analytical terms by name
    weights_gpu_bytes = property(lambda self: self.terms["weights_gpu_bytes"])
    host_weights_bytes = property(lambda self: self.terms["host_weights_bytes"])
    kv_bytes_per_token = property(lambda self: self.terms["kv_bytes_per_token"])
    compute_buffer_bytes = property(lambda self: self.terms["compute_buffer_bytes"])
    runtime_overhead_bytes = property(lambda self: self.terms["runtime_overhead_bytes"])
    decode_bytes_per_step = property(lambda self: self.terms["decode_bytes_per_step"])


def _fig(name: str, value: Optional[float], provenance: Provenance, basis: str = "",
         interval: Optional[tuple[float, float]] = None) -> Figure:
    return Figure(value=value, unit=FIGURE_UNITS[name], provenance=provenance if value is not None else "unknown",
                  basis=basis, interval=interval)


def analytical_figures(est: Estimate) -> dict[str, Figure]:
    """The analytical estimate's own figures (TTFT and TPOT; memory), all estimated."""
    b = est.basis
    mem = b.get("memory", "")
    return {
        "weights_bytes": _fig("weights_bytes", est.weights_bytes, est.weights_bytes_provenance,
                              b.get("weights", "tensor by tensor")),
        "kv_cache_bytes": _fig("kv_cache_bytes", est.kv_cache_bytes, "estimated", mem),
        "overhead_bytes": _fig("overhead_bytes", est.overhead_bytes, "estimated", mem),
        "total_vram_bytes": _fig("total_vram_bytes", est.total_vram_bytes, "estimated", mem),
        "ttft_ms": _fig("ttft_ms", est.ttft_ms, "estimated", b.get("prefill", ""), est.intervals.get("ttft_ms")),
        "tpot_ms": _fig("tpot_ms", est.tpot_ms, "estimated", b.get("decode", ""), est.intervals.get("tpot_ms")),
    }


def measured_figures(est: Estimate, m: Measurement) -> tuple[dict[str, Figure], dict[str, str]]:
    """The figures a probe row of this configuration measured, and basis notes. TTFT depends on the prompt length, so
    a row measured with another prompt lends its decode and memory figures only."""
    tag = f"measurement {m.id} ({m.engine} {m.engine_version} on {m.hardware_name}, {m.measured_at[:10]}" + \
          (", synthetic weights" if m.synthetic else "") + ")"
    out: dict[str, Figure] = {}
    basis = {"measured": tag}
    names = ["tpot_ms", "decode_tokens_per_s", "throughput_tokens_per_s"]
    if m.prompt_tokens == est.prompt_tokens:
        names.insert(0, "ttft_ms")
    else:
        basis["measured_ttft"] = (f"not used: measured with a {m.prompt_tokens}-token prompt, this estimate is for "
                                  f"{est.prompt_tokens}")
    for name in names:
        val = getattr(m, name)
        if val is not None:
            out[name] = _fig(name, val, "measured", tag)
    if m.peak_vram_bytes:
        out["total_vram_bytes"] = _fig("total_vram_bytes", m.peak_vram_bytes, "measured", tag)
    return out, basis


def _derive(figs: dict[str, Figure], est: Estimate, bw: float, calibrated: set[str], measured: set[str]) -> None:
    """E2E, decode rate, throughput and bandwidth utilization from the TTFT and TPOT figures that are shown.

    Provenance follows the figures used: a decode rate is as good as its TPOT; E2E is measured when TTFT and TPOT both
    are, calibrated when a calibrated figure went into it, and estimated otherwise."""
    ttft, tpot = figs["ttft_ms"], figs["tpot_ms"]
    n_out = est.output_tokens
    if "decode_tokens_per_s" not in measured:
        dec = None if tpot.value is None else 1000.0 / tpot.value
        figs["decode_tokens_per_s"] = _fig("decode_tokens_per_s", dec, tpot.provenance,
                                           DERIVED_BASIS["decode_tokens_per_s"])
    if "throughput_tokens_per_s" not in measured:
        dec = figs["decode_tokens_per_s"].value
        figs["throughput_tokens_per_s"] = _fig("throughput_tokens_per_s", None if dec is None else est.batch * dec,
                                               figs["decode_tokens_per_s"].provenance,
                                               DERIVED_BASIS["throughput_tokens_per_s"])
    e2e = None if ttft.value is None or tpot.value is None else ttft.value + (n_out - 1) * tpot.value
    if "tpot_ms" in measured:
        prov = "measured" if "ttft_ms" in measured else "estimated"
    elif calibrated & {"ttft_ms", "tpot_ms"}:
        prov = "calibrated"
    else:
        prov = "estimated"
    figs["e2e_ms"] = _fig("e2e_ms", e2e, prov, DERIVED_BASIS["e2e_ms"])
    dec = figs["decode_tokens_per_s"].value
    util = est.decode_bytes_per_step * dec / bw if bw and dec is not None else None
    figs["bandwidth_utilization"] = _fig("bandwidth_utilization", util, "estimated",
                                         DERIVED_BASIS["bandwidth_utilization"])


class Predictor:
    """Predictions on one hardware profile: its calibration terms and the measured rows of that hardware."""

    def __init__(self, hw: HardwareProfile, *, hw_key: Optional[str] = None, calibrator: Optional[Calibrator] = None,
                 measured: Optional[dict[tuple, Measurement]] = None) -> None:
        self.hw = hw
        self.hw_key = hw_key or hw.name.lower()
        self.calibrator = calibrator if calibrator is not None else Calibrator([])
        self.measured = measured or {}

    @classmethod
    def for_catalog(cls, catalog, hw: HardwareProfile, profiles: list[HardwareProfile],
                    models: Optional[dict[str, ModelSpec]] = None, model_id: Optional[str] = None) -> "Predictor":
        """A predictor with the catalog's calibration (overlay first, then shipped) and its measured rows."""
        models = catalog.models() if models is None else models
        rows = catalog.measurements(model_id=model_id, status="ok") if model_id else \
            catalog.measurements(status="ok")
        return cls(hw, hw_key=hardware_key(hw.name, profiles), calibrator=load_calibrator(catalog),
                   measured=measured_index(rows, profiles, swa_models(models)))

    @property
    def stale(self) -> int:
        return self.calibrator.stale

    def predict(self, spec: ModelSpec, c: Config, variant: Optional[Variant] = None, *,
                record: type[Prediction] = Prediction, **fields) -> Prediction:
        """The prediction of one configuration; ``record`` (a subclass of Prediction) and ``fields`` build a richer
        record in the same step (rank's Candidate)."""
        est = estimate(spec, c.quant, c.engine, self.hw, context_tokens=c.context_tokens, batch=c.batch,
                       prompt_tokens=c.prompt_tokens, output_tokens=c.output_tokens, kv_dtype=c.kv_dtype,
                       variant=variant, gpu_layers=c.gpu_layers)
        return self.refine(est, spec, record=record, **fields)

    def for_measurement(self, spec: ModelSpec, m: Measurement) -> Prediction:
        """The prediction of exactly the configuration a measured row ran (engine, quant, context, batch, prompt,
        output, KV dtype), never using that row's own figures."""
        est = estimate(spec, m.quant, m.engine, self.hw, context_tokens=m.context_tokens, batch=m.batch,
                       prompt_tokens=m.prompt_tokens, output_tokens=m.output_tokens, kv_dtype=m.kv_dtype)
        return self.refine(est, spec, use_measured=False)

    def refine(self, est: Estimate, spec: ModelSpec, use_measured: bool = True, *,
               record: type[Prediction] = Prediction, **fields) -> Prediction:
        """analytical -> calibrated -> measured, then the derived figures."""
        figs = analytical_figures(est)
        basis = dict(est.basis)
        calibrated: set[str] = set()
        measured: set[str] = set()
        if est.gpu_layers is None:
            if self.calibrator.has(est.engine, self.hw_key):
                cal = self.calibrator.figures(est, spec, self.hw, self.hw_key)
                figs.update(cal)
                calibrated = set(cal)
                basis.update({f"calibrated_{k}": f.basis for k, f in cal.items()})
            m = self.measured.get((self.hw_key, est.model, est.quant, est.engine, est.batch, est.context_tokens,
                                   est.kv_dtype)) if use_measured else None
            if m is not None:
                got, notes = measured_figures(est, m)
                figs.update(got)
                measured = set(got)
                basis.update(notes)
        _derive(figs, est, self.hw.memory_bandwidth_bytes_per_s, calibrated, measured)
        extra_figures = fields.pop("figures", None)
        if extra_figures:
            figs.update(extra_figures)
        # model_construct: every field comes from validated records (no second validation pass over ~1,300
        # candidates: recommend's cold start matters)
        p = record.model_construct(
            model=est.model, quant=est.quant, engine=est.engine, hardware=est.hardware,
            context_tokens=est.context_tokens, batch=est.batch, prompt_tokens=est.prompt_tokens,
            output_tokens=est.output_tokens, kv_dtype=est.kv_dtype, gpu_layers=est.gpu_layers, figures=figs,
            terms={k: getattr(est, k) for k in TERMS}, basis=basis, notes=list(est.notes), **fields)
        p._analysis = est
        return p


def measured_index(measurements: list[Measurement], profiles: list[HardwareProfile],
                   swa_models: frozenset[str] = frozenset()) -> dict[tuple, Measurement]:
    """ok rows by (hardware key, model, quant, engine, batch, context, KV dtype). Rows arrive overlay first, newest
    first: the first row for a key wins. Rows taken with llama.cpp's swa_full (every layer caching the whole context)
    are left out: the estimates, like llama-server, keep only the window on sliding-window layers. A row's hardware is
    named as NVML reported it; it is filed under the shipped profile with that name (e.g. 'NVIDIA H200' -> 'H200 SXM')
    so planning with --gpu finds it too."""
    idx: dict[tuple, Measurement] = {}
    keys: dict[str, str] = {}  # hardware name -> key (a few names, many rows)
    for m in measurements:
        swa_full = m.raw.get("engine", {}).get("details", {}).get("swa_full")
        if m.status != "ok" or (swa_full and m.model_id in swa_models):
            continue  # a full-size sliding-window cache is not the configuration estimated
        if m.hardware_name not in keys:
            keys[m.hardware_name] = hardware_key(m.hardware_name, profiles)
        idx.setdefault((keys[m.hardware_name], m.model_id, m.quant, m.engine, m.batch, m.context_tokens,
                        m.kv_dtype), m)
    return idx


def swa_models(models: dict[str, ModelSpec]) -> frozenset[str]:
    return frozenset(mid for mid, s in models.items() if s.num_swa_layers)
