"""llama.cpp partial offload (n_gpu_layers) measured on the lent H200 host against the estimate (docs/estimates.md 6.7).

    .venv/bin/python bench/offload_check.py [--json]

The rows: sources/measurements/h200-partial-offload.csv (raw: bench/results/h200-llamabench-offload.jsonl), llama-bench (llama.cpp of llama-cpp-python 0.3.36, CUDA sm_90)
-fa 1 -p 512 -n 64 -r 2 -t 16 at four -ngl values on synthetic Qwen2.5-7B Q4_K_M (dense, 28 blocks) and Qwen3-30B-A3B
Q4_K_M (MoE: 128 experts, 8 per token, 48 blocks); made by bench/h200_offload.sh on 2026-12-01. The host's numpy copy
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
from recommender.predict.reference import partial_offload_points  # noqa: E402

def rows() -> list[dict]:
    """One dict per (model, n_gpu_layers, test): measured ms (per token for tg, per prompt for pp), predicted ms."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    out = []
    for p in partial_offload_points(specs, find_profile("H200 SXM", load_profiles())):
        spec = specs[p.row["model_id"]]
        out.append({"model": spec.id, "moe": spec.is_moe, "n_gpu_layers": int(p.row["n_gpu_layers"]),
                    "blocks_on_host": p.blocks_on_host, "test": p.row["test"],
                    "measured_ms": round(p.measured_ms, 2), "predicted_ms": round(p.predicted_ms, 2),
                    "error": round(p.predicted_ms / p.measured_ms - 1, 4),
                    "host_bytes_per_step": p.estimate.host_bytes_per_step,
                    "host_weights_bytes": p.estimate.host_weights_bytes})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
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
