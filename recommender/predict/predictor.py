"""The one place that turns a configuration into the figures a user sees.

    analytical terms (recommender.predict.analytical)
      -> calibrated figures: this hardware's fitted terms (recommender.predict.calibrated), with intervals
      -> measured figures: a probe row of exactly this configuration (same hardware, model, quant, engine, batch,
         context and KV dtype)

Every figure is a ``Figure`` (value, unit, provenance, basis, interval). The figures derived from TTFT and TPOT are
derived here and nowhere else, as vLLM's benchmarks define them:

    E2E = TTFT + (n_out - 1) x TPOT;  decode rate = 1000 / TPOT (per sequence);  throughput = batch x decode rate
    served to `batch` closed-loop clients (``Predictor.serving``, recommender.predict.serving): TTFT, TPOT and E2E
    under load, request and output throughput, goodput at SLOs
    bandwidth utilization = bytes read per decode step x decode rate / memory bandwidth

A measured row's own decode rate and throughput (medians over its repeats) are shown as measured. Measured rows and
calibration fits are taken with every layer on the GPU, so a partial-offload configuration stays analytical.

``Predictor.predict`` serves recommend, estimate, tune and sensitivity; ``Predictor.for_measurement`` predicts exactly
what a measured row ran (its KV dtype included) without looking at that row, for calibration fitting, the error
benches and the probe's bandwidth share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional, Union

from pydantic import Field, computed_field

from recommender.core.records import Figure, HardwareProfile, Measurement, ModelSpec, Provenance, Variant
from recommender.hardware.multi import MultiGpu
from recommender.hardware.profiles import hardware_key, has_hardware_key
from recommender.predict import constants as C
from recommender.predict.analytical import Estimate, Memory, memory, RunShape, estimate
from recommender.predict.calibrated import Calibrator, load_calibrator
from recommender.predict.serving import Slo, serve_figures
from recommender.predict.split import DeviceShare, SplitEstimate, SplitPlan, estimate_split

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


@dataclass(frozen=True, slots=True)
class Config:
    """One configuration to predict (the candidate key without the model spec and hardware). A frozen dataclass:
    recommend makes one per candidate, and its fields are checked where they come from (the catalog, the query)."""

    model: str
    quant: str
    engine: str
    context_tokens: int
    batch: int = 1
    prompt_tokens: Optional[int] = None  # None: the context less the output
    output_tokens: int = 256
    kv_dtype: Optional[str] = None  # None: the engine's default
    gpu_layers: Optional[int] = None  # llama.cpp partial offload; None = every layer on the GPU
    split: Optional[SplitPlan] = None  # spread over the Predictor's multi-GPU machine; None = one GPU
    load_mode: str = C.LLAMA_CPP_DEFAULT_LOAD_MODE  # llama.cpp partial offload: mmap (its default) or none (--no-mmap)


class Prediction(RunShape):
    """The figures of one configuration on one hardware profile, and the analytical terms behind them."""

    figures: dict[str, Figure]
    analysis: Estimate = Field(exclude=True, repr=False)  # the analytical estimate behind the figures
    basis: dict[str, str]
    notes: list[str]
    # a multi-GPU plan: how the model is split, over which link, and each device's memory (estimated)
    split: Optional[SplitPlan] = None
    link: Optional[str] = None
    devices: Optional[list[DeviceShare]] = None

    @computed_field
    @property
    def bandwidth_utilization(self) -> Figure:
        """Bytes read per decode step x decode rate / memory bandwidth: the share of the GPU's bandwidth the decode
        uses (estimated bytes; the rate is the decode figure shown). Computed when shown."""
        dec, bw = self.figures["decode_tokens_per_s"].value, self.analysis.hardware_bandwidth_bytes_per_s
        util = self.analysis.decode_bytes_per_step * dec / bw if bw and dec is not None else None
        return _fig("bandwidth_utilization", util, "estimated", DERIVED_BASIS["bandwidth_utilization"])

    @computed_field
    @property
    def terms(self) -> dict[str, Union[int, float]]:
        """The analytical breakdown (bytes are whole numbers, FLOPs floats), computed when shown."""
        return {k: getattr(self.analysis, k) for k in TERMS}

    def value(self, name: str) -> Optional[float]:
        f = self.figures.get(name)
        return None if f is None else f.value

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
    # the analytical terms by name
    weights_gpu_bytes = property(lambda self: self.analysis.weights_gpu_bytes)
    host_weights_bytes = property(lambda self: self.analysis.host_weights_bytes)
    kv_bytes_per_token = property(lambda self: self.analysis.kv_bytes_per_token)
    compute_buffer_bytes = property(lambda self: self.analysis.compute_buffer_bytes)
    runtime_overhead_bytes = property(lambda self: self.analysis.runtime_overhead_bytes)
    decode_bytes_per_step = property(lambda self: self.analysis.decode_bytes_per_step)


def _fig(name: str, value: Optional[float], provenance: Provenance, basis: str = "",
         interval: Optional[tuple[float, float]] = None) -> Figure:
    return Figure(value, FIGURE_UNITS[name], provenance if value is not None else "unknown", basis, interval)


def analytical_figures(est: Estimate) -> dict[str, Figure]:
    """The analytical estimate's own figures (TTFT and TPOT; memory), all estimated."""
    b = est.basis
    return {
        "weights_bytes": _fig("weights_bytes", est.weights_bytes, est.weights_bytes_provenance,
                              b.get("weights", "the variant's tensors, sized one by one (catalog)")),
        "kv_cache_bytes": _fig("kv_cache_bytes", est.kv_cache_bytes, "estimated",
                               f"KV cache ({est.kv_dtype}): bytes per token x cached tokens (docs/estimates.md)"),
        "overhead_bytes": _fig("overhead_bytes", est.overhead_bytes, "estimated",
                               "compute buffer + runtime overhead (basis: memory)"),
        "total_vram_bytes": _fig("total_vram_bytes", est.total_vram_bytes, "estimated", b.get("memory", "")),
        "ttft_ms": _fig("ttft_ms", est.ttft_ms, "estimated", b.get("prefill", ""), est.intervals.get("ttft_ms")),
        "tpot_ms": _fig("tpot_ms", est.tpot_ms, "estimated", b.get("decode", ""), est.intervals.get("tpot_ms")),
    }


def measured_figures(est: Estimate, m: Measurement) -> tuple[dict[str, Figure], dict[str, str]]:
    """The figures a probe row of this configuration measured, and basis notes. TTFT depends on the prompt length, so
    a row measured with another prompt lends its decode and memory figures only."""
    tag = f"measurement {m.id} ({m.engine} {m.engine_version} on {m.hardware_name}, {m.measured_at[:10]}" + \
          (", synthetic weights" if m.synthetic else "") + ")"
    out: dict[str, Figure] = {}
    basis = {"measured": m.id}
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


def _derive(figs: dict[str, Figure], est: Estimate, calibrated: set[str], measured: set[str]) -> None:
    """E2E, decode rate and throughput from the TTFT and TPOT figures that are shown.

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


class Predictor:
    """Predictions on one hardware profile: its calibration terms and the measured rows of that hardware."""

    def __init__(self, hw: HardwareProfile, *, hw_key: Optional[str] = None, calibrator: Optional[Calibrator] = None,
                 measured: Optional[dict[tuple, Measurement]] = None, machine: Optional[MultiGpu] = None) -> None:
        self.hw = hw
        self.machine = machine  # several GPUs: configurations with a split plan are spread over them
        self.hw_key = hw_key or hw.name.lower()
        self.calibrator = calibrator if calibrator is not None else Calibrator([])
        self.measured = measured or {}
        self._single_ttft: dict[tuple, Figure] = {}  # serving(): TTFT at batch 1 per configuration

    @classmethod
    def for_catalog(cls, catalog, hw: HardwareProfile, profiles: list[HardwareProfile],
                    models: Optional[dict[str, ModelSpec]] = None, model_id: Optional[str] = None,
                    machine: Optional[MultiGpu] = None) -> "Predictor":
        """A predictor with the catalog's calibration (overlay first, then shipped) and the measured rows of this
        hardware (only those are read: a row is a few kB of per-repeat timings)."""
        models = catalog.models() if models is None else models
        key = hardware_key(hw.name, profiles)
        names = [n for n in catalog.measured_hardware() if has_hardware_key(n, key, profiles)]
        rows = catalog.measurements(model_id=model_id, status="ok", hardware_names=names)
        return cls(hw, hw_key=key, calibrator=load_calibrator(catalog),
                   measured=measured_index(rows, profiles, swa_models(models)), machine=machine)

    @property
    def stale(self) -> int:
        return self.calibrator.stale

    def predict(self, spec: ModelSpec, c: Config, variant: Optional[Variant] = None, *,
                record: type[Prediction] = Prediction,
                extra: Optional[Callable[[dict[str, Figure], list[str]], dict]] = None,
                mem: Optional[Memory] = None) -> Prediction:
        """The prediction of one configuration. ``record`` (a subclass of Prediction) and ``extra`` (the record's
        other fields, computed from the figures and notes) build a richer record in the same step (rank's
        Candidate).

        A configuration with a split plan is spread over the Predictor's machine (recommender.predict.split): its
        figures stay estimated (calibration terms and measured rows are per single GPU). ``mem``: the memory terms of
        this configuration from ``screen_memory``, when the caller has them."""
        if c.split is not None:
            if self.machine is None:
                raise ValueError("a split plan needs a Predictor with a multi-GPU machine")
            if c.gpu_layers is not None:
                raise ValueError("partial offload (gpu_layers) is not modelled with a multi-GPU split")
            est = estimate_split(spec, c.quant, c.engine, self.machine, c.split, context_tokens=c.context_tokens,
                                 batch=c.batch, prompt_tokens=c.prompt_tokens, output_tokens=c.output_tokens,
                                 kv_dtype=c.kv_dtype, variant=variant)
        else:
            est = estimate(spec, c.quant, c.engine, self.hw, context_tokens=c.context_tokens, batch=c.batch,
                           prompt_tokens=c.prompt_tokens, output_tokens=c.output_tokens, kv_dtype=c.kv_dtype,
                           variant=variant, gpu_layers=c.gpu_layers, mem=mem, load_mode=c.load_mode)
        return self.refine(est, spec, record=record, extra=extra)

    def offload_fit(self, spec: ModelSpec, c: Config, budget_bytes: float,
                    variant: Optional[Variant] = None) -> Optional[Prediction]:
        """llama.cpp partial offload of a configuration too big for the GPU: the prediction with the most layers on
        the GPU (n_gpu_layers 1 .. num_layers; docs/estimates.md section 6.7) whose memory fits ``budget_bytes``, None
        when not even the output layer does. Memory grows with n_gpu_layers (each block brings its weights and its
        share of the KV cache), so a bisection finds it."""
        lo, hi, best = 1, max(spec.num_layers, 1), None
        while lo <= hi:
            mid = (lo + hi) // 2
            p = self.predict(spec, dataclasses.replace(c, gpu_layers=mid, split=None), variant=variant)
            if p.total_vram_bytes is not None and p.total_vram_bytes <= budget_bytes:
                best, lo = p, mid + 1
            else:
                hi = mid - 1
        return best

    def screen_memory(self, spec: ModelSpec, c: Config, variant: Optional[Variant] = None) -> Optional[Memory]:
        """The memory terms of a configuration, computed without its latency, when their total is the GPU memory
        ``predict`` would show: one GPU, every layer on it, no measured row of exactly this configuration and no
        calibrated memory term on this hardware. None otherwise (predict it). recommend's memory-first pre-pass: a
        configuration above the budget is excluded whatever its latency (pass the terms on to ``predict``)."""
        if c.split is not None or c.gpu_layers is not None:
            return None
        if (c.engine, self.hw_key, "total_vram_bytes") in self.calibrator.terms and self.hw.backend != "cpu":
            return None
        m = memory(spec, c.quant, c.engine, self.hw, context_tokens=c.context_tokens, batch=c.batch,
                   prompt_tokens=c.prompt_tokens, output_tokens=c.output_tokens, kv_dtype=c.kv_dtype, variant=variant)
        if (self.hw_key, spec.id, c.quant, c.engine, c.batch, c.context_tokens, m.kv_dtype) in self.measured:
            return None
        return m

    def serving(self, spec: ModelSpec, pred: Prediction, slo: Optional[Slo] = None,
                variant: Optional[Variant] = None) -> dict[str, Figure]:
        """The figures of ``pred`` served to ``pred.batch`` closed-loop clients, goodput at ``slo`` included
        (recommender.predict.serving: the one serving model). It needs the same configuration's TTFT at batch 1 (one
        prompt's prefill alone), predicted here once per configuration."""
        single = pred.figures["ttft_ms"]
        if pred.batch > 1:
            key = (pred.model, pred.quant, pred.engine, pred.context_tokens, pred.prompt_tokens, pred.output_tokens,
                   pred.kv_dtype, pred.gpu_layers, pred.split.model_dump_json() if pred.split else None)
            single = self._single_ttft.get(key)
            if single is None:
                one = self.predict(spec, Config(model=pred.model, quant=pred.quant, engine=pred.engine,
                                                context_tokens=pred.context_tokens, batch=1,
                                                prompt_tokens=pred.prompt_tokens, output_tokens=pred.output_tokens,
                                                kv_dtype=pred.kv_dtype, gpu_layers=pred.gpu_layers,
                                                split=pred.split), variant=variant)
                single = self._single_ttft[key] = one.figures["ttft_ms"]
        return serve_figures(pred.figures, single, pred.batch, pred.output_tokens, slo)

    def measured_config(self, spec: ModelSpec, m: Measurement) -> Estimate:
        """The analytical estimate of exactly the configuration a measured row ran (engine, quant, context, batch,
        prompt, output, KV dtype): what calibration terms are fitted to correct."""
        return estimate(spec, m.quant, m.engine, self.hw, context_tokens=m.context_tokens, batch=m.batch,
                        prompt_tokens=m.prompt_tokens, output_tokens=m.output_tokens, kv_dtype=m.kv_dtype)

    def for_measurement(self, spec: ModelSpec, m: Measurement) -> Prediction:
        """The prediction of exactly the configuration a measured row ran, never using that row's own figures."""
        return self.refine(self.measured_config(spec, m), spec, use_measured=False)

    def refine(self, est: Estimate, spec: ModelSpec, use_measured: bool = True, *,
               record: type[Prediction] = Prediction,
               extra: Optional[Callable[[dict[str, Figure], list[str]], dict]] = None) -> Prediction:
        """analytical -> calibrated -> measured, then the derived figures."""
        figs = analytical_figures(est)
        # the record's basis: what no single figure carries (formula version, memory breakdown, MoE, offload); each
        # figure carries its own (its term, its measured row)
        basis = {k: v for k, v in est.basis.items() if k not in ("decode", "prefill")}
        calibrated: set[str] = set()
        measured: set[str] = set()
        split = est if isinstance(est, SplitEstimate) else None
        if est.gpu_layers is None and split is None:
            if self.calibrator.has(est.engine, self.hw_key):
                cal = self.calibrator.figures(est, spec, self.hw, self.hw_key)
                figs.update(cal)
                calibrated = set(cal)
            m = self.measured.get((self.hw_key, est.model, est.quant, est.engine, est.batch, est.context_tokens,
                                   est.kv_dtype)) if use_measured else None
            if m is not None:
                got, notes = measured_figures(est, m)
                figs.update(got)
                measured = set(got)
                basis.update(notes)  # which row, and why its TTFT was not used
        _derive(figs, est, calibrated, measured)
        fields = extra(figs, est.notes) if extra else {}
        if split is not None:
            est = est.model_copy(update={"hardware_bandwidth_bytes_per_s": split_bandwidth(split, self.machine)})
            fields.update(split=split.plan, link=split.link, devices=split.devices)
        # trusted (model_construct without its per-field overhead): every field comes from validated records (no
        # second validation pass over ~10,000 candidates: recommend's cold start matters)
        shape = est.__dict__
        return record.trusted(**{k: shape[k] for k in RunShape.model_fields}, figures=figs,
                              analysis=est, basis=basis, notes=est.notes, **fields)


def split_bandwidth(est: SplitEstimate, machine: MultiGpu) -> float:
    """The bandwidth a split step's bytes are read at: the devices' sum when they read at once (row, tensor), their
    mean when they take turns (layer, pipeline)."""
    bws = [d.memory_bandwidth_bytes_per_s for d in machine.devices]
    return sum(bws) if est.plan.mode in ("row", "tensor") else sum(bws) / len(bws)


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
        if m.problems:  # impossible figures (a TPOT of 0): never divided by (Catalog.measurements warns)
            continue
        if m.hardware_name not in keys:
            keys[m.hardware_name] = hardware_key(m.hardware_name, profiles)
        idx.setdefault((keys[m.hardware_name], m.model_id, m.quant, m.engine, m.batch, m.context_tokens,
                        m.kv_dtype), m)
    return idx


def swa_models(models: dict[str, ModelSpec]) -> frozenset[str]:
    return frozenset(mid for mid, s in models.items() if s.num_swa_layers)
