"""Golden predictions: the figures a fixed set of queries print with `--json`, recorded once and compared ever after.

A changed figure fails tests/e2e/test_golden.py unless the estimate formula, calibration or score version was bumped
(recommender.versions; then the file is re-recorded on purpose):

    .venv/bin/python tests/golden.py record      # writes tests/data/golden-predictions.json

The queries run the real command line in a child process, on the shipped catalog, with no user overlay and no read
cache. ``figures`` flattens one JSON answer into {candidate key: {figure: [value, provenance]}} so that the recorded
file does not depend on the JSON layout, only on the numbers and where they came from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "data" / "golden-predictions.json"
SIGNIFICANT = 10  # digits kept of each float (the golden figures must be identical, not merely close)

QUERIES: dict[str, list[str]] = {
    "rtx4090-chat": ["recommend", "--gpu", "RTX 4090", "--vram", "24", "--max-latency", "800ms", "--per-model", "0",
                     "--top", "60", "--json"],
    "h200-long-doc": ["recommend", "--gpu", "H200", "--workload", "long-doc", "--per-model", "0", "--top", "60",
                      "--json"],
    "rtx3090-serve-tpot-zscore": ["recommend", "--gpu", "RTX 3090", "--workload", "serve", "--latency-metric", "tpot",
                                  "--max-latency", "60ms", "--normalization", "zscore", "--per-model", "0",
                                  "--top", "60", "--json"],
    "m2-max-code": ["recommend", "--gpu", "M2 Max 96GB", "--workload", "code", "--per-model", "0", "--top", "60",
                    "--json"],
    "a100-weights": ["recommend", "--gpu", "A100 80GB SXM4", "--weights", "latency=0.5,zh=0.5", "--missing", "mean",
                     "--per-model", "0", "--top", "60", "--json"],
    "estimate-4090-32k": ["estimate", "qwen2.5-7b", "--quant", "Q4_K_M", "--context", "32K", "--gpu", "RTX 4090",
                          "--json"],
    "estimate-h200-measured": ["estimate", "Qwen/Qwen3-8B", "--quant", "Q4_K_M", "--context", "4096", "--gpu", "H200",
                               "--prompt-tokens", "512", "--output-tokens", "128", "--json"],
    "estimate-offload": ["estimate", "Qwen/Qwen2.5-32B", "--quant", "Q4_K_M", "--context", "8K", "--gpu", "RTX 4070",
                         "--gpu-layers", "30", "--json"],
    "estimate-vllm-awq": ["estimate", "Qwen/Qwen2.5-14B", "--quant", "AWQ-4bit", "--engine", "vllm", "--context",
                          "16K", "--batch", "8", "--gpu", "L40S", "--json"],
}


def _num(v):
    if isinstance(v, float):
        return float(f"{v:.{SIGNIFICANT}g}")
    return v


PERF_FIGURES = ("weights_bytes", "kv_cache_bytes", "overhead_bytes", "total_vram_bytes", "ttft_ms", "tpot_ms",
                "e2e_ms", "decode_tokens_per_s", "throughput_tokens_per_s")
QUALITY_FIGURES = {"zh": "zh_accuracy", "en": "en_accuracy", "ppl": "ppl_ratio"}
TERMS = ("weights_gpu_bytes", "host_weights_bytes", "kv_bytes_per_token", "compute_buffer_bytes",
         "runtime_overhead_bytes", "decode_bytes_per_step", "prefill_flops")


def _flat_figures(c: dict) -> dict:
    """The figures of a candidate in the flat layout of schema 0 (before records carried Figures)."""
    figs = {n: {"value": c[n], "provenance": c["provenance"][n],  # an interval belongs to a calibrated figure
                "interval": c.get("intervals", {}).get(n) if c["provenance"][n] == "calibrated" else None}
            for n in PERF_FIGURES}
    for k, n in QUALITY_FIGURES.items():
        if "quality" in c:
            figs[n] = {"value": c["quality"][k]["value"], "provenance": c["quality"][k]["provenance"]}
    for n in TERMS:
        figs[n] = {"value": c[n], "provenance": "estimated"}
    return figs


def figures(answer: dict) -> dict[str, dict]:
    """{candidate key: {figure name: [value, provenance, interval]}} of one `--json` answer (recommend or estimate)."""
    rows = answer["candidates"] + [dict(c, _excluded=True) for c in answer.get("excluded", [])] \
        if "candidates" in answer else [answer]
    out: dict[str, dict] = {}
    for c in rows:
        key = "|".join(str(c.get(k)) for k in ("model", "quant", "engine", "batch", "context_tokens", "kv_dtype",
                                                "gpu_layers")) + ("|excluded" if c.get("_excluded") else "")
        figs = ({**c["figures"], **{n: {"value": c["terms"][n], "provenance": "estimated"} for n in TERMS}}
                if "figures" in c else _flat_figures(c))
        rec: dict[str, list] = {}
        for name, f in figs.items():
            rec[name] = [_num(f["value"]), f["provenance"], [_num(x) for x in f.get("interval") or []]]
        for k in ("score", "rank"):
            if k in c:
                rec[k] = [_num(c[k])]
        if "score_parts" in c:
            rec["score_parts"] = [{k: _num(v) for k, v in sorted(c["score_parts"].items())}]
        if c.get("excluded") and not c.get("_excluded"):
            rec["excluded"] = [sorted(c["excluded"])]
        out[key] = rec
    return out


def run_query(args: list[str], cwd: Path = ROOT) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(Path(tmp) / "user.duckdb"),
               "RECOMMENDER_CATALOG_CACHE": "off", "RECOMMENDER_CACHE": tmp, "PYTHONPATH": str(cwd)}
        env.pop("RECOMMENDER_CATALOG", None)
        proc = subprocess.run([sys.executable, "-m", "recommender", *args], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=300)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{args}: exit {proc.returncode}\n{proc.stderr}")
    return json.loads(proc.stdout)


def versions(cwd: Path = ROOT) -> dict[str, str]:
    code = ("import json\ntry:\n from recommender.versions import versions\nexcept ImportError:\n"
            " try:\n  from recommender.predict import versions\n except ImportError:  # schema 0\n"
            "  from recommender.constants import ESTIMATE_FORMULA_VERSION as f\n"
            "  from recommender.calibration import CALIBRATION_VERSION as c\n"
            "  versions = lambda: {'formula': f, 'calibration': c}\nprint(json.dumps(versions()))")
    out = subprocess.run([sys.executable, "-c", code],
                         capture_output=True, text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)},
                         check=True)
    return json.loads(out.stdout)


def record(cwd: Path = ROOT) -> dict:
    data = {"versions": versions(cwd), "queries": {}}
    for name, args in QUERIES.items():
        data["queries"][name] = {"args": args, "figures": figures(run_query(args, cwd))}
    return data


if __name__ == "__main__":
    if sys.argv[1:] != ["record"]:
        sys.exit("usage: tests/golden.py record")
    GOLDEN.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
