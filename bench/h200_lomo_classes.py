"""Leave-one-model-out decode (TPOT) error of the calibrated H200 llama.cpp rows, per class (a report).

    PYTHONPATH=$PWD .venv/bin/python bench/h200_lomo_classes.py

Every model's shipped H200 llama.cpp rows are predicted by the linear term fitted on the other models' rows (as
bench/calibration_error.py), then the errors are grouped by KV dtype, batch, context depth (prompt tokens before the
timed decode), model size (total parameters) and kernel class. With RECOMMENDER_ROOT=/path/to/another/checkout the
rows, features and fit are that checkout's (the previous calibration, for a before/after).
Decode tok/s error = 1 / (1 + TPOT error) - 1 (positive: predicted faster than measured).
"""

from __future__ import annotations

import collections
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.environ.get("RECOMMENDER_ROOT", str(Path(__file__).resolve().parent.parent)))

from recommender.catalog.build import load_measurements, load_models  # noqa: E402
from recommender.core.paths import SOURCES_DIR  # noqa: E402
from recommender.hardware.profiles import load_profiles  # noqa: E402
from recommender.predict.calibrated import CALIBRATION_VERSION, kernel_class  # noqa: E402
from recommender.predict.fit import group_rows, lomo_errors, training_rows  # noqa: E402

SIZES = ((2e9, "< 2B"), (5e9, "2-5B"), (10e9, "5-10B"), (20e9, "10-20B"), (1e15, ">= 20B"))


def main() -> None:
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    ms = load_measurements(SOURCES_DIR)
    byid = {m.id: m for m in ms}
    g = group_rows(training_rows(ms, specs, load_profiles()))
    key = next(k for k in g if k[0] == "llama.cpp" and "h200" in k[1].lower() and k[2] == "tpot_ms")
    errs = [(r, 1 / (1 + e) - 1) for r, e in lomo_errors(g[key])]
    a = sorted(abs(e) for _, e in errs)
    print(f"{CALIBRATION_VERSION} ({sys.path[0]}): {len(a)} rows of {len({r.model for r, _ in errs})} models; median "
          f"{100 * statistics.median(a):.1f} %, P90 {100 * a[int(round(0.9 * (len(a) - 1)))]:.1f} %, signed median "
          f"{100 * statistics.median(e for _, e in errs):+.1f} %")
    groups = collections.defaultdict(list)
    for r, e in errs:
        m, spec = byid[r.measurement_id], specs[r.model]
        size = next(label for lim, label in SIZES if spec.params_total < lim)
        for c in (f"kv {m.kv_dtype}", f"batch {m.batch}", f"depth {m.prompt_tokens}", f"size {size}",
                  f"kernel {kernel_class(m.quant)}", "moe" if spec.is_moe else "dense"):
            groups[c].append(e)
    print(f"{'class':22s} {'n':>4s} {'signed median':>14s} {'median |e|':>11s} {'P90 |e|':>8s}")
    for k in sorted(groups):
        v = groups[k]
        s = sorted(abs(x) for x in v)
        print(f"{k:22s} {len(v):4d} {100 * statistics.median(v):+13.1f} % {100 * statistics.median(s):10.1f} % "
              f"{100 * s[int(round(0.9 * (len(s) - 1)))]:7.1f} %")


if __name__ == "__main__":
    main()
