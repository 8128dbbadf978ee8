"""Calibrated predictions: the analytical estimate corrected by what was measured on the same hardware.

Two kinds of fitted term, one per (engine, hardware, metric):

* ``linear`` — a hardware with many measured rows (>= MIN_ROWS_LINEAR rows from >= MIN_MODELS_LINEAR models) gets a
  non-negative linear model on roofline features (scikit-learn ``LinearRegression(positive=True)``, rows weighted by
  1/y^2 so that the fit minimizes relative error). The features are the terms of the analytical estimate
  (docs/estimates.md), split where the measured rows show they behave differently:

  - TPOT (ms):  weight bytes read per step / bandwidth, one column per kernel class (F16/BF16, Q8_0, K-quants,
    legacy Q4_0-Q5_1, ...): its coefficient is 1 / achieved bandwidth fraction; KV bytes read per step / bandwidth;
    layers (per-layer kernel-launch and host cost per step); layers x (batch - 1); (batch - 1) x 2 x active params /
    peak (the extra compute of batched quantized matmuls).
  - TTFT (ms): matmul FLOPs / peak, one column per kernel class (1 / MFU); attention FLOPs / FP16 peak;
    layers x micro-batches; micro-batches x weight bytes / bandwidth.
  - peak VRAM (bytes): weights on the GPU, KV cache for the context, KV cache of the tokens actually held
    (transformers' dynamic cache), compute buffer, a constant (runtime context).
  Every coefficient is non-negative, the constant included, so each keeps its physical reading.

* ``scale`` — a hardware with only a few rows (``recommender calibrate`` runs one short probe) gets one factor per
  metric on the analytical estimate: measured / estimated, median over its rows.

Every calibrated figure carries an interval: the 10th-90th percentile of the held-out relative errors of the same kind
of term (leave-one-model-out for ``linear``, leave-one-hardware-out one-probe calibration for ``scale``), so the
interval says how far such predictions were from measurements on models they had not seen.

Fitting needs scikit-learn (the ``tune`` extra); prediction is pure Python, so ``recommend`` starts fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Literal, Optional

from pydantic import Field

from .estimate import Estimate, estimate, estimate_measured, kv_cache_bytes
from .types import HardwareProfile, Measurement, ModelSpec, Strict

CALIBRATION_VERSION = "cal-v1"
MIN_ROWS_LINEAR = 12  # rows needed for a full linear model on one hardware (up to 9 features)
MIN_MODELS_LINEAR = 3  # ... from at least this many models, so per-model effects average out
INTERVAL_QUANTILES = (0.10, 0.90)  # the interval shown with a calibrated figure (80 % of held-out errors)
# Feature scales for hardware with no sourced bandwidth / peak (a CPU host): the per-hardware fit absorbs the scale,
# so these only keep the features of the order of milliseconds.
NOMINAL_BANDWIDTH_BYTES_PER_S = 100e9
NOMINAL_PEAK_FLOPS_PER_S = 1e12
LLAMA_CPP_N_UBATCH = 512  # llama.cpp prompt micro-batch (constants.LLAMA_CPP_N_UBATCH)

Metric = Literal["tpot_ms", "ttft_ms", "total_vram_bytes"]
METRICS: tuple[Metric, ...] = ("tpot_ms", "ttft_ms", "total_vram_bytes")
MEASURED_FIELD = {"tpot_ms": "tpot_ms", "ttft_ms": "ttft_ms", "total_vram_bytes": "peak_vram_bytes"}


class Term(Strict):
    engine: str
    hardware: str  # hardware key (recommend.hardware_key)
    metric: Metric
    kind: Literal["linear", "scale"]
    features: list[str] = Field(default_factory=list)
    coef: list[float] = Field(default_factory=list)
    scale: float = 1.0
    n_rows: int
    models: list[str]
    interval: list[float]  # [low, high] quantiles of held-out relative errors (predicted - measured) / measured
    basis: str


class CalibrationSet(Strict):
    version: str = CALIBRATION_VERSION
    fitted_at: str
    fitted_by: str  # sklearn version
    terms: list[Term]

    def index(self) -> dict[tuple[str, str, str], Term]:
        return {(t.engine, t.hardware, t.metric): t for t in self.terms}


# --------------------------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------------------------
def kernel_class(quant: str) -> str:
    """Quantizations whose kernels read weights alike (one efficiency coefficient each)."""
    q = quant.upper()
    if q in ("F16", "BF16", "F32"):
        return "float"
    if q == "Q8_0":
        return "q8_0"
    if "_K" in q:
        return "kquant"
    if q.startswith("IQ"):
        return "iquant"
    if q in ("Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        return "legacy"
    return q.lower()


def _scales(hw: HardwareProfile, quant: str) -> tuple[float, float, float]:
    bw = hw.memory_bandwidth_bytes_per_s or NOMINAL_BANDWIDTH_BYTES_PER_S  # a CPU comes in as nominal_cpu(...)
    peak = hw.fp16_flops_per_s or NOMINAL_PEAK_FLOPS_PER_S
    peak_q = hw.int8_ops_per_s if (kernel_class(quant) != "float" and hw.int8_ops_per_s) else peak
    return bw, peak, peak_q


def features(metric: Metric, est: Estimate, spec: ModelSpec, hw: HardwareProfile) -> dict[str, float]:
    """The named features of one configuration for one metric (module docstring)."""
    bw, peak, peak_q = _scales(hw, est.quant)
    cls = kernel_class(est.quant)
    b = est.batch
    if metric == "tpot_ms":
        weights = est.decode_bytes_per_step - est.decode_kv_bytes_per_step
        return {f"weights/bw:{cls}": weights / bw * 1e3, "kv/bw": est.decode_kv_bytes_per_step / bw * 1e3,
                "layers": float(spec.num_layers), "layers*(batch-1)": float(spec.num_layers * (b - 1)),
                "(batch-1)*2N/peak": (b - 1) * 2.0 * (spec.params_active or spec.params_total) / peak_q * 1e3,
                "1 ms": 1.0}
    if metric == "ttft_ms":
        tokens = est.prompt_tokens * b
        chunks = math.ceil(tokens / LLAMA_CPP_N_UBATCH) if est.engine == "llama.cpp" else 1
        mm = est.prefill_flops - est.prefill_attention_flops
        return {f"matmul/peak:{cls}": mm / peak_q * 1e3, "attention/peak": est.prefill_attention_flops / peak * 1e3,
                "layers*ubatches": float(spec.num_layers * chunks),
                "ubatches*weights/bw": chunks * est.weights_gpu_bytes / bw * 1e3, "1 ms": 1.0}
    held = kv_cache_bytes(spec, min(est.prompt_tokens + est.output_tokens, est.context_tokens), b, est.engine,
                          est.kv_dtype)
    return {"weights_gpu": float(est.weights_gpu_bytes), "kv_cache": float(est.kv_cache_bytes),
            "kv_held": float(held), "compute_buffer": float(est.compute_buffer_bytes), "1 byte": 1.0}


# --------------------------------------------------------------------------------------------------------------
# Training rows
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One measured figure and its features (internal to fitting; a dataclass keeps `recommend`'s import cheap)."""

    engine: str
    hardware: str
    model: str
    quant: str
    batch: int
    metric: Metric
    x: dict[str, float]
    y: float
    analytic: Optional[float]  # what the analytical estimate said
    measurement_id: str
    nominal: bool = False  # hardware without sourced figures: analytic is on the NOMINAL_* scale, not an estimate


def row_profile(m: Measurement, profiles: list[HardwareProfile]) -> HardwareProfile:
    """The shipped profile of a measured row's hardware, else a nominal CPU-host profile (features scaled by the
    NOMINAL_* constants; memory is not modelled)."""
    from .hardware import match_profile  # noqa: PLC0415

    prof = match_profile(m.hardware_name, profiles)
    if prof is not None:
        return prof
    return nominal_cpu(HardwareProfile(name=m.hardware_name, vendor="host", memory_bytes=1,
                                       memory_bandwidth_bytes_per_s=0.0, backend="cpu"))


def nominal_cpu(hw: HardwareProfile) -> HardwareProfile:
    """A CPU profile with the NOMINAL_* scales in place of the figures no source gives (calibration only: the
    fitted coefficients absorb the scale; never shown as an estimate)."""
    return hw.model_copy(update={"memory_bandwidth_bytes_per_s": NOMINAL_BANDWIDTH_BYTES_PER_S,
                                 "fp16_flops_per_s": NOMINAL_PEAK_FLOPS_PER_S})


def usable(m: Measurement, spec: Optional[ModelSpec]) -> bool:
    if m.status != "ok" or spec is None:
        return False
    # llama.cpp full-size sliding-window caches (swa_full) are not the configuration the estimate models
    return not (spec.num_swa_layers and m.raw.get("engine", {}).get("details", {}).get("swa_full"))


def training_rows(measurements: Iterable[Measurement], specs: dict[str, ModelSpec],
                  profiles: list[HardwareProfile]) -> list[Row]:
    from .recommend import hardware_key  # noqa: PLC0415

    rows: list[Row] = []
    for m in measurements:
        spec = specs.get(m.model_id)
        if not usable(m, spec):
            continue
        hw = row_profile(m, profiles)
        try:
            est = estimate_measured(spec, m, hw)
        except (KeyError, ValueError):
            continue
        key = hardware_key(m.hardware_name, profiles)
        for metric in METRICS:
            y = getattr(m, MEASURED_FIELD[metric])
            if not y:
                continue
            rows.append(Row(engine=m.engine, hardware=key, model=m.model_id, quant=m.quant, batch=m.batch,
                            metric=metric, x=features(metric, est, spec, hw), y=float(y),
                            analytic=getattr(est, metric), measurement_id=m.id, nominal=hw.backend == "cpu"))
    return rows


# --------------------------------------------------------------------------------------------------------------
# Fitting (scikit-learn, lazy) and prediction (pure Python)
# --------------------------------------------------------------------------------------------------------------
def _fit_linear(rows: list[Row]) -> tuple[list[str], list[float]]:
    from sklearn.linear_model import LinearRegression  # noqa: PLC0415

    names = sorted({k for r in rows for k in r.x})
    X = [[r.x.get(n, 0.0) for n in names] for r in rows]
    y = [r.y for r in rows]
    w = [1.0 / (r.y * r.y) for r in rows]  # relative-error weighting
    # every term is a non-negative cost, the constant one included (an "intercept" feature), so no configuration
    # is predicted below zero and each coefficient keeps its physical reading
    reg = LinearRegression(positive=True, fit_intercept=False)
    reg.fit(X, y, sample_weight=w)
    return names, [float(c) for c in reg.coef_]


def _predict_linear(names: list[str], coef: list[float], x: dict[str, float]) -> Optional[float]:
    known = set(names)
    if any(v and k not in known for k, v in x.items()):
        return None  # a kernel class this hardware has no measured rows for
    return sum(c * x.get(n, 0.0) for n, c in zip(names, coef))


def _fit_scale(rows: list[Row]) -> Optional[float]:
    import statistics  # noqa: PLC0415

    ratios = [r.y / r.analytic for r in rows if r.analytic]
    return statistics.median(ratios) if ratios else None


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return 0.0
    pos = q * (len(xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def group_rows(rows: list[Row]) -> dict[tuple[str, str, str], list[Row]]:
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.engine, r.hardware, r.metric), []).append(r)
    return groups


def linear_ok(rows: list[Row]) -> bool:
    return len(rows) >= MIN_ROWS_LINEAR and len({r.model for r in rows}) >= MIN_MODELS_LINEAR


def lomo_errors(rows: list[Row]) -> list[tuple[Row, float]]:
    """Leave-one-model-out: each model's rows predicted by a linear model fitted on the other models' rows.
    Returns (row, relative error) for every row that could be predicted."""
    out = []
    for model in sorted({r.model for r in rows}):
        train = [r for r in rows if r.model != model]
        if len(train) < MIN_ROWS_LINEAR or len({r.model for r in train}) < MIN_MODELS_LINEAR - 1:
            continue
        names, coef = _fit_linear(train)
        for r in rows:
            if r.model == model:
                p = _predict_linear(names, coef, r.x)
                if p is not None and p > 0:
                    out.append((r, (p - r.y) / r.y))
    return out


def one_probe_errors(rows: list[Row]) -> list[tuple[Row, float]]:
    """Leave-one-hardware-out with one calibration probe: the hardware's other rows predicted by the analytical
    estimate x (measured / estimated) of its smallest-model batch-1 row — what `recommender calibrate` does on a
    hardware the shipped catalog has not measured."""
    probes = sorted((r for r in rows if r.batch == 1 and r.analytic),
                    key=lambda r: (r.x.get("layers", 0) + sum(v for k, v in r.x.items() if k.startswith("weights")),
                                   r.model, r.quant))
    if not probes:
        return []
    probe = probes[0]
    s = probe.y / probe.analytic
    return [(r, (s * r.analytic - r.y) / r.y) for r in rows
            if r.measurement_id != probe.measurement_id and r.analytic]


def fit(rows: list[Row], *, scale_interval: Optional[dict[str, list[float]]] = None) -> CalibrationSet:
    """One term per (engine, hardware, metric) group: linear where the group is large enough, else a scale."""
    import sklearn  # noqa: PLC0415

    terms: list[Term] = []
    scale_interval = scale_interval or {}
    for (engine, hw, metric), grp in sorted(group_rows(rows).items()):
        models = sorted({r.model for r in grp})
        if linear_ok(grp):
            names, coef = _fit_linear(grp)
            errs = [e for _, e in lomo_errors(grp)]
            if errs:
                interval = [_quantile(errs, INTERVAL_QUANTILES[0]), _quantile(errs, INTERVAL_QUANTILES[1])]
            else:  # no model could be held out: the widest interval we know (one-probe errors)
                interval = scale_interval.get(metric, [0.0, 0.0])
            terms.append(Term(engine=engine, hardware=hw, metric=metric, kind="linear", features=names, coef=coef,
                              n_rows=len(grp), models=models, interval=interval,
                              basis=(f"{CALIBRATION_VERSION} linear fit on {len(grp)} measured rows of {len(models)} "
                                     f"models on {hw} ({engine}); interval = 10-90 % of leave-one-model-out errors")))
        else:
            s = _fit_scale(grp)
            if s is None:
                continue
            interval = scale_interval.get(metric, [0.0, 0.0])
            terms.append(Term(engine=engine, hardware=hw, metric=metric, kind="scale", scale=s, n_rows=len(grp),
                              models=models, interval=interval,
                              basis=(f"{CALIBRATION_VERSION} analytical estimate x {s:.3f} (measured/estimated over "
                                     f"{len(grp)} rows on {hw}, {engine}); interval = 10-90 % of one-probe "
                                     f"leave-one-hardware-out errors")))
    return CalibrationSet(fitted_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          fitted_by=f"scikit-learn {sklearn.__version__}", terms=terms)


def scale_intervals(rows: list[Row]) -> dict[str, list[float]]:
    """Per metric, the 10-90 % range of one-probe calibration errors pooled over every (engine, hardware) group."""
    pooled: dict[str, list[float]] = {}
    for (_e, _h, metric), grp in group_rows(rows).items():
        pooled.setdefault(metric, []).extend(e for _, e in one_probe_errors(grp))
    return {m: [_quantile(v, INTERVAL_QUANTILES[0]), _quantile(v, INTERVAL_QUANTILES[1])]
            for m, v in pooled.items() if v}


def fit_catalog_rows(measurements: Iterable[Measurement], specs: dict[str, ModelSpec],
                     profiles: list[HardwareProfile]) -> CalibrationSet:
    rows = training_rows(measurements, specs, profiles)
    return fit(rows, scale_interval=scale_intervals(rows))


def predict_term(t: Term, x: dict[str, float], analytic: Optional[float]) -> Optional[float]:
    if t.kind == "scale":
        return None if analytic is None else analytic * t.scale
    p = _predict_linear(t.features, t.coef, x)
    return p if p is not None and p > 0 else None


# --------------------------------------------------------------------------------------------------------------
# Applying a calibration to an estimate
# --------------------------------------------------------------------------------------------------------------
META_KEY = "calibration"


def load_calibrator(catalog) -> "Calibrator":
    """The calibrations stored in a catalog: the user overlay's (this machine) first, then the shipped one."""
    sets, stale = [], 0
    for v in catalog.meta_values(META_KEY):
        try:
            cs = CalibrationSet.model_validate_json(v)
        except ValueError:
            stale += 1
            continue
        if cs.version != CALIBRATION_VERSION:
            stale += 1
            continue
        sets.append(cs)
    return Calibrator(sets, stale)


class Calibrator:
    """Looks up terms by (engine, hardware key, metric); user (machine) terms win over shipped ones."""

    def __init__(self, sets: list[CalibrationSet], stale: int = 0) -> None:
        self.stale = stale  # stored calibrations of another version or schema, ignored
        self.terms: dict[tuple[str, str, str], Term] = {}
        for s in reversed(sets):  # later (shipped) first, earlier (user) overrides
            self.terms.update(s.index())
        self._pairs = {(engine, hardware) for engine, hardware, _m in self.terms}  # has() runs once per candidate

    def has(self, engine: str, hardware: str) -> bool:
        return (engine, hardware) in self._pairs

    def apply(self, est: Estimate, spec: ModelSpec, hw: HardwareProfile, hw_key: str) -> Estimate:
        base, fhw = est, hw
        if hw.backend == "cpu":  # features and scale terms use the nominal CPU scale the rows were fitted with
            fhw = nominal_cpu(hw)
            base = estimate(spec, est.quant, est.engine, fhw, context_tokens=est.context_tokens,
                            batch=est.batch, prompt_tokens=est.prompt_tokens, output_tokens=est.output_tokens,
                            kv_dtype=est.kv_dtype)
        upd: dict = {}
        prov = dict(est.provenance)
        basis = dict(est.basis)
        intervals = dict(est.intervals)
        for metric in METRICS:
            t = self.terms.get((est.engine, hw_key, metric))
            if t is None:
                continue
            if metric == "total_vram_bytes" and hw.backend == "cpu":
                continue
            val = predict_term(t, features(metric, base, spec, fhw), getattr(base, metric))
            if val is None:
                continue
            upd[metric] = int(round(val)) if metric == "total_vram_bytes" else val
            prov[metric] = "calibrated"
            basis[f"calibrated_{metric}"] = t.basis
            # held-out relative errors e = (predicted - measured) / measured, so measured = predicted / (1 + e)
            lo, hi = t.interval
            intervals[metric] = [val / (1 + hi), val / (1 + lo) if lo > -1 else math.inf]
        if "tpot_ms" in upd:
            tpot = upd["tpot_ms"]
            upd["decode_tokens_per_s"] = 1000.0 / tpot
            upd["throughput_tokens_per_s"] = est.batch * 1000.0 / tpot
            upd["bandwidth_utilization"] = (est.decode_bytes_per_step * 1000.0 / tpot / hw.memory_bandwidth_bytes_per_s
                                            if hw.memory_bandwidth_bytes_per_s else None)
            prov["decode_tokens_per_s"] = prov["throughput_tokens_per_s"] = "calibrated"
        if "tpot_ms" in upd or "ttft_ms" in upd:
            ttft = upd.get("ttft_ms", est.ttft_ms)
            tpot = upd.get("tpot_ms", est.tpot_ms)
            if ttft is not None and tpot is not None:
                upd["e2e_ms"] = ttft + (est.output_tokens - 1) * tpot
                prov["e2e_ms"] = "calibrated"
        if not upd:
            return est
        return est.model_copy(update={**upd, "provenance": prov, "basis": basis, "intervals": intervals})


# --------------------------------------------------------------------------------------------------------------
# `recommender calibrate`: refit one machine's terms
# --------------------------------------------------------------------------------------------------------------
def refit_hardware(measurements: list[Measurement], specs: dict[str, ModelSpec], profiles: list[HardwareProfile],
                   hw_key: str, previous: Optional[CalibrationSet] = None) -> CalibrationSet:
    """The user's calibration set with this hardware's terms refitted on every measured row of it (shipped and
    overlay); other hardware's terms in ``previous`` are kept. Scale intervals come from all rows."""
    rows = training_rows(measurements, specs, profiles)
    mine = [r for r in rows if r.hardware == hw_key]
    fresh = fit(mine, scale_interval=scale_intervals(rows))
    kept = [t for t in (previous.terms if previous else []) if t.hardware != hw_key]
    return fresh.model_copy(update={"terms": kept + fresh.terms})
