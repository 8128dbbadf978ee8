"""llama.cpp partial offload (n_gpu_layers) measured on the lent H200 host against the estimate (docs/estimates.md 6.7).

    .venv/bin/python bench/offload_check.py [--json]

The rows: sources/measurements/h200-partial-offload.csv (raw: bench/results/h200-llamabench-offload.jsonl), llama-bench (llama.cpp of llama-cpp-python 0.3.36, CUDA sm_90)
-fa 1 -p 512 -n 64 -r 2 -t 16 at four -ngl values on synthetic Qwen2.5-7B Q4_K_M (dense, 28 blocks) and Qwen3-30B-A3B
Q4_K_M (MoE: 128 experts, 8 per token, 48 blocks); made by bench/h200_offload.sh on 2026-12-01. Round 5 (bench/h200_round5.sh, 2026-12-02) added h200-partial-offload-2.csv: the same
command on synthetic MoE Qwen1.5-MoE-A2.7B-Chat Q4_K_M (60 experts, 4 per token + 4 shared, 24 blocks: -ngl 25/18/12/6)
and Mixtral-8x7B-v0.1 Q4_K_M (8 experts, 2 per token, 32 blocks: 33/24/16/8). The host's numpy copy
bandwidth is in h200-offload-host-bandwidth.jsonl. Decode (tg64) is compared with the estimate's TPOT (a 1-token
prompt, 64 tokens out), prefill (pp512) with its TTFT for a 512-token prompt. The estimate keeps its host-RAM
assumption (HOST_MEMORY_BANDWIDTH: a dual-channel DDR5 desktop), not this server's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender.catalog.build import load_models  # noqa: E402
from recommender.core.paths import SOURCES_DIR  # noqa: E402
from recommender.hardware.profiles import find_profile, load_profiles  # noqa: E402
from recommender.predict import constants as C  # noqa: E402
from recommender.predict.analytical import memory  # noqa: E402
from recommender.predict.analytical import routed_copy_fraction  # noqa: E402
from recommender.predict.reference import PARTIAL_OFFLOAD_FILES, partial_offload_points, synthetic_routing  # noqa: E402


def points() -> list:
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200 SXM", load_profiles())
    return [p for path in PARTIAL_OFFLOAD_FILES for p in partial_offload_points(specs, hw, path)]


def rows() -> list[dict]:
    """One dict per (model, n_gpu_layers, load mode, test, instance): measured ms (per token for tg, per prompt for
    pp), predicted ms."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    out = []
    for p in points():
        spec = specs[p.row["model_id"]]
        out.append({"model": spec.id, "moe": spec.is_moe, "n_gpu_layers": int(p.row["n_gpu_layers"]),
                    "load_mode": p.row.get("load_mode") or "mmap", "instance": p.row.get("instance") or "round1-5",
                    "blocks_on_host": p.blocks_on_host, "test": p.row["test"],
                    "measured_ms": round(p.measured_ms, 2), "predicted_ms": round(p.predicted_ms, 2),
                    "error": round(p.predicted_ms / p.measured_ms - 1, 4),
                    "host_bytes_per_step": p.estimate.host_bytes_per_step,
                    "host_weights_bytes": p.estimate.host_weights_bytes})
    return out


def copy_points(load_mode: str, instances: tuple | None = None) -> list[dict]:
    """The pp512 rows with host blocks in ``load_mode``: the bytes one 512-token micro-batch copies to the GPU (the
    host blocks' dense weights plus the routed experts the file's router uses, SYNTHETIC_ROUTING) and the prompt time
    above the model's all-on-GPU pp512 row (the same instance's where it has one, else the shipped row)."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200 SXM", load_profiles())
    routes = synthetic_routing()
    pts = [p for p in points() if not p.decode]
    full: dict = {}
    for p in pts:
        if not p.blocks_on_host:
            full.setdefault((p.row["model_id"], p.row.get("instance")), p.measured_ms)
            full.setdefault((p.row["model_id"], None), p.measured_ms)
    out = []
    for p in pts:
        if not p.blocks_on_host or (p.row.get("load_mode") or "mmap") != load_mode:
            continue
        if instances is not None and p.row.get("instance") not in instances:
            continue
        spec = specs[p.row["model_id"]]
        ngl = int(p.row["n_gpu_layers"])
        m = memory(spec, p.row["quant"], "llama.cpp", hw, context_tokens=4096, prompt_tokens=512, output_tokens=1,
                   gpu_layers=ngl)
        expert = m.expert_bytes * (1 - m.gpu_frac)
        frac, _ = routed_copy_fraction(spec, spec.is_moe, 512, ngl, routes.get(spec.id) if spec.is_moe else None)
        base = full.get((spec.id, p.row.get("instance")), full[(spec.id, None)])
        out.append({"model": spec.id, "n_gpu_layers": ngl, "instance": p.row.get("instance") or "round1-5",
                    "copy_bytes": m.host_layer_bytes - expert + expert * frac, "extra_s": (p.measured_ms - base) / 1e3})
    return out


def rate_fit(pts: list[dict]) -> float:
    """bytes/s: least squares through the origin of the extra prompt time on the copied bytes."""
    return sum(p["copy_bytes"] ** 2 for p in pts) / sum(p["copy_bytes"] * p["extra_s"] for p in pts)


def copy_rate_fit(load_mode: str, instances: tuple | None = None) -> dict:
    """The copy rate of ``load_mode``'s rows (only those of ``instances`` when given), and its leave-one-model-out:
    each model's extra prompt times predicted at the rate fitted on the other models' rows (error = predicted /
    measured - 1)."""
    pts = copy_points(load_mode, instances)
    lomo = []
    for mid in sorted({p["model"] for p in pts}):
        rest = [p for p in pts if p["model"] != mid]
        if rest:
            r = rate_fit(rest)
            lomo += [(mid, p["n_gpu_layers"], p["copy_bytes"] / r / p["extra_s"] - 1) for p in pts if p["model"] == mid]
    return {"rate_bytes_per_s": rate_fit(pts), "rows": len(pts), "points": pts, "lomo": lomo}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit", action="store_true", help="fit the host-to-GPU copy rate of each load mode from the pp512 rows")
    a = ap.parse_args()
    if a.fit:
        for mode, c in (("mmap", C.HOST_TO_GPU_COPY_BYTES_PER_S), ("none", C.HOST_TO_GPU_PINNED_COPY_BYTES_PER_S)):
            f = copy_rate_fit(mode)
            print(f"load mode {mode}: host weights reach the GPU at {f['rate_bytes_per_s'] / 1e9:.2f} GB/s (least "
                  f"squares through the origin, {f['rows']} pp512 rows); constant {c.value / 1e9:.2f} GB/s")
            for p in f["points"]:
                print(f"  {p['model']} -ngl {p['n_gpu_layers']} ({p['instance']}): {p['copy_bytes'] / 1e9:.2f} GB in "
                      f"{p['extra_s'] * 1e3:.0f} ms = {p['copy_bytes'] / p['extra_s'] / 1e9:.1f} GB/s")
            if f["lomo"]:
                print("  leave-one-model-out extra-time errors: " + ", ".join(
                    f"{m.split('/')[1]} {n} {e:+.0%}" for m, n, e in f["lomo"]))
        return
    rs = rows()
    if a.json:
        print(json.dumps(rs, indent=1))
        return
    print("| model | n_gpu_layers | blocks in host RAM | load mode | instance | test | measured ms | predicted ms | "
          "error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        print(f"| {r['model']} | {r['n_gpu_layers']} | {r['blocks_on_host']} | {r['load_mode']} | {r['instance']} | "
              f"{r['test']} | {r['measured_ms']:.1f} | {r['predicted_ms']:.1f} | {r['error']:+.1%} |")
    for mode in ("mmap", "none"):
        for moe in (False, True):
            for test in ("tg64", "pp512"):
                errs = [abs(r["error"]) for r in rs if r["moe"] == moe and r["test"] == test and r["blocks_on_host"]
                        and r["load_mode"] == mode]
                if errs:
                    print(f"{mode} {'MoE' if moe else 'dense'} {test}, partial offload: median |error| "
                          f"{statistics.median(errs):.1%}, worst {max(errs):.1%}, within 20 % "
                          f"{sum(e <= 0.2 for e in errs)}/{len(errs)} rows")


if __name__ == "__main__":
    main()
