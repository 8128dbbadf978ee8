"""Partial-offload rows with their llama.cpp load mode (issue 25): llama-bench jsonl lines (-lm mmap / none) into
sources/measurements/h200-partial-offload-3.csv (h200-partial-offload.csv's layout plus `load_mode` and `instance`:
rows of one device call share an instance, so their mmap / none pairs compare on the same host).

    python3 bench/h200_tables_loadmode.py INSTANCE=FILE [INSTANCE=FILE ...]

FILE: a llama-bench -o jsonl output, or a text file whose lines starting with "{" are (bench/results/
h200-round6-offload-loadmode.txt). Every figure is copied from the tool's line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from h200_tables import LLAMA_COMMIT, ROOT, write_csv  # noqa: E402

MODELS = {"Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B", "Qwen2.5-7B": "Qwen/Qwen2.5-7B",
          "Mixtral-8x7B-v0.1": "mistralai/Mixtral-8x7B-v0.1", "Qwen1.5-MoE-A2.7B-Chat": "Qwen/Qwen1.5-MoE-A2.7B-Chat"}
COLS = ["model_id", "quant", "n_gpu_layers", "load_mode", "test", "tokens_per_s", "stddev_tokens_per_s",
        "samples_tokens_per_s", "repeats", "flash_attn", "n_threads", "n_batch", "n_ubatch", "model_file_bytes",
        "tool", "synthetic", "instance", "measured_at", "source"]


def main() -> None:
    out = []
    for arg in sys.argv[1:]:
        inst, path = arg.split("=", 1)
        for line in Path(path).read_text().splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            stem = Path(r["model_filename"]).name.split(".Q4_K_M")[0]
            test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
            out.append({"model_id": MODELS[stem], "quant": "Q4_K_M", "n_gpu_layers": r["n_gpu_layers"],
                        "load_mode": r["load_mode"], "test": test, "tokens_per_s": round(r["avg_ts"], 2),
                        "stddev_tokens_per_s": round(r["stddev_ts"], 2),
                        "samples_tokens_per_s": " ".join(f"{x:.2f}" for x in r["samples_ts"]),
                        "repeats": len(r["samples_ts"]), "flash_attn": r["flash_attn"], "n_threads": r["n_threads"],
                        "n_batch": r["n_batch"], "n_ubatch": r["n_ubatch"], "model_file_bytes": r["model_size"],
                        "tool": (f"llama-bench (llama.cpp vendored in llama-cpp-python 0.3.36, {LLAMA_COMMIT}; "
                                 f"binaries report commit {r['build_commit']}, build {r['build_number']}; CUDA sm_90)"),
                        "synthetic": True, "instance": inst, "measured_at": r["test_time"],
                        "source": str(Path(path).resolve().relative_to(ROOT))})
    write_csv(ROOT / "sources" / "measurements" / "h200-partial-offload-3.csv", COLS, out)


if __name__ == "__main__":
    main()
