"""Measure a matrix of catalog architectures x quantizations x shapes with llama.cpp on this machine's GPU.

Each model is a synthetic (random-weight) GGUF with the exact architecture and per-tensor quantization types of the
catalog model (recommender/probes/synthetic.py): speed and memory do not depend on weight values (MoE routing aside).
Every probe runs in its own child process (evaluators/runner.py); a crash, OOM or timeout becomes a failed row.
Rows are appended to --out as they finish (one Measurement JSON per line), so a run cut short keeps what it measured;
a time budget stops starting new probes in time. Rerunning skips rows already in --out.

Reproduces the H200 rows in sources/measurements/ (see docs/benchmarks.md for the exact command):

    python bench/gpu_matrix.py --out $OUT/h200.jsonl --budget 540
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from recommender.core.fuzzy import resolve
from recommender.core.paths import SOURCES_DIR
from evaluators.base import LoadSettings, RequestShape
from evaluators.runner import ProbeJob, run_probe
from recommender.hardware.host import probe_host
from recommender.catalog.build import load_models
from recommender.probes.perf import measurement_from_result, ProbeTarget

MODELS = ["Qwen/Qwen3-0.6B", "Qwen/Qwen2.5-1.5B", "meta-llama/Llama-3.2-3B", "Qwen/Qwen2.5-7B",
          "meta-llama/Llama-3.1-8B", "google/gemma-2-9b-it", "Qwen/Qwen2.5-14B", "Qwen/Qwen3-30B-A3B",
          "Qwen/Qwen2.5-32B"]
QUANTS = ["Q4_K_M", "Q8_0", "F16"]
# (context per sequence, batch, prompt tokens, output tokens)
SHAPES = [(4096, 1, 512, 64), (4096, 4, 512, 64), (32768, 1, 8192, 64)]


def done_keys(path: Path) -> set[tuple]:
    keys = set()
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                m = json.loads(line)
                keys.add((m["engine"], m["model_id"], m["quant"], m["context_tokens"], m["batch"], m["prompt_tokens"],
                          m.get("kv_dtype", "f16")))
    return keys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--quants", nargs="*", default=None, help=f"default: {QUANTS} (llama.cpp), BF16 (transformers)")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds; no new probe starts after this")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/synthetic"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=240.0, help="per probe")
    ap.add_argument("--engine", default="llama.cpp", choices=["llama.cpp", "transformers"])
    ap.add_argument("--output-tokens", type=int, default=None, help="override the shapes' output length")
    ap.add_argument("--skip-from", type=Path, nargs="*", default=[], help="row files whose rows are already done")
    ap.add_argument("--free-disk-margin", type=float, default=4e9, help="bytes kept free when building a model")
    ap.add_argument("--shapes", nargs="*", default=None,
                    help="CTX:BATCH:PROMPT:OUTPUT each (default: " + " ".join(":".join(map(str, s)) for s in SHAPES) + ")")
    ap.add_argument("--kv-dtype", default="f16", help="llama.cpp KV cache dtype (f16, q8_0, q4_0)")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split(":")) for s in args.shapes] if args.shapes else SHAPES
    from recommender.probes.synthetic import build_synthetic_gguf

    args.quants = args.quants or (QUANTS if args.engine == "llama.cpp" else ["BF16"])
    from recommender.model.quant import weights_bytes

    t_start = time.perf_counter()
    specs = {m.id: m for m in load_models(SOURCES_DIR)}  # the catalog's models, straight from sources/ (no DuckDB)
    host = probe_host()
    print(f"host: {host.gpu_status}; {host.cpu.model}", file=sys.stderr)
    done = done_keys(args.out).union(*(done_keys(p) for p in args.skip_from))
    args.cache.mkdir(parents=True, exist_ok=True)
    for mid in args.models:
        spec = specs[resolve(mid, specs, "model")]
        for quant in args.quants:
            left = args.budget - (time.perf_counter() - t_start)
            todo = [s for s in shapes if (args.engine, spec.id, quant, s[0], s[1], s[2], args.kv_dtype) not in done]
            if not todo:
                continue
            if left < 30:
                print("time budget spent", file=sys.stderr)
                return
            if args.engine == "transformers":  # random weights built on the GPU by the engine itself
                from recommender.probes.perf import synthetic_transformers_target

                path = None
                target = synthetic_transformers_target(spec, quant)
            else:
                need = weights_bytes(spec, quant)
                free = shutil.disk_usage(args.cache).free
                if need + args.free_disk_margin > free:
                    print(f"skip {spec.id} {quant}: needs {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free",
                          file=sys.stderr)
                    continue
                path = args.cache / f"{spec.name}-{quant}.gguf"
                t0 = time.perf_counter()
                build_synthetic_gguf(spec, quant, path)  # synthetic vocab: probes feed token ids, text is never used
                print(f"built {path.name} ({path.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr)
                target = ProbeTarget(path, spec.id, quant, synthetic=True, spec=spec)
            for ctx, batch, prompt, out in todo:
                out = args.output_tokens or out
                if args.budget - (time.perf_counter() - t_start) < 20:
                    print("time budget spent", file=sys.stderr)
                    break
                job = ProbeJob(engine=args.engine,
                               load=LoadSettings(model_path=str(target.path), context_tokens=ctx, batch=batch,
                                                 extra=target.extra,
                                                 kv_dtype=args.kv_dtype if args.engine == "llama.cpp" else quant.lower()),
                               shape=RequestShape(prompt_tokens=prompt, output_tokens=out, batch=batch),
                               repeats=args.repeats)
                res = run_probe(job, timeout_s=args.timeout)
                row = measurement_from_result(target, job, res, host)
                with args.out.open("a") as f:
                    f.write(row.model_dump_json() + "\n")
                print(f"{spec.id} {quant} ctx {ctx} b{batch} p{prompt}: {row.status} "
                      f"ttft {row.ttft_ms} tpot {row.tpot_ms} vram {row.peak_vram_bytes} "
                      f"{row.failure_reason or ''} [{time.perf_counter() - t_start:.0f} s]", file=sys.stderr)
            if path is not None:
                os.unlink(path)


if __name__ == "__main__":
    main()
