"""What a standard probe costs per engine on this machine (a report, not a test).

Runs the same small probe (SmolLM2-135M: the real Q4_1 GGUF for llama.cpp; a synthetic BF16 model with its exact
architecture for transformers and, where installed, vLLM from a saved HF folder) through the child-process runner and
prints wall time (process start, load, warm-up, repeats, unload), load-independent measuring time, and peak RSS.

    .venv/bin/python bench/probe_cost.py [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from recommender.core.paths import SOURCES_DIR
from evaluators.base import LoadSettings, RequestShape
from evaluators.runner import ProbeJob, run_probe
from recommender.probes.local_models import smollm2_gguf

SHAPE = RequestShape(prompt_tokens=128, output_tokens=32)
CONFIG = SOURCES_DIR / "configs" / "HuggingFaceTB__SmolLM2-135M-Instruct.json"


def hf_folder(tmp: Path) -> Path:
    from recommender.probes.synthetic import build_synthetic_hf_folder

    return build_synthetic_hf_folder(json.loads(CONFIG.read_text()), "bfloat16", tmp / "hf")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases = []
    gguf = smollm2_gguf()
    if gguf and importlib.util.find_spec("llama_cpp"):
        cases.append(("llama.cpp", LoadSettings(model_path=str(gguf), context_tokens=1024)))
    if importlib.util.find_spec("transformers"):
        cases.append(("transformers", LoadSettings(model_path="synthetic:SmolLM2-135M", context_tokens=1024,
                                                   extra={"hf_config": json.loads(CONFIG.read_text()),
                                                          "dtype": "bf16"})))
    tmp = Path(tempfile.mkdtemp(prefix="probe-cost-"))
    if importlib.util.find_spec("vllm") and importlib.util.find_spec("transformers"):
        cases.append(("vllm", LoadSettings(model_path=str(hf_folder(tmp)), context_tokens=1024,
                                           extra={"kv_cache_bytes": 64 * 1024**2})))
    out = []
    for engine, load in cases:
        res = run_probe(ProbeJob(engine=engine, load=load, shape=SHAPE, repeats=args.repeats), timeout_s=900)
        measuring_s = sum(r["e2e_ms"] for r in res.repeats) / 1e3 if res.repeats else None
        out.append({"engine": engine, "status": res.status, "failure_reason": res.failure_reason,
                    "wall_s": round(res.wall_s, 2), "measured_requests_s": measuring_s and round(measuring_s, 2),
                    "overhead_s": measuring_s and round(res.wall_s - measuring_s, 2),
                    "peak_rss_mib": res.peak_rss_bytes and round(res.peak_rss_bytes / 2**20),
                    "tpot_ms": res.summary.get("tpot_ms", {}).get("median")})
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"standard probe: prompt {SHAPE.prompt_tokens}, output {SHAPE.output_tokens}, warm-up + {args.repeats} "
          f"repeats, one child process per probe")
    for r in out:
        print(f"{r['engine']:13s} {r['status']:6s} wall {r['wall_s']:6.1f} s = requests {r['measured_requests_s']} s "
              f"+ start/load/warm-up {r['overhead_s']} s; peak RSS {r['peak_rss_mib']} MiB; TPOT {r['tpot_ms']} ms"
              + (f" ({r['failure_reason']})" if r["failure_reason"] else ""))


if __name__ == "__main__":
    main()
