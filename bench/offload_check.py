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
from recommender.predict.reference import (PARTIAL_OFFLOAD_ROWS, PARTIAL_OFFLOAD_ROWS_ROUND5,  # noqa: E402
                                           partial_offload_points)

def rows() -> list[dict]:
    """One dict per (model, n_gpu_layers, test): measured ms (per token for tg, per prompt for pp), predicted ms."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    out = []
    hw = find_profile("H200 SXM", load_profiles())
    for p in (p for path in (PARTIAL_OFFLOAD_ROWS, PARTIAL_OFFLOAD_ROWS_ROUND5)
              for p in partial_offload_points(specs, hw, path)):
        spec = specs[p.row["model_id"]]
        out.append({"model": spec.id, "moe": spec.is_moe, "n_gpu_layers": int(p.row["n_gpu_layers"]),
                    "blocks_on_host": p.blocks_on_host, "test": p.row["test"],
                    "measured_ms": round(p.measured_ms, 2), "predicted_ms": round(p.predicted_ms, 2),
                    "error": round(p.predicted_ms / p.measured_ms - 1, 4),
                    "host_bytes_per_step": p.estimate.host_bytes_per_step,
                    "host_weights_bytes": p.estimate.host_weights_bytes})
    return out


def expert_copy_fit() -> dict:
    """HOST_TO_GPU_EXPERT_COPY_BYTES_PER_S from the MoE pp512 rows: each row's prompt time over the all-on-GPU row,
    less its dense host bytes at HOST_TO_GPU_COPY_BYTES_PER_S, against its host-resident routed-expert bytes; least
    squares through the origin (one micro-batch per row: pp512)."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200 SXM", load_profiles())
    pts = [p for p in partial_offload_points(specs, hw) if not p.decode and specs[p.row["model_id"]].is_moe]
    full = next(p.measured_ms for p in pts if not p.blocks_on_host)
    xs, ys = [], []
    for p in pts:
        if not p.blocks_on_host:
            continue
        spec = specs[p.row["model_id"]]
        m = memory(spec, p.row["quant"], "llama.cpp", hw, context_tokens=4096, prompt_tokens=512, output_tokens=1,
                   gpu_layers=int(p.row["n_gpu_layers"]))
        expert = m.expert_bytes * (1 - m.gpu_frac)
        dense = m.host_layer_bytes - expert
        xs.append(expert)
        ys.append((p.measured_ms - full) / 1e3 - dense / C.HOST_TO_GPU_COPY_BYTES_PER_S.value)
    rate = sum(x * x for x in xs) / sum(x * y for x, y in zip(xs, ys))
    return {"rate_bytes_per_s": rate, "expert_bytes": xs, "rows": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit", action="store_true", help="fit HOST_TO_GPU_EXPERT_COPY_BYTES_PER_S from the MoE rows")
    a = ap.parse_args()
    if a.fit:
        f = expert_copy_fit()
        print(f"routed experts reach the GPU at {f['rate_bytes_per_s'] / 1e9:.2f} GB/s (least squares through the origin, "
              f"{f['rows']} MoE pp512 rows; host expert GB {', '.join(f'{x / 1e9:.2f}' for x in f['expert_bytes'])}); "
              f"constant: {C.HOST_TO_GPU_EXPERT_COPY_BYTES_PER_S.value / 1e9:.2f} GB/s")
        return
    rs = rows()
    if a.json:
        print(json.dumps(rs, indent=1))
        return
    print("| model | n_gpu_layers | blocks in host RAM | test | measured ms | predicted ms | error |")
    print("|---|---|---|---|---|---|---|")
    for r in rs:
        print(f"| {r['model']} | {r['n_gpu_layers']} | {r['blocks_on_host']} | {r['test']} | {r['measured_ms']:.1f} | "
              f"{r['predicted_ms']:.1f} | {r['error']:+.1%} |")
    for moe in (False, True):
        for test in ("tg64", "pp512"):
            errs = [abs(r["error"]) for r in rs if r["moe"] == moe and r["test"] == test and r["blocks_on_host"]]
            print(f"{'MoE' if moe else 'dense'} {test}, partial offload: median |error| {statistics.median(errs):.1%}, "
                  f"worst {max(errs):.1%} over {len(errs)} rows")


if __name__ == "__main__":
    main()
