"""Calibrated predictions: the analytical estimate corrected by what was measured on the same hardware.

Two kinds of fitted term, one per (engine, hardware, metric):

* ``linear`` — a hardware with many measured rows (>= MIN_ROWS_LINEAR rows from >= MIN_MODELS_LINEAR models) gets a
  non-negative linear model on roofline features (scikit-learn ``LinearRegression(positive=True)``, rows weighted by
  1/y^2 so that the fit minimizes relative error). The features are the terms of the analytical estimate
  (docs/estimates.md), split where the measured rows show they behave differently:

  - TPOT (ms):  weight bytes read per step / bandwidth, one column per kernel class (F16/BF16, Q8_0, K-quants,
    legacy Q4_0-Q5_1, ...): its coefficient is 1 / achieved bandwidth fraction; KV bytes read per step / bandwidth
    and the flash-attention work per query head (or a quantized cache's attention time); layers (per-layer
    kernel-launch and host cost per step); the batched kernels' column time (mul_mat_vec_q up to 8 sequences, MMQ
    above, with MMQ's own weight pass; 16-bit weights' columns; an MoE's touched experts above 8 sequences: their
    MMQ weight pass and one kernel per touched expert); a hybrid's delta-rule (Gated DeltaNet) layers, whose op chain
    per step the attention + MLP layer count does not cover; per-sequence logits (copy, and the host argmax
    where the engine samples); an MoE model's routing time at a fixed coefficient of 1 (calibrated.FIXED_FEATURES).
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
from typing import Iterable, Optional

from recommender.core.records import HardwareProfile, Measurement, ModelSpec
from recommender.hardware.profiles import hardware_key, match_profile
from recommender.predict.calibrated import (
    CALIBRATION_VERSION,
    MEASURED_FIELD,
    METRICS,
    FIXED_FEATURES,
    CalibrationSet,
    FittedMetric,
    Term,
    _predict_linear,
    features,
    nominal_cpu,
)
from recommender.predict.predictor import Predictor

MIN_ROWS_LINEAR = 12  # rows needed for a full linear model on one hardware (up to 9 features)
MIN_MODELS_LINEAR = 3  # ... from at least this many models, so per-model effects average out
INTERVAL_QUANTILES = (0.10, 0.90)  # the interval shown with a calibrated figure (80 % of held-out errors)


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
    metric: FittedMetric
    x: dict[str, float]
    y: float
    analytic: Optional[float]  # what the analytical estimate said
    measurement_id: str
    nominal: bool = False  # hardware without sourced figures: analytic is on the NOMINAL_* scale, not an estimate


def row_profile(m: Measurement, profiles: list[HardwareProfile]) -> HardwareProfile:
    """The shipped profile of a measured row's hardware, else a nominal CPU-host profile (features scaled by the
    NOMINAL_* constants; memory is not modelled)."""

    prof = match_profile(m.hardware_name, profiles)
    if prof is not None:
        return prof
    return nominal_cpu(HardwareProfile(name=m.hardware_name, vendor="host", memory_bytes=1,
                                       memory_bandwidth_bytes_per_s=0.0, backend="cpu"))


SERIAL_SERVER_KIND = "llama-cpp-python"  # recommender.probes.serve's name for llama_cpp.server


def usable(m: Measurement, spec: Optional[ModelSpec]) -> bool:
    if m.status != "ok" or spec is None:
        return False
    # llama-cpp-python's OpenAI server runs one request at a time: a `probe serve` row at concurrency > 1 measured a
    # queue, not batch-B decoding (the row stays, as what that server does; the fit leaves it out)
    if m.batch > 1 and m.raw.get("source") == "probe serve" and \
            m.raw.get("server", {}).get("kind") == SERIAL_SERVER_KIND:
        return False
    # llama.cpp full-size sliding-window caches (swa_full) are not the configuration the estimate models
    return not (spec.num_swa_layers and m.raw.get("engine", {}).get("details", {}).get("swa_full"))


NON_SAMPLING_TOOLS = ("llama-bench", "llama-batched-bench")  # llama.cpp's bench tools: decode, never sample


def samples_free(m: Measurement) -> bool:
    """A row of a tool that decodes without picking tokens from the logits (llama-bench's tg test feeds its own
    tokens; llama-batched-bench only calls llama_decode), so no host argmax per sequence (calibrated.features)."""
    tool = str(m.raw.get("tool", ""))
    return any(tool.startswith(t + " ") or tool == t for t in NON_SAMPLING_TOOLS)


def training_rows(measurements: Iterable[Measurement], specs: dict[str, ModelSpec],
                  profiles: list[HardwareProfile]) -> list[Row]:

    rows: list[Row] = []
    for m in measurements:
        spec = specs.get(m.model_id)
        if not usable(m, spec):
            continue
        hw = row_profile(m, profiles)
        try:
            est = Predictor(hw).measured_config(spec, m)  # analytical: what the terms correct
        except (KeyError, ValueError):
            continue
        key = hardware_key(m.hardware_name, profiles)
        samples = not samples_free(m)
        for metric in METRICS:
            y = getattr(m, MEASURED_FIELD[metric])
            if not y:
                continue
            rows.append(Row(engine=m.engine, hardware=key, model=m.model_id, quant=m.quant, batch=m.batch,
                            metric=metric, x=features(metric, est, spec, hw, samples=samples), y=float(y),
                            analytic=getattr(est, metric), measurement_id=m.id, nominal=hw.backend == "cpu"))
    return rows


# --------------------------------------------------------------------------------------------------------------
# Fitting (scikit-learn, lazy) and prediction (pure Python)
# --------------------------------------------------------------------------------------------------------------
def _fit_linear(rows: list[Row]) -> tuple[list[str], list[float]]:
    from sklearn.linear_model import LinearRegression  # noqa: PLC0415

    fixed = sorted(FIXED_FEATURES)  # coefficient 1: the analytical time, subtracted before the fit
    names = sorted({k for r in rows for k in r.x} - FIXED_FEATURES)
    X = [[r.x.get(n, 0.0) for n in names] for r in rows]
    y = [r.y - sum(r.x.get(n, 0.0) for n in fixed) for r in rows]
    w = [1.0 / (r.y * r.y) for r in rows]  # relative-error weighting (of the measured figure)
    # every term is a non-negative cost, the constant one included (an "intercept" feature), so no configuration
    # is predicted below zero and each coefficient keeps its physical reading
    reg = LinearRegression(positive=True, fit_intercept=False)
    reg.fit(X, y, sample_weight=w)
    return names + fixed, [float(c) for c in reg.coef_] + [1.0] * len(fixed)


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
