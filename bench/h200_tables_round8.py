"""Tidy CSV tables from what bench/h200_round8.sh brought back (its res/ folder, two device calls on one warm
machine); bench/h200_tables_round4.py's layout with round 8's models.

    python3 bench/h200_tables_round8.py RES_DIR     (the raw folder: bench/results/h200-round8-raw)

Writes (every figure copied from a tool's output; peak GPU memory as in bench/h200_tables.py)
  bench/results/h200-round8-{long-context-kv,batched}.jsonl  the tools' lines, one {"_header"} line first
  bench/results/h200-round8-pipeline.txt        the run's log, the writer's files (synth.jsonl), events, GPU
  sources/measurements/h200-long-context-kv-4.csv  Qwen3-14B, gemma-3-4b-it, Ministral-3-3B-2512, phi-4, Qwen3.5-4B
                                                   (f16 / q8_0 / q4_0 caches) and GLM-4.7-Flash (f16) x depth
                                                   4096 / 16384 / 32768, tg128 only (llama-bench -p 0)
  sources/measurements/h200-batched-decode-5.csv   llama-batched-bench 1-64 sequences of the same six, all Q4_K_M
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from h200_tables import jsonl, run_record, write_csv, ROOT  # noqa: E402
from h200_tables_round4 import BATCH_COLS, KV_COLS, batched_rows, cmd, tool  # noqa: E402

RAW = ROOT / "bench" / "results"
MEAS = ROOT / "sources" / "measurements"
WRITER = "recommender/probes/synthetic.py build_synthetic_gguf (seed 0)"
MADE_BY = ("bench/h200_round8.sh on the lent H200 (2026-12-03, two calls on one machine instance: the second reused "
           "the first's build and ran the items the first deferred), nothing else on the GPU; -t 2")
MODELS = {"Qwen3-14B": "Qwen/Qwen3-14B", "GLM-4.7-Flash": "zai-org/GLM-4.7-Flash",
          "gemma-3-4b-it": "google/gemma-3-4b-it", "Ministral-3-3B-2512": "mistralai/Ministral-3-3B-2512",
          "phi-4": "microsoft/phi-4", "Qwen3.5-4B": "Qwen/Qwen3.5-4B"}


def main() -> None:
    res = Path(sys.argv[1])
    gpu, events, peak = run_record(res)

    items = [(p.stem[len("bench-"):], jsonl(p)) for p in sorted(res.glob("bench-kv-*.jsonl"))]
    kv = []
    with (RAW / "h200-round8-long-context-kv.jsonl").open("w") as f:
        first = next(rows[0] for _, rows in items if rows)
        dates = sorted(r["test_time"] for _, rows in items for r in rows)
        f.write(json.dumps({"_header": {"what": "long-context-kv", "measured": f"{dates[0]} .. {dates[-1]}",
                                        "gpu": gpu, "tool": tool(first), "cpu_info": first.get("cpu_info"),
                                        "synthetic": True, "weights": WRITER, "made_by": MADE_BY,
                                        "items": len(items)}}) + "\n")
        for tag, rows in items:
            c = cmd(res / f"bench-{tag}.log")
            for r in rows:
                f.write(json.dumps({"item": tag, "command": c, **r}) + "\n")
    for tag, rows in items:
        body = tag.split("-", 1)[1]  # e.g. Qwen3-14B-Q4_K_M-q8_0
        name = next(k for k in MODELS if body.startswith(k + "-"))
        pk = peak(f"bench-{tag}")
        for r in sorted(rows, key=lambda r: r["n_depth"]):
            assert r["n_gen"] == 128 and r["n_prompt"] == 0, tag
            d = r["n_depth"]
            kv.append({
                "model_id": MODELS[name], "quant": "Q4_K_M", "kv_type": r["type_k"], "depth_tokens": d,
                "pp512_tokens_per_s": None, "pp512_stddev_tokens_per_s": None, "pp512_samples_tokens_per_s": None,
                "tg128_tokens_per_s": round(r["avg_ts"], 2), "tg128_stddev_tokens_per_s": round(r["stddev_ts"], 2),
                "tg128_samples_tokens_per_s": " ".join(f"{x:.2f}" for x in r["samples_ts"]),
                "repeats": len(r["samples_ns"]), "flash_attn": r["flash_attn"], "n_gpu_layers": r["n_gpu_layers"],
                "n_threads": r["n_threads"], "n_batch": r["n_batch"], "n_ubatch": r["n_ubatch"],
                "n_ctx_tokens_pp_test": None, "n_ctx_tokens_tg_test": d + 128,
                "peak_gpu_mem_over_idle_bytes_whole_sweep": pk, "tool": tool(r), "synthetic": True,
                "measured_at": r["test_time"], "source": "bench/results/h200-round8-long-context-kv.jsonl"})
    write_csv(MEAS / "h200-long-context-kv-4.csv", KV_COLS, kv)

    out = batched_rows(res, gpu, events, peak, MODELS, MADE_BY, "h200-round8-batched.jsonl")
    write_csv(MEAS / "h200-batched-decode-5.csv", BATCH_COLS, out)

    with (RAW / "h200-round8-pipeline.txt").open("w") as f:
        f.write(f"# bench/h200_round8.sh on the lent H200 ({gpu}); host: "
                f"{(res / 'host.txt').read_text().split()[0]} cores\n## run.log (both calls)\n")
        f.write((res / "run.log").read_text())
        f.write("## synth.jsonl (the writer's files)\n" + (res / "synth.jsonl").read_text())
        f.write("## events.jsonl (GPU item windows, epoch ms)\n" + (res / "events.jsonl").read_text())
        f.write("## build.log (tail)\n" + "\n".join((res / "build.log").read_text().splitlines()[-3:]) + "\n")


if __name__ == "__main__":
    main()
