#!/usr/bin/env python3
"""E1-en leave-one-family-out (LOFO) error, before and after issue 23's estimator change, on the same rows and on the
rows the build now trains on.  Run:  PYTHONPATH=. python bench/e1_lofo.py [--nested]

- before: the E1-en of score-v7 (log10 geometric-mean size, its square, release year, base and reasoning flags; one
  ridge penalty for family and publisher offsets chosen by LOO) with the checkpoint kinds / months the name rules gave
  (no sources/quality/checkpoint_facts.csv).
- after: sources/quality/build_quality.py's E1-en (the flags for code/math and vision-language checkpoints, year x
  size, publisher year slopes, E1_EN_PENALTIES) with checkpoint_facts.csv.
- same rows: the entities, targets and SDs the "before" estimator trains on; grown: every row the build trains on now.

LOFO = the error on each row when its whole family is left out of the fit (exact, from the hat matrix; the
publisher's other families stay in, as for a new family of a known publisher), RMSE in OLL v2 points.
--nested (needs numpy): the penalties are chosen again inside every outer fold, by the LOFO over the remaining
families only, from a grid; the held-out family never takes part in choosing them.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sources" / "quality"))
import build_quality as bq  # noqa: E402

E1_BEFORE = ["log10_geo", "log10_total_sq", "year", "is_base", "is_reasoning"]
E1_AFTER = E1_BEFORE + ["is_specialist", "is_vl", "year_x_size"]
NESTED_GRID = [{"family": f, "publisher": 0.3, "publisher_slope": s} for f in (1.0, 3.0, 10.0, 30.0)
               for s in (0.3, 1.0, 3.0)]


def en_values(meta: bq.Meta) -> dict:
    lb_rows = bq.read_csv(bq.INPUTS / "leaderboards.csv")
    oll, diag = bq.select_oll(meta, lb_rows)
    sigma_oll = bq.rms([a - b for _, a, b, _ in diag["dup_pairs"]]) / math.sqrt(2)
    sigma_tmpl = bq.rms([t - f for _, t, f in diag["template_pairs"]])
    backbone = {m: c["value"] for m, c in oll.items()
                if meta.kind(m) != "reasoning" and not any("chat template used" in f for f in c["flags"])}
    sources, _ = bq.load_bridge_sources(meta, lb_rows)
    br = bq.run_bridges(meta, backbone, sigma_oll, sources)
    return bq.en_entity_values(meta, oll, backbone, br["bridged"], sigma_oll, sigma_tmpl)


def line(label: str, est: bq.Estimator) -> str:
    return (f"{label:<44} n={len(est.rows):3d} families={len(est.fams):3d}  LOFO {est.lofo_rmse:5.2f}  "
            f"LOO {est.loo_rmse:5.2f}  leave-publisher-out {est.looo_rmse:5.2f}  (points)")


def nested_lofo(est: bq.Estimator) -> tuple[float, dict]:
    """Outer loop over families; inside each, the penalty grid is scored by the LOFO over the other families."""
    import numpy as np

    tf = est.tf
    rows = est.rows
    X = np.array([est.design(r["features"], r["family"], r["org"]) for r in rows])
    y = np.array([r["y"] for r in rows])
    t = np.array([tf.f(v) for v in y])
    dsd = np.array([r["sd"] * tf.dfdy(r["y"]) for r in rows])
    k = 1 + len(est.feature_names)
    nf, no = len(est.fams), len(est.orgs)
    fam = [r["family"] for r in rows]

    def fit(idx, p):
        s = 0.5
        for _ in range(2):
            w = 1.0 / (dsd[idx] ** 2 + s**2)
            wm = w.mean()
            pen = np.r_[np.full(k, 1e-6), np.full(nf, p["family"] * wm), np.full(no, p["publisher"] * wm),
                        np.full(no, p["publisher_slope"] * wm)]
            Xi = X[idx]
            ainv = np.linalg.inv((Xi * w[:, None]).T @ Xi + np.diag(pen))
            b = ainv @ ((Xi * w[:, None]).T @ t[idx])
            res = t[idx] - Xi @ b
            s = math.sqrt(float((res**2).sum()) / max(1, len(idx) - k))
        return b, ainv, w, res

    def inner(idx, p):
        b, ainv, w, res = fit(idx, p)
        groups: dict = {}
        for j, i in enumerate(idx):
            groups.setdefault(fam[i], []).append(j)
        err = []
        for gj in groups.values():
            xg = X[idx][gj]
            h = xg @ ainv @ (xg * w[gj, None]).T
            e = np.linalg.solve(np.eye(len(gj)) - h, res[gj])
            err.extend(y[idx][gj] - np.array([tf.g(v) for v in (t[idx][gj] - e)]))
        return math.sqrt(float(np.mean(np.square(err))))

    out = np.zeros(len(rows))
    chosen: dict = {}
    for f in sorted(set(fam)):
        tr = [i for i in range(len(rows)) if fam[i] != f]
        te = [i for i in range(len(rows)) if fam[i] == f]
        best = min(NESTED_GRID, key=lambda p: inner(tr, p))
        key = f"family {best['family']:g} / slope {best['publisher_slope']:g}"
        chosen[key] = chosen.get(key, 0) + 1
        b, *_ = fit(tr, best)
        out[te] = y[te] - np.array([tf.g(v) for v in X[te] @ b])
    return math.sqrt(float(np.mean(out**2))), chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nested", action="store_true", help="also the nested LOFO (penalties re-chosen per fold; numpy)")
    a = ap.parse_args(argv)

    meta_before = bq.Meta()
    meta_before.facts = {}  # the kinds / months the name rules gave before checkpoint_facts.csv
    vals_before = en_values(meta_before)
    before, _ = bq.fit_estimator(meta_before, "E1-en before", "en", vals_before, False, None, None, E1_BEFORE)

    meta = bq.Meta()
    vals = en_values(meta)
    same = {e: vals_before[e] for e in (r["entity"] for r in before.rows)}  # same entities, targets and SDs
    after_same, _ = bq.fit_estimator(meta, "E1-en after", "en", same, False, None, None, E1_AFTER,
                                     penalties=bq.E1_EN_PENALTIES)
    after_grown, _ = bq.fit_estimator(meta, "E1-en after", "en", vals, False, None, None, E1_AFTER,
                                      penalties=bq.E1_EN_PENALTIES)
    print("E1-en leave-one-family-out (target of issue 23: <= 4 points)")
    print(line("before (score-v7), its rows", before))
    print(line("after, the same rows", after_same))
    print(line("after, the rows the build trains on now", after_grown))
    new = sorted({r["entity"] for r in after_grown.rows} - {r["entity"] for r in before.rows})
    gone = sorted({r["entity"] for r in before.rows} - {r["entity"] for r in after_grown.rows})
    print(f"rows added since 'before': {len(new)}" + (f" ({', '.join(new)})" if new else ""))
    print(f"rows dropped since 'before': {len(gone)}" + (f" ({', '.join(gone)})" if gone else ""))
    if a.nested:
        for label, est in (("same rows", after_same), ("grown", after_grown)):
            r, chosen = nested_lofo(est)
            print(f"nested LOFO ({label}): {r:.2f} points; penalties chosen per fold: {chosen}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
