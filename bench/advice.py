"""Is the top pick what a seasoned local-LLM user would run on that machine? (issue 10)

For each scenario (a machine x a workload, on the shipped catalog) this prints: the top pick, its memory share of the
budget, its effective task accuracy against the best feasible one (regret, points), whether it is an instruct or a
base checkpoint, and whether it meets the limits (budget, the user's latency limit, and the workload's own: TTFT within
the workload's default limit, TPOT at reading speed or faster; goodput > 0 for serve).

Effective accuracy of a configuration = task accuracy A of the workload's tasks (en / zh / both, docs/scoring.md) minus
the accuracy points its quantization costs (sources/quality/quant_quality.csv, size-scaled). "Best feasible" is the
best effective accuracy among the candidates that fit the same limits (chat-tuned checkpoints, as ranked).

Targets: regret <= 3 points in >= 90 % of the scenarios; whenever a feasible model that needs more memory than the top
pick is more accurate by > 3 points, the top pick uses >= half the memory.

    .venv/bin/python bench/advice.py [--normalization value|minmax|zscore] [--markdown]
    .venv/bin/python bench/advice.py --questions [--markdown]   # issue 24: the nine questions, 20 names
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.catalog.store import Catalog  # noqa: E402
from recommender.cli.query_opts import LatencyMetricOpt, MissingOpt, QueryOptions, build_query  # noqa: E402
from recommender.core.errors import UserError  # noqa: E402
from recommender.core.paths import base_catalog_path  # noqa: E402
from recommender.hardware.profiles import planning_hardware  # noqa: E402
from recommender.rank.candidates import enumerate_candidates  # noqa: E402
from recommender.score.order import over_limit_alternative, rank  # noqa: E402
from recommender.score.weighted import READING_TPOT_MS  # noqa: E402

REGRET_TARGET_POINTS = 3.0
REGRET_SHARE_TARGET = 0.90
MEMORY_SHARE_TARGET = 0.5

# (label, --gpu, --vram or None, workload, --max-latency or None, --latency-metric)
SCENARIOS = [
    ("8 GB (RTX 4060 Ti, 8 GB budget) chat", "RTX 4060 Ti 16GB", "8", "chat", None, "ttft"),
    ("12 GB RTX 3060 chat", "RTX 3060 12GB", None, "chat", None, "ttft"),
    ("12 GB RTX 4070 chat-zh", "RTX 4070", None, "chat-zh", None, "ttft"),
    ("16 GB RTX 4060 Ti chat", "RTX 4060 Ti 16GB", None, "chat", None, "ttft"),
    ("16 GB RTX 4080 code", "RTX 4080", None, "code", None, "ttft"),
    ("24 GB RTX 4090 chat, TTFT <= 800 ms", "RTX 4090", "24", "chat", "800ms", "ttft"),
    ("24 GB RTX 4090 chat-zh", "RTX 4090", None, "chat-zh", None, "ttft"),
    ("24 GB RTX 4090 code", "RTX 4090", None, "code", None, "ttft"),
    ("24 GB RTX 4090 long-doc", "RTX 4090", None, "long-doc", None, "ttft"),
    ("24 GB RTX 3090 serve, TPOT <= 60 ms", "RTX 3090", None, "serve", "60ms", "tpot"),
    ("24 GB Mac M2 chat", "M2 10-core GPU 24GB", None, "chat", None, "ttft"),
    ("32 GB Mac M1 Pro chat", "M1 Pro 16-core GPU 32GB", None, "chat", None, "ttft"),
    ("32 GB Mac M2 Pro code", "M2 Pro 19-core GPU 32GB", None, "code", None, "ttft"),
    ("32 GB RTX 5090 chat", "RTX 5090", None, "chat", None, "ttft"),
    ("48 GB L40S chat", "L40S", None, "chat", None, "ttft"),
    ("48 GB L40S serve", "L40S", None, "serve", None, "ttft"),
    ("80 GB A100 chat", "A100 80GB SXM4", None, "chat", None, "ttft"),
    ("80 GB H100 long-doc", "H100 SXM5", None, "long-doc", None, "ttft"),
    ("80 GB H100 serve", "H100 SXM5", None, "serve", None, "ttft"),
    ("CPU, 16 GB RAM budget, chat", "cpu", "16", "chat", None, "tpot"),
]


def effective(c) -> float:
    a = c.figures["task_accuracy"].value
    d = c.figures["quant_cost_points"].value or 0.0
    return (a if a is not None else 0.0) - d


def scenario(catalog, label, gpu, vram, workload, max_latency, metric, normalization):
    opts = QueryOptions(vram=vram, max_latency=max_latency, latency_metric=LatencyMetricOpt(metric),
                        workload=workload, context=None, batch=None, prompt_tokens=None, output_tokens=None,
                        weights=None, missing=MissingOpt.worst, gpu=gpu, model=None, engine=None, quant=None,
                        top=10, per_model=1, catalog_path=None)
    q, _ = build_query(opts, normalization)
    cands = enumerate_candidates(catalog, q)
    ranked, _, feasible = rank(cands, q)
    if not ranked:
        return {"label": label, "top": None}
    top = ranked[0]
    wl = q.workload

    def meets_limits(c) -> bool:
        """The budget, the user's latency limit and the workload's own (TTFT within its default limit, TPOT at
        reading speed or faster; goodput > 0 for serve)."""
        ok = [c.total_vram_bytes <= q.vram_bytes]
        if q.max_latency_ms is not None:
            ok.append(c.latency_ms is not None and c.latency_ms <= q.max_latency_ms)
        if wl.rank_by == "goodput":
            ok.append(bool(c.goodput_per_s))
        else:
            ok.append(c.ttft_ms is None or c.ttft_ms <= wl.ttft_limit_ms)
            ok.append(c.tpot_ms is None or c.tpot_ms <= READING_TPOT_MS)
        return all(ok)

    # the alternatives are held to the same limits as the top pick: a dense 32B at 4 tok/s on a 100 GB/s Mac is
    # not a configuration a user would take instead (before this, "best feasible" had only the --vram/--max-latency
    # limits while the top pick was also held to the workload's own)
    usable = [c for c in feasible if meets_limits(c)] or feasible
    best = max(usable, key=effective)
    regret = effective(best) - effective(top)
    bigger_better = any(c.total_vram_bytes > top.total_vram_bytes and effective(c) > effective(top) + 3
                        for c in usable)
    share = top.total_vram_bytes / q.vram_bytes
    limits = [meets_limits(top)]
    unknown = top.ttft_ms is None or top.tpot_ms is None
    return {"label": label, "top": f"{top.model} {top.quant} {top.engine} b{top.batch} {top.context_tokens // 1024}K",
            "kind": catalog.models()[top.model].checkpoint_kind, "share": share,
            "acc": effective(top), "best": f"{best.model} {best.quant}", "best_acc": effective(best),
            "regret": regret, "bigger_better": bigger_better,
            "memory_ok": (not bigger_better) or share >= MEMORY_SHARE_TARGET,
            "limits": all(limits), "unknown_latency": unknown, "feasible": len(feasible),
            "goodput": top.goodput_per_s}


# Issue 24's nine questions: (id, --gpu, --vram, --workload, --max-latency, what an expert would sign)
QUESTIONS = [
    ("A", "RTX 4090", "24", "chat", "800ms", "a >= 30B-class model at 4-5 bits, fits, TTFT <= 800 ms"),
    ("B", "RTX 4060", "8", "chat", "800ms", "a 7-8B at 4-6 bits fits 8 GB"),
    ("C", "RTX 3060 12GB", None, "chat", "800ms", "an offload plan of a >= 30B MoE at >= 4 bits; no IQ2 in the top 3"),
    ("D", "Apple M2 Max 30-core GPU 32GB", None, "chat", None, "fits the Metal working set (2/3 of 32 GiB)"),
    ("E", "A100 80GB SXM4", None, "chat", "800ms", ">= 30 tok/s or vLLM / SGLang"),
    ("E'", "H100 SXM5", None, "chat", "800ms", ">= 30 tok/s or vLLM / SGLang"),
    ("F", "cpu", "16", "chat", "5s", "an answer with its speed"),
    ("G", "RTX 4090", "24", "chat-zh", "800ms", "a model strong in Chinese"),
    ("H", "RTX 4090", "24", "long-doc", None, "32K context, TTFT within the long-doc limit"),
    ("I", "L40S", None, "serve", None, ">= 8K per request; #1 has the best goodput of its quality"),
]
TYPED_NAMES = [("3090", None), ("RTX 3060 12GB", None), ("A100 80GB SXM", None), ("A100", "80"), ("M2 Max 32GB", None),
               ("M4 Pro 24GB", None), ("V100 32GB", None), ("Radeon RX 7900 XTX", None), ("Arc B580", None),
               ("RTX PRO 6000", None), ("DGX Spark", None), ("Strix Halo 128GB", None), ("MI300X", None),
               ("L40S", None), ("T4", None), ("Jetson Orin", None), ("RTX 5060 Ti 16GB", None), ("H20", None),
               ("4070 Super", None), ("Mac Studio M3 Ultra 512GB", None)]


def question(catalog, qid, gpu, vram, workload, max_latency):
    opts = QueryOptions(vram=vram, max_latency=max_latency, latency_metric=LatencyMetricOpt("ttft"),
                        workload=workload, context=None, batch=None, prompt_tokens=None, output_tokens=None,
                        weights=None, missing=MissingOpt.worst, gpu=gpu, model=None, engine=None, quant=None,
                        top=10, per_model=1, catalog_path=None)
    q, notes = build_query(opts, "value")
    cands = enumerate_candidates(catalog, q)
    ranked, _, feasible = rank(cands, q)
    alt = over_limit_alternative(cands, ranked, q)  # shown beside the answer, labelled (recommend's notes)
    out = {"id": qid, "budget_gib": q.vram_bytes / 1024**3, "n": len(feasible), "top3": ranked[:3], "alt": alt}
    if not ranked:
        return out
    top = ranked[0]
    checks = {"fits": top.total_vram_bytes <= q.vram_bytes}
    tok_s = 1000.0 / top.tpot_ms if top.tpot_ms else None
    if q.max_latency_ms is not None and workload != "serve":
        checks["TTFT within the limit"] = top.ttft_ms is not None and top.ttft_ms <= q.max_latency_ms
    if qid == "H":
        checks["32K context, TTFT <= 60 s"] = top.context_tokens >= 32768 and (top.ttft_ms or 1e18) <= 60000
    if qid == "C":
        # offered: ranked within the limits, or shown beside the answer as the labelled over-the-limit alternative
        # (TTFT over the limit by X ms, decode Y tok/s: score.order.over_limit_alternative)
        checks["offload >=30B MoE >=4 bit offered"] = any(
            c.gpu_layers is not None and c.params_total >= 30e9 and c.params_active < c.params_total
            and not c.quant.startswith(("IQ1", "IQ2", "Q2", "IQ3", "Q3")) for c in [*feasible, *([alt] if alt else [])])
        checks["no IQ2 in top 3"] = not any(c.quant.startswith("IQ2") for c in ranked[:3])
    if qid in ("E", "E'"):
        checks[">=30 tok/s or vLLM/SGLang"] = top.engine in ("vllm", "sglang") or (tok_s or 0) >= 30
    if qid == "F":
        checks["speed known"] = tok_s is not None
    if qid == "I":
        same = [c for c in feasible if c.model == top.model and c.quant == top.quant]
        checks[">= 8K per request"] = top.context_tokens >= 8192
        checks["best goodput of its quality"] = all((c.goodput_per_s or 0) <= (top.goodput_per_s or 0) + 1e-9
                                                   for c in same)
    out.update(top=top, tok_s=tok_s, checks=checks)
    return out


def questions_main(markdown: bool) -> int:
    catalog = Catalog(base_catalog_path())
    head = ("q", "machine", "top pick", "GiB / budget", "TTFT", "tok/s", "goodput/s", "checks")
    lines, failed, done = [], 0, []
    for qid, gpu, vram, wl, lat, _want in QUESTIONS:
        r = question(catalog, qid, gpu, vram, wl, lat)
        done.append(r)
        machine = f"{gpu}{' ' + vram + ' GiB' if vram else ''} {wl}{' ' + lat if lat else ''}"
        if "top" not in r:
            lines.append((qid, machine, "nothing fits", "", "", "", "", "FAIL"))
            failed += 1
            continue
        t = r["top"]
        ok = all(r["checks"].values())
        failed += not ok
        lines.append((qid, machine, f"{t.model} {t.quant} {t.engine}{' ngl ' + str(t.gpu_layers) if t.gpu_layers else ''}"
                      f" b{t.batch} {t.context_tokens // 1024}K",
                      f"{t.total_vram_bytes / 1024**3:.1f} / {r['budget_gib']:.1f}",
                      f"{t.ttft_ms:.0f} ms" if t.ttft_ms else "?", f"{r['tok_s']:.0f}" if r["tok_s"] else "?",
                      f"{t.goodput_per_s:.2f}" if t.goodput_per_s else "",
                      "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in r["checks"].items())))
    alts = [(r["id"], r["alt"]) for r in done if r.get("alt") is not None]
    names = []
    for name, vram in TYPED_NAMES:
        try:
            hw, notes = planning_hardware(name, vram=vram)
            note = next((n for n in notes if "variants" in n), "")
            names.append((name + (f" --vram {vram}" if vram else ""), hw.name, "slowest of variants" if note else ""))
        except UserError as e:
            names.append((name, "refused", str(e)[:90]))
    for table, h in ((lines, head), (names, ("typed name", "resolves to", "note"))):
        if markdown:
            print("| " + " | ".join(h) + " |")
            print("|" + "---|" * len(h))
            for ln in table:
                print("| " + " | ".join(ln) + " |")
        else:
            widths = [max(len(str(x[i])) for x in [h, *table]) for i in range(len(h))]
            for ln in [h, *table]:
                print("  ".join(str(v).ljust(w) for v, w in zip(ln, widths)))
        print()
    for qid, a in alts:
        print(f"{qid}: over the limit, shown beside the answer: {a.model} {a.quant} {a.engine} ngl {a.gpu_layers}, "
              f"TTFT {a.ttft_ms:.0f} ms, {1000.0 / a.tpot_ms:.0f} tok/s" if a.tpot_ms else "")
    resolved = sum(n[1] != "refused" for n in names)
    print(f"{len(QUESTIONS) - failed}/{len(QUESTIONS)} questions pass their checks; {resolved}/{len(names)} names "
          f"resolve (Jetson Orin lists its choices by design)")
    return 0 if failed == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normalization", default="value", choices=["value", "minmax", "zscore"])
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/benchmarks.md)")
    ap.add_argument("--questions", action="store_true", help="issue 24's nine questions and the 20 typed names")
    args = ap.parse_args()
    if args.questions:
        return questions_main(args.markdown)
    catalog = Catalog(base_catalog_path())  # the shipped catalog alone (no user overlay)
    t0 = time.perf_counter()
    rows = [scenario(catalog, *s, args.normalization) for s in SCENARIOS]
    took = time.perf_counter() - t0
    head = ("scenario", "top pick", "kind", "memory", "eff. acc", "best feasible", "regret", "limits")
    lines = []
    for r in rows:
        if r["top"] is None:
            lines.append((r["label"], "nothing fits", "", "", "", "", "", ""))
            continue
        lines.append((r["label"], r["top"], r["kind"], f"{r['share']:.0%}" + ("" if r["memory_ok"] else " (!)"),
                      f"{r['acc']:.1f}", f"{r['best']} {r['best_acc']:.1f}", f"{r['regret']:.1f}",
                      ("yes" if r["limits"] else "NO") + (" (latency unknown)" if r["unknown_latency"] else "")))
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for ln in lines:
            print("| " + " | ".join(ln) + " |")
    else:
        widths = [max(len(str(x[i])) for x in [head, *lines]) for i in range(len(head))]
        for ln in [head, *lines]:
            print("  ".join(str(v).ljust(w) for v, w in zip(ln, widths)))
    done = [r for r in rows if r["top"] is not None]
    within = sum(r["regret"] <= REGRET_TARGET_POINTS for r in done)
    mem_ok = sum(r["memory_ok"] for r in done)
    base = sum(r["kind"] == "base" for r in done)
    print(f"\n{len(rows)} scenarios ({args.normalization}), {took:.1f} s: regret <= {REGRET_TARGET_POINTS:g} points in "
          f"{within}/{len(done)} ({within / max(len(done), 1):.0%}; target >= {REGRET_SHARE_TARGET:.0%}); memory rule "
          f"met in {mem_ok}/{len(done)} (target all); base checkpoints on top: {base}; limits met: "
          f"{sum(r['limits'] for r in done)}/{len(done)}")
    ok = within >= REGRET_SHARE_TARGET * len(done) and mem_ok == len(done)
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
