"""Decode (TPOT) error of the calibrated H200 llama.cpp predictor on round 3's rows (bench/h200_round3.sh), a report.

    PYTHONPATH=$PWD .venv/bin/python bench/h200_round3_errors.py

before: the linear term fitted on the shipped H200 llama.cpp rows only (every model; round 3's rows left out), then
        each round-3 row predicted -- what the shipped calibration says about them (fully held out);
after:  leave-one-model-out over shipped + round-3 rows, on the round-3 rows (each model's rows predicted by a fit on
        the other models' rows, round 3's included).
Decode tok/s error = 1 / (1 + TPOT error) - 1 (positive: predicted faster than measured).
"""

from __future__ import annotations

import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from h200_csv_rows import ROUND3, rows as table_rows  # noqa: E402
from recommender.catalog.build import load_measurements, load_models  # noqa: E402
from recommender.core.paths import SOURCES_DIR  # noqa: E402
from recommender.core.records import Measurement  # noqa: E402
from recommender.hardware.profiles import load_profiles  # noqa: E402
from recommender.predict.calibrated import _predict_linear  # noqa: E402
from recommender.predict.fit import _fit_linear, group_rows, lomo_errors, training_rows  # noqa: E402

NEW_TABLES = {f"sources/measurements/{t}" for t in ROUND3}


def stats(errs: list[float]) -> str:
    a = sorted(abs(e) for e in errs)
    if not a:
        return "n=0"
    return (f"n={len(a):3d} median {100 * statistics.median(a):5.1f} %  P90 {100 * a[int(round(0.9 * (len(a) - 1)))]:5.1f}"
            f" %  signed median {100 * statistics.median(errs):+6.1f} %")


def main() -> None:
    new = [Measurement.model_validate(r) for r in table_rows() if r["raw"]["table"] in NEW_TABLES]
    new_ids = {m.id for m in new}
    old = [m for m in load_measurements(SOURCES_DIR) if m.id not in new_ids]
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    profiles = load_profiles()
    missing = sorted({m.model_id for m in new if m.model_id not in specs})
    if missing:
        print("not in the catalog (rows skipped):", missing)
    g_old = group_rows(training_rows(old, specs, profiles))
    g_all = group_rows(training_rows(old + new, specs, profiles))
    key = next(k for k in g_all if k[0] == "llama.cpp" and "h200" in k[1].lower() and k[2] == "tpot_ms")
    train = g_old[key]
    names, coef = _fit_linear(train)
    new_rows = [r for r in g_all[key] if r.measurement_id in new_ids]
    before = {}
    for r in new_rows:
        p = _predict_linear(names, coef, r.x)
        before[r.measurement_id] = 1 / (1 + (p - r.y) / r.y) - 1
    after = {r.measurement_id: 1 / (1 + e) - 1 for r, e in lomo_errors(g_all[key]) if r.measurement_id in new_ids}
    after_old = [1 / (1 + e) - 1 for r, e in lomo_errors(g_all[key]) if r.measurement_id not in new_ids]
    lomo_old = [1 / (1 + e) - 1 for r, e in lomo_errors(train)]
    byid = {m.id: m for m in new}
    print(f"group {key}: shipped rows {len(train)}, round-3 rows {len(new_rows)} (of {len(new)})")
    print("shipped rows, LOMO without round 3:", stats(lomo_old))
    print("shipped rows, LOMO with round 3:   ", stats(after_old))
    print("round-3 rows, before (fit on shipped rows):", stats(list(before.values())))
    print("round-3 rows, after (LOMO incl. round 3):  ", stats(list(after.values())))

    def cls(m: Measurement) -> str:
        t = m.raw["table"].rsplit("/", 1)[1]
        if "batched" in t:
            return f"batched B={m.batch:<2d}"
        if "arch" in t:
            return f"arch {m.model_id.split('/')[1]}"
        return f"kv {m.kv_dtype} d={m.prompt_tokens}"
    groups = collections.defaultdict(list)
    for i in before:
        groups[cls(byid[i])].append(i)
    print(f"\n{'class':44s} {'before signed median':>22s} {'after signed median':>22s}")
    for k in sorted(groups):
        b = [before[i] for i in groups[k]]
        a = [after[i] for i in groups[k] if i in after]
        print(f"{k:44s} {100 * statistics.median(b):+20.1f} % {100 * statistics.median(a) if a else float('nan'):+20.1f} %"
              f"   (n={len(b)})")
    print("\nper row: model quant batch kv depth measured tok/s | before | after")
    for i in sorted(before, key=lambda i: (cls(byid[i]), byid[i].model_id)):
        m = byid[i]
        print(f"  {m.model_id.split('/')[1]:36s} {m.quant:7s} B={m.batch:<2d} {m.kv_dtype:5s} d={m.prompt_tokens:<6d} "
              f"{m.decode_tokens_per_s:8.1f} | {100 * before[i]:+6.1f} % | {100 * after.get(i, float('nan')):+6.1f} %")


if __name__ == "__main__":
    main()
