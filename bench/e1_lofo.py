#!/usr/bin/env python3
"""E1-en leave-one-family-out (LOFO) error, before and after issue 23's estimator change, on the same rows and on the
rows the build now trains on.  Run:  PYTHONPATH=. python bench/e1_lofo.py [--nested]

- before: the E1-en of score-v7 (log10 geometric-mean size, its square, release year, base and reasoning flags; one
  ridge penalty for family and publisher offsets chosen by LOO) with the checkpoint kinds / months the name rules gave
  (no sources/quality/checkpoint_facts.csv).
- v1 (score-v8): the flags for code/math and vision-language checkpoints, year x size, publisher year slopes,
  E1_EN_PENALTIES, with checkpoint_facts.csv.
- v2 (score-v9): v1 + the distillation flag (distilled.csv), the generalized logit E1_EN_TF, a Huber loss (k = 1,
  E1_EN_HUBER_V2, IRLS) and E1_EN_PENALTIES_V2.
- v3 (score-v10, what sources/quality/build_quality.py fits now): v2 + year x size below 10B (year_x_sub10b, a hinge at
  the size terms' centre) and Huber k = 0.7 (E1_EN_HUBER). Adopted once the failed OLL v2 runs stopped being targets
  (build_quality.OLL_FAILED_IFEVAL: glm-4-9b-chat-1m's remote-code row, phi-4's rows): nested 3.87 (before that
  change 4.10, not <= 4).
- same rows: the entities, targets and SDs the "before" estimator trains on; grown: every row the build trains on now.

LOFO = the error on each row when its whole family is left out of the fit (exact, from the hat matrix; the
publisher's other families stay in, as for a new family of a known publisher), RMSE in OLL v2 points.
--nested (needs numpy): every choice v2 made is made again inside every outer fold, by the LOFO over the remaining
families only, from the grid E1_V2_GRID (link lower offset 0 / 5 x ceiling 90 / 100, Huber off / k 0.7 / k 1, publisher
slope penalty 1 / 3, distillation flag in / out, year x size below 10B in / out: 96 candidates); the held-out family
never takes part in choosing them, and it is predicted by a refit (IRLS included) on the other families. The inner LOFO
is the hat-matrix one at the inner fit's Huber weights. Also printed: the build's (v3) LOFO by actual refits (each family left out
and the IRLS rerun), its MAE, and how many LOFO errors the 95 % interval a new family gets covers (1.96 x the LOFO RMSE
in t; for v2 the larger of that and the gap-dependent level, sqrt(a + b x years from the publisher's nearest other
family)), over all rows and over the rows >= 0.6 years from the publisher's other families.
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
E1_V2 = E1_AFTER + ["is_distilled"]
E1_V3 = E1_V2 + ["year_x_sub10b"]
NESTED_GRID = [{"family": f, "publisher": 0.3, "publisher_slope": s} for f in (1.0, 3.0, 10.0, 30.0)
               for s in (0.3, 1.0, 3.0)]
# v2's choices: (lower offset c, ceiling U) of the link logit((y + c) / (U + c)), Huber k (None = least squares),
# publisher year-slope penalty, with / without the distillation flag
E1_V2_GRID = [{"c": c, "U": u, "huber": h, "slope": sl, "distilled": d, "sub": sb}
              for c in (0.0, 5.0) for u in (90.0, 100.0) for h in (None, 0.7, 1.0) for sl in (1.0, 3.0)
              for d in (False, True) for sb in (False, True)]


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


def coverage(est: bq.Estimator, gap: bool = False, far: bool = False) -> float:
    """Share of the LOFO errors inside the 95 % interval a new family of a known publisher gets (t +- 1.96 LOFO RMSE;
    ``gap``: v2's gap-dependent level, Estimator.lofo_sd_t); ``far``: only rows >= 0.6 years from the publisher's
    nearest other family."""
    yi = est.feature_names.index("year")
    inside = []
    for r, e in zip(est.rows, est.lofo_t):
        year = r["features"][yi] + 2024.0
        g = est.publisher_gap(r["org"], year, r["family"])
        if far and (g is None or g < 0.6):
            continue
        sd = est.lofo_sd_t(r["org"], year, r["family"]) if gap else est.lofo_rmse_t
        inside.append(abs(e) <= bq.Z95 * sd)
    return sum(inside) / len(inside)


def line(label: str, est: bq.Estimator, gap: bool = False) -> str:
    mae = sum(abs(e) for e in est.lofo) / len(est.lofo)
    return (f"{label:<44} n={len(est.rows):3d} families={len(est.fams):3d}  LOFO {est.lofo_rmse:5.2f} (MAE {mae:4.2f}; "
            f"95 % interval covers {100 * coverage(est, gap):4.1f} %, {100 * coverage(est, gap, True):4.1f} % >= 0.6 y "
            f"from the publisher's other families)  LOO {est.loo_rmse:5.2f}  leave-publisher-out {est.looo_rmse:5.2f}  "
            "(points)")


# v2 (score-v9) as a grid point; v3 (score-v10, the build since the failed OLL v2 runs left the targets; nested LOFO
# 3.87) adds year x size below 10B (year_x_sub10b) and takes Huber k = 0.7
V2_CFG = {"c": 5.0, "U": 90.0, "huber": 1.0, "slope": 1.0, "distilled": True, "sub": False}
V3_CFG = {**V2_CFG, "huber": 0.7, "sub": True}


def _feats(cfg: dict) -> list[str]:
    return (E1_V2 if cfg["distilled"] else E1_AFTER) + (["year_x_sub10b"] if cfg.get("sub") else [])


def fit_v2(meta, vals, cfg: dict | None = None) -> bq.Estimator:
    """v2 as the build fits it, or with one grid point's choices (cfg, a member of E1_V2_GRID)."""
    if cfg is None:
        tf, huber, pen, feats = bq.E1_EN_TF, bq.E1_EN_HUBER, bq.E1_EN_PENALTIES_V2, E1_V2 + bq.E1_EN_V3_EXTRA
    else:
        tf = bq.Transform(-cfg["c"], f"logit((y+{cfg['c']:g})/{cfg['U'] + cfg['c']:g})", ceiling=cfg["U"])
        huber = cfg["huber"]
        pen = {**bq.E1_EN_PENALTIES_V2, "publisher_slope": cfg["slope"]}
        feats = _feats(cfg)
    est, _ = bq.fit_estimator(meta, "E1-en v2", "en", vals, False, None, None, feats, penalties=pen, tf=tf,
                              huber=huber)
    return est


def _np_rows(est: bq.Estimator, feats: list[str], c: float, u: float):
    import numpy as np

    rows = est.rows
    names = est.feature_names
    fx = np.array([[r["features"][names.index(f)] for f in feats] for r in rows])
    y = np.array([r["y"] for r in rows])
    sd = np.array([r["sd"] for r in rows])
    fam = np.array([r["family"] for r in rows])
    org = np.array([r["org"] for r in rows])
    year = fx[:, feats.index("year")] + 2024.0
    orgs = sorted(set(org))
    oa = (org[:, None] == np.array(orgs)[None, :]).astype(float)
    X = np.hstack([np.ones((len(rows), 1)), fx, oa, oa * (year - bq.PUBLISHER_SLOPE_YEAR0)[:, None]])
    p = np.clip((y + c) / (u + c), 0.01, 0.99)
    t = np.log(p / (1 - p))
    dsd = sd / ((u + c) * p * (1 - p))
    return X, y, t, dsd, fam, len(feats) + 1, len(orgs)


def _np_fit(X, t, dsd, idx, k, no, pen, huber):
    """v2's fit on rows idx (family offsets left out: at penalty 30 they are ~0, and a held-out family has none)."""
    import numpy as np

    Xi, ti = X[idx], t[idx]
    pens = np.r_[np.full(k, 1e-6), np.full(no, pen["publisher"]), np.full(no, pen["publisher_slope"])]
    s, rw = 0.5, np.ones(len(idx))
    for _ in range(13 if huber else 2):
        w0 = 1.0 / (dsd[idx] ** 2 + s**2)
        w = w0 * rw
        A = (Xi * w[:, None]).T @ Xi + np.diag(pens * w0.mean())
        ainv = np.linalg.inv(A)
        b = ainv @ ((Xi * w[:, None]).T @ ti)
        res = ti - Xi @ b
        if huber:
            z = np.abs(res) / np.sqrt(dsd[idx] ** 2 + s**2)
            rw = np.where(z <= huber, 1.0, huber / np.maximum(z, 1e-12))
            s = math.sqrt(float((rw * res**2).sum()) / max(1.0, rw.sum() - k))
        else:
            s = math.sqrt(float((res**2).sum()) / max(1, len(idx) - k))
    return b, ainv, w, res


def _g(t, c, u):
    import numpy as np

    return -c + (u + c) / (1 + np.exp(-t))


def nested_v2(meta, vals) -> tuple[float, float, dict, float, float]:
    """-> (nested LOFO RMSE, its MAE, choices per fold, v2's LOFO by refits, its MAE)."""
    import numpy as np

    est0 = fit_v2(meta, vals, V3_CFG)  # its rows carry every feature of the grid
    cache = {}
    for cfg in E1_V2_GRID:
        feats = _feats(cfg)
        key = (cfg["c"], cfg["U"], cfg["distilled"], cfg["sub"])
        if key not in cache:
            cache[key] = _np_rows(est0, feats, cfg["c"], cfg["U"])
    fam = cache[next(iter(cache))][4]
    y = cache[next(iter(cache))][1]
    n = len(y)

    def pen(cfg):
        return {**bq.E1_EN_PENALTIES_V2, "publisher_slope": cfg["slope"]}

    def inner_lofo(cfg, idx):
        X, y_, t, dsd, fm, k, no = cache[(cfg["c"], cfg["U"], cfg["distilled"], cfg["sub"])]
        b, ainv, w, res = _np_fit(X, t, dsd, idx, k, no, pen(cfg), cfg["huber"])
        err = []
        groups: dict = {}
        for j, i in enumerate(idx):
            groups.setdefault(fm[i], []).append(j)
        Xi = X[idx]
        for gj in groups.values():
            xg = Xi[gj]
            h = xg @ ainv @ (xg * w[gj, None]).T
            e = np.linalg.solve(np.eye(len(gj)) - h, res[gj])
            err.extend(y_[idx][gj] - _g(t[idx][gj] - e, cfg["c"], cfg["U"]))
        return math.sqrt(float(np.mean(np.square(err))))

    def outer(cfg, tr, te):
        X, y_, t, dsd, fm, k, no = cache[(cfg["c"], cfg["U"], cfg["distilled"], cfg["sub"])]
        b, *_ = _np_fit(X, t, dsd, tr, k, no, pen(cfg), cfg["huber"])
        return y_[te] - _g(X[te] @ b, cfg["c"], cfg["U"])

    build_cfg = {"c": -bq.E1_EN_TF.floor, "U": bq.E1_EN_TF.floor + bq.E1_EN_TF.span, "huber": bq.E1_EN_HUBER,
                 "slope": bq.E1_EN_PENALTIES_V2["publisher_slope"], "distilled": True,
                 "sub": "year_x_sub10b" in bq.E1_EN_V3_EXTRA}
    nested_err, refit_err, chosen = np.zeros(n), np.zeros(n), {}
    for f in sorted(set(fam)):
        tr = np.where(fam != f)[0]
        te = np.where(fam == f)[0]
        best = min(E1_V2_GRID, key=lambda cfg: inner_lofo(cfg, tr))
        key = (f"c {best['c']:g} / U {best['U']:g} / huber {best['huber']} / slope {best['slope']:g} / "
               f"distilled {best['distilled']} / sub10b {best['sub']}")
        chosen[key] = chosen.get(key, 0) + 1
        nested_err[te] = outer(best, tr, te)
        refit_err[te] = outer(build_cfg, tr, te)
    r = lambda e: math.sqrt(float(np.mean(e**2)))  # noqa: E731
    return r(nested_err), float(np.mean(np.abs(nested_err))), chosen, r(refit_err), float(np.mean(np.abs(refit_err)))


def nested_lofo(est: bq.Estimator) -> tuple[float, dict]:
    """v1: outer loop over families; inside each, the penalty grid is scored by the LOFO over the other families."""
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


E1_ZH_FEATURES = ["log10_geo", "log10_total_sq", "year", "is_base", "zh_focus"]  # as build_quality's e1z
E1_ZH_LAMS = (0.1, 0.3, 1.0, 3.0, 10.0)  # fit_estimator's grid; the build chooses by LOO


def zh_train_values(meta: bq.Meta) -> dict:
    """E1-zh's training values, as build_model_quality assembles them (a hybrid known only from thinking-mode rows
    enters with its thinking row minus the zh thinking-mode gain)."""
    obs = bq.zh_observations(bq.read_csv(bq.PUBLISHED)) + bq.zh_card_observations(meta)
    link = bq.link_tables(obs)
    shift = bq.zh_thinking_shift(obs)
    vals = bq.zh_entity_values(meta, link)
    out = dict(vals)
    for ent, v in vals.items():
        mid = ent[: -len(" [thinking]")] if ent.endswith(" [thinking]") else None
        if mid and mid not in vals and meta.kind(mid) == "hybrid" and shift["n"]:
            out[mid] = {**v, "value": v["value"] - shift["mean"], "sd": math.sqrt(v["sd"] ** 2 + shift["sd"] ** 2)}
    return out


def _zh_fit(rows: list[dict], lam: float) -> bq.Estimator:
    s = 0.5
    for _ in range(2):  # as fit_estimator without Huber
        est = bq.Estimator("E1-zh", E1_ZH_FEATURES, rows, lam, s, bq.TF["zh"])
        s = est.resid_sd
    return est


def zh_lofo(meta: bq.Meta) -> dict:
    """E1-zh: the build's fit (its LOFO from the hat matrix), the LOFO by refits at the build's penalty, and the
    nested LOFO: inside each outer fold the penalty is chosen again by the build's rule (LOO over the other families'
    rows) and, as a second variant, by the LOFO over the other families; the held-out family is predicted by a refit."""
    est, _ = bq.fit_estimator(meta, "E1-zh", "zh", zh_train_values(meta), True, None, None, E1_ZH_FEATURES)
    rows, tf = est.rows, est.tf
    out = {"n": len(rows), "families": len(est.fams), "lam": est.lam, "plain": est.lofo_rmse,
           "plain_mae": sum(abs(e) for e in est.lofo) / len(rows)}
    errs = {"refit": [0.0] * len(rows), "nested_loo": [0.0] * len(rows), "nested_lofo": [0.0] * len(rows)}
    chosen = {"nested_loo": {}, "nested_lofo": {}}
    for f in sorted(est.fams):
        tr = [r for r in rows if r["family"] != f]
        te = [i for i, r in enumerate(rows) if r["family"] == f]
        fits = {lam: _zh_fit(tr, lam) for lam in E1_ZH_LAMS}
        pick = {"refit": est.lam, "nested_loo": min(E1_ZH_LAMS, key=lambda lam: fits[lam].loo_rmse_t),
                "nested_lofo": min(E1_ZH_LAMS, key=lambda lam: fits[lam].lofo_rmse_t)}
        for k, lam in pick.items():
            if k != "refit":
                chosen[k][lam] = chosen[k].get(lam, 0) + 1
            e_ = fits[lam]
            for i in te:
                r = rows[i]
                t = bq.dot(e_.beta, e_.design(r["features"], r["family"], r["org"]))
                errs[k][i] = r["y"] - tf.g(t)
    for k, v in errs.items():
        out[k] = bq.rms(v)
        out[k + "_mae"] = sum(abs(e) for e in v) / len(v)
    out["chosen"] = chosen
    return out


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
    v2_same = fit_v2(meta, same, V2_CFG)
    v2_grown = fit_v2(meta, vals, V2_CFG)
    v3 = fit_v2(meta, vals)  # the build (score-v10): V3_CFG
    print("E1-en leave-one-family-out (target of issue 23: <= 4 points)")
    print(line("before (score-v7), its rows", before))
    print(line("v1 (score-v8), the same rows", after_same))
    print(line("v1 (score-v8), the rows the build trains on", after_grown))
    print(line("v2 (score-v9), the same rows", v2_same, True))
    print(line("v2 (score-v9), the rows the build trains on", v2_grown, True))
    print(line("v3 (score-v10, the build), its rows", v3, True))
    new = sorted({r["entity"] for r in after_grown.rows} - {r["entity"] for r in before.rows})
    gone = sorted({r["entity"] for r in before.rows} - {r["entity"] for r in after_grown.rows})
    print(f"rows added since 'before': {len(new)}" + (f" ({', '.join(new)})" if new else ""))
    print(f"rows dropped since 'before': {len(gone)}" + (f" ({', '.join(gone)})" if gone else ""))
    if a.nested:
        for label, est in (("same rows", after_same), ("grown", after_grown)):
            r, chosen = nested_lofo(est)
            print(f"v1 nested LOFO ({label}): {r:.2f} points; penalties chosen per fold: {chosen}")
        r, m, chosen, rr, rm = nested_v2(meta, vals)
        print(f"v3 (the build) LOFO by refits (IRLS rerun without each family): {rr:.2f} points (MAE {rm:.2f})")
        print(f"nested LOFO (every v2 / v3 choice re-made inside each outer fold, {len(E1_V2_GRID)} "
              "candidates): "
              f"{r:.2f} points (MAE {m:.2f}); chosen per fold: {chosen}")
        z = zh_lofo(meta)
        print(f"E1-zh (n={z['n']}, {z['families']} families, penalty {z['lam']:g} chosen by LOO): LOFO {z['plain']:.2f} "
              f"(MAE {z['plain_mae']:.2f}); by refits {z['refit']:.2f} (MAE {z['refit_mae']:.2f}); nested, penalty "
              f"re-chosen by LOO inside each fold (the build's rule) {z['nested_loo']:.2f} (MAE {z['nested_loo_mae']:.2f}), "
              f"by the inner LOFO {z['nested_lofo']:.2f} (MAE {z['nested_lofo_mae']:.2f}); chosen: {z['chosen']} (points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
