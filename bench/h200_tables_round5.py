"""Tidy CSV tables from what bench/h200_round5.sh brought back (its res/ folder, unpacked); bench/h200_tables_round4.py
with round 5's items (batched decode and partial offload of four MoE shapes; no KV sweep).

    python3 bench/h200_tables_round5.py RES_DIR     (the raw folder: bench/results/h200-round5-raw)

Writes (every figure copied from a tool's output; peak GPU memory as in bench/h200_tables.py)
  bench/results/h200-round5-{batched,offload}.jsonl  the tools' lines, one {"_header"} line first
  bench/results/h200-round5-pipeline.txt        the writer's files (synth.jsonl), events, GPU, the gemma-4 refusal
  sources/measurements/h200-batched-decode-4.csv   llama-batched-bench 1-64 sequences: Qwen1.5-MoE-A2.7B-Chat,
                                                   DeepSeek-V2-Lite, Qwen3.6-35B-A3B, Mixtral-8x7B-v0.1, all Q4_K_M
  sources/measurements/h200-partial-offload-2.csv  llama-bench -ngl N (h200-partial-offload.csv's layout):
                                                   Qwen1.5-MoE-A2.7B-Chat (25/18/12/6), Mixtral-8x7B-v0.1 (33/24/16/8)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from h200_tables import LLAMA_COMMIT, jsonl, run_record, write_csv, ROOT  # noqa: E402
from h200_tables_round4 import BATCH_COLS, batched_rows, cmd  # noqa: E402

RAW = ROOT / "bench" / "results"
MEAS = ROOT / "sources" / "measurements"
WRITER = "recommender/probes/synthetic.py build_synthetic_gguf (seed 0)"
MADE_BY = ("bench/h200_round5.sh on the lent H200 (2026-12-02, round 4's layout with round 5's items), nothing else "
           "on the GPU; batched -t 2, offload -t 16")
MODELS = {"Qwen1.5-MoE-A2.7B-Chat": "Qwen/Qwen1.5-MoE-A2.7B-Chat", "DeepSeek-V2-Lite": "deepseek-ai/DeepSeek-V2-Lite",
          "Qwen3.6-35B-A3B": "Qwen/Qwen3.6-35B-A3B", "Mixtral-8x7B-v0.1": "mistralai/Mixtral-8x7B-v0.1"}
OFFLOAD_COLS = ["model_id", "quant", "n_gpu_layers", "test", "tokens_per_s", "stddev_tokens_per_s",
                "samples_tokens_per_s", "repeats", "flash_attn", "n_threads", "n_batch", "n_ubatch", "model_file_bytes",
                "tool", "synthetic", "measured_at", "source"]


def tool(r: dict) -> str:
    return (f"llama-bench (llama.cpp vendored in llama-cpp-python 0.3.36, {LLAMA_COMMIT}; binaries report commit "
            f"{r['build_commit']}, build {r['build_number']}; CUDA sm_90)")


def name_of(tag: str) -> str:
    return next(k for k in MODELS if tag.startswith(k + "-"))


def main() -> None:
    res = Path(sys.argv[1])
    gpu, events, peak = run_record(res)

    out = batched_rows(res, gpu, events, peak, MODELS, MADE_BY, "h200-round5-batched.jsonl")
    write_csv(MEAS / "h200-batched-decode-4.csv", BATCH_COLS, out)

    synth = {d["file"]: d for d in jsonl(res / "synth.jsonl") if "file" in d}
    off = []
    items = sorted(res.glob("offload-*.jsonl"), key=lambda p: (name_of(p.stem[len("offload-"):]),
                                                               -int(p.stem.rsplit("-", 1)[1])))
    with (RAW / "h200-round5-offload.jsonl").open("w") as f:
        lines = [(p, jsonl(p)) for p in items]
        first = next(rows[0] for _, rows in lines if rows)
        dates = sorted(r["test_time"] for _, rows in lines for r in rows)
        f.write(json.dumps({"_header": {"what": "partial offload", "measured": f"{dates[0]} .. {dates[-1]}",
                                        "gpu": gpu, "tool": tool(first), "cpu_info": first.get("cpu_info"),
                                        "synthetic": True, "weights": WRITER, "made_by": MADE_BY,
                                        "items": len(lines)}}) + "\n")
        for p, rows in lines:
            tag = p.stem[len("offload-"):]
            c = cmd(res / f"offload-{tag}.log")
            for r in rows:
                f.write(json.dumps({"item": tag, "command": c, **r}) + "\n")
                name = name_of(tag)
                file = Path(r["model_filename"]).name
                off.append({"model_id": MODELS[name], "quant": tag[len(name) + 1:].rsplit("-", 1)[0],
                            "n_gpu_layers": r["n_gpu_layers"],
                            "test": f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}",
                            "tokens_per_s": round(r["avg_ts"], 2), "stddev_tokens_per_s": round(r["stddev_ts"], 2),
                            "samples_tokens_per_s": " ".join(f"{x:.2f}" for x in r["samples_ts"]),
                            "repeats": len(r["samples_ns"]), "flash_attn": r["flash_attn"],
                            "n_threads": r["n_threads"], "n_batch": r["n_batch"], "n_ubatch": r["n_ubatch"],
                            "model_file_bytes": synth[file]["file_bytes"] if file in synth else r["model_size"],
                            "tool": tool(r), "synthetic": True, "measured_at": r["test_time"],
                            "source": "bench/results/h200-round5-offload.jsonl"})
    write_csv(MEAS / "h200-partial-offload-2.csv", OFFLOAD_COLS, off)

    with (RAW / "h200-round5-pipeline.txt").open("w") as f:
        f.write(f"# bench/h200_round5.sh on the lent H200 ({gpu}); host: "
                f"{(res / 'host.txt').read_text().split()[0]} cores\n")
        f.write("## synth.jsonl (the writer's files)\n" + (res / "synth.jsonl").read_text())
        f.write("## events.jsonl (GPU item windows, epoch ms)\n" + (res / "events.jsonl").read_text())
        f.write("## gemma-4-E4B: the vendored llama.cpp (llama-cpp-python 0.3.36) refused the file (rc 1, no rows)\n"
                + (res / "bench-gemma-4-E4B-Q4_K_M.log").read_text())
        f.write("## build.log (tail)\n" + "\n".join((res / "build.log").read_text().splitlines()[-3:]) + "\n")


if __name__ == "__main__":
    main()
