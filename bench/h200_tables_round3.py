"""Tidy CSV tables from what bench/h200_round3.sh brought back (its res/ folder, unpacked).

    python3 bench/h200_tables_round3.py RES_DIR

Writes (every figure copied from a tool's output; peak GPU memory as in bench/h200_tables.py: the highest NVML sample
inside one run's window minus the lowest sample of the second before it)
  bench/results/h200-round3-{arch-kinds,long-context-kv,batched}.jsonl  the tools' lines, one {"_header"} line first
  bench/results/h200-round3-pipeline.txt        the run's log, the writer's files (synth.jsonl), events, GPU
  sources/measurements/h200-arch-kinds.csv      llama-bench on Qwen3.5-9B / Nemotron-3-Nano-30B-A3B / Qwen3.6-35B-A3B
  sources/measurements/h200-long-context-kv-2.csv  Qwen3-8B Q4_K_M x KV type x depth (h200-long-context-kv.csv layout)
  sources/measurements/h200-batched-decode-2.csv   llama-batched-bench 1-64 sequences (h200-batched-decode.csv layout)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from h200_tables import LLAMA_COMMIT, jsonl, run_record, write_csv, ROOT  # noqa: E402
from h200_tables_round4 import batched_rows  # noqa: E402

RAW = ROOT / "bench" / "results"
MEAS = ROOT / "sources" / "measurements"
WRITER = "recommender/probes/synthetic.py build_synthetic_gguf (seed 0)"
MADE_BY = "bench/h200_round3.sh on the lent H200 (2026-12-01), nothing else on the GPU; -t 2"
MODELS = {"Qwen3.5-9B": "Qwen/Qwen3.5-9B", "Nemotron-3-Nano-30B-A3B": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
          "Qwen3.6-35B-A3B": "Qwen/Qwen3.6-35B-A3B", "Qwen3-8B": "Qwen/Qwen3-8B", "Qwen2.5-7B": "Qwen/Qwen2.5-7B",
          "Llama-3.1-8B": "meta-llama/Llama-3.1-8B"}
KV_COLS = ["model_id", "quant", "kv_type", "depth_tokens", "pp512_tokens_per_s", "pp512_stddev_tokens_per_s",
           "pp512_samples_tokens_per_s", "tg128_tokens_per_s", "tg128_stddev_tokens_per_s",
           "tg128_samples_tokens_per_s", "repeats", "flash_attn", "n_gpu_layers", "n_threads", "n_batch", "n_ubatch",
           "n_ctx_tokens_pp_test", "n_ctx_tokens_tg_test", "peak_gpu_mem_over_idle_bytes_whole_sweep", "tool",
           "synthetic", "measured_at", "source"]
BATCH_COLS = ["model_id", "quant", "parallel_sequences", "prompt_tokens_each", "gen_tokens_each", "n_kv_tokens",
              "n_kv_max_tokens", "pp_seconds", "pp_tokens_per_s", "tg_seconds", "tg_tokens_per_s_all_sequences",
              "tg_tokens_per_s_per_sequence", "total_seconds", "total_tokens_per_s", "flash_attn", "is_pp_shared",
              "n_gpu_layers", "n_threads", "n_batch", "n_ubatch", "peak_gpu_mem_over_idle_bytes_whole_run", "tool",
              "synthetic", "source"]


def tool(r: dict) -> str:
    return (f"llama-bench (llama.cpp vendored in llama-cpp-python 0.3.36, {LLAMA_COMMIT}; binaries report commit "
            f"{r['build_commit']}, build {r['build_number']}; CUDA sm_90)")


def main() -> None:
    res = Path(sys.argv[1])
    gpu, events, peak = run_record(res)

    def cmd(log: Path) -> str | None:
        m = re.search(r"^# cmd: (.*)$", log.read_text(errors="replace"), re.M) if log.exists() else None
        return m.group(1) if m else None

    groups = {"arch-kinds": "bench-arch-", "long-context-kv": "bench-kv-"}
    tables = {"arch-kinds": [], "long-context-kv": []}
    for g, prefix in groups.items():
        items = [(p.stem[len("bench-"):], jsonl(p)) for p in sorted(res.glob(prefix + "*.jsonl"))]
        with (RAW / f"h200-round3-{g}.jsonl").open("w") as f:
            first = next(rows[0] for _, rows in items if rows)
            dates = sorted(r["test_time"] for _, rows in items for r in rows)
            f.write(json.dumps({"_header": {"what": g, "measured": f"{dates[0]} .. {dates[-1]}", "gpu": gpu,
                                            "tool": tool(first), "cpu_info": first.get("cpu_info"), "synthetic": True,
                                            "weights": WRITER, "made_by": MADE_BY, "items": len(items)}}) + "\n")
            for tag, rows in items:
                c = cmd(res / f"bench-{tag}.log")
                for r in rows:
                    f.write(json.dumps({"item": tag, "command": c, **r}) + "\n")
        for tag, rows in items:
            body = tag.split("-", 1)[1]                      # e.g. Qwen3.5-9B-Q4_K_M(-q8_0)
            name = next(k for k in MODELS if body.startswith(k + "-"))
            pk = peak(f"bench-{tag}")
            idx = {("pp" if r["n_gen"] == 0 else "tg", r["n_depth"]): r for r in rows}
            for d in sorted({r["n_depth"] for r in rows}):
                pp, tg = idx.get(("pp", d)), idx.get(("tg", d))
                r0 = pp or tg
                tables[g].append({
                    "model_id": MODELS[name], "quant": "Q4_K_M", "kv_type": r0["type_k"], "depth_tokens": d,
                    "pp512_tokens_per_s": pp and round(pp["avg_ts"], 2),
                    "pp512_stddev_tokens_per_s": pp and round(pp["stddev_ts"], 2),
                    "pp512_samples_tokens_per_s": pp and " ".join(f"{x:.1f}" for x in pp["samples_ts"]),
                    "tg128_tokens_per_s": tg and round(tg["avg_ts"], 2),
                    "tg128_stddev_tokens_per_s": tg and round(tg["stddev_ts"], 2),
                    "tg128_samples_tokens_per_s": tg and " ".join(f"{x:.2f}" for x in tg["samples_ts"]),
                    "repeats": len(r0["samples_ns"]), "flash_attn": r0["flash_attn"],
                    "n_gpu_layers": r0["n_gpu_layers"], "n_threads": r0["n_threads"], "n_batch": r0["n_batch"],
                    "n_ubatch": r0["n_ubatch"], "n_ctx_tokens_pp_test": d + 512, "n_ctx_tokens_tg_test": d + 128,
                    "peak_gpu_mem_over_idle_bytes_whole_sweep": pk, "tool": tool(r0), "synthetic": True,
                    "measured_at": r0["test_time"], "source": f"bench/results/h200-round3-{g}.jsonl"})
    write_csv(MEAS / "h200-arch-kinds.csv", KV_COLS, tables["arch-kinds"])
    write_csv(MEAS / "h200-long-context-kv-2.csv", KV_COLS, tables["long-context-kv"])

    out = batched_rows(res, gpu, events, peak, MODELS, MADE_BY, "h200-round3-batched.jsonl")
    write_csv(MEAS / "h200-batched-decode-2.csv", BATCH_COLS, out)

    with (RAW / "h200-round3-pipeline.txt").open("w") as f:
        f.write(f"# bench/h200_round3.sh on the lent H200 ({gpu}); host: "
                f"{(res / 'host.txt').read_text().split()[0]} cores\n## pipeline.log\n")
        f.write((res.parent / "pipeline.log").read_text() if (res.parent / "pipeline.log").exists() else "")
        f.write("## synth.jsonl (the writer's files)\n" + (res / "synth.jsonl").read_text())
        f.write("## events.jsonl (GPU item windows, epoch ms)\n" + (res / "events.jsonl").read_text())
        f.write("## build.log (tail)\n" + "\n".join((res / "build.log").read_text().splitlines()[-3:]) + "\n")


if __name__ == "__main__":
    main()
