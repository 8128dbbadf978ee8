"""The H200 llama-bench / llama-batched-bench tables as Measurement rows the calibration fits (a generator).

sources/measurements/h200-long-context-kv.csv (decode at context depth 0-64K with f16 / q8_0 / q4_0 KV caches) and
h200-batched-decode.csv (1-16 parallel sequences) were measured with llama.cpp's own tools on the lent H200
(sources/measurements/README.md says how). Each figure is copied, only changed in unit:

Round 3 (bench/h200_round3.sh) added h200-long-context-kv-2.csv (Qwen3-8B), h200-arch-kinds.csv (Qwen3.5-9B,
Nemotron-3-Nano-30B-A3B, Qwen3.6-35B-A3B; same layout, f16 cache at depth 0 / 8192) and h200-batched-decode-2.csv
(1-64 sequences; Qwen2.5-7B Q4_K_M again, Llama-3.1-8B Q8_0); their row ids also hash the table's name. Held out
under cal-v2 (its features had no term for B >= 32 or the hybrid MoE layouts: with them in that fit, leave-one-model-
out on the shipped H200 decode rows went 5.1 -> 6.1 % median, 15.5 -> 18.8 % P90); cal-v3's features predicted them
held out at 4.5 % median, 12.8 % P90 (bench/h200_round3_errors.py, "before"), and they are fitted since cal-v3.
`--round3` still writes them alone to bench/results/h200-round3-rows.jsonl.

Round 4 (bench/h200_round4.sh, 2026-12-02) added h200-long-context-kv-3.csv (Llama-3.2-3B, Qwen2.5-14B) and
h200-batched-decode-3.csv (1-64 sequences: Qwen2.5-14B, Llama-3.2-3B, Qwen3-30B-A3B, Qwen3-8B, all Q4_K_M), measured
after cal-v3's features were chosen. Held out first (`--round4` writes them alone to bench/results/h200-round4-rows.jsonl;
`bench/h200_heldout_errors.py` fits on every other row and predicts them: 4.0 % median, 17.3 % P90), then fitted.

Round 5 (bench/h200_round5.sh, 2026-12-02) added h200-batched-decode-4.csv (1-64 sequences of four more MoE shapes:
Qwen1.5-MoE-A2.7B-Chat, DeepSeek-V2-Lite, Qwen3.6-35B-A3B, Mixtral-8x7B-v0.1, all Q4_K_M). Held out first (`--round5`;
cal-v3 on them: 15.1 % median, 56.5 % P90, bench/results/h200-round5-heldout.txt), then fitted (cal-v4).

* a KV row's tg128 at depth d -> one decode row: prompt_tokens = d (the context llama-bench fills before it times
  128 generated tokens), output_tokens = 128, tpot_ms = 1000 / tg128 tok/s. No TTFT (pp512 at a depth is not a
  prompt of d tokens) and no peak memory (the sweep's peak covers all its depths).
* a batched row -> one row at batch = parallel sequences: prompt 512 + 128 generated each, tpot_ms = 1000 / the
  per-sequence tok/s, ttft_ms = the prompt phase of all sequences (pp_seconds; is_pp_shared 0). Context per sequence:
  n_kv_max / sequences (llama-batched-bench's -c is the unified cache of all of them).

llama-bench decodes 1-7 % faster than the project's llama-cpp-python probe on the same files
(h200-llamabench-vs-probe.csv): these rows carry that tool offset, stated in each row's raw.tool.

    python bench/h200_csv_rows.py            # writes sources/measurements/h200-llamabench-rows.jsonl
    python bench/h200_csv_rows.py --check    # exit 1 when that file is not what the tables give
    python bench/h200_csv_rows.py --round3   # writes bench/results/h200-round3-rows.jsonl (round 3 alone)
    python bench/h200_csv_rows.py --round4   # writes bench/results/h200-round4-rows.jsonl (round 4, held out)
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEAS = ROOT / "sources" / "measurements"
OUT = MEAS / "h200-llamabench-rows.jsonl"
H200 = {"hardware_fingerprint": "b812d1ecfa6d", "hardware_name": "NVIDIA H200"}  # the shipped H200 rows' host
ENGINE_VERSION = "0.3.36"  # llama.cpp vendored in llama-cpp-python 0.3.36 (the tables' tool column)


def _id(*parts) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def _row(**kw) -> dict:
    base = {"id": "", **H200, "engine": "llama.cpp", "engine_version": ENGINE_VERSION, "model_id": "", "quant": "",
            "batch": 1, "context_tokens": 0, "prompt_tokens": 0, "output_tokens": 0, "kv_dtype": "f16",
            "gpu_layers": -1, "ttft_ms": None, "tpot_ms": None, "itl_ms_p50": None, "decode_tokens_per_s": None,
            "prefill_tokens_per_s": None, "throughput_tokens_per_s": None, "peak_vram_bytes": None,
            "peak_rss_bytes": None, "raw": {}, "status": "ok", "failure_reason": None, "synthetic": True,
            "provenance": "measured", "measured_at": ""}
    base.update(kw)
    return base


# (table, measured_at for a batched table, which has no time column): the first round's rows, then round 3's
# (bench/h200_round3.sh; sources/measurements/README.md). h200-arch-kinds.csv has the KV tables' layout.
KV_TABLES = ("h200-long-context-kv.csv", "h200-long-context-kv-2.csv", "h200-arch-kinds.csv",
             "h200-long-context-kv-3.csv", "h200-long-context-kv-4.csv")
BATCHED_TABLES = (("h200-batched-decode.csv", "2026-12-01T09:40:00Z"),  # README: taken 09:12-09:40 UTC
                  ("h200-batched-decode-2.csv", "2026-12-01T22:29:12Z"),  # bench/results/h200-round3-pipeline.txt
                  ("h200-batched-decode-3.csv", "2026-12-02T01:36:18Z"),  # bench/results/h200-round4-pipeline.txt
                  ("h200-batched-decode-4.csv", "2026-12-02T07:04:55Z"),  # bench/results/h200-round5-pipeline.txt
                  ("h200-batched-decode-5.csv", "2026-12-03T14:25:30Z"))  # bench/results/h200-round8-pipeline.txt
ROUND3 = {"h200-long-context-kv-2.csv", "h200-arch-kinds.csv", "h200-batched-decode-2.csv"}
# round 4 (bench/h200_round4.sh, 2026-12-02): measured after cal-v3's features were chosen and checked held out
# against the fit without them (docs/benchmarks.md), then fitted
ROUND4 = {"h200-long-context-kv-3.csv", "h200-batched-decode-3.csv"}
# round 5 (bench/h200_round5.sh, 2026-12-02): batched decode of four more MoE shapes, held out first
ROUND5 = {"h200-batched-decode-4.csv"}
# round 8 (bench/h200_round8.sh, 2026-12-03): six models with no H200 row before (Qwen3-14B, GLM-4.7-Flash,
# gemma-3-4b-it, Ministral-3-3B-2512, phi-4, Qwen3.5-4B): KV sweeps at 4K-32K and batched decode, held out first
ROUND8 = {"h200-long-context-kv-4.csv", "h200-batched-decode-5.csv"}
# the tables the shipped calibration fits (OUT): every round's since cal-v3
FITTED = set(KV_TABLES) | {t for t, _ in BATCHED_TABLES}
ROUND3_OUT = ROOT / "bench" / "results" / "h200-round3-rows.jsonl"  # round 3's rows alone (not loaded by the catalog)
ROUND4_OUT = ROOT / "bench" / "results" / "h200-round4-rows.jsonl"  # round 4's rows, held out (not loaded by the catalog)
ROUND5_OUT = ROOT / "bench" / "results" / "h200-round5-rows.jsonl"  # round 5's rows alone (not loaded by the catalog)
ROUND8_OUT = ROOT / "bench" / "results" / "h200-round8-rows.jsonl"  # round 8's rows alone (not loaded by the catalog)


def rows(tables: set[str] | None = None) -> list[dict]:
    """Rows of the given tables (file names; default: every table above)."""
    out = []
    for table in KV_TABLES:
        if tables is not None and table not in tables:
            continue
        if not (MEAS / table).exists():
            continue
        with open(MEAS / table, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                tg = float(r["tg128_tokens_per_s"])
                depth = int(r["depth_tokens"])
                out.append(_row(
                    id=_id("kv", *((table,) if table != KV_TABLES[0] else ()), r["model_id"], r["quant"],
                           r["kv_type"], depth), model_id=r["model_id"],
                    quant=r["quant"], kv_dtype=r["kv_type"], context_tokens=int(r["n_ctx_tokens_tg_test"]),
                    prompt_tokens=depth, output_tokens=128, tpot_ms=1000.0 / tg, decode_tokens_per_s=tg,
                    measured_at=r["measured_at"],
                    raw={"tool": r["tool"], "table": f"sources/measurements/{table}", "test": "tg128",
                         "depth_tokens": depth, "samples_tokens_per_s": r["tg128_samples_tokens_per_s"],
                         "flash_attn": int(r["flash_attn"]), "n_threads": int(r["n_threads"]), "source": r["source"]}))
    for table, when in BATCHED_TABLES:
        if tables is not None and table not in tables:
            continue
        if not (MEAS / table).exists():
            continue
        with open(MEAS / table, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                n = int(r["parallel_sequences"])
                per_seq = float(r["tg_tokens_per_s_per_sequence"])
                out.append(_row(
                    id=_id("batched", *((table,) if table != BATCHED_TABLES[0][0] else ()), r["model_id"],
                           r["quant"], n), model_id=r["model_id"], quant=r["quant"],
                    batch=n, context_tokens=int(r["n_kv_max_tokens"]) // n, prompt_tokens=int(r["prompt_tokens_each"]),
                    output_tokens=int(r["gen_tokens_each"]), ttft_ms=float(r["pp_seconds"]) * 1000.0,
                    tpot_ms=1000.0 / per_seq, decode_tokens_per_s=per_seq,
                    prefill_tokens_per_s=float(r["pp_tokens_per_s"]),
                    throughput_tokens_per_s=float(r["tg_tokens_per_s_all_sequences"]),
                    measured_at=when,
                    raw={"tool": r["tool"], "table": f"sources/measurements/{table}",
                         "flash_attn": int(r["flash_attn"]), "n_threads": int(r["n_threads"]), "source": r["source"]}))
    return out


def render(tables: set[str] | None = None) -> str:
    return "".join(json.dumps(r, sort_keys=False) + "\n" for r in rows(FITTED if tables is None else tables))


def main(argv: list[str]) -> int:
    for flag, tables, out in (("--round3", ROUND3, ROUND3_OUT), ("--round4", ROUND4, ROUND4_OUT),
                              ("--round5", ROUND5, ROUND5_OUT), ("--round8", ROUND8, ROUND8_OUT)):
        if flag in argv:  # one round's rows alone (bench/h200_round3_errors.py reads the tables directly)
            text = render(tables)
            out.write_text(text, encoding="utf-8")
            print(f"wrote {out.relative_to(ROOT)} ({text.count(chr(10))} rows)", file=sys.stderr)
            return 0
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python bench/h200_csv_rows.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({text.count(chr(10))} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
