"""Calibrated predictions against measured rows the calibration has never seen (a report, not a test).

The shipped calibration terms of a catalog predict each row of a Measurement JSONL file (rows of models that were not
in the fit); the |error| of peak GPU memory, TPOT and TTFT is printed per row and summarized. Leave-one-model-out in
bench/calibration_error.py simulates this; this script checks it on rows measured after the fit.

    .venv/bin/python bench/calibration_holdout.py ROWS.jsonl [--catalog CATALOG.duckdb] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from recommender.core.paths import SHIPPED_CATALOG, SOURCES_DIR
from recommender.core.records import Measurement
from recommender.hardware.profiles import hardware_key, load_profiles, match_profile
from recommender.predict.predictor import Predictor
from recommender.predict.calibrated import load_calibrator
from recommender.catalog.build import load_models
from recommender.catalog.store import Catalog

METRICS = (("total_vram_bytes", "peak_vram_bytes"), ("tpot_ms", "tpot_ms"), ("ttft_ms", "ttft_ms"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rows", type=Path)
    ap.add_argument("--catalog", type=Path, default=SHIPPED_CATALOG, help="whose calibration terms predict")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cat = Catalog(args.catalog, None)
    cal = load_calibrator(cat)
    fitted_on = {m.model_id for m in cat.measurements()}  # the rows the catalog's terms were fitted on
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    profiles = load_profiles()
    rows, errs = [], {k: [] for k, _ in METRICS}
    for line in args.rows.read_text().splitlines():
        m = Measurement.model_validate_json(line)
        prof = match_profile(m.hardware_name, profiles)
        if m.status != "ok" or prof is None or m.model_id not in specs:
            continue
        spec, key = specs[m.model_id], hardware_key(prof.name, profiles)
        pred = Predictor(prof, hw_key=key, calibrator=cal).for_measurement(spec, m)
        row = {"model": m.model_id, "quant": m.quant, "context_tokens": m.context_tokens, "batch": m.batch,
               "seen_in_fit": m.model_id in fitted_on}
        for field, measured_field in METRICS:
            p, y = getattr(pred, field), getattr(m, measured_field)
            row[field] = {"predicted": p, "measured": y, "provenance": pred.provenance.get(field),
                          "error_pct": None if p is None or not y else 100 * (p - y) / y}
            if row[field]["error_pct"] is not None:
                errs[field].append(abs(row[field]["error_pct"]))
        rows.append(row)
    summary = {k: {"n": len(v), "median_abs_pct": statistics.median(v), "max_abs_pct": max(v)}
               for k, v in errs.items() if v}
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=2))
        return
    print(f"{'model':<34} {'quant':<7} {'ctx':>6} {'b':>2}  {'VRAM':>8} {'TPOT':>8} {'TTFT':>8}   (signed error %)")
    for r in rows:
        cells = [f"{r[f]['error_pct']:+7.1f}" if r[f]["error_pct"] is not None else f"{'-':>7}" for f, _ in METRICS]
        print(f"{r['model'][:34]:<34} {r['quant']:<7} {r['context_tokens']:>6} {r['batch']:>2}  "
              + "  ".join(cells) + ("   (seen in the fit)" if r["seen_in_fit"] else ""))
    for k, s in summary.items():
        print(f"{k}: n {s['n']}, median |error| {s['median_abs_pct']:.1f} %, max {s['max_abs_pct']:.1f} %")


if __name__ == "__main__":
    main()
