"""How far the analytical estimates are from the catalog's measured rows (a report, not a test).

For every ok measured row whose hardware has a shipped profile, the estimate of the same configuration is compared
with what was measured: peak GPU memory, TPOT and TTFT, grouped by hardware and engine. This is the gap the
calibration issue closes.

    .venv/bin/python bench/estimate_vs_measured.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from recommender.core.paths import SOURCES_DIR
from recommender.hardware.profiles import load_profiles, match_profile
from recommender.predict.predictor import Predictor
from recommender.catalog.build import load_measurements, load_models


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    profiles = load_profiles()
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for m in load_measurements(SOURCES_DIR):
        prof = match_profile(m.hardware_name, profiles)
        spec = specs.get(m.model_id)
        if m.status != "ok" or prof is None or spec is None:
            continue
        if spec.num_swa_layers and m.raw.get("engine", {}).get("details", {}).get("swa_full"):
            continue  # full-size sliding-window caches: not the configuration the estimate models
        e = Predictor(prof).for_measurement(spec, m)  # analytical: no calibration, not this row
        g = groups.setdefault((prof.name, m.engine), {"vram": [], "tpot": [], "ttft": []})
        for key, est, meas in (("vram", e.total_vram_bytes, m.peak_vram_bytes), ("tpot", e.tpot_ms, m.tpot_ms),
                               ("ttft", e.ttft_ms, m.ttft_ms)):
            if est is not None and meas:
                g[key].append((est - meas) / meas)
    out = []
    for (hw, engine), g in sorted(groups.items()):
        row = {"hardware": hw, "engine": engine}
        for key, errs in g.items():
            if errs:
                row[key] = {"n": len(errs), "median_abs_pct": 100 * statistics.median(abs(x) for x in errs),
                            "p90_abs_pct": 100 * sorted(abs(x) for x in errs)[int(0.9 * (len(errs) - 1))],
                            "median_signed_pct": 100 * statistics.median(errs)}
        out.append(row)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print("estimate vs measured (signed: + = estimate too high), per hardware and engine")
    for r in out:
        parts = []
        for key in ("vram", "tpot", "ttft"):
            if key in r:
                v = r[key]
                parts.append(f"{key} median |err| {v['median_abs_pct']:.1f} % (p90 {v['p90_abs_pct']:.1f} %, "
                             f"signed {v['median_signed_pct']:+.1f} %, n={v['n']})")
        print(f"{r['hardware']} · {r['engine']}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
