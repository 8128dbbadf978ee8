"""Decode (TPOT) error of the calibrated H200 llama.cpp predictor on held-out rows, per class (a report).

    PYTHONPATH=$PWD .venv/bin/python bench/h200_heldout_errors.py [ROWS.jsonl]   (default bench/results/h200-round4-rows.jsonl)

The linear H200 llama.cpp TPOT term is fitted on the shipped rows (sources/measurements, as `catalog build` fits
it) less the rows of ROWS.jsonl (held out even where they are shipped) by the code on the path, then every held-out
row is predicted. With RECOMMENDER_ROOT=/path/to/another/checkout
the fit and the features are that checkout's (e.g. the previous calibration, for a before/after), the rows the same.
Decode tok/s error = 1 / (1 + TPOT error) - 1 (positive: predicted faster than measured).
"""

from __future__ import annotations

import collections
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, os.environ.get("RECOMMENDER_ROOT", str(HERE.parent)))

from recommender.catalog.build import load_measurements, load_models  # noqa: E402
from recommender.core.paths import SOURCES_DIR  # noqa: E402
from recommender.core.records import Measurement  # noqa: E402
from recommender.hardware.profiles import load_profiles  # noqa: E402
from recommender.predict.calibrated import CALIBRATION_VERSION, _predict_linear  # noqa: E402
from recommender.predict.fit import _fit_linear, group_rows, training_rows  # noqa: E402


def stats(errs: list[float]) -> str:
    a = sorted(abs(e) for e in errs)
    if not a:
        return "n=0"
    return (f"n={len(a):3d} median {100 * statistics.median(a):5.1f} %  P90 {100 * a[int(round(0.9 * (len(a) - 1)))]:5.1f}"
            f" %  signed median {100 * statistics.median(errs):+6.1f} %")


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results" / "h200-round4-rows.jsonl"
    held = [Measurement.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
    held_ids = {m.id for m in held}
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    profiles = load_profiles()
    shipped = [m for m in load_measurements(SOURCES_DIR) if m.id not in held_ids]
    g_train = group_rows(training_rows(shipped, specs, profiles))
    key = next(k for k in g_train if k[0] == "llama.cpp" and "h200" in k[1].lower() and k[2] == "tpot_ms")
    names, coef = _fit_linear(g_train[key])
    g_held = group_rows(training_rows(held, specs, profiles))
    byid = {m.id: m for m in held}
    errs = {}
    for r in g_held.get(key, []):
        p = _predict_linear(names, coef, r.x)
        if p is not None and p > 0:
            errs[r.measurement_id] = 1 / (1 + (p - r.y) / r.y) - 1
    fitted_models = {r.model for r in g_train[key]}
    print(f"{CALIBRATION_VERSION} ({sys.path[0]}): fitted on {len(g_train[key])} shipped rows; {path.name}: "
          f"{len(errs)} of {len(held)} rows predicted")
    print("all held-out rows:", stats(list(errs.values())))

    def classes(m: Measurement) -> list[str]:
        t = m.raw["table"].rsplit("/", 1)[1]
        out = [f"batch {m.batch}" if "batched" in t else f"kv {m.kv_dtype}"]
        if "batched" not in t:
            out.append(f"depth {m.prompt_tokens}")
        out.append(f"model {m.model_id.split('/')[1]}" + ("" if m.model_id in fitted_models else " (unseen)"))
        return out
    groups = collections.defaultdict(list)
    for i, e in errs.items():
        for c in classes(byid[i]):
            groups[c].append(e)
    print(f"\n{'class':40s} {'signed median':>14s} {'median |e|':>11s}  n")
    for k in sorted(groups, key=lambda k: (k.split()[0], int(k.split()[1]) if k.split()[1].isdigit() else 0, k)):
        v = groups[k]
        print(f"{k:40s} {100 * statistics.median(v):+13.1f} % {100 * statistics.median(abs(x) for x in v):10.1f} %  {len(v)}")
    print("\nper row: model quant batch kv depth measured tok/s | error")
    for i in sorted(errs, key=lambda i: (byid[i].model_id, byid[i].kv_dtype, byid[i].batch, byid[i].prompt_tokens)):
        m = byid[i]
        print(f"  {m.model_id.split('/')[1]:16s} {m.quant:7s} B={m.batch:<2d} {m.kv_dtype:5s} d={m.prompt_tokens:<6d} "
              f"{m.decode_tokens_per_s:8.1f} | {100 * errs[i]:+6.1f} %")


if __name__ == "__main__":
    main()
