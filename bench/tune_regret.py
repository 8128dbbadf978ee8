"""`recommender tune` (predicted mode) against the exhaustive grid: regret and trials-to-optimum over scenarios.

Each scenario is a tune query (GPU profile, memory budget, latency limit, workload, weights). The grid (every model x
quant x engine x context x batch x KV dtype x GPU-layer share) is evaluated analytically; TPE then runs with a
budget of 10 % of the grid's size in trials and stops once it reaches the grid optimum. Reported per scenario and
seed: grid size, feasible configurations, trials (and distinct configurations) until the optimum, regret, and
whether the optimum came within 10 % of the grid's size. Target (issue 5): >= 9 of 10 scenarios.

    python bench/tune_regret.py [--seeds 0 1 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (name, GPU profile, vram, latency limit, latency metric, workload, weights, normalization, missing, models)
# models: None = every catalog model; the last two restrict the grid to a few models (small grids: 10 % of the grid
# is then only a few dozen trials).
SCENARIOS = [
    ("4090 chat", "RTX 4090", "24", "800ms", "ttft", "chat", None, "minmax", "worst", None),
    ("3090 chat-zh, zh-heavy", "RTX 3090", "24", "1s", "ttft", "chat-zh", "zh=0.5,latency=0.2,vram=0.1,ppl=0.2",
     "minmax", "worst", None),
    ("L4 16 GiB code", "L4", "16", "1500ms", "ttft", "code", None, "minmax", "worst", None),
    ("A100-80 serve e2e", "A100 80GB SXM4", "80", "20s", "e2e", "serve", None, "minmax", "worst", None),
    ("H100 long-doc", "H100 SXM5", "80", "5s", "ttft", "long-doc", None, "minmax", "worst", None),
    ("4060 Ti 16 GiB tpot", "RTX 4060 Ti 16GB", "16", "60ms", "tpot", "chat", None, "minmax", "worst", None),
    ("3060 12 GiB latency-heavy", "RTX 3060 12GB", "12", "80ms", "tpot", "chat", "latency=0.5", "minmax", "worst", None),
    ("H200 chat, vram-heavy", "H200", "141", "800ms", "ttft", "chat", "vram=0.6", "minmax", "worst", None),
    ("L40S chat z-score", "L40S", "48", "800ms", "ttft", "chat", None, "zscore", "worst", None),
    ("A10 chat-zh mean-fill", "A10", "24", "600ms", "ttft", "chat-zh", None, "minmax", "mean", None),
    ("5090 quality-heavy", "RTX 5090", "32", "1s", "ttft", "chat", "zh=0.5,ppl=0.3,latency=0.1,vram=0.1",
     "minmax", "worst", None),
    ("4090 8 GiB budget", "RTX 4090", "8", "500ms", "ttft", "chat", None, "minmax", "worst", None),
    ("4090 Qwen2.5 family", "RTX 4090", "24", "800ms", "ttft", "chat", None, "minmax", "worst",
     ["Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B", "Qwen/Qwen2.5-32B"]),
    ("L4 three 7-8B models", "L4", "24", "1s", "ttft", "chat-zh", None, "minmax", "worst",
     ["Qwen/Qwen2.5-7B", "meta-llama/Llama-3.1-8B", "internlm/internlm2_5-7b-chat"]),
]


def run(seeds: list[int], fraction: float) -> dict:
    from recommender.cli.common import open_catalog
    from recommender.cli.query_opts import LatencyMetricOpt, MissingOpt, QueryOptions, build_query
    from recommender.search.tune import build_space, run_tune

    catalog = open_catalog()
    rows = []
    for name, gpu, vram, lat, metric, wl, weights, norm, missing, models in SCENARIOS:
        q, _ = build_query(QueryOptions(vram, lat, LatencyMetricOpt(metric), wl, None, None, None, None, weights,
                                        MissingOpt(missing), gpu, models, None, None, 10, 1, None), norm)
        for seed in seeds:
            t0 = time.perf_counter()
            size = len(build_space(catalog, q).configs())  # the trial budget is 10 % of the grid
            budget = max(1, int(fraction * size))
            r = run_tune(catalog, q, trials=budget, seed=seed, stop_at_optimum=True)
            rows.append({"scenario": name, "gpu": gpu, "vram": vram, "limit": f"{metric} <= {lat}", "workload": wl,
                         "weights": weights or "default", "normalization": norm, "missing": missing, "models": models or "all", "seed": seed,
                         "grid_size": r.grid.size, "grid_feasible": r.grid.feasible,
                         "optimum_score": r.grid.optimum_score, "trial_budget": budget, "trials_run": r.n_trials,
                         "trials_to_optimum": r.trials_to_optimum, "distinct_to_optimum": r.distinct_to_optimum,
                         "trials_to_optimum_pct_of_grid": (None if r.trials_to_optimum is None
                                                           else round(100 * r.trials_to_optimum / r.grid.size, 2)),
                         "regret": r.regret, "reached_within_budget": r.trials_to_optimum is not None,
                         "optimum": r.grid.optimum[0].model_dump() if r.grid.optimum else None,
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(_line(rows[-1]), file=sys.stderr, flush=True)
    per_seed = {s: sum(1 for r in rows if r["seed"] == s and r["reached_within_budget"]) for s in seeds}
    pct = [r["trials_to_optimum_pct_of_grid"] for r in rows if r["trials_to_optimum_pct_of_grid"] is not None]
    return {"scenarios": len(SCENARIOS), "seeds": seeds, "budget_fraction": fraction, "rows": rows,
            "reached_per_seed": per_seed,
            "median_trials_to_optimum_pct": statistics.median(pct) if pct else None,
            "max_regret": max((r["regret"] for r in rows if r["regret"] is not None), default=None)}


def _line(r: dict) -> str:
    reach = (f"optimum after {r['trials_to_optimum']} trials ({r['distinct_to_optimum']} distinct, "
             f"{r['trials_to_optimum_pct_of_grid']} % of grid)" if r["reached_within_budget"]
             else f"NOT reached in {r['trials_run']} trials, regret {r['regret']}")
    return (f"{r['scenario']:<28} seed {r['seed']}: grid {r['grid_size']:>5} ({r['grid_feasible']:>5} feasible), "
            f"budget {r['trial_budget']:>4}: {reach} [{r['seconds']} s]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--fraction", type=float, default=0.10, help="trial budget as a fraction of the grid size")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = run(a.seeds, a.fraction)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    for r in res["rows"]:
        print(_line(r))
    n = res["scenarios"]
    for s, k in res["reached_per_seed"].items():
        print(f"seed {s}: optimum reached within {int(100 * a.fraction)} % of the grid on {k} of {n} scenarios "
              f"(target >= 9 of 10)")
    print(f"median trials-to-optimum: {res['median_trials_to_optimum_pct']} % of the grid; max regret "
          f"{res['max_regret']}")


if __name__ == "__main__":
    main()
