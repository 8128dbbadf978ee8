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
import csv
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender.catalog.build import load_models  # noqa: E402
from recommender.core.paths import SOURCES_DIR  # noqa: E402
from recommender.hardware.profiles import find_profile, load_profiles  # noqa: E402
from recommender.predict.analytical import estimate  # noqa: E402

ROWS = ROOT / "sources" / "measurements" / "h200-partial-offload.csv"


def rows() -> list[dict]:
    """One dict per (model, n_gpu_layers, test): measured ms (per token for tg, per prompt for pp), predicted ms."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200 SXM", load_profiles())
    out = []
    with ROWS.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            spec = specs[r["model_id"]]
            ngl = int(r["n_gpu_layers"])
            g = ngl if ngl <= spec.num_layers else None  # 29 / 49: every layer on the GPU
            decode = r["test"].startswith("tg")
            n = int(r["test"][2:])
            est = estimate(spec, r["quant"], "llama.cpp", hw, context_tokens=4096, prompt_tokens=1 if decode else n,
                           output_tokens=n if decode else 1, gpu_layers=g)
            ts = float(r["tokens_per_s"])
            measured = 1e3 / ts if decode else n / ts * 1e3
            predicted = est.tpot_ms if decode else est.ttft_ms
            out.append({"model": r["model_id"], "moe": spec.is_moe, "n_gpu_layers": ngl,
                        "blocks_on_host": 0 if g is None else spec.num_layers - (g - 1), "test": r["test"],
                        "measured_ms": round(measured, 2), "predicted_ms": round(predicted, 2),
                        "error": round(predicted / measured - 1, 4), "host_bytes_per_step": est.host_bytes_per_step,
                        "host_weights_bytes": est.host_weights_bytes})
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
