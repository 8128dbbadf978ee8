"""Tidy CSV tables from what bench/h200_llamabench.sh brought back (its res/ folder, unpacked).

    python3 bench/h200_tables.py RES_DIR

Writes
  bench/results/h200-llamabench-<name>.jsonl  the llama-bench / llama-batched-bench lines as printed, each file
                                              opened by one header line {"_header": {...}} (command, build, GPU, date)
  sources/measurements/h200-quant-types.csv   one row per quantization type of Qwen2.5-7B (+ the writer's own files)
  sources/measurements/h200-long-context-kv.csv  one row per (model, KV cache type, depth)
  sources/measurements/h200-llamabench-vs-probe.csv  llama-bench at the shapes of shipped llama-cpp-python rows
  sources/measurements/h200-batched-decode.csv  llama-batched-bench (parallel sequences)
  bench/results/h200-quant-files.jsonl, h200-quantize-logs.txt, h200-gpumem-windows.txt  inventories, logs, samples
Every figure is copied from a tool's output; nothing is estimated. Peak GPU memory is the highest NVML
used-memory sample (every 50 ms) inside one llama-bench run's window (res/events.jsonl) minus the lowest sample of
the second before it started; for a long-context sweep that is one figure for the whole run (all depths).
"""

from __future__ import annotations

import bisect
import csv
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "bench" / "results"
MEAS = ROOT / "sources" / "measurements"
SYNTHETIC_WRITER = "evaluators/synthetic.py (seed 0)"
QUANT_ORDER = ["Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "Q4_0", "Q4_1",
               "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "IQ4_XS", "IQ3_M", "IQ3_XS", "IQ3_XXS", "IQ2_M", "IQ2_S", "IQ2_XS",
               "IQ2_XXS", "IQ1_M", "IQ1_S", "MXFP4_MOE", "BF16"]
# the sdist carries no git data, so the binaries say "unknown"; llama-cpp-python's CHANGELOG for 0.3.36 names it
LLAMA_COMMIT = "ggml-org/llama.cpp@0c1e57098 per llama-cpp-python's CHANGELOG"


def quantize_summary(log: Path) -> dict:
    """llama-quantize's own size lines and its per-tensor target types (from 'converting to X' / '(X)' / kept type)."""
    out, types = {}, {}
    if not log.exists():
        return out
    text = log.read_text(errors="replace")
    m = re.search(r"quant size\s*=\s*([\d.]+) MiB \(([\d.]+) BPW\)", text)
    if m:
        out["llama_quantize_quant_size_mib"], out["llama_quantize_bpw"] = float(m.group(1)), float(m.group(2))
    for line in text.splitlines():
        if not re.match(r"\[\s*\d+/\s*\d+\]", line):
            continue
        t = (re.search(r"converting to (\w+)", line) or re.search(r"\((\w+)\)\s*$", line)
             or re.search(r"type =\s+(\w+),", line))
        if t:
            types[t.group(1).upper()] = types.get(t.group(1).upper(), 0) + 1
    out["tensors_logged"] = sum(types.values())
    out["types_logged"] = types
    return out


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip().startswith("{")] if path.exists() else []


class GpuMem:
    def __init__(self, path: Path):
        self.t, self.v = [], []
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    self.t.append(int(parts[0]))
                    self.v.append(int(parts[1]))

    def peak_over_idle(self, start_ms: int, end_ms: int) -> int | None:
        i0, i1 = bisect.bisect_left(self.t, start_ms), bisect.bisect_right(self.t, end_ms)
        b0 = bisect.bisect_left(self.t, start_ms - 1000)
        if i1 <= i0 or i0 <= b0:
            return None
        return max(self.v[i0:i1]) - min(self.v[b0:i0])


def run_record(res: Path):
    """What a device run's res/ folder says of itself: the GPU's name (gpu.txt), its timed items (events.jsonl, by
    item) and peak(item), the GPU memory over idle while that item ran (gpumem.txt; None: no such item or samples)."""
    gpu = (res / "gpu.txt").read_text().strip()
    events = {e["item"]: e for e in jsonl(res / "events.jsonl")}
    mem = GpuMem(res / "gpumem.txt")

    def peak(item: str) -> int | None:
        e = events.get(item)
        return mem.peak_over_idle(e["start_ms"], e["end_ms"]) if e else None

    return gpu, events, peak

def main() -> None:
    res = Path(sys.argv[1])
    gpu = (res / "gpu.txt").read_text().strip() if (res / "gpu.txt").exists() else ""
    events = {e["item"]: e for e in jsonl(res / "events.jsonl")}
    mem = GpuMem(res / "gpumem.txt")
    files = {r["quant"]: r for r in jsonl(res / "quant-files.jsonl") if "quant" in r}
    synth = {(r["model_id"], r["quant"]): r for r in jsonl(res / "synth.jsonl")}
    RAW.mkdir(parents=True, exist_ok=True)

    def bench_rows(tag: str) -> list[dict]:
        return jsonl(res / f"bench-{tag}.jsonl")

    def tool(r: dict, name: str = "llama-bench") -> str:
        return (f"{name} (llama.cpp vendored in llama-cpp-python 0.3.36, {LLAMA_COMMIT}; binaries report commit "
                f"{r['build_commit']}, build {r['build_number']}; CUDA sm_90)")

    # raw files, with a header line
    groups = {"quant-types": [], "long-context-kv": [], "vs-probe": [], "batched": []}
    for p in sorted(res.glob("bench-*.jsonl")):
        tag = p.stem[len("bench-"):]
        g = ("quant-types" if tag.startswith(("quant-", "writer-", "quiet-")) else
             "long-context-kv" if tag.startswith("kv-") else "vs-probe" if tag.startswith("probe-") else None)
        if g:
            cmd = re.search(r"^# cmd: (.*)$", (res / f"bench-{tag}.log").read_text(errors="replace"), re.M) \
                if (res / f"bench-{tag}.log").exists() else None
            groups[g].append((tag, cmd.group(1) if cmd else None, jsonl(p)))
    for g, items in groups.items():
        if not items:
            continue
        with (RAW / f"h200-llamabench-{g}.jsonl").open("w") as f:
            first = next((rows[0] for _, _, rows in items if rows), {})
            dates = sorted(r["test_time"] for _, _, rows in items for r in rows)
            f.write(json.dumps({"_header": {
                "what": g, "measured": f"{dates[0]} .. {dates[-1]}" if dates else None, "gpu": gpu,
                "tool": tool(first) if first else None, "cpu_info": first.get("cpu_info"),
                "synthetic": True, "weights": SYNTHETIC_WRITER + " (F16 / Q4_K_M / Q8_0 files) and llama-quantize "
                "of the synthetic F16 file (every other type)",
                "made_by": "bench/h200_llamabench.sh on the lent H200; llama-bench pinned to cores 0-1 (-t 2) while "
                           "llama-quantize ran on cores 2-15", "items": len(items)}}) + "\n")
            for tag, cmd, rows in items:
                for r in rows:
                    f.write(json.dumps({"item": tag, "command": cmd, **r}) + "\n")
    batched = jsonl(res / "batched-Qwen2.5-7B-Q4_K_M.jsonl")
    if batched:
        with (RAW / "h200-llamabench-batched.jsonl").open("w") as f:
            e = events.get("batched-Qwen2.5-7B-Q4_K_M")
            f.write(json.dumps({"_header": {"what": "taskset -c 0,1 llama-batched-bench -m Qwen2.5-7B-Q4_K_M.gguf -ngl 99 "
                                            "-fa on -c 16384 -npp 512 -ntg 128 -npl 1,4,8,16 -t 2 --output-format jsonl "
                                            "(synthetic file, evaluators/synthetic.py seed 0)",
                                            "measured_at_epoch_ms": e and e["start_ms"], "gpu": gpu, "synthetic": True,
                                            "tool": "llama-batched-bench (llama.cpp vendored in llama-cpp-python "
                                                    "0.3.36, " + LLAMA_COMMIT + "; CUDA sm_90)",
                                            "note": "ran while llama-quantize (IQ3 types) used cores 2-15"}}) + "\n")
            for r in batched:
                f.write(json.dumps(r) + "\n")

    def split(rows: list[dict]) -> dict:
        out = {}
        for r in rows:
            key = ("pp" if r["n_gen"] == 0 else "tg", r["n_prompt"] or r["n_gen"], r["n_depth"], r["type_k"])
            out[key] = r
        return out

    def window_peak(tag: str) -> int | None:
        e = events.get(f"bench-{tag}")
        return mem.peak_over_idle(e["start_ms"], e["end_ms"]) if e else None

    # quantization types
    cols = ["model_id", "quant", "file_made_by", "file_bytes", "n_params", "bits_per_weight", "tensor_types",
            "llama_quantize_quant_size_mib", "quantize_seconds", "imatrix", "pp512_tokens_per_s",
            "pp512_stddev_tokens_per_s", "pp512_samples_tokens_per_s", "tg128_tokens_per_s", "tg128_stddev_tokens_per_s",
            "tg128_samples_tokens_per_s", "depth_tokens", "kv_type", "flash_attn", "n_gpu_layers", "n_threads",
            "n_batch", "n_ubatch", "peak_gpu_mem_over_idle_bytes", "note", "tool", "synthetic", "measured_at", "source"]
    out = []
    plan = ([(f"writer-Qwen2.5-7B-{q}", SYNTHETIC_WRITER, q) for q in ("F16", "Q4_K_M")]
            + [(f"quant-{q}", "llama-quantize of the synthetic F16", q) for q in QUANT_ORDER])
    for tag, made_by, quant in plan:
        rows = bench_rows(tag)
        is_q = tag.startswith("quant-")
        info = files.get(quant, {}) if is_q else {}
        qlog = quantize_summary(res / f"quantize-{quant}.log") if is_q else {}
        note = ""
        if is_q and not rows:
            if info.get("skipped"):
                note = "not run: the session's 30 min of device time ran out before this type's turn"
            elif (res / f"quantize-{quant}.log").exists() and "file_bytes" not in info:
                note = (f"llama-quantize did not finish: stopped at tensor {qlog.get('tensors_logged')}/339 when the "
                        "device time ran out (its log: bench/results/h200-quantize-logs.txt)")
            elif quant == "MXFP4_MOE":
                note = ("llama-quantize --dry-run only (no file written, not benched): MXFP4_MOE puts MXFP4 on MoE "
                        "expert tensors only; on a dense model every matrix becomes Q8_0, i.e. the Q8_0 file")
            else:
                continue
        elif is_q and str(info.get("imatrix")) == "1":
            note = ("with the imatrix of llama-imatrix on the synthetic F16 (random English words, 4 x 128 tokens); "
                    "an imatrix changes quantized values, not tensor types or sizes")
        elif is_q and quant == "IQ3_M":
            note = "without an imatrix (llama.cpp does not require one for IQ3_M)"
        s_ = split(rows)
        pp, tg = s_.get(("pp", 512, 0, "f16")), s_.get(("tg", 128, 0, "f16"))
        r0 = pp or tg or {}
        if is_q:
            file_bytes, n_params, bpw = info.get("file_bytes"), info.get("n_params"), info.get("bits_per_weight")
            tc = info.get("type_counts") or (qlog.get("types_logged") if quant == "MXFP4_MOE" else None)
            types = " ".join(f"{k}:{v}" for k, v in sorted(tc.items())) if tc else None
        else:
            sy = synth.get(("Qwen/Qwen2.5-7B", quant), {})
            file_bytes, n_params, types = sy.get("file_bytes"), r0.get("model_n_params"), None
            bpw = round(8 * r0["model_size"] / r0["model_n_params"], 4) if r0 else None
            note = "the writer's own file (same file as the shipped llama-cpp-python rows)"
        out.append({
            "model_id": "Qwen/Qwen2.5-7B", "quant": quant, "file_made_by": made_by, "file_bytes": file_bytes,
            "n_params": n_params, "bits_per_weight": bpw, "tensor_types": types,
            "llama_quantize_quant_size_mib": qlog.get("llama_quantize_quant_size_mib"),
            "quantize_seconds": info.get("quantize_seconds"),
            "imatrix": bool(int(info["imatrix"])) if "imatrix" in info else None,
            "pp512_tokens_per_s": pp and round(pp["avg_ts"], 2), "pp512_stddev_tokens_per_s": pp and round(pp["stddev_ts"], 2),
            "pp512_samples_tokens_per_s": pp and " ".join(f"{x:.1f}" for x in pp["samples_ts"]),
            "tg128_tokens_per_s": tg and round(tg["avg_ts"], 2), "tg128_stddev_tokens_per_s": tg and round(tg["stddev_ts"], 2),
            "tg128_samples_tokens_per_s": tg and " ".join(f"{x:.2f}" for x in tg["samples_ts"]),
            "depth_tokens": 0 if rows else None, "kv_type": "f16" if rows else None,
            "flash_attn": r0.get("flash_attn"), "n_gpu_layers": r0.get("n_gpu_layers"),
            "n_threads": r0.get("n_threads"), "n_batch": r0.get("n_batch"), "n_ubatch": r0.get("n_ubatch"),
            "peak_gpu_mem_over_idle_bytes": window_peak(tag) if rows else None, "note": note,
            "tool": tool(r0) if r0 else "llama-quantize (llama.cpp vendored in llama-cpp-python 0.3.36)",
            "synthetic": True, "measured_at": r0.get("test_time"),
            "source": "bench/results/h200-llamabench-quant-types.jsonl" if rows else "bench/results/h200-quant-files.jsonl"})
    write_csv(MEAS / "h200-quant-types.csv", cols, out)

    # long context x KV type
    cols = ["model_id", "quant", "kv_type", "depth_tokens", "pp512_tokens_per_s", "pp512_stddev_tokens_per_s",
            "pp512_samples_tokens_per_s", "tg128_tokens_per_s", "tg128_stddev_tokens_per_s",
            "tg128_samples_tokens_per_s", "repeats", "flash_attn", "n_gpu_layers", "n_threads", "n_batch", "n_ubatch",
            "n_ctx_tokens_pp_test", "n_ctx_tokens_tg_test", "peak_gpu_mem_over_idle_bytes_whole_sweep", "tool", "synthetic", "measured_at", "source"]
    out = []
    for tag, _, rows in groups["long-context-kv"]:
        name = tag[len("kv-"):].rsplit("-", 1)[0]
        model = {"Qwen2.5-7B": "Qwen/Qwen2.5-7B", "Llama-3.1-8B": "meta-llama/Llama-3.1-8B"}[name]
        peak = window_peak(tag)
        idx = {("pp" if r["n_gen"] == 0 else "tg", r["n_depth"]): i for i, r in enumerate(rows)}
        for d in sorted({r["n_depth"] for r in rows}):
            ipp, itg = idx.get(("pp", d)), idx.get(("tg", d))
            pp, tg = (rows[ipp] if ipp is not None else None), (rows[itg] if itg is not None else None)
            r0 = pp or tg
            out.append({"model_id": model, "quant": "Q4_K_M", "kv_type": r0["type_k"], "depth_tokens": d,
                        "pp512_tokens_per_s": pp and round(pp["avg_ts"], 2),
                        "pp512_stddev_tokens_per_s": pp and round(pp["stddev_ts"], 2),
                        "pp512_samples_tokens_per_s": pp and " ".join(f"{x:.1f}" for x in pp["samples_ts"]),
                        "tg128_tokens_per_s": tg and round(tg["avg_ts"], 2),
                        "tg128_stddev_tokens_per_s": tg and round(tg["stddev_ts"], 2),
                        "tg128_samples_tokens_per_s": tg and " ".join(f"{x:.2f}" for x in tg["samples_ts"]),
                        "repeats": len(r0["samples_ns"]), "flash_attn": r0["flash_attn"],
                        "n_gpu_layers": r0["n_gpu_layers"], "n_threads": r0["n_threads"], "n_batch": r0["n_batch"],
                        "n_ubatch": r0["n_ubatch"], "n_ctx_tokens_pp_test": d + 512, "n_ctx_tokens_tg_test": d + 128,
                        "peak_gpu_mem_over_idle_bytes_whole_sweep": peak, "tool": tool(r0), "synthetic": True,
                        "measured_at": r0["test_time"], "source": "bench/results/h200-llamabench-long-context-kv.jsonl"})
    write_csv(MEAS / "h200-long-context-kv.csv", cols, out)

    # llama-bench at the shapes of shipped llama-cpp-python rows
    shipped = []
    for p in sorted(MEAS.glob("h200-llamacpp-synthetic*.jsonl")):
        shipped += [dict(m, _file=p.name) for m in jsonl(p)]
    cols = ["model_id", "quant", "kv_type", "prompt_tokens", "context_tokens", "llamabench_pp_tokens_per_s",
            "llamabench_pp_stddev_tokens_per_s", "probe_prefill_tokens_per_s", "llamabench_tg64_tokens_per_s",
            "llamabench_tg64_stddev_tokens_per_s", "llamabench_tg_depth_tokens", "probe_decode_tokens_per_s",
            "probe_row_id", "probe_row_file", "tool", "synthetic", "measured_at", "source"]
    out = []
    names = {"Qwen2.5-7B": "Qwen/Qwen2.5-7B", "Llama-3.1-8B": "meta-llama/Llama-3.1-8B"}
    for tag, _, rows in groups["vs-probe"]:
        if not tag.endswith("-pp"):
            continue
        base = tag[len("probe-"):-len("-pp")]
        arch, quant = base.rsplit("-", 1) if not base.endswith("Q4_K_M") else (base[:-len("-Q4_K_M")], "Q4_K_M")
        model = names[arch]
        for kv, tg_tag in (("f16", f"probe-{base}-tg"), ("q8_0", f"probe-{base}-tg-q8kv")):
            tg_rows = split(bench_rows(tg_tag))
            if kv != "f16" and not tg_rows:
                continue
            pp_rows = split(rows)
            for prompt, ctx in ((512, 4096), (8192, 32768)):
                pp = pp_rows.get(("pp", prompt, 0, "f16")) if kv == "f16" else None
                tg = tg_rows.get(("tg", 64, prompt, kv))
                m = next((m for m in shipped if m["model_id"] == model and m["quant"] == quant and m["batch"] == 1
                          and m["prompt_tokens"] == prompt and m["context_tokens"] == ctx
                          and m.get("kv_dtype", "f16") == kv and m["status"] == "ok"), None)
                r0 = pp or tg
                if r0 is None:
                    continue
                out.append({"model_id": model, "quant": quant, "kv_type": kv, "prompt_tokens": prompt,
                            "context_tokens": ctx, "llamabench_pp_tokens_per_s": pp and round(pp["avg_ts"], 2),
                            "llamabench_pp_stddev_tokens_per_s": pp and round(pp["stddev_ts"], 2),
                            "probe_prefill_tokens_per_s": m and round(m["prefill_tokens_per_s"], 2),
                            "llamabench_tg64_tokens_per_s": tg and round(tg["avg_ts"], 2),
                            "llamabench_tg64_stddev_tokens_per_s": tg and round(tg["stddev_ts"], 2),
                            "llamabench_tg_depth_tokens": prompt,
                            "probe_decode_tokens_per_s": m and round(m["decode_tokens_per_s"], 2),
                            "probe_row_id": m and m["id"], "probe_row_file": m and m["_file"], "tool": tool(r0),
                            "synthetic": True, "measured_at": r0["test_time"],
                            "source": "bench/results/h200-llamabench-vs-probe.jsonl"})
    write_csv(MEAS / "h200-llamabench-vs-probe.csv", cols, out)

    # parallel decode (llama-batched-bench), as printed
    cols = ["model_id", "quant", "parallel_sequences", "prompt_tokens_each", "gen_tokens_each", "n_kv_tokens",
            "n_kv_max_tokens", "pp_seconds", "pp_tokens_per_s", "tg_seconds", "tg_tokens_per_s_all_sequences",
            "tg_tokens_per_s_per_sequence", "total_seconds", "total_tokens_per_s", "flash_attn", "is_pp_shared",
            "n_gpu_layers", "n_threads", "n_batch", "n_ubatch", "peak_gpu_mem_over_idle_bytes_whole_run", "tool",
            "synthetic", "source"]
    e = events.get("batched-Qwen2.5-7B-Q4_K_M")
    peak = mem.peak_over_idle(e["start_ms"], e["end_ms"]) if e else None
    out = [{"model_id": "Qwen/Qwen2.5-7B", "quant": "Q4_K_M", "parallel_sequences": r["pl"], "prompt_tokens_each": r["pp"],
            "gen_tokens_each": r["tg"], "n_kv_tokens": r["n_kv"], "n_kv_max_tokens": r["n_kv_max"],
            "pp_seconds": r["t_pp"], "pp_tokens_per_s": round(r["speed_pp"], 2), "tg_seconds": r["t_tg"],
            "tg_tokens_per_s_all_sequences": round(r["speed_tg"], 2),
            "tg_tokens_per_s_per_sequence": round(r["speed_tg"] / r["pl"], 2), "total_seconds": r["t"],
            "total_tokens_per_s": round(r["speed"], 2), "flash_attn": r["flash_attn"], "is_pp_shared": r["is_pp_shared"],
            "n_gpu_layers": r["n_gpu_layers"], "n_threads": r["n_threads"], "n_batch": r["n_batch"],
            "n_ubatch": r["n_ubatch"], "peak_gpu_mem_over_idle_bytes_whole_run": peak,
            "tool": "llama-batched-bench (llama.cpp vendored in llama-cpp-python 0.3.36, " + LLAMA_COMMIT + "; CUDA sm_90)",
            "synthetic": True, "source": "bench/results/h200-llamabench-batched.jsonl"} for r in batched]
    if out:
        write_csv(MEAS / "h200-batched-decode.csv", cols, out)

    # llama-quantize's per-tensor lines and size summaries (model-loader metadata dumps left out)
    with (RAW / "h200-quantize-logs.txt").open("w") as f:
        for q in QUANT_ORDER + ["MXFP4_MOE-dry-run"]:
            log = res / f"quantize-{q}.log"
            if not log.exists():
                continue
            f.write(f"===== llama-quantize {q} (bench/h200_llamabench.sh; synthetic Qwen2.5-7B F16 input) =====\n")
            for line in log.read_text(errors="replace").splitlines():
                if line.strip() and not line.startswith(("llama_model_loader:", "print_info:", "load:")):
                    f.write(re.sub(r"\s+", " ", line).strip() + "\n")  # padding squeezed

    # the GPU-memory samples inside (and 1 s before) each GPU item, and the items' windows
    with (RAW / "h200-gpumem-windows.txt").open("w") as f:
        f.write("# NVML used memory of the H200 (bytes) every 50 ms, bench/h200_gpumem.py, only inside GPU items "
                "(and the second before each); windows: item start_ms end_ms rc\n")
        for e in events.values():
            f.write(f"# item {e['item']} {e['start_ms']} {e['end_ms']} {e['rc']}\n")
        for t, v in zip(mem.t, mem.v):
            if any(e["start_ms"] - 1000 <= t <= e["end_ms"] for e in events.values()):
                f.write(f"{t} {v}\n")

    # quantized-file inventories and quantize logs' summaries
    with (RAW / "h200-quant-files.jsonl").open("w") as f:
        f.write(json.dumps({"_header": {"what": "llama-quantize of the synthetic Qwen2.5-7B F16 (evaluators/synthetic.py, "
                                        "seed 0) to each type; tensor inventory by bench/h200_gguf_types.py",
                                        "gpu": gpu}}) + "\n")
        for r in jsonl(res / "quant-files.jsonl"):
            f.write(json.dumps(r) + "\n")


def write_csv(path: Path, cols: list[str], rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r[k]) for k in cols})
    print(f"{path.relative_to(ROOT)}: {len(rows)} rows")


if __name__ == "__main__":
    main()
