"""Prediction error of the calibrated predictor on the shipped measured rows (a report, not a test).

For every (engine, hardware) group of measured rows:
  * analytical      — the spec-sheet estimate (recommender.predict.analytical) against the measurement;
  * leave-one-model-out (LOMO) — each model predicted by a linear calibration fitted on the other models' rows of
    the same hardware (what `recommend` uses on a hardware with many measured rows);
  * leave-one-hardware-out (LOHO, one probe) — the hardware's rows predicted by the analytical estimate scaled by one
    calibration probe (its smallest model at batch 1), i.e. nothing else known about that hardware: what
    `recommender calibrate` gives on a machine the catalog has not measured.
Errors are |predicted - measured| / measured; decode tok/s is 1000 / TPOT, so its error is 1/(1+e) - 1.

    .venv/bin/python bench/calibration_error.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from recommender.core.paths import SOURCES_DIR
from recommender.hardware.profiles import load_profiles
from recommender.predict.fit import group_rows, lomo_errors, one_probe_errors, training_rows
from recommender.catalog.build import load_measurements, load_models

LABEL = {"tpot_ms": "decode tok/s", "ttft_ms": "TTFT", "total_vram_bytes": "peak VRAM"}  # TPOT: see report()


def _stats(errs: list[float]) -> dict:
    a = sorted(abs(e) for e in errs)
    if not a:
        return {"n": 0}
    return {"n": len(a), "median_abs_pct": round(100 * statistics.median(a), 2),
            "p90_abs_pct": round(100 * a[int(round(0.9 * (len(a) - 1)))], 2),
            "median_signed_pct": round(100 * statistics.median(errs), 2)}


def _as_metric(metric: str, e: float) -> float:
    return 1.0 / (1.0 + e) - 1.0 if metric == "tpot_ms" else e


def report() -> list[dict]:
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    rows = training_rows(load_measurements(SOURCES_DIR), specs, load_profiles())
    out = []
    pooled: dict[tuple[str, str], list[float]] = {}
    views = []
    for (engine, hw, metric), grp in sorted(group_rows(rows).items()):
        views.append((engine, hw, metric, LABEL[metric], grp))
        if metric == "tpot_ms":  # the same predictions, reported as TPOT as well as decode tok/s
            views.append((engine, hw, "tpot_raw", "TPOT", grp))
    for engine, hw, metric, label, grp in views:
        # a CPU host has no sourced bandwidth/FLOP/s: its "analytical" figure is on a nominal scale, not an estimate
        analytic = [_as_metric(metric, (r.analytic - r.y) / r.y) for r in grp if r.analytic and not r.nominal]
        lomo = [_as_metric(metric, e) for _, e in lomo_errors(grp)]
        loho = [_as_metric(metric, e) for _, e in one_probe_errors(grp)]
        pooled.setdefault((hw, label), []).extend(lomo)
        out.append({"engine": engine, "hardware": hw, "metric": label, "rows": len(grp),
                    "models": len({r.model for r in grp}), "analytical": _stats(analytic),
                    "lomo": _stats(lomo), "loho_one_probe": _stats(loho)})
    for (hw, label), errs in sorted(pooled.items()):  # every engine of one hardware together
        if len({r["engine"] for r in out if r["hardware"] == hw}) > 1 and errs:
            out.append({"engine": "all", "hardware": hw, "metric": label, "rows": len(errs), "models": None,
                        "analytical": {"n": 0}, "lomo": _stats(errs), "loho_one_probe": {"n": 0}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = report()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{'engine':<12} {'hardware':<34} {'metric':<12} {'rows':>4}  {'analytical':>18}  {'LOMO':>18}  "
          f"{'LOHO (1 probe)':>18}   (median / p90 |error| %)")
    for r in out:
        cells = []
        for k in ("analytical", "lomo", "loho_one_probe"):
            s = r[k]
            cells.append(f"{s['median_abs_pct']:6.1f} / {s['p90_abs_pct']:6.1f}" if s["n"] else f"{'-':>15}")
        print(f"{r['engine']:<12} {r['hardware'][:34]:<34} {r['metric']:<12} {r['rows']:>4}  {cells[0]:>18}  "
              f"{cells[1]:>18}  {cells[2]:>18}")


if __name__ == "__main__":
    main()
